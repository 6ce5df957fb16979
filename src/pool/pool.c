/*
 * pool.c: one arena: a best-fit, coalescing allocator (the design of TensorFlow's BFC allocator,
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/pool_internal.h"

/* ---- chunk records --------------------------------------------------------------------------- */

static pool_chunk *chunk_new_locked(pool_arena *p) {
    pool_chunk *c = p->spare;
    if (c != NULL) {
        p->spare = c->next;
    } else {
        c = malloc(sizeof *c);
        if (c == NULL) return NULL;
    }
    memset(c, 0, sizeof *c);
    return c;
}

static void chunk_recycle_locked(pool_arena *p, pool_chunk *c) {
    c->next = p->spare;
    p->spare = c;
}

static void free_spares(pool_arena *p) {
    while (p->spare != NULL) {
        pool_chunk *c = p->spare;
        p->spare = c->next;
        free(c);
    }
}

/* ---- stats ----------------------------------------------------------------------------------- */

/* PyTorch's figures (pool_stats): the kind of a block, by its rounded size. */
static inline int stat_kind(size_t size) {
    return size <= VRAM_SMALL_BLOCK ? 1 : 2;
}

static inline void stat_up(pool_stat *st, size_t v) {
    st->cur += v;
    st->in += v;
    if (st->cur > st->peak) st->peak = st->cur;
}

/* A figure set to `v` (what is held changed): what it gained counts as added. */
static void stat_set(pool_stat *st, size_t v) {
    if (v > st->cur) st->in += v - st->cur;
    st->cur = v;
    if (v > st->peak) st->peak = v;
}

/* The physical memory held, by kind: the small zone's extents are small, every other extent and
 * plain region large. After every change of it (driver calls only). */
static void stats_held_locked(pool_arena *p) {
    pool_stats *st = &p->stats;
    const pool_vmm *v = p->vmm != NULL ? &p->vmm->vmm : NULL;
    size_t small = v != NULL ? v->zone_bytes[0] : 0, small_n = v != NULL ? v->zone_count[0] : 0;
    size_t large_n = (v != NULL ? v->zone_count[1] : 0) + st->nplain;
    stat_set(&st->held[0], p->reserved);
    stat_set(&st->held[1], small);
    stat_set(&st->held[2], p->reserved - small);
    stat_set(&st->segs[0], small_n + large_n);
    stat_set(&st->segs[1], small_n);
    stat_set(&st->segs[2], large_n);
}

/* The figures of all blocks that the hand-out and free paths do not keep (pool_stats): the pool's own
 * counts and the sums of the two kinds. */
static void stats_sync_all_locked(pool_arena *p) {
    pool_stats *st = &p->stats;
    pool_stat *by[] = {st->blocks, st->bytes, st->req};
    for (int i = 0; i < 3; i++) {
        by[i][0].in = by[i][1].in + by[i][2].in;
        by[i][0].cur0 = by[i][1].cur0 + by[i][2].cur0;
    }
    st->blocks[0].cur = p->used_count;
    st->bytes[0].cur = p->current;
    st->bytes[0].peak = p->peak;
}

/* Handed out and deferred blocks together, while some are deferred (see pool_stats). */
VRAM_NOINLINE static void stats_active_peaks_locked(pool_arena *p) {
    pool_stats *st = &p->stats;
    stats_sync_all_locked(p);
    for (int k = 0; k < 3; k++) {
        size_t bytes = st->bytes[k].cur + st->def_bytes[k], blocks = st->blocks[k].cur + st->def_blocks[k];
        if (bytes > st->active_peak[k]) st->active_peak[k] = bytes;
        if (blocks > st->active_blocks_peak[k]) st->active_blocks_peak[k] = blocks;
    }
}

static void note_reserved_locked(pool_arena *p, size_t delta, int grow) {
    if (grow) {
        p->reserved += delta;
        if (p->reserved > p->peak_reserved) p->peak_reserved = p->reserved;
        if (p->reserved > p->hold_mark) p->hold_mark = p->reserved;
        size_t all = atomic_fetch_add(&p->shared->reserved, delta) + delta;   /* driver calls only */
        size_t peak = atomic_load(&p->shared->peak_reserved);
        while (all > peak && !atomic_compare_exchange_weak(&p->shared->peak_reserved, &peak, all)) {
        }
    } else {
        p->reserved -= delta;
        atomic_fetch_sub(&p->shared->reserved, delta);
    }
    stats_held_locked(p);
}

/* Block c is handed out (alloc) or comes back. */
static void note_used_locked(pool_arena *p, const pool_chunk *c, int alloc) {
    pool_stats *st = &p->stats;
    size_t size = c->size;
    int k = stat_kind(size);
    if (alloc) {
        p->current += size;
        p->used_count++;
        p->num_allocs++;
        if (p->current > p->peak) p->peak = p->current;
        stat_up(&st->blocks[k], 1);           /* (all: see stats_sync_all_locked) */
        stat_up(&st->bytes[k], size);
        stat_up(&st->req[k], c->req);
        if (p->used_count > st->blocks[0].peak) st->blocks[0].peak = p->used_count;
        st->req[0].cur += c->req;
        if (st->req[0].cur > st->req[0].peak) st->req[0].peak = st->req[0].cur;
        if (p->deferred != NULL) stats_active_peaks_locked(p);
    } else {
        p->current -= size;
        p->used_count--;
        p->num_frees++;
        st->blocks[k].cur--;
        st->bytes[k].cur -= size;
        st->req[0].cur -= c->req;
        st->req[k].cur -= c->req;
    }
}

/* Deferred block c (freed, still used on other streams) starts (add) or stops waiting. */
static void note_deferred_locked(pool_arena *p, const pool_chunk *c, int add) {
    pool_stats *st = &p->stats;
    int k = stat_kind(c->size);
    size_t n = add ? 1 : (size_t)-1, bytes = add ? c->size : (size_t)0 - c->size;
    st->def_blocks[0] += n;
    st->def_blocks[k] += n;
    st->def_bytes[0] += bytes;
    st->def_bytes[k] += bytes;
}

/* ---- the pointer table (shards with their own locks; see pool_internal.h) ------------------- */

/* Both under the pool lock. Until the caches start parking (tc_multi, set under the pool lock
 * before any thread may touch a shard without it), the pool lock alone guards the shards, and
 * their own locks are not taken: one atomic less per call for a single thread. */
static int shards_shared(const pool_arena *p) {
    return atomic_load_explicit(&p->tc_multi, memory_order_relaxed);   /* stable under the pool lock */
}

/* The shard of addr, its lock taken when the shards are shared; shard_open gives it back. */
static pool_shard *shard_hold(pool_arena *p, uint64_t addr, int shared) {
    pool_shard *sh = pool_shard_of(p, addr);
    if (shared) pool_spin_lock(&sh->lock);
    return sh;
}

static void shard_open(pool_shard *sh, int shared) {
    if (shared) pool_spin_unlock(&sh->lock);
}

/* 0, or -1 without host memory for a larger table. */
static int live_put(pool_arena *p, pool_chunk *c) {
    int shared = shards_shared(p);
    pool_shard *sh = shard_hold(p, c->addr, shared);
    int r = ptr_map_insert(&sh->map, c->addr, c);
    shard_open(sh, shared);
    return r;
}

static pool_chunk *live_get(pool_arena *p, uint64_t addr) {
    int shared = shards_shared(p);
    pool_shard *sh = shard_hold(p, addr, shared);
    pool_chunk *c = ptr_map_get(&sh->map, addr);
    shard_open(sh, shared);
    return c;
}

static pool_chunk *live_take(pool_arena *p, uint64_t addr) {
    int shared = shards_shared(p);
    pool_shard *sh = shard_hold(p, addr, shared);
    pool_chunk *c = ptr_map_take(&sh->map, addr);
    shard_open(sh, shared);
    return c;
}

/* The block at addr, out of the table unless it has uses on other streams (ptr_map_take_unused). A
 * wrapper of its own rather than a flag to live_take: the flag cost the free path 7-13 instructions a
 * call (bench/instructions.sh, gpt2_train: 462-468 against 455). */
static pool_chunk *live_take_unused(pool_arena *p, uint64_t addr) {
    int shared = shards_shared(p);
    pool_shard *sh = shard_hold(p, addr, shared);
    pool_chunk *c = ptr_map_take_unused(&sh->map, addr);
    shard_open(sh, shared);
    return c;
}

typedef enum grow_result { GROW_OK, GROW_LIMIT, GROW_CARD_LIMIT, GROW_DRIVER, GROW_OFF } grow_result;

/* ---- card budget ----------------------------------------------------------------------------- */

static int budget_take(vram__card_budget *b, size_t bytes) {
    if (b == NULL) return 1;
    size_t cur = atomic_load(&b->reserved), cap = atomic_load_explicit(&b->cap, memory_order_relaxed);
    do {
        if (cur > cap || bytes > cap - cur) return 0;
    } while (!atomic_compare_exchange_weak(&b->reserved, &cur, cur + bytes));
    return 1;
}

static void budget_give(vram__card_budget *b, size_t bytes) {
    if (b != NULL) atomic_fetch_sub(&b->reserved, bytes);
}

/* The budgets an arena draws on: its logical device's, shared with its sibling arenas (the
 * limit), and its card's. GROW_OK, or which one refused (and nothing is taken). */
static grow_result arena_budget_take(pool_arena *p, size_t bytes) {
    if (bytes == 0) return GROW_OK;
    if (!budget_take(&p->shared->budget, bytes)) return GROW_LIMIT;
    if (!budget_take(p->cfg.budget, bytes)) {
        budget_give(&p->shared->budget, bytes);
        return GROW_CARD_LIMIT;
    }
    return GROW_OK;
}

static void arena_budget_give(pool_arena *p, size_t bytes) {
    budget_give(&p->shared->budget, bytes);
    budget_give(p->cfg.budget, bytes);
}

/* What the limit still lets this arena take: the logical device's limit less what all its arenas
 * hold (with one arena: limit - reserved). */
static size_t arena_headroom(const pool_arena *p) {
    size_t cap = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);
    size_t held = atomic_load(&p->shared->budget.reserved);
    return cap > held ? cap - held : 0;
}

/* What the cap leaves for blocks in a preallocated pool (which holds its whole limit from the
 * start): only a memory fraction below the limit makes it less than everything. */
static size_t arena_headroom_live(const pool_arena *p) {
    size_t cap = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);
    return cap >= p->cfg.limit ? SIZE_MAX : cap > p->current ? cap - p->current : 0;
}

/* ---- regions --------------------------------------------------------------------------------- */

static void region_link_locked(pool_arena *p, pool_region *r) {
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
    pool_chunk *c = chunk_new_locked(p);
    if (c == NULL) return NULL;
    c->addr = addr;
    c->size = size;
    c->region = r;
    c->state = CHUNK_FREE;
    c->prev = r->last;
    if (r->last) r->last->next = c; else r->first = c;
    r->last = c;
    free_bins_insert(pool_bins_of(p, c), c);
    return c;
}

/* Takes a plain region of `bytes` from the driver (cuMemAlloc). The caller took the budget. */
static vram_status region_add_plain_locked(pool_arena *p, size_t bytes) {
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
    note_reserved_locked(p, bytes, 1);
    return VRAM_OK;
}

/* Reserves the address range growth places blocks in: the small zone's `small` bytes first (none
 * when 0), then `large` bytes; one free chunk tiles each. */
static vram_status region_add_vmm_locked(pool_arena *p, size_t small, size_t large) {
    pool_region *r = calloc(1, sizeof *r);
    if (r == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a region record");
    vram_status s = pool_vmm_init(&r->vmm, p->cfg.backend, p->cfg.dev, p->cfg.caps.granularity, small + large,
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
    if (small > 0) pool_vmm_set_zone(&r->vmm, small);   /* each zone its own quick test of mapping */
    if ((small > 0 && region_append_free_locked(p, r, r->base, small) == NULL) ||
        region_append_free_locked(p, r, r->base + small, large) == NULL) {
        if (r->first != NULL) {
            free_bins_remove(pool_bins_of(p, r->first), r->first);
            free(r->first);
        }
        pool_vmm_destroy(&r->vmm);
        free(r);
        p->vmm = NULL;
        p->small_end = 0;
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a chunk record");
    }
    region_link_locked(p, r);
    return VRAM_OK;
}

/* Books a change of a VMM region's mapped bytes (driver calls counted from its counters). */
static void vmm_note_locked(pool_arena *p, const pool_vmm *v, size_t mapped_before, uint64_t creates,
                            uint64_t releases) {
    if (v->mapped > mapped_before) note_reserved_locked(p, v->mapped - mapped_before, 1);
    if (v->mapped < mapped_before) {
        note_reserved_locked(p, mapped_before - v->mapped, 0);
        arena_budget_give(p, mapped_before - v->mapped);
    }
    p->num_driver_allocs += v->creates - creates;
    p->num_driver_frees += v->releases - releases;
    stats_held_locked(p);                  /* (a move may take an extent from one zone to the other) */
}

/* Brings the extents' counts of bytes in use up to date from the VMM region's blocks (USED and
 * PENDING chunks): O(chunks), only before idle extents are looked for. */
void vmm_recount_locked(pool_arena *p) {
    if (p->vmm == NULL || !p->vmm->vmm.stale) return;
    pool_vmm *v = &p->vmm->vmm;
    pool_vmm_busy_begin(v);
    for (const pool_chunk *c = p->vmm->first; c != NULL; c = c->next) {
        if (c->state != CHUNK_FREE) pool_vmm_busy_add(v, c->addr, c->size);
    }
    pool_vmm_busy_end(v);
}

/* ---- captures ------------------------------------------------------------------------------ *
 *
 * While a stream of the device is captured into a CUDA graph, the work queued on it is recorded,
 * not run: an event recorded there is a node of the graph, querying or waiting for it invalidates
 * the capture, and giving memory back (unmapping, freeing) is what a capture forbids. So while a
 * capture is underway (vram_capture_begin .. vram_capture_end, counted in the shared state) no
 * arena records, queries or waits for an event, and none gives memory back or moves it, as
 * PyTorch's allocator defers its events until no capture is underway: a stream-ordered free is
 * reused by its own stream at once, by other streams only once the capture has ended and its
 * event (recorded then) has completed; a block used on several streams waits the same way. */
static inline int capture_underway(const pool_arena *p) {
    return p->shared != NULL && atomic_load_explicit(&p->shared->captures, memory_order_acquire) > 0;
}

/* Whether the arena's memory must stay where it is: a private pool in use, or a capture underway. */
static inline int arena_still(const pool_arena *p) {
    return p->pinned || capture_underway(p);
}

/* Idle mapped bytes that may be given back or moved (none in a pinned arena). */
static size_t vmm_idle_locked(pool_arena *p) {
    if (arena_still(p)) return 0;
    vmm_recount_locked(p);
    return p->vmm ? p->vmm->vmm.idle : 0;
}

/* Gives back idle mapped memory of the VMM region, at least `want` bytes if there is that much. */
static int solo_fence_locked(pool_arena *p);

static size_t vmm_unmap_idle_locked(pool_arena *p, size_t want) {
    if (p->vmm == NULL || arena_still(p) || solo_fence_locked(p) != 0) return 0;
    vmm_recount_locked(p);
    pool_vmm *v = &p->vmm->vmm;
    size_t before = v->mapped;
    uint64_t c = v->creates, r = v->releases;
    size_t released = pool_vmm_unmap_idle(v, want);
    vmm_note_locked(p, v, before, c, r);
    return released;
}


/* How much to map beyond a block that needs `need` new bytes: reserved / 16, at most map_ahead,
 * within the limit and the card's budget (taken here; the caller gives back what was not mapped).
 * Fewer, larger mappings make growth cheaper; the price is at most that much idle memory. Only
 * during a burst of growth (the previous growth at most POOL_MAP_AHEAD_BURST allocations ago): a
 * growth after a quiet stretch is most often a new peak, where memory mapped ahead stays idle. */
static size_t pool_map_ahead_locked(pool_arena *p, size_t need) {
    uint64_t since = p->num_allocs - p->last_growth;
    p->last_growth = p->num_allocs;
    if (since > POOL_MAP_AHEAD_BURST) return 0;
    size_t ahead = p->reserved / POOL_MAP_AHEAD_DIV, room = arena_headroom(p);   /* `need` is taken already */
    if (ahead > p->cfg.map_ahead) ahead = p->cfg.map_ahead;
    if (ahead > room) ahead = room;
    ahead &= ~(p->cfg.caps.granularity - 1);
    return ahead > 0 && arena_budget_take(p, ahead) == GROW_OK ? ahead : 0;
}

/* Moves idle extents of the VMM region under chunk c's unmapped granules (an unmap and a map each,
 * no physical memory released or created: reserved stays); returns what c still needs mapped. */
static size_t vmm_move_idle_locked(pool_arena *p, const pool_chunk *c) {
    pool_vmm *v = &c->region->vmm;
    vmm_recount_locked(p);
    /* nothing idle: no wait; else a block freed on the solo stream may still be in use there */
    if (v->idle > 0 && !arena_still(p) && solo_fence_locked(p) == 0) {
        size_t before = v->mapped;
        uint64_t creates = v->creates, releases = v->releases, moves = v->moves;
        pool_vmm_move_idle(v, c->addr, c->size);
        vmm_note_locked(p, v, before, creates, releases);   /* a failed move gives its extent back */
        p->num_driver_moves += v->moves - moves;
    }
    return pool_vmm_unmapped(v, c->addr, c->size);
}

/* Makes sure the physical memory under the (taken, CHUNK_USED) chunk c is mapped and marks it in
 * use: maps what is missing within the limit and the card budget, moving idle extents under it and
 * then giving idle ones back first when the limit would be crossed. */
static grow_result vmm_back_locked(pool_arena *p, const pool_chunk *c) {
    pool_vmm *v = &c->region->vmm;
    size_t need = pool_vmm_unmapped(v, c->addr, c->size);
    pool_vmm_mark(v);                            /* c is in use now (CHUNK_USED) */
    if (need == 0) return GROW_OK;               /* the common case: memory already mapped */
    /* hold_peak, and hold_large for a large block: rather than map beyond the high-water mark, move
     * idle extents (they lie in holes this block does not fit) under the block, then give back the
     * idle ones that do not fit its unmapped runs, so that fragmentation does not raise what the
     * pool holds; the price is driver calls whenever the holes are needed again. For large blocks
     * alone (hold_large_mb, e.g. 256: logits, activations of a whole layer; off by default) the
     * steady state of a training loop stops remapping once the mark has settled. The limit, and the
     * card's budget shared with other logical devices, move idle extents too before giving any back. */
    int hold = p->cfg.hold_peak || (p->cfg.hold_large > 0 && c->size >= p->cfg.hold_large);
    int tight = need > arena_headroom(p);        /* the limit: cached memory must serve (a retry) */
    int moved = (hold && p->reserved + need > p->hold_mark) || tight;
    p->stats.retries += (uint64_t)tight;
    if (moved) need = vmm_move_idle_locked(p, c);   /* (every idle extent that fits goes at once) */
    while (hold && need > 0 && p->reserved + need > p->hold_mark && vmm_idle_locked(p) > 0) {
        size_t before = p->reserved;
        vmm_unmap_idle_locked(p, p->reserved + need - p->hold_mark);
        if (p->reserved == before) break;
        need = pool_vmm_unmapped(v, c->addr, c->size);
    }
    size_t room;                                 /* (read once a round: other arenas change it) */
    while (need > (room = arena_headroom(p)) && vmm_idle_locked(p) > 0) {
        vmm_unmap_idle_locked(p, need - room);
        need = pool_vmm_unmapped(v, c->addr, c->size);
    }
    if (need > room) return GROW_LIMIT;
    if (arena_budget_take(p, need) != GROW_OK) {
        p->stats.retries += (uint64_t)!tight;   /* the card's budget: the same */
        if (!moved) need = vmm_move_idle_locked(p, c);
        if (need > 0) vmm_unmap_idle_locked(p, need);
        need = pool_vmm_unmapped(v, c->addr, c->size);
        grow_result refused = arena_budget_take(p, need);
        if (refused != GROW_OK) return refused;
    }
    size_t ahead = need > 0 && c->addr >= p->small_end ? pool_map_ahead_locked(p, need) : 0;
    size_t before = v->mapped;
    uint64_t creates = v->creates, releases = v->releases;
    vram_status s = pool_vmm_acquire(v, c->addr, c->size, ahead);
    arena_budget_give(p, need + ahead - (v->mapped - before));   /* unused ahead, or a failure */
    vmm_note_locked(p, v, before, creates, releases);
    return s == VRAM_OK ? GROW_OK : GROW_DRIVER;
}

static void region_release(pool_arena *p, pool_region *r) {
    const vram__backend *be = p->cfg.backend;
    if (r->kind == REGION_PLAIN) {
        be->mem_free(p->cfg.dev, r->base);
        p->num_driver_frees++;
        p->stats.nplain--;
        note_reserved_locked(p, r->held, 0);      /* before the budget goes back: see pool_shared */
        arena_budget_give(p, r->held);
    } else {
        size_t mapped = r->vmm.mapped;
        p->num_driver_frees += r->vmm.mapped ? (uint64_t)(r->vmm.creates - r->vmm.releases) : 0;
        pool_vmm_destroy(&r->vmm);
        note_reserved_locked(p, mapped, 0);
        arena_budget_give(p, mapped);
        p->vmm = NULL;
    }
    for (pool_chunk *c = r->first; c != NULL;) {
        pool_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(r);
}

/* ---- pending (stream-ordered) frees ---------------------------------------------------------- */

static void event_release(pool_arena *p, pool_event *e) {
    if (e != NULL && --e->refs == 0) {
        p->cfg.backend->event_destroy(p->cfg.dev, e->event);
        free(e);
    }
}

static void pending_unlink_locked(pool_arena *p, pool_chunk *c) {
    if (c->pend_prev) c->pend_prev->pend_next = c->pend_next; else p->pending = c->pend_next;
    if (c->pend_next) c->pend_next->pend_prev = c->pend_prev; else p->pending_tail = c->pend_prev;
    c->pend_prev = c->pend_next = NULL;
    p->pending_count--;
    if (c->event == NULL) p->unrecorded--;
}

static void pending_link_locked(pool_arena *p, pool_chunk *c) {
    c->pend_prev = NULL;
    c->pend_next = p->pending;
    if (p->pending) p->pending->pend_prev = c; else p->pending_tail = c;
    p->pending = c;
    p->pending_count++;
    if (c->event == NULL) p->unrecorded++;
}

static void chunk_make_free_locked(pool_arena *p, pool_chunk *c, int was_busy);

/* Moves a PENDING chunk whose event completed into the free bins. */
static void pending_settle_locked(pool_arena *p, pool_chunk *c) {
    pending_unlink_locked(p, c);
    event_release(p, c->event);
    c->event = NULL;
    c->stream = NULL;
    chunk_make_free_locked(p, c, 1);
}

/* Settles every pending free whose event has completed; with `wait`, waits for all of them.
 * Without waiting, the list is walked from the oldest free, and once a stream's event is found
 * not completed, that stream's newer frees are not asked about (a stream completes its work in
 * order): a call costs about one event query per stream, not one per pending free. */
#define PENDING_STREAMS_TRACKED 16
#define PENDING_RECORD_BATCH 32     /* unrecorded frees that make the pool record their events */

/* Frees whose caller promised a long-lived stream (vram__free_async_owned_stream) carry no event
 * yet: their stream may reuse them at once without one. Here one event per stream is recorded for
 * all of them at once (it comes after every use of their blocks on the stream, so it is as good
 * as one recorded at each free), so that other streams and plain allocations can have them once it
 * completes. A stream whose event cannot be recorded keeps its frees unrecorded until the next try. */
static void pending_record_locked(pool_arena *p) {
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;               /* recorded once the capture has ended */
    void *stream[PENDING_STREAMS_TRACKED];
    pool_event *event[PENDING_STREAMS_TRACKED];
    int nstreams = 0;
    for (pool_chunk *c = p->pending; c != NULL && p->unrecorded > 0; c = c->pend_next) {
        if (c->event != NULL) continue;
        int k = 0;
        while (k < nstreams && stream[k] != c->stream) k++;
        if (k == nstreams) {
            if (nstreams == PENDING_STREAMS_TRACKED) continue;      /* the next call records it */
            pool_event *e = malloc(sizeof *e);
            if (e != NULL && be->event_record(p->cfg.dev, c->stream, &e->event) != VRAM_OK) {
                free(e);
                e = NULL;
            }
            if (e != NULL) e->refs = 0;
            stream[nstreams] = c->stream;
            event[nstreams++] = e;
        }
        if (event[k] == NULL) continue;
        c->event = event[k];
        c->event->refs++;
        p->unrecorded--;
    }
}


static void pending_reap_locked(pool_arena *p, int wait) {
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;
    if (p->unrecorded > 0 && (wait || p->unrecorded >= PENDING_RECORD_BATCH)) pending_record_locked(p);
    while (wait && p->unrecorded > 0) {   /* a call records PENDING_STREAMS_TRACKED streams at most */
        size_t before = p->unrecorded;
        pending_record_locked(p);
        if (p->unrecorded == before) break;   /* a stream whose event cannot be recorded */
    }
    void *blocked[PENDING_STREAMS_TRACKED];
    int nblocked = 0;
    for (pool_chunk *c = p->pending_tail; c != NULL;) {
        pool_chunk *older_first_next = c->pend_prev;
        int done = 0, skip = c->event == NULL;
        for (int i = 0; !wait && i < nblocked && !skip; i++) skip = blocked[i] == c->stream;
        if (!skip) {
            if (be->event_query(p->cfg.dev, c->event->event, &done) != VRAM_OK) done = 0;
            if (!done && wait && be->event_sync(p->cfg.dev, c->event->event) == VRAM_OK) done = 1;
            if (!done && nblocked < PENDING_STREAMS_TRACKED) blocked[nblocked++] = c->stream;
        }
        if (done) pending_settle_locked(p, c);
        c = older_first_next;
    }
}

/* Whether the PENDING chunk n may take in its unlinked neighbour c, just freed without an event on
 * the same stream: both become free for that stream at once and get one event when recorded.
 * `edge` is the address between them: never the end of the small zone. */
static int pending_joins(const pool_arena *p, const pool_chunk *n, const pool_chunk *c, uint64_t edge) {
    return n != NULL && n->state == CHUNK_PENDING && n->event == NULL && c->event == NULL &&
           n->stream == c->stream && edge != p->small_end;
}

static void chunk_unlink_locked(pool_arena *p, pool_chunk *c);

/* c (PENDING, not linked yet) merged with its pending neighbours of the same stream, so that the
 * stream can reuse their memory whole, as PyTorch's allocator can; returns the chunk to link. */
static pool_chunk *pending_merge_locked(pool_arena *p, pool_chunk *c) {
    pool_chunk *next = c->next, *prev = c->prev;
    if (next != NULL && pending_joins(p, next, c, next->addr)) {
        pending_unlink_locked(p, next);
        c->size += next->size;
        chunk_unlink_locked(p, next);
    }
    if (pending_joins(p, prev, c, c->addr)) {
        pending_unlink_locked(p, prev);
        prev->size += c->size;
        chunk_unlink_locked(p, c);
        c = prev;
    }
    return c;
}

/* Best fit among PENDING chunks freed on `stream` (which that stream may reuse at once). */
static pool_chunk *pending_best_fit_locked(pool_arena *p, void *stream, size_t size) {
    pool_chunk *best = NULL;
    for (pool_chunk *c = p->pending; c != NULL; c = c->pend_next) {
        if (c->stream == stream && c->size >= size && (best == NULL || c->size < best->size)) best = c;
    }
    return best;
}

/* ---- blocks used on other streams (vram_record_stream) ---------------------------------------- *
 *
 * A block is stream-ordered on the stream it was allocated on (or not at all, from vram_malloc).
 * When the program also uses it on another stream (PyTorch's tensor.record_stream: a NCCL stream,
 * a copy stream), its memory may be handed out again only once that stream's work queued before
 * the free has completed. Such a block keeps the streams in c->uses; its free records an event on
 * each of them (and on the free's own stream, for a stream-ordered free), takes the block out of
 * the pointer table and the counts, and leaves it USED in the deferred list, until every event
 * completed: then it goes to the free bins for everyone. Nothing waits for those streams but an
 * allocation that would otherwise fail, as in PyTorch's allocator; the list is looked at (without
 * waiting) before each search, one pointer test when it is empty. */

static int pool_owns_locked(const pool_arena *p, uint64_t addr);

/* c (live) is also used on `stream`. */
static vram_status uses_add_locked(pool_chunk *c, void *stream) {
    pool_uses *u = c->uses;
    for (int i = 0; u != NULL && i < u->n; i++) {      /* (its own stream too: it may be freed on another) */
        if (u->use[i].stream == stream) return VRAM_OK;
    }
    if (u == NULL || u->n + 1 >= u->cap) {             /* room for it, and for the free's stream */
        int cap = u != NULL ? u->cap * 2 : 4;
        pool_uses *g = realloc(u, sizeof *g + (size_t)cap * sizeof g->use[0]);
        if (g == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a block's streams");
        if (u == NULL) memset(g, 0, sizeof *g);
        g->cap = cap;
        c->uses = u = g;
    }
    u->use[u->n++].stream = stream;
    return VRAM_OK;
}

/* Whether block c is used on a stream other than `stream` (a stream-ordered free's own, whose
 * order covers a use there). */
static int uses_beyond(const pool_uses *u, void *stream) {
    for (int i = 0; i < u->n; i++) {
        if (u->use[i].stream != stream) return 1;
    }
    return 0;
}

/* The program frees c, which has uses: on `stream` when `async` (an event there, unless that stream
 * is a use already); `asked`: the free call the program made (for the message). c is still in the
 * pointer table, and leaves it only once every event is recorded: on failure nothing changed, c is
 * live as before. Gives the arena lock back: out of line and called last, so that the common free
 * does not pay for this path. */
VRAM_NOINLINE static vram_status free_deferred_unlock(pool_arena *p, pool_chunk *c, int async, void *stream,
                                                      int asked) {
    const vram__backend *be = p->cfg.backend;
    pool_uses *u = c->uses;
    int n = u->n;
    int listed = 0;
    for (int i = 0; i < n; i++) listed |= u->use[i].stream == stream;
    if (async && !listed) u->use[n++].stream = stream;   /* (cap > u->n: there is room) */
    int later = capture_underway(p);               /* its events are recorded after the capture */
    for (int i = 0; i < n && !later; i++) {
        vram_status s = be->event_record(p->cfg.dev, u->use[i].stream, &u->use[i].event);
        if (s != VRAM_OK) {
            while (i-- > 0) be->event_destroy(p->cfg.dev, u->use[i].event);
            pool_lock_give(&p->lock);
            return vram__fail_wrap(s, "%s(%p): an event on a stream the block is used on",
                                   vram__pool_free_name(asked), (void *)(uintptr_t)c->addr);
        }
    }
    live_take(p, c->addr);
    u->nevents = n;
    u->done = 0;
    u->unrecorded = later;
    u->next = NULL;                                    /* last in the list: oldest free first */
    if (p->deferred_tail != NULL) p->deferred_tail->uses->next = c; else p->deferred = c;
    p->deferred_tail = c;
    p->deferred_count++;
    note_used_locked(p, c, 0);
    note_deferred_locked(p, c, 1);
    pool_lock_give(&p->lock);
    return VRAM_OK;
}

/* The events of a block freed while a capture was underway, recorded now on each stream it was
 * used on; -1 (none kept) when one cannot be recorded: the next reap tries again. */
static int deferred_record_locked(pool_arena *p, pool_uses *u) {
    const vram__backend *be = p->cfg.backend;
    for (int i = 0; i < u->nevents; i++) {
        if (be->event_record(p->cfg.dev, u->use[i].stream, &u->use[i].event) != VRAM_OK) {
            while (i-- > 0) be->event_destroy(p->cfg.dev, u->use[i].event);
            return -1;
        }
    }
    u->unrecorded = 0;
    return 0;
}

/* Gives the deferred blocks whose events have all completed to the free bins; with `wait`, waits
 * for them (a block whose event cannot be waited for stays). Without waiting, the list is walked
 * from the oldest free, and once a stream's event is found not completed, no later event on that
 * stream is asked about (a stream completes its work in order): about one query per stream a
 * call, however many blocks wait, as pending_reap_locked does. */
VRAM_NOINLINE static void deferred_reap_locked(pool_arena *p, int wait) {
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;
    void *blocked[PENDING_STREAMS_TRACKED];
    int nblocked = 0;
    pool_chunk *prev = NULL;
    for (pool_chunk *c = p->deferred; c != NULL;) {
        pool_uses *u = c->uses;
        pool_chunk *next = u->next;
        if (u->unrecorded && deferred_record_locked(p, u) != 0) {   /* freed during a capture */
            prev = c;
            c = next;
            continue;
        }
        while (u->done < u->nevents) {
            void *stream = u->use[u->done].stream;
            int done = 0, skip = 0;
            for (int k = 0; !wait && k < nblocked && !skip; k++) skip = blocked[k] == stream;
            if (skip) break;
            if (be->event_query(p->cfg.dev, u->use[u->done].event, &done) != VRAM_OK) done = 0;
            if (!done && wait && be->event_sync(p->cfg.dev, u->use[u->done].event) == VRAM_OK) done = 1;
            if (!done) {
                if (nblocked < PENDING_STREAMS_TRACKED) blocked[nblocked++] = stream;
                break;
            }
            be->event_destroy(p->cfg.dev, u->use[u->done++].event);
        }
        if (u->done < u->nevents) {
            prev = c;
            c = next;
            continue;
        }
        if (prev != NULL) prev->uses->next = next; else p->deferred = next;
        if (p->deferred_tail == c) p->deferred_tail = prev;
        p->deferred_count--;
        note_deferred_locked(p, c, 0);
        free(u);
        c->uses = NULL;
        chunk_make_free_locked(p, c, 1);
        c = next;
    }
}

vram_status arena_record_stream(pool_arena *p, void *ptr, void *stream, int *owned) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    *owned = 1;
    pool_lock_take(&p->lock);
    pool_chunk *c = live_get(p, addr);
    vram_status s = c != NULL ? uses_add_locked(c, stream) : VRAM_ERR_INVALID_POINTER;
    if (c == NULL) {
        *owned = pool_owns_locked(p, addr);
        s = vram__fail(s, "vram_record_stream(%p): not a live block of %s (freed, or not the start of a block "
                       "vram handed out)", ptr, p->cfg.name);
    }
    pool_lock_give(&p->lock);
    return s;
}

/* ---- one stream ----------------------------------------------------------------------------- *
 *
 * PyTorch runs most programs on one stream, and its own allocator hands a block freed on a stream
 * back to that stream at once, merged with its free neighbours. So does an arena whose
 * stream-ordered requests have all come on one stream S ("solo"): an owned-stream free on S goes
 * straight to the free bins, since everything that can take it from there is ordered after the
 * free on S. Three things are not, and each waits for S first (one event, recorded and waited
 * for, only if a block was freed that way since the last wait): giving memory back to the driver
 * (trim, idle release, unmapping under the limit, destruction), which S's queued work may still
 * touch; and the first request that is plain or on another stream, after which the arena is no
 * longer solo and frees go through events as before (SOLO_OFF, for good). */
enum { SOLO_NONE, SOLO_ON, SOLO_OFF };

/* Waits until S has done everything queued before now; 0, or -1 when the driver refused. */
static int solo_fence_locked(pool_arena *p) {
    if (p->solo != SOLO_ON || p->solo_unfenced == 0) return 0;
    if (capture_underway(p)) return -1;            /* no wait while a capture is underway */
    const vram__backend *be = p->cfg.backend;
    void *ev = NULL;
    if (be->event_record(p->cfg.dev, p->solo_stream, &ev) != VRAM_OK) return -1;
    vram_status s = be->event_sync(p->cfg.dev, ev);
    be->event_destroy(p->cfg.dev, ev);
    if (s != VRAM_OK) return -1;
    p->solo_unfenced = 0;
    return 0;
}

/* A request (async: stream-ordered, on `stream`) is about to be served. */
static void solo_note_request_locked(pool_arena *p, int async, void *stream) {
    if (p->solo == SOLO_NONE && async) {
        p->solo = SOLO_ON;
        p->solo_stream = stream;
    } else if (p->solo == SOLO_ON && (!async || stream != p->solo_stream)) {
        (void)solo_fence_locked(p);        /* a driver that cannot wait has failed the stream anyway */
        p->solo = SOLO_OFF;
    }
}

/* ---- chunk split and merge ------------------------------------------------------------------- */

static void chunk_unlink_locked(pool_arena *p, pool_chunk *c) {
    pool_region *r = c->region;
    if (c->prev) c->prev->next = c->next; else r->first = c->next;
    if (c->next) c->next->prev = c->prev; else r->last = c->prev;
    chunk_recycle_locked(p, c);
}

/* Puts c into the free bins, merged with free neighbours. `was_busy`: c was USED or PENDING, so
 * its bytes stop counting as in use in the VMM region. A free neighbour grows over c (the one
 * before it first) and keeps its record and, while its size class stays, its place in the bins; c's
 * record goes back to the spares. */
static void chunk_make_free_locked(pool_arena *p, pool_chunk *c, int was_busy) {
    if (was_busy && c->region->kind == REGION_VMM) pool_vmm_release(&c->region->vmm, c->addr, c->size);
    c->state = CHUNK_FREE;
    pool_chunk *prev = c->prev, *next = c->next;
    free_bins *bins = pool_bins_of(p, c);          /* the zones never merge: same bins throughout */
    int join_next = next != NULL && next->state == CHUNK_FREE && next->addr != p->small_end;
    int join_prev = prev != NULL && prev->state == CHUNK_FREE && c->addr != p->small_end;
    if (join_prev) {
        size_t size = prev->size + c->size;
        if (join_next) {
            free_bins_remove(bins, next);
            size += next->size;
            chunk_unlink_locked(p, next);
        }
        chunk_unlink_locked(p, c);
        free_bins_resize(bins, prev, size);
    } else if (join_next) {
        size_t size = next->size + c->size;
        next->addr = c->addr;
        chunk_unlink_locked(p, c);
        free_bins_resize(bins, next, size);
    } else {
        free_bins_insert(bins, c);
    }
}

void pool_release_used_locked(pool_arena *p, pool_chunk *c) {
    note_used_locked(p, c, 0);
    chunk_make_free_locked(p, c, 1);
}

/* Cuts c (taken out of the tree or the pending list) to `size`; the rest keeps c's state.
 * Returns 0, or -1 when no record for the rest could be had (c is then used whole). */
static int chunk_split_locked(pool_arena *p, pool_chunk *c, size_t size) {
    if (c->size - size < VRAM_POOL_UNIT) return 0;
    pool_chunk *rest = chunk_new_locked(p);
    if (rest == NULL) return -1;
    rest->addr = c->addr + size;
    rest->size = c->size - size;
    rest->region = c->region;
    rest->prev = c;
    rest->next = c->next;
    if (c->next) c->next->prev = rest; else c->region->last = rest;
    c->next = rest;
    c->size = size;
    if (c->state == CHUNK_PENDING) {
        rest->state = CHUNK_PENDING;
        rest->stream = c->stream;
        rest->event = c->event;
        if (rest->event != NULL) rest->event->refs++;
        pending_link_locked(p, rest);
    } else {
        rest->state = CHUNK_FREE;
        free_bins_insert(pool_bins_of(p, rest), rest);
    }
    return 0;
}

/* ---- growth (plain regions) ------------------------------------------------------------------ */

/* Takes a new plain region for a block of `size`: growth without VMM, the last piece of a limit
 * that is not a whole number of granules, or a preallocated pool's memory again after a trim. */
static grow_result pool_grow_plain_locked(pool_arena *p, size_t size) {
    size_t headroom = arena_headroom(p), need;
    if (!p->cfg.growth) {
        if (p->regions != NULL || p->cfg.limit < VRAM_POOL_UNIT) return GROW_OFF;
        need = p->cfg.limit;             /* re-take the preallocation that a trim gave back */
    } else {
        need = vram__round_up(size > VRAM_POOL_FALLBACK_REGION ? size : VRAM_POOL_FALLBACK_REGION,
                              VRAM_POOL_FALLBACK_REGION);
        if (need > headroom) need = headroom & ~(VRAM_POOL_UNIT - 1);
        if (need < size) return GROW_LIMIT;
    }
    grow_result refused = arena_budget_take(p, need);
    if (refused != GROW_OK) return refused;
    if (region_add_plain_locked(p, need) == VRAM_OK) return GROW_OK;
    arena_budget_give(p, need);
    return GROW_DRIVER;
}

/* ---- out-of-memory report -------------------------------------------------------------------- */

/* The largest block a request could get now: the largest free chunk, and in a VMM region no more
 * than the limit leaves for new mappings. */
/* Largest free block within memory held from the driver: in the VMM region, the longest mapped
 * run inside a free chunk (classes are visited largest first, and the walk stops once no class can
 * beat the best run found). */
static int largest_mapped_visit(pool_chunk *c, void *ctx, size_t *floor) {
    size_t *best = ctx;
    if (c->size <= *best) return 0;
    size_t run = c->region->kind == REGION_VMM ? pool_vmm_mapped_run(&c->region->vmm, c->addr, c->size, NULL)
                                               : c->size;
    if (run > *best) *best = *floor = run;
    return 0;
}

static size_t pool_largest_free_locked(const pool_arena *p) {
    if (p->vmm == NULL) {
        pool_chunk *largest = free_bins_largest(&p->bins);
        return largest ? largest->size : 0;
    }
    size_t best = 0;
    free_bins_descending(&p->bins, largest_mapped_visit, &best, 0);
    free_bins_descending(&p->sbins, largest_mapped_visit, &best, best);
    return best;
}

/* The out-of-memory error: this arena's figures, or with `all` those of every arena of the
 * logical device (summed by arenas.c). */
static vram_status pool_oom_report(const pool_arena *p, size_t size, size_t rounded, grow_result why,
                                   const arena_figures *all) {
    char driver_msg[1024];
    snprintf(driver_msg, sizeof driver_msg, "%s", vram_last_error());
    size_t current = all ? all->current : p->current, reserved = all ? all->reserved : p->reserved;
    size_t largest_free = all ? all->largest_free : pool_largest_free_locked(p);
    size_t limit = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);   /* (a fraction's) */
    if (limit > p->cfg.limit) limit = p->cfg.limit;
    double fraction = atomic_load(&p->shared->fraction);
    size_t growable = p->cfg.growth && reserved < limit ? limit - reserved : 0;
    size_t free_bytes = reserved - current;
    char cause[1536];
    if (why == GROW_DRIVER) {
        size_t card_free = 0, card_total = 0, ours = p->cfg.budget ? atomic_load(&p->cfg.budget->reserved) : reserved;
        char others[160] = "";
        if (p->cfg.backend->mem_info(p->cfg.dev, &card_free, &card_total) == VRAM_OK) {
            size_t other = card_total - card_free > ours ? card_total - card_free - ours : 0;
            snprintf(others, sizeof others, "; the card has %zu of %zu bytes free and other processes "
                     "(or other allocators in this one) hold about %zu bytes", card_free, card_total, other);
        }
        snprintf(cause, sizeof cause, "the card itself is full: the driver refused more memory (%s)%s",
                 driver_msg, others);
    } else if (why == GROW_CARD_LIMIT) {
        snprintf(cause, sizeof cause, "the physical device's limit is reached (%s), shared by its logical devices",
                 p->cfg.budget->cap_source);
    } else if (limit < p->cfg.limit && rounded > limit - (current < limit ? current : limit)) {
        snprintf(cause, sizeof cause, "the memory fraction %g of the card (%zu bytes, set by "
                 "vram_set_memory_fraction: PyTorch's set_per_process_memory_fraction) is reached", fraction, limit);
    } else if (p->pinned && all != NULL && why == GROW_LIMIT) {
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached (limit from %s): %zu bytes are "
                 "in use and %zu held free by the device's other pools, which a private pool (a CUDA graph's) "
                 "cannot use", p->cfg.limit, p->cfg.limit_source, current, free_bytes);
    } else if (rounded > p->cfg.limit - (current < p->cfg.limit ? current : p->cfg.limit)) {
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached (limit from %s)",
                 p->cfg.limit, p->cfg.limit_source);
    } else if (p->cfg.growth && limit == p->cfg.limit && free_bytes < rounded && growable < rounded) {
        /* neither the free bytes held nor the room to grow would do alone: without the limit growth
         * would map more, so the limit is what stands in the way (not fragmentation) */
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached for this request (limit from %s): "
                 "%zu bytes are in use (%.1f%% of it); the %zu bytes free in the pool (largest block %zu) and the "
                 "%zu bytes it leaves to grow are not one piece large enough", p->cfg.limit, p->cfg.limit_source,
                 current, limit ? 100.0 * (double)current / (double)limit : 0.0, free_bytes,
                 largest_free, growable);
    } else {
        snprintf(cause, sizeof cause, "fragmentation: %zu bytes are free in the pool%s but no free block "
                 "is large enough", free_bytes + growable, growable ? " (counting room to grow)" : "");
    }
    return vram__fail(VRAM_ERR_OUT_OF_MEMORY,
                      "out of memory on %s: cannot allocate %zu bytes: %s. requested %zu bytes (rounded %zu), "
                      "in use %zu, reserved %zu, limit %zu, largest free block %zu, free in pool %zu",
                      p->cfg.name, size, cause, size, rounded, current, reserved, limit,
                      largest_free, free_bytes);
}

static vram_status pool_oom_locked(pool_arena *p, size_t size, size_t rounded, grow_result why) {
    p->num_ooms++;
    return pool_oom_report(p, size, rounded, why, NULL);
}

vram_status arena_oom(pool_arena *p, size_t size, size_t rounded, int why, const arena_figures *all) {
    pool_lock_take(&p->lock);
    p->num_ooms++;
    vram_status s = pool_oom_report(p, size, rounded, (grow_result)why, all);
    pool_lock_give(&p->lock);
    return s;
}

/* ---- public pool calls ----------------------------------------------------------------------- */

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
    if (p->cfg.caps.granularity == 0) p->cfg.caps.granularity = VRAM_POOL_FALLBACK_REGION;
    if (p->cfg.max_extent == 0) {
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
        arena_destroy(p);
        return s;
    }
    *out = p;
    return VRAM_OK;
}

vram_status arena_destroy(pool_arena *p) {
    if (p == NULL) return VRAM_OK;
    pool_lock_take(&p->lock);
    tc_flush_all_locked(p);
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
    while (p->regions != NULL) {
        pool_region *r = p->regions;
        p->regions = r->next;
        region_release(p, r);
    }
    free_spares(p);
    for (int i = 0; i < POOL_SHARDS; i++) ptr_map_destroy(&p->live[i].map);
    tc_destroy(p);
    pool_lock_give(&p->lock);
    free(p);
    return VRAM_OK;
}

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

/* Free chunk c (indexed) cut at `at` (a unit boundary inside it): [addr, at) stays free, the free
 * chunk from `at` on is returned (indexed), or NULL when no record for it could be had. */
static pool_chunk *chunk_cut_at_locked(pool_arena *p, pool_chunk *c, uint64_t at) {
    if (at == c->addr) return c;
    free_bins *bins = pool_bins_of(p, c);
    free_bins_remove(bins, c);
    pool_chunk *rest = chunk_split_locked(p, c, (size_t)(at - c->addr)) == 0 ? c->next : NULL;
    free_bins_insert(bins, c);
    return rest != NULL && rest->addr == at ? rest : NULL;
}

static pool_chunk *pool_find_mapped_locked(pool_arena *p, free_bins *bins, size_t size) {
    mapped_fit best = {size, NULL, 0};
    free_bins_ascending(bins, size, mapped_fit_visit, &best);
    return best.chunk != NULL ? chunk_cut_at_locked(p, best.chunk, best.at) : NULL;
}

/* The first `size` bytes of c (FREE, indexed) out of the free bins: a record of their own, while c
 * keeps the rest, its record and, while its size class stays, its place in the bins (the same
 * chunks as cutting c and indexing the rest anew, one remove and one insert fewer). c whole when
 * the rest would be less than a unit or no record can be had. */
static pool_chunk *chunk_take_front_locked(pool_arena *p, pool_chunk *c, size_t size) {
    free_bins *bins = pool_bins_of(p, c);
    pool_chunk *b = c->size - size >= VRAM_POOL_UNIT ? chunk_new_locked(p) : NULL;
    if (b == NULL) {
        free_bins_remove(bins, c);
        return c;
    }
    b->addr = c->addr;
    b->size = size;
    b->region = c->region;
    b->state = CHUNK_FREE;
    b->prev = c->prev;
    b->next = c;
    if (c->prev) c->prev->next = b; else c->region->first = b;
    c->prev = b;
    c->addr += size;
    free_bins_resize(bins, c, c->size - size);
    return b;
}

/* Hands out `rounded` bytes of chunk c to a request on `stream` (NULL: a plain one). A free chunk of
 * the VMM region gets its memory mapped first; when that fails (*why says how) the chunk goes back
 * and nothing changed. */
static vram_status pool_take_locked(pool_arena *p, pool_chunk *c, size_t size, size_t rounded, void *stream,
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

static vram_status pool_alloc_locked(pool_arena *p, size_t size, size_t rounded, int async, void *stream,
                                     void **ptr, int *quiet_why) {
    for (;;) {
        pool_chunk *c = pool_find_locked(p, rounded, async, stream);
        if (c == NULL && p->pending != NULL) {
            pending_reap_locked(p, 1);
            p->stats.syncs++;
            c = pool_find_locked(p, rounded, async, stream);
            if (c != NULL) p->stats.retries++;
        }
        if (pool_flush_helps_locked(p, c, rounded)) {
            tc_flush_all_locked(p);              /* parked blocks first, then the driver */
            if (p->unrecorded > 0) pending_record_locked(p);   /* so that they settle soon */
            c = pool_find_locked(p, rounded, async, stream);
        }
        if (p->vmm != NULL && pool_would_grow_locked(c, rounded) && arena_headroom(p) / 2 >= rounded) {
            /* memory already mapped before new memory: where best fit would map, a free chunk that
             * holds a mapped run long enough serves instead (with hold_large / hold_peak, this is
             * what lets the steady state stop remapping). Not near the limit: there, cutting
             * blocks out of large free chunks keeps extents busy that a large request later needs
             * given back (transformer_varlen at a limit 95% full failed requests), so best fit and
             * the limit's own fallbacks decide. */
            pool_chunk *m = pool_find_mapped_locked(p, pool_zone_bins(p, rounded), rounded);
            if (m != NULL) c = m;
        }
        grow_result why = GROW_LIMIT;
        if (c == NULL && p->vmm == NULL) {
            why = pool_grow_plain_locked(p, rounded);
            if (why == GROW_OK) c = pool_find_locked(p, rounded, async, stream);
        }
        vram_status s = c ? pool_take_locked(p, c, size, rounded, stream, ptr, &why) : VRAM_ERR_OUT_OF_MEMORY;
        if (s == VRAM_ERR_OUT_OF_MEMORY && why == GROW_LIMIT && p->vmm != NULL) {
            pool_chunk *m = pool_find_mapped_locked(p, &p->bins, rounded);   /* either zone now */
            if (m == NULL && p->small_end != 0) m = pool_find_mapped_locked(p, &p->sbins, rounded);
            if (m != NULL) {
                s = pool_take_locked(p, m, size, rounded, stream, ptr, &why);
            } else if (pool_grow_plain_locked(p, rounded) == GROW_OK) {
                /* the limit's last partial granule, as a plain region: exactly what is left */
                s = pool_take_locked(p, p->regions->first, size, rounded, stream, ptr, &why);
            }
        }
        if (s == VRAM_ERR_OUT_OF_MEMORY && p->pending != NULL) {
            size_t pending = p->pending_count;  /* frees still in flight on streams: wait, retry */
            pending_reap_locked(p, 1);
            p->stats.syncs++;
            if (p->pending_count < pending) {
                p->stats.retries++;
                continue;
            }
        }
        if (s == VRAM_ERR_OUT_OF_MEMORY && p->deferred != NULL) {
            size_t deferred = p->deferred_count;   /* blocks still used on other streams: the same */
            deferred_reap_locked(p, 1);
            p->stats.syncs++;
            if (p->deferred_count < deferred) {
                p->stats.retries++;
                continue;
            }
        }
        if (s == VRAM_ERR_OUT_OF_MEMORY && quiet_why != NULL) *quiet_why = (int)why;
        else if (s == VRAM_ERR_OUT_OF_MEMORY) s = pool_oom_locked(p, size, rounded, why);
        if (s == VRAM_OK && p->reserved - p->current < p->idle_low) p->idle_low = p->reserved - p->current;
        return s;
    }
}

vram_status arena_alloc(pool_arena *p, vram__pool_thread *me, size_t size, int async, void *stream, void **ptr,
                        int *quiet_why) {
    if (size > p->cfg.limit || size > SIZE_MAX - VRAM_POOL_UNIT) {
        if (quiet_why != NULL) {
            *quiet_why = (int)GROW_LIMIT;
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
    pool_lock_take(&p->lock);
    if (!p->cfg.growth && rounded > arena_headroom_live(p)) {   /* a fraction below the preallocation */
        vram_status s = quiet_why != NULL ? VRAM_ERR_OUT_OF_MEMORY : pool_oom_locked(p, size, rounded, GROW_LIMIT);
        if (quiet_why != NULL) *quiet_why = (int)GROW_LIMIT;
        pool_lock_give(&p->lock);
        return s;
    }
    if (p->solo != SOLO_OFF) solo_note_request_locked(p, async, stream);
    vram_status s = pool_alloc_locked(p, size, rounded, async, stream, ptr, quiet_why);
    pool_lock_give(&p->lock);
    return s;
}

vram_status arena_alloc_at(pool_arena *p, uint64_t addr, size_t size, void *stream) {
    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);
    pool_lock_take(&p->lock);
    if (p->pending != NULL) pending_reap_locked(p, 1);
    if (p->deferred != NULL) deferred_reap_locked(p, 1);
    tc_flush_all_locked(p);
    pool_chunk *c = NULL;
    for (pool_region *r = p->regions; r != NULL && c == NULL; r = r->next) {
        if (addr < r->base || addr - r->base >= r->size) continue;
        for (c = r->first; c != NULL && c->addr + c->size <= addr; c = c->next) {
        }
    }
    vram_status s = VRAM_OK;
    if (size == 0 || addr % VRAM_POOL_UNIT != 0 || rounded < size || c == NULL || c->state != CHUNK_FREE ||
        addr + rounded > c->addr + c->size) {
        s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_private_malloc_at(%p, %zu): not a free range of %s",
                       (void *)(uintptr_t)addr, size, p->cfg.name);
    } else if ((c = chunk_cut_at_locked(p, c, addr)) == NULL) {
        s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a chunk record");
    } else {
        if (p->solo != SOLO_OFF) solo_note_request_locked(p, 1, stream);
        void *ptr = NULL;
        grow_result why = GROW_OK;
        s = pool_take_locked(p, c, size, rounded, stream, &ptr, &why);
        if (s == VRAM_ERR_OUT_OF_MEMORY && why != GROW_OK) s = pool_oom_locked(p, size, rounded, why);
    }
    pool_lock_give(&p->lock);
    return s;
}

/* Whether addr lies in memory of one of the pool's regions. */
static int pool_owns_locked(const pool_arena *p, uint64_t addr) {
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        if (addr >= r->base && addr - r->base < r->size) return 1;
    }
    return 0;
}

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
    } else {
        s = ipc_export_locked(p, c, out, capacity, length, offset);
    }
    pool_lock_give(&p->lock);
    return s;
}

vram_status arena_free(pool_arena *p, vram__pool_thread *me, void *ptr, int async, void *stream, int *owned) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    *owned = 1;
    /* the fast path: parked. Only once parking is on: a free that merely asks whether the block is
     * this arena's (runtime's free_on tries each pool) must not turn it on */
    if (!async && tc_parking(p) && tc_park(p, tc_mine(p, me), addr)) return VRAM_OK;
    /* A block is always in the table, a cache or the pool's; it leaves the table under the pool lock,
     * so vram_check sees no gap. A free that records events (its own, or for a block's uses on other
     * streams) takes it out only once they are recorded, so that a failure leaves everything as it
     * was. */
    int own_event = async == 1;           /* vram_free_async: an event of its own, recorded here */
    if (own_event && capture_underway(p)) {   /* none during a capture: recorded after it, as owned-stream frees' */
        own_event = 0;
        async = VRAM_POOL_FREE_OWNED_STREAM;
    }
    pool_lock_take(&p->lock);
    pool_chunk *c = own_event ? live_get(p, addr) : live_take_unused(p, addr);
    if (c == NULL) {
        *owned = pool_owns_locked(p, addr);
        pool_lock_give(&p->lock);
        return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): not a live block of %s (already freed, "
                          "or not the start of a block vram handed out)", vram__pool_free_name(async), ptr,
                          p->cfg.name);
    }
    int asked = async;
    if (async == VRAM_POOL_FREE_ALLOC_STREAM) {   /* the stream it was handed out on */
        async = VRAM_POOL_FREE_OWNED_STREAM;
        stream = c->stream;
    }
    if (c->uses != NULL) {                        /* used on other streams too: wait for them */
        if (async != VRAM_POOL_FREE_OWNED_STREAM || uses_beyond(c->uses, stream)) {
            return free_deferred_unlock(p, c, async, stream, asked);
        }
        free(c->uses);                            /* used on its owned-stream free's stream alone: */
        c->uses = NULL;                           /* that order covers it (this free fails no more) */
        live_take(p, addr);
    }
    if (async == VRAM_POOL_FREE_OWNED_STREAM && p->solo == SOLO_ON) {
        if (stream == p->solo_stream) {
            p->solo_unfenced++;
            async = 0;                   /* free at once: whatever takes it is ordered after it */
        } else {
            solo_note_request_locked(p, 1, stream);   /* a block of another stream: solo no more */
        }
    }
    pool_event *e = NULL;
    if (own_event) {                    /* owned-stream frees get one later, for many frees at once */
        e = malloc(sizeof *e);
        vram_status s = e ? p->cfg.backend->event_record(p->cfg.dev, stream, &e->event)
                          : vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an event record");
        if (s != VRAM_OK) {             /* the block stays allocated, nothing changed */
            free(e);
            pool_lock_give(&p->lock);
            return vram__fail_wrap(s, "vram_free_async(%p)", ptr);
        }
        e->refs = 1;
        live_take(p, addr);
    }
    if (!async) {
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

void arena_lock(pool_arena *p) {
    pool_lock_take(&p->lock);
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
}

static void stats_for_each(pool_stats *st, void (*fn)(pool_stat *)) {
    for (int k = 0; k < 3; k++) {
        fn(&st->blocks[k]);
        fn(&st->bytes[k]);
        fn(&st->req[k]);
        fn(&st->segs[k]);
        fn(&st->held[k]);
    }
}

static void stat_reset_peak(pool_stat *st) {
    st->peak = st->cur;
}

static void stat_reset_accumulated(pool_stat *st) {
    st->in = 0;
    st->cur0 = st->cur;
}

void arena_reset_peak_locked(pool_arena *p) {
    pool_stats *st = &p->stats;
    p->peak = p->current;
    p->peak_reserved = p->reserved;
    stats_sync_all_locked(p);
    stats_for_each(st, stat_reset_peak);
    for (int k = 0; k < 3; k++) {
        st->active_peak[k] = st->bytes[k].cur + st->def_bytes[k];
        st->active_blocks_peak[k] = st->blocks[k].cur + st->def_blocks[k];
        st->split_peak[k] = st->split_blocks_peak[k] = 0;
    }
}

void arena_reset_accumulated_locked(pool_arena *p) {
    pool_stats *st = &p->stats;
    stats_sync_all_locked(p);
    stats_for_each(st, stat_reset_accumulated);
    st->retries = st->syncs = 0;
    st->ooms0 = p->num_ooms;
    st->dev_allocs0 = p->num_driver_allocs + p->num_driver_moves;
    st->dev_frees0 = p->num_driver_frees + p->num_driver_moves;
    for (int k = 0; k < 3; k++) {
        st->act0[k] = st->bytes[k].cur + st->def_bytes[k];
        st->act0_n[k] = st->blocks[k].cur + st->def_blocks[k];
    }
}

/* One figure added to a sum of arenas' figures. */
static void stat_add_to(vram_stat *out, const pool_stat *st) {
    out->current += (int64_t)st->cur;
    out->peak += (int64_t)st->peak;
    out->allocated += (int64_t)st->in;
    out->freed += (int64_t)(st->in + st->cur0 - st->cur);
}

/* Whether free chunk c is split off a block: a block of its zone next to it, memory held under it. */
static int stats_split_chunk(const pool_arena *p, const pool_region *r, const pool_chunk *c) {
    int beside = (c->prev != NULL && c->prev->state == CHUNK_USED && c->addr != p->small_end) ||
                 (c->next != NULL && c->next->state == CHUNK_USED && c->next->addr != p->small_end);
    return beside && (r->kind == REGION_PLAIN || pool_vmm_mapped_run(&r->vmm, c->addr, c->size, NULL) > 0);
}

/* By the kind of memory (the small zone's, the rest): the bytes of blocks over it (USED: handed out,
 * parked or deferred) and how many free chunks (FREE or PENDING) are split off blocks. */
static void stats_zones_locked(const pool_arena *p, size_t used[3], size_t split_n[3]) {
    for (int k = 0; k < 3; k++) used[k] = split_n[k] = 0;
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
            int k = r->kind == REGION_VMM && c->addr < p->small_end ? 1 : 2;
            if (c->state == CHUNK_USED) {
                used[k] += c->size;
            } else if (stats_split_chunk(p, r, c)) {
                split_n[k]++;
            }
        }
    }
    used[0] = used[1] + used[2];
    split_n[0] = split_n[1] + split_n[2];
}

void arena_allocator_stats_locked(pool_arena *p, vram_allocator_stats *out) {
    pool_stats *st = &p->stats;
    tc_flush_all_locked(p);                       /* parked blocks are the pool's, not the program's */
    stats_sync_all_locked(p);
    vmm_recount_locked(p);
    size_t idle[3] = {0, 0, 0};
    if (p->vmm != NULL) pool_vmm_zone_idle(&p->vmm->vmm, &idle[1]);
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {   /* a region with no block */
        if (r->kind == REGION_PLAIN && r->first == r->last && r->first->state == CHUNK_FREE) idle[2] += r->held;
    }
    idle[0] = idle[1] + idle[2];
    size_t used[3], split_n[3];
    stats_zones_locked(p, used, split_n);
    for (int k = 0; k < 3; k++) {
        stat_add_to(&out->allocation[k], &st->blocks[k]);
        stat_add_to(&out->allocated_bytes[k], &st->bytes[k]);
        stat_add_to(&out->requested_bytes[k], &st->req[k]);
        stat_add_to(&out->segment[k], &st->segs[k]);
        stat_add_to(&out->reserved_bytes[k], &st->held[k]);
        /* active: handed out and deferred; blocks come and go as they are handed out and freed */
        size_t active = st->bytes[k].cur + st->def_bytes[k], active_n = st->blocks[k].cur + st->def_blocks[k];
        size_t apeak = st->active_peak[k] > st->bytes[k].peak ? st->active_peak[k] : st->bytes[k].peak;
        size_t apeak_n = st->active_blocks_peak[k] > st->blocks[k].peak ? st->active_blocks_peak[k]
                                                                        : st->blocks[k].peak;
        out->active_bytes[k].current += (int64_t)active;
        out->active_bytes[k].peak += (int64_t)apeak;
        out->active_bytes[k].allocated += (int64_t)st->bytes[k].in;
        out->active_bytes[k].freed += (int64_t)(st->bytes[k].in + st->act0[k] - active);
        out->active[k].current += (int64_t)active_n;
        out->active[k].peak += (int64_t)apeak_n;
        out->active[k].allocated += (int64_t)st->blocks[k].in;
        out->active[k].freed += (int64_t)(st->blocks[k].in + st->act0_n[k] - active_n);
        size_t held = st->held[k].cur, busy = used[k] + idle[k];
        size_t split = held > busy ? held - busy : 0;
        if (split > st->split_peak[k]) st->split_peak[k] = split;
        if (split_n[k] > st->split_blocks_peak[k]) st->split_blocks_peak[k] = split_n[k];
        out->inactive_split_bytes[k].current += (int64_t)split;
        out->inactive_split_bytes[k].peak += (int64_t)st->split_peak[k];
        out->inactive_split[k].current += (int64_t)split_n[k];
        out->inactive_split[k].peak += (int64_t)st->split_blocks_peak[k];
    }
    out->num_alloc_retries += (int64_t)st->retries;
    out->num_ooms += (int64_t)(p->num_ooms - st->ooms0);
    out->num_sync_all_streams += (int64_t)st->syncs;
    out->num_device_alloc += (int64_t)(p->num_driver_allocs + p->num_driver_moves - st->dev_allocs0);
    out->num_device_free += (int64_t)(p->num_driver_frees + p->num_driver_moves - st->dev_frees0);
    out->max_split_size = -1;
}

size_t arena_live_bytes(pool_arena *p) {
    pool_lock_take(&p->lock);
    tc_stats st;
    tc_stats_locked(p, &st);
    size_t n = p->current - st.cached;
    pool_lock_give(&p->lock);
    return n;
}

/* ---- giving memory back ---------------------------------------------------------------------- */

/* Releases plain regions with no block in them (their one chunk is free), while more than `keep`
 * bytes are reserved beyond live blocks. */
static void trim_plain_regions_locked(pool_arena *p, size_t keep) {
    if (arena_still(p)) return;
    for (pool_region **link = &p->regions; *link != NULL && p->reserved - p->current > keep;) {
        pool_region *r = *link;
        if (r->kind == REGION_PLAIN && r->first == r->last && r->first->state == CHUNK_FREE) {
            if (solo_fence_locked(p) != 0) return;
            *link = r->next;
            free_bins_remove(&p->bins, r->first);
            region_release(p, r);
        } else {
            link = &r->next;
        }
    }
}

static void pool_trim_locked(pool_arena *p, size_t keep) {
    tc_flush_all_locked(p);
    if (p->unrecorded > 0) pending_record_locked(p);   /* so that they can settle (now or next time) */
    if (p->pending != NULL) pending_reap_locked(p, 0);
    if (p->deferred != NULL) deferred_reap_locked(p, 0);
    size_t excess = p->reserved - p->current;
    if (excess <= keep) return;
    if (p->vmm != NULL) vmm_unmap_idle_locked(p, excess - keep);
    trim_plain_regions_locked(p, keep);
}

size_t arena_live_count(pool_arena *p, size_t *bytes) {
    pool_lock_take(&p->lock);
    tc_flush_all_locked(p);
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

void arena_trim_settled(pool_arena *p) {
    pool_lock_take(&p->lock);
    tc_flush_all_locked(p);
    if (p->pending != NULL) pending_reap_locked(p, 1);
    if (p->deferred != NULL) deferred_reap_locked(p, 1);
    pool_trim_locked(p, 0);
    p->idle_low = p->reserved - p->current;
    pool_lock_give(&p->lock);
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
    tc_flush_all_locked(p);
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

void arena_trim(pool_arena *p, size_t keep_bytes) {
    pool_lock_take(&p->lock);
    pool_trim_locked(p, keep_bytes);
    p->idle_low = p->reserved - p->current;
    pool_lock_give(&p->lock);
}

void arena_idle_tick(pool_arena *p) {
    /* One stream (solo): a block freed at once may still be used by work queued on the stream. The
     * extents given back below have been idle since before the previous tick, so the event that tick
     * recorded on the stream covers their last frees: wait for it here, without the lock, so that
     * allocations go on while the stream drains (under the lock they waited for the whole queue once
     * a period). */
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;             /* no wait, nothing given back: the next tick */
    pool_lock_take(&p->lock);
    void *fence = p->idle_fence;
    int fenced = !p->idle_fence_failed;
    p->idle_fence = NULL;
    p->idle_fence_failed = 0;
    pool_lock_give(&p->lock);
    if (fence != NULL) {
        if (be->event_sync(p->cfg.dev, fence) != VRAM_OK) fenced = 0;
        be->event_destroy(p->cfg.dev, fence);
    }
    pool_lock_take(&p->lock);
    tc_flush_all_locked(p);
    if (p->unrecorded > 0) pending_record_locked(p);
    if (p->pending != NULL) pending_reap_locked(p, 0);
    if (p->deferred != NULL) deferred_reap_locked(p, 0);
    if (p->vmm != NULL && !p->pinned) {          /* extents idle since before the last tick (no capture) */
        pool_vmm *v = &p->vmm->vmm;
        size_t before = v->mapped;
        uint64_t c = v->creates, r = v->releases;
        vmm_recount_locked(p);
        if (fenced) pool_vmm_unmap_stale(v);   /* else the period goes on: the next tick's fence is later */
        vmm_note_locked(p, v, before, c, r);
        if (p->solo == SOLO_ON && p->solo_unfenced > 0 &&
            be->event_record(p->cfg.dev, p->solo_stream, &p->idle_fence) != VRAM_OK) {
            p->idle_fence = NULL;
            p->idle_fence_failed = 1;
        }
    }
    size_t excess = p->reserved - p->current, unused = p->idle_low < excess ? p->idle_low : excess;
    if (unused > 0) trim_plain_regions_locked(p, excess - unused);   /* regions: by the low-water mark */
    p->idle_low = p->reserved - p->current;
    pool_lock_give(&p->lock);
}
