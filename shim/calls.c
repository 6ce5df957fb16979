/*
 * calls.c: the interposed driver calls, each a thin wrapper around the driver's own (interpose.c
 * finds it) and the accounting of limits.c: the cuMemAlloc family (cuMemAlloc, cuMemAllocPitch
 * counted as pitch x height, cuMemAllocManaged counted on the current device although managed
 * memory may migrate), cuMemFree, cuMemCreate / cuMemRelease (counted by handle, on the device the
 * properties name), the stream-ordered cuMemAllocAsync, cuMemAllocFromPoolAsync and cuMemFreeAsync
 * (and their _ptsz variants), and the totals the program sees: cuMemGetInfo (total = the limit,
 * free = limit - in use, at most the driver's free plus the balloon and what the group has left;
 * shim_view) and cuDeviceTotalMem (the limit, at most the card's memory).
 *
 * Invariants: every wrapper returns the driver's result, or CUDA_ERROR_OUT_OF_MEMORY for a refusal
 * (then the driver was not called), or CUDA_ERROR_NOT_FOUND when the driver lacks the function; a
 * reservation made here is always settled (shim_settle) or given back (shim_unreserve). No lock is
 * taken here; limits.c takes them.
 */
#include <stdint.h>

#include "shim.h"

static CUresult shim_settle_ptr(CUresult r, CUdeviceptr *dptr, size_t size, int dev) {
    return shim_settle(r, SHIM_KIND_PTR, dptr, size, dev);
}

/* ---- the interposed allocation calls --------------------------------------------------------------- */

SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    pfn_cuMemAlloc_v2 real = SHIM_REAL(cuMemAlloc_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve("cuMemAlloc", dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize), dptr, bytesize, dev);
}

SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    pfn_cuMemAllocManaged real = SHIM_REAL(cuMemAllocManaged);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve("cuMemAllocManaged", dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize, flags), dptr, bytesize, dev);
}

/* The size is known only after the driver chose the pitch: width x height is reserved first,
 * then the rest of pitch x height; if that passes the limit the allocation is freed again. */
SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                        size_t height, unsigned int element_size_bytes) {
    pfn_cuMemAllocPitch_v2 real = SHIM_REAL(cuMemAllocPitch_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr && pitch ? shim_current_device() : -1;
    size_t estimate = 0;
    if (height && width_bytes > SIZE_MAX / height) dev = -1;   /* the driver refuses it */
    else estimate = width_bytes * height;
    if (shim_reserve("cuMemAllocPitch", dev, estimate) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pitch, width_bytes, height, element_size_bytes);
    if (r != CUDA_SUCCESS || dev < 0) return shim_settle_ptr(r, dptr, estimate, dev);
    size_t actual = estimate;
    if (*pitch >= width_bytes && (!height || *pitch <= SIZE_MAX / height)) actual = *pitch * height;
    if (actual > estimate && shim_reserve("cuMemAllocPitch", dev, actual - estimate) != 0) {
        pfn_cuMemFree_v2 real_free = SHIM_REAL(cuMemFree_v2);
        if (real_free) real_free(*dptr);
        *dptr = 0;
        shim_unreserve(dev, estimate);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return shim_settle_ptr(r, dptr, actual, dev);
}

SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    pfn_cuMemFree_v2 real = SHIM_REAL(cuMemFree_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr);
    if (counted) shim_freed(r, &e);
    return r;
}

/* VMM: counted by handle, on the device its properties name (other locations are not device memory). */
SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
    pfn_cuMemCreate real = SHIM_REAL(cuMemCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = -1;
    if (handle && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        prop->location.id >= 0 && prop->location.id < SHIM_MAX_DEVICES)
        dev = prop->location.id;
    if (shim_reserve("cuMemCreate", dev, size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle(real(handle, size, prop, flags), SHIM_KIND_HANDLE, handle, size, dev);
}

/* The bytes are counted as given back at the release (the driver frees them when the last
 * mapping of the handle goes). */
SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    pfn_cuMemRelease real = SHIM_REAL(cuMemRelease);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = shim_forget(SHIM_KIND_HANDLE, handle, &e);
    CUresult r = real(handle);
    if (counted) shim_freed(r, &e);
    return r;
}

/* Stream-ordered: counted on the current context's device at the call. */
static CUresult shim_alloc_async(pfn_cuMemAllocAsync real, const char *fn, CUdeviceptr *dptr,
                                 size_t bytesize, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve(fn, dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize, stream), dptr, bytesize, dev);
}

static CUresult shim_alloc_pool_async(pfn_cuMemAllocFromPoolAsync real, const char *fn,
                                      CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve(fn, dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize, pool, stream), dptr, bytesize, dev);
}

/* Subtracts when the free is enqueued, before the GPU reached it (see the header). */
static CUresult shim_free_async(pfn_cuMemFreeAsync real, CUdeviceptr dptr, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr, stream);
    if (counted) shim_freed(r, &e);
    return r;
}

SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return shim_alloc_async(SHIM_REAL(cuMemAllocAsync), "cuMemAllocAsync", dptr, bytesize, stream);
}

SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return shim_alloc_async((pfn_cuMemAllocAsync)shim_real_fn(SHIM_HOOK_cuMemAllocAsync_ptsz),
                            "cuMemAllocAsync", dptr, bytesize, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream) {
    return shim_alloc_pool_async(SHIM_REAL(cuMemAllocFromPoolAsync), "cuMemAllocFromPoolAsync", dptr,
                                 bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream stream) {
    return shim_alloc_pool_async(
        (pfn_cuMemAllocFromPoolAsync)shim_real_fn(SHIM_HOOK_cuMemAllocFromPoolAsync_ptsz),
        "cuMemAllocFromPoolAsync", dptr, bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    return shim_free_async(SHIM_REAL(cuMemFreeAsync), dptr, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    return shim_free_async((pfn_cuMemFreeAsync)shim_real_fn(SHIM_HOOK_cuMemFreeAsync_ptsz), dptr, stream);
}

/* ---- the limited totals ------------------------------------------------------------------------------ */

SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    pfn_cuMemGetInfo_v2 real = SHIM_REAL(cuMemGetInfo_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t real_free = 0, real_total = 0;
    CUresult r = real(free_bytes ? &real_free : NULL, total_bytes ? &real_total : NULL);
    if (r != CUDA_SUCCESS) return r;
    int dev = shim_current_device();
    /* the card's total is only known when it was asked for; the limit is the total either way */
    size_t total = total_bytes ? real_total : SIZE_MAX, free_left = real_free;
    shim_view(dev, shim_group_free(dev), &total, &free_left);
    if (free_bytes) *free_bytes = free_left;
    if (total_bytes) *total_bytes = total;
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    pfn_cuDeviceTotalMem_v2 real = SHIM_REAL(cuDeviceTotalMem_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(bytes, dev);
    if (r != CUDA_SUCCESS || dev < 0 || dev >= SHIM_MAX_DEVICES) return r;
    pthread_mutex_lock(&g.mu);
    size_t limit = g.limit[dev];
    pthread_mutex_unlock(&g.mu);
    if (limit && limit < *bytes) *bytes = limit;
    return r;
}

