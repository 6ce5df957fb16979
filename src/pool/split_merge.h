/*
 * split_merge.h: chunk records, the cuts and joins of chunks (split_merge.c) and the links of the
 * pending list (PENDING chunks; their events are stream_order.c's). The record allocator, the
 * unlink, the front cut of a free chunk and the pending links are helpers of the header
 * (POOL_HELPER, arena.h): every hand-out and free passes through them. Arena lock held for all.
 */
#ifndef VRAM_POOL_SPLIT_MERGE_H
#define VRAM_POOL_SPLIT_MERGE_H

#include <stdlib.h>
#include <string.h>

#include "pool/arena.h"

/* A chunk record, recycled or new (NULL without host memory). */
POOL_HELPER pool_chunk *chunk_new_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
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

POOL_HELPER void chunk_recycle_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    c->next = p->spare;
    p->spare = c;
}

void vram__chunk_free_spares(pool_arena *p);   /* the recycled records, back to the host */

/* c out of its region's address list; its record recycled. */
POOL_HELPER void chunk_unlink_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    pool_region *r = c->region;
    if (c->prev) c->prev->next = c->next; else r->first = c->next;
    if (c->next) c->next->prev = c->prev; else r->last = c->prev;
    chunk_recycle_locked(p, c);
}

/* Puts c into the free bins, merged with free neighbours. `was_busy`: c was USED or PENDING, so
 * its bytes stop counting as in use in the VMM region. */
void vram__chunk_make_free_locked(pool_arena *p, pool_chunk *c, int was_busy);
/* Cuts c (taken out of the bins or the pending list) to `size`; the rest keeps c's state.
 * Returns 0, or -1 when no record for the rest could be had (c is then used whole). Out of line:
 * inlined into the hand-out it cost the warm path registers (bench/instructions.sh). */
VRAM_NOINLINE int vram__chunk_split_locked(pool_arena *p, pool_chunk *c, size_t size);
/* Free chunk c (indexed) cut at `at`: the free chunk from `at` on (indexed), or NULL. */
pool_chunk *vram__chunk_cut_at_locked(pool_arena *p, pool_chunk *c, uint64_t at);

/* The first `size` bytes of c (FREE, indexed) out of the free bins: a record of their own, while c
 * keeps the rest, its record and, while its size class stays, its place in the bins (the same
 * chunks as cutting c and indexing the rest anew, one remove and one insert fewer). c whole when
 * the rest would be less than a unit or no record can be had. */
POOL_HELPER pool_chunk *chunk_take_front_locked(pool_arena *p, pool_chunk *c, size_t size) {
    POOL_ASSERT_LOCKED(p);
    free_bins *bins = pool_bins_of(p, c);
    pool_chunk *b = c->size - size >= VRAM_POOL_UNIT ? chunk_new_locked(p) : NULL;
    if (b == NULL) {
        vram__free_bins_remove(bins, c);
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
    if (c == p->plan.first) p->plan.first = b;      /* b starts the plan's zone now */
    c->addr += size;
    vram__free_bins_resize(bins, c, c->size - size);
    return b;
}

/* ---- the pending list: PENDING chunks, newest first (stream_order.c owns its events) ---------- */

POOL_HELPER void pending_unlink_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    if (c->pend_prev) c->pend_prev->pend_next = c->pend_next; else p->order.pending = c->pend_next;
    if (c->pend_next) c->pend_next->pend_prev = c->pend_prev; else p->order.pending_tail = c->pend_prev;
    c->pend_prev = c->pend_next = NULL;
    p->order.pending_count--;
    if (c->event == NULL) p->order.unrecorded--;
}

POOL_HELPER void pending_link_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    c->pend_prev = NULL;
    c->pend_next = p->order.pending;
    if (p->order.pending) p->order.pending->pend_prev = c; else p->order.pending_tail = c;
    p->order.pending = c;
    p->order.pending_count++;
    if (c->event == NULL) p->order.unrecorded++;
}

#endif /* VRAM_POOL_SPLIT_MERGE_H */
