/*
 * arena_alloc.c: the allocation path of one arena, below the front door (arena.c, which takes the
 * lock, tries the thread caches and reports an out-of-memory failure). Owns the plan's part of a
 * request (plan_arena.c chooses a place, handed out here), the search for a chunk (best fit in the
 * free bins of the request's zone, a chunk freed on the caller's stream, a mapped run inside a
 * larger free chunk), the hand-out (split, mapping, the pointer table, the counts), the retry
 * ladder of a request that does not fit (waiting for stream-ordered frees, flushing the thread
 * caches, the limit's fallbacks) and the free of a block by its kind (vram__free_kind): at once or
 * pending on a stream (deferred ones: stream_order.c).
 *
 * Invariants: a block is always in the pointer table, a thread cache or the arena's lists; it
 * leaves the table under the arena lock, and a free that records events takes it out only once they
 * are recorded, so that a failure leaves everything as it was. A failed hand-out changes nothing.
 * Everything here runs under the arena lock, which the front door took (vram__free_by_kind_unlock gives it
 * back).
 */
#include <stdlib.h>

#include "pool/pointer_table.h"
#include "pool/backing.h"
#include "pool/plan_arena.h"
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

/* With one-granule extents (a chosen limit, plan:true), a request of at least this many granules
 * takes mapped memory inside a larger free chunk before best fit maps or moves granules for it,
 * near the limit too (see vram__alloc_best_fit_locked). */
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
    POOL_ASSERT_LOCKED(p);
    if (p->order.pending != NULL) vram__pending_reap_locked(p, 0);
    if (p->order.deferred != NULL) vram__deferred_reap_locked(p, 0);
    free_bins *zone = pool_zone_bins(p, rounded);
    pool_chunk *c = vram__free_bins_best_fit(zone, rounded);
    if (c == NULL && zone != &p->bins) c = vram__free_bins_best_fit(&p->bins, rounded);
    if (async && p->order.pending != NULL) {
        pool_chunk *q = vram__pending_best_fit_locked(p, stream, rounded);
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
    size_t run = c->region->kind == REGION_VMM ? vram__pool_vmm_mapped_run(&c->region->vmm, c->addr, c->size, &at)
                                               : c->size;
    (void)floor;
    if (run < fit->want) return 0;
    fit->chunk = c;
    fit->at = at;
    return 1;
}

static pool_chunk *pool_find_mapped_locked(pool_arena *p, free_bins *bins, size_t size) {
    POOL_ASSERT_LOCKED(p);
    mapped_fit best = {size, NULL, 0};
    vram__free_bins_ascending(bins, size, mapped_fit_visit, &best);
    return best.chunk != NULL ? vram__chunk_cut_at_locked(p, best.chunk, best.at) : NULL;
}

/* Hands out `rounded` bytes of chunk c to a request on `stream` (NULL: a plain one). A free chunk of
 * the VMM region gets its memory mapped first; when that fails (*why says how) the chunk goes back
 * and nothing changed. */
vram_status vram__arena_take_locked(pool_arena *p, pool_chunk *c, size_t size, size_t rounded, void *stream,
                              void **ptr, grow_result *why) {
    POOL_ASSERT_LOCKED(p);
    int reused = c->state == CHUNK_PENDING;
    (void)reused;
    if (c->state == CHUNK_PENDING) {
        pending_unlink_locked(p, c);
        vram__chunk_split_locked(p, c, rounded);
    } else {
        c = chunk_take_front_locked(p, c, rounded);
    }
    if (c->state == CHUNK_FREE && c->region->kind == REGION_VMM) {
        c->state = CHUNK_USED;        /* in use for the extents' counts: its memory is not idle */
        *why = vram__vmm_back_locked(p, c);
        if (*why != GROW_OK) {
            vram__chunk_make_free_locked(p, c, 1);  /* (busy for a moment: a recount may have counted it) */
            return VRAM_ERR_OUT_OF_MEMORY;
        }
    }
    if (ptr_table_put(p, c) != 0) {             /* before anything is handed out: c goes back as it was */
        if (c->state == CHUNK_PENDING) pending_link_locked(p, c);   /* its stream may still use it */
        else vram__chunk_make_free_locked(p, c, 1);
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for the pointer table");
    }
    if (c->state == CHUNK_PENDING) {
        vram__event_release(p, c->event);
        c->event = NULL;
    }
    c->stream = stream;
    c->state = CHUNK_USED;
    c->req = size;
    note_used_locked(p, c, 1);
    p->last_taken = c;
    *ptr = (void *)(uintptr_t)c->addr;
    POOL_ASSERT_CHUNK(c);
    if (!reused) POOL_DEBUG_FILL(p, c, POOL_FILL_NEW);   /* (a stream's own pending free: its bytes) */
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
    POOL_ASSERT_LOCKED(p);
    if (p->order.unrecorded == 0 && !vram__tc_parking(p)) return 0;      /* nothing could be handed back */
    if (!pool_would_grow_locked(c, rounded)) return 0;
    return p->order.unrecorded > 0 || vram__tc_holds_any(p);
}

/* The limit refused to map memory under the chunk best fit chose: a mapped run of either zone
 * serves, or the limit's last partial granule as a plain region (exactly what is left). */
static vram_status alloc_at_limit_locked(pool_arena *p, size_t size, size_t rounded, void *stream, void **ptr,
                                         grow_result *why) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *m = pool_find_mapped_locked(p, &p->bins, rounded);   /* either zone now */
    if (m == NULL && p->small_end != 0) m = pool_find_mapped_locked(p, &p->sbins, rounded);
    if (m != NULL) return vram__arena_take_locked(p, m, size, rounded, stream, ptr, why);
    if (vram__pool_grow_plain_locked(p, rounded) == GROW_OK) {
        return vram__arena_take_locked(p, p->regions->first, size, rounded, stream, ptr, why);
    }
    return VRAM_ERR_OUT_OF_MEMORY;
}

/* A request found no memory: waits for the frees still in flight on streams, then for the blocks
 * still used on other streams; 1 when either gave memory back (the request tries again). */
static int alloc_wait_helps_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (p->order.pending != NULL) {
        size_t pending = p->order.pending_count;
        vram__pending_reap_locked(p, 1);
        p->stats.syncs++;
        if (p->order.pending_count < pending) {
            p->stats.retries++;
            return 1;
        }
    }
    if (p->order.deferred != NULL) {
        size_t deferred = p->order.deferred_count;
        vram__deferred_reap_locked(p, 1);
        p->stats.syncs++;
        if (p->order.deferred_count < deferred) {
            p->stats.retries++;
            return 1;
        }
    }
    return 0;
}

/* The retry ladder of a request under the lock: the bins (and the caller's pending frees), then
 * waiting for pending frees, flushing the thread caches, a mapped run before new memory, growth,
 * the limit's fallbacks, waiting for frees and uses in flight; before failing, a plan in force or
 * waiting gives way (its zone's memory becomes best fit's). VRAM_ERR_OUT_OF_MEMORY with p->failed,
 * the cause, for the front door to report. */
vram_status vram__alloc_best_fit_locked(pool_arena *p, size_t size, size_t rounded, int async, void *stream, void **ptr) {
    POOL_ASSERT_LOCKED(p);
    for (;;) {
        pool_chunk *c = pool_find_locked(p, rounded, async, stream);
        if (c == NULL && p->order.pending != NULL) {
            vram__pending_reap_locked(p, 1);
            p->stats.syncs++;
            c = pool_find_locked(p, rounded, async, stream);
            if (c != NULL) p->stats.retries++;
        }
        if (pool_flush_helps_locked(p, c, rounded)) {
            vram__pool_flush_caches_locked(p);              /* parked blocks first, then the driver */
            if (p->order.unrecorded > 0) vram__pending_record_locked(p);   /* so that they settle soon */
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
            why = vram__pool_grow_plain_locked(p, rounded);
            if (why == GROW_OK) c = pool_find_locked(p, rounded, async, stream);
        }
        vram_status s = c ? vram__arena_take_locked(p, c, size, rounded, stream, ptr, &why) : VRAM_ERR_OUT_OF_MEMORY;
        if (s == VRAM_ERR_OUT_OF_MEMORY && why == GROW_LIMIT && p->vmm != NULL) {
            s = alloc_at_limit_locked(p, size, rounded, stream, ptr, &why);
        }
        if (s == VRAM_ERR_OUT_OF_MEMORY && why == GROW_PLAN && vram__plan_give_way_locked(p)) continue;
        if (s == VRAM_ERR_OUT_OF_MEMORY && alloc_wait_helps_locked(p)) continue;
        if (s == VRAM_ERR_OUT_OF_MEMORY && p->plan.hi != 0 && vram__plan_give_way_locked(p)) continue;   /* (its zone's */
        if (s == VRAM_ERR_OUT_OF_MEMORY) p->failed = why;
        if (s == VRAM_OK && p->reserved - p->current < p->idle_low) p->idle_low = p->reserved - p->current;
        return s;
    }
}

vram_status vram__free_by_kind_unlock(pool_arena *p, pool_chunk *c, vram__free_kind how, void *stream, pool_event *e) {
    if (__builtin_expect(p->plan.planner != NULL, 0) && (c->plan_id != 0 || c->plan_k != 0 || c->slot) &&
        vram__plan_free_locked(p, c, how == VRAM_POOL_FREE_NOW)) {   /* (a block the planner saw) */
        pool_lock_give(&p->lock);                 /* a plan slot of the plan's zone (plan_slots.c) */
        return VRAM_OK;
    }
    if (how == VRAM_POOL_FREE_NOW) {
        vram__pool_release_used_locked(p, c);
        pool_lock_give(&p->lock);
        return VRAM_OK;
    }
    note_used_locked(p, c, 0);
    c->state = CHUNK_PENDING;
    c->stream = stream;
    c->event = e;
    pending_link_locked(p, vram__pending_merge_locked(p, c));
    pool_lock_give(&p->lock);
    return VRAM_OK;
}

int vram__alloc_planned_locked(pool_arena *p, size_t size, size_t rounded, void *stream, void **ptr) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *place = NULL;
    int r = vram__plan_alloc_locked(p, size, rounded, stream, ptr, &place);
    if (r != PLAN_PLACE) return r == PLAN_SERVED;
    grow_result why = GROW_OK;       /* (the limit refused: the plan ends, best fit tries and reports) */
    int ok = vram__arena_take_locked(p, place, size, rounded, stream, ptr, &why) == VRAM_OK;
    return vram__plan_placed_locked(p, ok ? p->last_taken : NULL, rounded, stream);
}
