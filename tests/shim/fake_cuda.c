/*
 * fake_cuda.c: a libcuda.so.1 double for the preload library's tests. It implements the handful of
 * driver calls the preload library interposes on (plus cuInit, cuDeviceGet, cuDeviceGetCount, the
 * primary context, cuCtxGetDevice, cuDeviceGetUuid and cuMemGetAllocationGranularity: 2 MiB) over
 * simulated memory (cuMemCreate handles and cuMemAlloc pointers share each device's 16 GiB): FAKE_CUDA_DEVICES devices (default 2)
 * of 16 GiB each. Allocations hand out addresses from a counter (nothing is backed by host memory)
 * and are kept in a list, so frees of unknown pointers fail as the real driver's do. The current
 * context is per thread, as in CUDA. cuGetProcAddress (v1 and _v2) returns this library's exported
 * functions, or with FAKE_CUDA_PROC=internal the same functions at other addresses (as a driver may
 * hand out internal entry points that no exported symbol names). FAKE_CUDA_VMM=off makes cuMemCreate
 * fail with CUDA_ERROR_NOT_SUPPORTED. FAKE_CUDA_SHARED=FILE makes the devices one machine's cards
 * that all processes naming FILE share: each process's bytes per device are kept in FILE (a slot
 * per pid, under flock; slots of dead processes count nothing, as the driver frees a process's
 * memory when it ends), and each allocation and cuMemGetInfo go by the sum. After the slots the file
 * keeps, per device, the highest sum any allocation reached (FAKE_SHARE_PEAK_AT: 8-byte counters),
 * which tests/shim/fault_test.py reads to check that a group never held more than its limit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_driver.h"

#define FAKE_MAX_DEVICES 8
#define FAKE_TOTAL (16ull << 30)

SHIM_EXPORT CUresult cuInit(unsigned int flags);
SHIM_EXPORT CUresult cuDeviceGetCount(int *count);
SHIM_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal);
SHIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
SHIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx);
SHIM_EXPORT CUresult cuCtxGetDevice(CUdevice *dev);

typedef struct fake_uuid { unsigned char bytes[16]; } fake_uuid;
SHIM_EXPORT CUresult cuDeviceGetUuid(fake_uuid *uuid, CUdevice dev);
SHIM_EXPORT CUresult cuDeviceGetUuid_v2(fake_uuid *uuid, CUdevice dev);

typedef struct fake_alloc {
    unsigned long long key;
    size_t size;
    int dev;
    int handle;   /* a cuMemCreate handle rather than a pointer */
} fake_alloc;

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_alloc *fake_list;
static size_t fake_count, fake_cap;
static size_t fake_used[FAKE_MAX_DEVICES];
static unsigned long long fake_next_addr = 0x7f0000000000ull, fake_next_handle = 1;
static int fake_initialized;
static _Thread_local int fake_current = -1;   /* this thread's context: its device, or -1 */

/* ---- FAKE_CUDA_SHARED: the cards' usage shared between processes ---------------------------- */

#define FAKE_SHARE_SLOTS 128

typedef struct fake_share_slot {
    int pid;    /* 0: free */
    int pad;
    unsigned long long used[FAKE_MAX_DEVICES];
} fake_share_slot;

/* after the slots: unsigned long long peak[FAKE_MAX_DEVICES], the highest sum of live processes' bytes */
#define FAKE_SHARE_PEAK_AT (FAKE_SHARE_SLOTS * sizeof(fake_share_slot))
#define FAKE_SHARE_BYTES (FAKE_SHARE_PEAK_AT + FAKE_MAX_DEVICES * sizeof(unsigned long long))

static fake_share_slot *fake_share;   /* the mapping, or NULL when not shared */
static int fake_share_fd = -1, fake_share_tried, fake_share_me = -1;

static int fake_pid_alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH); }

/* Opens the shared file once and claims this process's slot (caller holds fake_mu). */
static void fake_share_open_unsafe(void) {
    if (fake_share_tried) return;
    fake_share_tried = 1;
    const char *path = getenv("FAKE_CUDA_SHARED");
    if (!path || !*path) return;
    size_t len = FAKE_SHARE_BYTES;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    flock(fd, LOCK_EX);
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < (off_t)len && ftruncate(fd, (off_t)len) != 0) { flock(fd, LOCK_UN); close(fd); return; }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { flock(fd, LOCK_UN); close(fd); return; }
    fake_share_slot *t = m;
    int me = -1;
    for (int i = 0; i < FAKE_SHARE_SLOTS && me < 0; i++)
        if (t[i].pid == 0 || t[i].pid == (int)getpid() || !fake_pid_alive(t[i].pid)) me = i;
    if (me >= 0) {
        memset(&t[me], 0, sizeof t[me]);
        t[me].pid = (int)getpid();
        fake_share = t;
        fake_share_fd = fd;
        fake_share_me = me;
    }
    flock(fd, LOCK_UN);
    if (me < 0) { munmap(m, len); close(fd); }
}

/* Bytes in use on dev: this process's alone, or every live process's (caller holds fake_mu and,
 * when shared, the flock). */
static size_t fake_used_unsafe(int dev) {
    if (!fake_share) return fake_used[dev];
    size_t sum = 0;
    for (int i = 0; i < FAKE_SHARE_SLOTS; i++)
        if (fake_share[i].pid && (i == fake_share_me || fake_pid_alive(fake_share[i].pid)))
            sum += fake_share[i].used[dev];
    return sum;
}

static void fake_lock(void) {
    pthread_mutex_lock(&fake_mu);
    fake_share_open_unsafe();
    if (fake_share) flock(fake_share_fd, LOCK_EX);
}

static void fake_unlock(void) {
    if (fake_share) flock(fake_share_fd, LOCK_UN);
    pthread_mutex_unlock(&fake_mu);
}

static void fake_add_unsafe(int dev, size_t size, int sign) {
    if (sign > 0) fake_used[dev] += size;
    else fake_used[dev] -= size;
    if (fake_share) fake_share[fake_share_me].used[dev] = fake_used[dev];
}

/* CUDA_VISIBLE_DEVICES as a list of card indices ("1,0"): the card of ordinal i in phys[i]; the
 * number of entries, or -1 when it is unset (every card visible, in order). Only the device count
 * and the UUIDs follow it (the simulated memory stays by ordinal). */
static int fake_visible(int phys[FAKE_MAX_DEVICES]) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) return -1;
    int n = 0;
    while (*v && n < FAKE_MAX_DEVICES) {
        char *end;
        long c = strtol(v, &end, 10);
        if (end == v || c < 0) break;   /* like the driver: the list ends at an invalid entry */
        phys[n++] = (int)c;
        v = *end == ',' ? end + 1 : end;
        if (*end != ',') break;
    }
    return n;
}

static int fake_device_count(void) {
    const char *v = getenv("FAKE_CUDA_DEVICES");
    int n = v ? atoi(v) : 2;
    n = n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
    int phys[FAKE_MAX_DEVICES], visible = fake_visible(phys);
    if (visible >= 0) {
        int k = 0;
        while (k < visible && phys[k] < n) k++;
        n = k;
    }
    return n;
}

SHIM_EXPORT CUresult cuInit(unsigned int flags) {
    (void)flags;
    fake_initialized = 1;
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuDeviceGetCount(int *count) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = fake_device_count();
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

/* A context is the device ordinal + 1, disguised as a pointer. */
SHIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = (CUcontext)(uintptr_t)(dev + 1);
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    fake_current = ctx ? (int)(uintptr_t)ctx - 1 : -1;
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuCtxGetDevice(CUdevice *dev) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (fake_current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = fake_current;
    return CUDA_SUCCESS;
}

/* Device d's UUID: fa4ec0da-0000-4000-8000-0000000000<d>, printed GPU-fa4ec0da-0000-4000-8000-0000000000dd
 * (FAKE_CUDA_UUID_BASE=N adds N to the last byte, for a second "machine" of distinct cards); d is the
 * card's index, ordinal <d> of CUDA_VISIBLE_DEVICES when it is set. */
SHIM_EXPORT CUresult cuDeviceGetUuid_v2(fake_uuid *uuid, CUdevice dev) {
    static const unsigned char base[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    const char *add = getenv("FAKE_CUDA_UUID_BASE");
    int phys[FAKE_MAX_DEVICES], card = fake_visible(phys) >= 0 ? phys[dev] : dev;
    memcpy(uuid->bytes, base, 16);
    uuid->bytes[15] = (unsigned char)(card + (add ? atoi(add) : 0));
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuDeviceGetUuid(fake_uuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

/* ---- simulated memory -------------------------------------------------------------------------- */

static CUresult fake_take(int dev, size_t size, int handle, unsigned long long *key) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!key || size == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    size_t in_use = fake_used_unsafe(dev);
    if (in_use > FAKE_TOTAL || size > FAKE_TOTAL - in_use) r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (fake_count == fake_cap) {
        size_t cap = fake_cap ? fake_cap * 2 : 256;
        fake_alloc *l = realloc(fake_list, cap * sizeof *l);
        if (!l) r = CUDA_ERROR_OUT_OF_MEMORY;
        else { fake_list = l; fake_cap = cap; }
    }
    if (r == CUDA_SUCCESS) {
        *key = handle ? fake_next_handle++ : fake_next_addr;
        if (!handle) fake_next_addr += (size + 0xfffffull) & ~0xfffffull;   /* 1 MiB apart */
        fake_list[fake_count++] = (fake_alloc){ *key, size, dev, handle };
        fake_add_unsafe(dev, size, 1);
        if (fake_share) {
            unsigned long long *peak = (unsigned long long *)((char *)fake_share + FAKE_SHARE_PEAK_AT);
            size_t sum = fake_used_unsafe(dev);
            if (sum > peak[dev]) peak[dev] = sum;
        }
    }
    fake_unlock();
    return r;
}

static CUresult fake_give(unsigned long long key, int handle) {
    CUresult r = handle ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    for (size_t i = 0; i < fake_count; i++) {
        if (fake_list[i].key != key || fake_list[i].handle != handle) continue;
        fake_add_unsafe(fake_list[i].dev, fake_list[i].size, -1);
        fake_list[i] = fake_list[--fake_count];
        r = CUDA_SUCCESS;
        break;
    }
    fake_unlock();
    return r;
}

static CUresult impl_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    return fake_take(fake_current, bytesize, 0, dptr);
}

static CUresult impl_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                        size_t height, unsigned int element_size_bytes) {
    (void)element_size_bytes;
    if (!pitch || width_bytes == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width_bytes + 511) & ~(size_t)511;
    if (p > FAKE_TOTAL / height) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = fake_take(fake_current, p * height, 0, dptr);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}

static CUresult impl_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    (void)flags;
    return fake_take(fake_current, bytesize, 0, dptr);
}

static CUresult impl_cuMemFree_v2(CUdeviceptr dptr) { return fake_give(dptr, 0); }

static CUresult impl_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (fake_current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    size_t in_use = fake_used_unsafe(fake_current);
    *free_bytes = in_use >= FAKE_TOTAL ? 0 : FAKE_TOTAL - in_use;
    *total_bytes = FAKE_TOTAL;
    fake_unlock();
    return CUDA_SUCCESS;
}

static CUresult impl_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = FAKE_TOTAL;
    return CUDA_SUCCESS;
}

static CUresult impl_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
    (void)flags;
    if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id < 0 || prop->location.id >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (size % (2u << 20)) return CUDA_ERROR_INVALID_VALUE;   /* whole 2 MiB granules */
    const char *vmm = getenv("FAKE_CUDA_VMM");                  /* "off": a driver without VMM support */
    if (vmm && strcmp(vmm, "off") == 0) return CUDA_ERROR_NOT_SUPPORTED;
    return fake_take(prop->location.id, size, 1, handle);
}

static CUresult impl_cuMemRelease(CUmemGenericAllocationHandle handle) { return fake_give(handle, 1); }

/* cuMemGetAllocationGranularity(size_t *, const CUmemAllocationProp *, option): 2 MiB, minimum and
 * recommended alike (cuMemCreate wants whole granules). Not in cuda_driver.h: declared here. */
SHIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop, int option);

static CUresult impl_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                   int option) {
    if (!fake_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || !prop || (option != 0 && option != 1)) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id < 0 || prop->location.id >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *granularity = 2u << 20;
    return CUDA_SUCCESS;
}

static CUresult impl_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    (void)stream;
    return fake_take(fake_current, bytesize, 0, dptr);
}

/* The _ptsz variants do the same work without calling the exported functions: a call to an
 * exported symbol from inside this library would bind to the preload library's version. */
static CUresult impl_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    (void)stream;
    return fake_take(fake_current, bytesize, 0, dptr);
}

static CUresult impl_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream) {
    (void)stream;
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return fake_take(fake_current, bytesize, 0, dptr);
}

static CUresult impl_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream stream) {
    (void)stream;
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return fake_take(fake_current, bytesize, 0, dptr);
}

static CUresult impl_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    (void)stream;
    return fake_give(dptr, 0);
}

static CUresult impl_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    (void)stream;
    return fake_give(dptr, 0);
}

/* ---- cuGetProcAddress ------------------------------------------------------------------------------ */

typedef struct fake_proc {
    const char *base;
    int min_version, ptsz;
    void *fn;         /* the exported function */
    void *internal;   /* the same function at another address (FAKE_CUDA_PROC=internal) */
} fake_proc;

static CUresult impl_cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags);
static CUresult impl_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status);

static const fake_proc fake_procs[] = {
    { "cuInit", 2000, 0, (void *)cuInit, (void *)cuInit },
    { "cuDeviceGet", 2000, 0, (void *)cuDeviceGet, (void *)cuDeviceGet },
    { "cuDeviceGetCount", 2000, 0, (void *)cuDeviceGetCount, (void *)cuDeviceGetCount },
    { "cuDevicePrimaryCtxRetain", 7000, 0, (void *)cuDevicePrimaryCtxRetain, (void *)cuDevicePrimaryCtxRetain },
    { "cuCtxSetCurrent", 4000, 0, (void *)cuCtxSetCurrent, (void *)cuCtxSetCurrent },
    { "cuCtxGetDevice", 2000, 0, (void *)cuCtxGetDevice, (void *)cuCtxGetDevice },
    { "cuDeviceGetUuid", 9020, 0, (void *)cuDeviceGetUuid, (void *)cuDeviceGetUuid },
    { "cuDeviceGetUuid", 11040, 0, (void *)cuDeviceGetUuid_v2, (void *)cuDeviceGetUuid_v2 },
    { "cuMemAlloc", 3020, 0, (void *)cuMemAlloc_v2, (void *)impl_cuMemAlloc_v2 },
    { "cuMemAllocPitch", 3020, 0, (void *)cuMemAllocPitch_v2, (void *)impl_cuMemAllocPitch_v2 },
    { "cuMemAllocManaged", 6000, 0, (void *)cuMemAllocManaged, (void *)impl_cuMemAllocManaged },
    { "cuMemFree", 3020, 0, (void *)cuMemFree_v2, (void *)impl_cuMemFree_v2 },
    { "cuMemGetInfo", 3020, 0, (void *)cuMemGetInfo_v2, (void *)impl_cuMemGetInfo_v2 },
    { "cuDeviceTotalMem", 3020, 0, (void *)cuDeviceTotalMem_v2, (void *)impl_cuDeviceTotalMem_v2 },
    { "cuMemCreate", 10020, 0, (void *)cuMemCreate, (void *)impl_cuMemCreate },
    { "cuMemRelease", 10020, 0, (void *)cuMemRelease, (void *)impl_cuMemRelease },
    { "cuMemGetAllocationGranularity", 10020, 0, (void *)cuMemGetAllocationGranularity,
      (void *)impl_cuMemGetAllocationGranularity },
    { "cuMemAllocAsync", 11020, 0, (void *)cuMemAllocAsync, (void *)impl_cuMemAllocAsync },
    { "cuMemAllocAsync", 11020, 1, (void *)cuMemAllocAsync_ptsz, (void *)impl_cuMemAllocAsync_ptsz },
    { "cuMemAllocFromPoolAsync", 11020, 0, (void *)cuMemAllocFromPoolAsync, (void *)impl_cuMemAllocFromPoolAsync },
    { "cuMemAllocFromPoolAsync", 11020, 1, (void *)cuMemAllocFromPoolAsync_ptsz, (void *)impl_cuMemAllocFromPoolAsync_ptsz },
    { "cuMemFreeAsync", 11020, 0, (void *)cuMemFreeAsync, (void *)impl_cuMemFreeAsync },
    { "cuMemFreeAsync", 11020, 1, (void *)cuMemFreeAsync_ptsz, (void *)impl_cuMemFreeAsync_ptsz },
    { "cuGetProcAddress", 11030, 0, (void *)cuGetProcAddress, (void *)impl_cuGetProcAddress },
    { "cuGetProcAddress", 12000, 0, (void *)cuGetProcAddress_v2, (void *)impl_cuGetProcAddress_v2 },
};

static CUresult fake_lookup(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status) {
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, found = 0;
    const fake_proc *best = NULL;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof fake_procs / sizeof fake_procs[0]; i++) {
        const fake_proc *p = &fake_procs[i];
        if (strcmp(p->base, symbol) != 0) continue;
        found = 1;
        if (p->min_version > cuda_version) continue;
        if (p->ptsz && !ptsz) continue;
        if (!best || p->min_version > best->min_version || (p->ptsz && !best->ptsz)) best = p;
    }
    const char *mode = getenv("FAKE_CUDA_PROC");
    int internal = mode && strcmp(mode, "internal") == 0;
    *pfn = best ? (internal ? best->internal : best->fn) : NULL;
    if (status)
        *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                       : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult impl_cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags) {
    return fake_lookup(symbol, pfn, cuda_version, flags, NULL);
}

static CUresult impl_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    return fake_lookup(symbol, pfn, cuda_version, flags, status);
}

/* ---- the exported functions: what cuGetProcAddress returns unless FAKE_CUDA_PROC=internal ---- */

SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    return impl_cuMemAlloc_v2(dptr, bytesize);
}

SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                        size_t height, unsigned int element_size_bytes) {
    return impl_cuMemAllocPitch_v2(dptr, pitch, width_bytes, height, element_size_bytes);
}

SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    return impl_cuMemAllocManaged(dptr, bytesize, flags);
}

SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    return impl_cuMemFree_v2(dptr);
}

SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    return impl_cuMemGetInfo_v2(free_bytes, total_bytes);
}

SHIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    return impl_cuDeviceTotalMem_v2(bytes, dev);
}

SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
    return impl_cuMemCreate(handle, size, prop, flags);
}

SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    return impl_cuMemRelease(handle);
}

SHIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop, int option) {
    return impl_cuMemGetAllocationGranularity(granularity, prop, option);
}

SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return impl_cuMemAllocAsync(dptr, bytesize, stream);
}

SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return impl_cuMemAllocAsync_ptsz(dptr, bytesize, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream) {
    return impl_cuMemAllocFromPoolAsync(dptr, bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream stream) {
    return impl_cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    return impl_cuMemFreeAsync(dptr, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    return impl_cuMemFreeAsync_ptsz(dptr, stream);
}

SHIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags) {
    return impl_cuGetProcAddress(symbol, pfn, cuda_version, flags);
}

SHIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    return impl_cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, status);
}
