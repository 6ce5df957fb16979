/*
 * pool_check.c: vram__arena_check (vram__pool_check, for every arena) walks every structure of an arena
 * and verifies the invariants
 * stated in arena.c's header: chunks tile their regions, free neighbours are merged, the free bins,
 * the pointer table, the pending list and the extents agree with the chunks, the counters agree
 * with the blocks, reserved stays within the limit and the card's budget, and an arena asleep
 * (sleep.c) has every block marked asleep, its unmapped granules understood as asleep, not lost.
 */
#include <stdio.h>

#include "pool/plan_arena.h"

typedef struct check_tally {
    size_t used_bytes, used_count, free_count, free_bytes, pending_count, held, parked_count, unrecorded;
    size_t deferred_count;
    size_t region_busy;   /* bytes of USED and PENDING chunks in the region being checked */
} check_tally;

static const char *check_chunk_locked(pool_arena *p, const pool_region *r, const pool_chunk *c,
                                      check_tally *t) {
    POOL_ASSERT_LOCKED(p);
    if (c->region != r) return "a chunk points to another region";
    if (c->size == 0 || c->size % VRAM_POOL_UNIT != 0 || c->addr % VRAM_POOL_UNIT != 0) {
        return "a chunk is empty or not 256-byte aligned";
    }
    if (c->next != NULL && (c->next->prev != c || c->next->addr != c->addr + c->size)) {
        return "chunks do not tile the region";
    }
    if (c->addr < p->small_end && c->addr + c->size > p->small_end && r == p->vmm) {
        return "a chunk crosses the end of the small zone";
    }
    if (r == p->vmm && p->plan.hi != 0 && c->addr < p->plan.hi && c->addr + c->size > p->plan.lo &&
        (c->addr < p->plan.lo || c->addr + c->size > p->plan.hi)) {
        return "a chunk crosses an edge of the plan's zone";
    }
    if (r == p->vmm && p->plan.hi != 0 && c->addr == p->plan.lo && c != p->plan.first) {
        return "the plan's zone does not start with plan.first";
    }
    switch (c->state) {
    case CHUNK_FREE:
        if (c->next != NULL && c->next->state == CHUNK_FREE && !pool_zone_edge(p, c->next->addr)) {
            return "two free neighbours were not merged";
        }
        t->free_count++;
        t->free_bytes += c->size;
        return NULL;
    case CHUNK_USED:
        if (c->uses != NULL && c->uses->nevents > 0) {   /* freed, still used on other streams */
            if (c->uses->done >= c->uses->nevents) {
                return "a deferred block whose events all completed was not given back";
            }
            t->deferred_count++;
            t->region_busy += c->size;
            return NULL;
        }
        if (c->uses != NULL && (c->uses->n < 1 || c->uses->n >= c->uses->cap)) {
            return "a block's recorded streams are out of bounds";
        }
        if (c->cached) {
            t->parked_count++;
        } else if (vram__ptr_map_get(&pool_shard_of(p, c->addr)->map, c->addr) != c) {
            return "a live chunk is missing from the pointer table";
        }
        t->used_count++;
        t->used_bytes += c->size;
        /* a block asleep lies over unmapped granules (but those the driver refused to give back) */
        t->region_busy += c->asleep && r->kind == REGION_VMM ? vram__pool_vmm_mapped_bytes(&r->vmm, c->addr, c->size)
                                                             : c->size;
        return NULL;
    case CHUNK_PENDING:
        if (c->event == NULL) t->unrecorded++;   /* an owned-stream free whose event comes later */
        else if (c->event->refs <= 0) return "a pending chunk's event has no references";
        t->pending_count++;
        t->region_busy += c->size;
        return NULL;
    }
    return "a chunk has an unknown state";
}

static const char *check_region_locked(pool_arena *p, const pool_region *r, check_tally *t) {
    POOL_ASSERT_LOCKED(p);
    if (r->first != NULL && r->first->addr != r->base) return "the first chunk does not start the region";
    size_t sum = 0;
    t->region_busy = 0;
    for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
        const char *why = check_chunk_locked(p, r, c, t);
        if (why != NULL) return why;
        sum += c->size;
        if (c->next == NULL && c != r->last) return "the region's last chunk is wrong";
    }
    if (sum != r->size) return "chunk sizes do not add up to the region";
    if (r->kind == REGION_VMM) {
        static _Thread_local char msg[256];
        /* (counted lazily: the front door recounted them from the blocks before the check) */
        if (vram__pool_vmm_check(&r->vmm, msg, sizeof msg) != 0) return msg;
        size_t busy = 0;
        for (int32_t e = 0; e < r->vmm.ext_count; e++) busy += r->vmm.ext[e].size ? r->vmm.ext[e].busy : 0;
        if (busy != t->region_busy) return "the extents' bytes in use differ from the blocks in use";
        t->held += r->vmm.mapped + r->vmm.stuck_bytes;   /* (stuck: refused by the driver, still held) */
    } else {
        t->held += r->held;
    }
    return NULL;
}

/* The thread caches: every parked chunk is USED, marked, of its bin's size, and the bytes agree. */
static const char *check_caches_locked(const pool_arena *p, size_t *parked) {
    POOL_ASSERT_LOCKED(p);
    for (int i = 0; p->tc.caches != NULL && i < TC_CACHES; i++) {
        const pool_tcache *tc = &p->tc.caches[i];
        size_t bytes = 0;
        for (int k = 0; k < TC_BINS; k++) {
            for (const pool_chunk *c = tc->bin[k].head; c != NULL; c = c->cache_next) {
                if (c->state != CHUNK_USED || !c->cached) return "a parked chunk is not a marked USED chunk";
                if (c->size != tc->bin[k].size) return "a parked chunk is in the bin of another size";
                bytes += c->size;
                (*parked)++;
            }
        }
        if (bytes != atomic_load(&tc->cached)) return "a thread cache's byte count differs from its blocks";
        if (bytes > p->tc.cap) return "a thread cache holds more than its cap";
    }
    return NULL;
}

/* Every free chunk of the small zone is in its bins, of the plan's zone in its own, every other one
 * in the rest's. */
static const char *check_zones_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    size_t n[2] = {0, 0}, bytes[2] = {0, 0};
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
            if (c->state != CHUNK_FREE) continue;
            int k = pool_bins_of(p, c) == &p->sbins ? 0 : pool_bins_of(p, c) == &p->plan.bins ? 1 : -1;
            if (k < 0) continue;
            n[k]++;
            bytes[k] += c->size;
        }
    }
    if (n[0] != p->sbins.count || bytes[0] != p->sbins.bytes) {
        return "the small zone's free chunks and its bins disagree";
    }
    if (n[1] != p->plan.bins.count || bytes[1] != p->plan.bins.bytes) {
        return "the plan's zone's free chunks and its bins disagree";
    }
    return NULL;
}

/* PyTorch's figures (pool_stats) agree with the pool's own counts; kinds add up to all. */
static const char *check_stats_locked(const pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    const pool_stats *st = &p->stats;
    const pool_stat *by[] = {st->req, st->segs, st->held};   /* (blocks and bytes of all: the pool's own) */
    for (size_t i = 0; i < sizeof by / sizeof by[0]; i++) {
        if (by[i][0].cur != by[i][1].cur + by[i][2].cur) return "a statistic's small and large parts do not add up";
    }
    const pool_stat *all[] = {st->blocks, st->bytes, st->req, st->segs, st->held};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        for (int k = i < 2 ? 1 : 0; k < 3; k++) {
            if (all[i][k].peak < all[i][k].cur) return "a statistic's peak is below its current value";
        }
    }
    if (st->blocks[1].cur + st->blocks[2].cur != p->used_count || st->bytes[1].cur + st->bytes[2].cur != p->current ||
        st->blocks[0].peak < p->used_count) {
        return "the statistics' blocks in use differ from the pool's";
    }
    if (st->held[0].cur != p->reserved) return "the statistics' reserved bytes differ from the pool's";
    if (st->req[0].cur > p->current) return "more bytes requested than handed out";
    if (st->def_blocks[0] != p->order.deferred_count) return "the statistics' deferred blocks differ from the list";
    return NULL;
}

/* The lengths of the pending and deferred lists (walked by their links); NULL, or why not right. */
static const char *check_lists_locked(const pool_arena *p, size_t *pending, size_t *deferred) {
    POOL_ASSERT_LOCKED(p);
    const pool_chunk *last = NULL;
    for (const pool_chunk *c = p->order.pending; c != NULL; c = c->pend_next) (*pending)++;
    for (const pool_chunk *c = p->order.deferred; c != NULL && *deferred <= p->order.deferred_count; c = c->uses->next) {
        if (c->uses == NULL || c->uses->nevents == 0) break;
        (*deferred)++;
        last = c;
    }
    return last != p->order.deferred_tail ? "the deferred list's last block is not its tail" : NULL;
}

vram_status vram__check_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    char msg[256];
    check_tally t = {0};
    const char *why = NULL;
    for (int i = 0; p->tc.caches != NULL && i < TC_CACHES; i++) pool_spin_lock(&p->tc.caches[i].lock, POOL_RANK_TCACHE);
    for (int i = 0; i < POOL_SHARDS; i++) pool_spin_lock(&p->ptr_table[i].lock, POOL_RANK_SHARD);
    size_t parked = 0, mapped = 0;
    why = check_caches_locked(p, &parked);
    for (int i = 0; i < POOL_SHARDS; i++) mapped += p->ptr_table[i].map.count;
    for (const pool_region *r = p->regions; r != NULL && why == NULL; r = r->next) {
        why = check_region_locked(p, r, &t);
    }
    if (why == NULL && t.parked_count != parked) why = "parked chunks and the thread caches disagree";
    size_t pending = 0, deferred = 0;
    if (why == NULL) why = check_lists_locked(p, &pending, &deferred);
    if (why == NULL && vram__free_bins_check(&p->bins, msg, sizeof msg) != 0) why = msg;
    if (why == NULL && vram__free_bins_check(&p->sbins, msg, sizeof msg) != 0) why = msg;
    if (why == NULL && vram__free_bins_check(&p->plan.bins, msg, sizeof msg) != 0) why = msg;
    if (why == NULL) why = check_zones_locked(p);
    if (why != NULL) {
    } else if (t.free_count != p->bins.count + p->sbins.count + p->plan.bins.count ||
               t.free_bytes != p->bins.bytes + p->sbins.bytes + p->plan.bins.bytes) {
        why = "free chunks and the free bins disagree";
    } else if (t.used_count != p->used_count || t.used_count != mapped + parked) {
        why = "live chunks, the pointer table and the live count disagree";
    } else if (t.used_bytes != p->current) {
        why = "current differs from the sum of live blocks";
    } else if (t.pending_count != p->order.pending_count || pending != p->order.pending_count) {
        why = "pending chunks and the pending list disagree";
    } else if (t.deferred_count != p->order.deferred_count || deferred != p->order.deferred_count) {
        why = "deferred blocks and their list disagree";
    } else if (t.unrecorded != p->order.unrecorded) {
        why = "pending frees without an event and their count disagree";
    } else if (t.held != p->reserved) {
        why = "reserved differs from the bytes held from the driver";
    } else if (p->reserved > p->cfg.limit) {
        why = "reserved exceeds the limit";
    } else if (p->peak < p->current || p->peak_reserved < p->reserved) {
        why = "a peak is below its current value";
    } else if (p->cfg.budget != NULL && atomic_load(&p->cfg.budget->reserved) < p->reserved) {
        why = "the card budget holds less than this pool";
    } else {
        why = check_stats_locked(p);
    }
    vram_status s = VRAM_OK;
    if (why != NULL) s = vram__fail(VRAM_ERR_INTERNAL, "vram_check(%s): %s", p->cfg.name, why);
    for (int i = POOL_SHARDS - 1; i >= 0; i--) pool_spin_unlock(&p->ptr_table[i].lock);
    for (int i = TC_CACHES - 1; p->tc.caches != NULL && i >= 0; i--) pool_spin_unlock(&p->tc.caches[i].lock);
    return s;
}
