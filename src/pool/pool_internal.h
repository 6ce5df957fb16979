/*
 * pool_internal.h: the pool's own structures, shared by pool.c (allocation, growth, giving back)
 * and pool_check.c (the consistency check). Nothing outside src/pool includes it.
 */
#ifndef VRAM_POOL_INTERNAL_H
#define VRAM_POOL_INTERNAL_H

#include <pthread.h>

#include "pool/free_bins.h"
#include "pool/pool.h"
#include "pool/ptr_map.h"
#include "pool/vmm.h"

#define VRAM_POOL_UNIT ((size_t)256)
#define VRAM_POOL_FALLBACK_REGION ((size_t)2 << 20)
#define VRAM_POOL_MAX_EXTENT ((size_t)256 << 20)   /* the default extent size on large cards */
#define POOL_MAP_AHEAD_DIV 16                      /* growth maps reserved / 16 beyond a block */

enum { REGION_PLAIN = 1, REGION_VMM = 2 };

typedef struct pool_region {
    int                 kind;
    uint64_t            base;
    size_t              size;      /* bytes tiled by chunks (VMM: the whole reserved range) */
    size_t              held;      /* PLAIN: bytes held from the driver (VMM: see vmm.mapped) */
    pool_chunk         *first, *last;
    pool_vmm            vmm;       /* VMM: the physical backing */
    struct pool_region *next;
} pool_region;

typedef struct pool_event {
    void *event;
    int   refs;
} pool_event;

struct vram__pool {
    vram__pool_config cfg;
    pthread_mutex_t   lock;
    pool_region      *regions;
    pool_region      *vmm;           /* the range growth maps into, for a pool that grows by mapping */
    free_bins         bins;          /* free chunks, by size class */
    ptr_map           live;
    pool_chunk       *pending;       /* PENDING chunks, newest first */
    size_t            pending_count;
    pool_chunk       *spare;         /* recycled chunk records */
    size_t            current, peak, reserved, peak_reserved;
    size_t            used_count;
    size_t            idle_low;      /* lowest reserved - current since the last idle tick */
    size_t            hold_mark;     /* highest reserved ever (hold_peak; not reset with the stats) */
    uint64_t          num_allocs, num_frees, num_ooms, num_driver_allocs, num_driver_frees;
};

#endif /* VRAM_POOL_INTERNAL_H */
