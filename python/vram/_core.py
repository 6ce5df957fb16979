"""The runtime's life cycle, raw allocation, tags, sleep and wake, sizes and device look-up, over
libvram's C API.

Shared by vram.config (the tf.config face) and the top-level functions of the package.
"""
import ctypes
import re
import threading

from . import _lib
from ._errors import VramError, check, status_error

lib = _lib.lib

SIZE_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
INT_MAX = 2 ** 31 - 1
# A device string's numbers are ASCII digits only, as TensorFlow's parser takes them: not \d, which takes
# every script's digits ('GPU:\u0660'), and every pattern is matched whole (fullmatch; '$' matches before a
# trailing newline, so 'GPU:0\n' would pass).
_INDEX = r"[0-9]+"
_TYPE = r"[A-Za-z_][A-Za-z0-9_]*"
_FULL_NAME_PART = re.compile(r"/(?:job:([A-Za-z0-9_-]+)|replica:(%s)|task:(%s)|device:(%s):(%s|\*)|(cpu|gpu):(%s|\*))"
                             % (_INDEX, _INDEX, _TYPE, _INDEX, _INDEX))
_LOCAL_NAME = re.compile(r"(%s):(%s)" % (_TYPE, _INDEX))
_JOB = ("localhost", 0, 0)   # a logical device's job, replica and task, as TensorFlow names local devices


def version():
    """vram_version_string(): "0.1.0"."""
    return lib.vram_version_string().decode("ascii")


# ---- sizes ----------------------------------------------------------------------------------

def parse_size(text):
    """Bytes in a size string: "512", "4K", "6GiB", "1.5G" (powers of 1024); ValueError when malformed."""
    if not isinstance(text, str):
        raise TypeError("a size string such as '6GiB' is needed, not %r" % (text,))
    if "\x00" in text:
        raise ValueError("%r: a size string holds no NUL character" % (text,))
    out = ctypes.c_size_t(0)
    check(lib.vram_parse_size(text.encode("utf-8"), ctypes.byref(out)))
    return out.value


def check_int(value, what, lo, hi):
    """value as an int in [lo, hi]: TypeError for what is no int (bool neither), ValueError outside."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, not %r" % (what, value))
    if not lo <= value <= hi:
        raise ValueError("%s must be between %d and %d: %d" % (what, lo, hi, value))
    return value


def to_bytes(size, what="size"):
    """A byte count from an int or a size string; TypeError for another type, ValueError for a count
    below 0 or beyond size_t (nothing wraps)."""
    if isinstance(size, str):
        return parse_size(size)
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError("%s must be a number of bytes or a size string such as '6GiB', not %r" % (what, size))
    if size < 0:
        raise ValueError("%s must not be negative: %d" % (what, size))
    if size > SIZE_MAX:
        raise ValueError("%s is beyond what a size_t holds (%d): %d" % (what, SIZE_MAX, size))
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


def parse_device_name(text):
    """TensorFlow's device string ('GPU:0', '/device:GPU:0', '/job:localhost/replica:0/task:0/device:GPU:1',
    '/gpu:0') as (job, replica, task, type, index), None for a part not given; None when it does not parse."""
    if not text.startswith("/"):
        match = _LOCAL_NAME.fullmatch(text)
        return (None, None, None, match.group(1), int(match.group(2))) if match else None
    job = replica = task = kind = index = None
    at = 0
    while at < len(text):
        match = _FULL_NAME_PART.match(text, at)   # (the next part starts with "/" where this one ends)
        if match is None:
            return None
        g = match.groups()
        if g[0] is not None:
            job = g[0]
        elif g[1] is not None:
            replica = int(g[1])
        elif g[2] is not None:
            task = int(g[2])
        else:
            kind = g[3] if g[3] is not None else g[5].upper()
            number = g[4] if g[4] is not None else g[6]
            index = None if number == "*" else int(number)
        at = match.end()
    return job, replica, task, kind, index


def one_line(text):
    """text with each character that is not printable escaped ('GPU:0\\n'), for a one-line message."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def logical_names():
    """The logical GPUs' names ('/device:GPU:0', ...); starts the runtime."""
    return [d.name.decode() for d in gpu_list(lib.vram_list_logical_devices, _lib.LogicalDeviceStruct)]


def logical_index(device):
    """The index of a logical GPU given as a device string (TensorFlow's rules and messages), a
    LogicalDevice or an index; starts the runtime for a string."""
    if isinstance(device, int) and not isinstance(device, bool):
        return check_int(device, "device", 0, INT_MAX)
    name = getattr(device, "name", device)
    if not isinstance(name, str):
        raise TypeError("device must be a string such as 'GPU:0', a LogicalDevice or an index, not %r" % (device,))
    parsed = parse_device_name(name)
    if parsed is None:
        raise status_error("VRAM_ERR_UNRECOGNIZED_DEVICE", "Failed parsing device name: '%s'. Note a valid device "
                           "string should at least contain a device type and a device index, like \"GPU:0\"."
                           % one_line(name))
    matched = []
    for i, local in enumerate(logical_names()):
        full = "/job:%s/replica:%d/task:%d%s" % (_JOB + (local,))
        mine = _JOB + ("GPU", i)
        if all(want is None or want == have for want, have in zip(parsed, mine)):
            matched.append((i, full))
        if len(matched) == 2:
            raise status_error("VRAM_ERR_UNRECOGNIZED_DEVICE", "Multiple devices match the provided string "
                               "'%s': '%s' and '%s'." % (name, matched[0][1], matched[1][1]))
    if not matched:
        raise status_error("VRAM_ERR_UNRECOGNIZED_DEVICE", "No matching devices found for '%s'" % name)
    return matched[0][0]


def logical_for_physical(device):
    """The first logical GPU on physical card `device` (a CUDA device ordinal); starts the runtime."""
    logical = ctypes.c_int(-1)
    check(lib.vram_logical_device_of(check_int(device, "device", 0, INT_MAX), ctypes.byref(logical)))
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
    nbytes = to_bytes(size)
    check(lib.vram_malloc(ctypes.byref(ptr), nbytes, logical_index(device)))
    return ptr.value or 0


def free(ptr):
    """Frees an address returned by malloc (0 or None is a no-op); a foreign address raises VramError."""
    if ptr is not None:
        check_int(ptr, "ptr", 0, SIZE_MAX)
    check(lib.vram_free(ctypes.c_void_p(ptr or None)))


def trim(device, keep_bytes=0):
    """Returns cached free memory of a logical GPU to the driver until at most keep_bytes stay cached."""
    check(lib.vram_trim(logical_index(device), to_bytes(keep_bytes, "keep_bytes")))


def set_live_limit(device, limit):
    """Moves a logical GPU's limit while the program runs (vram_set_live_limit): `limit` bytes (an int or
    a size string), at most what the configuration allowed it (ValueError naming that limit above it; a
    limit set from outside cannot be lifted). Lowered under what it holds, live blocks stay and its cached
    memory above goes back; requests that need more device memory raise vram.OutOfMemoryError (or go to
    host memory with the allocator option overflow:host) until frees bring it under. Starts the runtime."""
    check(lib.vram_set_live_limit(logical_index(device), to_bytes(limit, "limit")))


def get_live_limit(device):
    """(the live limit set, the limit the configuration allowed) of a logical GPU, in bytes; the live
    limit is the configured one until set_live_limit."""
    live, configured = ctypes.c_size_t(0), ctypes.c_size_t(0)
    check(lib.vram_get_live_limit(logical_index(device), ctypes.byref(live), ctypes.byref(configured)))
    return live.value, configured.value


# ---- tags, sleep and wake --------------------------------------------------------------------

def _tag_arg(tag):
    """A tag for the C calls: bytes, or None; TypeError for what is no str (or None). The library says what
    a malformed one is (empty, over 63 bytes, not printable ASCII); a NUL is caught here, where it would
    cut the string."""
    if tag is None:
        return None
    if not isinstance(tag, str):
        raise TypeError("tag must be a string or None, not %r" % (tag,))
    if "\x00" in tag:
        raise ValueError("%r: a tag holds no NUL character" % (tag,))
    return tag.encode("utf-8")


def get_tag():
    """The calling thread's tag (vram.tag, vram_set_tag), or None."""
    out = ctypes.c_char_p()
    check(lib.vram_get_tag(ctypes.byref(out)))
    return out.value.decode("ascii") if out.value is not None else None


class tag:  # noqa: N801 - a context manager used as a function: with vram.tag("weights"):
    """Allocations the calling thread makes inside carry the tag (None: none), as vLLM's and
    torch_memory_saver's regions do; vram.sleep(device, tag) then puts their memory to sleep. Thread-local
    and nestable: the tag before is in force again on leaving. Under vram.torch, the tensors made inside
    (a CUDA graph's private pool created inside included) carry it.

        with vram.tag("weights"):
            model = load()
        vram.sleep(0, "weights")           # the weights leave the card, their addresses stay
        vram.wake(0, "weights")            # back, at the same addresses, with their bytes

    A tag is 1 to 63 bytes of printable ASCII (ValueError otherwise, TypeError for what is no str); a
    process has at most 32 tags."""

    def __init__(self, name):
        self._name = _tag_arg(name)
        self._before = threading.local()

    def __enter__(self):
        before = get_tag()
        check(lib.vram_set_tag(self._name))
        self._before.__dict__.setdefault("stack", []).append(before)
        return self._name.decode("ascii") if self._name is not None else None

    def __exit__(self, *exc):
        before = self._before.stack.pop()
        check(lib.vram_set_tag(before.encode("ascii") if before is not None else None))
        return False


def sleep(device, tag=None, offload=True):
    """Puts the memory of `tag` on a logical GPU to sleep (None: every block of it, and everything its
    pool caches), once the streams its blocks were used on have finished: the physical memory goes back
    to the driver, the blocks stay allocated at their addresses. offload=True copies their bytes to pinned
    host memory first (back at the wake), False drops them. Raises ValueError for a tag no block of the
    device carried, vram.VramError where the pool cannot sleep (preallocation: the reason says)."""
    if not isinstance(offload, bool):
        raise TypeError("offload must be True or False, not %r" % (offload,))
    name = _tag_arg(tag)
    check(lib.vram_sleep(logical_index(device), name, _lib.SLEEP_OFFLOAD if offload else _lib.SLEEP_DISCARD))


def wake(device, tag=None):
    """Brings the memory of `tag` (None: everything asleep) on a logical GPU back: mapped again at the same
    addresses, offloaded bytes copied back. All or nothing: vram.OutOfMemoryError (the message says
    whether the limit, the physical device's limit or the card) and everything stays asleep, nothing lost."""
    name = _tag_arg(tag)
    check(lib.vram_wake(logical_index(device), name))


# ---- diagnosis -------------------------------------------------------------------------------

def _describe(d):
    return "%s %s, %.2f GiB, compute %d.%d, %s" % (
        d.name.decode(), d.product.decode(), d.total_bytes / 2**30, d.compute_major, d.compute_minor,
        d.pci_bus_id.decode())


def diagnose():
    """Why there is no GPU, or one line describing the GPUs vram sees. Never raises for a runtime
    that cannot start (a bad VRAM_BACKEND, say): it answers "vram cannot start: <why>" instead."""
    try:
        devices = physical_structs()
    except (VramError, ValueError, MemoryError) as e:
        return "vram cannot start: %s" % e
    if not devices:
        return "No GPU found: " + (_lib.last_error() or "the driver lists no device")
    plural = "s" if len(devices) > 1 else ""
    return "%d GPU%s: %s" % (len(devices), plural, "; ".join(_describe(d) for d in devices))
