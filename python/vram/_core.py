"""The runtime's life cycle, raw allocation, sizes and device look-up, over libvram's C API.

Shared by vram.config (the tf.config face) and the top-level functions of the package.
"""
import ctypes
import re

from . import _lib
from ._errors import check

lib = _lib.lib

_LOGICAL_NAME = re.compile(r"^(?:.*/)?(?:device:)?GPU:(\d+)$", re.IGNORECASE)


def version():
    """vram_version_string(): "0.1.0"."""
    return lib.vram_version_string().decode("ascii")


# ---- sizes ----------------------------------------------------------------------------------

def parse_size(text):
    """Bytes in a size string: "512", "4K", "6GiB", "1.5G" (powers of 1024)."""
    out = ctypes.c_size_t(0)
    check(lib.vram_parse_size(str(text).encode("utf-8"), ctypes.byref(out)))
    return out.value


def to_bytes(size, what="size"):
    """A byte count from an int or a size string; ValueError for anything else or a negative count."""
    if isinstance(size, str):
        return parse_size(size)
    if isinstance(size, bool) or not isinstance(size, int):
        raise ValueError("%s must be a number of bytes or a size string such as '6GiB', not %r" % (what, size))
    if size < 0:
        raise ValueError("%s must not be negative: %d" % (what, size))
    return size


# ---- devices --------------------------------------------------------------------------------

def list_call(fn, item_type, *args):
    """Calls a C list function as (args..., out, capacity, &count): once for the count, once to fill.

    Returns (status, the items filled).
    """
    count = ctypes.c_int(0)
    status = fn(*args, None, 0, ctypes.byref(count))
    if status != _lib.OK:
        return status, []
    items = (item_type * max(count.value, 1))()
    status = fn(*args, items, count.value, ctypes.byref(count))
    return status, list(items[:count.value]) if status == _lib.OK else []


def gpu_list(fn, item_type, *args):
    """list_call's items, [] when there is no usable GPU (as TensorFlow's lists); other failures raise."""
    status, items = list_call(fn, item_type, *args)
    if status == _lib.ERR_NO_DEVICE:
        return []
    check(status)
    return items


def physical_structs():
    """The vram_physical_device structs; [] without a usable GPU (vram_last_error() says why)."""
    return gpu_list(lib.vram_list_physical_devices, _lib.PhysicalDeviceStruct)


def logical_index(device):
    """The index of a logical GPU given as an int, 'GPU:0', '/device:GPU:0' or a LogicalDevice."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    name = getattr(device, "name", device)
    match = _LOGICAL_NAME.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError("Unrecognized device: %r (vram's devices are GPUs: 'GPU:0', '/device:GPU:0', a "
                         "LogicalDevice or an index)" % (device,))
    return int(match.group(1))


def logical_for_physical(device):
    """The first logical GPU on physical card `device` (a CUDA device ordinal); starts the runtime."""
    logical = ctypes.c_int(-1)
    check(lib.vram_logical_device_of(device, ctypes.byref(logical)))
    return logical.value


# ---- life cycle ------------------------------------------------------------------------------

def init():
    """Starts the runtime (idempotent); the configuration is frozen from then on."""
    check(lib.vram_init())


def shutdown():
    """Returns every byte to the driver and allows configuring again (ValueError while blocks are live)."""
    check(lib.vram_shutdown())


def is_initialized():
    """Whether the runtime is started."""
    return bool(lib.vram_is_initialized())


# ---- allocation ------------------------------------------------------------------------------

def malloc(size, device=0):
    """Allocates `size` bytes (an int or a size string) on a logical GPU; returns the address as an int.

    Size 0 gives 0. Starts the runtime. Raises vram.OutOfMemoryError, whose message says why.
    """
    ptr = ctypes.c_void_p(None)
    check(lib.vram_malloc(ctypes.byref(ptr), to_bytes(size), logical_index(device)))
    return ptr.value or 0


def free(ptr):
    """Frees an address returned by malloc (0 or None is a no-op); a foreign address raises VramError."""
    check(lib.vram_free(ctypes.c_void_p(ptr or None)))


def trim(device, keep_bytes=0):
    """Returns cached free memory of a logical GPU to the driver until at most keep_bytes stay cached."""
    check(lib.vram_trim(logical_index(device), to_bytes(keep_bytes, "keep_bytes")))


# ---- diagnosis -------------------------------------------------------------------------------

def _describe(d):
    return "%s %s, %.2f GiB, compute %d.%d, %s" % (
        d.name.decode(), d.product.decode(), d.total_bytes / 2**30, d.compute_major, d.compute_minor,
        d.pci_bus_id.decode())


def diagnose():
    """Why there is no GPU, or one line describing the GPUs vram sees."""
    devices = physical_structs()
    if not devices:
        return "No GPU found: " + (_lib.last_error() or "the driver lists no device")
    plural = "s" if len(devices) > 1 else ""
    return "%d GPU%s: %s" % (len(devices), plural, "; ".join(_describe(d) for d in devices))
