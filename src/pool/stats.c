/*
 * stats.c: PyTorch's allocator statistics of one arena (vram_get_allocator_stats, pool_stats in
 * arena.h): the figures by kind (all, small, large) of blocks, requested bytes, segments
 * and memory held, the active and inactive-split figures computed at a query, and the resets of
 * peaks and of accumulated figures. The hand-out and free paths keep their part through stats.h.
 *
 * Invariants: of the [0] (all) figures the paths keep only blocks' peak and requested bytes'
 * current and peak; the rest is the arena's own counts and the kinds' sums (vram__stats_sync_all_locked),
 * brought up to date before every query and reset. held and segs follow every driver call
 * (vram__stats_held_locked). A query's idle memory is the extents' (recounted), or with extents of one
 * granule each the mapped granules under no block (the same figure, from one walk of the chunks).
 * A reader (arena.h): the front door settles the arena before a query (the thread caches flushed;
 * slot mode left and the extents recounted unless idle memory is counted by granule: then a plan's
 * zone in slot mode is read through its live blocks, the figures those of its chunks had it left).
 * Everything here is under the arena lock.
 */
#include "pool/stats.h"

/* A figure set to `v` (what is held changed): what it gained counts as added. */
void vram__stat_set(pool_stat *st, size_t v) {
    if (v > st->cur) st->in += v - st->cur;
    st->cur = v;
    if (v > st->peak) st->peak = v;
}

/* The physical memory held, by kind: the small zone's extents are small, every other extent and
 * plain region large. After every change of it (driver calls only). */
void vram__stats_held_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    const pool_vmm *v = p->vmm != NULL ? &p->vmm->vmm : NULL;
    size_t small = v != NULL ? v->zone_bytes[0] : 0, small_n = v != NULL ? v->zone_count[0] : 0;
    size_t large_n = (v != NULL ? v->zone_count[1] : 0) + st->nplain;
    vram__stat_set(&st->held[0], p->reserved);
    vram__stat_set(&st->held[1], small);
    vram__stat_set(&st->held[2], p->reserved - small);
    vram__stat_set(&st->segs[0], small_n + large_n);
    vram__stat_set(&st->segs[1], small_n);
    vram__stat_set(&st->segs[2], large_n);
}

/* The figures of all blocks that the hand-out and free paths do not keep (pool_stats): the pool's own
 * counts and the sums of the two kinds. */
void vram__stats_sync_all_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
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
VRAM_NOINLINE void vram__stats_active_peaks_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    vram__stats_sync_all_locked(p);
    for (int k = 0; k < 3; k++) {
        size_t bytes = st->bytes[k].cur + st->def_bytes[k], blocks = st->blocks[k].cur + st->def_blocks[k];
        if (bytes > st->active_peak[k]) st->active_peak[k] = bytes;
        if (blocks > st->active_blocks_peak[k]) st->active_blocks_peak[k] = blocks;
    }
}

void vram__note_reserved_locked(pool_arena *p, size_t delta, int grow) {
    POOL_ASSERT_LOCKED(p);
    if (grow) {
        p->reserved += delta;
        if (p->reserved > p->peak_reserved) p->peak_reserved = p->reserved;
        if (p->reserved > p->hold_mark) p->hold_mark = p->reserved;
        if (p->plan.nap > 1) p->plan.nap = 1;  /* the plan's detector looks from the next request on */
        size_t all = atomic_fetch_add(&p->shared->reserved, delta) + delta;   /* driver calls only */
        size_t peak = atomic_load(&p->shared->peak_reserved);
        while (all > peak && !atomic_compare_exchange_weak(&p->shared->peak_reserved, &peak, all)) {
        }
    } else {
        p->reserved -= delta;
        atomic_fetch_sub(&p->shared->reserved, delta);
    }
    vram__stats_held_locked(p);
}


/* Deferred block c (freed, still used on other streams) starts (add) or stops waiting. */
void vram__note_deferred_locked(pool_arena *p, const pool_chunk *c, int add) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    int k = stat_kind(c->size);
    size_t n = add ? 1 : (size_t)-1, bytes = add ? c->size : (size_t)0 - c->size;
    st->def_blocks[0] += n;
    st->def_blocks[k] += n;
    st->def_bytes[0] += bytes;
    st->def_bytes[k] += bytes;
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

void vram__stats_reset_peak_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    p->peak = p->current;
    p->peak_reserved = p->reserved;
    vram__stats_sync_all_locked(p);
    stats_for_each(st, stat_reset_peak);
    for (int k = 0; k < 3; k++) {
        st->active_peak[k] = st->bytes[k].cur + st->def_bytes[k];
        st->active_blocks_peak[k] = st->blocks[k].cur + st->def_blocks[k];
        st->split_peak[k] = st->split_blocks_peak[k] = 0;
    }
}

void vram__stats_reset_accumulated_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    vram__stats_sync_all_locked(p);
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
    int beside = (c->prev != NULL && c->prev->state == CHUNK_USED && !pool_zone_edge(p, c->addr)) ||
                 (c->next != NULL && c->next->state == CHUNK_USED && !pool_zone_edge(p, c->next->addr));
    return beside && (r->kind == REGION_PLAIN || vram__pool_vmm_mapped_run(&r->vmm, c->addr, c->size, NULL) > 0);
}

/* Block [addr, addr + size) of the VMM region: its granules are busy, and so is the rest of the
 * extents at its first and last granule (only those can reach beyond it), each granule counted once
 * (*covered: the granules below it are counted; blocks come by address). */
static inline void stats_busy_granules(const pool_vmm *v, uint64_t addr, size_t size, size_t *busy, size_t *covered) {
    size_t g = (size_t)((addr - v->base) >> v->gran_shift);
    size_t end = (size_t)((addr + size - 1 - v->base) >> v->gran_shift) + 1;
    if (v->gran_ext[g] >= 0) g = v->ext[v->gran_ext[g]].offset >> v->gran_shift;
    if (v->gran_ext[end - 1] >= 0) {
        const pool_extent *x = &v->ext[v->gran_ext[end - 1]];
        end = (x->offset + x->size) >> v->gran_shift;
    }
    if (g < *covered) g = *covered;
    if (end > g) *busy += (end - g) << v->gran_shift;
    if (end > *covered) *covered = end;
}

/* What a query reads from the chunks, in one walk, by the kind of memory (the small zone's, the
 * rest): the bytes of blocks over it (USED: handed out, parked or deferred), how many free chunks
 * (FREE or PENDING) are split off blocks, and, when `busy` is given (idle memory counted by granule:
 * extents of one granule each, but for a load's), the bytes of the VMM region's extents under some
 * block (USED or PENDING: mapped). A plan's zone in slot mode (zv->zone) is read through its live
 * blocks: their bytes and granules, and a split free chunk for each gap beside one (the zone is mapped
 * whole; its ends are zone edges, so a gap there is beside the block within only). */
static inline __attribute__((always_inline)) void stats_walk_region(const pool_arena *p, const pool_zone_view *zv,
                                                                    const pool_region *r, const pool_vmm *v, int slots,
                                                                    size_t used[3], size_t split_n[3], size_t *busy) {
    const pool_chunk *zone = zv->zone;
    uint64_t small_end = r->kind == REGION_VMM ? p->small_end : 0;
    size_t u[3] = {0, 0, 0}, n[3] = {0, 0, 0}, b[3] = {0, 0, 0}, covered = 0;   /* (granules below it counted) */
    for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
        int k = c->addr < small_end ? 1 : 2;
        if (slots && c->state == CHUNK_USED && c == zone) {
            uint64_t at = p->plan.lo;
            for (size_t i = 0; i < zv->n; i++) {
                const pool_chunk *x = zv->live[i];
                u[k] += x->size;
                n[k] += x->addr > at;                     /* the gap below it */
                at = x->addr + x->size;
                if (v != NULL) stats_busy_granules(v, x->addr, x->size, &b[k], &covered);
            }
            n[k] += zv->n > 0 && at < p->plan.hi;         /* the gap above the last */
            continue;
        }
        if (c->state == CHUNK_USED) {
            u[k] += c->size;
        } else if (stats_split_chunk(p, r, c)) {
            n[k]++;
        }
        if (v != NULL && c->state != CHUNK_FREE) stats_busy_granules(v, c->addr, c->size, &b[k], &covered);
    }
    for (int k = 1; k < 3; k++) {
        used[k] += u[k];
        split_n[k] += n[k];
        if (busy != NULL) busy[k] += b[k];
    }
}

/* The walk of every region (stats_walk_region, specialized by what it reads there). */
static void stats_walk_locked(const pool_arena *p, const pool_zone_view *zv, size_t used[3], size_t split_n[3],
                              size_t *busy) {
    POOL_ASSERT_LOCKED(p);
    POOL_ASSERT(busy != NULL || zv->zone == NULL, "a query that counts idle memory from the extents left slot mode");
    for (int k = 0; k < 3; k++) used[k] = split_n[k] = 0;
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        if (r != p->vmm) stats_walk_region(p, zv, r, NULL, 0, used, split_n, NULL);   /* (specialized) */
        else if (busy == NULL) stats_walk_region(p, zv, r, NULL, 0, used, split_n, NULL);   /* (slot mode left) */
        else if (zv->zone != NULL) stats_walk_region(p, zv, r, &r->vmm, 1, used, split_n, busy);
        else stats_walk_region(p, zv, r, &r->vmm, 0, used, split_n, busy);
    }
    used[0] = used[1] + used[2];
    split_n[0] = split_n[1] + split_n[2];
}

void vram__stats_query_locked(pool_arena *p, const pool_zone_view *zv, vram_allocator_stats *out) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    vram__stats_sync_all_locked(p);
    size_t idle[3] = {0, 0, 0}, used[3], split_n[3], mapped_busy[3] = {0, 0, 0};
    int by_granule = p->vmm != NULL && stats_idle_by_granule(p);
    stats_walk_locked(p, zv, used, split_n, by_granule ? mapped_busy : NULL);
    if (by_granule) {
        const pool_vmm *v = &p->vmm->vmm;
        idle[1] = v->zone_bytes[0] > mapped_busy[1] ? v->zone_bytes[0] - mapped_busy[1] : 0;
        idle[2] = v->zone_bytes[1] > mapped_busy[2] ? v->zone_bytes[1] - mapped_busy[2] : 0;
    } else if (p->vmm != NULL) {
        vram__pool_vmm_zone_idle(&p->vmm->vmm, &idle[1]);   /* (recounted: stats_idle_by_granule) */
    }
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {   /* a region with no block */
        if (r->kind == REGION_PLAIN && r->first == r->last && r->first->state == CHUNK_FREE) idle[2] += r->held;
    }
    idle[0] = idle[1] + idle[2];
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
