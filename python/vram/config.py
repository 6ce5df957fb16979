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
- set_logical_device_configuration(gpu, []) removes the split (the getter then returns [], as
  TensorFlow's).
- Logical GPUs are numbered in index order whatever order set_visible_devices was given (which
  get_visible_devices keeps).

A physical GPU may be given as a PhysicalDevice, its name ('/physical_device:GPU:0'), 'GPU:0' or its
index (get_device_details takes a PhysicalDevice only, as TensorFlow's); a logical GPU as a device
string with TensorFlow's rules ('GPU:0', '/device:GPU:0', '/job:localhost/replica:0/task:0/device:GPU:0';
numbers in ASCII digits, nothing after the last: 'GPU:0\n' and 'GPU:\u0660' do not parse), a LogicalDevice
or its index.
A memory limit never turns into no limit by rounding: set_memory_limit refuses a size string of 0 bytes
('0.4'); only None (or the int 0) removes a limit.
vram's additions: set_memory_limit / get_memory_limit (a hard cap per card), trim,
get_memory_info_full (every statistic) and get_device_details.
"""
import collections
import ctypes
import types

from . import _core, _lib
from ._errors import check, status_error

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
    return status_error("VRAM_ERR_UNRECOGNIZED_DEVICE", "Unrecognized device: %s" % repr(device))


def _physical_struct(device):
    """The vram_physical_device of a physical GPU (a PhysicalDevice, its name, 'GPU:0' or its index);
    ValueError("Unrecognized device: ...") as TensorFlow's for anything else."""
    for d in _core.physical_structs():
        name = d.name.decode()
        if isinstance(device, PhysicalDevice):
            found = device == PhysicalDevice(name, _GPU)
        elif isinstance(device, str):
            found = device in (name, name[len("/physical_device:"):])
        else:
            found = type(device) is int and device == d.index   # (not a bool, a float or a tuple)
        if found:
            return d
    raise _unrecognized(device)


def _physical_index(device):
    return _physical_struct(device).index


def _wants_gpus(device_type):
    return device_type is None or device_type == _GPU


def _as_list(devices):
    """TensorFlow's rule: a list is a list of devices, anything else (a tuple too) one device."""
    return list(devices) if isinstance(devices, list) else [devices]


def _physical_device(device):
    d = _physical_struct(device)
    return PhysicalDevice(d.name.decode(), _GPU)


# what this process set, which the C library keeps in another form: the visible devices in the order
# given (it keeps a set), the GPUs whose split was set to [] (it keeps no split)
_visible_given = None
_empty_split = set()


# ---- physical devices and visibility ---------------------------------------------------------

def list_physical_devices(device_type=None):
    """The GPUs as PhysicalDevice('/physical_device:GPU:0', 'GPU'); [] without a GPU. Does not start."""
    if not _wants_gpus(device_type):
        return []
    return [PhysicalDevice(d.name.decode(), _GPU) for d in _core.physical_structs()]


def get_device_details(device):
    """TensorFlow's keys ('device_name', 'compute_capability') and vram's (uuid, pci_bus_id, total_bytes)."""
    if not isinstance(device, PhysicalDevice):
        raise ValueError("device must be a tf.config.PhysicalDevice, but got: %s" % (device,))
    try:
        d = _physical_struct(device)
    except ValueError:
        raise ValueError("The PhysicalDevice must be one obtained from calling `tf.config.list_physical_devices`, "
                         "but got: %s" % (device,)) from None
    return {"device_name": d.product.decode(), "compute_capability": (d.compute_major, d.compute_minor),
            "uuid": d.uuid.decode(), "pci_bus_id": d.pci_bus_id.decode(), "total_bytes": d.total_bytes}


def set_visible_devices(devices, device_type=None):
    """Makes only `devices` (a device or a list; [] hides all GPUs) visible to the runtime; the order
    given (and a device listed twice) is kept for get_visible_devices."""
    global _visible_given
    devices = _as_list(devices)
    if not _wants_gpus(device_type):
        if devices:
            raise _unrecognized(devices[0])
        return
    given = [_physical_device(d) for d in devices]
    if _core.is_initialized() and given != get_visible_devices():
        raise status_error("VRAM_ERR_ALREADY_INITIALIZED", "Visible devices cannot be modified after being initialized")
    indices = list(dict.fromkeys(_physical_index(d) for d in given))   # (distinct, in order)
    array = (ctypes.c_int * max(len(indices), 1))(*indices)
    check(lib.vram_set_visible_devices(array, len(indices)))
    _visible_given = given


def get_visible_devices(device_type=None):
    """The visible GPUs (every GPU until set_visible_devices), in the order set_visible_devices got."""
    if not _wants_gpus(device_type):
        return []
    indices = _core.gpu_list(lib.vram_get_visible_devices, ctypes.c_int)
    if _visible_given is not None and {_physical_index(d) for d in _visible_given} == set(indices):
        return list(_visible_given)
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
    """A hard cap on what vram holds from the card: bytes or a size string ('6GiB'); None, or the int 0
    (vram_set_memory_limit's 0), removes it. A size string of 0 bytes ('0', or '0.4' rounded down) is
    refused with ValueError and the limit in force stays: a limit never turns into none by rounding."""
    if limit is None or (type(limit) is int and limit == 0):
        limit_bytes = 0
    else:
        limit_bytes = _core.to_bytes(limit, "limit")
        if limit_bytes == 0:
            raise status_error("VRAM_ERR_INVALID_ARGUMENT", "memory limit %r is 0 bytes: a limit must be larger "
                               "than zero (None removes the limit)" % (limit,))
    check(lib.vram_set_memory_limit(_physical_index(device), limit_bytes))


def get_memory_limit(device):
    """The limit set with set_memory_limit in bytes, None when none is set."""
    limit = ctypes.c_size_t(0)
    check(lib.vram_get_memory_limit(_physical_index(device), ctypes.byref(limit)))
    return limit.value or None


# ---- logical devices -------------------------------------------------------------------------

def _limit_mb(config):
    if not isinstance(config, LogicalDeviceConfiguration):
        raise TypeError("logical_devices must be a list of tf.config.LogicalDeviceConfiguration, got an item %r"
                        % (config,))
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
    if mb > _core.SIZE_MAX >> 20:
        raise ValueError("memory_limit is beyond what a size_t holds in bytes: %r" % (config,))
    return mb


def set_logical_device_configuration(device, logical_devices):
    """Splits a GPU into logical devices, each with its own hard limit (memory_limit, in MiB); a list
    of LogicalDeviceConfiguration ([] removes the split)."""
    index = _physical_index(device)
    if not isinstance(logical_devices, (list, tuple)) or isinstance(logical_devices, LogicalDeviceConfiguration):
        raise TypeError("logical_devices must be a list of tf.config.LogicalDeviceConfiguration, not %r"
                        % (logical_devices,))
    mbs = [_limit_mb(c) for c in logical_devices]
    if _core.is_initialized() and get_logical_device_configuration(device) != list(logical_devices):
        raise status_error("VRAM_ERR_ALREADY_INITIALIZED", "Virtual devices cannot be modified after being initialized")
    configs = (_lib.LogicalDeviceConfigurationStruct * max(len(mbs), 1))(*[(mb,) for mb in mbs])
    check(lib.vram_set_logical_device_configuration(index, configs, len(mbs)))
    if mbs:
        _empty_split.discard(index)
    else:
        _empty_split.add(index)


def get_logical_device_configuration(device):
    """The LogicalDeviceConfiguration list set for a GPU, None until set ([] after setting [])."""
    index = _physical_index(device)
    status, configs = _core.list_call(lib.vram_get_logical_device_configuration,
                                      _lib.LogicalDeviceConfigurationStruct, index)
    check(status)
    if not configs:
        return [] if index in _empty_split else None
    return [LogicalDeviceConfiguration(memory_limit=c.memory_limit_mb) for c in configs]


def list_logical_devices(device_type=None):
    """The logical GPUs, LogicalDevice('/device:GPU:0', 'GPU'); starts the runtime (whatever the
    device type, as TensorFlow's). [] without a GPU."""
    devices = _core.gpu_list(lib.vram_list_logical_devices, _lib.LogicalDeviceStruct)
    if not _wants_gpus(device_type):
        return []
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


def get_memory_usage(device):
    """Bytes in use on a logical GPU (tf.config.experimental.get_memory_usage, deprecated there in favour
    of get_memory_info(device)['current'])."""
    return get_memory_info(device)["current"]


trim = _core.trim

experimental = types.SimpleNamespace(
    set_memory_growth=set_memory_growth,
    get_memory_growth=get_memory_growth,
    get_memory_info=get_memory_info,
    reset_memory_stats=reset_memory_stats,
    get_memory_usage=get_memory_usage,
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
