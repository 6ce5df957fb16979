/*
 * split_merge.c: the chunks of a region (chunk.h): their records (recycled through the arena's
 * spare list), the split of a chunk into a block and a rest, the cut of a free chunk at an address,
 * the merge of a chunk that becomes free with its free address neighbours, and the pending list's
 * links (split_merge.h), which a split of a PENDING chunk keeps.
 *
 * Invariants kept: the chunks tile their region in address order; no two FREE chunks are
 * neighbours except across a zone's edge (the small zone's end, the plan's zone's ends: the zones
 * never merge); every FREE chunk is in its zone's free bins; plan.first starts the plan's zone.
 * Everything here is under the arena lock.
 */
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

void vram__chunk_free_spares(pool_arena *p) {
    while (p->spare != NULL) {
        pool_chunk *c = p->spare;
        p->spare = c->next;
        free(c);
    }
}

/* Puts c into the free bins, merged with free neighbours. `was_busy`: c was USED or PENDING, so
 * its bytes stop counting as in use in the VMM region. A free neighbour grows over c (the one
 * before it first) and keeps its record and, while its size class stays, its place in the bins; c's
 * record goes back to the spares. */
void vram__chunk_make_free_locked(pool_arena *p, pool_chunk *c, int was_busy) {
    POOL_ASSERT_LOCKED(p);
    if (was_busy && c->region->kind == REGION_VMM) vram__pool_vmm_release(&c->region->vmm, c->addr, c->size);
    c->state = CHUNK_FREE;
    pool_chunk *prev = c->prev, *next = c->next;
    free_bins *bins = pool_bins_of(p, c);          /* the zones never merge: same bins throughout */
    int join_next = next != NULL && next->state == CHUNK_FREE && !pool_zone_edge(p, next->addr);
    int join_prev = prev != NULL && prev->state == CHUNK_FREE && !pool_zone_edge(p, c->addr);
    if (join_prev) {
        size_t size = prev->size + c->size;
        if (join_next) {
            vram__free_bins_remove(bins, next);
            size += next->size;
            chunk_unlink_locked(p, next);
        }
        chunk_unlink_locked(p, c);
        vram__free_bins_resize(bins, prev, size);
    } else if (join_next) {
        size_t size = next->size + c->size;
        next->addr = c->addr;
        if (c == p->plan.first) p->plan.first = next;   /* next's record starts the zone now */
        chunk_unlink_locked(p, c);
        vram__free_bins_resize(bins, next, size);
    } else {
        vram__free_bins_insert(bins, c);
    }
}

void vram__pool_release_used_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    POOL_ASSERT_CHUNK(c);
    POOL_DEBUG_FILL(p, c, POOL_FILL_FREED);
    note_used_locked(p, c, 0);
    vram__chunk_make_free_locked(p, c, 1);
}

void vram__pool_flush_caches_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    for (pool_chunk *c = vram__tc_flush_all_locked(p); c != NULL;) {
        pool_chunk *next = c->cache_next;
        c->cache_next = NULL;
        vram__pool_release_used_locked(p, c);
        p->num_flushed++;
        c = next;
    }
}

/* Cuts c (taken out of the tree or the pending list) to `size`; the rest keeps c's state.
 * Returns 0, or -1 when no record for the rest could be had (c is then used whole). */
VRAM_NOINLINE int vram__chunk_split_locked(pool_arena *p, pool_chunk *c, size_t size) {
    POOL_ASSERT_LOCKED(p);
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
        vram__free_bins_insert(pool_bins_of(p, rest), rest);
    }
    return 0;
}

/* Free chunk c (indexed) cut at `at` (a unit boundary inside it): [addr, at) stays free, the free
 * chunk from `at` on is returned (indexed), or NULL when no record for it could be had. */
pool_chunk *vram__chunk_cut_at_locked(pool_arena *p, pool_chunk *c, uint64_t at) {
    POOL_ASSERT_LOCKED(p);
    if (at == c->addr) return c;
    free_bins *bins = pool_bins_of(p, c);
    vram__free_bins_remove(bins, c);
    pool_chunk *rest = vram__chunk_split_locked(p, c, (size_t)(at - c->addr)) == 0 ? c->next : NULL;
    vram__free_bins_insert(bins, c);
    return rest != NULL && rest->addr == at ? rest : NULL;
}
