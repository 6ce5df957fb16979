"""tf.config's API over vram: the same names, arguments, return values, exceptions and messages.

    import vram
    gpus = vram.config.list_physical_devices('GPU')
    vram.config.set_visible_devices(gpus[0], 'GPU')
    vram.config.experimental.set_memory_growth(gpus[0], True)
    vram.config.set_logical_device_configuration(
        gpus[0], [vram.config.LogicalDeviceConfiguration(memory_limit=6144)])
    print(vram.config.experimental.get_memory_info('GPU:0'))   # {'current': ..., 'peak': ...}

Differences from TensorFlow, all following from vram managing GPU memory only:

- There are no CPU devices: list_physical_devices('CPU') and get_visible_devices('CPU') are [],
  and set_visible_devices([], 'CPU') changes nothing.
- With no usable GPU the lists are [] (as in TensorFlow); vram.diagnose() says why.
- Growth may be combined with logical devices and may differ between GPUs (TensorFlow refuses both).
- LogicalDeviceConfiguration's memory_limit must be a whole number of MiB; experimental_priority
  and experimental_device_ordinal are not supported (ValueError when set).
- set_logical_device_configuration(gpu, []) removes the split, and the getter then returns None.

A physical GPU may be given as a PhysicalDevice, its name ('/physical_device:GPU:0'), 'GPU:0' or its
index; a logical GPU as a LogicalDevice, '/device:GPU:0', 'GPU:0' or its index.
vram's additions: set_memory_limit / get_memory_limit (a hard cap per card), trim,
get_memory_info_full (every statistic) and get_device_details.
"""
import collections
import ctypes
import types

from . import _core, _lib
from ._errors import check

lib = _lib.lib

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


class LogicalDeviceConfiguration(collections.namedtuple(
        "LogicalDeviceConfiguration", ["memory_limit", "experimental_priority", "experimental_device_ordinal"])):
    """One logical device of a split GPU: memory_limit is its hard limit in MiB (as TensorFlow's)."""
    __slots__ = ()

    def __new__(cls, memory_limit=None, experimental_priority=None, experimental_device_ordinal=None):
        return super().__new__(cls, memory_limit, experimental_priority, experimental_device_ordinal)


_GPU = "GPU"
_MEMORY_INFO_FIELDS = [name for name, _ in _lib.MemoryInfoStruct._fields_]


# ---- resolving devices ---------------------------------------------------------------------

def _unrecognized(device):
    return ValueError("Unrecognized device: %s" % repr(device))


def _physical_struct(device):
    """The vram_physical_device of a physical GPU; ValueError("Unrecognized device: ...") as TensorFlow's."""
    if isinstance(device, bool):
        raise _unrecognized(device)
    for d in _core.physical_structs():
        name = d.name.decode()
        short = name[len("/physical_device:"):]
        if device in (d.index, name, short, PhysicalDevice(name, _GPU)):
            return d
    raise _unrecognized(device)


def _physical_index(device):
    return _physical_struct(device).index


def _wants_gpus(device_type):
    return device_type is None or device_type == _GPU


def _as_list(devices):
    if isinstance(devices, (list, tuple)) and not isinstance(devices, PhysicalDevice):
        return list(devices)
    return [devices]


# ---- physical devices and visibility ---------------------------------------------------------

def list_physical_devices(device_type=None):
    """The GPUs as PhysicalDevice('/physical_device:GPU:0', 'GPU'); [] without a GPU. Does not start."""
    if not _wants_gpus(device_type):
        return []
    return [PhysicalDevice(d.name.decode(), _GPU) for d in _core.physical_structs()]


def get_device_details(device):
    """TensorFlow's keys ('device_name', 'compute_capability') and vram's (uuid, pci_bus_id, total_bytes)."""
    d = _physical_struct(device)
    return {"device_name": d.product.decode(), "compute_capability": (d.compute_major, d.compute_minor),
            "uuid": d.uuid.decode(), "pci_bus_id": d.pci_bus_id.decode(), "total_bytes": d.total_bytes}


def set_visible_devices(devices, device_type=None):
    """Makes only `devices` (a device or a list; [] hides all GPUs) visible to the runtime."""
    devices = _as_list(devices)
    if not _wants_gpus(device_type):
        if devices:
            raise _unrecognized(devices[0])
        return
    indices = [_physical_index(d) for d in devices]
    array = (ctypes.c_int * max(len(indices), 1))(*indices)
    check(lib.vram_set_visible_devices(array, len(indices)))


def get_visible_devices(device_type=None):
    """The visible GPUs (every GPU until set_visible_devices)."""
    if not _wants_gpus(device_type):
        return []
    indices = _core.gpu_list(lib.vram_get_visible_devices, ctypes.c_int)
    names = {d.index: d.name.decode() for d in _core.physical_structs()}
    return [PhysicalDevice(names[i], _GPU) for i in indices]


# ---- growth and limits -----------------------------------------------------------------------

def set_memory_growth(device, enable):
    """Takes memory on demand instead of nearly the whole card at start."""
    check(lib.vram_set_memory_growth(_physical_index(device), 1 if enable else 0))


def get_memory_growth(device):
    """True or False as set, None until set."""
    enabled = ctypes.c_int(-1)
    check(lib.vram_get_memory_growth(_physical_index(device), ctypes.byref(enabled)))
    return None if enabled.value < 0 else bool(enabled.value)


def set_memory_limit(device, limit):
    """A hard cap on what vram holds from the card: bytes or a size string ('6GiB'); None or 0 removes it."""
    limit_bytes = 0 if limit is None else _core.to_bytes(limit, "limit")
    check(lib.vram_set_memory_limit(_physical_index(device), limit_bytes))


def get_memory_limit(device):
    """The limit set with set_memory_limit in bytes, None when none is set."""
    limit = ctypes.c_size_t(0)
    check(lib.vram_get_memory_limit(_physical_index(device), ctypes.byref(limit)))
    return limit.value or None


# ---- logical devices -------------------------------------------------------------------------

def _limit_mb(config):
    if config.memory_limit is None:
        raise ValueError("Setting memory limit is required for GPU virtual devices")
    if config.experimental_priority is not None or config.experimental_device_ordinal is not None:
        raise ValueError("vram does not support experimental_priority or experimental_device_ordinal: %r"
                         % (config,))
    mb = config.memory_limit
    if isinstance(mb, float) and mb.is_integer():
        mb = int(mb)
    if isinstance(mb, bool) or not isinstance(mb, int) or mb < 1:
        raise ValueError("memory_limit must be a positive whole number of MiB: %r" % (config,))
    return mb


def set_logical_device_configuration(device, logical_devices):
    """Splits a GPU into logical devices, each with its own hard limit (memory_limit, in MiB)."""
    index = _physical_index(device)
    mbs = [_limit_mb(c) for c in logical_devices]
    configs = (_lib.LogicalDeviceConfigurationStruct * max(len(mbs), 1))(*[(mb,) for mb in mbs])
    check(lib.vram_set_logical_device_configuration(index, configs, len(mbs)))


def get_logical_device_configuration(device):
    """The LogicalDeviceConfiguration list set for a GPU, None when it is not split."""
    status, configs = _core.list_call(lib.vram_get_logical_device_configuration,
                                      _lib.LogicalDeviceConfigurationStruct, _physical_index(device))
    check(status)
    return [LogicalDeviceConfiguration(memory_limit=c.memory_limit_mb) for c in configs] or None


def list_logical_devices(device_type=None):
    """The logical GPUs, LogicalDevice('/device:GPU:0', 'GPU'); starts the runtime. [] without a GPU."""
    if not _wants_gpus(device_type):
        return []
    devices = _core.gpu_list(lib.vram_list_logical_devices, _lib.LogicalDeviceStruct)
    return [LogicalDevice(d.name.decode(), _GPU) for d in devices]


# ---- statistics ------------------------------------------------------------------------------

def get_memory_info_full(device):
    """Every field of vram_memory_info: current, peak, reserved, peak_reserved, limit, ... (bytes, counts)."""
    info = _lib.MemoryInfoStruct()
    check(lib.vram_get_memory_info(_core.logical_index(device), ctypes.byref(info)))
    return {name: getattr(info, name) for name in _MEMORY_INFO_FIELDS}


def get_memory_info(device):
    """{'current': bytes in use, 'peak': their high-water mark} of a logical GPU; starts the runtime."""
    info = get_memory_info_full(device)
    return {"current": info["current"], "peak": info["peak"]}


def reset_memory_stats(device):
    """Sets the peak to what is in use now (and peak_reserved to what is reserved)."""
    check(lib.vram_reset_memory_stats(_core.logical_index(device)))


trim = _core.trim

experimental = types.SimpleNamespace(
    set_memory_growth=set_memory_growth,
    get_memory_growth=get_memory_growth,
    get_memory_info=get_memory_info,
    reset_memory_stats=reset_memory_stats,
    get_device_details=get_device_details,
    list_physical_devices=list_physical_devices,
    list_logical_devices=list_logical_devices,
    set_visible_devices=set_visible_devices,
    get_visible_devices=get_visible_devices,
    set_virtual_device_configuration=set_logical_device_configuration,
    get_virtual_device_configuration=get_logical_device_configuration,
    VirtualDeviceConfiguration=LogicalDeviceConfiguration,
)
experimental.__doc__ = "tf.config.experimental's names (growth, memory info and the older aliases)."

__all__ = [
    "PhysicalDevice", "LogicalDevice", "LogicalDeviceConfiguration", "experimental",
    "list_physical_devices", "list_logical_devices", "set_visible_devices", "get_visible_devices",
    "set_logical_device_configuration", "get_logical_device_configuration", "get_device_details",
    "set_memory_growth", "get_memory_growth", "get_memory_info", "get_memory_info_full", "reset_memory_stats",
    "set_memory_limit", "get_memory_limit", "trim",
]
