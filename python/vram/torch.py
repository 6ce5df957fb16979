"""vram as PyTorch's CUDA allocator.

    import torch, vram
    vram.torch.install()        # before PyTorch initializes CUDA
    x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')   # served by vram

install() builds once, against the installed PyTorch, a small C++ library from the package's csrc/ (it
needs a C++ compiler: with ninja on PATH torch.utils.cpp_extension builds it and PyTorch caches it;
without, vram runs the compiler itself and caches it in ~/.cache/vram/torch_extensions), and makes its
allocator PyTorch's (vram.torch.mode says which of these three it got):

  "allocator"  csrc/allocator.cpp: a subclass of PyTorch's CUDAPluggableAllocator whose tensors go
               straight to libvram.so: vram_plugin_alloc on the current stream, and a deleter that calls
               vram_plugin_release (vram remembers each block's stream), so PyTorch's own table of
               every block under a mutex (what CUDAPluggableAllocator keeps to pass the stream back)
               is not touched on each allocation and free; tensor.record_stream(s) calls
               vram_record_stream (the block's memory is reused only once s passed its free). It needs
               CUDA's cuda_runtime_api.h, cuda.h and crt/host_defines.h of PyTorch's CUDA major version:
               a CUDA toolkit's (CUDA_HOME, as torch.utils.cpp_extension finds it) or, with no toolkit,
               NVIDIA's pip wheels' (a pip PyTorch brings nvidia-cuda-runtime-cuXX, the first two;
               crt/ comes with nvidia-cuda-nvcc-cuXX, or Triton's copy of CUDA's headers);
  "forwarder"  when that cannot be had (install() says which header is missing and what to install):
               csrc/forwarder.cpp, CUDAPluggableAllocator over a forwarder to vram_plugin_alloc /
               vram_plugin_free (PyTorch's headers and a C++ compiler only);
  "direct"     with install(build=False), or without a C++ compiler: CUDAPluggableAllocator over
               libvram.so's entry points themselves. PyTorch 2.11 then does not raise for a refused
               request: the tensor comes back with a null data pointer (vram.torch.last_error()
               says why).

Under the last two, tensor.record_stream does nothing (CUDAPluggableAllocator's own). install() warns
once when it did not get the first, with the build's error and what to do.

The first two turn a refused request into torch.OutOfMemoryError carrying vram's message (which
says whether a limit, a full card or fragmentation was the cause). Allocations are stream-ordered
on PyTorch's current stream. vram's configuration (vram.config) applies as it does to C programs;
configure before the first allocation.
"""
import os
import re
import shutil
import threading

from . import _core, _lib

_install_lock = threading.Lock()

_installed = None
mode = None   # after install(): "allocator", "forwarder" or "direct" (see above)

_HERE = os.path.dirname(os.path.abspath(__file__))
_CSRC = os.path.join(_HERE, "csrc")   # allocator.cpp, forwarder.cpp: package data

# The CUDA headers the allocator library's build needs: PyTorch's c10/cuda headers include the first two,
# and they include the third. Each with the macro that gives its CUDA version (12080: 12.8).
_CUDA_HEADERS = (("cuda_runtime_api.h", "CUDART_VERSION"), ("cuda.h", "CUDA_VERSION"), ("crt/host_defines.h", None))


def _source(name):
    """The path of csrc/<name> in the package; RuntimeError when the installation lacks it."""
    path = os.path.join(_CSRC, name)
    if not os.path.isfile(path):
        raise RuntimeError("%s is missing from the vram package (reinstall vram)" % path)
    return path


def _include_dir():
    """The folder holding vram.h: the installed package's include/ (pip), the source tree's include/
    (python/vram/../../include), or an installation's P/include beside P/lib/libvram.so."""
    lib = os.path.dirname(os.path.abspath(_lib.path)) if os.path.isabs(_lib.path) else ""
    for d in (os.path.join(_HERE, "include"), os.path.join(_HERE, "..", "..", "include"),
              os.path.join(lib, "..", "include"), os.path.join(lib, "..", "..", "include")):
        if os.path.isfile(os.path.join(d, "vram.h")):
            return os.path.realpath(d)
    raise RuntimeError("vram.h not found (looked in the package's include/, the source tree's include/ and "
                       "beside %s)" % _lib.path)


def _package_dirs(name):
    """The folders of the top-level package `name` on sys.path, without importing it ([] if none)."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _wheel_include_dirs():
    """Where pip's CUDA headers are, in order: each nvidia/<part>/include of NVIDIA's wheels (a pip
    PyTorch depends on nvidia-cuda-runtime-cuXX: nvidia/cuda_runtime/include; nvidia-cuda-nvcc-cuXX:
    nvidia/cuda_nvcc/include; CUDA 13's wheels: nvidia/cu13/include), then Triton's copy
    (triton/backends/nvidia/include; Triton comes with a pip PyTorch on Linux)."""
    dirs = []
    for base in _package_dirs("nvidia"):
        try:
            parts = sorted(os.listdir(base))
        except OSError:
            continue
        dirs += [os.path.join(base, p, "include") for p in parts if os.path.isdir(os.path.join(base, p, "include"))]
    dirs += [os.path.join(base, "backends", "nvidia", "include") for base in _package_dirs("triton")
             if os.path.isdir(os.path.join(base, "backends", "nvidia", "include"))]
    return dirs


def _header_major(path, macro):
    """The CUDA major version the header at `path` declares (#define CUDART_VERSION 12080: 12); None
    when it declares none."""
    if macro is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            found = re.search(r"^\s*#\s*define\s+%s\s+([0-9]+)" % macro, f.read(), re.M)
    except OSError:
        return None
    return int(found.group(1)) // 1000 if found else None


def _find_headers(dirs, major):
    """{header: the first of `dirs` holding it (for CUDA `major` where it says its version)}, for each of
    _CUDA_HEADERS found."""
    found = {}
    for header, macro in _CUDA_HEADERS:
        for d in dirs:
            path = os.path.join(d, header)
            if os.path.isfile(path) and _header_major(path, macro) in (None, major):
                found[header] = d
                break
    return found


def _wheel_requirement(header, cuda):
    """The pip requirement of NVIDIA's that holds `header` for CUDA `cuda` ("12.8"): the runtime's wheel,
    or for crt/ the compiler's (CUDA 11 and 12: -cuXX names; CUDA 13: nvidia-cuda-crt)."""
    major = int(cuda.split(".")[0])
    if header.startswith("crt/"):
        name = "nvidia-cuda-nvcc-cu%d" % major if major < 13 else "nvidia-cuda-crt"
    else:
        name = "nvidia-cuda-runtime-cu%d" % major if major < 13 else "nvidia-cuda-runtime"
    return '"%s==%s.*"' % (name, cuda)


def _cuda_headers(cuda, cuda_home, wheel_dirs=None):
    """Where the allocator library's build gets CUDA's headers, for PyTorch's CUDA version `cuda`
    ("12.8", torch.version.cuda) and the CUDA toolkit `cuda_home` (torch.utils.cpp_extension.CUDA_HOME:
    CUDA_HOME, CUDA_PATH, nvcc's, /usr/local/cuda, or None). One of:
      ("toolkit", [])   the toolkit has them, of that CUDA major version: PyTorch's own CUDA build;
      ("wheels", dirs)  NVIDIA's pip wheels (or Triton's copy) have them: the include folders to add;
      (None, why)       neither: why, naming each missing header and the pip command that brings it.
    `wheel_dirs` (default: _wheel_include_dirs()) is where pip's headers are looked for."""
    if not cuda:
        return None, "this PyTorch is built without CUDA (torch.version.cuda is None): install a CUDA build of PyTorch"
    major = int(cuda.split(".")[0])
    toolkit = os.path.join(cuda_home, "include") if cuda_home else None
    if toolkit and len(_find_headers([toolkit], major)) == len(_CUDA_HEADERS):
        return "toolkit", []
    if wheel_dirs is None:
        wheel_dirs = _wheel_include_dirs()
    found = _find_headers(wheel_dirs, major)
    if len(found) == len(_CUDA_HEADERS):
        return "wheels", list(dict.fromkeys(found[h] for h, _ in _CUDA_HEADERS))
    missing = [h for h, _ in _CUDA_HEADERS if h not in found]
    wanted = {}
    for h in missing:
        wanted.setdefault(_wheel_requirement(h, cuda), []).append(h)
    looked = []   # the folders looked in, NVIDIA's as <site>/nvidia/*/include
    for d in wheel_dirs:
        parts = d.split(os.sep)
        place = os.sep.join(parts[:-2] + ["*", "include"]) if parts[-3:-2] == ["nvidia"] else d
        if place not in looked:
            looked.append(place)
    if cuda_home is None:
        toolkit_note = "none: CUDA_HOME unset, no nvcc on PATH, no /usr/local/cuda"
    else:
        toolkit_note = "%s: not all of them, or not CUDA %d" % (toolkit, major)
    return None, ("it needs CUDA %s's %s, found neither in NVIDIA's pip wheels (%s) nor in a CUDA toolkit (%s). "
                  "Install: pip install %s (or set CUDA_HOME to a CUDA %s toolkit)"
                  % (cuda, ", ".join(missing), ", ".join(looked) or "none installed", toolkit_note,
                     " ".join(wanted), cuda))


def _toolchain_missing():
    """What both builds need and this machine lacks, with what to install: a C++ compiler ($CXX, else
    c++). Ninja is not needed: without it, _load() runs the compiler itself."""
    cxx = os.environ.get("CXX") or "c++"
    if shutil.which(cxx.split()[0]) is None:
        return ["no C++ compiler (%s is not on PATH: apt-get install g++, or set CXX)" % cxx]
    return []


def _load(name, sources, with_cuda, extra_include_paths, extra_ldflags):
    """torch.utils.cpp_extension.load's build of the extension `name` (PyTorch caches it), which needs
    ninja; without ninja on PATH, _compile()'s: the same compiler and flags, one command, no ninja."""
    from torch.utils import cpp_extension
    if shutil.which("ninja") is not None:
        return cpp_extension.load(name=name, sources=sources, with_cuda=with_cuda, verbose=False,
                                  extra_include_paths=extra_include_paths, extra_ldflags=extra_ldflags)
    includes = list(extra_include_paths)
    if with_cuda:   # (what load's with_cuda adds: the toolkit's headers and runtime library)
        includes.append(os.path.join(cpp_extension.CUDA_HOME, "include"))
        extra_ldflags = extra_ldflags + ["-L" + os.path.join(cpp_extension.CUDA_HOME, "lib64"), "-lcudart",
                                         "-lc10_cuda", "-ltorch_cuda"]
    return _compile(name, sources, includes, extra_ldflags)


def _compile(name, sources, includes, ldflags):
    """Builds the PyTorch extension `name` from `sources` with $CXX (else c++) in one command, against this
    PyTorch's headers and libraries (the flags torch.utils.cpp_extension gives a C++ extension), into
    $XDG_CACHE_HOME/vram/torch_extensions (~/.cache/...), under a name made from everything that goes into
    it, so that a build is reused until PyTorch, the sources or the flags change; imports it."""
    import hashlib
    import importlib.util
    import subprocess
    import sysconfig
    import tempfile
    import torch
    from torch.utils import cpp_extension
    cxx = (os.environ.get("CXX") or "c++").split()
    flags = ["-DTORCH_EXTENSION_NAME=" + name, "-DTORCH_API_INCLUDE_EXTENSION_H",
             "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI), "-fPIC", "-std=c++17", "-O2",
             "-shared"] + ["-isystem" + d for d in cpp_extension.include_paths()] + \
            ["-isystem" + sysconfig.get_paths()["include"]] + ["-I" + d for d in includes]
    libs = ["-L" + d for d in cpp_extension.library_paths()] + \
        ["-Wl,-rpath," + d for d in cpp_extension.library_paths()] + \
        list(ldflags) + ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    key = hashlib.sha256(repr((torch.__version__, cxx, flags, libs)).encode())
    for s in sources:
        with open(s, "rb") as f:
            key.update(f.read())
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vram", "torch_extensions")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, "%s-%s.so" % (name, key.hexdigest()[:16]))
    if not os.path.isfile(path):
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=cache)
        os.close(fd)
        try:
            out = subprocess.run(cxx + flags + list(sources) + libs + ["-o", tmp], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, universal_newlines=True)
            if out.returncode != 0 or os.path.getsize(tmp) == 0:
                raise RuntimeError("%s (exit %d, no ninja: vram ran the compiler): %s"
                                   % (" ".join(cxx), out.returncode, out.stdout[-2000:] or "it wrote nothing"))
            os.replace(tmp, path)   # (atomic: another process building the same sees all of it or none)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build_forwarder():
    """Builds (or loads PyTorch's cached build of) the forwarder; returns its path."""
    module = _load("vram_torch_forwarder", [_source("forwarder.cpp")], False, [], ["-ldl"])
    if not module.bind(_lib.path):   # (a name without a folder: dlopen finds the library ctypes loaded)
        raise RuntimeError("the vram forwarder could not load %s" % _lib.path)
    return module.__file__


def _build_allocator(headers, dirs):
    """Builds (or loads PyTorch's cached build of) the allocator library with CUDA's headers from
    `headers` ("toolkit": PyTorch's CUDA build, CUDA_HOME's; "wheels": the include folders `dirs`, and
    PyTorch's CUDA libraries named, which bring CUDA's runtime library with them); returns the module."""
    if headers == "toolkit":
        return _load("vram_torch_allocator", [_source("allocator.cpp")], True, [_include_dir()], ["-ldl"])
    return _load("vram_torch_allocator", [_source("allocator.cpp")], False, [_include_dir()] + dirs,
                 ["-ldl", "-lc10_cuda", "-ltorch_cuda"])


def _why(e):
    """What a failed build says, short: its compiler errors, else the end of the message (the start
    of the build's message is the compiler's command line)."""
    text = str(e)
    errors = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    return "; ".join(errors[:3])[:400] if errors else text[-300:]


def install(build=True, pluggable=False):
    """Makes vram PyTorch's CUDA allocator; call it before PyTorch initializes CUDA.

    build=True compiles vram's allocator library (csrc/allocator.cpp) against this PyTorch (once;
    PyTorch caches it), with CUDA's headers from a CUDA toolkit or from PyTorch's NVIDIA wheels, or when
    that cannot be had the smaller forwarder (csrc/forwarder.cpp); build=False, or no build, uses
    libvram.so's entry points directly (vram.torch.mode says which; one warning says why when it is not
    the first, and what to install). pluggable=True skips the first and keeps CUDAPluggableAllocator's
    table (to compare the two: bench/torch_calls.py). Returns the path of the library PyTorch calls; a
    second call returns the first's.
    """
    global _installed, mode
    with _install_lock:
        if _installed is not None:
            return _installed
        import warnings
        import torch  # (without PyTorch: ImportError, before anything is tried)
        if torch.cuda.is_initialized():
            raise RuntimeError("vram.torch.install() must run before PyTorch initializes CUDA (its first "
                               "CUDA tensor, torch.cuda.init() or set_device): PyTorch cannot swap its "
                               "allocator afterwards")
        toolchain = _toolchain_missing() if build else []
        why = list(toolchain)
        if build and not pluggable and not toolchain:
            from torch.utils.cpp_extension import CUDA_HOME
            headers, dirs = _cuda_headers(torch.version.cuda, CUDA_HOME)
            module = None
            if headers is None:
                why.append("vram's allocator library cannot build: %s" % dirs)
            else:
                try:
                    module = _build_allocator(headers, dirs)
                except Exception as e:  # another PyTorch's headers, a compiler error
                    why.append("vram's allocator library did not build with CUDA's headers from %s (%s)"
                               % ("CUDA_HOME=" + CUDA_HOME if headers == "toolkit" else ", ".join(dirs), _why(e)))
            if module is not None:
                if not module.install(_lib.path):   # (a name without a folder: dlopen finds ctypes' library)
                    raise RuntimeError("vram's allocator library could not load %s" % _lib.path)
                _installed, mode = module.__file__, "allocator"
                return _installed
        from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
        path, alloc, free, how = _lib.path, "vram_plugin_alloc", "vram_plugin_free", "direct"
        if build and not toolchain:
            try:
                path, alloc, free, how = _build_forwarder(), "vram_torch_alloc", "vram_torch_free", "forwarder"
            except Exception as e:  # the direct entry points still work
                why.append("the forwarder did not build (%s)" % _why(e))
        change_current_allocator(CUDAPluggableAllocator(path, alloc, free))
        _installed, mode = path, how
        if why:
            warnings.warn("vram.torch: PyTorch calls vram through CUDAPluggableAllocator (mode %r): %s. Until "
                          "then tensor.record_stream does nothing and torch.cuda.memory_stats() raises%s"
                          % (how, "; ".join(why), "" if how == "forwarder" else
                             ", and a refused request gives a null tensor instead of torch.OutOfMemoryError"))
        return path


def memory_info(device=0):
    """vram's statistics of the logical device serving CUDA device `device` (a dict)."""
    from . import config
    return config.get_memory_info_full(_core.logical_for_physical(device))


last_error = _lib.last_error   # this thread's message for its last failed vram call (why a request was refused)
