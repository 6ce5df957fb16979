"""Finds and loads libvram.so and declares the C functions the package calls.

The library is looked for, in order:

1. the path in the environment variable ``VRAM_LIBRARY``;
2. next to the installed package: the package's own folder (where ``pip install`` puts libvram.so,
   setup.py), then the library folder that ``cmake --install`` put libvram.so in (recorded in
   ``vram/_installed.py`` at install time);
3. the build tree of a source checkout: ``build/libvram.so`` at the repository root;
4. ``ctypes.util.find_library("vram")`` (the system's library path).

Every structure mirrors its C declaration in include/vram.h field by field (vram_memory_info's
fields are asked of the library, which reports their names, types, offsets and sizes), and every
function used has its argtypes and restype declared, so no call goes through ctypes' int defaults.
"""
import ctypes
import ctypes.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAMES = ("libvram.so", "libvram.so.0")

class PhysicalDeviceStruct(ctypes.Structure):
    """vram_physical_device."""
    _fields_ = [
        ("index", ctypes.c_int),
        ("name", ctypes.c_char * 64),
        ("product", ctypes.c_char * 128),
        ("uuid", ctypes.c_char * 48),
        ("pci_bus_id", ctypes.c_char * 32),
        ("total_bytes", ctypes.c_size_t),
        ("compute_major", ctypes.c_int),
        ("compute_minor", ctypes.c_int),
    ]


class LogicalDeviceConfigurationStruct(ctypes.Structure):
    """vram_logical_device_configuration."""
    _fields_ = [("memory_limit_mb", ctypes.c_size_t)]


class LogicalDeviceStruct(ctypes.Structure):
    """vram_logical_device."""
    _fields_ = [
        ("index", ctypes.c_int),
        ("physical_index", ctypes.c_int),
        ("name", ctypes.c_char * 64),
        ("memory_limit_bytes", ctypes.c_size_t),
    ]


class MemoryInfoStruct(ctypes.Structure):
    """vram_memory_info; its fields are the library's own (VRAM_MEMORY_INFO_FIELDS in include/vram.h),
    set below from what vram_memory_info_field reports."""


_int_p = ctypes.POINTER(ctypes.c_int)
_size_p = ctypes.POINTER(ctypes.c_size_t)

# name: (restype, argtypes)
_SIGNATURES = {
    "vram_version_string": (ctypes.c_char_p, []),
    "vram_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "vram_last_error": (ctypes.c_char_p, []),
    "vram_list_physical_devices": (ctypes.c_int, [ctypes.POINTER(PhysicalDeviceStruct), ctypes.c_int, _int_p]),
    "vram_set_visible_devices": (ctypes.c_int, [_int_p, ctypes.c_int]),
    "vram_get_visible_devices": (ctypes.c_int, [_int_p, ctypes.c_int, _int_p]),
    "vram_set_memory_growth": (ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
    "vram_get_memory_growth": (ctypes.c_int, [ctypes.c_int, _int_p]),
    "vram_set_memory_limit": (ctypes.c_int, [ctypes.c_int, ctypes.c_size_t]),
    "vram_get_memory_limit": (ctypes.c_int, [ctypes.c_int, _size_p]),
    "vram_set_logical_device_configuration": (
        ctypes.c_int, [ctypes.c_int, ctypes.POINTER(LogicalDeviceConfigurationStruct), ctypes.c_int]),
    "vram_get_logical_device_configuration": (
        ctypes.c_int, [ctypes.c_int, ctypes.POINTER(LogicalDeviceConfigurationStruct), ctypes.c_int, _int_p]),
    "vram_list_logical_devices": (ctypes.c_int, [ctypes.POINTER(LogicalDeviceStruct), ctypes.c_int, _int_p]),
    "vram_logical_device_of": (ctypes.c_int, [ctypes.c_int, _int_p]),
    "vram_init": (ctypes.c_int, []),
    "vram_is_initialized": (ctypes.c_int, []),
    "vram_shutdown": (ctypes.c_int, []),
    "vram_malloc": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]),
    "vram_free": (ctypes.c_int, [ctypes.c_void_p]),
    "vram_trim": (ctypes.c_int, [ctypes.c_int, ctypes.c_size_t]),
    "vram_set_live_limit": (ctypes.c_int, [ctypes.c_int, ctypes.c_size_t]),
    "vram_get_live_limit": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                                           ctypes.POINTER(ctypes.c_size_t)]),
    "vram_get_memory_info": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(MemoryInfoStruct)]),
    "vram_memory_info_field": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                              ctypes.POINTER(ctypes.c_char_p), _size_p, _size_p]),
    "vram_reset_memory_stats": (ctypes.c_int, [ctypes.c_int]),
    "vram_parse_size": (ctypes.c_int, [ctypes.c_char_p, _size_p]),
    "vram_set_tag": (ctypes.c_int, [ctypes.c_char_p]),
    "vram_get_tag": (ctypes.c_int, [ctypes.POINTER(ctypes.c_char_p)]),
    "vram_sleep": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
    "vram_wake": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p]),
}

# vram_sleep_mode (include/vram.h)
SLEEP_OFFLOAD = 0
SLEEP_DISCARD = 1


def _installed_dirs():
    """The library folder recorded by `cmake --install`, if this is an installed package."""
    try:
        from . import _installed  # written by CMake at install time only
    except ImportError:
        return []
    return [os.path.normpath(os.path.join(_HERE, _installed.LIBDIR_FROM_PACKAGE))]


def _candidates():
    """Paths to try, in order of preference."""
    env = os.environ.get("VRAM_LIBRARY")
    if env:
        return [env]
    build = os.path.join(_HERE, os.pardir, os.pardir, "build")
    dirs = [_HERE] + _installed_dirs() + [build]
    paths = [os.path.normpath(os.path.join(d, n)) for d in dirs for n in _NAMES]
    found = ctypes.util.find_library("vram")
    return paths + ([found] if found else [])


def _open():
    """Loads the first candidate that exists (VRAM_LIBRARY is loaded as given)."""
    candidates = _candidates()
    forced = bool(os.environ.get("VRAM_LIBRARY"))
    for path in candidates:
        if forced or os.path.exists(path) or os.sep not in path:
            return ctypes.CDLL(path), path
    raise ImportError("vram: libvram.so not found; looked at " + ", ".join(candidates) +
                      ". Install the package with it (pip install --no-build-isolation . in the source tree), "
                      "build it (cmake -S . -B build && cmake --build build) or set VRAM_LIBRARY to its path.")


def _declare(lib):
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


lib, path = _open()
_declare(lib)


def last_error():
    """The calling thread's message for its last failed call."""
    message = lib.vram_last_error()
    return message.decode("utf-8", "replace") if message else ""


def status_name(status):
    """'VRAM_ERR_OUT_OF_MEMORY' for a vram_status value."""
    return lib.vram_status_name(status).decode("ascii")


def _status_names():
    """vram_status's names by value, asked of the library (VRAM_STATUS_MAP in include/vram.h numbers
    them 0, 1, 2, ...; vram_status_name answers "VRAM_ERR_UNKNOWN" past the last one)."""
    names = []
    while len(names) < 256:
        name = status_name(len(names))
        if name == "VRAM_ERR_UNKNOWN":
            break
        names.append(name)
    return tuple(names)


# vram_status values, in the order of the C enum.
STATUS_NAMES = _status_names()
OK = STATUS_NAMES.index("VRAM_OK")
ERR_NO_DEVICE = STATUS_NAMES.index("VRAM_ERR_NO_DEVICE")


_C_TYPES = {"size_t": ctypes.c_size_t, "uint64_t": ctypes.c_uint64}


def memory_info_fields():
    """vram_memory_info's fields as the library reports them: (name, C type, offset, size) each, in
    order (vram_memory_info_field answers 0 past the last one)."""
    name, ctype = ctypes.c_char_p(), ctypes.c_char_p()
    offset, size = ctypes.c_size_t(), ctypes.c_size_t()
    fields = []
    while lib.vram_memory_info_field(len(fields), ctypes.byref(name), ctypes.byref(ctype), ctypes.byref(offset),
                                     ctypes.byref(size)):
        fields.append((name.value.decode("ascii"), ctype.value.decode("ascii"), offset.value, size.value))
    return fields


def set_fields(struct, reported):
    """Gives the ctypes Structure class `struct` the fields `reported` ((name, C type, offset, size) each,
    as memory_info_fields returns them) and checks that ctypes lays them out where the library does;
    ImportError, naming the first disagreement, otherwise (a type it does not know included)."""
    unknown = [(name, ctype) for name, ctype, _, _ in reported if ctype not in _C_TYPES]
    if unknown:
        raise ImportError("vram: libvram reports a field of a type the Python package does not know: %s %s"
                          % (unknown[0][1], unknown[0][0]))
    struct._fields_ = [(name, _C_TYPES[ctype]) for name, ctype, _, _ in reported]
    for name, ctype, offset, size in reported:
        field = getattr(struct, name)
        if (field.offset, field.size) != (offset, size):
            raise ImportError("vram: %s.%s lies at offset %d, %d bytes, in ctypes but at offset %d, %d bytes, "
                              "in libvram (%s)" % (struct.__name__, name, field.offset, field.size, offset, size, path))


set_fields(MemoryInfoStruct, memory_info_fields())
