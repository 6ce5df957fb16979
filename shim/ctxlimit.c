/*
 * ctxlimit.c: context limits that make the driver reserve device memory: cuCtxSetLimit of
 * CU_LIMIT_MALLOC_HEAP_SIZE (the heap of device-side malloc), CU_LIMIT_PRINTF_FIFO_SIZE (printf's
 * buffer) and CU_LIMIT_STACK_SIZE (a stack of that many bytes for every thread the device can hold
 * at once: the size x its multiprocessors x the threads a multiprocessor holds), and what gives
 * that memory back: cuCtxDestroy (and _v2), cuDevicePrimaryCtxReset (and _v2) and
 * cuDevicePrimaryCtxRelease (and _v2) when it ends the primary context.
 *
 * What counts is what the program added: the bytes of the new value above those of the value the
 * limit had before the program first set it in that context (the driver's default is part of the
 * context, itself not counted: shim.h's SHIM_UNCOVERED). A raise is reserved against the limit
 * before the driver is called and refused with CUDA_ERROR_OUT_OF_MEMORY when it does not fit; a
 * lowering gives bytes back after the driver's success. One record per context and limit
 * (table.c, kind CTXLIM), dropped with its context.
 *
 * Invariants: as calls.c's. No lock is taken here (g.mu inside table accesses, briefly).
 */
#include <stdint.h>

#include "shim.h"

static int shim_limit_counts(CUlimit limit) {
    return limit == CU_LIMIT_MALLOC_HEAP_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE || limit == CU_LIMIT_STACK_SIZE;
}

/* The device memory a limit's value takes on dev. */
static size_t shim_limit_bytes(CUlimit limit, size_t value, int dev) {
    if (limit != CU_LIMIT_STACK_SIZE) return value;
    int sms = 0, threads = 0;
    if (!g.real.cuDeviceGetAttribute ||
        g.real.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
        g.real.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) != CUDA_SUCCESS ||
        sms <= 0 || threads <= 0)
        sms = 1, threads = 1;   /* the driver does not say: the bytes per thread alone */
    size_t all = (size_t)sms * (size_t)threads;
    return value > SIZE_MAX / all ? SIZE_MAX : value * all;
}

/* Whether ctx is dev's primary context (asked without creating one that is not active). */
static int shim_is_primary(CUcontext ctx, int dev) {
    unsigned int flags = 0;
    int active = 0;
    CUcontext primary = NULL;
    pfn_cuDevicePrimaryCtxRelease release = SHIM_REAL(cuDevicePrimaryCtxRelease);
    if (!g.real.cuDevicePrimaryCtxGetState || !g.real.cuDevicePrimaryCtxRetain || !release ||
        g.real.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return 0;
    if (g.real.cuDevicePrimaryCtxRetain(&primary, dev) != CUDA_SUCCESS) return 0;
    (void)release(dev);
    return primary == ctx;
}

SHIM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
    pfn_cuCtxSetLimit real = SHIM_REAL(cuCtxSetLimit);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUcontext ctx = NULL;
    int dev = shim_limit_counts(limit) ? shim_current_device() : -1;
    size_t before = 0;
    if (dev < 0 || !g.real.cuCtxGetCurrent || g.real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx ||
        !g.real.cuCtxGetLimit || g.real.cuCtxGetLimit(&before, limit) != CUDA_SUCCESS)
        return real(limit, value);
    unsigned long long key = (unsigned long long)(uintptr_t)ctx << 3 | (unsigned long long)limit;
    pthread_mutex_lock(&g.mu);
    shim_entry *e = shim_find_unsafe(key, SHIM_KIND_CTXLIM);
    size_t base = e ? e->at : before, counted = e ? e->size : 0;
    pthread_mutex_unlock(&g.mu);
    size_t base_bytes = shim_limit_bytes(limit, base, dev), new_bytes = shim_limit_bytes(limit, value, dev);
    size_t want = new_bytes > base_bytes ? new_bytes - base_bytes : 0;
    size_t raise = want > counted ? want - counted : 0;
    if (raise && shim_take("cuCtxSetLimit", dev, raise) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(limit, value);
    if (r != CUDA_SUCCESS) {
        shim_unreserve(dev, raise);
        return r;
    }
    int primary = e ? 0 : shim_is_primary(ctx, dev);
    pthread_mutex_lock(&g.mu);
    e = shim_find_unsafe(key, SHIM_KIND_CTXLIM);
    if (e) {
        e->size = want;
    } else {
        shim_entry rec = { .key = key, .ref = (unsigned long long)(uintptr_t)ctx, .at = base, .size = want,
                           .dev = dev, .kind = SHIM_KIND_CTXLIM, .owner = (unsigned long long)primary };
        if (shim_insert_unsafe(&rec) != 0) want = counted;   /* not kept: the reservation stays (too long) */
    }
    pthread_mutex_unlock(&g.mu);
    if (want < counted) shim_uncount(dev, counted - want);
    return r;
}

/* ---- contexts that end ------------------------------------------------------------------------------- */

typedef struct shim_ctx_match {
    unsigned long long ctx;
    int dev;   /* >= 0: the primary context of dev, whatever its handle */
} shim_ctx_match;

static int shim_ctx_matches(const shim_entry *e, const void *arg) {
    const shim_ctx_match *m = arg;
    return m->dev >= 0 ? e->owner && e->dev == m->dev : e->ref == m->ctx;
}

/* Drops the records of a context that ended, giving their bytes back. */
static void shim_ctx_ended(shim_ctx_match m) {
    for (;;) {
        int dev = -1;
        size_t bytes = 0;
        pthread_mutex_lock(&g.mu);
        shim_entry *e = shim_scan_unsafe(SHIM_KIND_CTXLIM, shim_ctx_matches, &m);
        if (e) {
            dev = e->dev;
            bytes = e->size;
            shim_remove_unsafe(e);
        }
        pthread_mutex_unlock(&g.mu);
        if (!e) return;
        shim_uncount(dev, bytes);
    }
}

static CUresult shim_ctx_destroy(pfn_cuCtxDestroy_v2 real, CUcontext ctx) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(ctx);
    if (r == CUDA_SUCCESS && ctx) shim_ctx_ended((shim_ctx_match){ (unsigned long long)(uintptr_t)ctx, -1 });
    return r;
}

SHIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { return shim_ctx_destroy(SHIM_REAL(cuCtxDestroy_v2), ctx); }

SHIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return shim_ctx_destroy(SHIM_REAL(cuCtxDestroy), ctx); }

static CUresult shim_primary_reset(pfn_cuDevicePrimaryCtxReset_v2 real, CUdevice dev) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(dev);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < SHIM_MAX_DEVICES) shim_ctx_ended((shim_ctx_match){ 0, dev });
    return r;
}

SHIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    return shim_primary_reset(SHIM_REAL(cuDevicePrimaryCtxReset_v2), dev);
}

SHIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
    return shim_primary_reset(SHIM_REAL(cuDevicePrimaryCtxReset), dev);
}

/* The last release of the primary context ends it. */
static CUresult shim_primary_release(pfn_cuDevicePrimaryCtxRelease real, CUdevice dev) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(dev);
    unsigned int flags = 0;
    int active = 1;
    if (r == CUDA_SUCCESS && dev >= 0 && dev < SHIM_MAX_DEVICES && g.real.cuDevicePrimaryCtxGetState &&
        g.real.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active)
        shim_ctx_ended((shim_ctx_match){ 0, dev });
    return r;
}

SHIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    return shim_primary_release(SHIM_REAL(cuDevicePrimaryCtxRelease_v2), dev);
}

SHIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    return shim_primary_release(SHIM_REAL(cuDevicePrimaryCtxRelease), dev);
}
