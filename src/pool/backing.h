/*
 * backing.h: the memory behind an arena's chunks (backing.c): the budgets it draws on, its
 * regions, the mapping of growth, and giving memory back. What the hand-out path asks on every
 * call (the headroom) is here as helpers of the header (POOL_HELPER, arena.h). Pool lock held
 * (the budgets and the headroom are atomics, read at any time).
 */
#ifndef VRAM_POOL_BACKING_H
#define VRAM_POOL_BACKING_H

#include "pool/arena.h"

/* The budgets an arena draws on: its logical device's, shared with its sibling arenas (the
 * limit), and its card's. GROW_OK, or which one refused (and nothing is taken). */
grow_result vram__arena_budget_take(pool_arena *p, size_t bytes);
void        vram__arena_budget_give(pool_arena *p, size_t bytes);

/* What the limit still lets this arena take: the logical device's limit less what all its arenas
 * hold (with one arena: limit - reserved). */
POOL_HELPER size_t arena_headroom(const pool_arena *p) {
    size_t cap = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);
    size_t held = atomic_load(&p->shared->budget.reserved);
    return cap > held ? cap - held : 0;
}

/* What the cap leaves for blocks in a preallocated pool (which holds its whole limit from the
 * start): only a memory fraction below the limit makes it less than everything. */
POOL_HELPER size_t arena_headroom_live(const pool_arena *p) {
    size_t cap = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);
    return cap >= p->cfg.limit ? SIZE_MAX : cap > p->current ? cap - p->current : 0;
}

/* Takes a plain region of `bytes` from the driver (cuMemAlloc). The caller took the budget. */
vram_status vram__region_add_plain_locked(pool_arena *p, size_t bytes);
/* Reserves the address range growth places blocks in: the small zone's `small` bytes first (none
 * when 0), then `large` bytes; one free chunk tiles each. */
vram_status vram__region_add_vmm_locked(pool_arena *p, size_t small, size_t large);
/* Gives region r (already out of the arena's list) back to the driver, its chunks' records too.
 * Returns the driver's refusal: a plain region's leaves r as it was (its bytes counted: the caller
 * puts it back, or drops its records with vram__region_drop); a VMM region is gone all the same (what the
 * driver refused to give back is lost to the pool). */
vram_status vram__region_release(pool_arena *p, pool_region *r);
/* Frees region r's records (its chunks and r), nothing of the driver's. */
void        vram__region_drop(pool_region *r);

/* Books what a call of vmm.c changed: the bytes held (the budgets get back what was given back) and
 * the driver calls. */
void        vram__vmm_note_locked(pool_arena *p, const pool_vmm_change *d);
/* Gives back the plain regions with no block in them (not in a private pool in use nor during a
 * capture): VRAM_OK, or the driver's refusal (that region stays, counted). */
vram_status vram__arena_trim_plain_locked(pool_arena *p);

/* Makes sure the physical memory under the (taken, CHUNK_USED) chunk c is mapped and marks it in
 * use: maps what is missing within the limit and the card budget, moving idle extents under it and
 * then giving idle ones back first when the limit would be crossed. */
grow_result vram__vmm_back_locked(pool_arena *p, const pool_chunk *c);

/* An address range [lo, hi). */
typedef struct vmm_range {
    uint64_t lo, hi;
} vmm_range;

/* Moves idle extents of the VMM region under the unmapped granules of [lo, hi) (the plan's zone),
 * but for the `nskip` ranges of skip[] (inside it, by address, apart), and gives back the idle ones
 * left outside [lo, hi): what a plan in force no longer needs. Not in a pinned arena or during a
 * capture; waits for a solo stream first. Returns the bytes given back. */
size_t      vram__vmm_gather_idle_locked(pool_arena *p, uint64_t lo, uint64_t hi, const vmm_range *skip, size_t nskip);

/* Takes a new plain region for a block of `size`: growth without VMM, the last piece of a limit
 * that is not a whole number of granules, or a preallocated pool's memory again after a trim. */
grow_result vram__pool_grow_plain_locked(pool_arena *p, size_t size);

#endif /* VRAM_POOL_BACKING_H */
