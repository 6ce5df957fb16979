/*
 * backing.c: the memory behind one arena's chunks. Owns the arena's regions (plain ones from
 * cuMemAlloc, the VMM range growth maps into), what it draws from its budgets (the logical
 * device's limit, shared by its arenas, and the card's), the mapping of growth (map-ahead during a
 * burst, moving idle extents under a block, unmapping idle ones under the limit or to keep the
 * high-water mark, the hold_peak / hold_large policies) and giving memory back (vram_trim, idle
 * release by the low-water mark and stale extents).
 *
 * A card whose process is in the ledger with ledger slots of its own (common/ledger_member.h) has a gate:
 * every take from the card budget passes it (a group's budget, a limit set from outside, checked and
 * published under the ledger's lock) and every give is published; a refusal is GROW_CARD_LIMIT, whose
 * report (oom.c) gives the gate's sentence.
 *
 * Invariants: reserved == the bytes held from the driver, changed (vram__note_reserved_locked) after
 * mapping and before the budget goes back, so that the shared sum never exceeds the limit; the
 * budgets hold at least the arena's reserved bytes; nothing is given back or moved while the arena
 * is still (a private pool in use, a capture underway), and memory a solo stream may still touch
 * only after its fence. Everything here is under the arena lock, except vram__backing_idle_fence's wait
 * for the solo fence, made without it. Trim and the idle tick run after the front door settled the
 * arena (slot mode left, the thread caches flushed).
 */
#include <stdlib.h>

#include "common/ledger_member.h"
#include "pool/backing.h"
#include "pool/plan_arena.h"
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

/* ---- card budget ----------------------------------------------------------------------------- */

static int budget_take(vram__card_budget *b, size_t bytes) {
    if (b == NULL) return 1;
    size_t cur = atomic_load(&b->reserved), cap = atomic_load_explicit(&b->cap, memory_order_relaxed);
    do {
        if (cur > cap || bytes > cap - cur) return 0;
    } while (!atomic_compare_exchange_weak(&b->reserved, &cur, cur + bytes));
    /* a process in the ledger: its group's budget and a limit set from outside, checked and published
     * under the ledger's lock (growth only: a warm call takes nothing from the card) */
    if (b->member != NULL && !vram__ledger_member_take(b->member, b->member_card, bytes)) {
        atomic_fetch_sub(&b->reserved, bytes);
        return 0;
    }
    return 1;
}

static void budget_give(vram__card_budget *b, size_t bytes) {
    if (b == NULL) return;
    atomic_fetch_sub(&b->reserved, bytes);
    if (b->member != NULL) vram__ledger_member_give(b->member, b->member_card, bytes);
}

/* The budgets an arena draws on: its logical device's, shared with its sibling arenas (the
 * limit), and its card's. GROW_OK, or which one refused (and nothing is taken). */
grow_result vram__arena_budget_take(pool_arena *p, size_t bytes) {
    if (bytes == 0) return GROW_OK;
    if (!budget_take(&p->shared->budget, bytes)) return GROW_LIMIT;
    if (!budget_take(p->cfg.budget, bytes)) {
        budget_give(&p->shared->budget, bytes);
        return GROW_CARD_LIMIT;
    }
    return GROW_OK;
}

void vram__arena_budget_give(pool_arena *p, size_t bytes) {
    budget_give(&p->shared->budget, bytes);
    budget_give(p->cfg.budget, bytes);
}


/* ---- regions --------------------------------------------------------------------------------- */

static void region_link_locked(pool_arena *p, pool_region *r) {
    POOL_ASSERT_LOCKED(p);
    r->next = p->regions;
    p->regions = r;
    /* the pool's span takes it in before any block of it is handed out (relaxed: whoever frees a
     * block got its pointer through the program's own synchronization, after this) */
    uint64_t lo = atomic_load_explicit(&p->shared->span_lo, memory_order_relaxed);
    while (r->base < lo && !atomic_compare_exchange_weak_explicit(&p->shared->span_lo, &lo, r->base,
                                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    uint64_t hi = atomic_load_explicit(&p->shared->span_hi, memory_order_relaxed), end = r->base + r->size;
    while (end > hi && !atomic_compare_exchange_weak_explicit(&p->shared->span_hi, &hi, end, memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
}

static pool_chunk *region_append_free_locked(pool_arena *p, pool_region *r, uint64_t addr, size_t size) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *c = chunk_new_locked(p);
    if (c == NULL) return NULL;
    c->addr = addr;
    c->size = size;
    c->region = r;
    c->state = CHUNK_FREE;
    c->prev = r->last;
    if (r->last) r->last->next = c; else r->first = c;
    r->last = c;
    vram__free_bins_insert(pool_bins_of(p, c), c);
    return c;
}

/* Takes a plain region of `bytes` from the driver (cuMemAlloc). The caller took the budget. */
vram_status vram__region_add_plain_locked(pool_arena *p, size_t bytes) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    pool_region *r = calloc(1, sizeof *r);
    uint64_t base = 0;
    vram_status s = r ? be->mem_alloc(p->cfg.dev, bytes, &base)
                      : vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a region record");
    if (s != VRAM_OK) {
        free(r);
        return s;
    }
    r->kind = REGION_PLAIN;
    r->base = base;
    r->held = bytes;
    r->size = bytes & ~(VRAM_POOL_UNIT - 1);
    if (region_append_free_locked(p, r, base, r->size) == NULL) {
        be->mem_free(p->cfg.dev, base);
        free(r);
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a chunk record");
    }
    region_link_locked(p, r);
    p->num_driver_allocs++;
    p->stats.nplain++;
    vram__note_reserved_locked(p, bytes, 1);
    return VRAM_OK;
}

/* Reserves the address range growth places blocks in: the small zone's `small` bytes first (none
 * when 0), then `large` bytes; one free chunk tiles each. */
vram_status vram__region_add_vmm_locked(pool_arena *p, size_t small, size_t large) {
    POOL_ASSERT_LOCKED(p);
    pool_region *r = calloc(1, sizeof *r);
    if (r == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a region record");
    vram_status s = vram__pool_vmm_init(&r->vmm, p->cfg.backend, p->cfg.dev, p->cfg.caps.granularity, small + large,
                                  p->cfg.max_extent);
    if (s != VRAM_OK) {
        free(r);
        return s;
    }
    r->kind = REGION_VMM;
    r->base = r->vmm.base;
    r->size = small + large;
    p->vmm = r;
    p->small_end = small > 0 ? r->base + small : 0;
    if (small > 0) vram__pool_vmm_set_zone(&r->vmm, small);   /* each zone its own quick test of mapping */
    if ((small > 0 && region_append_free_locked(p, r, r->base, small) == NULL) ||
        region_append_free_locked(p, r, r->base + small, large) == NULL) {
        if (r->first != NULL) {
            vram__free_bins_remove(pool_bins_of(p, r->first), r->first);
            free(r->first);
        }
        pool_vmm_change nothing;              /* (nothing was mapped yet) */
        vram__pool_vmm_destroy(&r->vmm, &nothing);
        free(r);
        p->vmm = NULL;
        p->small_end = 0;
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a chunk record");
    }
    region_link_locked(p, r);
    return VRAM_OK;
}

/* Books what a call of vmm.c changed: the bytes held (the budget gets back what was given back)
 * and the driver calls. */
void vram__vmm_note_locked(pool_arena *p, const pool_vmm_change *d) {
    POOL_ASSERT_LOCKED(p);
    if (d->mapped > d->unmapped) vram__note_reserved_locked(p, d->mapped - d->unmapped, 1);
    if (d->mapped < d->unmapped) {
        vram__note_reserved_locked(p, d->unmapped - d->mapped, 0);
        vram__arena_budget_give(p, d->unmapped - d->mapped);
    }
    p->num_driver_allocs += d->creates;
    p->num_driver_frees += d->releases;
    p->num_driver_moves += d->moves;
    vram__stats_held_locked(p);                  /* (a move may take an extent from one zone to the other) */
}

/* Brings the extents' counts of bytes in use up to date from the VMM region's blocks (USED and
 * PENDING chunks): O(chunks), only before idle extents are looked for. */
void vram__vmm_recount_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (p->vmm == NULL || !p->vmm->vmm.stale) return;
    pool_vmm *v = &p->vmm->vmm;
    vram__pool_vmm_busy_begin(v);
    for (const pool_chunk *c = p->vmm->first; c != NULL; c = c->next) {
        if (c->state != CHUNK_FREE) vram__pool_vmm_busy_add(v, c->addr, c->size);
    }
    vram__pool_vmm_busy_end(v);
}

/* Idle mapped bytes that may be given back or moved (none in a pinned arena). */
static size_t vmm_idle_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (arena_still(p)) return 0;
    vram__vmm_recount_locked(p);
    return p->vmm ? p->vmm->vmm.idle : 0;
}

/* Gives back idle mapped memory of the VMM region, at least `want` bytes if there is that much; what
 * the driver refuses stays counted (VRAM_OK, or its refusal in *refusal when not NULL). */
static size_t vmm_unmap_idle_locked(pool_arena *p, size_t want, vram_status *refusal) {
    POOL_ASSERT_LOCKED(p);
    if (p->vmm == NULL || arena_still(p) || vram__solo_fence_locked(p) != 0) return 0;
    vram__vmm_recount_locked(p);
    pool_vmm_change d;
    size_t released = vram__pool_vmm_unmap_idle(&p->vmm->vmm, want, &d);
    vram__vmm_note_locked(p, &d);
    if (refusal != NULL && *refusal == VRAM_OK) *refusal = d.refused;
    return released;
}

size_t vram__vmm_gather_idle_locked(pool_arena *p, uint64_t lo, uint64_t hi, const vmm_range *skip, size_t nskip) {
    POOL_ASSERT_LOCKED(p);
    if (p->vmm == NULL || arena_still(p) || vram__solo_fence_locked(p) != 0) return 0;
    vram__vmm_recount_locked(p);
    pool_vmm *v = &p->vmm->vmm;
    pool_vmm_change d;
    uint64_t from = lo;
    for (size_t i = 0; i <= nskip; i++) {                  /* the gaps between the ranges skipped */
        uint64_t to = i < nskip ? skip[i].lo : hi;
        if (to > from) {
            vram__pool_vmm_move_idle(v, from, (size_t)(to - from), &d);   /* (a move puts its extent under a */
            vram__vmm_note_locked(p, &d);                                 /*  block to be: busy until a recount) */
        }
        if (i < nskip && skip[i].hi > from) from = skip[i].hi;
    }
    v->stale = 1;
    vram__vmm_recount_locked(p);
    size_t released = vram__pool_vmm_unmap_idle_outside(v, (size_t)(lo - v->base), (size_t)(hi - v->base), &d);
    vram__vmm_note_locked(p, &d);
    return released;
}

/* How much to map beyond a block that needs `need` new bytes: reserved / 16, at most map_ahead,
 * within the limit and the card's budget (taken here; the caller gives back what was not mapped).
 * Fewer, larger mappings make growth cheaper; the price is at most that much idle memory. Only
 * during a burst of growth (the previous growth at most POOL_MAP_AHEAD_BURST allocations ago): a
 * growth after a quiet stretch is most often a new peak, where memory mapped ahead stays idle. */
static size_t pool_map_ahead_locked(pool_arena *p, size_t need) {
    POOL_ASSERT_LOCKED(p);
    uint64_t since = p->num_allocs - p->last_growth;
    p->last_growth = p->num_allocs;
    if (since > POOL_MAP_AHEAD_BURST) return 0;
    size_t ahead = p->reserved / POOL_MAP_AHEAD_DIV, room = arena_headroom(p);   /* `need` is taken already */
    if (ahead > p->cfg.map_ahead) ahead = p->cfg.map_ahead;
    if (ahead > room) ahead = room;
    ahead &= ~(p->cfg.caps.granularity - 1);
    return ahead > 0 && vram__arena_budget_take(p, ahead) == GROW_OK ? ahead : 0;
}

/* Moves idle extents of the VMM region under chunk c's unmapped granules (an unmap and a map each,
 * no physical memory released or created: reserved stays); returns what c still needs mapped. */
static size_t vmm_move_idle_locked(pool_arena *p, const pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    pool_vmm *v = &c->region->vmm;
    vram__vmm_recount_locked(p);
    /* nothing idle: no wait; else a block freed on the solo stream may still be in use there */
    if (v->idle > 0 && !arena_still(p) && vram__solo_fence_locked(p) == 0) {
        pool_vmm_change d;
        vram__pool_vmm_move_idle(v, c->addr, c->size, &d);
        vram__vmm_note_locked(p, &d);               /* a failed move gives its extent back */
    }
    return pool_vmm_unmapped(v, c->addr, c->size);
}

/* The largest extent to map under a block of `size` bytes while the program loads (0: max_extent).
 * An arena of one-granule extents (plan:true) maps the blocks of at least POOL_BLOCK_EXTENT_GRANULES
 * granules in extents of block_extent bytes (what max_extent is without a plan) until the program
 * has freed 1/POOL_LOAD_FREED of the bytes it holds in blocks: a model's weights or a serving
 * engine's cache, read in or taken at start, mostly live as long as the program, so no idle granule
 * is stuck in their extents, and a 60 GiB load makes the driver calls it makes without a plan (480 x
 * 128 MiB: 480 creates, not 30,720). The load ends once (`loaded`); a reset of the statistics (`in`
 * zeroed) ends it too. Smaller blocks keep one-granule extents: a few of them are freed early after
 * all, and a granule idle in a busy extent stays held (bench/plan_cost.sh, tail of gpt2_train: 1.003
 * with 16 granules, 1.004 with 8, 1.005 with every block). */
#define POOL_LOAD_FREED 16
static size_t pool_load_extent_locked(pool_arena *p, size_t size) {
    POOL_ASSERT_LOCKED(p);
    if (p->block_extent == 0 || p->loaded) return 0;
    size_t in = p->stats.bytes[1].in + p->stats.bytes[2].in;   /* (bytes[0] is summed at queries) */
    if (in < p->current || (in - p->current) > p->current / POOL_LOAD_FREED) p->loaded = 1;
    return !p->loaded && size >= POOL_BLOCK_EXTENT_GRANULES * p->cfg.caps.granularity ? p->block_extent : 0;
}

static grow_result vmm_back_locked(pool_arena *p, const pool_chunk *c, size_t need);

/* Makes sure the physical memory under the (taken, CHUNK_USED) chunk c is mapped (backing.h). */
grow_result vram__vmm_back_locked(pool_arena *p, const pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    pool_vmm *v = &c->region->vmm;
    size_t need = pool_vmm_unmapped(v, c->addr, c->size);
    pool_vmm_mark(v);                            /* c is in use now (CHUNK_USED) */
    if (need == 0) return GROW_OK;               /* the common case: memory already mapped */
    if (!p->plan.keep || c->region != p->vmm) return vmm_back_locked(p, c, need);
    /* a plan in force: growth holds to the high-water mark (idle memory moves under c before more
     * is mapped), and past it the plan gives way (GROW_PLAN: the caller ends it and tries again), so
     * that following a plan never holds more than the arena held before. The zone's idle memory is
     * the plan's (neither moved under c nor given back) but while the program is off the plan
     * (plan.lend): then it serves blocks outside the zone first, and the zone's blocks take idle
     * memory back when the plan goes on */
    if (!p->plan.lend || c->addr >= p->plan.lo) {
        v->keep_lo = (size_t)(p->plan.lo - v->base);
        v->keep_hi = (size_t)(p->plan.hi - v->base);
    }
    grow_result r = vmm_back_locked(p, c, need);
    v->keep_lo = v->keep_hi = 0;
    return r;
}

static grow_result vmm_back_locked(pool_arena *p, const pool_chunk *c, size_t need) {
    pool_vmm *v = &c->region->vmm;
    /* hold_peak, and hold_large for a large block: rather than map beyond the high-water mark, move
     * idle extents (they lie in holes this block does not fit) under the block, then give back the
     * idle ones that do not fit its unmapped runs, so that fragmentation does not raise what the
     * pool holds; the price is driver calls whenever the holes are needed again. For large blocks
     * alone (hold_large_mb, e.g. 256: logits, activations of a whole layer; off by default) the
     * steady state of a training loop stops remapping once the mark has settled. The limit, and the
     * card's budget shared with other logical devices, move idle extents too before giving any back.
     * An arena that plans holds too while a plan waits for its first step (the blocks placed in its
     * zone take the idle memory best fit leaves) and after one ended (the zone's memory serves best
     * fit before any more is mapped). */
    int hold = p->cfg.hold_peak || (p->cfg.hold_large > 0 && c->size >= p->cfg.hold_large) || p->plan.hold ||
               p->plan.keep;
    int tight = need > arena_headroom(p);        /* the limit: cached memory must serve (a retry) */
    int moved = (hold && p->reserved + need > p->hold_mark) || tight;
    p->stats.retries += (uint64_t)tight;
    /* nothing is moved for a request that cannot fit: moving idle extents under it would break up
     * the mapped runs of free chunks that the limit's fallbacks (a mapped run) still offer */
    if (tight && need > arena_headroom(p) + vmm_idle_locked(p)) return GROW_LIMIT;
    if (moved) need = vmm_move_idle_locked(p, c);   /* (every idle extent that fits goes at once) */
    while (hold && need > 0 && p->reserved + need > p->hold_mark && vmm_idle_locked(p) > 0) {
        size_t before = p->reserved;
        vmm_unmap_idle_locked(p, p->reserved + need - p->hold_mark, NULL);
        if (p->reserved == before) break;
        need = pool_vmm_unmapped(v, c->addr, c->size);
    }
    if (p->plan.keep && need > 0 && p->reserved + need > p->hold_mark) return GROW_PLAN;
    size_t room;                                 /* (read once a round: other arenas change it) */
    while (need > (room = arena_headroom(p)) && vmm_idle_locked(p) > 0) {
        vmm_unmap_idle_locked(p, need - room, NULL);
        need = pool_vmm_unmapped(v, c->addr, c->size);
    }
    if (need > room) return GROW_LIMIT;
    if (vram__arena_budget_take(p, need) != GROW_OK) {
        p->stats.retries += (uint64_t)!tight;   /* the card's budget: the same */
        if (!moved) need = vmm_move_idle_locked(p, c);
        if (need > 0) vmm_unmap_idle_locked(p, need, NULL);
        need = pool_vmm_unmapped(v, c->addr, c->size);
        grow_result refused = vram__arena_budget_take(p, need);
        if (refused != GROW_OK) return refused;
    }
    /* a load's block gets extents of its own: nothing mapped ahead */
    size_t largest = need > 0 ? pool_load_extent_locked(p, c->size) : 0;
    size_t ahead = need > 0 && c->addr >= p->small_end && largest == 0 ? pool_map_ahead_locked(p, need) : 0;
    pool_vmm_change d;
    vram_status s = vram__pool_vmm_acquire(v, c->addr, c->size, ahead, largest, &d);
    vram__arena_budget_give(p, need + ahead - (d.mapped - d.unmapped));   /* unused ahead, or a failure */
    vram__vmm_note_locked(p, &d);
    return s == VRAM_OK ? GROW_OK : GROW_DRIVER;
}

vram_status vram__region_release(pool_arena *p, pool_region *r) {
    const vram__backend *be = p->cfg.backend;
    vram_status s = VRAM_OK;
    if (r->kind == REGION_PLAIN) {
        s = be->mem_free(p->cfg.dev, r->base);
        if (s != VRAM_OK) return s;             /* the driver still holds it: nothing changes */
        p->num_driver_frees++;
        p->stats.nplain--;
        vram__note_reserved_locked(p, r->held, 0);      /* before the budget goes back: see pool_shared */
        vram__arena_budget_give(p, r->held);
    } else {
        pool_vmm_change d;
        s = vram__pool_vmm_destroy(&r->vmm, &d);
        p->num_driver_frees += d.releases;
        vram__note_reserved_locked(p, d.unmapped, 0);   /* before the budget goes back, as above */
        vram__arena_budget_give(p, d.unmapped);
        p->vmm = NULL;
    }
    vram__region_drop(r);
    return s;
}

void vram__region_drop(pool_region *r) {
    for (pool_chunk *c = r->first; c != NULL;) {
        pool_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(r);
}

/* ---- growth (plain regions) ------------------------------------------------------------------ */

/* Gives plain regions with no block in them back, in list order, until `size`
 * bytes fit under the limit (or none is left): the limit's fallback of growth without VMM, as
 * growth with it moves or unmaps idle memory. A region whose free the driver refuses stays (its
 * bytes counted) and ends it. */
static void plain_make_room_locked(pool_arena *p, size_t size) {
    POOL_ASSERT_LOCKED(p);
    if (arena_still(p)) return;
    for (pool_region **link = &p->regions; *link != NULL && arena_headroom(p) < size;) {
        pool_region *r = *link;
        if (r->kind == REGION_PLAIN && r->first == r->last && r->first->state == CHUNK_FREE) {
            if (vram__solo_fence_locked(p) != 0) return;
            *link = r->next;
            vram__free_bins_remove(&p->bins, r->first);
            if (vram__region_release(p, r) != VRAM_OK) {
                vram__free_bins_insert(&p->bins, r->first);
                *link = r;
                return;
            }
        } else {
            link = &r->next;
        }
    }
}

/* Takes a new plain region for a block of `size`: growth without VMM, the last piece of a limit
 * that is not a whole number of granules, or a preallocated pool's memory again after a trim. With
 * growth, idle plain regions go back first when the limit leaves too little (the caller found no
 * free chunk that fits: none of theirs is referred to). */
grow_result vram__pool_grow_plain_locked(pool_arena *p, size_t size) {
    POOL_ASSERT_LOCKED(p);
    size_t headroom = arena_headroom(p), need;
    if (!p->cfg.growth) {
        if (p->regions != NULL || p->cfg.limit < VRAM_POOL_UNIT) return GROW_OFF;
        need = p->cfg.limit;             /* re-take the preallocation that a trim gave back */
    } else {
        if (headroom < size) {
            plain_make_room_locked(p, size);
            headroom = arena_headroom(p);
        }
        need = vram__round_up(size > VRAM_POOL_FALLBACK_REGION ? size : VRAM_POOL_FALLBACK_REGION,
                              VRAM_POOL_FALLBACK_REGION);
        if (need > headroom) need = headroom & ~(VRAM_POOL_UNIT - 1);
        if (need < size) return GROW_LIMIT;
    }
    grow_result refused = vram__arena_budget_take(p, need);
    if (refused != GROW_OK) return refused;
    if (vram__region_add_plain_locked(p, need) == VRAM_OK) return GROW_OK;
    vram__arena_budget_give(p, need);
    return GROW_DRIVER;
}

/* ---- giving memory back ---------------------------------------------------------------------- */

/* Releases plain regions with no block in them (their one chunk is free), while more than `keep`
 * bytes are reserved beyond live blocks. A region whose free the driver refuses stays as it was (its
 * bytes counted) and ends the trim: VRAM_OK, or the refusal. */
static vram_status trim_plain_regions_locked(pool_arena *p, size_t keep) {
    POOL_ASSERT_LOCKED(p);
    if (arena_still(p)) return VRAM_OK;
    for (pool_region **link = &p->regions; *link != NULL && arena_cached(p) > keep;) {
        pool_region *r = *link;
        if (r->kind == REGION_PLAIN && r->first == r->last && r->first->state == CHUNK_FREE) {
            if (vram__solo_fence_locked(p) != 0) return VRAM_OK;
            *link = r->next;
            vram__free_bins_remove(&p->bins, r->first);
            vram_status s = vram__region_release(p, r);
            if (s != VRAM_OK) {
                vram__free_bins_insert(&p->bins, r->first);
                *link = r;
                return s;
            }
        } else {
            link = &r->next;
        }
    }
    return VRAM_OK;
}

vram_status vram__arena_trim_plain_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    return trim_plain_regions_locked(p, 0);
}

vram_status vram__backing_trim_locked(pool_arena *p, size_t keep) {
    POOL_ASSERT_LOCKED(p);
    if (p->order.unrecorded > 0) vram__pending_record_locked(p);   /* so that they can settle (now or next time) */
    if (p->order.pending != NULL) vram__pending_reap_locked(p, 0);
    if (p->order.deferred != NULL) vram__deferred_reap_locked(p, 0);
    size_t excess = arena_cached(p);
    if (excess <= keep) return VRAM_OK;
    vram_status refusal = VRAM_OK;
    if (p->vmm != NULL) vmm_unmap_idle_locked(p, excess - keep, &refusal);
    vram_status s = trim_plain_regions_locked(p, keep);
    return refusal != VRAM_OK ? refusal : s;
}

int vram__backing_idle_fence(pool_arena *p) {
    /* One stream (solo): a block freed at once may still be used by work queued on the stream. The
     * extents given back below have been idle since before the previous tick, so the event that tick
     * recorded on the stream covers their last frees: wait for it here, without the lock, so that
     * allocations go on while the stream drains (under the lock they waited for the whole queue once
     * a period). */
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return -1;          /* no wait, nothing given back: the next tick */
    pool_lock_take(&p->lock);
    void *fence = p->solo.idle_fence;
    int fenced = !p->solo.idle_fence_failed;
    p->solo.idle_fence = NULL;
    p->solo.idle_fence_failed = 0;
    pool_lock_give(&p->lock);
    if (fence != NULL) {
        if (be->event_sync(p->cfg.dev, fence) != VRAM_OK) fenced = 0;
        be->event_destroy(p->cfg.dev, fence);
    }
    return fenced;
}

void vram__backing_idle_release_locked(pool_arena *p, int fenced) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    if (p->order.unrecorded > 0) vram__pending_record_locked(p);
    if (p->order.pending != NULL) vram__pending_reap_locked(p, 0);
    if (p->order.deferred != NULL) vram__deferred_reap_locked(p, 0);
    if (p->vmm != NULL && !p->pinned) {          /* extents idle since before the last tick (no capture) */
        pool_vmm_change d = {0};
        vram__vmm_recount_locked(p);
        if (fenced) vram__pool_vmm_unmap_stale(&p->vmm->vmm, &d);   /* else the period goes on: the next tick's
                                                                 fence is later */
        vram__vmm_note_locked(p, &d);
        if (p->solo.state == SOLO_ON && p->solo.unfenced > 0 &&
            be->event_record(p->cfg.dev, p->solo.stream, &p->solo.idle_fence) != VRAM_OK) {
            p->solo.idle_fence = NULL;
            p->solo.idle_fence_failed = 1;
        }
    }
    size_t excess = arena_cached(p), unused = p->idle_low < excess ? p->idle_low : excess;
    if (unused > 0) (void)trim_plain_regions_locked(p, excess - unused);   /* regions: by the low-water mark */
    p->idle_low = arena_cached(p);
}
