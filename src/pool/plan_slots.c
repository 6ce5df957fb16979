/*
 * plan_slots.c: slot mode, the settled plan's requests served by a lookup (plan_arena.h).
 *
 * Once a plan has settled (its zone mapped whole, its first step over), cutting each planned block
 * out of the zone's free chunks and merging it back at its free is work the plan already did: every
 * planned request has one place. In slot mode the zone stands in the region's chunk list as one USED
 * record (`zone`, busy for the extents' counts: its memory stays mapped), and each planned request k
 * has a record of its own, slot[k], at its place, outside the list: its hand-out is the record put in
 * the pointer table and counted, its free the reverse; no split, no merge, no bins, no look at the
 * mappings.
 *
 * What keeps two live blocks apart without the chunks: the plan placed two blocks at overlapping
 * addresses only if, on the step's cycle, one is freed before the other is requested. So before
 * request j of a step, every planned block whose free the plan put before j (due_first / due_k,
 * plan.h) must be free; if one is not (the program freed it later than the plan said), slot mode is
 * left before j is served, and the zone's chunks decide as before (a late free ends the plan only
 * if its place is needed). A block freed earlier only frees its slot earlier. Slot mode starts at a
 * step's first request, when the zone's only live blocks are the step before's that live into this
 * one (each due in this step); after PLAN_SLOT_MISSES late frees the plan stays with its chunks.
 *
 * Leaving rebuilds the zone's chunks: the live slots by address, a free chunk in each gap (records
 * kept aside on entering, so that leaving needs no host memory). Invariants: in slot mode every
 * planned k has slot[k], at plan.lo + offset[k] with the planned size, USED while its block is live
 * (then chunk[k] == slot[k], and the record's `slot` is 1) and FREE otherwise; no slot is in the
 * free bins or a thread cache (vram__tc_park refuses records with `slot` set). Pool lock held throughout.
 */
#include "pool/pointer_table.h"
#include "pool/plan_arena.h"

#include <stdlib.h>
#include <string.h>

#include "pool/split_merge.h"
#include "pool/stats.h"

#define PLAN_SLOT_MISSES 8

static int by_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The planner's slot table and its scratch, and the planned requests by offset (by_offset: once a
 * plan, so that its live slots come by address without a sort: no two live ones overlap). 0, or -1
 * without host memory (nothing kept). */
static int by_offset_make(pool_planner *pl) {
    const pool_plan *plan = &pl->plan;
    size_t n = plan->planned ? plan->planned : 1;
    uint64_t *key = malloc(n * sizeof *key);
    pl->slot = calloc(plan->period, sizeof *pl->slot);
    pl->sorted = malloc(n * sizeof *pl->sorted);
    pl->by_offset = malloc(n * sizeof *pl->by_offset);
    if (key == NULL || pl->slot == NULL || pl->sorted == NULL || pl->by_offset == NULL) {
        free(key);
        free(pl->slot);
        free(pl->sorted);
        free(pl->by_offset);
        pl->slot = pl->sorted = NULL;
        pl->by_offset = NULL;
        return -1;
    }
    size_t m = 0;                                   /* (m comes to plan->planned) */
    for (uint32_t k = 0; k < plan->period; k++) {   /* (k < PLAN_MAX_STEP = 2^15; offsets below 2^48) */
        if (plan->offset[k] != PLAN_UNPLANNED) key[m++] = (uint64_t)plan->offset[k] << 16 | k;
    }
    qsort(key, m, sizeof *key, by_key);
    for (size_t i = 0; i < m; i++) pl->by_offset[i] = (uint32_t)(key[i] & 0xffff);
    free(key);
    return 0;
}

/* The live slots by address into the planner's scratch (`sorted`); their count. */
static size_t live_by_address(pool_planner *pl) {
    size_t n = 0;
    for (uint32_t i = 0; i < pl->plan.planned; i++) {
        pool_chunk *c = pl->slot[pl->by_offset[i]];
        if (c->state == CHUNK_USED) pl->sorted[n++] = c;
    }
    return n;
}

/* Whether the zone can be one record now: mapped whole, its live blocks only the step before's that
 * live into this one (at their places), none parked, pending or used on other streams. Its free
 * chunks in *nfree, its last chunk in *last. */
static int zone_ready(const pool_arena *p, size_t *nfree, size_t *nlive, pool_chunk **last) {
    const pool_planner *pl = p->plan.planner;
    const pool_plan *plan = &pl->plan;
    *nfree = *nlive = 0;
    *last = NULL;
    if (p->vmm == NULL || pool_vmm_unmapped(&p->vmm->vmm, p->plan.lo, (size_t)(p->plan.hi - p->plan.lo)) != 0) {
        return 0;
    }
    for (pool_chunk *c = p->plan.first; c != NULL && c->addr < p->plan.hi; c = c->next) {
        if (c->state == CHUNK_USED) {
            uint32_t k = c->plan_k - 1;
            if (c->plan_k == 0 || k >= plan->period || pl->chunk[k] != c || !plan->wraps[k] || c->cached ||
                c->uses != NULL || c->addr != p->plan.lo + plan->offset[k] || c->size != plan->size[k]) {
                return 0;
            }
            (*nlive)++;
        } else if (c->state == CHUNK_FREE) {
            (*nfree)++;
        } else {
            return 0;
        }
        *last = c;
    }
    return *last != NULL;
}

/* `n` records from the spares or the heap, linked through next; NULL (none taken) without memory. */
static pool_chunk *records(pool_arena *p, size_t n) {
    pool_chunk *got = NULL;
    for (size_t i = 0; i < n; i++) {
        pool_chunk *c = chunk_new_locked(p);
        if (c == NULL) {
            while (got != NULL) {
                pool_chunk *next = got->next;
                chunk_recycle_locked(p, got);
                got = next;
            }
            return NULL;
        }
        c->next = got;
        got = c;
    }
    return got;
}

static pool_chunk *pop(pool_chunk **list) {
    pool_chunk *c = *list;
    *list = c->next;
    return c;
}

/* The zone's chunks [first, last] give way to record z: their free chunks' records go to the
 * reserve, the live ones become slots (out of the list). */
static void zone_to_one(pool_arena *p, pool_chunk *first, pool_chunk *last, pool_chunk *z) {
    pool_planner *pl = p->plan.planner;
    z->addr = p->plan.lo;
    z->size = (size_t)(p->plan.hi - p->plan.lo);
    z->region = p->vmm;
    z->state = CHUNK_USED;
    z->prev = first->prev;
    z->next = last->next;
    for (pool_chunk *c = first, *next;; c = next) {
        int end = c == last;
        next = c->next;
        if (c->state == CHUNK_FREE) {
            vram__free_bins_remove(&p->plan.bins, c);
            c->next = pl->reserve;
            pl->reserve = c;
        } else {
            c->prev = c->next = NULL;     /* a live slot now: chunk[k] (tc.multi is 0: no thread */
            c->slot = 1;                  /* parks without the arena lock; when one does, it sees this) */
        }
        if (end) break;
    }
    if (z->prev != NULL) z->prev->next = z; else p->vmm->first = z;
    if (z->next != NULL) z->next->prev = z; else p->vmm->last = z;
}

int vram__plan_slots_enter_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    const pool_plan *plan = &pl->plan;
    size_t nfree, nlive;
    pool_chunk *last;
    if (pl->zone != NULL || pl->slot_misses >= PLAN_SLOT_MISSES || vram__tc_parking(p) ||
        !zone_ready(p, &nfree, &nlive, &last)) {
        return 0;
    }
    if (pl->slot == NULL && by_offset_make(pl) != 0) return 0;
    /* the zone's record, a slot for each planned request not live, and planned + 1 records in all
     * for the free chunks of a leave (at most one a gap between live blocks): the zone's own free
     * chunks' records, and more */
    size_t more = plan->planned + 1 > nfree ? plan->planned + 1 - nfree : 0;
    pool_chunk *got = records(p, 1 + (plan->planned - nlive) + more);
    if (got == NULL) return 0;
    pool_chunk *z = pop(&got);
    zone_to_one(p, p->plan.first, last, z);
    for (uint32_t k = 0; k < plan->period; k++) {
        pool_chunk *c = plan->offset[k] == PLAN_UNPLANNED ? NULL : pl->chunk[k];
        if (plan->offset[k] != PLAN_UNPLANNED && c == NULL) {
            c = pop(&got);
            c->addr = p->plan.lo + plan->offset[k];
            c->size = plan->size[k];
            c->region = p->vmm;
            c->state = CHUNK_FREE;
            c->plan_k = k + 1;
            c->next = NULL;
        }
        pl->slot[k] = c;
    }
    while (got != NULL) {
        pool_chunk *c = pop(&got);
        c->next = pl->reserve;
        pl->reserve = c;
    }
    pl->zone = p->plan.first = z;
    pool_vmm_mark(&p->vmm->vmm);
    return 1;
}

/* Puts c after *tail in region r's list (the list's first when *tail is NULL); c is the tail now. */
static void link_after(pool_region *r, pool_chunk **tail, pool_chunk *c) {
    c->prev = *tail;
    if (*tail != NULL) (*tail)->next = c; else r->first = c;
    *tail = c;
}

void vram__plan_slots_view_locked(pool_arena *p, pool_zone_view *zv) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    *zv = (pool_zone_view){0};
    if (pl == NULL || pl->zone == NULL) return;
    zv->n = live_by_address(pl);
    zv->zone = pl->zone;
    zv->live = pl->sorted;
}

void vram__plan_slots_leave_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (pl == NULL || pl->zone == NULL) return;
    const pool_plan *plan = &pl->plan;
    size_t n = live_by_address(pl);
    for (uint32_t k = 0; k < plan->period; k++) {
        pool_chunk *c = pl->slot[k];
        pl->slot[k] = NULL;
        if (c != NULL && c->state != CHUNK_USED) chunk_recycle_locked(p, c);
    }
    pool_chunk *z = pl->zone, *tail = z->prev, *after = z->next, *head = NULL;
    pool_region *r = z->region;
    uint64_t at = p->plan.lo;
    for (size_t i = 0; i <= n; i++) {
        uint64_t end = i < n ? pl->sorted[i]->addr : p->plan.hi;
        if (end > at) {                                   /* the free chunk before it */
            pool_chunk *g = pop(&pl->reserve);
            memset(g, 0, sizeof *g);
            g->addr = at;
            g->size = (size_t)(end - at);
            g->region = r;
            g->state = CHUNK_FREE;
            link_after(r, &tail, g);
            vram__free_bins_insert(&p->plan.bins, g);
            if (head == NULL) head = g;
        }
        if (i == n) break;
        link_after(r, &tail, pl->sorted[i]);
        if (head == NULL) head = tail;
        at = tail->addr + tail->size;
    }
    tail->next = after;
    if (after != NULL) after->prev = tail; else r->last = tail;
    chunk_recycle_locked(p, z);
    while (pl->reserve != NULL) chunk_recycle_locked(p, pop(&pl->reserve));
    p->plan.first = head;
    pl->zone = NULL;
    pool_vmm_mark(&r->vmm);
}

int vram__plan_slots_due_ok(const pool_arena *p, uint32_t k) {
    const pool_planner *pl = p->plan.planner;
    const pool_plan *plan = &pl->plan;
    for (uint32_t i = plan->due_first[k]; i < plan->due_first[k + 1]; i++) {
        if (pl->slot[plan->due_k[i]]->state == CHUNK_USED) return 0;
    }
    return 1;
}

int vram__plan_slot_take_locked(pool_arena *p, uint32_t k, size_t size, void *stream, void **ptr) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    pool_chunk *c = pl->slot[k];
    if (c->state != CHUNK_FREE || ptr_table_put(p, c) != 0) return 0;
    c->state = CHUNK_USED;
    c->slot = 1;
    c->stream = stream;
    c->req = size;
    c->plan_id = 0;
    note_used_locked(p, c, 1);
    pl->chunk[k] = c;
    *ptr = (void *)(uintptr_t)c->addr;
    return 1;
}

void vram__plan_slots_idle_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_planner *pl = p->plan.planner;
    if (pl == NULL) return;
    if (pl->zone != NULL && pl->slot_steps == pl->slot_steps_seen) vram__plan_slots_leave_locked(p);
    pl->slot_steps_seen = pl->slot_steps;
}
