"""vram as PyTorch's CUDA allocator.

    import torch, vram
    vram.torch.install()        # before the first CUDA allocation
    x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')   # served by vram

PyTorch's CUDAPluggableAllocator calls a small C++ library that install() builds once with
torch.utils.cpp_extension (cached by PyTorch): it forwards to libvram.so's vram_plugin_alloc /
vram_plugin_free (PyTorch's (size, device, stream) arguments, stream-ordered on the caller's
stream) and turns a refused request into torch.OutOfMemoryError carrying vram's message (which
says whether a limit, a full card or fragmentation was the cause). Without a C++ compiler,
install(build=False) loads libvram.so's entry points directly; PyTorch 2.11 then does not raise
for a refused request: the tensor comes back with a null data pointer (vram.torch.last_error()
says why). vram's configuration (vram.config) applies as it does to C programs; configure before
the first allocation.
"""
import os

from . import _core, _lib

_installed = None

_FORWARDER = r"""
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <cstddef>
#include <string>

namespace {
using alloc_fn = void *(*)(std::ptrdiff_t, int, void *);
using free_fn = void (*)(void *, std::ptrdiff_t, int, void *);
using error_fn = const char *(*)();
alloc_fn vram_alloc = nullptr;
free_fn vram_free = nullptr;
error_fn vram_error = nullptr;
}

extern "C" {
__attribute__((visibility("default"))) void *vram_torch_alloc(std::ptrdiff_t size, int device, void *stream) {
    void *ptr = vram_alloc(size, device, stream);
    if (ptr == nullptr && size > 0) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (vram): ", vram_error());
    }
    return ptr;
}

__attribute__((visibility("default"))) void vram_torch_free(void *ptr, std::ptrdiff_t size, int device, void *stream) {
    vram_free(ptr, size, device, stream);
}
}

bool bind(const std::string &path) {
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) return false;
    vram_alloc = reinterpret_cast<alloc_fn>(dlsym(lib, "vram_plugin_alloc"));
    vram_free = reinterpret_cast<free_fn>(dlsym(lib, "vram_plugin_free"));
    vram_error = reinterpret_cast<error_fn>(dlsym(lib, "vram_last_error"));
    return vram_alloc != nullptr && vram_free != nullptr && vram_error != nullptr;
}
"""


def _build_forwarder():
    """Builds (or loads PyTorch's cached build of) the forwarder; returns its path."""
    from torch.utils.cpp_extension import load_inline
    module = load_inline(name="vram_torch_forwarder", cpp_sources=[_FORWARDER], functions=["bind"],
                         extra_ldflags=["-ldl"], verbose=False)
    if not module.bind(os.path.abspath(_lib.path)):
        raise RuntimeError("the vram forwarder could not load %s" % _lib.path)
    return module.__file__


def install(build=True):
    """Makes vram PyTorch's CUDA allocator; call it before PyTorch allocates CUDA memory.

    build=True compiles the small forwarder that raises torch.OutOfMemoryError for refused
    requests (once; PyTorch caches it); build=False, or a failed build, uses libvram.so directly.
    Returns the path of the library PyTorch calls.
    """
    global _installed
    if _installed is not None:
        return _installed
    from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
    path, alloc, free = _lib.path, "vram_plugin_alloc", "vram_plugin_free"
    if build:
        try:
            path, alloc, free = _build_forwarder(), "vram_torch_alloc", "vram_torch_free"
        except Exception as e:  # no compiler, no headers: the direct entry points still work
            import warnings
            warnings.warn("vram.torch: could not build the out-of-memory forwarder (%s); refused requests "
                          "will give null tensors instead of torch.OutOfMemoryError" % (e,))
    change_current_allocator(CUDAPluggableAllocator(path, alloc, free))
    _installed = path
    return path


def memory_info(device=0):
    """vram's statistics of the logical device serving CUDA device `device` (a dict)."""
    from . import config
    return config.get_memory_info_full(_core.logical_for_physical(device))


last_error = _lib.last_error   # this thread's message for its last failed vram call (why a request was refused)
