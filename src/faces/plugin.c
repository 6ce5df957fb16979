/*
 * plugin.c: allocator entry points with the signatures frameworks load by name (PyTorch's
 * CUDAPluggableAllocator: `void *alloc(ssize_t size, int device, cudaStream_t stream)` and
 * `void free(void *ptr, ssize_t size, int device, cudaStream_t stream)`). A face over the public
 * API: the CUDA device ordinal is the physical index, served by the first logical device on that
 * card, stream-ordered on the caller's stream. Frees go through the runtime's owned-stream free
 * (no event recorded per free; see vram__free_async_owned_stream): PyTorch never destroys its
 * streams. vram_plugin_release is that free on the stream the block was allocated on, for a caller
 * that keeps no record of it (a c10::DataPtr's deleter gets the pointer alone).
 */
#include "vram.h"
#include "runtime/runtime.h"

void *vram_plugin_alloc(ptrdiff_t size, int device, void *stream) {
    void *ptr = NULL;
    if (size < 0) {
        (void)vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_plugin_alloc: negative size %td", size);
        return NULL;
    }
    return vram__malloc_async_on_card(&ptr, (size_t)size, device, stream) == VRAM_OK ? ptr : NULL;
}

void vram_plugin_free(void *ptr, ptrdiff_t size, int device, void *stream) {
    (void)size;
    (void)device;
    vram__free_async_owned_stream(ptr, stream);   /* PyTorch never destroys its streams */
}

void vram_plugin_release(void *ptr) {
    vram__free_on_alloc_stream(ptr);
}
