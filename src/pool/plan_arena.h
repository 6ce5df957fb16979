/*
 * plan_arena.h: an arena following the plan of its repeating step (plan_arena.c; the plan itself:
 * plan.h).
 *
 * The arena's detector is fed every request best fit serves and every free of a block it was fed,
 * while it can matter: it rests (is fed nothing, for a counter's cost a request) once PLAN_QUIET
 * requests went by with no growth of reserved memory and no plan waiting or followed, until reserved
 * memory grows again, a plan ends, or, every PLAN_NAP requests, for a look of PLAN_LOOK requests
 * (long enough to find a step of PLAN_MAX_STEP requests that formed without growth); the requests it
 * did not see are a gap in its history (vram__plan_note_gap). Once it confirms a
 * step whose planned blocks are a large part of what the arena holds, the arena carves the plan's
 * zone at the end of the VMM region (under a limit that was set, only when the zone fits it beside
 * the memory held outside the zone at the first step; else the plan is refused and detection stops): `top` bytes behind a zone edge, whose free chunks are indexed
 * apart (plan.bins), so that best fit never places there. From the plan's first request on, each
 * request of a step is compared with the plan's next one (size, stream). A planned one is cut at
 * its offset from the free chunk that starts where its planned neighbour below ends (a pointer and
 * a check that the chunk is free over the whole place, not a search) and handed out as any
 * block (the pointer table, the statistics, the mapping under it); an unplanned one (a block that
 * outlives its step) goes to best fit. The plan chooses the place and cuts it out; the allocation
 * path (arena_alloc.c) hands it out and tells the plan (vram__plan_placed_locked), so that the plan never
 * calls up into the path that calls it. While the plan waits for its first step, a request whose block
 * lives into the next step is placed in the zone already; in the first step the blocks of the step
 * before may lie outside the zone, so a planned request's chunk is found by a walk up from its
 * neighbour. At the first planned step's start the idle memory moves into the zone (but for the
 * places of blocks living into the next step, whose step-before blocks may still hold their bytes
 * outside it) and what is idle outside is given back to the driver (the plan no longer needs it);
 * growth holds until the plan's settle request, where, the step before's blocks living into the
 * first step being freed, the zone's rest is filled and the idle memory outside given back again.
 * While a plan waits and after one ended, growth holds to the arena's high-water mark (plan.hold:
 * idle extents move under a block before more is mapped), so a changed program is served from the
 * zone's memory. Once the plan is in force (past the settle request: plan.keep), the zone's idle
 * memory is its own: growth of blocks outside the zone holds to the mark with the idle memory outside
 * the zone, and a block that would take the arena past the mark makes the plan give way (it ends,
 * and the block is tried again by best fit), so that following a plan never holds more than the
 * arena held without it (backing.c, GROW_PLAN).
 *
 * From the plan's second step on, plan_slots.c serves it in slot mode (each planned request a lookup
 * of its own record; see there), leaving it for the zone's chunks whenever a block is freed later
 * than planned and before anything walks the arena's chunks.
 *
 * A request that differs from the plan's next one (another size or stream) does not end it: the
 * program inserted requests of its own, or began again (a replay's next pass, an evaluation between
 * epochs). The plan bends (plan_astray_locked): such requests go to best fit, outside the zone, whose
 * idle memory serves them first meanwhile (plan.lend); the plan goes on once PLAN_RESYNC requests in a
 * row are its own from its next one on, and ends after more requests off it than its step has. A
 * planned place that is not free holds a block of the plan's that outlived it (freed late, or the
 * program's own request that looked like the plan's: an optimizer's state made in the first step has
 * the sizes and order of the later steps' requests): that request is evicted (best fit's from then on,
 * so that it does not stand in the zone the next time) and the request whose place it took goes to
 * best fit this time; the plan ends once the evicted requests' blocks come to more than 1/16 of its
 * zone. A block freed earlier only frees its place earlier. The plan ends at once at a stream-ordered
 * or deferred free of a planned block and at a second thread (thread caches); an ended plan's zone
 * goes back to the large zone (its blocks are best fit's from then on, its free memory too), and the
 * detector looks again.
 *
 * Everything under the arena's lock. Only the first arena of a logical device plans, and only with
 * growth by mapping and the allocator option plan:true (the default; it maps granule by granule, but
 * for the large blocks of a load: backing.c).
 */
#ifndef VRAM_POOL_PLAN_ARENA_H
#define VRAM_POOL_PLAN_ARENA_H

#include "pool/plan.h"
#include "pool/arena.h"

/* Requests in a row equal to the plan's from its next one on that put it back on track after two or
 * more that were not (plan_astray_locked). */
#define PLAN_RESYNC 8

typedef struct pool_planner {
    plan_detector det;
    pool_plan     plan;          /* the plan made last (valid while armed or active) */
    int           armed;         /* a plan waits for its first request (det.requests == plan.start_request) */
    int           active;        /* the plan is followed */
    int           given_back;    /* the idle memory outside the zone went back at the first step */
    int           first;         /* this step is the plan's first (some blocks of the step before it
                                    that live into it are best fit's) */
    int           settle_due;    /* the idle memory goes back again at the plan's settle request */
    uint32_t      pos;           /* the index in the step of the next request */
    uint32_t      place_k;       /* the planned request whose place vram__plan_alloc_locked chose last, */
    int           place_before_first;   /* while the plan waited for its first step */
    pool_chunk  **chunk;         /* [period]: the live block of planned request k (its latest), or NULL */
    size_t        live_high;     /* the most bytes in use the detector saw */
    uint64_t      steps, ends;   /* steps begun under a plan, plans ended early */
    uint64_t      refused;       /* plans dropped for a limit they did not fit under (plan_arm_locked) */
    /* slot mode (plan_slots.c) */
    uint32_t      slot_misses;   /* times slot mode was left for a block freed later than planned */
    uint64_t      slot_steps;    /* steps begun in slot mode */
    uint64_t      slot_steps_seen;   /* slot_steps at the last idle tick */
    pool_chunk   *zone;          /* in slot mode (else NULL): the record standing for the zone in the
                                    region's list */
    pool_chunk  **slot;          /* [period]: planned request k's record (NULL: unplanned); slot mode */
    pool_chunk  **sorted;        /* [planned]: scratch, the live slots by address (a leave, a query) */
    uint32_t     *by_offset;     /* [planned]: the planned requests by offset */
    pool_chunk   *reserve;       /* slot mode: records for the free chunks of the zone on leaving it */
    size_t        given_back_bytes;     /* given back when plans came into force */
    /* a program off the plan for a while (plan_astray_locked) */
    uint32_t      astray;        /* requests off the plan since it was last followed (not counting those
                                    that matched it while it was found again) */
    uint32_t      confirm;       /* the last requests in a row equal to the plan's from its next one on
                                    (PLAN_RESYNC of them put it back on track) */
    uint8_t      *evicted;       /* [period]: 1 once a block of request k outlived its place (found
                                    taken by it): best fit serves k from then on */
    size_t        evicted_bytes; /* the evicted requests' sizes together */
    /* the detector at rest (vram__plan_noted_locked) */
    int           resting;       /* not fed: p->plan.nap counts the requests down to its next look */
    int64_t       quiet;         /* requests fed since reserved memory last grew or a plan ended (a look
                                    starts below 0: it lasts PLAN_LOOK requests) */
    size_t        reserved_seen; /* the arena's reserved bytes at the last request fed */
} pool_planner;

/* Whether the planner sees this request (arena lock held, p->plan.planner set): not while its detector
 * rests and no plan waits or is followed (p->plan.nap counts down to its next look; growth of
 * reserved memory ends the rest at the next request, vram__note_reserved_locked). */
static inline int plan_sees(pool_arena *p) {
    return p->plan.nap == 0 || --p->plan.nap == 0;
}

/* Gives arena p a planner (nothing when there is no host memory for one: p plans nothing). */
void vram__plan_arena_enable(pool_arena *p);
void vram__plan_arena_destroy(pool_arena *p);

/* Before best fit (arena lock held; only when plan_sees): PLAN_SERVED when slot mode served the request
 * (*ptr set), PLAN_PLACE when the plan chose its place: *place, a free chunk cut at it, which the
 * allocation path hands out and then tells vram__plan_placed_locked (the block, or NULL when the hand-out
 * failed: the plan ends); PLAN_BEST_FIT when best fit must (the request was unplanned, or the plan just
 * ended). vram__plan_placed_locked returns 1 when the block is the plan's, 0 when the plan ended. */
enum { PLAN_BEST_FIT, PLAN_SERVED, PLAN_PLACE };
int  vram__plan_alloc_locked(pool_arena *p, size_t size, size_t rounded, void *stream, void **ptr, pool_chunk **place);
int  vram__plan_placed_locked(pool_arena *p, pool_chunk *taken, size_t rounded, void *stream);
/* After best fit served request c (arena lock held; only when plan_sees): the detector's note; may put
 * a plan in force, or rest the detector. */
void vram__plan_noted_locked(pool_arena *p, pool_chunk *c, size_t rounded, void *stream);
/* A request found no memory, even at the limit's fallbacks (arena lock held): a plan waiting or in force
 * ends, its zone's free chunks and idle granules becoming best fit's; 1 when one did (the request
 * tries again), 0 when there was none. */
int  vram__plan_give_way_locked(pool_arena *p);
/* Block c is being freed (arena lock held), `at_once`: straight to the free bins (not stream-ordered
 * nor deferred). 1 when that is done (a slot's free, at once), 0 when the caller frees c. Nothing to
 * do (the caller may skip it) for a block with plan_id, plan_k and slot all 0: one the planner did
 * not see. */
int  vram__plan_free_locked(pool_arena *p, pool_chunk *c, int at_once);
/* Slot mode (plan_slots.c), arena lock held. Enter: at a step's start, when the zone is mapped whole
 * and holds no live block but those of the step before that live into this one: 1 when it did.
 * Leave: the zone's chunks as before (its live blocks, the free chunks between them); nothing
 * without a planner or out of slot mode. Every walk of an arena's chunks (snapshot, check, the
 * out-of-memory report, trim, the live blocks, destruction) leaves first: the front door's settle
 * (arena.c); the statistics read the zone through its live slots (vram__plan_slots_view_locked),
 * or leave too where idle memory is counted from the extents. */
int  vram__plan_slots_enter_locked(pool_arena *p);
void vram__plan_slots_leave_locked(pool_arena *p);
/* Slot mode: request k of the step (planned) gets its slot: 1, or 0 when the slot is taken or the
 * pointer table has no room (leave, and the zone's chunks decide). */
int  vram__plan_slot_take_locked(pool_arena *p, uint32_t k, size_t size, void *stream, void **ptr);
/* Slot mode: the blocks the plan has freed by request k are free: 1, or 0 (one was freed late). */
int  vram__plan_slots_due_ok(const pool_arena *p, uint32_t k);
/* Slot mode: the zone as a reader sees it without leaving (arena.h's pool_zone_view: the live slots
 * sorted by address in the planner's scratch, valid until the next call on the arena); zone NULL out
 * of slot mode. */
void vram__plan_slots_view_locked(pool_arena *p, pool_zone_view *zv);
/* The idle tick: slot mode is left when no step began since the last tick (the program stopped
 * stepping), so that the zone's idle memory can go back as any. */
void vram__plan_slots_idle_locked(pool_arena *p);
/* The plan in force (or waiting for its first step) ends, as at a difference (arena lock held): the
 * arena goes to sleep (sleep.c). Nothing without a planner. */
void vram__plan_arena_end_locked(pool_arena *p);
/* The plan's figures of vram_memory_info (arena lock held): zeros without a planner. */
void vram__plan_arena_info_locked(const pool_arena *p, vram_memory_info *info);

#endif /* VRAM_POOL_PLAN_ARENA_H */
