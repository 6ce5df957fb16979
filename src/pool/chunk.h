/*
 * chunk.h: the pool's unit of bookkeeping. A chunk is a run of device addresses inside one region,
 * either handed out (USED; a USED chunk may be parked in a thread cache after the program freed it,
 * see thread_cache.c), free (FREE, indexed in the free bins) or freed on a stream whose work has
 * not completed yet (PENDING). Chunks of a region tile it in address order through prev/next.
 * Device memory is never touched: every field lives in host memory.
 */
#ifndef VRAM_POOL_CHUNK_H
#define VRAM_POOL_CHUNK_H

#include <stddef.h>
#include <stdint.h>

enum { CHUNK_FREE = 1, CHUNK_USED = 2, CHUNK_PENDING = 3 };

struct pool_region;
struct pool_event;
struct pool_uses;

typedef struct pool_chunk {
    uint64_t             addr;
    size_t               size;
    size_t               req;                /* USED: the size the program asked for (statistics) */
    struct pool_chunk   *prev, *next;        /* address neighbours in the region */
    struct pool_region  *region;
    struct pool_chunk   *left, *right;       /* FREE: the links of its size class's list (free_bins.c) */
    uint8_t              bin_fl, bin_sl;     /* FREE: that class, noted when indexed */
    uint8_t              slot;               /* USED: handed out as a plan slot of the plan's zone (plan_slots.c),
                                              * never parked; set at its hand-out, cleared at its free */
    uint8_t              asleep;             /* USED: a block of an arena asleep (sleep.c): its memory is off
                                              * the card, so it is never parked nor taken from a cache; set
                                              * (under its shard's lock) when the arena sleeps, cleared at
                                              * its wake or its free */
    int                  state;
    void                *stream;             /* PENDING: the stream the free was ordered on; USED: the
                                              * stream of the stream-ordered request that got it (NULL
                                              * for a plain one), for VRAM_POOL_FREE_ALLOC_STREAM */
    struct pool_event   *event;              /* PENDING: completes when the GPU passed the free */
    struct pool_chunk   *pend_prev, *pend_next; /* PENDING list */
    struct pool_chunk   *cache_next;         /* USED, parked in a thread cache: the next of its bin */
    int                  cached;             /* 1 while parked in a thread cache (under its lock) */
    uint32_t             plan_k;             /* USED: 1 + its request's index in the step when the plan placed
                                              * it (plan_arena.c), 0: best fit did */
    struct pool_uses    *uses;               /* USED: the other streams it is used on (vram_record_stream),
                                              * NULL for none; after its free, their events (stream_order.c) */
    uint64_t             plan_id;            /* USED: 1 + its request's number in the plan detector, 0: none */
} pool_chunk;

#endif /* VRAM_POOL_CHUNK_H */
