/*
 * arena_alloc.c: a request and a free in one arena. Owns the search for a chunk (best fit in the
 * free bins of the request's zone, a chunk freed on the caller's stream, a mapped run inside a
 * larger free chunk), the hand-out (split, mapping, the pointer table, the counts), the retry
 * ladder of a request that does not fit (waiting for stream-ordered frees, flushing the thread
 * caches, the limit's fallbacks, the out-of-memory report) and the free of a block by its kind
 * (vram__free_kind): at once, pending on a stream, or deferred for its uses on other streams.
 *
 * Invariants: a block is always in the pointer table, a thread cache or the arena's lists; it
 * leaves the table under the pool lock, and a free that records events takes it out only once they
 * are recorded, so that a failure leaves everything as it was. A failed hand-out changes nothing.
 * The pool lock is taken here; the fast paths of the thread caches run without it.
 */
#include <stdlib.h>

#include "pool/backing.h"
#include "pool/plan_arena.h"
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

/* With one-granule extents (a chosen limit, plan:true), a request of at least this many granules
 * takes mapped memory inside a larger free chunk before best fit maps or moves granules for it,
 * near the limit too (see pool_alloc_locked). */
#define POOL_MAPPED_FIRST_GRANULES 8

/* The bins a request of `rounded` bytes is placed from: small requests have a zone of their own,
 * so that short-lived small blocks do not settle in the holes between large ones (the holes a
 * tensor grown by torch.cat, or a layer's next activation, would otherwise fit whole). */
static free_bins *pool_zone_bins(pool_arena *p, size_t rounded) {
    return rounded <= p->cfg.small_max ? &p->sbins : &p->bins;
}

/* Finds a chunk for `rounded` bytes: the free bins of its zone (a small request goes to the other
 * zone once its own is full), or a chunk freed on the caller's stream. */
static pool_chunk *pool_find_locked(pool_arena *p, size_t rounded, int async, void *stream) {
    if (p->pending != NULL) pending_reap_locked(p, 0);
    if (p->deferred != NULL) deferred_reap_locked(p, 0);
    free_bins *zone = pool_zone_bins(p, rounded);
    pool_chunk *c = free_bins_best_fit(zone, rounded);
    if (c == NULL && zone != &p->bins) c = free_bins_best_fit(&p->bins, rounded);
    if (async && p->pending != NULL) {
        pool_chunk *q = pending_best_fit_locked(p, stream, rounded);
        if (q != NULL && (c == NULL || q->size <= c->size)) return q;   /* a tie: its own */
    }
    return c;
}

/* Under the limit, a block may fit in memory that is already mapped inside a larger free chunk
 * (of any size class) although best fit chose an unmapped place: find the smallest free chunk
 * holding a mapped run of `size` bytes and cut the block's place out of it. */
typedef struct mapped_fit {
    size_t      want;
    pool_chunk *chunk;
    uint64_t    at;
} mapped_fit;

/* In ascending size classes, the first free chunk with a mapped run of `size` bytes. */
static int mapped_fit_visit(pool_chunk *c, void *ctx, size_t *floor) {
    mapped_fit *fit = ctx;
    uint64_t at = c->addr;
    size_t run = c->region->kind == REGION_VMM ? pool_vmm_mapped_run(&c->region->vmm, c->addr, c->size, &at)
                                               : c->size;
    (void)floor;
    if (run < fit->want) return 0;
    fit->chunk = c;
    fit->at = at;
    return 1;
}

static pool_chunk *pool_find_mapped_locked(pool_arena *p, free_bins *bins, size_t size) {
    mapped_fit best = {size, NULL, 0};
    free_bins_ascending(bins, size, mapped_fit_visit, &best);
    return best.chunk != NULL ? chunk_cut_at_locked(p, best.chunk, best.at) : NULL;
}

/* Hands out `rounded` bytes of chunk c to a request on `stream` (NULL: a plain one). A free chunk of
 * the VMM region gets its memory mapped first; when that fails (*why says how) the chunk goes back
 * and nothing changed. */
vram_status arena_take_locked(pool_arena *p, pool_chunk *c, size_t size, size_t rounded, void *stream,
                              void **ptr, grow_result *why) {
    if (c->state == CHUNK_PENDING) {
        pending_unlink_locked(p, c);
        chunk_split_locked(p, c, rounded);
    } else {
        c = chunk_take_front_locked(p, c, rounded);
    }
    if (c->state == CHUNK_FREE && c->region->kind == REGION_VMM) {
        c->state = CHUNK_USED;        /* in use for the extents' counts: its memory is not idle */
        *why = vmm_back_locked(p, c);
        if (*why != GROW_OK) {
            chunk_make_free_locked(p, c, 1);  /* (busy for a moment: a recount may have counted it) */
            return VRAM_ERR_OUT_OF_MEMORY;
        }
    }
    if (live_put(p, c) != 0) {             /* before anything is handed out: c goes back as it was */
        if (c->state == CHUNK_PENDING) pending_link_locked(p, c);   /* its stream may still use it */
        else chunk_make_free_locked(p, c, 1);
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for the pointer table");
    }
    if (c->state == CHUNK_PENDING) {
        event_release(p, c->event);
        c->event = NULL;
    }
    c->stream = stream;
    c->state = CHUNK_USED;
    c->req = size;
    note_used_locked(p, c, 1);
    p->last_taken = c;
    *ptr = (void *)(uintptr_t)c->addr;
    return VRAM_OK;
}

/* Whether serving `rounded` bytes from chunk c (NULL: none was found) takes memory from the driver
 * or fails: then parked blocks are worth flushing first. */
static int pool_would_grow_locked(const pool_chunk *c, size_t rounded) {
    if (c == NULL) return 1;
    return c->state == CHUNK_FREE && c->region->kind == REGION_VMM &&
           pool_vmm_unmapped(&c->region->vmm, c->addr, rounded) > 0;
}

/* Whether flushing the thread caches and recording the unrecorded frees could spare this request a
 * growth or a failure: cheapest tests first, the scan of the caches last. */
static int pool_flush_helps_locked(pool_arena *p, const pool_chunk *c, size_t rounded) {
    if (p->unrecorded == 0 && !tc_parking(p)) return 0;      /* nothing could be handed back */
    if (!pool_would_grow_locked(c, rounded)) return 0;
    return p->unrecorded > 0 || tc_holds_any(p);
}

/* The limit refused to map memory under the chunk best fit chose: a mapped run of either zone
 * serves, or the limit's last partial granule as a plain region (exactly what is left). */
static vram_status alloc_at_limit_locked(pool_arena *p, size_t size, size_t rounded, void *stream, void **ptr,
                                         grow_result *why) {
    pool_chunk *m = pool_find_mapped_locked(p, &p->bins, rounded);   /* either zone now */
    if (m == NULL && p->small_end != 0) m = pool_find_mapped_locked(p, &p->sbins, rounded);
    if (m != NULL) return arena_take_locked(p, m, size, rounded, stream, ptr, why);
    if (pool_grow_plain_locked(p, rounded) == GROW_OK) {
        return arena_take_locked(p, p->regions->first, size, rounded, stream, ptr, why);
    }
    return VRAM_ERR_OUT_OF_MEMORY;
}

/* A request found no memory: waits for the frees still in flight on streams, then for the blocks
 * still used on other streams; 1 when either gave memory back (the request tries again). */
static int alloc_wait_helps_locked(pool_arena *p) {
    if (p->pending != NULL) {
        size_t pending = p->pending_count;
        pending_reap_locked(p, 1);
        p->stats.syncs++;
        if (p->pending_count < pending) {
            p->stats.retries++;
            return 1;
        }
    }
    if (p->deferred != NULL) {
        size_t deferred = p->deferred_count;
        deferred_reap_locked(p, 1);
        p->stats.syncs++;
        if (p->deferred_count < deferred) {
            p->stats.retries++;
            return 1;
        }
    }
    return 0;
}

/* The retry ladder of a request under the lock: the bins (and the caller's pending frees), then
 * waiting for pending frees, flushing the thread caches, a mapped run before new memory, growth,
 * the limit's fallbacks, waiting for frees and uses in flight, and last the out-of-memory report
 * (or, with quiet, its cause for arenas.c to report once every arena was tried); before failing, a
 * plan in force or waiting gives way (its zone's memory becomes best fit's). */
static vram_status pool_alloc_locked(pool_arena *p, size_t size, size_t rounded, int async, void *stream,
                                     void **ptr, grow_result *quiet) {
    for (;;) {
        pool_chunk *c = pool_find_locked(p, rounded, async, stream);
        if (c == NULL && p->pending != NULL) {
            pending_reap_locked(p, 1);
            p->stats.syncs++;
            c = pool_find_locked(p, rounded, async, stream);
            if (c != NULL) p->stats.retries++;
        }
        if (pool_flush_helps_locked(p, c, rounded)) {
            pool_flush_caches_locked(p);              /* parked blocks first, then the driver */
            if (p->unrecorded > 0) pending_record_locked(p);   /* so that they settle soon */
            c = pool_find_locked(p, rounded, async, stream);
        }
        if (p->vmm != NULL && pool_would_grow_locked(c, rounded) &&
            (arena_headroom(p) / 2 >= rounded || (p->cfg.max_extent <= p->cfg.caps.granularity &&
                                                   rounded >= POOL_MAPPED_FIRST_GRANULES * p->cfg.caps.granularity))) {
            /* memory already mapped before new memory: where best fit would map, a free chunk that
             * holds a mapped run long enough serves instead (with hold_large / hold_peak, this is
             * what lets the steady state stop remapping). Near the limit only with one-granule
             * extents (a chosen limit, plan:true): with larger ones, cutting blocks out of large free chunks
             * keeps extents busy that a large request later needs given back (transformer_varlen
             * at a limit 95% full failed requests), so best fit and the limit's own fallbacks
             * decide; with one-granule extents a block keeps busy only the granules it covers, and
             * taking mapped memory spares the moves of idle granules under a new place. */
            pool_chunk *m = pool_find_mapped_locked(p, pool_zone_bins(p, rounded), rounded);
            if (m != NULL) c = m;
        }
        grow_result why = GROW_LIMIT;
        if (c == NULL && p->vmm == NULL) {
            why = pool_grow_plain_locked(p, rounded);
            if (why == GROW_OK) c = pool_find_locked(p, rounded, async, stream);
        }
        vram_status s = c ? arena_take_locked(p, c, size, rounded, stream, ptr, &why) : VRAM_ERR_OUT_OF_MEMORY;
        if (s == VRAM_ERR_OUT_OF_MEMORY && why == GROW_LIMIT && p->vmm != NULL) {
            s = alloc_at_limit_locked(p, size, rounded, stream, ptr, &why);
        }
        if (s == VRAM_ERR_OUT_OF_MEMORY && alloc_wait_helps_locked(p)) continue;
        if (s == VRAM_ERR_OUT_OF_MEMORY && p->plan_hi != 0 && plan_give_way_locked(p)) continue;   /* (its zone's */
        if (s == VRAM_ERR_OUT_OF_MEMORY && quiet != NULL) *quiet = why;
        else if (s == VRAM_ERR_OUT_OF_MEMORY) s = pool_oom_locked(p, size, rounded, why);
        if (s == VRAM_OK && p->reserved - p->current < p->idle_low) p->idle_low = p->reserved - p->current;
        return s;
    }
}

vram_status arena_alloc(pool_arena *p, vram__pool_thread *me, size_t size, int async, void *stream, void **ptr,
                        grow_result *quiet) {
    if (size > p->cfg.limit || size > SIZE_MAX - VRAM_POOL_UNIT) {
        if (quiet != NULL) {
            *quiet = GROW_LIMIT;
            return VRAM_ERR_OUT_OF_MEMORY;
        }
        pool_lock_take(&p->lock);
        vram_status s = pool_oom_locked(p, size, size, GROW_LIMIT);
        pool_lock_give(&p->lock);
        return s;
    }
    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);
    pool_chunk *c = NULL;
    /* the fast path: a block this thread parked. Only plain requests with caches on look (and
     * tc_mine is where a second thread's arrival turns parking on) */
    if (!async && p->tc_cap != 0 && tc_take(p, tc_mine(p, me), rounded, &c)) {
        *ptr = (void *)(uintptr_t)c->addr;
        return VRAM_OK;
    }
    pool_lock_take_by(&p->lock, me);                              /* (its bias, lock.h) */
    if (__builtin_expect(p->asleep, 0)) {                         /* its memory is off the card (sleep.c) */
        vram_status s = quiet != NULL ? VRAM_ERR_OUT_OF_MEMORY : arena_asleep_refusal(p, size);
        if (quiet != NULL) *quiet = GROW_ASLEEP;
        pool_lock_give(&p->lock);
        return s;
    }
    if (!p->cfg.growth && rounded > arena_headroom_live(p)) {   /* a fraction below the preallocation */
        vram_status s = quiet != NULL ? VRAM_ERR_OUT_OF_MEMORY : pool_oom_locked(p, size, rounded, GROW_LIMIT);
        if (quiet != NULL) *quiet = GROW_LIMIT;
        pool_lock_give(&p->lock);
        return s;
    }
    if (p->solo != SOLO_OFF) solo_note_request_locked(p, async, stream);
    vram_status s = VRAM_OK;
    int plan = __builtin_expect(p->planner != NULL, 0) && plan_sees(p);   /* (not while its detector rests) */
    if (plan && plan_alloc_locked(p, size, rounded, stream, ptr, &s)) {
        pool_lock_give(&p->lock);                             /* served by the plan (plan_arena.h) */
        return s;
    }
    s = pool_alloc_locked(p, size, rounded, async, stream, ptr, quiet);
    if (plan && s == VRAM_OK) plan_noted_locked(p, p->last_taken, rounded, stream);
    pool_lock_give(&p->lock);
    return s;
}

vram_status arena_alloc_at(pool_arena *p, uint64_t addr, size_t size, void *stream) {
    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);
    pool_lock_take(&p->lock);
    if (p->pending != NULL) pending_reap_locked(p, 1);
    if (p->deferred != NULL) deferred_reap_locked(p, 1);
    pool_flush_caches_locked(p);
    pool_chunk *c = NULL;
    for (pool_region *r = p->regions; r != NULL && c == NULL; r = r->next) {
        if (addr < r->base || addr - r->base >= r->size) continue;
        for (c = r->first; c != NULL && c->addr + c->size <= addr; c = c->next) {
        }
    }
    vram_status s = VRAM_OK;
    if (p->asleep) {
        s = arena_asleep_refusal(p, size);
    } else if (size == 0 || addr % VRAM_POOL_UNIT != 0 || rounded < size || c == NULL || c->state != CHUNK_FREE ||
        addr + rounded > c->addr + c->size) {
        s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_private_malloc_at(%p, %zu): not a free range of %s",
                       (void *)(uintptr_t)addr, size, p->cfg.name);
    } else if ((c = chunk_cut_at_locked(p, c, addr)) == NULL) {
        s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a chunk record");
    } else {
        if (p->solo != SOLO_OFF) solo_note_request_locked(p, 1, stream);
        void *ptr = NULL;
        grow_result why = GROW_OK;
        s = arena_take_locked(p, c, size, rounded, stream, &ptr, &why);
        if (s == VRAM_ERR_OUT_OF_MEMORY && why != GROW_OK) s = pool_oom_locked(p, size, rounded, why);
    }
    pool_lock_give(&p->lock);
    return s;
}

/* A free of a block the arena does not hold live: *owned says whether addr lies in its memory. */
static vram_status free_unknown_unlock(pool_arena *p, void *ptr, vram__free_kind how, int *owned) {
    *owned = pool_owns_locked(p, (uint64_t)(uintptr_t)ptr);
    pool_lock_give(&p->lock);
    return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): not a live block of %s (already freed, "
                      "or not the start of a block vram handed out)", vram__pool_free_name(how), ptr,
                      p->cfg.name);
}

/* The event of a vram_free_async, recorded on `stream` into a new record (*e, one reference). */
static vram_status free_event_locked(pool_arena *p, void *stream, pool_event **e) {
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

/* Block c, out of the pointer table, freed at once (VRAM_POOL_FREE_NOW: to the free bins) or on
 * `stream` (PENDING there, with event e or none yet); a block the plan placed goes back to the plan.
 * Gives the arena lock back. */
static vram_status free_by_kind_unlock(pool_arena *p, pool_chunk *c, vram__free_kind how, void *stream,
                                       pool_event *e) {
    if (__builtin_expect(p->planner != NULL, 0) && (c->plan_id != 0 || c->plan_k != 0 || c->slot) &&
        plan_free_locked(p, c, how == VRAM_POOL_FREE_NOW)) {   /* (a block the planner saw) */
        pool_lock_give(&p->lock);                 /* a slot of the plan's zone (plan_slots.c) */
        return VRAM_OK;
    }
    if (how == VRAM_POOL_FREE_NOW) {
        pool_release_used_locked(p, c);
        pool_lock_give(&p->lock);
        return VRAM_OK;
    }
    note_used_locked(p, c, 0);
    c->state = CHUNK_PENDING;
    c->stream = stream;
    c->event = e;
    pending_link_locked(p, pending_merge_locked(p, c));
    pool_lock_give(&p->lock);
    return VRAM_OK;
}

/* A free by its kind: VRAM_POOL_FREE_NOW goes to the free bins (or a thread cache), a stream-ordered
 * one becomes PENDING on its stream (an owned-stream free on the solo stream goes to the bins at
 * once), a block with uses on other streams is deferred (stream_order.c). A block is always in the
 * table, a cache or the pool's; it leaves the table under the pool lock, so vram_check sees no gap.
 * A free that records events (its own, or for a block's uses on other streams) takes it out only
 * once they are recorded, so that a failure leaves everything as it was. vram_free_async records an
 * event of its own here, except during a capture: then it is recorded after it, as owned-stream
 * frees' are. */
vram_status arena_free(pool_arena *p, vram__pool_thread *me, void *ptr, vram__free_req *req) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    vram__free_kind how = req->how;
    void *stream = req->stream;
    req->owned = 1;
    /* the fast path: parked. Only once parking is on: a free that merely asks whether the block is
     * this arena's (runtime's free_on tries each pool) must not turn it on */
    if (how == VRAM_POOL_FREE_NOW && tc_parking(p) && tc_park(p, tc_mine(p, me), addr)) return VRAM_OK;
    int own_event = how == VRAM_POOL_FREE_EVENT;
    if (own_event && capture_underway(p)) {
        own_event = 0;
        how = VRAM_POOL_FREE_OWNED_STREAM;
    }
    pool_lock_take_by(&p->lock, me);
    pool_chunk *c = own_event ? live_get(p, addr) : live_take_unused(p, addr);
    if (c == NULL) return free_unknown_unlock(p, ptr, how, &req->owned);
    if (__builtin_expect(c->asleep, 0)) {         /* no memory under it: free at once (sleep.c) */
        if (own_event || c->uses != NULL) live_take(p, addr);
        arena_sleep_free_locked(p, c);
        pool_lock_give(&p->lock);
        return VRAM_OK;
    }
    vram__free_kind asked = how;
    if (how == VRAM_POOL_FREE_ALLOC_STREAM) {     /* the stream it was handed out on */
        how = VRAM_POOL_FREE_OWNED_STREAM;
        stream = c->stream;
    }
    if (c->uses != NULL) {                        /* used on other streams too: wait for them */
        if (how != VRAM_POOL_FREE_OWNED_STREAM || uses_beyond(c->uses, stream)) {
            if (p->planner != NULL) plan_free_locked(p, c, 0);
            return free_deferred_unlock(p, c, how, stream, asked);
        }
        free(c->uses);                            /* used on its owned-stream free's stream alone: */
        c->uses = NULL;                           /* that order covers it (this free fails no more) */
        live_take(p, addr);
    }
    if (how == VRAM_POOL_FREE_OWNED_STREAM && p->solo == SOLO_ON) {
        if (stream == p->solo_stream) {
            p->solo_unfenced++;
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
        live_take(p, addr);
    }
    return free_by_kind_unlock(p, c, how, stream, e);
}
