/*
 * calls.c: the interposed plain allocation calls, each a thin wrapper around the driver's own
 * (interpose.c finds it) and the accounting of limits.c: the cuMemAlloc family (cuMemAlloc,
 * cuMemAllocPitch counted as pitch x height, cuMemAllocManaged counted on the current device
 * although managed memory may migrate) and cuMemFree, in their _v2 forms and the CUDA < 3.2 ones
 * (32-bit sizes and addresses, still exported by the driver), and the totals the program sees:
 * cuMemGetInfo (total = the limit, free = limit - in use, at most the driver's free plus the balloon
 * and what the group has left; shim_view) and cuDeviceTotalMem (the limit, at most the card's
 * memory), in both forms. The other families have files of their own (shim.h's coverage table).
 *
 * With VRAM_OVERFLOW=host a cuMemAlloc_v2 or cuMemAllocPitch_v2 that the limit or the card refused is
 * served from host memory (overflow.c), and its cuMemFree_v2 goes there.
 *
 * Invariants: every wrapper returns the driver's result, or CUDA_ERROR_OUT_OF_MEMORY for a refusal
 * (then the driver was not called), or CUDA_ERROR_NOT_FOUND when the driver lacks the function; a
 * reservation made here is always settled (shim_settle) or given back (shim_unreserve). No lock is
 * taken here; limits.c takes them.
 */
#include <limits.h>
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
    if (shim_take("cuMemAlloc", dev, bytesize) != 0) return shim_overflow_alloc("cuMemAlloc", dptr, bytesize, dev);
    CUresult r = real(dptr, bytesize);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && g.overflow && dev >= 0) {   /* the card refused: host memory */
        shim_unreserve(dev, bytesize);
        return shim_overflow_alloc("cuMemAlloc", dptr, bytesize, dev);
    }
    return shim_settle_ptr(r, dptr, bytesize, dev);
}

SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    pfn_cuMemAllocManaged real = SHIM_REAL(cuMemAllocManaged);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_take("cuMemAllocManaged", dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
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
    if (shim_take("cuMemAllocPitch", dev, estimate) != 0)
        return shim_overflow_alloc_pitch("cuMemAllocPitch", dptr, pitch, width_bytes, height, dev);
    CUresult r = real(dptr, pitch, width_bytes, height, element_size_bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && g.overflow && dev >= 0) {   /* the card refused: host memory */
        shim_unreserve(dev, estimate);
        return shim_overflow_alloc_pitch("cuMemAllocPitch", dptr, pitch, width_bytes, height, dev);
    }
    if (r != CUDA_SUCCESS || dev < 0) return shim_settle_ptr(r, dptr, estimate, dev);
    size_t actual = estimate;
    if (*pitch >= width_bytes && (!height || *pitch <= SIZE_MAX / height)) actual = *pitch * height;
    if (actual > estimate && shim_reserve("cuMemAllocPitch", dev, actual - estimate, 1) != 0) {
        pfn_cuMemFree_v2 real_free = SHIM_REAL(cuMemFree_v2);
        if (real_free) real_free(*dptr);
        *dptr = 0;
        shim_unreserve(dev, estimate);
        return shim_overflow_alloc_pitch("cuMemAllocPitch", dptr, pitch, width_bytes, height, dev);
    }
    return shim_settle_ptr(r, dptr, actual, dev);
}

SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    pfn_cuMemFree_v2 real = SHIM_REAL(cuMemFree_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult overflow_r;
    if (shim_overflow_free(dptr, &overflow_r)) return overflow_r;   /* an overflow block: cuMemFreeHost */
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr);
    if (counted) shim_freed(r, &e);
    return r;
}

/* ---- the limited totals ------------------------------------------------------------------------------ */

SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    pfn_cuMemGetInfo_v2 real = SHIM_REAL(cuMemGetInfo_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t real_free = 0, real_total = 0;
    CUresult r = real(free_bytes ? &real_free : NULL, total_bytes ? &real_total : NULL);
    if (r != CUDA_SUCCESS) return r;
    int dev = shim_current_device();
    shim_held_refresh(dev);   /* what pools and graphs hold now */
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


/* ---- the CUDA < 3.2 entry points: 32-bit sizes and addresses -------------------------------------------- */

SHIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
    pfn_cuMemAlloc real = SHIM_REAL(cuMemAlloc);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_take("cuMemAlloc", dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize);
    unsigned long long key = r == CUDA_SUCCESS && dptr ? *dptr : 0;
    CUresult s = shim_settle(r, SHIM_KIND_PTR, &key, bytesize, dev);
    if (r == CUDA_SUCCESS && s != CUDA_SUCCESS) *dptr = 0;
    return s;
}

SHIM_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width_bytes,
                                     unsigned int height, unsigned int element_size_bytes) {
    pfn_cuMemAllocPitch real = SHIM_REAL(cuMemAllocPitch);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr && pitch ? shim_current_device() : -1;
    size_t estimate = (size_t)width_bytes * height;   /* 32-bit factors: no overflow */
    if (shim_take("cuMemAllocPitch", dev, estimate) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pitch, width_bytes, height, element_size_bytes);
    size_t actual = estimate;
    if (r == CUDA_SUCCESS && dev >= 0 && *pitch >= width_bytes) actual = (size_t)*pitch * height;
    if (actual > estimate && shim_reserve("cuMemAllocPitch", dev, actual - estimate, 1) != 0) {
        pfn_cuMemFree real_free = SHIM_REAL(cuMemFree);
        if (real_free) real_free(*dptr);
        *dptr = 0;
        shim_unreserve(dev, estimate);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    unsigned long long key = r == CUDA_SUCCESS && dptr ? *dptr : 0;
    CUresult s = shim_settle(r, SHIM_KIND_PTR, &key, actual, dev);
    if (r == CUDA_SUCCESS && s != CUDA_SUCCESS) *dptr = 0;
    return s;
}

SHIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
    pfn_cuMemFree real = SHIM_REAL(cuMemFree);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr);
    if (counted) shim_freed(r, &e);
    return r;
}

SHIM_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes) {
    pfn_cuMemGetInfo real = SHIM_REAL(cuMemGetInfo);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    unsigned int real_free = 0, real_total = 0;
    CUresult r = real(free_bytes ? &real_free : NULL, total_bytes ? &real_total : NULL);
    if (r != CUDA_SUCCESS) return r;
    int dev = shim_current_device();
    shim_held_refresh(dev);
    size_t total = total_bytes ? real_total : SIZE_MAX, free_left = real_free;
    shim_view(dev, shim_group_free(dev), &total, &free_left);
    if (free_bytes) *free_bytes = free_left > UINT_MAX ? UINT_MAX : (unsigned int)free_left;
    if (total_bytes) *total_bytes = total > UINT_MAX ? UINT_MAX : (unsigned int)total;
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    pfn_cuDeviceTotalMem real = SHIM_REAL(cuDeviceTotalMem);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(bytes, dev);
    if (r != CUDA_SUCCESS || dev < 0 || dev >= SHIM_MAX_DEVICES) return r;
    pthread_mutex_lock(&g.mu);
    size_t limit = g.limit[dev];
    pthread_mutex_unlock(&g.mu);
    if (limit && limit < *bytes) *bytes = (unsigned int)limit;
    return r;
}
