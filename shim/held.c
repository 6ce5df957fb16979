/*
 * held.c: memory the driver holds for the program beyond its allocations, read from the driver:
 * what the program's memory pools reserve (the stream-ordered allocator's memory, live blocks and
 * the cache it keeps under the pool's release threshold alike: CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
 * and the memory the driver reserves for graphs (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), and the
 * way every accounted call reserves (shim_take).
 *
 * A pool is followed from the first time the program allocates from it, creates it or sets its
 * attributes (pools.c); graph memory from the first graph with memory nodes (graphs.c). For each,
 * the bytes counted in g.used are the figure last read; shim_held_refresh re-reads the figures of a
 * device (one driver query a pool, and one for graphs) before every reservation on it and every view
 * of it (cuMemGetInfo, NVML), so that memory a pool gave back at a synchronization stops counting and
 * memory it kept counts. shim_take reserves after the re-read; when refused, it first gives back what
 * the device's pools and graphs hold unused (cuMemPoolTrimTo to the bytes in use,
 * cuDeviceGraphMemTrim), re-reads and tries once more: cached memory goes before an allocation fails.
 * A pool whose figures cannot be read (a driver without the attribute) is not followed: its
 * allocations are then counted one by one (pools.c).
 *
 * Invariants: the sum of the `counted` of the followed pools and graph_counted[d] of device d is in
 * g.used[d]: each change is applied (shim_adjust) under held_mu, in the order it was read, since
 * g.used stops at 0 and changes applied out of order would not add up;
 * held_on[d] is set once d has something to re-read and never cleared (read atomically on the fast
 * path). Locks: held_mu guards the pool list and the graph figures, and is held across the driver's
 * pool calls that could meet a pool being destroyed (query, trim, destroy: all of them short) and
 * while the changes are applied; it is taken before every other lock of the shim (shim_adjust takes
 * the ledger's and the balloon's, then g.mu) and never while holding one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

typedef struct shim_pool_rec {
    CUmemoryPool pool;
    int dev;
    int readable;    /* its reserved memory can be read: counted by pool */
    int destroyed;   /* destroyed with memory in use: its last figure stays counted */
    size_t counted;  /* in g.used[dev] */
} shim_pool_rec;

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static shim_pool_rec *held_pools;
static size_t held_npools, held_cap;
static int held_on[SHIM_MAX_DEVICES];
static int held_graph_on[SHIM_MAX_DEVICES];
static size_t held_graph_counted[SHIM_MAX_DEVICES];
static unsigned long long held_graph_generation[SHIM_MAX_DEVICES];   /* trims of graph memory so far */
static size_t held_gran[SHIM_MAX_DEVICES];

/* ---- fork ------------------------------------------------------------------------------------- */

/* held_mu is taken before fork and given back after it; the child follows nothing of the parent's.
 * Registered at the first pool or graph followed, so after env.c's handlers: its prepare runs first
 * (handlers prepare in the reverse order of their registration), as the lock order wants. */
static void shim_held_fork_prepare(void) { pthread_mutex_lock(&held_mu); }

static void shim_held_fork_parent(void) { pthread_mutex_unlock(&held_mu); }

static void shim_held_fork_child(void) {
    held_npools = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        held_on[d] = 0;
        held_graph_on[d] = 0;
        held_graph_counted[d] = 0;
    }
    pthread_mutex_unlock(&held_mu);
}

static void shim_held_fork_register(void) {
    pthread_atfork(shim_held_fork_prepare, shim_held_fork_parent, shim_held_fork_child);
}

size_t shim_granularity(int dev) {
    if (dev < 0) return 2u << 20;
    size_t gran = __atomic_load_n(&held_gran[dev], __ATOMIC_RELAXED);
    if (gran) return gran;
    shim_cuda_load();
    gran = 0;
    if (g.real.cuMemGetAllocationGranularity) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        if (g.real.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
            gran = 0;
    }
    if (gran == 0 || (gran & (gran - 1))) gran = 2u << 20;
    __atomic_store_n(&held_gran[dev], gran, __ATOMIC_RELAXED);
    return gran;
}

/* ---- the figures ------------------------------------------------------------------------------ */

static int shim_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, size_t *out) {
    cuuint64_t v = 0;
    if (!g.real.cuMemPoolGetAttribute || g.real.cuMemPoolGetAttribute(pool, attr, &v) != CUDA_SUCCESS) return -1;
    *out = (size_t)v;
    return 0;
}

static int shim_graph_attr(int dev, CUgraphMem_attribute attr, size_t *out) {
    cuuint64_t v = 0;
    if (!g.real.cuDeviceGetGraphMemAttribute || g.real.cuDeviceGetGraphMemAttribute(dev, attr, &v) != CUDA_SUCCESS)
        return -1;
    *out = (size_t)v;
    return 0;
}

static long long shim_delta(size_t *counted, size_t now) {
    long long d = (long long)now - (long long)*counted;
    *counted = now;
    return d;
}

/* Re-reads dev's pools and graph memory (caller holds held_mu); the change of the total. */
static long long shim_held_read_locked(int dev) {
    long long delta = 0;
    for (size_t i = 0; i < held_npools; i++) {
        shim_pool_rec *p = &held_pools[i];
        size_t now;
        if (p->dev == dev && p->readable && !p->destroyed &&
            shim_pool_attr(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now) == 0)
            delta += shim_delta(&p->counted, now);
    }
    size_t now;
    if (held_graph_on[dev] && shim_graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) == 0)
        delta += shim_delta(&held_graph_counted[dev], now);
    return delta;
}

void shim_held_refresh(int dev) {
    if (dev < 0 || !__atomic_load_n(&held_on[dev], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&held_mu);
    long long delta = shim_held_read_locked(dev);
    shim_adjust(dev, delta);
    pthread_mutex_unlock(&held_mu);
}

void shim_held_settle(int dev, size_t reserved) {
    if (dev < 0) return;
    long long delta = 0;
    pthread_mutex_lock(&held_mu);
    if (__atomic_load_n(&held_on[dev], __ATOMIC_ACQUIRE)) delta = shim_held_read_locked(dev);
    shim_adjust(dev, delta - (long long)reserved);
    pthread_mutex_unlock(&held_mu);
}

void shim_held_refresh_all(void) {
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) shim_held_refresh(d);
}

/* Gives back what dev's pools and graphs hold unused, then re-reads. */
static void shim_held_trim(int dev) {
    pfn_cuMemPoolTrimTo trim = SHIM_REAL(cuMemPoolTrimTo);
    pfn_cuDeviceGraphMemTrim graph_trim = SHIM_REAL(cuDeviceGraphMemTrim);
    pthread_mutex_lock(&held_mu);
    for (size_t i = 0; i < held_npools; i++) {
        shim_pool_rec *p = &held_pools[i];
        size_t used;
        if (p->dev == dev && p->readable && !p->destroyed && trim &&
            shim_pool_attr(p->pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == 0)
            (void)trim(p->pool, used);
    }
    if (held_graph_on[dev] && graph_trim) {
        (void)graph_trim(dev);
        __atomic_add_fetch(&held_graph_generation[dev], 1, __ATOMIC_ACQ_REL);
    }
    long long delta = shim_held_read_locked(dev);
    shim_adjust(dev, delta);
    pthread_mutex_unlock(&held_mu);
}

int shim_take(const char *fn, int dev, size_t size) {
    if (dev < 0) return 0;
    shim_held_refresh(dev);
    int trimmable = __atomic_load_n(&held_on[dev], __ATOMIC_ACQUIRE);
    if (shim_reserve(fn, dev, size, !trimmable) == 0) return 0;
    if (!trimmable) return -1;
    shim_held_trim(dev);
    return shim_reserve(fn, dev, size, 1);
}

/* ---- pools ------------------------------------------------------------------------------------ */

static shim_pool_rec *shim_pool_find_locked(CUmemoryPool pool) {
    for (size_t i = 0; i < held_npools; i++)
        if (held_pools[i].pool == pool && !held_pools[i].destroyed) return &held_pools[i];
    return NULL;
}

static pthread_once_t held_fork_once = PTHREAD_ONCE_INIT;

int shim_held_pool(CUmemoryPool pool, int dev) {
    if (!pool) return 0;
    shim_cuda_load();
    pthread_once(&held_fork_once, shim_held_fork_register);
    pthread_mutex_lock(&held_mu);
    shim_pool_rec *p = shim_pool_find_locked(pool);
    long long delta = 0;
    int readable = 0;
    if (p) {
        readable = p->readable;
    } else if (dev >= 0 && dev < SHIM_MAX_DEVICES) {
        if (held_npools == held_cap) {
            size_t cap = held_cap ? held_cap * 2 : 8;
            shim_pool_rec *l = realloc(held_pools, cap * sizeof *l);
            if (l) { held_pools = l; held_cap = cap; }
        }
        if (held_npools < held_cap) {
            size_t now = 0;
            p = &held_pools[held_npools++];
            memset(p, 0, sizeof *p);
            p->pool = pool;
            p->dev = dev;
            p->readable = shim_pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now) == 0;
            if (p->readable) {
                delta = shim_delta(&p->counted, now);
                __atomic_store_n(&held_on[dev], 1, __ATOMIC_RELEASE);
            }
            readable = p->readable;
        }
    }
    shim_adjust(dev, delta);
    pthread_mutex_unlock(&held_mu);
    return readable;
}

int shim_held_pool_device(CUmemoryPool pool) {
    pthread_mutex_lock(&held_mu);
    shim_pool_rec *p = shim_pool_find_locked(pool);
    int dev = p ? p->dev : -1;
    pthread_mutex_unlock(&held_mu);
    return dev;
}

/* cuMemPoolDestroy under held_mu (no re-read meets the pool half destroyed). A pool with memory in
 * use is released by the driver only once that memory is freed, which can no longer be read: its
 * last figure stays counted (too long, never too short). */
CUresult shim_held_pool_destroy(CUmemoryPool pool, pfn_cuMemPoolDestroy real) {
    pthread_mutex_lock(&held_mu);
    shim_pool_rec *p = shim_pool_find_locked(pool);
    size_t used = 0;
    int in_use = p && p->readable && (shim_pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != 0 || used);
    CUresult r = real(pool);
    long long delta = 0;
    int dev = -1;
    if (r == CUDA_SUCCESS && p) {
        dev = p->dev;
        if (in_use) {
            p->destroyed = 1;
        } else {
            delta = -(long long)p->counted;
            *p = held_pools[--held_npools];
        }
    }
    shim_adjust(dev, delta);
    pthread_mutex_unlock(&held_mu);
    return r;
}

/* cuMemPoolTrimTo under held_mu, then the pool's device re-read. */
CUresult shim_held_pool_trim(CUmemoryPool pool, size_t keep, pfn_cuMemPoolTrimTo real) {
    pthread_mutex_lock(&held_mu);
    shim_pool_rec *p = shim_pool_find_locked(pool);
    CUresult r = real(pool, keep);
    int dev = p ? p->dev : -1;
    long long delta = dev >= 0 ? shim_held_read_locked(dev) : 0;
    shim_adjust(dev, delta);
    pthread_mutex_unlock(&held_mu);
    return r;
}

/* ---- graph memory ----------------------------------------------------------------------------- */

void shim_held_graph_on(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || __atomic_load_n(&held_graph_on[dev], __ATOMIC_ACQUIRE)) return;
    shim_cuda_load();
    pthread_once(&held_fork_once, shim_held_fork_register);
    pthread_mutex_lock(&held_mu);
    size_t now;
    long long delta = 0;
    if (!held_graph_on[dev] && shim_graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) == 0) {
        __atomic_store_n(&held_graph_on[dev], 1, __ATOMIC_RELEASE);
        delta = shim_delta(&held_graph_counted[dev], now);
        __atomic_store_n(&held_on[dev], 1, __ATOMIC_RELEASE);
    }
    shim_adjust(dev, delta);
    pthread_mutex_unlock(&held_mu);
}

unsigned long long shim_held_graph_generation(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES) return 1;
    return __atomic_load_n(&held_graph_generation[dev], __ATOMIC_ACQUIRE) + 1;
}

void shim_held_graph_trimmed(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES) return;
    __atomic_add_fetch(&held_graph_generation[dev], 1, __ATOMIC_ACQ_REL);
    shim_held_refresh(dev);
}

