"""TensorFlow's own GPU and memory tests, ported to vram.config (issue 17), on simulated GPUs.

Sources (TensorFlow's, read for this port; the code here is rewritten, the assertions are theirs):

- tensorflow/python/framework/config_test.py, class DeviceTest: the device-listing, visibility,
  growth, logical (virtual) device, get_memory_info / get_memory_usage / reset_memory_stats and
  get_device_details tests, as of TensorFlow 2.15 and later; testGetMemoryUsageAmbiguousDevice from
  2.4/2.5, where it last appeared.
- tensorflow/python/eager/context_test.py, class ContextTest: the memory-info tests (2.15 and later;
  the ambiguous-device one from 2.4/2.5, where it was written against get_total_memory_usage).
- What the tests do not assert but TensorFlow's code does (class TensorFlowRulesTest): the
  implementation in tensorflow/python/eager/context.py (Context.set_visible_devices,
  set_logical_device_configuration, get_device_details, list_logical_devices) and the device-string
  matching of tensorflow/python/tfe_wrapper.cc (GetMatchedDevice, under TFE_GetMemoryInfo and
  TFE_ResetMemoryStats), whose messages are asserted word for word.

TensorFlow runs ops on tensors; vram has none, so a tensor becomes a vram.malloc of its size (a
float32 scalar: 4 bytes; zeros((1000, 1000)): 4 * 1000 * 1000) and deleting it a vram.free, and an
op placed on a device becomes memory asked of it. Those substitutions are listed in ADAPTED. Where
vram deliberately behaves otherwise than TensorFlow (no CPU devices; growth may differ between
cards and combines with logical devices; no experimental_priority / experimental_device_ordinal;
no cluster), the test says so in a comment, DELIBERATE names it, and it checks vram's documented
behaviour (python/vram/config.py's docstring) instead.

TestArgumentChecks holds vram's own argument checks that TensorFlow's and Python's conventions imply:
nothing wraps through ctypes (ValueError for a value out of range), a wrong type is a TypeError.

Every test runs in its own forked process (as test_config.py's): libvram's configuration survives
vram.shutdown() and freezes at the start, as TensorFlow's does per process (its tests reset the
eager context with @reset_eager instead).

Run: PYTHONPATH=python python3 python/tests/test_tf_port.py -v
 (or with the others: PYTHONPATH=python VRAM_LIBRARY=build/libvram.so python3 -m unittest discover -s python/tests -v)
"""
import contextlib
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import vram  # noqa: E402
from vram import config  # noqa: E402
from isolated import IsolatedTestCase  # noqa: E402  (python/tests/isolated.py)

MIB = 1 << 20
LDC = config.LogicalDeviceConfiguration
LOCAL = '/job:localhost/replica:0/task:0'   # the job, replica and task TensorFlow gives local devices

# test: what vram does instead of TensorFlow, and why
DELIBERATE = {
    "DeviceTest.testPhysicalDevices":
        "TensorFlow lists at least one CPU; vram lists GPUs only: list_physical_devices('CPU') is [].",
    "DeviceTest.testCpuMultiple":
        "TensorFlow splits the CPU into two logical CPUs; vram has no CPU device: a CPU PhysicalDevice is "
        "'Unrecognized device' (TensorFlow's error for a device it does not list) and there are no logical CPUs.",
    "DeviceTest.testGpuNone":
        "TensorFlow hides the GPUs by making the CPU alone visible (set_visible_devices(cpus[0])) and counts "
        "one visible CPU; vram has no CPU: set_visible_devices([], 'GPU') hides them and the CPU counts are 0.",
    "DeviceTest.testDeviceDetails":
        "TensorFlow's details of the CPU are {}; vram has no CPU device, so a CPU PhysicalDevice is refused as "
        "one not obtained from list_physical_devices. (vram's details have extra keys: uuid, pci_bus_id, "
        "total_bytes.)",
    "DeviceTest.testGetMemoryInfoCPU":
        "TensorFlow: ValueError 'Allocator stats not available' for CPU:0; vram has no CPU device: "
        "ValueError \"No matching devices found for 'CPU:0'\" (TensorFlow's words when no device matches).",
    "DeviceTest.testResetMemoryStatsCPU":
        "TensorFlow: ValueError 'Cannot reset memory stats' for CPU:0; vram has no CPU device: "
        "ValueError \"No matching devices found for 'CPU:0'\".",
    "DeviceTest.testGpuInvalidConfig":
        "TensorFlow refuses growth that differs between visible GPUs (ValueError 'cannot differ'), turns growth "
        "off on every GPU once one is split, and refuses set_memory_growth on a split GPU (ValueError 'virtual "
        "devices'); vram allows all three: each card keeps its own growth, in force at the start.",
    "DeviceTest.testRemote":
        "vram has no cluster: the second half (set_server_def to a one-task cluster, then listing again) "
        "is left out.",
    "ContextTest.testGetMemoryInfoCPU":
        "TensorFlow: ValueError 'Allocator stats not available' for CPU:0; vram has no CPU device: "
        "ValueError \"No matching devices found for 'CPU:0'\".",
    "TensorFlowRulesTest.test_experimental_fields_not_supported":
        "TensorFlow passes experimental_priority / experimental_device_ordinal to the GPU runtime (ValueError "
        "only when some virtual devices of a GPU have one and others not); vram supports neither: ValueError "
        "whenever one is set.",
}

# test: what stands in for TensorFlow's tensors, ops and context internals
ADAPTED = {
    "DeviceTest.testGpuNone": "an op on /device:GPU:0 ('Could not satisfy') -> memory asked of it (no device "
                              "matches); the runtime starts at list_logical_devices('XLA_GPU'), as TensorFlow's.",
    "DeviceTest.testGpuMultiple": "a constant on each GPU -> vram.malloc on each; on GPU:<n> ('Could not satisfy "
                                  "device specification') -> get_memory_info's 'No matching devices found' and "
                                  "a ValueError from vram.malloc.",
    "DeviceTest.testVirtualGpu": "as testGpuMultiple, on the logical GPUs; TensorFlow's assertTrue(len(logical_gpus), "
                                 "len(gpus) + 1), which cannot fail, is checked as the equality it means.",
    "DeviceTest.testGpuGrowth": "context().config.gpu_options.allow_growth -> get_memory_growth of each GPU, and "
                                "nothing reserved at the start; assertTrue(len(...), len(gpus)) as an equality.",
    "DeviceTest.testGetMemoryInfoBasic": "a float32 scalar on GPU:0 -> vram.malloc(4); its backing_device -> the "
                                         "full name '/job:localhost/replica:0/task:0/device:GPU:0'.",
    "DeviceTest.testGetMemoryUsageSubstring": "TensorFlow relies on memory the process already uses on GPU:0; a fresh "
                                              "vram process uses none, so 4 bytes are allocated first.",
    "DeviceTest.testPeakMemoryUsage": "zeros/ones((1000, 1000)) -> vram.malloc(4 * 1000 * 1000); del -> vram.free.",
    "DeviceTest.testResetMemoryStats": "as testPeakMemoryUsage.",
    "DeviceTest.testGetMemoryInfoInvalidDeviceString": "context.context().get_memory_info -> "
                                                       "config.experimental.get_memory_info (what it calls).",
    "DeviceTest.testResetMemoryStatsInvalidDeviceString": "context.context().reset_memory_stats -> "
                                                          "config.experimental.reset_memory_stats.",
    "DeviceTest.testGetMemoryUsageAmbiguousDevice": "TensorFlow 2.4/2.5 asked 'GPU', which TensorFlow now refuses "
                                                    "as unparsable; the partial name '/job:localhost/replica:0/task:0' "
                                                    "matches every local device instead.",
    "DeviceTest.testGpuInvalidConfig": "context().config.gpu_options.allow_growth -> get_memory_growth, and what "
                                       "each logical GPU reserves at the start.",
    "ContextTest.testGetMemoryInfo": "zeros([10]) on the GPU -> vram.malloc(40); context().get_memory_info -> "
                                     "config.experimental.get_memory_info.",
    "ContextTest.testGetMemoryInfoUnparsableDevice": "also 'unknown_device', which TensorFlow 2.4/2.5's "
                                                     "testGetMemoryUsageUnknownDevice refused as unparsable.",
    "ContextTest.testGetMemoryUsageAmbiguousDevice": "get_total_memory_usage('GPU') (TensorFlow 2.4/2.5, since "
                                                     "removed) -> get_memory_info and reset_memory_stats of the "
                                                     "partial name '/job:localhost/replica:0/task:0'.",
}

# TensorFlow tests of the two files about GPUs or memory that are not ported, and why
NOT_PORTED = {
    "config_test.DeviceTest.testV1Compatibility": "sets context()._config to ConfigProtos (device_count, "
                                                  "gpu_options.visible_device_list): TensorFlow internals.",
    "config_test.DeviceTest.testV1CompatibilityDummyInvisibleDeviceList": "the same, without GPUs.",
    "config_test.TensorFloat32Test": "matmul precision, not memory or devices.",
}


# ---- each test in its own process ----------------------------------------------------------------

class _PortTestCase(IsolatedTestCase):
    """Each test* method runs in a fresh child process with ENV: two simulated 16 GiB GPUs."""
    ENV = {"VRAM_BACKEND": "sim", "VRAM_SIM_DEVICES": "2x16GiB"}

    @contextlib.contextmanager
    def raises(self, exception, tf_pattern, exact=None):
        """assertRaisesRegex with TensorFlow test's own pattern, then (when given) the whole message."""
        with self.assertRaisesRegex(exception, tf_pattern) as caught:
            yield caught
        if exact is not None:
            self.assertEqual(str(caught.exception), exact)


def no_match(name):
    return "No matching devices found for '%s'" % name


def parse_failure(name):
    return ("Failed parsing device name: '%s'. Note a valid device string should at least contain a device "
            "type and a device index, like \"GPU:0\"." % name)


def several_match(name, first, second):
    return "Multiple devices match the provided string '%s': '%s' and '%s'." % (name, first, second)


NOT_LISTED = ("The PhysicalDevice must be one obtained from calling `tf.config.list_physical_devices`, "
              "but got: %s")
VISIBLE_FROZEN = "Visible devices cannot be modified after being initialized"
GROWTH_FROZEN = "Physical devices cannot be modified after being initialized"
VIRTUAL_FROZEN = "Virtual devices cannot be modified after being initialized"
LIMIT_REQUIRED = "Setting memory limit is required for GPU virtual devices"


# ---- tensorflow/python/framework/config_test.py, DeviceTest ----------------------------------------

class DeviceTest(_PortTestCase):

    def testPhysicalDevices(self):
        # DELIBERATE: TensorFlow asserts len(list_physical_devices('CPU')) > 0; vram lists no CPU.
        cpus = config.list_physical_devices('CPU')
        self.assertEqual(cpus, [])
        gpus = config.list_physical_devices('GPU')
        self.assertGreater(len(gpus), 0)
        self.assertEqual(config.list_physical_devices(), gpus)

    def testCpuMultiple(self):
        # DELIBERATE: no CPU to split. TensorFlow's steps, on the CPU device vram does not have:
        cpus = config.list_physical_devices('CPU')
        self.assertEqual(len(cpus), 0)                                   # TensorFlow: 1
        cpu = config.PhysicalDevice('/physical_device:CPU:0', 'CPU')
        with self.raises(ValueError, 'Unrecognized device', "Unrecognized device: %r" % (cpu,)):
            config.set_logical_device_configuration(cpu, [LDC(), LDC()])
        vram.init()                                                      # context.ensure_initialized()
        self.assertEqual(len(config.list_logical_devices('CPU')), 0)     # TensorFlow: 2

    def testGpuNone(self):
        gpus = config.list_physical_devices('GPU')
        self.assertGreater(len(gpus), 0)

        cpus = config.list_physical_devices('CPU')
        self.assertEqual(len(cpus), 0)                                   # DELIBERATE: TensorFlow 1

        self.assertEqual(len(config.get_visible_devices('CPU')), 0)     # DELIBERATE: TensorFlow 1
        self.assertGreater(len(config.get_visible_devices('GPU')), 0)
        self.assertEqual(len(config.get_visible_devices('XLA_GPU')), 0)

        config.set_visible_devices([], 'GPU')                            # DELIBERATE: TensorFlow set_visible_devices(cpus[0])
        self.assertEqual(len(config.get_visible_devices('CPU')), 0)     # DELIBERATE: TensorFlow 1
        self.assertEqual(len(config.get_visible_devices('GPU')), 0)
        self.assertEqual(len(config.list_logical_devices('XLA_GPU')), 0)

        # TensorFlow: an op on /device:GPU:0 raises InvalidArgumentError 'Could not satisfy'
        with self.raises(ValueError, 'No matching devices found', no_match('/device:GPU:0')):
            config.experimental.get_memory_info('/device:GPU:0')
        with self.assertRaises(ValueError):
            vram.malloc(4, device='/device:GPU:0')

        # Modifying the visible devices is not supported
        with self.raises(RuntimeError, 'cannot be modified', VISIBLE_FROZEN):
            config.set_visible_devices(gpus)

        # Setting the same visible devices is fine
        config.set_visible_devices([], 'GPU')

    def testGpuMultiple(self):
        gpus = config.list_physical_devices('GPU')
        if len(gpus) < 2:
            self.skipTest('Need at least 2 GPUs')

        vram.init()                                                      # context.ensure_initialized()

        for i in range(0, len(gpus)):
            vram.free(vram.malloc(4, device='/device:GPU:' + str(i)))

        # TensorFlow: InvalidArgumentError 'Could not satisfy device specification' for an op there
        beyond = '/device:GPU:' + str(len(gpus))
        with self.raises(ValueError, 'No matching devices found', no_match(beyond)):
            config.experimental.get_memory_info(beyond)
        with self.raises(ValueError, 'No matching devices found', no_match('GPU:%d' % len(gpus))):
            config.experimental.get_memory_info('GPU:%d' % len(gpus))
        with self.assertRaises(ValueError):
            vram.malloc(4, device=beyond)

    def testDeviceDetails(self):
        # DELIBERATE: TensorFlow: get_device_details(the CPU) == {}; vram lists no CPU device.
        cpu = config.PhysicalDevice('/physical_device:CPU:0', 'CPU')
        with self.raises(ValueError, 'The PhysicalDevice must be one obtained', NOT_LISTED % (cpu,)):
            config.experimental.get_device_details(cpu)

        gpus = config.list_physical_devices('GPU')
        details = config.experimental.get_device_details(gpus[0])
        self.assertIsInstance(details['device_name'], str)
        self.assertNotEqual(len(details['device_name']), 0)
        cc = details['compute_capability']
        self.assertIsInstance(cc, tuple)
        major, minor = cc
        self.assertGreater(major, 0)
        self.assertGreaterEqual(minor, 0)

        # Test GPU returned from get_visible_devices. (TensorFlow guards this with len(gpus) > 2, which two
        # GPUs do not pass; the step itself needs two.)
        if len(gpus) >= 2:
            config.set_visible_devices(gpus[1], 'GPU')
            (visible_gpu,) = config.get_visible_devices('GPU')
            details = config.experimental.get_device_details(visible_gpu)
            self.assertIsInstance(details['device_name'], str)

    def testDeviceDetailsErrors(self):
        logical_devices = config.list_logical_devices()
        with self.raises(ValueError, 'must be a tf.config.PhysicalDevice',
                         "device must be a tf.config.PhysicalDevice, but got: %s" % (logical_devices[0],)):
            config.experimental.get_device_details(logical_devices[0])

        phys_dev = config.PhysicalDevice('/physical_device:CPU:100', 'CPU')
        with self.raises(ValueError, 'The PhysicalDevice must be one obtained from '
                         'calling `tf.config.list_physical_devices`', NOT_LISTED % (phys_dev,)):
            config.experimental.get_device_details(phys_dev)
        ghost = config.PhysicalDevice('/physical_device:GPU:100', 'GPU')   # (the same for a GPU)
        with self.raises(ValueError, 'The PhysicalDevice must be one obtained', NOT_LISTED % (ghost,)):
            config.experimental.get_device_details(ghost)

    def testVirtualGpu(self):
        gpus = config.list_physical_devices('GPU')
        self.assertNotEqual(len(gpus), 0)

        self.assertIsNone(config.get_logical_device_configuration(gpus[-1]))
        config.set_logical_device_configuration(gpus[-1], [LDC(memory_limit=10), LDC(memory_limit=10)])
        self.assertEqual(len(config.get_logical_device_configuration(gpus[-1])), 2)

        logical_gpus = config.list_logical_devices('GPU')
        self.assertEqual(len(logical_gpus), len(gpus) + 1)   # TensorFlow: assertTrue(len(...), len(gpus) + 1)
        for i in range(0, len(logical_gpus)):
            vram.free(vram.malloc(4, device='/device:GPU:' + str(i)))

        # TensorFlow: InvalidArgumentError 'Could not satisfy' for an op on the next one
        beyond = '/device:GPU:' + str(len(logical_gpus))
        with self.raises(ValueError, 'No matching devices found', no_match(beyond)):
            config.experimental.get_memory_info(beyond)
        with self.assertRaises(ValueError):
            vram.malloc(4, device=beyond)

        # Modifying the GPU configuration is not supported
        with self.raises(RuntimeError, 'cannot be modified', VIRTUAL_FROZEN):
            config.set_logical_device_configuration(gpus[-1], [LDC(memory_limit=20), LDC(memory_limit=20)])

        with self.raises(RuntimeError, 'cannot be modified', VIRTUAL_FROZEN):
            config.set_logical_device_configuration(
                gpus[-1], [LDC(memory_limit=10), LDC(memory_limit=10), LDC(memory_limit=10)])

        # Setting the same GPU configuration is fine
        config.set_logical_device_configuration(gpus[-1], [LDC(memory_limit=10), LDC(memory_limit=10)])

    def testGpuGrowth(self):
        gpus = config.list_physical_devices('GPU')
        self.assertNotEqual(len(gpus), 0)

        self.assertIsNone(config.experimental.get_memory_growth(gpus[-1]))
        for gpu in gpus:
            config.experimental.set_memory_growth(gpu, True)

        # TensorFlow: context.context().config.gpu_options.allow_growth is True
        for gpu in gpus:
            self.assertIs(config.experimental.get_memory_growth(gpu), True)

        logical_gpus = config.list_logical_devices('GPU')
        self.assertEqual(len(logical_gpus), len(gpus))       # TensorFlow: assertTrue(len(...), len(gpus))
        for logical in logical_gpus:                          # growth in force: nothing taken at the start
            self.assertEqual(config.get_memory_info_full(logical.name)['reserved'], 0, logical)

        # Modifying the GPU configuration is not supported
        with self.raises(RuntimeError, 'cannot be modified', GROWTH_FROZEN):
            for gpu in gpus:
                config.experimental.set_memory_growth(gpu, False)

        # Setting the same GPU configuration is fine
        for gpu in gpus:
            config.experimental.set_memory_growth(gpu, True)

    def testGetMemoryInfoBasic(self):
        ptr = vram.malloc(4, device='GPU:0')                 # array_ops.zeros([]) on GPU:0
        device = LOCAL + '/device:GPU:0'                     # its backing_device
        info = config.experimental.get_memory_info(device)
        self.assertGreater(info['current'], 0)
        self.assertGreater(info['peak'], 0)
        self.assertEqual(info.keys(), {'current', 'peak'})
        self.assertEqual(config.experimental.get_memory_usage(device), info['current'])
        vram.free(ptr)

    def testGetMemoryUsageSubstring(self):
        ptr = vram.malloc(4, device='GPU:0')                 # (TensorFlow's process already uses some)
        info = config.experimental.get_memory_info('GPU:0')
        self.assertGreater(info['current'], 0)
        vram.free(ptr)

    def testGetMemoryInfoCPU(self):
        # DELIBERATE: TensorFlow: ValueError 'Allocator stats not available'; vram has no CPU:0 at all.
        with self.raises(ValueError, 'No matching devices found', no_match('CPU:0')):
            config.experimental.get_memory_info('CPU:0')
        with self.raises(ValueError, 'No matching devices found', no_match('CPU:0')):
            config.experimental.get_memory_usage('CPU:0')

    def testGetMemoryInfoUnknownDevice(self):
        with self.raises(ValueError, 'No matching devices found', no_match('unknown_device:0')):
            config.experimental.get_memory_info('unknown_device:0')
        with self.raises(ValueError, 'No matching devices found', no_match('unknown_device:0')):
            config.experimental.get_memory_usage('unknown_device:0')

    def testGetMemoryInfoInvalidDeviceString(self):
        for name in ('GPU', 'GPU:', 'GPU:CPU'):
            with self.raises(ValueError, 'Failed parsing device name', parse_failure(name)):
                config.experimental.get_memory_info(name)

    def testPeakMemoryUsage(self):
        device = 'GPU:0'
        x1 = vram.malloc(4 * 1000 * 1000, device=device)
        peak1 = config.experimental.get_memory_info(device)['peak']
        self.assertGreaterEqual(peak1, 4 * 1000 * 1000)
        x2 = vram.malloc(4 * 1000 * 1000, device=device)
        peak2 = config.experimental.get_memory_info(device)['peak']
        self.assertGreaterEqual(peak2, peak1 + 4 * 1000 * 1000)
        vram.free(x1)
        vram.free(x2)
        peak3 = config.experimental.get_memory_info(device)['peak']
        self.assertGreaterEqual(peak3, peak2)
        self.assertGreaterEqual(peak3, config.experimental.get_memory_info(device)['current'])

    def testResetMemoryStats(self):
        device = 'GPU:0'
        x = vram.malloc(4 * 1000 * 1000, device=device)
        config.experimental.reset_memory_stats(device)
        info1 = config.experimental.get_memory_info(device)
        self.assertGreaterEqual(info1['peak'], 4 * 1000 * 1000)
        self.assertGreaterEqual(info1['peak'], info1['current'])
        self.assertGreater(info1['current'], 0)

        vram.free(x)
        config.experimental.reset_memory_stats(device)
        info2 = config.experimental.get_memory_info(device)
        self.assertLess(info2['peak'], info1['peak'])

    def testResetMemoryStatsCPU(self):
        # DELIBERATE: TensorFlow: ValueError 'Cannot reset memory stats'; vram has no CPU:0 at all.
        with self.raises(ValueError, 'No matching devices found', no_match('CPU:0')):
            config.experimental.reset_memory_stats('CPU:0')

    def testResetMemoryStatsUnknownDevice(self):
        with self.raises(ValueError, 'No matching devices found', no_match('unknown_device:0')):
            config.experimental.reset_memory_stats('unknown_device:0')

    def testResetMemoryStatsInvalidDeviceString(self):
        for name in ('GPU', 'GPU:', 'GPU:CPU'):
            with self.raises(ValueError, 'Failed parsing device name', parse_failure(name)):
                config.experimental.reset_memory_stats(name)

    def testGetMemoryUsageAmbiguousDevice(self):
        if len(config.list_physical_devices('GPU')) < 2:
            self.skipTest('Need at least 2 GPUs')
        with self.raises(ValueError, 'Multiple devices',
                         several_match(LOCAL, LOCAL + '/device:GPU:0', LOCAL + '/device:GPU:1')):
            config.experimental.get_memory_usage(LOCAL)

    def testGpuInvalidConfig(self):
        gpus = config.list_physical_devices('GPU')
        self.assertNotEqual(len(gpus), 0)

        if len(gpus) > 1:
            # DELIBERATE: TensorFlow refuses growth that differs between visible GPUs (ValueError 'cannot
            # differ' when it computes its config); vram takes each card's own.
            config.experimental.set_memory_growth(gpus[0], True)
            self.assertIs(config.experimental.get_memory_growth(gpus[0]), True)
            self.assertIsNone(config.experimental.get_memory_growth(gpus[1]))

            # If we limit visibility to GPU 0, growth is fine (and with GPU 1 alone, which has none)
            config.set_visible_devices(gpus[0], 'GPU')
            self.assertEqual(config.get_visible_devices('GPU'), [gpus[0]])
            config.set_visible_devices(gpus[1], 'GPU')
            self.assertEqual(config.get_visible_devices('GPU'), [gpus[1]])

            # All visible again: TensorFlow refuses again, vram does not
            config.set_visible_devices(gpus, 'GPU')

        for gpu in gpus:
            config.experimental.set_memory_growth(gpu, True)
        for gpu in gpus:                                     # TensorFlow: allow_growth is True
            self.assertIs(config.experimental.get_memory_growth(gpu), True)

        with self.raises(ValueError, 'memory limit', LIMIT_REQUIRED):
            config.set_logical_device_configuration(gpus[-1], [LDC(), LDC()])

        self.assertIsNone(config.get_logical_device_configuration(gpus[-1]))
        config.set_logical_device_configuration(gpus[-1], [LDC(memory_limit=10), LDC(memory_limit=10)])

        # DELIBERATE: TensorFlow's allow_growth is now False for every GPU; vram keeps each card's growth
        for gpu in gpus:
            self.assertIs(config.experimental.get_memory_growth(gpu), True)

        # DELIBERATE: TensorFlow raises ValueError 'virtual devices' ("Cannot set memory growth on device when
        # virtual devices configured"); vram combines growth with logical devices
        config.experimental.set_memory_growth(gpus[-1], False)
        self.assertIs(config.experimental.get_memory_growth(gpus[-1]), False)

        # in force at the start: a card with growth takes nothing, the split card without growth its limits
        logical_gpus = config.list_logical_devices('GPU')
        self.assertEqual(len(logical_gpus), len(gpus) + 1)
        for logical in logical_gpus[:len(gpus) - 1]:
            self.assertEqual(config.get_memory_info_full(logical.name)['reserved'], 0, logical)
        for logical in logical_gpus[len(gpus) - 1:]:
            info = config.get_memory_info_full(logical.name)
            self.assertEqual(info['limit'], 10 * MIB, logical)
            self.assertGreater(info['reserved'], 0, logical)

    def testRemote(self):
        gpus = config.list_logical_devices('GPU')
        self.assertNotEqual(len(gpus), 0)

        vram.init()                                          # context.ensure_initialized()

        gpus = config.list_logical_devices('GPU')
        self.assertNotEqual(len(gpus), 0)
        for gpu in gpus:
            self.assertIsNotNone(gpu.name)

        vram.init()
        # DELIBERATE: no cluster; TensorFlow's set_server_def(one 'test' job on localhost:0) and the listing
        # after it are left out.


# ---- tensorflow/python/eager/context_test.py, ContextTest (memory info) ----------------------------

class ContextTest(_PortTestCase):

    def testGetMemoryInfo(self):
        ptr = vram.malloc(4 * 10, device='GPU:0')            # array_ops.zeros([10]) on the GPU
        self.assertGreater(config.experimental.get_memory_info('GPU:0')['current'], 0)
        vram.free(ptr)

    def testGetMemoryInfoCPU(self):
        # DELIBERATE: TensorFlow: ValueError 'Allocator stats not available'; vram has no CPU:0 at all.
        with self.raises(ValueError, 'No matching devices found', no_match('CPU:0')):
            config.experimental.get_memory_info('CPU:0')

    def testGetMemoryInfoUnknownDevice(self):
        with self.raises(ValueError, 'No matching devices found', no_match('unknown_device:0')):
            config.experimental.get_memory_info('unknown_device:0')

    def testGetMemoryInfoUnparsableDevice(self):
        for name in ('GPU', 'GPU:', 'GPU:CPU', 'unknown_device'):
            with self.raises(ValueError, 'Failed parsing device name', parse_failure(name)):
                config.experimental.get_memory_info(name)

    def testGetMemoryUsageAmbiguousDevice(self):
        if len(config.list_physical_devices('GPU')) < 2:
            self.skipTest('Need at least 2 GPUs')
        message = several_match(LOCAL, LOCAL + '/device:GPU:0', LOCAL + '/device:GPU:1')
        with self.raises(ValueError, 'Multiple devices', message):
            config.experimental.get_memory_info(LOCAL)
        with self.raises(ValueError, 'Multiple devices', message):
            config.experimental.reset_memory_stats(LOCAL)


# ---- what TensorFlow's implementation does that its tests do not assert -----------------------------

class TensorFlowRulesTest(_PortTestCase):

    def test_list_logical_devices_starts_the_runtime_whatever_the_type(self):
        """Context.list_logical_devices calls ensure_initialized() before it filters by type."""
        gpu = config.list_physical_devices('GPU')[0]
        self.assertFalse(vram.is_initialized())
        self.assertEqual(config.list_logical_devices('CPU'), [])
        self.assertTrue(vram.is_initialized())
        with self.raises(RuntimeError, 'cannot be modified', GROWTH_FROZEN):
            config.experimental.set_memory_growth(gpu, True)

    def test_visible_devices_keep_the_order_given(self):
        """set_visible_devices stores the list as given and get_visible_devices returns it; the logical GPUs
        are still numbered in physical order (_compute_device_options walks list_physical_devices), and after
        the start another order is another list: refused."""
        gpus = config.list_physical_devices('GPU')
        config.set_memory_limit(gpus[1], '1GiB')              # (vram's, to tell the cards apart)
        config.set_visible_devices([gpus[1], gpus[0]], 'GPU')
        self.assertEqual(config.get_visible_devices('GPU'), [gpus[1], gpus[0]])
        self.assertEqual(config.get_visible_devices(), [gpus[1], gpus[0]])
        self.assertEqual(len(config.list_logical_devices('GPU')), 2)
        self.assertEqual(config.get_memory_info_full('GPU:1')['limit'], 1 << 30)   # GPU:1 is the second card
        config.set_visible_devices([gpus[1], gpus[0]], 'GPU')  # the same list: fine
        with self.raises(RuntimeError, 'cannot be modified', VISIBLE_FROZEN):
            config.set_visible_devices([gpus[0], gpus[1]], 'GPU')

    def test_visible_device_listed_twice(self):
        """A device listed twice is accepted and kept so (TensorFlow checks each against the physical list,
        then stores the list); one logical device per card."""
        gpus = config.list_physical_devices('GPU')
        config.set_visible_devices([gpus[0], gpus[0]], 'GPU')
        self.assertEqual(config.get_visible_devices('GPU'), [gpus[0], gpus[0]])
        self.assertEqual(config.list_logical_devices('GPU'), [config.LogicalDevice('/device:GPU:0', 'GPU')])

    def test_visible_devices_tuple_is_one_device(self):
        """Anything but a list is one device (`if not isinstance(devices, list): devices = [devices]`): a
        tuple of devices is an unrecognized device."""
        gpus = tuple(config.list_physical_devices('GPU'))
        with self.raises(ValueError, 'Unrecognized device', "Unrecognized device: %r" % (gpus,)):
            config.set_visible_devices(gpus, 'GPU')
        self.assertEqual(config.get_visible_devices('GPU'), list(gpus))

    def test_empty_logical_configuration_reads_back_empty(self):
        """The getter returns what was set ([] after []); [] means one logical device on the card."""
        gpus = config.list_physical_devices('GPU')
        config.set_logical_device_configuration(gpus[0], [LDC(memory_limit=100), LDC(memory_limit=100)])
        config.set_logical_device_configuration(gpus[0], [])
        self.assertEqual(config.get_logical_device_configuration(gpus[0]), [])
        self.assertIsNone(config.get_logical_device_configuration(gpus[1]))
        self.assertEqual(len(config.list_logical_devices('GPU')), len(gpus))
        config.set_logical_device_configuration(gpus[0], [])   # what is in force: fine

    def test_empty_logical_configuration_after_start_is_a_change(self):
        """After the start TensorFlow compares the lists: None (never set) is not [], so [] is refused."""
        gpu = config.list_physical_devices('GPU')[0]
        config.list_logical_devices()
        with self.raises(RuntimeError, 'cannot be modified', VIRTUAL_FROZEN):
            config.set_logical_device_configuration(gpu, [])
        self.assertIsNone(config.get_logical_device_configuration(gpu))

    def test_memory_info_device_of_another_job(self):
        """GetMatchedDevice matches job, replica and task when the string has them: local devices are
        /job:localhost/replica:0/task:0."""
        ptr = vram.malloc(4096, device='GPU:1')
        self.assertEqual(config.experimental.get_memory_info(LOCAL + '/device:GPU:1')['current'], 4096)
        for name in ('/job:worker/replica:0/task:0/device:GPU:1', '/job:localhost/replica:1/task:0/device:GPU:1',
                     '/job:localhost/replica:0/task:3/device:GPU:1'):
            with self.raises(ValueError, 'No matching devices found', no_match(name)):
                config.experimental.get_memory_info(name)
        vram.free(ptr)

    def test_experimental_fields_not_supported(self):
        # DELIBERATE: TensorFlow hands experimental_priority / experimental_device_ordinal to its GPU runtime;
        # vram supports neither (config.py: "ValueError when set").
        gpu = config.list_physical_devices('GPU')[0]
        for configs in ([LDC(10, experimental_priority=0), LDC(10, experimental_priority=-1)],
                        [LDC(10, experimental_device_ordinal=0), LDC(10, experimental_device_ordinal=1)]):
            with self.raises(ValueError, 'experimental_priority'):
                config.set_logical_device_configuration(gpu, configs)
        self.assertIsNone(config.get_logical_device_configuration(gpu))


# ---- vram's own argument checks: nothing wraps, a wrong type is a TypeError --------------------------

class TestArgumentChecks(_PortTestCase):

    def test_size_beyond_size_t(self):
        for size in (2 ** 64, 2 ** 64 + 4096):               # (2**64 + 4096 would wrap to 4096)
            with self.assertRaises(ValueError):
                vram.malloc(size)
        self.assertEqual(config.get_memory_info_full(0)['num_allocs'], 0)

    def test_memory_limit_beyond_size_t(self):
        gpu = config.list_physical_devices('GPU')[0]
        with self.assertRaises(ValueError):
            config.set_memory_limit(gpu, 2 ** 64 + 1024)
        self.assertIsNone(config.get_memory_limit(gpu))      # not a limit of 1024 bytes

    def test_device_index_beyond_int(self):
        index = 2 ** 32                                       # (would wrap to 0 in a C int)
        with self.assertRaises(ValueError):
            vram.malloc(16, device=index)
        with self.assertRaises(ValueError):
            config.experimental.get_memory_info(index)
        with self.assertRaises(ValueError):
            config.experimental.set_memory_growth(index, True)
        self.assertIsNone(config.experimental.get_memory_growth(0))

    def test_logical_memory_limit_beyond_size_t(self):
        gpu = config.list_physical_devices('GPU')[0]
        with self.assertRaises(ValueError):
            config.set_logical_device_configuration(gpu, [LDC(memory_limit=2 ** 64 + 1024)])
        self.assertIsNone(config.get_logical_device_configuration(gpu))

    def test_float_as_a_device(self):
        # a logical device is a string, a LogicalDevice or an int: a float is the wrong type (TensorFlow's
        # get_memory_info, a pybind11 function of a `const char*`, raises TypeError too)
        with self.assertRaises(TypeError):
            config.experimental.get_memory_info(0.0)
        with self.assertRaises(TypeError):
            vram.malloc(16, device=0.0)
        # a physical device: TensorFlow's ValueError "Unrecognized device: 0.0", and not GPU 0 (0.0 == 0)
        with self.raises(ValueError, 'Unrecognized device', "Unrecognized device: 0.0"):
            config.experimental.set_memory_growth(0.0, True)
        self.assertIsNone(config.experimental.get_memory_growth(0))

    def test_not_a_list_of_configurations(self):
        # (TensorFlow itself raises AttributeError: it reads .memory_limit of each item)
        gpu = config.list_physical_devices('GPU')[0]
        with self.assertRaises(TypeError):
            config.set_logical_device_configuration(gpu, [1024, 1024])
        with self.assertRaises(TypeError):
            config.set_logical_device_configuration(gpu, LDC(memory_limit=1024))
        self.assertIsNone(config.get_logical_device_configuration(gpu))

    def test_torch_memory_info_device_beyond_int(self):
        # vram.torch.memory_info(device) takes a CUDA ordinal: checked before ctypes, as every index
        with self.assertRaises(ValueError):
            vram.torch.memory_info(2 ** 32)
        with self.assertRaises(TypeError):
            vram.torch.memory_info(0.0)
        self.assertIn("current", vram.torch.memory_info(0))

    def test_free_of_a_list(self):
        vram.init()
        with self.assertRaises(TypeError):
            vram.free([])                                     # (falsy, but not the null address)

    def test_nul_in_a_size_string(self):
        with self.assertRaises(ValueError):
            vram.parse_size('1G\x00junk')                     # (C would read '1G')
        with self.assertRaises(ValueError):
            vram.malloc('1K\x00junk')
        gpu = config.list_physical_devices('GPU')[0]
        with self.assertRaises(ValueError):
            config.set_memory_limit(gpu, '1G\x00junk')
        self.assertIsNone(config.get_memory_limit(gpu))


# ---- the bookkeeping above names real tests -----------------------------------------------------------

class PortBookkeepingTest(unittest.TestCase):

    def test_deliberate_and_adapted_name_tests(self):
        for table in (DELIBERATE, ADAPTED):
            for key in table:
                cls_name, _, test_name = key.partition(".")
                cls = globals().get(cls_name)
                self.assertTrue(isinstance(cls, type) and test_name.startswith("test") and hasattr(cls, test_name),
                                key)

    def test_deliberate_tests_say_so(self):
        """Each DELIBERATE test's source carries a DELIBERATE comment, where the difference is."""
        import inspect
        for key in DELIBERATE:
            cls_name, _, test_name = key.partition(".")
            source = inspect.getsource(sys.modules[__name__])
            body = re.search(r"\n    def %s\(self\):\n(.*?)(?=\n    def |\n# ----|\nclass )" % re.escape(test_name),
                             source[source.index("class %s(" % cls_name):], re.S)
            self.assertIsNotNone(body, key)
            self.assertIn("DELIBERATE", body.group(1), key)


if __name__ == "__main__":
    unittest.main()
