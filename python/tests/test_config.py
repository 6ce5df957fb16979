"""Tests of the vram Python package (vram.config and the top level) on the simulated GPU backend.

libvram keeps global state (the configuration survives vram.shutdown(), and a started runtime
freezes it), so every test runs in its own forked child process: the parent only imports the
package, each child starts from a fresh library state with the environment its class asks for.

Run: PYTHONPATH=python VRAM_LIBRARY=build/libvram.so python3 -m unittest discover -s python/tests -v
"""
import ctypes
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import vram  # noqa: E402
from vram import config  # noqa: E402
from isolated import IsolatedTestCase  # noqa: E402  (python/tests/isolated.py)

MIB = 1 << 20
GIB = 1 << 30


class TemplateTest(IsolatedTestCase):
    """The tf.config template of issue 5, with the module name changed."""

    def test_template(self):
        gpus = vram.config.list_physical_devices('GPU')
        vram.config.set_visible_devices(gpus[0], 'GPU')
        vram.config.experimental.set_memory_growth(gpus[0], True)
        vram.config.set_logical_device_configuration(
            gpus[0], [vram.config.LogicalDeviceConfiguration(memory_limit=6144)])
        self.assertFalse(vram.is_initialized())
        self.assertEqual(vram.config.experimental.get_memory_info('GPU:0'), {'current': 0, 'peak': 0})
        self.assertTrue(vram.is_initialized())
        self.assertEqual(vram.config.list_logical_devices('GPU'), [config.LogicalDevice('/device:GPU:0', 'GPU')])
        self.assertEqual(config.get_memory_info_full('GPU:0')['limit'], 6144 * MIB)

    def test_two_logical_devices_on_one_card(self):
        gpu = config.list_physical_devices('GPU')[1]
        config.set_logical_device_configuration(
            gpu, [config.LogicalDeviceConfiguration(1024), config.LogicalDeviceConfiguration(2048)])
        names = [d.name for d in config.list_logical_devices()]
        self.assertEqual(names, ['/device:GPU:0', '/device:GPU:1', '/device:GPU:2'])
        self.assertEqual(config.get_memory_info_full('/device:GPU:2')['limit'], 2048 * MIB)


class DevicesTest(IsolatedTestCase):
    """Device objects, names and visibility."""

    def test_physical_devices(self):
        gpus = config.list_physical_devices()
        self.assertEqual(gpus, [config.PhysicalDevice('/physical_device:GPU:0', 'GPU'),
                                config.PhysicalDevice('/physical_device:GPU:1', 'GPU')])
        self.assertEqual((gpus[0].name, gpus[0].device_type), ('/physical_device:GPU:0', 'GPU'))
        self.assertEqual(config.list_physical_devices('GPU'), gpus)
        self.assertEqual(config.list_physical_devices('CPU'), [])
        self.assertFalse(vram.is_initialized())

    def test_device_details(self):
        details = config.experimental.get_device_details(config.list_physical_devices()[0])
        self.assertEqual(details['compute_capability'], (9, 0))
        self.assertEqual(details['total_bytes'], 16 * GIB)
        self.assertTrue(details['uuid'].startswith('GPU-'))

    def test_visible_devices(self):
        gpus = config.list_physical_devices('GPU')
        self.assertEqual(config.get_visible_devices(), gpus)
        config.set_visible_devices([gpus[1]], 'GPU')
        self.assertEqual(config.get_visible_devices('GPU'), [gpus[1]])
        self.assertEqual(config.get_visible_devices('CPU'), [])
        self.assertEqual(len(config.list_logical_devices()), 1)

    def test_hide_all(self):
        config.set_visible_devices([])
        self.assertEqual(config.get_visible_devices(), [])

    def test_cpu_visibility_is_a_no_op(self):
        config.set_visible_devices([], 'CPU')
        self.assertEqual(len(config.get_visible_devices()), 2)

    def test_device_as_name_string_or_index(self):
        config.experimental.set_memory_growth('/physical_device:GPU:1', True)
        self.assertTrue(config.experimental.get_memory_growth(config.list_physical_devices()[1]))
        config.experimental.set_memory_growth(0, False)
        self.assertIs(config.experimental.get_memory_growth('GPU:0'), False)

    def test_index_is_an_int_alone(self):
        """An index is an int: True (an int to Python, equal to 1), 1.0 and (1,) name no device, as
        they name none in TensorFlow; nothing is set on GPU:1."""
        for other in (True, 1.0, (1,)):
            for call in (lambda: config.experimental.set_memory_growth(other, True),
                         lambda: config.set_memory_limit(other, '1GiB')):
                with self.assertRaises(ValueError) as caught:
                    call()
                self.assertEqual(str(caught.exception), "Unrecognized device: %r" % (other,))
        self.assertIsNone(config.experimental.get_memory_growth(1))
        self.assertIsNone(config.get_memory_limit(1))

    def test_memory_info_device_forms(self):
        logical = config.list_logical_devices()[1]
        ptr = vram.malloc(4096, device=logical)
        for device in ('GPU:1', '/device:GPU:1', logical, 1, '/job:localhost/replica:0/task:0/device:GPU:1'):
            self.assertEqual(config.experimental.get_memory_info(device)['current'], 4096, device)
        vram.free(ptr)


class NoneUntilSetTest(IsolatedTestCase):
    """Getters return None until their setter is called, as TensorFlow's."""

    def test_memory_growth(self):
        gpu = config.list_physical_devices()[0]
        self.assertIsNone(config.experimental.get_memory_growth(gpu))
        config.experimental.set_memory_growth(gpu, True)
        self.assertIs(config.experimental.get_memory_growth(gpu), True)

    def test_logical_device_configuration(self):
        gpu = config.list_physical_devices()[0]
        self.assertIsNone(config.get_logical_device_configuration(gpu))
        configs = [config.LogicalDeviceConfiguration(memory_limit=512)] * 2
        config.set_logical_device_configuration(gpu, configs)
        self.assertEqual(config.get_logical_device_configuration(gpu), configs)
        config.experimental.set_virtual_device_configuration(gpu, [])   # TensorFlow's getter: what was set
        self.assertEqual(config.experimental.get_virtual_device_configuration(gpu), [])

    def test_memory_limit(self):
        gpu = config.list_physical_devices()[0]
        self.assertIsNone(config.get_memory_limit(gpu))
        config.set_memory_limit(gpu, '1.5GiB')
        self.assertEqual(config.get_memory_limit(gpu), 3 * GIB // 2)
        config.set_memory_limit(gpu, None)
        self.assertIsNone(config.get_memory_limit(gpu))


class RoundsToNothingTest(IsolatedTestCase):
    """A memory limit that rounds to nothing is refused by name and leaves the limit in force: None
    and the int 0 (vram_set_memory_limit's 0) are the only ways to remove it (issue 34)."""

    def test_zero_byte_limit_refused(self):
        gpu = config.list_physical_devices()[0]
        config.set_memory_limit(gpu, '1GiB')
        for limit in ('0.4', '0', '0K', '0.0001K', ' 0.9 ', '0GiB', '.5'):
            with self.assertRaises(ValueError) as caught:
                config.set_memory_limit(gpu, limit)
            self.assertIn(repr(limit), str(caught.exception))
            self.assertIn("None", str(caught.exception))              # says how to remove a limit
            self.assertEqual(caught.exception.status, "VRAM_ERR_INVALID_ARGUMENT")
            self.assertEqual(config.get_memory_limit(gpu), GIB, limit)   # the limit stays
        with self.assertRaisesRegex(ValueError, "'0.4'"):
            config.set_memory_limit('GPU:1', '0.4')
        self.assertIsNone(config.get_memory_limit('GPU:1'))            # (nothing set there either)

    def test_explicit_removal(self):
        gpu = config.list_physical_devices()[0]
        for remove in (None, 0):
            config.set_memory_limit(gpu, '1.5K')                       # 1536 bytes: not nothing
            self.assertEqual(config.get_memory_limit(gpu), 1536)
            config.set_memory_limit(gpu, remove)
            self.assertIsNone(config.get_memory_limit(gpu))
        for wrong in (0.0, 0.4, False):                                # no number rounds: a float is refused
            with self.assertRaises(TypeError):
                config.set_memory_limit(gpu, wrong)


class StrictDeviceStringTest(IsolatedTestCase):
    """A device string's numbers are ASCII digits and nothing follows them: 'GPU:0\n', 'GPU:٠' and
    'GPU:０' are refused with TensorFlow's parse message (one line), by every call that takes a logical
    device string; the physical-device calls refuse them as unrecognized (issue 34)."""
    BAD = ('GPU:0\n', 'GPU:\u0660', 'GPU:\uff10', 'GPU:\u0967', '/device:GPU:\u0660', '/device:GPU:0\n',
           '/gpu:\u0660', '/job:localhost/replica:\u0660/task:0/device:GPU:0',
           '/job:localhost/replica:0/task:\uff10/device:GPU:0', 'GPU:0\r', '\u0660')

    @staticmethod
    def parse_failure(shown):
        return ("Failed parsing device name: '%s'. Note a valid device string should at least contain a device "
                "type and a device index, like \"GPU:0\"." % shown)

    def test_logical_calls(self):
        ptr = vram.malloc(4096, device='GPU:0')
        for name in self.BAD:
            shown = name.replace('\n', '\\n').replace('\r', '\\r')
            calls = [lambda: config.experimental.get_memory_info(name),
                     lambda: config.get_memory_info_full(name),
                     lambda: config.experimental.reset_memory_stats(name),
                     lambda: config.experimental.get_memory_usage(name),
                     lambda: config.trim(name),
                     lambda: vram.malloc(4096, device=name),
                     lambda: config.experimental.get_memory_info(config.LogicalDevice(name, 'GPU'))]
            for call in calls:
                with self.assertRaises(ValueError, msg=repr(name)) as caught:
                    call()
                self.assertEqual(str(caught.exception), self.parse_failure(shown))
                self.assertEqual(caught.exception.status, "VRAM_ERR_UNRECOGNIZED_DEVICE")
        self.assertEqual(config.get_memory_info_full('GPU:0')['num_allocs'], 1)   # nothing else was allocated
        self.assertEqual(config.experimental.get_memory_info('GPU:0')['peak'], 4096)   # nor reset
        vram.free(ptr)
        for good in ('GPU:0', '/device:GPU:1', '/job:localhost/replica:0/task:0/device:GPU:1', '/gpu:0'):
            config.experimental.get_memory_info(good)

    def test_physical_calls(self):
        for name in ('GPU:0\n', 'GPU:\u0660', 'GPU:\uff10', '/physical_device:GPU:0\n', '/physical_device:GPU:\u0660'):
            for call in (lambda: config.experimental.set_memory_growth(name, True),
                         lambda: config.set_memory_limit(name, '1GiB'),
                         lambda: config.set_visible_devices([name])):
                with self.assertRaises(ValueError) as caught:
                    call()
                self.assertEqual(str(caught.exception), "Unrecognized device: %r" % name)
        self.assertIsNone(config.experimental.get_memory_growth(0))
        self.assertIsNone(config.get_memory_limit(0))


class ExceptionsTest(IsolatedTestCase):
    """TensorFlow's exceptions and messages."""

    def _started(self):
        gpus = config.list_physical_devices()
        config.list_logical_devices()
        return gpus

    def test_visible_after_start(self):
        gpus = self._started()
        config.set_visible_devices(gpus)  # the same list: a no-op
        with self.assertRaises(RuntimeError) as caught:
            config.set_visible_devices(gpus[0])
        self.assertEqual(str(caught.exception), "Visible devices cannot be modified after being initialized")
        self.assertEqual(caught.exception.status, "VRAM_ERR_ALREADY_INITIALIZED")

    def test_growth_after_start(self):
        gpu = self._started()[0]
        with self.assertRaisesRegex(RuntimeError, "^Physical devices cannot be modified after being initialized$"):
            config.experimental.set_memory_growth(gpu, True)

    def test_logical_configuration_after_start(self):
        gpu = config.list_physical_devices()[0]
        configs = [config.LogicalDeviceConfiguration(memory_limit=100)]
        config.set_logical_device_configuration(gpu, configs)
        config.list_logical_devices()
        config.set_logical_device_configuration(gpu, list(configs))  # what is in force: a no-op
        for other in ([], [config.LogicalDeviceConfiguration(memory_limit=200)]):   # (TensorFlow compares lists)
            with self.assertRaisesRegex(RuntimeError, "^Virtual devices cannot be modified after being initialized$"):
                config.set_logical_device_configuration(gpu, other)

    def test_unrecognized_device(self):
        ghost = config.PhysicalDevice('/physical_device:GPU:7', 'GPU')
        message = "^Unrecognized device: PhysicalDevice\\(name='/physical_device:GPU:7', device_type='GPU'\\)$"
        for call in (lambda: config.set_visible_devices(ghost),
                     lambda: config.experimental.set_memory_growth(ghost, True),
                     lambda: config.experimental.get_memory_growth(ghost),
                     lambda: config.get_logical_device_configuration(ghost),
                     lambda: config.set_memory_limit(ghost, 1 << 20)):
            with self.assertRaisesRegex(ValueError, message):
                call()
        with self.assertRaisesRegex(ValueError, "^Unrecognized device: "):
            config.set_visible_devices(config.list_physical_devices()[0], 'CPU')

    def test_unrecognized_logical_device(self):
        with self.assertRaisesRegex(ValueError, "^No matching devices found for 'GPU:5'$") as caught:
            config.experimental.get_memory_info('GPU:5')
        self.assertEqual(caught.exception.status, "VRAM_ERR_UNRECOGNIZED_DEVICE")
        with self.assertRaisesRegex(ValueError, "^No matching devices found for 'CPU:0'$"):   # (no CPU devices)
            config.experimental.get_memory_info('CPU:0')

    def test_memory_limit_required(self):
        gpu = config.list_physical_devices()[0]
        with self.assertRaisesRegex(ValueError, "^Setting memory limit is required for GPU virtual devices$"):
            config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration()])
        with self.assertRaisesRegex(ValueError, "positive whole number of MiB"):
            config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration(memory_limit=0)])
        with self.assertRaisesRegex(ValueError, "experimental_priority"):
            config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration(10, 1)])

    def test_conflicts_are_value_errors(self):
        gpu = config.list_physical_devices()[0]
        with self.assertRaises(ValueError) as caught:
            config.set_memory_limit(gpu, '17GiB')
        self.assertEqual(caught.exception.status, "VRAM_ERR_CONFLICT")
        with self.assertRaises(ValueError):
            config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration(20000)])

    def test_out_of_memory(self):
        config.set_memory_limit(0, '64MiB')
        with self.assertRaises(vram.OutOfMemoryError) as caught:
            vram.malloc('128MiB')
        self.assertIsInstance(caught.exception, MemoryError)
        self.assertIn("memory limit", str(caught.exception))
        self.assertEqual(caught.exception.status, "VRAM_ERR_OUT_OF_MEMORY")
        self.assertEqual(config.get_memory_info_full(0)['num_ooms'], 1)

    def test_other_errors_are_vram_errors(self):
        vram.init()
        with self.assertRaises(vram.VramError) as caught:
            vram.free(0x1000)
        self.assertIsInstance(caught.exception, RuntimeError)
        self.assertEqual(caught.exception.status, "VRAM_ERR_INVALID_POINTER")


class NoGpuTest(IsolatedTestCase):
    """No usable GPU: empty lists, as TensorFlow, and diagnose() says why."""
    ENV = {"VRAM_BACKEND": "sim", "CUDA_VISIBLE_DEVICES": ""}

    def test_empty_lists(self):
        self.assertEqual(config.list_physical_devices('GPU'), [])
        self.assertEqual(config.get_visible_devices(), [])
        self.assertEqual(config.list_logical_devices(), [])
        self.assertIn("CUDA_VISIBLE_DEVICES", vram.diagnose())
        self.assertTrue(vram.diagnose().startswith("No GPU found: "))

    def test_configuring_a_missing_gpu(self):
        with self.assertRaisesRegex(ValueError, "^Unrecognized device: "):
            config.experimental.set_memory_growth(config.PhysicalDevice('/physical_device:GPU:0', 'GPU'), True)


class CudaBackendTest(IsolatedTestCase):
    """The CUDA backend: on a machine without a GPU (or driver), [] and the reason."""
    ENV = {"VRAM_BACKEND": "cuda"}

    def test_no_gpu_or_listed(self):
        gpus = config.list_physical_devices('GPU')
        if gpus:
            self.assertTrue(vram.diagnose().startswith("%d GPU" % len(gpus)))
            raise unittest.SkipTest("this machine has a GPU: " + vram.diagnose())
        self.assertTrue(vram.diagnose().startswith("No GPU found: "))
        self.assertEqual(config.list_logical_devices(), [])


class BadBackendTest(IsolatedTestCase):
    """A VRAM_BACKEND that is neither cuda nor sim: diagnose() answers with a sentence, no traceback."""
    ENV = {"VRAM_BACKEND": "bogus"}

    def test_diagnose_says_why(self):
        text = vram.diagnose()
        self.assertTrue(text.startswith("vram cannot start: "), text)
        self.assertIn("VRAM_BACKEND", text)


class RuntimeTest(IsolatedTestCase):
    """Life cycle, raw allocation, trim, memory info and sizes."""

    def test_life_cycle(self):
        self.assertFalse(vram.is_initialized())
        vram.init()
        vram.init()
        self.assertTrue(vram.is_initialized())
        vram.shutdown()
        self.assertFalse(vram.is_initialized())
        config.experimental.set_memory_growth(0, True)  # configuring again after shutdown

    def test_shutdown_refused_while_live(self):
        ptr = vram.malloc(1)
        with self.assertRaises(ValueError):
            vram.shutdown()
        vram.free(ptr)
        vram.shutdown()

    def test_malloc_free(self):
        ptr = vram.malloc(1000)
        self.assertIsInstance(ptr, int)
        self.assertEqual(ptr % 256, 0)
        self.assertEqual(config.experimental.get_memory_info('GPU:0'), {'current': 1024, 'peak': 1024})
        vram.free(ptr)
        self.assertEqual(config.experimental.get_memory_info('GPU:0'), {'current': 0, 'peak': 1024})
        config.experimental.reset_memory_stats('GPU:0')
        self.assertEqual(config.experimental.get_memory_info('GPU:0')['peak'], 0)
        self.assertEqual(vram.malloc(0), 0)
        vram.free(0)
        vram.free(None)

    def test_double_free(self):
        ptr = vram.malloc('1KiB', device='GPU:1')
        vram.free(ptr)
        with self.assertRaises(vram.VramError):
            vram.free(ptr)

    def test_trim(self):
        config.experimental.set_memory_growth(0, True)
        ptr = vram.malloc('32MiB')
        vram.free(ptr)
        before = config.get_memory_info_full(0)
        self.assertGreater(before['reserved'], 0)
        vram.trim(0)
        after = config.get_memory_info_full('GPU:0')
        self.assertEqual(after['reserved'], 0)
        self.assertGreater(after['num_driver_frees'], before['num_driver_frees'])
        vram.free(vram.malloc('32MiB'))
        cached = config.get_memory_info_full(0)['reserved']
        config.trim('GPU:0', keep_bytes='64MiB')     # within what may stay: nothing goes back
        self.assertEqual(config.get_memory_info_full(0)['reserved'], cached)

    def test_live_limit(self):
        config.experimental.set_memory_growth(0, True)
        config.set_logical_device_configuration(0, [config.LogicalDeviceConfiguration(memory_limit=256)])
        self.assertEqual(vram.get_live_limit('GPU:0'), (256 << 20, 256 << 20))
        a = vram.malloc('64MiB')
        vram.free(vram.malloc('32MiB'))
        vram.set_live_limit(0, '48MiB')                 # under the 64 MiB in use: nothing live is touched
        info = config.get_memory_info_full(0)
        self.assertEqual((info['current'], info['reserved']), (64 << 20, 64 << 20))
        self.assertEqual((info['live_limit'], info['over_limit']), (48 << 20, 16 << 20))
        with self.assertRaisesRegex(vram.OutOfMemoryError, "the live limit of 50331648 bytes"):
            vram.malloc('2MiB')
        vram.free(a)
        self.assertEqual(config.get_memory_info_full(0)['over_limit'], 0)
        with self.assertRaisesRegex(ValueError, "more than the 268435456 bytes the configuration allowed"):
            vram.set_live_limit(0, (256 << 20) + 1)
        with self.assertRaises(TypeError):
            vram.set_live_limit(0, 1.5)
        with self.assertRaises(ValueError):
            vram.set_live_limit(0, -1)
        vram.set_live_limit('GPU:0', 256 << 20)
        self.assertEqual(vram.get_live_limit(0), (256 << 20, 256 << 20))

    def test_overflow_to_host_memory(self):
        config.experimental.set_memory_growth(0, True)
        config.set_logical_device_configuration(0, [config.LogicalDeviceConfiguration(memory_limit=64)])
        os.environ["VRAM_ALLOC_CONF"] = "overflow:host,overflow_max_mb:32"   # (this test's child only)
        a = vram.malloc('48MiB')
        b = vram.malloc('24MiB')                        # 16 MiB left on the device: host memory
        info = config.get_memory_info_full(0)
        self.assertEqual((info['overflow_bytes'], info['overflow_blocks'], info['overflow_max']),
                         (24 << 20, 1, 32 << 20))
        with self.assertRaisesRegex(vram.OutOfMemoryError, "its cap overflow_max_mb of 33554432 bytes"):
            vram.malloc('24MiB')
        vram.free(b)
        vram.free(a)
        self.assertEqual(config.get_memory_info_full(0)['overflow_bytes'], 0)

    def test_memory_info_struct_matches_the_header(self):
        """ctypes' vram_memory_info has include/vram.h's fields (VRAM_MEMORY_INFO_FIELDS), in order and of
        their types, where the library lays them out (a missing field lets vram_get_memory_info write past
        the Python buffer)."""
        header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "vram.h")
        with open(header) as f:
            text = f.read()
        table = re.search(r"#define VRAM_MEMORY_INFO_FIELDS\(X\)(.*?)\n\n", text, re.S).group(1)
        table = re.sub(r"/\*.*?\*/", "", table, flags=re.S)
        in_header = re.findall(r"X\((\w+), (\w+)\)", table)
        self.assertEqual(len(in_header), table.count("X("))
        self.assertGreaterEqual(len(in_header), 12)
        reported = vram._lib.memory_info_fields()
        self.assertEqual([(name, ctype) for name, ctype, _, _ in reported], [(n, t) for t, n in in_header])
        types = {"size_t": ctypes.c_size_t, "uint64_t": ctypes.c_uint64}
        self.assertEqual(vram._lib.MemoryInfoStruct._fields_, [(n, types[t]) for t, n in in_header])
        for name, _, offset, size in reported:
            field = getattr(vram._lib.MemoryInfoStruct, name)
            self.assertEqual((field.offset, field.size), (offset, size), name)
        self.assertEqual(ctypes.sizeof(vram._lib.MemoryInfoStruct), reported[-1][2] + reported[-1][3])

    def test_memory_info_layout_disagreement_is_refused(self):
        """The check that builds the ctypes structure fails when ctypes would lay a field out elsewhere
        than the library reports, or the library reports a type Python does not know."""
        reported = vram._lib.memory_info_fields()
        for bad, says in (
                ([(n, t, o + 8 * (i == 3), s) for i, (n, t, o, s) in enumerate(reported)], "peak_reserved"),
                ([(n, "uint32_t" if i == 0 else t, o, s) for i, (n, t, o, s) in enumerate(reported)], "uint32_t"),
                ([(n, t, o, s) for i, (n, t, o, s) in enumerate(reported) if i != 1], "reserved")):
            class Probe(ctypes.Structure):
                pass
            with self.assertRaises(ImportError) as cm:
                vram._lib.set_fields(Probe, bad)
            self.assertIn(says, str(cm.exception))
        class Good(ctypes.Structure):
            pass
        vram._lib.set_fields(Good, reported)
        self.assertEqual(ctypes.sizeof(Good), ctypes.sizeof(vram._lib.MemoryInfoStruct))

    def test_memory_info_full_keys(self):
        info = config.get_memory_info_full(0)
        self.assertEqual(list(info), ['current', 'peak', 'reserved', 'peak_reserved', 'limit', 'largest_free_block',
                                      'num_allocs', 'num_frees', 'num_ooms', 'num_driver_allocs', 'num_driver_frees', 'num_driver_moves',
                                      'plan_bytes', 'plan_steps', 'plan_ends', 'plan_given_back',
                                      'plan_slot_steps', 'plan_refused', 'asleep_bytes', 'asleep_host_bytes',
                                      'host_kept_bytes', 'live_limit', 'over_limit', 'overflow_bytes',
                                      'overflow_peak', 'overflow_blocks', 'num_overflows', 'overflow_max'])
        self.assertEqual((info['plan_bytes'], info['plan_steps'], info['plan_ends']), (0, 0, 0))   # nothing repeated yet
        self.assertEqual(list(config.experimental.get_memory_info(0)), ['current', 'peak'])
        ptr = vram.malloc('1MiB')
        info = config.get_memory_info_full(0)
        self.assertEqual((info['current'], info['num_allocs'], info['num_frees']), (1 << 20, 1, 0))
        vram.free(ptr)

    def test_sizes(self):
        self.assertEqual(vram.parse_size('512'), 512)
        self.assertEqual(vram.parse_size('4K'), 4096)
        self.assertEqual(vram.parse_size('6GiB'), 6 * GIB)
        self.assertEqual(vram.parse_size('1.5G'), 3 * GIB // 2)
        self.assertEqual(vram.parse_size('2TB'), 2 << 40)
        with self.assertRaises(ValueError):
            vram.parse_size('lots')
        with self.assertRaises(ValueError):
            config.set_memory_limit(0, -1)
        with self.assertRaises(TypeError):
            config.set_memory_limit(0, 1.5)

    def test_version_and_diagnose(self):
        self.assertRegex(vram.__version__, r"^\d+\.\d+\.\d+$")
        self.assertTrue(vram.diagnose().startswith("2 GPUs: /physical_device:GPU:0 "), vram.diagnose())


class TorchFaceTest(IsolatedTestCase):
    """vram.torch without PyTorch (CI has none; the GPU machine runs python/tests/gpu_frameworks.py)."""

    def test_install_without_pytorch(self):
        try:
            import torch  # noqa: F401
            self.skipTest("PyTorch is installed here")
        except ImportError:
            pass
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with self.assertRaises(ImportError):
                vram.torch.install()
        # refused before any build was tried: no "did not build" warning on the way
        self.assertEqual([str(w.message) for w in caught], [])

    def test_entry_points_exported(self):
        """The C functions the allocator library and the forwarder look up with dlsym (and
        vram_last_error, which the package itself needs to import at all)."""
        for name in ("vram_plugin_alloc", "vram_plugin_free", "vram_plugin_release", "vram_record_stream"):
            self.assertTrue(hasattr(vram._lib.lib, name), name)


if __name__ == "__main__":
    unittest.main()
