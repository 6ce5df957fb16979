/*
 * plan_arena.c: an arena following the plan of its repeating step (see plan_arena.h).
 *
 * Invariants: while armed or active, plan.lo < plan.hi bound the plan's zone, plan.hi - plan.lo is
 * the plan's top rounded up to granules, and chunk[k] is the latest live block the plan placed for
 * request k (this step's, or the step before's while it lives into this one) or NULL; a block the
 * plan placed has plan_k = 1 + k until its free. A planned request is placed only in a FREE chunk
 * that covers its whole place (the chunk after its planned neighbour below; in the first step, after
 * the plan was found again (plan_astray_locked), or when that chunk does not hold the place, the
 * zone's chunk found at the place by a walk): so whatever the program frees early or late, no two
 * live blocks overlap; a free that comes late leaves the place taken, and the request goes to best
 * fit (plan_evict_late_locked). Only blocks the plan placed lie in the zone. plan.keep is set only
 * while active, past the settle request (plan.lend, set while the program is off the plan, counts only
 * with it). Pool lock held throughout.
 */
#include "pool/plan_arena.h"

#include <stdlib.h>
#include <string.h>

#include "pool/backing.h"
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

/* A plan is put in force only when its blocks are at least this share of the most bytes in use
 * seen: a step's repeated layers repeat too (a short period, small blocks), and following such a
 * plan would move memory into a zone for little. */
#define PLAN_MIN_SHARE 4   /* 1/4 */

/* The detector rests once PLAN_QUIET requests were fed with no growth of reserved memory (a step that
 * repeats is found within a few of its lengths of its last growth: on the repository's training
 * traces within 4,100 requests, the optimizer's state made in the second step being the last growth);
 * resting, it looks again every PLAN_NAP requests, for PLAN_LOOK requests: three lengths of the
 * longest step it finds, the time to find one that formed without growth. */
#define PLAN_QUIET ((int64_t)PLAN_MAX_STEP / 2)
#define PLAN_LOOK  (3 * (int64_t)PLAN_MAX_STEP)
#define PLAN_NAP   (32 * (uint64_t)PLAN_LOOK)

void vram__plan_arena_enable(pool_arena *p) {
    pool_planner *pl = calloc(1, sizeof *pl);
    if (pl == NULL) return;
    if (vram__plan_detector_init(&pl->det) != 0) {
        free(pl);
        return;
    }
    p->plan.planner = pl;
}

void vram__plan_arena_destroy(pool_arena *p) {
    pool_planner *pl = p->plan.planner;
    if (pl == NULL) return;
    vram__plan_detector_free(&pl->det);
    vram__plan_free(&pl->plan);
    free(pl->chunk);
    free(pl->evicted);
    free(pl->slot);
    free(pl->sorted);
    free(pl->by_offset);
    free(pl);
    p->plan.planner = NULL;
}

/* Gives the plan's zone back to the large zone: its free chunks go to the large zone's bins (the
 * first and the last merged with their free neighbours outside), its blocks become best fit's. One
 * walk over the zone's chunks. */
static void plan_zone_dissolve_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *first = p->plan.first, *last = NULL;
    uint64_t hi = p->plan.hi;
    if (hi == 0) return;
    for (pool_chunk *c = first; c != NULL && c->addr < hi; c = c->next) {
        if (c->state == CHUNK_FREE) vram__free_bins_remove(&p->plan.bins, c);
        c->plan_k = 0;
        last = c;
    }
    p->plan.lo = UINT64_MAX;
    p->plan.hi = 0;
    p->plan.first = NULL;
    for (pool_chunk *c = first, *next; c != NULL; c = next) {
        next = c == last ? NULL : c->next;
        if (c->state != CHUNK_FREE) continue;
        if (c == first || c == last) vram__chunk_make_free_locked(p, c, 0);   /* (may merge outside) */
        else vram__free_bins_insert(&p->bins, c);
    }
}

/* The plan is followed no more: best fit serves from now on, in all memory, the zone's too; the
 * detector, fed again, has PLAN_QUIET requests to find what the program does now. */
static void plan_end_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    vram__plan_slots_leave_locked(p);
    pl->quiet = 0;
    if (pl->active) pl->ends++;
    pl->active = pl->armed = 0;
    p->plan.hold = 1;
    p->plan.keep = p->plan.lend = 0;
    plan_zone_dissolve_locked(p);
}

/* Carves the plan's zone of `bytes` (granules) at the very end of the VMM region (its last chunk
 * free), away from the memory best fit holds at the bottom (the zone's memory comes from moves, when
 * the plan starts); 0, or -1 when the end is not free or too small. */
static int plan_zone_carve_locked(pool_arena *p, size_t bytes) {
    POOL_ASSERT_LOCKED(p);
    size_t gran = p->cfg.caps.granularity;
    pool_chunk *c = p->vmm != NULL ? p->vmm->last : NULL;
    if (c == NULL || c->state != CHUNK_FREE || c->addr < p->small_end || c->size < bytes + gran) return -1;
    uint64_t lo = c->addr + c->size - bytes;                         /* (the range's end is a granule's) */
    if (lo % gran != 0 || lo < c->addr + gran) return -1;
    pool_chunk *z = vram__chunk_cut_at_locked(p, c, lo);                   /* [lo, the region's end) */
    if (z == NULL) return -1;
    vram__free_bins_remove(pool_bins_of(p, z), z);
    p->plan.lo = lo;
    p->plan.hi = lo + bytes;
    p->plan.first = z;
    vram__free_bins_insert(&p->plan.bins, z);
    return 0;
}

/* Whether block c (in use) holds memory outside the zone of `plan` at the plan's first step: one
 * from before the step before (or one the detector did not see), one the plan does not see freed
 * (unplanned: it outlives the step), one of the step before's that should have been freed, or one of
 * the current step's that lives into the first step (best fit placed it before the plan was made; its
 * place in the zone is mapped only once it is freed, but the granules it shares there are mapped for
 * its neighbours). The step before's that live into the next step are freed in the current step. */
static int held_at_first_step(const pool_chunk *c, const pool_plan *plan) {
    if (c->plan_id == 0 || plan->start_request < 2 * (uint64_t)plan->period) return 1;
    uint64_t id = c->plan_id - 1, cur = plan->start_request - plan->period, prev = cur - plan->period;
    if (id < prev) return 1;
    if (id >= cur) return plan->offset[id - cur] == PLAN_UNPLANNED || plan->wraps[id - cur];
    return plan->offset[id - prev] == PLAN_UNPLANNED || !plan->wraps[id - prev];
}

/* The bytes of memory that the blocks hold outside the zone of `plan` at its first step (held_at_first_step): the
 * granules under them in the VMM region, each once, and the plain regions whole. */
static size_t held_outside_plan_locked(const pool_arena *p, const pool_plan *plan) {
    POOL_ASSERT_LOCKED(p);
    size_t gran = p->cfg.caps.granularity, held = 0, last = SIZE_MAX;
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        if (r->kind != REGION_VMM) held += r->held;
    }
    for (const pool_chunk *c = p->vmm != NULL ? p->vmm->first : NULL; c != NULL; c = c->next) {
        if (c->state != CHUNK_USED || c->cached || !held_at_first_step(c, plan)) continue;
        size_t g = (size_t)((c->addr - p->vmm->base) / gran);
        size_t end = (size_t)((c->addr + c->size - 1 - p->vmm->base) / gran);
        held += (end - g + 1 - (g == last)) * gran;
        last = end;
    }
    return held;
}

/* A plan the detector made: armed for its first request, or dropped. Under a limit that was set, a
 * plan whose zone does not fit beside the memory held by the blocks from before its step (with a
 * granule to spare) is dropped and the detector stops: best fit packs the step into the holes
 * between those blocks, which the zone cannot use (resnet50_train at peak live / 0.995). */
static void plan_arm_locked(pool_arena *p, pool_plan *plan) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    size_t gran = p->cfg.caps.granularity, bytes = vram__round_up(plan->top, gran);
    if (p->cfg.limit_chosen && plan->planned > 0 &&
        bytes + gran + held_outside_plan_locked(p, plan) > p->cfg.limit) {
        pl->det.off = 1;
        pl->refused++;
        vram__plan_free(plan);
        return;
    }
    /* (the detector placed nothing unless the step's blocks reached det.min_live) */
    pool_chunk **chunk = plan->planned > 0 && p->plan.hi == 0 ? calloc(plan->period, sizeof *chunk) : NULL;
    uint8_t *evicted = chunk != NULL ? calloc(plan->period, 1) : NULL;
    if (evicted == NULL || plan_zone_carve_locked(p, bytes) != 0) {
        free(chunk);
        free(evicted);
        vram__plan_free(plan);
        return;
    }
    vram__plan_free(&pl->plan);
    free(pl->chunk);
    free(pl->evicted);
    pl->evicted = evicted;
    pl->evicted_bytes = 0;
    pl->astray = pl->confirm = 0;
    free(pl->slot);
    free(pl->sorted);
    free(pl->by_offset);
    pl->slot = pl->sorted = NULL;
    pl->by_offset = NULL;
    pl->slot_misses = 0;
    pl->plan = *plan;
    pl->chunk = chunk;
    pl->armed = p->plan.hold = 1;
    pl->given_back = pl->settle_due = 0;
}

/* The detector rests: the arena stops calling the planner (plan_sees) for PLAN_NAP requests. */
static void plan_rest_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    p->plan.planner->resting = 1;
    p->plan.nap = PLAN_NAP;
}

void vram__plan_noted_locked(pool_arena *p, pool_chunk *c, size_t rounded, void *stream) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (pl->active) return;
    int grew = p->reserved > pl->reserved_seen;
    pl->reserved_seen = p->reserved;
    if (pl->resting) {                          /* reserved memory grew, or a look */
        pl->resting = 0;
        vram__plan_note_gap(&pl->det);
        pl->quiet = grew ? 0 : PLAN_QUIET - PLAN_LOOK;
    } else if (grew) {
        pl->quiet = 0;
    }
    if (pl->det.off || vram__tc_parking(p)) {         /* nothing to feed */
        if (!pl->armed) plan_rest_locked(p);
        return;
    }
    if (p->current > pl->live_high) {
        pl->live_high = p->current;
        pl->det.min_live = pl->live_high / PLAN_MIN_SHARE;
    }
    uint64_t id = 0;
    pool_plan plan;
    int made = vram__plan_note_request(&pl->det, rounded, (uintptr_t)stream, &id, &plan);
    c->plan_id = id + 1;
    if (made == 1 && !pl->armed) plan_arm_locked(p, &plan);
    else if (made == 1) vram__plan_free(&plan);
    if (++pl->quiet >= PLAN_QUIET && !pl->armed) plan_rest_locked(p);
}

static int by_address(const void *a, const void *b) {
    uint64_t x = ((const vmm_range *)a)->lo, y = ((const vmm_range *)b)->lo;
    return (x > y) - (x < y);
}

/* The places of the blocks that live into the next step, by address (they are alive together at a
 * step's start: apart), their count in *n; NULL when there are none or no host memory. */
static vmm_range *wrap_places(const pool_arena *p, size_t *n) {
    const pool_plan *plan = &p->plan.planner->plan;
    vmm_range *r = malloc(plan->period * sizeof *r);
    *n = 0;
    for (uint32_t k = 0; r != NULL && k < plan->period; k++) {
        uint64_t at = p->plan.lo + plan->offset[k];
        if (plan->wraps[k]) r[(*n)++] = (vmm_range){at, at + plan->size[k]};
    }
    if (r != NULL) qsort(r, *n, sizeof *r, by_address);
    return r;
}

/* The request that starts a step. At the first step under a plan, the idle memory moves into the
 * zone and what is idle outside goes back, but for the places of the blocks that live into the
 * next step: the step before's blocks there may be best fit's (placed before the plan was made),
 * holding their bytes outside the zone. Until the settle request, where those are freed, growth
 * holds (idle memory moves under a block before more is mapped); there the zone's unmapped rest
 * gets the idle memory and what is idle outside goes back (vram__plan_alloc_locked). */
static void plan_step_begins_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    pl->steps++;
    pl->first = !pl->given_back;
    if (pl->first) {
        size_t n = 0;
        vmm_range *skip = wrap_places(p, &n);
        pl->given_back_bytes += vram__vmm_gather_idle_locked(p, p->plan.lo, p->plan.hi, skip, n);
        free(skip);
        pl->given_back = 1;
        pl->settle_due = pl->plan.settle > 0;
        p->plan.hold = pl->settle_due;   /* until then, the idle memory in the zone serves first */
        p->plan.keep = !pl->settle_due;
    } else if (!pl->settle_due && (pl->zone != NULL || vram__plan_slots_enter_locked(p))) {
        pl->slot_steps++;
    }
}

/* The zone's chunk holding address `at`, walking up from chunk c (in the zone, at or below `at`). */
static pool_chunk *zone_chunk_at(pool_arena *p, pool_chunk *c, uint64_t at) {
    while (c != NULL && c->addr < p->plan.hi && c->addr + c->size <= at) c = c->next;
    return c != NULL && c->addr <= at && c->addr < p->plan.hi ? c : NULL;
}

/* Whether chunk c is free over [at, at + size). */
static int chunk_holds(const pool_chunk *c, uint64_t at, size_t size) {
    return c != NULL && c->state == CHUNK_FREE && c->addr <= at && at + size <= c->addr + c->size;
}

/* A request, while the plan is followed, that is not the plan's next one, or one after such. The
 * program may have inserted requests of its own (a block made in its first step only, the optimizer's
 * state, an evaluation's batch) or begun again (a replay's next pass: the weights, then the same
 * steps): the plan bends rather than ends. Such a request goes to best fit, outside the zone, whose
 * idle memory serves it first (plan.lend: backing.c; slot mode is left so that the zone's free chunks
 * are seen idle). The plan goes on once PLAN_RESYNC requests in a row are its own from its next one
 * on (they go to best fit too): one request in a row would not do, since an optimizer makes its state
 * in the sizes and order of the parameters, two blocks each, which the step's own requests may match
 * one by one. Once more requests than the step has were off the plan (those that matched it while
 * it was being found again not counted), the program does something else: the plan ends. */
static int plan_astray_locked(pool_arena *p, size_t rounded, void *stream) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    const pool_plan *plan = &pl->plan;
    uint32_t at = (uint32_t)(((uint64_t)pl->pos + pl->confirm) % plan->period);
    vram__plan_slots_leave_locked(p);           /* (its idle memory serves best fit meanwhile) */
    p->plan.lend = 1;
    if (plan->size[at] == rounded && plan->stream[at] == (uintptr_t)stream) {
        pl->confirm++;
    } else {
        pl->confirm = plan->size[pl->pos] == rounded && plan->stream[pl->pos] == (uintptr_t)stream;
        if (pl->confirm == 0 && ++pl->astray > plan->period) {
            plan_end_locked(p);
            return PLAN_BEST_FIT;
        }
    }
    if (pl->confirm == PLAN_RESYNC) {           /* back on the plan: after these, its request at + 1 */
        pl->pos = at + 1 == plan->period ? 0 : at + 1;
        pl->astray = pl->confirm = 0;
        pl->first = 1;
        p->plan.lend = 0;
    }
    return PLAN_BEST_FIT;
}

/* Request h's blocks go to best fit from now on (evicted): one of them outlived the plan's place for
 * it (freed late, or the program's own request that looked like the plan's: an optimizer's state made
 * in the first step where the later steps make blocks of the same sizes in the same order), so that
 * the next time the program makes it, it does not stand in the zone. 0 once the evicted requests'
 * blocks come to more than 1/PLAN_EVICTED of the zone (the plan then ends: best fit would hold less). */
#define PLAN_EVICTED 16
static int plan_evict(pool_arena *p, uint32_t h) {
    pool_planner *pl = p->plan.planner;
    if (!pl->evicted[h]) {
        pl->evicted[h] = 1;
        pl->evicted_bytes += pl->plan.size[h];
    }
    return pl->evicted_bytes <= (p->plan.hi - p->plan.lo) / PLAN_EVICTED;
}

/* A planned request's place [at, at + size) is taken: the blocks the plan placed there are late
 * (plan_evict); 1, or 0 when the plan must end. `near`: a chunk of the zone at or below `at` to walk
 * up from (else the zone's start). */
static int plan_evict_late_locked(pool_arena *p, pool_chunk *near, uint64_t at, size_t size) {
    POOL_ASSERT_LOCKED(p);
    int ok = 1;
    if (near == NULL || near->addr > at || near->addr < p->plan.lo) near = p->plan.first;
    for (pool_chunk *c = zone_chunk_at(p, near, at); c != NULL && c->addr < at + size; c = c->next) {
        if (c->state == CHUNK_USED && c->plan_k != 0) ok &= plan_evict(p, c->plan_k - 1);
    }
    return ok;
}

/* Planned request k's place in the zone, cut from chunk c (free, holding the place): PLAN_PLACE with
 * *place, for the allocation path to hand out (vram__plan_placed_locked then), or, when c does not hold
 * the place, PLAN_BEST_FIT: the blocks there are late (plan_evict_late_locked) and this request goes
 * outside the zone (before the plan's first step, or when too much was evicted, the plan ends). */
static int plan_place_locked(pool_arena *p, pool_chunk *c, uint32_t k, size_t rounded, int before_first,
                             pool_chunk **place) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    uint64_t at = p->plan.lo + pl->plan.offset[k];
    pool_chunk *cut = chunk_holds(c, at, rounded) ? vram__chunk_cut_at_locked(p, c, at) : NULL;
    if (cut == NULL) {
        if (before_first || !plan_evict_late_locked(p, c, at, rounded)) plan_end_locked(p);
        else p->plan.lend = 1;                  /* (this request goes outside the zone) */
        return PLAN_BEST_FIT;
    }
    pl->place_k = k;
    pl->place_before_first = before_first;
    *place = cut;
    return PLAN_PLACE;
}

int vram__plan_placed_locked(pool_arena *p, pool_chunk *taken, size_t rounded, void *stream) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (taken == NULL) {                       /* (the limit: best fit tries, and reports) */
        plan_end_locked(p);
        return 0;
    }
    uint32_t k = pl->place_k;
    taken->plan_k = k + 1;
    pl->chunk[k] = taken;
    if (pl->place_before_first) vram__plan_noted_locked(p, taken, rounded, stream);   /* (the detector counts it) */
    return 1;
}

/* A request while a plan waits for its first step (the step before it): one that lives into the
 * first step is placed in the zone already, so that the first step finds it where the plan says. */
static int plan_before_first_locked(pool_arena *p, size_t rounded, void *stream, pool_chunk **place) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    const pool_plan *plan = &pl->plan;
    uint64_t k = pl->det.requests + plan->period - plan->start_request;   /* (in [1, period)) */
    if (k >= plan->period || plan->size[k] != rounded || plan->stream[k] != (uintptr_t)stream || vram__tc_parking(p) ||
        arena_still(p)) {
        plan_end_locked(p);
        return PLAN_BEST_FIT;
    }
    if (!plan->wraps[k]) return PLAN_BEST_FIT;
    uint64_t at = p->plan.lo + plan->offset[k];
    return plan_place_locked(p, zone_chunk_at(p, p->plan.first, at), (uint32_t)k, rounded, 1, place);
}

int vram__plan_alloc_locked(pool_arena *p, size_t size, size_t rounded, void *stream, void **ptr, pool_chunk **place) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (pl->armed && pl->det.requests == pl->plan.start_request) {
        pl->armed = p->plan.hold = 0;
        pl->active = 1;
        pl->pos = 0;
    }
    if (pl->armed) return plan_before_first_locked(p, rounded, stream, place);
    if (!pl->active) return PLAN_BEST_FIT;
    const pool_plan *plan = &pl->plan;
    uint32_t k = pl->pos;
    if (vram__tc_parking(p) || arena_still(p)) {
        plan_end_locked(p);
        return PLAN_BEST_FIT;
    }
    int next = plan->size[k] == rounded && plan->stream[k] == (uintptr_t)stream;
    if (!next || pl->astray > 0) return plan_astray_locked(p, rounded, stream);   /* (confirm > 0: astray too) */
    p->plan.lend = 0;
    if (pl->settle_due && k == plan->settle % plan->period) {
        pl->settle_due = p->plan.hold = 0;
        p->plan.keep = 1;
        pl->given_back_bytes += vram__vmm_gather_idle_locked(p, p->plan.lo, p->plan.hi, NULL, 0);
    }
    if (k == 0) plan_step_begins_locked(p);
    pl->pos = k + 1 == plan->period ? 0 : k + 1;
    if (pl->zone != NULL) {                    /* slot mode: a lookup (plan_slots.c) */
        if (!vram__plan_slots_due_ok(p, k)) {
            pl->slot_misses++;
            vram__plan_slots_leave_locked(p);        /* a block freed late: the zone's chunks decide */
        } else if (plan->offset[k] == PLAN_UNPLANNED || pl->evicted[k]) {
            return PLAN_BEST_FIT;
        } else if (vram__plan_slot_take_locked(p, k, size, stream, ptr)) {
            return PLAN_SERVED;
        } else {
            vram__plan_slots_leave_locked(p);
        }
    }
    if (plan->offset[k] == PLAN_UNPLANNED || pl->evicted[k]) return PLAN_BEST_FIT;
    /* the free chunk holding the place starts where the planned block below it ends; in the first
     * step, blocks of the step before may lie there or not: a walk up from the last one known (and
     * from the zone's start when the block below is not the plan's: off the plan, or evicted) */
    int32_t q = pl->first ? plan->below_first[k] : plan->below[k];
    pool_chunk *c = q < 0 ? p->plan.first : pl->chunk[q] != NULL ? pl->chunk[q]->next : NULL;
    uint64_t at = p->plan.lo + plan->offset[k];
    if (pl->first || !chunk_holds(c, at, rounded)) c = zone_chunk_at(p, c != NULL && c->addr <= at ? c : p->plan.first, at);
    return plan_place_locked(p, c, k, rounded, 0, place);
}

int vram__plan_give_way_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (pl == NULL || (!pl->armed && !pl->active)) return 0;
    plan_end_locked(p);
    return 1;
}

int vram__plan_free_locked(pool_arena *p, pool_chunk *c, int at_once) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (c->slot) {                             /* a slot's (or one that was, before slot mode ended) */
        uint32_t k = c->plan_k - 1;
        int mine = pl->zone != NULL && c->plan_k != 0 && k < pl->plan.period && pl->slot[k] == c;
        c->slot = 0;
        if (mine && at_once) {
            note_used_locked(p, c, 0);
            c->state = CHUNK_FREE;
            pl->chunk[k] = NULL;
            return 1;
        }
        if (mine) vram__plan_slots_leave_locked(p);  /* c is the zone's chunk again; the plan ends below */
    }
    if (c->plan_k != 0) {
        uint32_t k = c->plan_k - 1;
        c->plan_k = 0;
        if (pl->chunk != NULL && pl->chunk[k] == c) pl->chunk[k] = NULL;
        if ((pl->active || pl->armed) && !at_once) plan_end_locked(p);   /* stream-ordered or deferred: */
    }                                                                     /* not the plan's */
    if (c->plan_id != 0 && !pl->active) vram__plan_note_free(&pl->det, c->plan_id - 1, c->size);
    c->plan_id = 0;
    return 0;
}

void vram__plan_arena_end_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (pl == NULL) return;
    if (pl->active || pl->armed) plan_end_locked(p);
    else vram__plan_slots_leave_locked(p);
}

void vram__plan_arena_info_locked(const pool_arena *p, vram_memory_info *info) {
    POOL_ASSERT_LOCKED(p);
    const pool_planner *pl = p->plan.planner;
    if (pl == NULL) return;
    info->plan_bytes = pl->active ? (size_t)(p->plan.hi - p->plan.lo) : 0;
    info->plan_steps = pl->steps;
    info->plan_ends = pl->ends;
    info->plan_given_back = pl->given_back_bytes;
    info->plan_slot_steps = pl->slot_steps;
    info->plan_refused = pl->refused;
}
