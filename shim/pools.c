/*
 * pools.c: the interposed stream-ordered allocation calls and memory pools: cuMemAllocAsync and
 * cuMemAllocFromPoolAsync (and their _ptsz variants), cuMemFreeAsync (and _ptsz), cuMemPoolCreate,
 * cuMemPoolSetAttribute, cuMemPoolTrimTo and cuMemPoolDestroy.
 *
 * A stream-ordered block comes out of a pool (the device's current pool for cuMemAllocAsync), which
 * takes memory from the driver as it grows and keeps what is freed, up to its release threshold
 * (PyTorch's cudaMallocAsync backend sets it to the maximum), until the next synchronization. So the
 * device memory the program holds through a pool is what the pool reserves, not the sum of its live
 * blocks: held.c counts each pool by its reserved memory, re-read from the driver. An allocation
 * reserves its size rounded up to the device's granularity (what the pool may have to grow by)
 * against the limit, after the re-read (shim_take, which gives the pools' unused memory back before
 * refusing); after the driver's answer the pool is re-read and the reservation given back. When the
 * pool grew past the limit all the same, the block is freed again (in stream order) and the call
 * fails with CUDA_ERROR_OUT_OF_MEMORY. Frees re-read the pools. A pool whose reserved memory the
 * driver cannot report is not followed: its blocks are counted one by one (from the call to the
 * free's enqueueing). Memory of a pool of another process (cuMemPoolImportPointer) is that
 * process's, not counted here (shim.h's SHIM_UNCOVERED).
 *
 * Invariants: as calls.c's. No lock is taken here (held.c's held_mu inside its calls).
 */
#include <stdint.h>
#include <stdio.h>

#include "shim.h"

/* The device a pool allocates on: the one it was followed with, else the device whose default or
 * current pool it is, else the calling thread's. */
static int shim_pool_home(CUmemoryPool pool) {
    int dev = shim_held_pool_device(pool);
    if (dev >= 0) return dev;
    int n = 0;
    if (g.real.cuDeviceGetCount && g.real.cuDeviceGetCount(&n) == CUDA_SUCCESS) {
        for (int d = 0; d < n && d < SHIM_MAX_DEVICES; d++) {
            CUmemoryPool p = NULL;
            if (g.real.cuDeviceGetDefaultMemPool && g.real.cuDeviceGetDefaultMemPool(&p, d) == CUDA_SUCCESS && p == pool)
                return d;
            if (g.real.cuDeviceGetMemPool && g.real.cuDeviceGetMemPool(&p, d) == CUDA_SUCCESS && p == pool) return d;
        }
    }
    return shim_current_device();
}

static CUresult shim_stream_alloc(CUresult (*call)(void *real, CUdeviceptr *, size_t, CUmemoryPool, CUstream),
                                  void *real, pfn_cuMemFreeAsync real_free, const char *fn, CUdeviceptr *dptr,
                                  size_t bytesize, CUmemoryPool pool, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = -1;
    if (dptr) {
        if (pool) {
            dev = shim_pool_home(pool);
        } else {
            dev = shim_current_device();
            if (dev >= 0 && (!g.real.cuDeviceGetMemPool || g.real.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
                pool = NULL;
        }
    }
    int by_pool = dev >= 0 && pool && shim_held_pool(pool, dev);
    size_t need = bytesize;
    if (by_pool) {
        size_t gran = shim_granularity(dev);
        need = bytesize > SIZE_MAX - (gran - 1) ? SIZE_MAX : (bytesize + gran - 1) & ~(gran - 1);
    }
    if (shim_take(fn, dev, need) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = call(real, dptr, bytesize, pool, stream);
    if (!by_pool) return shim_settle(r, SHIM_KIND_PTR, dptr, bytesize, dev);
    shim_held_settle(dev, need);
    if (r == CUDA_SUCCESS && shim_over_limit(dev)) {
        if (real_free) (void)real_free(*dptr, stream);
        *dptr = 0;
        shim_held_refresh(dev);
        if (g.log)
            fprintf(stderr, "vram: %s of %zu bytes on device %d refused: its pool grew past the vram limit; "
                    "returning CUDA_ERROR_OUT_OF_MEMORY\n", fn, bytesize, dev);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

static CUresult shim_call_async(void *real, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
    (void)pool;
    return ((pfn_cuMemAllocAsync)real)(dptr, bytesize, stream);
}

static CUresult shim_call_from_pool(void *real, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                    CUstream stream) {
    return ((pfn_cuMemAllocFromPoolAsync)real)(dptr, bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return shim_stream_alloc(shim_call_async, (void *)SHIM_REAL(cuMemAllocAsync), SHIM_REAL(cuMemFreeAsync),
                             "cuMemAllocAsync", dptr, bytesize, NULL, stream);
}

SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return shim_stream_alloc(shim_call_async, (void *)SHIM_REAL(cuMemAllocAsync_ptsz),
                             SHIM_REAL(cuMemFreeAsync_ptsz), "cuMemAllocAsync", dptr, bytesize, NULL, stream);
}

/* A NULL pool is the driver's to refuse: it is passed on as it is, not counted. */
SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
    if (!pool) {
        pfn_cuMemAllocFromPoolAsync real = SHIM_REAL(cuMemAllocFromPoolAsync);
        return real ? real(dptr, bytesize, pool, stream) : CUDA_ERROR_NOT_FOUND;
    }
    return shim_stream_alloc(shim_call_from_pool, (void *)SHIM_REAL(cuMemAllocFromPoolAsync),
                             SHIM_REAL(cuMemFreeAsync), "cuMemAllocFromPoolAsync", dptr, bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                  CUstream stream) {
    if (!pool) {
        pfn_cuMemAllocFromPoolAsync_ptsz real = SHIM_REAL(cuMemAllocFromPoolAsync_ptsz);
        return real ? real(dptr, bytesize, pool, stream) : CUDA_ERROR_NOT_FOUND;
    }
    return shim_stream_alloc(shim_call_from_pool, (void *)SHIM_REAL(cuMemAllocFromPoolAsync_ptsz),
                             SHIM_REAL(cuMemFreeAsync_ptsz), "cuMemAllocFromPoolAsync", dptr, bytesize, pool, stream);
}

/* A block counted one by one gives its bytes back when the free is enqueued; a pool's memory is
 * re-read (what it kept stays counted). */
static CUresult shim_free_async(pfn_cuMemFreeAsync real, CUdeviceptr dptr, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr, stream);
    if (counted) shim_freed(r, &e);
    else shim_held_refresh_all();
    return r;
}

SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    return shim_free_async(SHIM_REAL(cuMemFreeAsync), dptr, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    return shim_free_async(SHIM_REAL(cuMemFreeAsync_ptsz), dptr, stream);
}

/* ---- the pools themselves ---------------------------------------------------------------------------- */

SHIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    pfn_cuMemPoolCreate real = SHIM_REAL(cuMemPoolCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(pool, props);
    if (r == CUDA_SUCCESS && pool && props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        props->location.id >= 0 && props->location.id < SHIM_MAX_DEVICES)
        (void)shim_held_pool(*pool, props->location.id);
    return r;
}

/* A release threshold changes what the pool keeps at its next synchronization: the pool is
 * followed from here on. */
SHIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    pfn_cuMemPoolSetAttribute real = SHIM_REAL(cuMemPoolSetAttribute);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(pool, attr, value);
    if (r == CUDA_SUCCESS && pool) {
        int dev = shim_pool_home(pool);
        if (shim_held_pool(pool, dev)) shim_held_refresh(dev);
    }
    return r;
}

SHIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
    pfn_cuMemPoolTrimTo real = SHIM_REAL(cuMemPoolTrimTo);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    return shim_held_pool_trim(pool, keep, real);
}

SHIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    pfn_cuMemPoolDestroy real = SHIM_REAL(cuMemPoolDestroy);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    return shim_held_pool_destroy(pool, real);
}
