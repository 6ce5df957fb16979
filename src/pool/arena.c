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
 * Invariants (checked by vram__arena_check, in pool_check.c)
 *   - chunks tile every region in address order; sizes are multiples of 256 and positive;
 *   - no two FREE chunks are neighbours, except across the end of the small zone; every FREE chunk
 *     is in its zone's free bins and nothing else is;
 *   - every USED chunk is in the pointer table under its address; PENDING chunks are in the pending
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
 * This file is the arena's front door: every call the device allocator (arenas.c) makes on an
 * arena is here (creation, destruction, a request and a free with their thread-cache fast paths,
 * queries, statistics, the check, the memory map, trim and the idle tick, IPC export), but for sleep
 * and wake, which settle nothing and are sleep.c's own entries (declared with these in arena.h); and
 * so is `settle`, what an entry does before anything walks the chunks or counts memory (leave slot
 * mode, flush the thread caches, recount the extents), and the out-of-memory report of a request. Below it, in the order calls run (arena.h): arena_alloc.c (the allocation path) and
 * sleep.c, plan_arena.c and plan_slots.c, backing.c, stream_order.c, split_merge.c, the readers
 * (stats.c, oom.c, pool_check.c, pool_snapshot.c), and the leaves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/backing.h"
#include "pool/plan_arena.h"
#include "pool/pointer_table.h"
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

/* ---- settle ------------------------------------------------------------------------------------ */

/* What an entry needs done before it walks the arena's chunks or counts its memory: slot mode left
 * (every block of the plan's zone a chunk again: plan_slots.c), the thread caches' parked blocks back
 * in the free bins, the extents' counts of bytes in use brought up to date (kept lazily: backing.c). */
enum { SETTLE_SLOTS = 1, SETTLE_CACHES = 2, SETTLE_EXTENTS = 4 };

static void settle_locked(pool_arena *p, unsigned what) {
    POOL_ASSERT_LOCKED(p);
    if (what & SETTLE_SLOTS) vram__plan_slots_leave_locked(p);
    if (what & SETTLE_CACHES) vram__pool_flush_caches_locked(p);
    if (what & SETTLE_EXTENTS) vram__vmm_recount_locked(p);
}

/* The out-of-memory error of a request of this arena alone (counted): the report walks the chunks
 * and reads the extents' counts. */
static VRAM_NOINLINE vram_status oom_locked(pool_arena *p, size_t size, size_t rounded, grow_result why) {
    POOL_ASSERT_LOCKED(p);
    settle_locked(p, SETTLE_SLOTS | SETTLE_EXTENTS);
    return vram__oom_report_locked(p, size, rounded, why, NULL);
}

/* A request failed with s: reported when it found no memory, unless quiet (then *quiet says why, for
 * arenas.c to report once every arena was tried). Out of line: the warm path pays one test. */
static VRAM_NOINLINE vram_status alloc_failed_locked(pool_arena *p, size_t size, size_t rounded, vram_status s,
                                                     grow_result *quiet) {
    POOL_ASSERT_LOCKED(p);
    if (s != VRAM_ERR_OUT_OF_MEMORY) return s;
    if (quiet == NULL) return oom_locked(p, size, rounded, p->failed);
    *quiet = p->failed;
    return s;
}

/* ---- creation and destruction ---------------------------------------------------------------- */

/* Address space reserved for a growth pool: twice the limit, so that placement always finds
 * room in address space and only physical memory (the limit) decides. */
static size_t growth_va_size(const vram__pool_config *cfg) {
    size_t gran = cfg->caps.granularity, limit = vram__round_up(cfg->limit ? cfg->limit : 1, gran);
    return limit <= SIZE_MAX / 4 ? 2 * limit : limit;
}

vram_status vram__arena_create(const vram__pool_config *cfg, pool_shared *shared, pool_arena **out) {
    pool_arena *p = aligned_alloc(_Alignof(pool_arena), sizeof *p);   /* cache-line aligned parts */
    if (p == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a pool");
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->shared = shared;
    p->plan.lo = UINT64_MAX;                          /* no plan's zone */
    if (p->cfg.caps.granularity == 0) p->cfg.caps.granularity = VRAM_POOL_FALLBACK_REGION;
    if (p->cfg.max_extent == 0) {
        size_t e = p->cfg.limit / (p->cfg.limit >= POOL_LARGE_LIMIT ? POOL_EXTENT_DIV_LARGE : POOL_EXTENT_DIV);
        e = e < p->cfg.caps.granularity ? p->cfg.caps.granularity : e > VRAM_POOL_MAX_EXTENT ? VRAM_POOL_MAX_EXTENT : e;
        if (p->cfg.limit_chosen || p->cfg.plan) {
            /* near a chosen limit, or for a plan's zone (its memory moves in from where best fit freed
             * it, granule by granule): nothing stuck in an extent shared with a live block (pool.h);
             * with a plan and no chosen limit, the extents e for a large block while the program
             * loads and at a wake (backing.c, sleep.c) */
            p->cfg.max_extent = p->cfg.caps.granularity;
            p->block_extent = p->cfg.limit_chosen ? 0 : vram__round_up(e, p->cfg.caps.granularity);
        } else {
            p->cfg.max_extent = e;
        }
    }
    pool_lock_init(&p->lock);
    for (int i = 0; i < POOL_SHARDS; i++) atomic_init(&p->ptr_table[i].lock.held, 0);
    size_t tcache = cfg->thread_cache;
    if (tcache == VRAM_POOL_TCACHE_AUTO) {
        tcache = cfg->limit / 256;
        if (tcache > VRAM_POOL_TCACHE_MAX) tcache = VRAM_POOL_TCACHE_MAX;
    }
    p->tc.cap = tcache;
    p->tc.max_block = tcache / 4;
    p->uid = vram__pool_new_uid();
    vram_status s = vram__tc_init(p) == 0 ? VRAM_OK : vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for thread caches");
    pool_lock_take(&p->lock);                         /* (no other thread knows p yet: for the _locked calls) */
    if (s == VRAM_OK && !cfg->growth && cfg->limit >= VRAM_POOL_UNIT) {
        if (vram__arena_budget_take(p, cfg->limit) != GROW_OK) {
            s = vram__fail(VRAM_ERR_CONFLICT, "%s: taking its %zu bytes at start would exceed the "
                           "physical device's limit (%s)", cfg->name, cfg->limit, cfg->budget->cap_source);
        } else if ((s = vram__region_add_plain_locked(p, cfg->limit)) != VRAM_OK) {
            vram__arena_budget_give(p, cfg->limit);
        }
    } else if (s == VRAM_OK && cfg->growth && cfg->caps.vmm_supported) {
        size_t gran = p->cfg.caps.granularity, small = 0;
        if (p->cfg.small_max > 0) small = vram__round_up(p->cfg.limit / POOL_SMALL_ZONE_DIV, gran);
        if (p->cfg.small_max > 0 && small == 0) small = gran;
        s = vram__region_add_vmm_locked(p, small, growth_va_size(&p->cfg));
    }
    pool_lock_give(&p->lock);
    if (p->small_end == 0) p->cfg.small_max = 0;     /* no small zone: every request in the bins */
    if (s != VRAM_OK) {
        char why[1024];                          /* the cause, whatever the cleanup says */
        snprintf(why, sizeof why, "%s", vram_last_error());
        (void)vram__arena_destroy(p);
        return vram__fail(s, "%s", why);
    }
    *out = p;
    return VRAM_OK;
}

vram_status vram__arena_destroy(pool_arena *p) {
    if (p == NULL) return VRAM_OK;
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_SLOTS | SETTLE_CACHES);   /* every record in the region's list */
    if (p->used_count > 0) {
        size_t n = p->used_count, bytes = p->current;
        pool_lock_give(&p->lock);
        return vram__fail(VRAM_ERR_CONFLICT, "%s still has %zu live allocations (%zu bytes); free them first",
                          p->cfg.name, n, bytes);
    }
    vram__pending_reap_locked(p, 1);
    while (p->order.pending != NULL) {          /* events that could not be waited for: drop them */
        pool_chunk *c = p->order.pending;
        vram__pending_settle_locked(p, c);
    }
    vram__deferred_reap_locked(p, 1);
    while (p->order.deferred != NULL) {         /* the same */
        pool_uses *u = p->order.deferred->uses;
        if (u->unrecorded) u->done = u->nevents;   /* no event was recorded */
        u->unrecorded = 0;
        while (u->done < u->nevents) p->cfg.backend->event_destroy(p->cfg.dev, u->use[u->done++].event);
        vram__deferred_reap_locked(p, 0);
    }
    (void)vram__solo_fence_locked(p);           /* (a driver that cannot wait: the memory goes anyway) */
    if (p->solo.idle_fence != NULL) p->cfg.backend->event_destroy(p->cfg.dev, p->solo.idle_fence);
    vram_status refusal = VRAM_OK;        /* what the driver refused to free is lost: said, not kept */
    while (p->regions != NULL) {
        pool_region *r = p->regions;
        p->regions = r->next;
        int plain = r->kind == REGION_PLAIN;   /* (a VMM region's record is gone after the call) */
        vram_status s = vram__region_release(p, r);
        if (s != VRAM_OK && plain) vram__region_drop(r);
        if (s != VRAM_OK && refusal == VRAM_OK) refusal = s;
    }
    vram__arena_sleep_drop(p);                        /* (no block left: its host copy, what to map again) */
    (void)vram__arena_host_kept_free_locked(p);   /* (a refusal: nothing more to do at the end) */
    vram__chunk_free_spares(p);
    for (int i = 0; i < POOL_SHARDS; i++) vram__ptr_map_destroy(&p->ptr_table[i].map);
    vram__tc_destroy(p);
    vram__plan_arena_destroy(p);
    pool_lock_give(&p->lock);
    free(p);
    return refusal;
}

/* ---- requests and frees (the allocation path: arena_alloc.c) ----------------------------------- */

vram_status vram__arena_alloc(pool_arena *p, vram__pool_thread *me, size_t size, int async, void *stream, void **ptr,
                        grow_result *quiet) {
    if (size > p->cfg.limit || size > SIZE_MAX - VRAM_POOL_UNIT) {
        if (quiet != NULL) {
            *quiet = GROW_LIMIT;
            return VRAM_ERR_OUT_OF_MEMORY;
        }
        pool_lock_take(&p->lock);
        vram_status s = oom_locked(p, size, size, GROW_LIMIT);
        pool_lock_give(&p->lock);
        return s;
    }
    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);
    pool_chunk *c = NULL;
    /* the fast path: a block this thread parked. Only plain requests with caches on look (and
     * vram__tc_mine is where a second thread's arrival turns parking on) */
    if (!async && p->tc.cap != 0 && vram__tc_take(p, vram__tc_mine(p, me), rounded, &c)) {
        *ptr = (void *)(uintptr_t)c->addr;
        return VRAM_OK;
    }
    pool_lock_take_by(&p->lock, me);                              /* (its bias, lock.h) */
    if (__builtin_expect(p->asleep, 0)) {                         /* its memory is off the card (sleep.c) */
        vram_status s = quiet != NULL ? VRAM_ERR_OUT_OF_MEMORY : vram__arena_asleep_refusal(p, size);
        if (quiet != NULL) *quiet = GROW_ASLEEP;
        pool_lock_give(&p->lock);
        return s;
    }
    if (!p->cfg.growth && rounded > arena_headroom_live(p)) {   /* a fraction below the preallocation */
        vram_status s = quiet != NULL ? VRAM_ERR_OUT_OF_MEMORY : oom_locked(p, size, rounded, GROW_LIMIT);
        if (quiet != NULL) *quiet = GROW_LIMIT;
        pool_lock_give(&p->lock);
        return s;
    }
    if (p->solo.state != SOLO_OFF) solo_note_request_locked(p, async, stream);
    int plan = __builtin_expect(p->plan.planner != NULL, 0) && plan_sees(p);   /* (not while its detector rests) */
    if (plan && vram__alloc_planned_locked(p, size, rounded, stream, ptr)) {
        pool_lock_give(&p->lock);                             /* served by the plan (plan_arena.h) */
        return VRAM_OK;
    }
    vram_status s = vram__alloc_best_fit_locked(p, size, rounded, async, stream, ptr);
    if (__builtin_expect(s != VRAM_OK, 0)) s = alloc_failed_locked(p, size, rounded, s, quiet);
    if (plan && s == VRAM_OK) vram__plan_noted_locked(p, p->last_taken, rounded, stream);
    pool_lock_give(&p->lock);
    return s;
}

vram_status vram__arena_alloc_at(pool_arena *p, uint64_t addr, size_t size, void *stream) {
    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);
    pool_lock_take(&p->lock);
    if (p->order.pending != NULL) vram__pending_reap_locked(p, 1);
    if (p->order.deferred != NULL) vram__deferred_reap_locked(p, 1);
    settle_locked(p, SETTLE_CACHES);
    pool_chunk *c = NULL;
    for (pool_region *r = p->regions; r != NULL && c == NULL; r = r->next) {
        if (addr < r->base || addr - r->base >= r->size) continue;
        for (c = r->first; c != NULL && c->addr + c->size <= addr; c = c->next) {
        }
    }
    vram_status s = VRAM_OK;
    if (p->asleep) {
        s = vram__arena_asleep_refusal(p, size);
    } else if (size == 0 || addr % VRAM_POOL_UNIT != 0 || rounded < size || c == NULL || c->state != CHUNK_FREE ||
        addr + rounded > c->addr + c->size) {
        s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_private_malloc_at(%p, %zu): not a free range of %s",
                       (void *)(uintptr_t)addr, size, p->cfg.name);
    } else if ((c = vram__chunk_cut_at_locked(p, c, addr)) == NULL) {
        s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a chunk record");
    } else {
        if (p->solo.state != SOLO_OFF) solo_note_request_locked(p, 1, stream);
        void *ptr = NULL;
        grow_result why = GROW_OK;
        s = vram__arena_take_locked(p, c, size, rounded, stream, &ptr, &why);
        if (s == VRAM_ERR_OUT_OF_MEMORY && why != GROW_OK) s = oom_locked(p, size, rounded, why);
    }
    pool_lock_give(&p->lock);
    return s;
}


/* A free of a block the arena does not hold live: *owned says whether addr lies in its memory. */
static vram_status free_unknown_unlock(pool_arena *p, void *ptr, vram__free_kind how, int *owned) {
    *owned = arena_owns_locked(p, (uint64_t)(uintptr_t)ptr);
    pool_lock_give(&p->lock);
    return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): not a live block of %s (already freed, "
                      "or not the start of a block vram handed out)", vram__pool_free_name(how), ptr,
                      p->cfg.name);
}

/* The event of a vram_free_async, recorded on `stream` into a new record (*e, one reference). */
static vram_status free_event_locked(pool_arena *p, void *stream, pool_event **e) {
    POOL_ASSERT_LOCKED(p);
    *e = malloc(sizeof **e);
    vram_status s = *e ? p->cfg.backend->event_record(p->cfg.dev, stream, &(*e)->event)
                       : vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an event record");
    if (s != VRAM_OK) {
        free(*e);
        *e = NULL;
        return s;
    }
    (*e)->refs = 1;
    return VRAM_OK;
}


/* A free by its kind: VRAM_POOL_FREE_NOW goes to the free bins (or a thread cache), a stream-ordered
 * one becomes PENDING on its stream (an owned-stream free on the solo stream goes to the bins at
 * once), a block with uses on other streams is deferred (stream_order.c). A block is always in the
 * table, a cache or the pool's; it leaves the table under the arena lock, so vram_check sees no gap.
 * A free that records events (its own, or for a block's uses on other streams) takes it out only
 * once they are recorded, so that a failure leaves everything as it was. vram_free_async records an
 * event of its own here, except during a capture: then it is recorded after it, as owned-stream
 * frees' are. */
vram_status vram__arena_free(pool_arena *p, vram__pool_thread *me, void *ptr, vram__free_req *req) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    vram__free_kind how = req->how;
    void *stream = req->stream;
    req->owned = 1;
    /* the fast path: parked. Only once parking is on: a free that merely asks whether the block is
     * this arena's (runtime's free_on tries each pool) must not turn it on */
    if (how == VRAM_POOL_FREE_NOW && vram__tc_parking(p) && vram__tc_park(p, vram__tc_mine(p, me), addr)) return VRAM_OK;
    int own_event = how == VRAM_POOL_FREE_EVENT;
    if (own_event && capture_underway(p)) {
        own_event = 0;
        how = VRAM_POOL_FREE_OWNED_STREAM;
    }
    pool_lock_take_by(&p->lock, me);
    pool_chunk *c = own_event ? ptr_table_get(p, addr) : ptr_table_take_unused(p, addr);
    if (c == NULL) return free_unknown_unlock(p, ptr, how, &req->owned);
    if (__builtin_expect(c->asleep, 0)) {         /* no memory under it: free at once (sleep.c) */
        if (own_event || c->uses != NULL) ptr_table_take(p, addr);
        vram__sleep_free_locked(p, c);
        pool_lock_give(&p->lock);
        return VRAM_OK;
    }
    POOL_ASSERT_CHUNK(c);
    vram__free_kind asked = how;
    if (how == VRAM_POOL_FREE_ALLOC_STREAM) {     /* the stream it was handed out on */
        how = VRAM_POOL_FREE_OWNED_STREAM;
        stream = c->stream;
    }
    if (c->uses != NULL) {                        /* used on other streams too: wait for them */
        if (how != VRAM_POOL_FREE_OWNED_STREAM || vram__uses_beyond(c->uses, stream)) {
            if (p->plan.planner != NULL) vram__plan_free_locked(p, c, 0);
            return vram__free_deferred_unlock(p, c, how, stream, asked);
        }
        free(c->uses);                            /* used on its owned-stream free's stream alone: */
        c->uses = NULL;                           /* that order covers it (this free fails no more) */
        ptr_table_take(p, addr);
    }
    if (how == VRAM_POOL_FREE_OWNED_STREAM && p->solo.state == SOLO_ON) {
        if (stream == p->solo.stream) {
            p->solo.unfenced++;
            how = VRAM_POOL_FREE_NOW;    /* free at once: whatever takes it is ordered after it */
        } else {
            solo_note_request_locked(p, 1, stream);   /* a block of another stream: solo no more */
        }
    }
    pool_event *e = NULL;               /* owned-stream frees get one later, for many frees at once */
    if (own_event) {
        vram_status s = free_event_locked(p, stream, &e);
        if (s != VRAM_OK) {             /* the block stays allocated, nothing changed */
            pool_lock_give(&p->lock);
            return vram__fail_wrap(s, "vram_free_async(%p)", ptr);
        }
        ptr_table_take(p, addr);
    }
    return vram__free_by_kind_unlock(p, c, how, stream, e);
}

/* ---- queries --------------------------------------------------------------------------------- */

void vram__arena_lock(pool_arena *p, const void *self) {
    if (self != NULL) pool_lock_take_by(&p->lock, self);   /* (its bias stays: lock.h) */
    else pool_lock_take(&p->lock);
}

void vram__arena_unlock(pool_arena *p) {
    pool_lock_give(&p->lock);
}

void vram__arena_info_locked(pool_arena *p, vram_memory_info *info) {
    POOL_ASSERT_LOCKED(p);
    tc_stats st;
    vram__tc_stats_locked(p, &st);
    *info = (vram_memory_info){
        .current = p->current - st.cached,
        .peak = p->peak,
        .reserved = p->reserved,
        .peak_reserved = p->peak_reserved,
        .limit = p->cfg.limit,
        .largest_free_block = vram__pool_largest_free_locked(p),
        .num_allocs = p->num_allocs + st.hits,
        .num_frees = p->num_frees - p->num_flushed + st.parks,
        .num_ooms = p->num_ooms,
        .num_driver_allocs = p->num_driver_allocs,
        .num_driver_frees = p->num_driver_frees,
        .num_driver_moves = p->num_driver_moves,
    };
    vram__plan_arena_info_locked(p, info);
    vram__sleep_info_locked(p, info);
}

size_t vram__arena_live_bytes(pool_arena *p) {
    pool_lock_take(&p->lock);
    tc_stats st;
    vram__tc_stats_locked(p, &st);
    size_t n = p->current - st.cached;
    pool_lock_give(&p->lock);
    return n;
}

size_t vram__arena_live_count(pool_arena *p, size_t *bytes) {
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_CACHES);
    size_t n = p->used_count;
    *bytes = p->current;
    pool_lock_give(&p->lock);
    return n;
}

void vram__arena_range(const pool_arena *p, uint64_t *lo, uint64_t *hi) {
    const pool_region *r = p->vmm;
    *lo = r != NULL ? r->base : 0;
    *hi = r != NULL ? r->base + r->size : 0;
}

void vram__arena_set_pinned(pool_arena *p, int pinned) {
    pool_lock_take(&p->lock);
    p->pinned = pinned;
    /* a private pool's streams are captured: its frees are never handed to another stream without
     * an event (solo would, after a fence a capture forbids). Private arenas are pinned from creation,
     * before any request, so nothing was freed the solo way. */
    if (pinned) p->solo.state = SOLO_OFF;
    pool_lock_give(&p->lock);
}

size_t vram__arena_live_blocks(pool_arena *p, void **out, size_t capacity) {
    size_t n = 0;
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_SLOTS | SETTLE_CACHES);
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
    POOL_ASSERT_LOCKED(p);
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
        s = vram__pool_vmm_export(&c->region->vmm, c->addr, c->size, NULL, 0, &n, &lo, &span);
        pieces = s == VRAM_OK ? malloc(n * sizeof *pieces) : NULL;
        if (s == VRAM_OK && pieces == NULL) s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an IPC handle");
        if (s == VRAM_OK) s = vram__pool_vmm_export(&c->region->vmm, c->addr, c->size, pieces, n, &n, &lo, &span);
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

vram_status vram__arena_ipc_export(pool_arena *p, void *ptr, unsigned char *out, size_t capacity, size_t *length,
                             size_t *offset, int *owned) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    *owned = 1;
    pool_lock_take(&p->lock);
    pool_chunk *c = ptr_table_get(p, addr);
    vram_status s;
    if (c == NULL) {
        *owned = arena_owns_locked(p, addr);
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

vram_status vram__arena_record_stream(pool_arena *p, void *ptr, void *stream, int *owned) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    *owned = 1;
    pool_lock_take(&p->lock);
    pool_chunk *c = ptr_table_get(p, addr);
    vram_status s = c != NULL ? vram__uses_add_locked(c, stream) : VRAM_ERR_INVALID_POINTER;
    if (c == NULL) {
        *owned = arena_owns_locked(p, addr);
        s = vram__fail(s, "vram_record_stream(%p): not a live block of %s (freed, or not the start of a block "
                       "vram handed out)", ptr, p->cfg.name);
    }
    pool_lock_give(&p->lock);
    return s;
}

void vram__arena_enable_plan(pool_arena *p) {
    vram__plan_arena_enable(p);
}

/* ---- the readers: statistics, the out-of-memory report, the check, the memory map --------------- */

void vram__arena_reset_peak_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    vram__stats_reset_peak_locked(p);
}

void vram__arena_reset_accumulated_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    vram__stats_reset_accumulated_locked(p);
}

void vram__arena_allocator_stats_locked(pool_arena *p, vram_allocator_stats *out) {
    POOL_ASSERT_LOCKED(p);
    /* parked blocks are the pool's, not the program's; idle bytes granule by granule from the chunks
     * and a plan's zone in slot mode read through its live slots (leaving slot mode for a query, and
     * entering it again at the next step, cost twice a query: torch.cuda.memory_stats() once a step,
     * as Lightning's DeviceStatsMonitor calls it), or else the zone's blocks as chunks and the extents'
     * idle bytes */
    int by_granule = p->vmm == NULL || stats_idle_by_granule(p);
    settle_locked(p, SETTLE_CACHES | (by_granule ? 0 : SETTLE_SLOTS | SETTLE_EXTENTS));
    pool_zone_view zv;
    vram__plan_slots_view_locked(p, &zv);
    vram__stats_query_locked(p, &zv, out);
}

vram_status vram__arena_oom(pool_arena *p, size_t size, size_t rounded, grow_result why, const arena_figures *all) {
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_SLOTS | (all != NULL ? 0 : SETTLE_EXTENTS));
    vram_status s = vram__oom_report_locked(p, size, rounded, why, all);
    pool_lock_give(&p->lock);
    return s;
}

vram_status vram__arena_check(pool_arena *p) {
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_SLOTS | SETTLE_EXTENTS);   /* the zone's chunks, checked as any */
    vram_status s = vram__check_locked(p);
    const char *why = s == VRAM_OK ? vram__sleep_check_marks_locked(p) : NULL;
    if (why != NULL) s = vram__fail(VRAM_ERR_INTERNAL, "vram_check(%s): %s", p->cfg.name, why);
    pool_lock_give(&p->lock);
    return s;
}

void vram__arena_snapshot_locked(pool_arena *p, int private_pool, vram_segment_info *segs, size_t seg_cap,
                           size_t *nsegs, vram_block_info *blocks, size_t block_cap, size_t *nblocks) {
    POOL_ASSERT_LOCKED(p);
    settle_locked(p, SETTLE_SLOTS | SETTLE_CACHES);   /* parked blocks are free for the program */
    vram__snapshot_locked(p, private_pool, segs, seg_cap, nsegs, blocks, block_cap, nblocks);
}

/* ---- giving memory back (backing.c) ----------------------------------------------------------- */

vram_status vram__arena_trim(pool_arena *p, size_t keep_bytes) {
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_SLOTS | SETTLE_CACHES);   /* the plan's zone: its free chunks are idle too */
    vram_status s = vram__backing_trim_locked(p, keep_bytes);
    p->idle_low = arena_cached(p);
    pool_lock_give(&p->lock);
    return s;
}

void vram__arena_trim_settled(pool_arena *p) {
    pool_lock_take(&p->lock);
    settle_locked(p, SETTLE_CACHES);
    if (p->order.pending != NULL) vram__pending_reap_locked(p, 1);
    if (p->order.deferred != NULL) vram__deferred_reap_locked(p, 1);
    settle_locked(p, SETTLE_SLOTS | SETTLE_CACHES);
    (void)vram__backing_trim_locked(p, 0);
    p->idle_low = arena_cached(p);
    pool_lock_give(&p->lock);
}

void vram__arena_idle_tick(pool_arena *p) {
    int fenced = vram__backing_idle_fence(p);          /* (without the lock) */
    if (fenced < 0) return;
    pool_lock_take(&p->lock);
    vram__plan_slots_idle_locked(p);                   /* a plan no longer stepping: its zone's memory too */
    settle_locked(p, SETTLE_CACHES);
    vram__backing_idle_release_locked(p, fenced);
    pool_lock_give(&p->lock);
}

