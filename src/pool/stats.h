/*
 * stats.h: the figures the hand-out and free paths keep (stats.c owns the rest of PyTorch's
 * allocator statistics). note_used_locked is a helper of the header (POOL_HELPER, arena.h),
 * so that the warm path compiles as it did with it beside the hand-out. Pool lock held for all.
 */
#ifndef VRAM_POOL_STATS_H
#define VRAM_POOL_STATS_H

#include "pool/arena.h"

/* PyTorch's figures (pool_stats): the kind of a block, by its rounded size. */
static inline int stat_kind(size_t size) {
    return size <= VRAM_SMALL_BLOCK ? 1 : 2;
}

static inline void stat_up(pool_stat *st, size_t v) {
    st->cur += v;
    st->in += v;
    if (st->cur > st->peak) st->peak = st->cur;
}


/* Whether a query counts idle memory from the chunks (extents of one granule, but for a load's:
 * stats.c), not from the extents' counts, which then need no recount (VMM arenas). */
static inline int stats_idle_by_granule(const pool_arena *p) {
    return p->vmm->vmm.max_extent == p->vmm->vmm.gran;
}

void vram__stat_set(pool_stat *st, size_t v);
/* The physical memory held, by kind (after every change of it: driver calls only). */
void vram__stats_held_locked(pool_arena *p);
/* The figures of all blocks that the hand-out and free paths do not keep. */
void vram__stats_sync_all_locked(pool_arena *p);
/* Handed out and deferred blocks together, while some are deferred (see pool_stats). */
VRAM_NOINLINE void vram__stats_active_peaks_locked(pool_arena *p);
/* `delta` bytes more (grow) or fewer held from the driver: reserved, the marks, the shared sum. */
void vram__note_reserved_locked(pool_arena *p, size_t delta, int grow);
/* Deferred block c (freed, still used on other streams) starts (add) or stops waiting. */
void vram__note_deferred_locked(pool_arena *p, const pool_chunk *c, int add);

/* Block c is handed out (alloc) or comes back. */
POOL_HELPER void note_used_locked(pool_arena *p, const pool_chunk *c, int alloc) {
    POOL_ASSERT_LOCKED(p);
    pool_stats *st = &p->stats;
    size_t size = c->size;
    int k = stat_kind(size);
    if (alloc) {
        p->current += size;
        p->used_count++;
        p->num_allocs++;
        if (p->current > p->peak) p->peak = p->current;
        stat_up(&st->blocks[k], 1);           /* (all: see vram__stats_sync_all_locked) */
        stat_up(&st->bytes[k], size);
        stat_up(&st->req[k], c->req);
        if (p->used_count > st->blocks[0].peak) st->blocks[0].peak = p->used_count;
        st->req[0].cur += c->req;
        if (st->req[0].cur > st->req[0].peak) st->req[0].peak = st->req[0].cur;
        if (p->order.deferred != NULL) vram__stats_active_peaks_locked(p);
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


#endif /* VRAM_POOL_STATS_H */
