/*
 * fake_mem.c: the fake driver's plain device memory, its memory pools and every free of a device
 * pointer (fake_cuda.c says what the fake models).
 *
 * Plain allocations: cuMemAlloc_v2, cuMemAllocPitch_v2 (rows padded to 512 bytes), cuMemAllocManaged
 * and the CUDA < 3.2 entry points cuMemAlloc / cuMemAllocPitch, whose 32-bit addresses come from
 * their own counter: 0x10000000 and up, 1 MiB apart whatever the size (the addresses name the
 * allocations, nothing is behind them, so that a program can hold a card's worth of them: 3840 at
 * once), then, once it reaches 4 GiB, the lowest such address no live block has; each holds its bytes. cuMemGetInfo(_v2) and cuDeviceTotalMem(_v2) tell the card (the
 * 32-bit ones clamped to UINT_MAX).
 *
 * Pools (stream-ordered allocation), as the driver keeps them: every device has a default pool,
 * made when first needed, and a current pool (cuDeviceSetMemPool; the default at first);
 * cuMemPoolCreate makes more (on a device, or on the host: those hold no device memory). A pool has
 * reserved bytes R (held), used bytes U (its live blocks), a release threshold T (0 at first) and
 * high-water marks of both. cuMemAllocAsync (the current pool of the current context's device) and
 * cuMemAllocFromPoolAsync round a block up to 2 MiB and take it from the pool's idle R - U, growing
 * R by what is missing (out of memory past the card, or past the pool's maxSize). A free (of any
 * kind, below) gives the block back to the pool and, as if the stream reached it and synchronized at
 * once, the pool releases what it reserves beyond max(U, T). cuMemPoolTrimTo(keep) releases down to
 * max(U, min(R, keep)). cuMemPoolDestroy of a pool with live blocks succeeds, the pool goes when the
 * last is freed (its memory then released); a default pool cannot be destroyed; destroying a
 * device's current pool makes the default current again. cuStreamSynchronize does nothing.
 *
 * Frees: cuMemFree_v2, cuMemFree and cuMemFreeAsync (and _ptsz) free any device pointer the fake
 * handed out, plain, pool block or graph allocation (fake_graph.c adds those), as the driver
 * documents; an unknown pointer, or another process's memory opened here, is
 * CUDA_ERROR_INVALID_VALUE.
 *
 * IPC of plain allocations: cuIpcGetMemHandle of a plain allocation's start (a 64-byte handle naming
 * the process, device, address and size); cuIpcOpenMemHandle(_v2) in another process maps it at a new
 * address (a device pointer that holds nothing here), in the process that made it is
 * CUDA_ERROR_INVALID_CONTEXT, as the driver answers, and once that process is gone
 * CUDA_ERROR_INVALID_VALUE; cuIpcCloseMemHandle unmaps it.
 *
 * Pinned host memory: cuMemHostAlloc maps `bytesize` bytes of host memory (anonymous, reserved
 * lazily: nothing of a card), kept in a list with its flags; cuMemHostGetDevicePointer_v2 (flags 0)
 * gives the device's address of a block allocated with CU_MEMHOSTALLOC_DEVICEMAP: the host address
 * itself, as with unified addressing (any other pointer, or a block without the flag, is
 * CUDA_ERROR_INVALID_VALUE); cuMemFreeHost unmaps a block (an unknown pointer is
 * CUDA_ERROR_INVALID_VALUE, and so is cuMemFree_v2 of one: it is no device memory). Held bytes:
 * fake_cuda_host_held.
 *
 * Invariants: for every pool, U <= R (R <= maxSize when it has one) and U is the sum of its live
 * blocks; R of every pool is in held[] (fake_cuda.c). Locks: fake_mu (fake_lock) around every
 * access to the pools and the blocks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_internal.h"

/* ---- plain allocations ------------------------------------------------------------------------- */

#define FAKE_V1_BASE 0x10000000ull
#define FAKE_V1_END (1ull << 32)

static unsigned long long fake_next_addr32 = FAKE_V1_BASE;

/* An address below 4 GiB for an allocation, or 0 when every one is taken. */
static unsigned long long fake_address32_unsafe(void) {
    if (fake_next_addr32 < FAKE_V1_END) {
        unsigned long long at = fake_next_addr32;
        fake_next_addr32 += 1u << 20;
        return at;
    }
    for (unsigned long long at = FAKE_V1_BASE; at < FAKE_V1_END; at += 1u << 20)
        if (!fake_block_find_unsafe(at)) return at;
    return 0;
}

/* A plain allocation of `size` bytes on dev; v1: at a 32-bit address. */
static CUresult fake_plain_alloc(int dev, size_t size, int v1, unsigned long long *key) {
    if (!key || size == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    if (fake_blocks_reserve_unsafe(1) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    else r = fake_hold_unsafe(dev, size);
    if (r == CUDA_SUCCESS) {
        unsigned long long at = v1 ? fake_address32_unsafe() : fake_address_unsafe(size, 1u << 20, 0);
        if (!at) {
            fake_unhold_unsafe(dev, size);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            fake_block b = { .key = at, .size = size, .dev = dev, .kind = FAKE_BLOCK_PLAIN };
            fake_block_add_unsafe(&b);
            *key = at;
        }
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    return r != CUDA_SUCCESS ? r : fake_plain_alloc(dev, bytesize, 0, dptr);
}

/* Rows of width_bytes padded to 512 bytes (element_size_bytes, a hint to the driver, changes nothing). */
CUresult impl_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes, size_t height,
                                 unsigned int element_size_bytes) {
    (void)element_size_bytes;
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!pitch || width_bytes == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t p = fake_round_up(width_bytes, 512);
    if (p > fake_card_bytes(dev) / height) return CUDA_ERROR_OUT_OF_MEMORY;
    r = fake_plain_alloc(dev, p * height, 0, dptr);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}

CUresult impl_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (flags != 0x1 && flags != 0x2) return CUDA_ERROR_INVALID_VALUE;   /* CU_MEM_ATTACH_GLOBAL or _HOST */
    return fake_plain_alloc(dev, bytesize, 0, dptr);
}

CUresult impl_cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
    int dev = -1;
    unsigned long long at = 0;
    CUresult r = fake_current_device(&dev);
    if (r == CUDA_SUCCESS) r = dptr ? fake_plain_alloc(dev, bytesize, 1, &at) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr_v1)at;
    return r;
}

CUresult impl_cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width_bytes,
                              unsigned int height, unsigned int element_size_bytes) {
    (void)element_size_bytes;
    int dev = -1;
    unsigned long long at = 0;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || !pitch || width_bytes == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t p = fake_round_up(width_bytes, 512);
    if (p > UINT_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (p > fake_card_bytes(dev) / height) return CUDA_ERROR_OUT_OF_MEMORY;
    r = fake_plain_alloc(dev, p * height, 1, &at);
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)at;
        *pitch = (unsigned int)p;
    }
    return r;
}

static CUresult fake_mem_info(size_t *free_bytes, size_t *total_bytes) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    size_t room = fake_room_unsafe(dev);
    fake_unlock();
    *free_bytes = room;
    *total_bytes = fake_card_bytes(dev);
    return CUDA_SUCCESS;
}

CUresult impl_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    return fake_mem_info(free_bytes, total_bytes);
}

CUresult impl_cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes) {
    size_t f = 0, t = 0;
    if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_mem_info(&f, &t);
    if (r != CUDA_SUCCESS) return r;
    *free_bytes = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
    *total_bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    return CUDA_SUCCESS;
}

CUresult impl_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = fake_card_bytes(dev);
    return CUDA_SUCCESS;
}

CUresult impl_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    size_t b = 0;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = impl_cuDeviceTotalMem_v2(&b, dev);
    if (r == CUDA_SUCCESS) *bytes = b > UINT_MAX ? UINT_MAX : (unsigned int)b;
    return r;
}

/* ---- pools --------------------------------------------------------------------------------------- */

typedef struct fake_pool {
    uintptr_t id;
    int dev;                 /* FAKE_HOST: a pool of host memory */
    int is_default;
    int destroyed;           /* destroyed with live blocks: gone when the last is freed */
    size_t reserved, used, threshold, reserved_high, used_high, max_size;
    size_t blocks;           /* live blocks */
    int reuse[3];            /* CU_MEMPOOL_ATTR_REUSE_* */
} fake_pool;

static fake_pool *fake_pools;
static size_t fake_npools, fake_pools_cap;
static uintptr_t fake_default_pool[FAKE_MAX_DEVICES], fake_current_pool[FAKE_MAX_DEVICES];   /* 0: none yet */

static fake_pool *fake_pool_find_unsafe(uintptr_t id) {
    for (size_t i = 0; i < fake_npools; i++)
        if (fake_pools[i].id == id) return &fake_pools[i];
    return NULL;
}

/* A pool the program may use: known and not destroyed. */
static fake_pool *fake_pool_live_unsafe(CUmemoryPool pool) {
    fake_pool *p = pool ? fake_pool_find_unsafe((uintptr_t)pool) : NULL;
    return p && !p->destroyed ? p : NULL;
}

/* Invalidates every fake_pool pointer. */
static CUresult fake_pool_new_unsafe(int dev, int is_default, size_t max_size, uintptr_t *id) {
    if (fake_reserve((void **)&fake_pools, &fake_pools_cap, fake_npools, 1, sizeof *fake_pools) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_pool *p = &fake_pools[fake_npools++];
    memset(p, 0, sizeof *p);
    p->id = fake_opaque_unsafe(FAKE_OBJ_POOL);
    p->dev = dev;
    p->is_default = is_default;
    p->max_size = max_size;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    *id = p->id;
    return CUDA_SUCCESS;
}

static void fake_pool_remove_unsafe(fake_pool *p) {
    fake_unhold_unsafe(p->dev, p->reserved);
    *p = fake_pools[--fake_npools];
}

static CUresult fake_default_pool_unsafe(int dev, uintptr_t *id) {
    CUresult r = CUDA_SUCCESS;
    if (!fake_default_pool[dev]) r = fake_pool_new_unsafe(dev, 1, 0, &fake_default_pool[dev]);
    *id = fake_default_pool[dev];
    return r;
}

static CUresult fake_current_pool_unsafe(int dev, uintptr_t *id) {
    if (fake_current_pool[dev]) {
        *id = fake_current_pool[dev];
        return CUDA_SUCCESS;
    }
    return fake_default_pool_unsafe(dev, id);
}

/* Releases what p reserves beyond max(U, floor). */
static void fake_pool_release_unsafe(fake_pool *p, size_t floor) {
    size_t keep = p->used > floor ? p->used : floor;
    if (p->reserved <= keep) return;
    fake_unhold_unsafe(p->dev, p->reserved - keep);
    p->reserved = keep;
}

static CUresult fake_pool_alloc_unsafe(fake_pool *p, size_t size, CUdeviceptr *dptr) {
    size_t rounded = fake_round_up(size, FAKE_GRANULE);
    size_t idle = p->reserved - p->used;
    size_t grow = rounded > idle ? rounded - idle : 0;
    if (p->max_size && grow > p->max_size - p->reserved) return CUDA_ERROR_OUT_OF_MEMORY;
    if (fake_blocks_reserve_unsafe(1) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned long long at = fake_address_unsafe(rounded, FAKE_GRANULE, 0);
    if (!at) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = fake_hold_unsafe(p->dev, grow);
    if (r != CUDA_SUCCESS) return r;
    p->reserved += grow;
    p->used += rounded;
    p->blocks++;
    if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
    if (p->used > p->used_high) p->used_high = p->used;
    fake_block b = { .key = at, .size = rounded, .dev = p->dev, .kind = FAKE_BLOCK_POOL, .owner = p->id };
    fake_block_add_unsafe(&b);
    *dptr = at;
    return CUDA_SUCCESS;
}

static CUresult fake_alloc_async(CUdeviceptr *dptr, size_t bytesize) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t id = 0;
    fake_lock();
    r = fake_current_pool_unsafe(dev, &id);
    if (r == CUDA_SUCCESS) r = fake_pool_alloc_unsafe(fake_pool_find_unsafe(id), bytesize, dptr);
    fake_unlock();
    return r;
}

CUresult impl_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    (void)stream;
    return fake_alloc_async(dptr, bytesize);
}

CUresult impl_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    (void)stream;
    return fake_alloc_async(dptr, bytesize);
}

static CUresult fake_alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);   /* the stream's context: there must be one */
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    fake_pool *p = fake_pool_live_unsafe(pool);
    r = p ? fake_pool_alloc_unsafe(p, bytesize, dptr) : CUDA_ERROR_INVALID_VALUE;
    fake_unlock();
    return r;
}

CUresult impl_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
    (void)stream;
    return fake_alloc_from_pool(dptr, bytesize, pool);
}

CUresult impl_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
    (void)stream;
    return fake_alloc_from_pool(dptr, bytesize, pool);
}

CUresult impl_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    switch (props->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (props->location.id < 0 || props->location.id >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
        dev = props->location.id;
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:   /* one NUMA node, 0 */
        if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE && props->location.type == CU_MEM_LOCATION_TYPE_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        if (props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && props->location.id != 0)
            return CUDA_ERROR_INVALID_VALUE;
        dev = FAKE_HOST;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    uintptr_t id = 0;
    fake_lock();
    CUresult r = fake_pool_new_unsafe(dev, 0, props->maxSize, &id);
    fake_unlock();
    if (r == CUDA_SUCCESS) *pool = (CUmemoryPool)id;
    return r;
}

CUresult impl_cuMemPoolDestroy(CUmemoryPool pool) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_pool *p = fake_pool_live_unsafe(pool);
    if (!p || p->is_default) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (int d = 0; d < FAKE_MAX_DEVICES; d++)
            if (fake_current_pool[d] == p->id) fake_current_pool[d] = 0;
        if (p->blocks) p->destroyed = 1;
        else fake_pool_remove_unsafe(p);
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_pool *p = fake_pool_live_unsafe(pool);
    if (!p) r = CUDA_ERROR_INVALID_VALUE;
    else fake_pool_release_unsafe(p, keep < p->reserved ? keep : p->reserved);
    fake_unlock();
    return r;
}

CUresult impl_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_pool *p = fake_pool_live_unsafe(pool);
    if (!p) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    fake_unlock();
    return r;
}

/* The threshold takes effect at the next free (the pool releases at synchronization); a high-water
 * mark can only be reset (to 0, after which it is the current figure); the current figures are
 * read-only. */
CUresult impl_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_pool *p = fake_pool_live_unsafe(pool);
    if (!p) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = (size_t) * (cuuint64_t *)value; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0) r = CUDA_ERROR_INVALID_VALUE;
            else p->reserved_high = p->reserved;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0) r = CUDA_ERROR_INVALID_VALUE;
            else p->used_high = p->used;
            break;
        default: r = CUDA_ERROR_INVALID_VALUE;   /* the current figures, or not an attribute */
        }
    }
    fake_unlock();
    return r;
}

static CUresult fake_device_pool(CUmemoryPool *pool, CUdevice dev, int current) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    uintptr_t id = 0;
    fake_lock();
    CUresult r = current ? fake_current_pool_unsafe(dev, &id) : fake_default_pool_unsafe(dev, &id);
    fake_unlock();
    if (r == CUDA_SUCCESS) *pool = (CUmemoryPool)id;
    return r;
}

CUresult impl_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) { return fake_device_pool(pool, dev, 0); }

CUresult impl_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) { return fake_device_pool(pool, dev, 1); }

CUresult impl_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_pool *p = fake_pool_live_unsafe(pool);
    if (!p || p->dev != dev) r = CUDA_ERROR_INVALID_VALUE;   /* the pool must be local to the device */
    else fake_current_pool[dev] = p->is_default ? 0 : p->id;
    fake_unlock();
    return r;
}

/* ---- frees --------------------------------------------------------------------------------------- */

/* A pool block comes back: U drops; the pool releases beyond max(U, T) (all of it once destroyed and
 * empty). */
static void fake_pool_block_freed_unsafe(const fake_block *b) {
    fake_pool *p = fake_pool_find_unsafe(b->owner);
    if (!p) return;
    p->used -= b->size;
    p->blocks--;
    if (p->destroyed && p->blocks == 0) fake_pool_remove_unsafe(p);
    else fake_pool_release_unsafe(p, p->threshold);
}

static CUresult fake_free(unsigned long long key) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_block *b = key ? fake_block_find_unsafe(key) : NULL;
    if (!b || b->kind == FAKE_BLOCK_IPC) {   /* another process's memory goes with cuIpcCloseMemHandle */
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        fake_block gone = *b;
        fake_block_remove_unsafe(b);
        if (gone.kind == FAKE_BLOCK_PLAIN) fake_unhold_unsafe(gone.dev, gone.size);
        else if (gone.kind == FAKE_BLOCK_POOL) fake_pool_block_freed_unsafe(&gone);
        /* FAKE_BLOCK_GRAPH: graph memory stays reserved (fake_graph.c) */
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemFree_v2(CUdeviceptr dptr) { return fake_free(dptr); }
CUresult impl_cuMemFree(CUdeviceptr_v1 dptr) { return fake_free(dptr); }

CUresult impl_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    (void)stream;
    return fake_free(dptr);
}

CUresult impl_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    (void)stream;
    return fake_free(dptr);
}

/* ---- IPC of plain allocations ------------------------------------------------------------------- */

/* What a CUipcMemHandle of the fake holds (64 bytes). */
typedef struct fake_ipc {
    char magic[8];              /* "fakeIPC" */
    int pid, dev;
    unsigned long long dptr, size;
    char unused[CU_IPC_HANDLE_SIZE - 32];
} fake_ipc;
_Static_assert(sizeof(fake_ipc) == CU_IPC_HANDLE_SIZE, "an IPC handle is 64 bytes");

static const char fake_ipc_magic[8] = "fakeIPC";

/* The handle of a plain allocation, by its start (not a pool block: those go through pools' IPC). */
CUresult impl_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    fake_ipc h;
    memset(&h, 0, sizeof h);
    fake_lock();
    const fake_block *b = dptr ? fake_block_find_unsafe(dptr) : NULL;
    if (!b || b->kind != FAKE_BLOCK_PLAIN) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        memcpy(h.magic, fake_ipc_magic, sizeof h.magic);
        h.pid = (int)getpid();
        h.dev = b->dev;
        h.dptr = b->key;
        h.size = b->size;
    }
    fake_unlock();
    if (r == CUDA_SUCCESS) memcpy(handle->reserved, &h, sizeof h);
    return r;
}

/* Another process's allocation at a new address of this one (holding nothing here: the exporter
 * holds it). The process that made the handle cannot open it (CUDA_ERROR_INVALID_CONTEXT, as the
 * driver answers), nor can anyone once that process is gone. */
CUresult impl_cuIpcOpenMemHandle_v2(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    fake_ipc h;
    memcpy(&h, handle.reserved, sizeof h);
    if (!dptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
        memcmp(h.magic, fake_ipc_magic, sizeof h.magic) != 0 || h.size == 0 || h.dev < 0 ||
        h.dev >= FAKE_MAX_DEVICES)
        return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == (int)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
    if (kill(h.pid, 0) != 0 && errno == ESRCH) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    unsigned long long at = 0;
    if (fake_blocks_reserve_unsafe(1) != 0 || !(at = fake_address_unsafe(h.size, 1u << 20, 0))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake_block b = { .key = at, .size = h.size, .dev = h.dev, .kind = FAKE_BLOCK_IPC };
        fake_block_add_unsafe(&b);
        *dptr = at;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuIpcOpenMemHandle(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags) {
    return impl_cuIpcOpenMemHandle_v2(dptr, handle, flags);
}

CUresult impl_cuIpcCloseMemHandle(CUdeviceptr dptr) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    fake_lock();
    fake_block *b = dptr ? fake_block_find_unsafe(dptr) : NULL;
    if (!b || b->kind != FAKE_BLOCK_IPC) r = CUDA_ERROR_INVALID_VALUE;
    else fake_block_remove_unsafe(b);
    fake_unlock();
    return r;
}

/* ---- pinned host memory ------------------------------------------------------------------------------ */

typedef struct fake_host_block {
    void *p;
    size_t size;
    unsigned int flags;
} fake_host_block;

static fake_host_block *fake_hosts;
static size_t fake_nhosts, fake_hosts_cap;

/* The block at p (fake_mu held), or NULL. */
static fake_host_block *fake_host_find_unsafe(const void *p) {
    for (size_t i = 0; i < fake_nhosts; i++)
        if (fake_hosts[i].p == p) return &fake_hosts[i];
    return NULL;
}

CUresult impl_cuMemHostAlloc(void **host, size_t bytesize, unsigned int flags) {
    if (!host || bytesize == 0 || (flags & ~0x7u)) return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    fake_lock();
    int ok = fake_reserve((void **)&fake_hosts, &fake_hosts_cap, fake_nhosts, 1, sizeof *fake_hosts) == 0;
    if (ok) fake_hosts[fake_nhosts++] = (fake_host_block){ .p = p, .size = bytesize, .flags = flags };
    fake_unlock();
    if (!ok) {
        munmap(p, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *host = p;
    return CUDA_SUCCESS;
}

CUresult impl_cuMemFreeHost(void *host) {
    fake_lock();
    fake_host_block *b = fake_host_find_unsafe(host);
    fake_host_block gone = b ? *b : (fake_host_block){ 0 };
    if (b) *b = fake_hosts[--fake_nhosts];
    fake_unlock();
    if (!gone.p) return CUDA_ERROR_INVALID_VALUE;
    munmap(gone.p, gone.size);
    return CUDA_SUCCESS;
}

CUresult impl_cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *host, unsigned int flags) {
    if (!dptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    fake_host_block *b = fake_host_find_unsafe(host);
    int mapped = b && (b->flags & CU_MEMHOSTALLOC_DEVICEMAP);
    fake_unlock();
    if (!mapped) return CUDA_ERROR_INVALID_VALUE;
    *dptr = (CUdeviceptr)(uintptr_t)host;
    return CUDA_SUCCESS;
}

SHIM_EXPORT size_t fake_cuda_host_held(void) {
    size_t held = 0;
    fake_lock();
    for (size_t i = 0; i < fake_nhosts; i++) held += fake_hosts[i].size;
    fake_unlock();
    return held;
}

/* ---- the exported functions ---------------------------------------------------------------------- */

FAKE_EXPORT(cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize))
FAKE_EXPORT(cuMemAllocPitch_v2, (CUdeviceptr *dptr, size_t *pitch, size_t width_bytes, size_t height,
                                 unsigned int element_size_bytes),
            (dptr, pitch, width_bytes, height, element_size_bytes))
FAKE_EXPORT(cuMemAllocManaged, (CUdeviceptr *dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags))
FAKE_EXPORT(cuMemFree_v2, (CUdeviceptr dptr), (dptr))
FAKE_EXPORT(cuMemGetInfo_v2, (size_t *free_bytes, size_t *total_bytes), (free_bytes, total_bytes))
FAKE_EXPORT(cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev), (bytes, dev))
FAKE_EXPORT(cuMemAlloc, (CUdeviceptr_v1 *dptr, unsigned int bytesize), (dptr, bytesize))
FAKE_EXPORT(cuMemAllocPitch, (CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width_bytes,
                              unsigned int height, unsigned int element_size_bytes),
            (dptr, pitch, width_bytes, height, element_size_bytes))
FAKE_EXPORT(cuMemFree, (CUdeviceptr_v1 dptr), (dptr))
FAKE_EXPORT(cuMemGetInfo, (unsigned int *free_bytes, unsigned int *total_bytes), (free_bytes, total_bytes))
FAKE_EXPORT(cuDeviceTotalMem, (unsigned int *bytes, CUdevice dev), (bytes, dev))
FAKE_EXPORT(cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream))
FAKE_EXPORT(cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream))
FAKE_EXPORT(cuMemAllocFromPoolAsync, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),
            (dptr, bytesize, pool, stream))
FAKE_EXPORT(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),
            (dptr, bytesize, pool, stream))
FAKE_EXPORT(cuMemFreeAsync, (CUdeviceptr dptr, CUstream stream), (dptr, stream))
FAKE_EXPORT(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream stream), (dptr, stream))
FAKE_EXPORT(cuMemPoolCreate, (CUmemoryPool *pool, const CUmemPoolProps *props), (pool, props))
FAKE_EXPORT(cuMemPoolDestroy, (CUmemoryPool pool), (pool))
FAKE_EXPORT(cuMemPoolTrimTo, (CUmemoryPool pool, size_t keep), (pool, keep))
FAKE_EXPORT(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value), (pool, attr, value))
FAKE_EXPORT(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value), (pool, attr, value))
FAKE_EXPORT(cuDeviceGetDefaultMemPool, (CUmemoryPool *pool, CUdevice dev), (pool, dev))
FAKE_EXPORT(cuDeviceGetMemPool, (CUmemoryPool *pool, CUdevice dev), (pool, dev))
FAKE_EXPORT(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool), (dev, pool))
FAKE_EXPORT(cuIpcGetMemHandle, (CUipcMemHandle *handle, CUdeviceptr dptr), (handle, dptr))
FAKE_EXPORT(cuIpcOpenMemHandle, (CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags), (dptr, handle, flags))
FAKE_EXPORT(cuIpcOpenMemHandle_v2, (CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags),
            (dptr, handle, flags))
FAKE_EXPORT(cuIpcCloseMemHandle, (CUdeviceptr dptr), (dptr))
FAKE_EXPORT(cuMemHostAlloc, (void **host, size_t bytesize, unsigned int flags), (host, bytesize, flags))
FAKE_EXPORT(cuMemFreeHost, (void *host), (host))
FAKE_EXPORT(cuMemHostGetDevicePointer_v2, (CUdeviceptr *dptr, void *host, unsigned int flags), (dptr, host, flags))
