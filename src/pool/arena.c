/*
 * arena.c: one arena: a best-fit, coalescing allocator (the design of TensorFlow's BFC allocator,
 * with its bookkeeping wholly on the host). A logical device's pool is one arena, or several once
 * threads allocate at once (arenas.c).
 *
 * Algorithm
 *   - Requests are rounded up to 256 bytes (VRAM_POOL_UNIT). A free chunk of at least that size is
 *     found best-fit in the free bins (smallest size, then lowest address, within a bounded scan)
 *     and split so that the block is exactly the rounded size: `current` is the sum of rounded sizes.
 *   - A freed chunk merges at once with free address neighbours of its region.
 *   - Memory comes in regions. Without growth, one plain region of the whole limit is taken at
 *     creation (and again after a trim gave it back). With growth and virtual memory management,
 *     one address range of twice the limit is reserved and tiled by a single free chunk; blocks are
 *     placed in it best-fit, and the granules under a block are mapped when it is handed out
 *     (vmm.c: extents of at most max_extent, plus up to map_ahead beyond when growing). Idle extents
 *     (no byte in use) are moved under a block that needs memory (an unmap and a map of the same
 *     physical memory) or unmapped and released when the limit would be crossed and, with hold_peak
 *     or hold_large, rather than raise the high-water mark; they are released on vram_trim and by
 *     idle release. Plain regions serve growth without
 *     virtual memory management and the last partial granule of a limit.
 *   - Stream order: vram_free_async records an event on the stream and parks the chunk PENDING.
 *     The same stream may reuse a PENDING chunk at once; everyone else waits until its event has
 *     completed (completed frees are reaped into the free bins before each search, and before
 *     growing or failing the pool waits for the outstanding events).
 *
 * Invariants (checked by arena_check, in pool_check.c)
 *   - chunks tile every region in address order; sizes are multiples of 256 and positive;
 *   - no two FREE chunks are neighbours, except across the end of the small zone; every FREE chunk
 *     is in its zone's free bins and nothing else is;
 *   - every USED chunk is in the pointer map under its address; PENDING chunks are in the pending
 *     list; current == the sum of USED sizes; reserved == the bytes held from the driver;
 *   - reserved <= limit, and the card budget holds at least this pool's reserved bytes;
 *   - in the VMM region, each extent's busy count, once recounted (the counts are kept lazily, see
 *     vmm.h), is the bytes of USED and PENDING chunks over it.
 *
 * Thread caches (thread_cache.c): once several threads use the pool, a freed block is parked in
 * the freeing thread's cache and its next request of that size takes it back without the pool
 * lock; parked blocks stay USED here and go back to the free bins before the pool grows or fails.
 *
 * Locking: one lock per arena (lock.h, a futex lock) guards its chunks, bins, regions and counters;
 * functions ending in `_locked` must be called with it held. Each thread cache and each of the
 * POOL_SHARDS shards of the pointer table has a spin lock of its own; the order is pool, cache,
 * shard. The card budget is an atomic shared by the pools of one card.
 *
 * Files of an arena, by concern (each states what it owns, its invariants and its lock):
 *   arena.c         creation, destruction, queries, the owner test, IPC export (this file)
 *   arena_alloc.c   a request and a free: the search, the hand-out, the retry ladder
 *   split_merge.c   chunk records, split and merge
 *   stream_order.c  pending stream-ordered frees, blocks used on other streams, solo, captures
 *   backing.c       regions, budgets, mapping growth, moving and giving back idle memory, trim
 *   sleep.c         sleep and wake: all the memory off the card and back at the same addresses
 *   stats.c         PyTorch's allocator statistics
 *   oom.c           the out-of-memory report
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/plan_arena.h"
#include "pool/backing.h"
#include "pool/split_merge.h"
#include "pool/stream_order.h"

/* ---- creation and destruction ---------------------------------------------------------------- */

/* Address space reserved for a growth pool: twice the limit, so that placement always finds
 * room in address space and only physical memory (the limit) decides. */
static size_t growth_va_size(const vram__pool_config *cfg) {
    size_t gran = cfg->caps.granularity, limit = vram__round_up(cfg->limit ? cfg->limit : 1, gran);
    return limit <= SIZE_MAX / 4 ? 2 * limit : limit;
}

vram_status arena_create(const vram__pool_config *cfg, pool_shared *shared, pool_arena **out) {
    pool_arena *p = aligned_alloc(_Alignof(pool_arena), sizeof *p);   /* cache-line aligned parts */
    if (p == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a pool");
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->shared = shared;
    p->plan_lo = UINT64_MAX;                          /* no plan's zone */
    if (p->cfg.caps.granularity == 0) p->cfg.caps.granularity = VRAM_POOL_FALLBACK_REGION;
    if (p->cfg.max_extent == 0 && (p->cfg.limit_chosen || p->cfg.plan)) {
        /* near a chosen limit, or for a plan's zone (its memory moves in from where best fit freed
         * it, granule by granule): nothing stuck in an extent shared with a live block (pool.h) */
        p->cfg.max_extent = p->cfg.caps.granularity;
    } else if (p->cfg.max_extent == 0) {
        size_t e = p->cfg.limit / (p->cfg.limit >= POOL_LARGE_LIMIT ? POOL_EXTENT_DIV_LARGE : POOL_EXTENT_DIV);
        p->cfg.max_extent = e < p->cfg.caps.granularity ? p->cfg.caps.granularity
                          : e > VRAM_POOL_MAX_EXTENT ? VRAM_POOL_MAX_EXTENT : e;
    }
    pool_lock_init(&p->lock);
    for (int i = 0; i < POOL_SHARDS; i++) atomic_init(&p->live[i].lock.held, 0);
    size_t tcache = cfg->thread_cache;
    if (tcache == VRAM_POOL_TCACHE_AUTO) {
        tcache = cfg->limit / 256;
        if (tcache > VRAM_POOL_TCACHE_MAX) tcache = VRAM_POOL_TCACHE_MAX;
    }
    p->tc_cap = tcache;
    p->tc_max_block = tcache / 4;
    p->uid = pool_new_uid();
    vram_status s = tc_init(p) == 0 ? VRAM_OK : vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for thread caches");
    if (s == VRAM_OK && !cfg->growth && cfg->limit >= VRAM_POOL_UNIT) {
        if (arena_budget_take(p, cfg->limit) != GROW_OK) {
            s = vram__fail(VRAM_ERR_CONFLICT, "%s: taking its %zu bytes at start would exceed the "
                           "physical device's limit (%s)", cfg->name, cfg->limit, cfg->budget->cap_source);
        } else if ((s = region_add_plain_locked(p, cfg->limit)) != VRAM_OK) {
            arena_budget_give(p, cfg->limit);
        }
    } else if (s == VRAM_OK && cfg->growth && cfg->caps.vmm_supported) {
        size_t gran = p->cfg.caps.granularity, small = 0;
        if (p->cfg.small_max > 0) small = vram__round_up(p->cfg.limit / POOL_SMALL_ZONE_DIV, gran);
        if (p->cfg.small_max > 0 && small == 0) small = gran;
        s = region_add_vmm_locked(p, small, growth_va_size(&p->cfg));
    }
    if (p->small_end == 0) p->cfg.small_max = 0;     /* no small zone: every request in the bins */
    if (s != VRAM_OK) {
        char why[1024];                          /* the cause, whatever the cleanup says */
        snprintf(why, sizeof why, "%s", vram_last_error());
        (void)arena_destroy(p);
        return vram__fail(s, "%s", why);
    }
    *out = p;
    return VRAM_OK;
}

vram_status arena_destroy(pool_arena *p) {
    if (p == NULL) return VRAM_OK;
    pool_lock_take(&p->lock);
    plan_slots_leave_locked(p);              /* every record in the region's list */
    pool_flush_caches_locked(p);
    if (p->used_count > 0) {
        size_t n = p->used_count, bytes = p->current;
        pool_lock_give(&p->lock);
        return vram__fail(VRAM_ERR_CONFLICT, "%s still has %zu live allocations (%zu bytes); free them first",
                          p->cfg.name, n, bytes);
    }
    pending_reap_locked(p, 1);
    while (p->pending != NULL) {          /* events that could not be waited for: drop them */
        pool_chunk *c = p->pending;
        pending_settle_locked(p, c);
    }
    deferred_reap_locked(p, 1);
    while (p->deferred != NULL) {         /* the same */
        pool_uses *u = p->deferred->uses;
        if (u->unrecorded) u->done = u->nevents;   /* no event was recorded */
        u->unrecorded = 0;
        while (u->done < u->nevents) p->cfg.backend->event_destroy(p->cfg.dev, u->use[u->done++].event);
        deferred_reap_locked(p, 0);
    }
    (void)solo_fence_locked(p);           /* (a driver that cannot wait: the memory goes anyway) */
    if (p->idle_fence != NULL) p->cfg.backend->event_destroy(p->cfg.dev, p->idle_fence);
    vram_status refusal = VRAM_OK;        /* what the driver refused to free is lost: said, not kept */
    while (p->regions != NULL) {
        pool_region *r = p->regions;
        p->regions = r->next;
        int plain = r->kind == REGION_PLAIN;   /* (a VMM region's record is gone after the call) */
        vram_status s = region_release(p, r);
        if (s != VRAM_OK && plain) region_drop(r);
        if (s != VRAM_OK && refusal == VRAM_OK) refusal = s;
    }
    arena_sleep_drop(p);                  /* (no block left: its host copy, what to map again) */
    (void)arena_host_kept_free_locked(p);   /* (a refusal: nothing more to do at the end) */
    chunk_free_spares(p);
    for (int i = 0; i < POOL_SHARDS; i++) ptr_map_destroy(&p->live[i].map);
    tc_destroy(p);
    plan_arena_destroy(p);
    pool_lock_give(&p->lock);
    free(p);
    return refusal;
}

/* ---- queries --------------------------------------------------------------------------------- */

/* Whether addr lies in memory of one of the pool's regions. */
int pool_owns_locked(const pool_arena *p, uint64_t addr) {
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        if (addr >= r->base && addr - r->base < r->size) return 1;
    }
    return 0;
}


void arena_lock(pool_arena *p, const void *self) {
    if (self != NULL) pool_lock_take_by(&p->lock, self);   /* (its bias stays: lock.h) */
    else pool_lock_take(&p->lock);
}

void arena_unlock(pool_arena *p) {
    pool_lock_give(&p->lock);
}

void arena_info_locked(pool_arena *p, vram_memory_info *info) {
    tc_stats st;
    tc_stats_locked(p, &st);
    *info = (vram_memory_info){
        .current = p->current - st.cached,
        .peak = p->peak,
        .reserved = p->reserved,
        .peak_reserved = p->peak_reserved,
        .limit = p->cfg.limit,
        .largest_free_block = pool_largest_free_locked(p),
        .num_allocs = p->num_allocs + st.hits,
        .num_frees = p->num_frees - p->num_flushed + st.parks,
        .num_ooms = p->num_ooms,
        .num_driver_allocs = p->num_driver_allocs,
        .num_driver_frees = p->num_driver_frees,
        .num_driver_moves = p->num_driver_moves,
    };
    plan_arena_info_locked(p, info);
    arena_sleep_info_locked(p, info);
}

size_t arena_live_bytes(pool_arena *p) {
    pool_lock_take(&p->lock);
    tc_stats st;
    tc_stats_locked(p, &st);
    size_t n = p->current - st.cached;
    pool_lock_give(&p->lock);
    return n;
}

size_t arena_live_count(pool_arena *p, size_t *bytes) {
    pool_lock_take(&p->lock);
    pool_flush_caches_locked(p);
    size_t n = p->used_count;
    *bytes = p->current;
    pool_lock_give(&p->lock);
    return n;
}

void arena_range(const pool_arena *p, uint64_t *lo, uint64_t *hi) {
    const pool_region *r = p->vmm;
    *lo = r != NULL ? r->base : 0;
    *hi = r != NULL ? r->base + r->size : 0;
}

void arena_set_pinned(pool_arena *p, int pinned) {
    pool_lock_take(&p->lock);
    p->pinned = pinned;
    /* a private pool's streams are captured: its frees are never handed to another stream without
     * an event (solo would, after a fence a capture forbids). Private arenas are pinned from creation,
     * before any request, so nothing was freed the solo way. */
    if (pinned) p->solo = SOLO_OFF;
    pool_lock_give(&p->lock);
}

size_t arena_live_blocks(pool_arena *p, void **out, size_t capacity) {
    size_t n = 0;
    pool_lock_take(&p->lock);
    plan_slots_leave_locked(p);
    pool_flush_caches_locked(p);
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
            if (c->state != CHUNK_USED || (c->uses != NULL && c->uses->nevents > 0)) continue;   /* deferred */
            if (n < capacity) out[n] = (void *)(uintptr_t)c->addr;
            n++;
        }
    }
    pool_lock_give(&p->lock);
    return n;
}

/* ---- memory shared with another process ------------------------------------------------------ */

/* The handle of live block c for another process (ipc.h) into out (capacity bytes; *length: what it
 * needs), *offset: where the block lies in the span the receiver maps. */
static vram_status ipc_export_locked(pool_arena *p, const pool_chunk *c, unsigned char *out, size_t capacity,
                                     size_t *length, size_t *offset) {
    ipc_head head = {.pid = (int32_t)getpid()};
    memcpy(head.magic, IPC_MAGIC, sizeof head.magic);
    unsigned char plain[IPC_PLAIN_BYTES];
    ipc_piece *pieces = NULL;
    size_t body = 0;
    vram_status s = VRAM_OK;
    if (c->region->kind == REGION_PLAIN) {
        head.kind = IPC_PLAIN;
        head.span = c->region->held;
        *offset = (size_t)(c->addr - c->region->base);
        body = sizeof plain;
        s = p->cfg.backend->ipc_get(p->cfg.dev, c->region->base, plain);
    } else {
        size_t n = 0, span = 0;
        uint64_t lo = 0;
        head.kind = IPC_VMM;
        s = pool_vmm_export(&c->region->vmm, c->addr, c->size, NULL, 0, &n, &lo, &span);
        pieces = s == VRAM_OK ? malloc(n * sizeof *pieces) : NULL;
        if (s == VRAM_OK && pieces == NULL) s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an IPC handle");
        if (s == VRAM_OK) s = pool_vmm_export(&c->region->vmm, c->addr, c->size, pieces, n, &n, &lo, &span);
        head.n = (uint32_t)n;
        head.span = span;
        *offset = (size_t)(c->addr - lo);
        body = n * sizeof *pieces;
    }
    *length = sizeof head + body;
    if (s == VRAM_OK && capacity < *length) {
        s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_ipc_export: the handle needs %zu bytes, %zu given", *length,
                       capacity);
    }
    if (s == VRAM_OK) {
        memcpy(out, &head, sizeof head);
        memcpy(out + sizeof head, pieces != NULL ? (const void *)pieces : (const void *)plain, body);
    }
    free(pieces);
    return s;
}

vram_status arena_ipc_export(pool_arena *p, void *ptr, unsigned char *out, size_t capacity, size_t *length,
                             size_t *offset, int *owned) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    *owned = 1;
    pool_lock_take(&p->lock);
    pool_chunk *c = live_get(p, addr);
    vram_status s;
    if (c == NULL) {
        *owned = pool_owns_locked(p, addr);
        s = vram__fail(VRAM_ERR_INVALID_POINTER, "vram_ipc_export(%p): not a live block of %s (freed, or not the "
                       "start of a block vram handed out)", ptr, p->cfg.name);
    } else if (c->asleep) {
        s = vram__fail(VRAM_ERR_CONFLICT, "vram_ipc_export(%p): the block is asleep (vram_sleep), its memory off "
                       "the card; vram_wake it first", ptr);
    } else {
        s = ipc_export_locked(p, c, out, capacity, length, offset);
    }
    pool_lock_give(&p->lock);
    return s;
}
