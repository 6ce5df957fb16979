// vram.torch's forwarder ("forwarder" mode, when the allocator library of allocator.cpp does not build):
// two C entry points for CUDAPluggableAllocator, vram_torch_alloc and vram_torch_free, that forward to
// libvram's vram_plugin_alloc / vram_plugin_free and turn a refused request into torch.OutOfMemoryError
// with vram's message. Compiled by python/vram/torch.py against the installed PyTorch; needs PyTorch's
// headers and a C++ compiler only (no CUDA header). bind(path) dlopens libvram.so at `path` and binds the
// three calls (set once, before PyTorch calls the entry points; no lock).
#include <torch/extension.h>
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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("bind", torch::wrap_pybind_function(bind), "bind");
}
