/*
 * overflow.c: overflow to host memory under `vram run --overflow host` (VRAM_OVERFLOW=host). A
 * cuMemAlloc (_v2) that the limit, the group budget or the card itself refuses is served from
 * pinned host memory mapped into the device's address space instead of failing: the driver's
 * cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE, then
 * cuMemHostGetDevicePointer, whose device pointer the program gets. Its kernels read and write it
 * over the bus (slower), and the program goes on instead of dying of out-of-memory.
 *
 * Counted apart: an overflow block is in g.overflow_bytes[dev] (the ledger slot's overflow_bytes;
 * vram top's OVERFLOW), never in g.used (the device's use and its limit), and its bytes are held to the
 * cap, VRAM_OVERFLOW_MAX per device (default: the device's start limit, else its card; 0 allows
 * none). The program's cuMemFree (_v2) of its pointer goes to cuMemFreeHost (the driver's cuMemFree
 * would refuse it). What the program sees: cuMemGetInfo and cuDeviceTotalMem are unchanged (they
 * speak of device memory: free may be 0 while allocations go on in host memory); the driver answers
 * cuPointerGetAttribute itself (memory type host, a valid device pointer). cuMemAlloc (_v2), what
 * cudaMalloc and the frameworks' caching allocators call, and cuMemAllocPitch (_v2), rows of the
 * width rounded up to 512 bytes (what the driver aligns a pitch to at most), overflow; the other
 * families are refused as before: managed memory migrates by itself, arrays and cuMemCreate memory
 * have no host form the program would map the same way, and the stream-ordered calls
 * (cuMemAllocAsync, cuMemAllocFromPoolAsync) cannot: their free is ordered on a stream and may be
 * captured into a CUDA graph, while host memory can only be given back by a driver call the driver
 * forbids in a stream's host callback, so the shim would have to block the program's thread at the
 * free (not allowed during a capture), and a block of a pool must have the pool's properties (its
 * IPC handle type, its access), which pinned host memory has not. Nothing
 * moves a live block back: a block that is freed and allocated again (each step of a training loop)
 * goes to the device as soon as the device has room, one that is never freed stays in host memory.
 *
 * Invariants: g.overflow_bytes[dev] is the sum of the sizes of dev's SHIM_KIND_OVERFLOW records
 * plus the reservations of overflow allocations in flight, never above the cap. Locks: g.mu around
 * each change (never across a driver call).
 */
#include <stdint.h>
#include <stdio.h>

#include "shim.h"

/* The cap of dev's overflow (the slot's overflow_max, written from the same rule at its claim). */
static size_t shim_overflow_cap_of(int dev) {
    if (g.overflow_max_set) return g.overflow_max;
    if (g.limit_start[dev]) return g.limit_start[dev];
    return g.card[dev] ? g.card[dev] : SIZE_MAX;
}

/* Counts size bytes more in dev's overflow (held: the bytes there before) when the cap allows them;
 * -1 when it does not (said under --log). */
static int shim_overflow_reserve(const char *fn, size_t size, int dev, size_t *held) {
    size_t cap = shim_overflow_cap_of(dev);
    pthread_mutex_lock(&g.mu);
    *held = g.overflow_bytes[dev];
    int over = size > cap || *held > cap - size;
    if (!over) {
        g.overflow_bytes[dev] = *held + size;
        shim_publish_unsafe(dev);
    }
    pthread_mutex_unlock(&g.mu);
    if (over && g.log) {
        char req[32], now[32], max[32];
        vram__format_bytes(req, sizeof req, size);
        vram__format_bytes(now, sizeof now, *held);
        vram__format_bytes(max, sizeof max, cap);
        fprintf(stderr, "vram: %s of %s (%zu bytes) on device %d refused: its overflow to host memory would pass "
                "its cap (overflow %s = %zu bytes, cap %s = %zu bytes, from %s); returning "
                "CUDA_ERROR_OUT_OF_MEMORY\n", fn, req, size, dev, now, *held, max, cap,
                g.overflow_max_set ? "VRAM_OVERFLOW_MAX" : "the device's limit");
    }
    return over ? -1 : 0;
}

CUresult shim_overflow_alloc(const char *fn, CUdeviceptr *dptr, size_t size, int dev) {
    if (!g.overflow || dev < 0 || !dptr || size == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    shim_cuda_load();
    if (!g.real.cuMemHostAlloc || !g.real.cuMemFreeHost || !g.real.cuMemHostGetDevicePointer_v2) {
        if (g.log) fprintf(stderr, "vram: %s of %zu bytes on device %d: no overflow to host memory (the driver has "
                           "no cuMemHostAlloc); returning CUDA_ERROR_OUT_OF_MEMORY\n", fn, size, dev);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t held = 0;
    if (shim_overflow_reserve(fn, size, dev, &held) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    void *host = NULL;
    CUdeviceptr d = 0;
    CUresult r = g.real.cuMemHostAlloc(&host, size, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    const char *failed = "cuMemHostAlloc";
    if (r == CUDA_SUCCESS) {
        r = g.real.cuMemHostGetDevicePointer_v2(&d, host, 0);
        failed = "cuMemHostGetDevicePointer";
        if (r != CUDA_SUCCESS) g.real.cuMemFreeHost(host);
    }
    shim_entry e = { .key = d, .at = (unsigned long long)(uintptr_t)host, .size = size, .dev = dev,
                     .kind = SHIM_KIND_OVERFLOW };
    pthread_mutex_lock(&g.mu);
    int kept = r == CUDA_SUCCESS && shim_insert_unsafe(&e) == 0;
    if (!kept) {
        g.overflow_bytes[dev] -= size;
        shim_publish_unsafe(dev);
    }
    pthread_mutex_unlock(&g.mu);
    if (r == CUDA_SUCCESS && !kept) {   /* the table cannot hold it: it could never be freed */
        g.real.cuMemFreeHost(host);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        failed = "the preload library's table";
    }
    if (r != CUDA_SUCCESS) {
        if (g.log) {
            char err[160];
            shim_error_text(r, err, sizeof err);
            fprintf(stderr, "vram: %s of %zu bytes on device %d: overflow to host memory failed (%s: %s)\n", fn, size,
                    dev, failed, err);
        }
        return r;
    }
    *dptr = d;
    if (g.log)
        fprintf(stderr, "vram: %s of %zu bytes on device %d served from host memory (overflow; %zu bytes there now)\n",
                fn, size, dev, held + size);
    return CUDA_SUCCESS;
}

int shim_overflow_free(CUdeviceptr dptr, CUresult *r) {
    if (!g.overflow || !dptr) return 0;
    shim_entry e;
    if (!shim_forget(SHIM_KIND_OVERFLOW, dptr, &e)) return 0;
    *r = g.real.cuMemFreeHost((void *)(uintptr_t)e.at);
    pthread_mutex_lock(&g.mu);
    if (*r == CUDA_SUCCESS) {
        g.overflow_bytes[e.dev] = g.overflow_bytes[e.dev] > e.size ? g.overflow_bytes[e.dev] - e.size : 0;
        shim_publish_unsafe(e.dev);
    } else if (shim_insert_unsafe(&e) != 0) {   /* refused: still held, still counted */
        g.overflow_bytes[e.dev] = g.overflow_bytes[e.dev] > e.size ? g.overflow_bytes[e.dev] - e.size : 0;
        shim_publish_unsafe(e.dev);
    }
    pthread_mutex_unlock(&g.mu);
    return 1;
}

CUresult shim_overflow_alloc_pitch(const char *fn, CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                   size_t height, int dev) {
    if (!pitch || width_bytes > SIZE_MAX - (SHIM_OVERFLOW_PITCH - 1)) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t p = (width_bytes + SHIM_OVERFLOW_PITCH - 1) / SHIM_OVERFLOW_PITCH * SHIM_OVERFLOW_PITCH;
    if (height && p > SIZE_MAX / height) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = shim_overflow_alloc(fn, dptr, p * height, dev);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}
