"""vram as PyTorch's CUDA allocator.

    import torch, vram
    vram.torch.install()        # before PyTorch initializes CUDA
    x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')   # served by vram

install() builds once, with torch.utils.cpp_extension (PyTorch caches the build), a small C++
library against the installed PyTorch, and makes its allocator PyTorch's (vram.torch.mode says
which of these three it got):

  "allocator"  a subclass of PyTorch's CUDAPluggableAllocator whose tensors go straight to
               libvram.so: vram_plugin_alloc on the current stream, and a deleter that calls
               vram_plugin_release (vram remembers each block's stream), so PyTorch's own table of
               every block under a mutex (what CUDAPluggableAllocator keeps to pass the stream back)
               is not touched on each allocation and free; tensor.record_stream(s) calls
               vram_record_stream (the block's memory is reused only once s passed its free);
  "forwarder"  when that does not build (it needs the CUDA toolkit's headers, CUDA_HOME, which
               PyTorch's wheels do not bring; the forwarder needs a C++ compiler only):
               CUDAPluggableAllocator over a forwarder to vram_plugin_alloc / vram_plugin_free;
  "direct"     with install(build=False), or when neither builds: CUDAPluggableAllocator over
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
import threading

from . import _core, _lib

_install_lock = threading.Lock()

_installed = None
mode = None   # after install(): "allocator", "forwarder" or "direct" (see above)

_ALLOCATOR = r"""
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <cstddef>
#include <memory>
#include <string>

namespace {
using alloc_fn = void *(*)(std::ptrdiff_t, int, void *);
using release_fn = void (*)(void *);
using error_fn = const char *(*)();
using record_fn = int (*)(void *, void *);
alloc_fn vram_alloc = nullptr;
release_fn vram_release = nullptr;
error_fn vram_error = nullptr;
record_fn vram_record = nullptr;

void *checked_alloc(size_t size, int device, cudaStream_t stream) {
    void *ptr = vram_alloc(static_cast<std::ptrdiff_t>(size), device, stream);
    if (ptr == nullptr && size > 0) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (vram): ", vram_error());
    }
    return ptr;
}

void release(void *ptr) {
    vram_release(ptr);
}

using Pluggable = torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator;

// Tensors (allocate) and raw allocations skip CUDAPluggableAllocator's locked table: vram keeps each
// block's stream, so the deleter needs the pointer alone; record_stream goes to vram. The rest is
// CUDAPluggableAllocator's.
struct VramAllocator final : Pluggable {
    VramAllocator()
        : Pluggable([](size_t size, int device, cudaStream_t stream) { return checked_alloc(size, device, stream); },
                    [](void *ptr, size_t, int, cudaStream_t) { release(ptr); }) {}

    static c10::DeviceIndex current_device() {
        c10::DeviceIndex d = -1;
        C10_CUDA_CHECK(c10::cuda::GetDevice(&d));
        return d;
    }
    c10::DataPtr allocate(size_t size) override {
        c10::DeviceIndex d = current_device();
        void *ptr = checked_alloc(size, d, c10::cuda::getCurrentCUDAStream(d).stream());
        return {ptr, ptr, &release, c10::Device(c10::DeviceType::CUDA, d)};
    }
    c10::DeleterFnPtr raw_deleter() const override {
        return &release;
    }
    void *raw_alloc(size_t size) override {
        c10::DeviceIndex d = current_device();
        return checked_alloc(size, d, c10::cuda::getCurrentCUDAStream(d).stream());
    }
    void *raw_alloc_with_stream(size_t size, cudaStream_t stream) override {
        return checked_alloc(size, current_device(), stream);
    }
    void raw_delete(void *ptr) override {
        release(ptr);
    }
    // tensor.record_stream(s): the block's free then waits for s too (vram_record_stream)
    // (memory vram did not hand out, e.g. from another process or from_blob: nothing to do, as in
    // PyTorch's own allocator)
    void recordStream(const c10::DataPtr &ptr, c10::cuda::CUDAStream stream) override {
        if (ptr.get() == nullptr || ptr.get_deleter() != &release) return;
        if (vram_record(ptr.get(), stream.stream()) != 0) {
            TORCH_CHECK(false, "vram: record_stream: ", vram_error());
        }
    }
};
}  // namespace

// Loads libvram.so and makes vram PyTorch's CUDA allocator (raises when PyTorch already allocated).
bool install(const std::string &path) {
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) return false;
    vram_alloc = reinterpret_cast<alloc_fn>(dlsym(lib, "vram_plugin_alloc"));
    vram_release = reinterpret_cast<release_fn>(dlsym(lib, "vram_plugin_release"));
    vram_error = reinterpret_cast<error_fn>(dlsym(lib, "vram_last_error"));
    vram_record = reinterpret_cast<record_fn>(dlsym(lib, "vram_record_stream"));
    if (vram_alloc == nullptr || vram_release == nullptr || vram_error == nullptr || vram_record == nullptr) {
        return false;
    }
    auto allocator = std::make_shared<VramAllocator>();
    allocator->init(0);   // as torch.cuda.memory.CUDAPluggableAllocator's
    torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(allocator);
    return true;
}
"""

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
    if not module.bind(_lib.path):   # (a name without a folder: dlopen finds the library ctypes loaded)
        raise RuntimeError("the vram forwarder could not load %s" % _lib.path)
    return module.__file__


def _build_allocator():
    """Builds (or loads PyTorch's cached build of) the allocator library; returns the module."""
    from torch.utils.cpp_extension import load_inline
    return load_inline(name="vram_torch_allocator", cpp_sources=[_ALLOCATOR], functions=["install"],
                       with_cuda=True, extra_ldflags=["-ldl"], verbose=False)


def _why(e):
    """What a failed build says, short: its compiler errors, else the end of the message (the start
    of load_inline's message is the compiler's command line)."""
    text = str(e)
    errors = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    return "; ".join(errors[:3])[:400] if errors else text[-300:]


def install(build=True, pluggable=False):
    """Makes vram PyTorch's CUDA allocator; call it before PyTorch initializes CUDA.

    build=True compiles vram's allocator library against this PyTorch (once; PyTorch caches it),
    or when that fails the smaller forwarder; build=False, or two failed builds, uses libvram.so's
    entry points directly (vram.torch.mode says which; one warning says why when it is not the
    first). pluggable=True skips the first and keeps CUDAPluggableAllocator's table (to compare the
    two: bench/torch_calls.py). Returns the path of the library PyTorch calls; a second call returns
    the first's.
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
        why = []
        if build and not pluggable:
            try:
                module = _build_allocator()
            except Exception as e:  # no CUDA toolkit headers (CUDA_HOME), another PyTorch's headers
                module = None
                why.append("vram's allocator library did not build (%s)" % _why(e))
            if module is not None:
                if not module.install(_lib.path):   # (a name without a folder: dlopen finds ctypes' library)
                    raise RuntimeError("vram's allocator library could not load %s" % _lib.path)
                _installed, mode = module.__file__, "allocator"
                return _installed
        from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
        path, alloc, free, how = _lib.path, "vram_plugin_alloc", "vram_plugin_free", "direct"
        if build:
            try:
                path, alloc, free, how = _build_forwarder(), "vram_torch_alloc", "vram_torch_free", "forwarder"
            except Exception as e:  # no compiler: the direct entry points still work
                why.append("the forwarder did not build (%s)" % _why(e))
        change_current_allocator(CUDAPluggableAllocator(path, alloc, free))
        _installed, mode = path, how
        if why:
            warnings.warn("vram.torch: PyTorch calls vram through CUDAPluggableAllocator (mode %r): %s. %s"
                          % (how, "; ".join(why),
                             "Set CUDA_HOME to a CUDA toolkit matching torch.version.cuda for the allocator "
                             "library" if how == "forwarder" else
                             "Refused requests give null tensors instead of torch.OutOfMemoryError; install a "
                             "C++ compiler (and the CUDA toolkit, CUDA_HOME) for the allocator library"))
        return path


def memory_info(device=0):
    """vram's statistics of the logical device serving CUDA device `device` (a dict)."""
    from . import config
    return config.get_memory_info_full(_core.logical_for_physical(device))


last_error = _lib.last_error   # this thread's message for its last failed vram call (why a request was refused)
