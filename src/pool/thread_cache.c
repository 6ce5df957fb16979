/*
 * thread_cache.c: per-thread caches in front of the pool.
 *
 * A block the program frees with vram_free is parked in the freeing thread's cache, by its exact
 * rounded size, instead of going back to the free bins; the next vram_malloc of that size on a
 * thread of the same cache takes it back without the arena lock, without a best-fit search, split,
 * merge or a look at the mappings; threads that hit their caches at once meet only on the shard of
 * the pointer table their block hashes to. How often a thread asks again for a size it freed
 * depends on the workload: on the traces 89% of requests (gpt2_generate) down to 16-32%
 * (bert_varlen); the rest go to the pool under its lock.
 *
 * What keeps the pool honest:
 *   - parked blocks stay USED in the pool (in `current`, under the limit and in the mappings'
 *     counts), so the limit and `reserved` are exactly what they are without the caches;
 *   - before the pool would map or take new memory, or fail, it flushes every cache and searches
 *     again (pool_alloc_locked, arena_alloc.c), so parked blocks never cost growth nor an out-of-memory error;
 *     vram_trim, idle release and the pool's destruction flush too;
 *   - a cache holds at most tc.cap bytes and only blocks of up to tc.max_block (tc.cap 0: caches
 *     only keep the figures below, nothing is parked);
 *   - caches park nothing until a second thread calls vram_malloc on the pool (tc.multi): a
 *     single-threaded program gets exactly the pool without caches, placement and peak included;
 *   - the program's figures stay exact whenever no call is in flight: in use = the pool's
 *     `current` minus the parked bytes, allocations = the pool's plus the cache hits, frees = the
 *     pool's, less the flushed blocks, plus the parked ones. The peak is the pool's, which counts
 *     parked blocks as in use: with several threads it may exceed the exact peak by what their
 *     caches held at that moment (at most tc.cap each), never fall below it.
 *
 * Threads take caches in the order they first allocate (thread k uses cache k mod TC_CACHES), so a
 * cache outlives its thread and serves a later one; two threads sharing a cache stay correct (its
 * lock) and only contend. Lock order: arena lock, then a cache, then a shard of the pointer table.
 *
 * The arrow goes one way: the arena calls the caches, never the other way; a flush hands the
 * arena the blocks it took out of the caches, and the arena releases them (vram__pool_flush_caches_locked).
 */
#include <stdlib.h>

#include "pool/arena.h"

_Static_assert(TC_BINS && (TC_BINS & (TC_BINS - 1)) == 0, "TC_BINS is a power of two");

int vram__tc_init(pool_arena *p) {
    atomic_init(&p->tc.first, -1);
    atomic_init(&p->tc.multi, 0);
    p->tc.caches = aligned_alloc(64, sizeof(pool_tcache) * TC_CACHES);
    if (p->tc.caches == NULL) {
        p->tc.cap = 0;
        return -1;
    }
    for (int i = 0; i < TC_CACHES; i++) {
        pool_tcache *tc = &p->tc.caches[i];
        atomic_init(&tc->lock.held, 0);
        atomic_init(&tc->cached, 0);
        tc->hits = tc->parks = 0;
        for (int b = 0; b < TC_BINS; b++) tc->bin[b] = (tc_bin){0, NULL};
    }
    return 0;
}

void vram__tc_destroy(pool_arena *p) {
    free(p->tc.caches);
    p->tc.caches = NULL;
}

/* A second cache is in use: from now on caches park, and touch the pointer table without the pool
 * lock. Set under the arena lock: every section that used the shards without their locks has ended,
 * and the later ones see it; a thread that sees it (acquire) sees all of that. */
static void tc_start_parking(pool_arena *p) {
    pool_lock_take(&p->lock);
    atomic_store_explicit(&p->tc.multi, 1, memory_order_release);
    pool_lock_give(&p->lock);
}

/* The thread remembers the last arena it used and its cache there: an arena's caches live as long as
 * the arena, and its uid tells a new arena created at a freed one's address from the old one. */
pool_tcache *vram__tc_mine(pool_arena *p, vram__pool_thread *me) {
    if (me->tc_pool == p && me->tc_uid == p->uid) return me->tc;      /* this thread was here before */
    int k = (int)((vram__pool_thread_seq(me) - 1) % TC_CACHES);
    int first = atomic_load_explicit(&p->tc.first, memory_order_relaxed);
    if (first != k && !atomic_load_explicit(&p->tc.multi, memory_order_relaxed)) {
        int none = -1;
        if (!(first == -1 && atomic_compare_exchange_strong(&p->tc.first, &none, k)) &&
            atomic_load(&p->tc.first) != k) {
            tc_start_parking(p);
        }
    }
    me->tc_pool = p;
    me->tc_uid = p->uid;
    me->tc = &p->tc.caches[k];
    return me->tc;
}

static tc_bin *bin_of(pool_tcache *tc, size_t rounded) {
    size_t h = (rounded >> 8) * (size_t)0x9e3779b97f4a7c15ull;
    return &tc->bin[(h >> 20) & (TC_BINS - 1)];
}

int vram__tc_take(pool_arena *p, pool_tcache *tc, size_t rounded, pool_chunk **out) {
    if (rounded > p->tc.max_block || !atomic_load_explicit(&p->tc.multi, memory_order_acquire)) return 0;
    pool_spin_lock(&tc->lock, POOL_RANK_TCACHE);
    tc_bin *b = bin_of(tc, rounded);
    pool_chunk *c = b->size == rounded ? b->head : NULL;
    if (c == NULL) {
        pool_spin_unlock(&tc->lock);
        return 0;
    }
    pool_shard *sh = pool_shard_of(p, c->addr);
    pool_spin_lock(&sh->lock, POOL_RANK_SHARD);
    int room = !c->asleep && vram__ptr_map_insert(&sh->map, c->addr, c) == 0;   /* (asleep: its arena's flush takes it) */
    pool_spin_unlock(&sh->lock);
    if (!room) {                       /* no host memory for the table: let the pool say so */
        pool_spin_unlock(&tc->lock);
        return 0;
    }
    b->head = c->cache_next;
    c->cache_next = NULL;
    c->cached = 0;
    c->stream = NULL;                  /* a plain request's block */
    atomic_store_explicit(&tc->cached, atomic_load_explicit(&tc->cached, memory_order_relaxed) - c->size,
                          memory_order_relaxed);
    tc->hits++;
    pool_spin_unlock(&tc->lock);
    *out = c;
    return 1;
}

int vram__tc_park(pool_arena *p, pool_tcache *tc, uint64_t addr) {
    if (!atomic_load_explicit(&p->tc.multi, memory_order_acquire)) return 0;
    pool_spin_lock(&tc->lock, POOL_RANK_TCACHE);
    size_t cached = atomic_load_explicit(&tc->cached, memory_order_relaxed);
    pool_shard *sh = pool_shard_of(p, addr);
    pool_spin_lock(&sh->lock, POOL_RANK_SHARD);
    pool_chunk *c = vram__ptr_map_get(&sh->map, addr);   /* a USED chunk's size does not change */
    tc_bin *b = c ? bin_of(tc, c->size) : NULL;
    int park = c != NULL && c->uses == NULL && !c->slot && !c->asleep &&   /* (a plan slot: plan_slots.c; asleep: sleep.c) */
               c->size <= p->tc.max_block && c->size <= p->tc.cap - cached && (b->head == NULL || b->size == c->size);
    if (park) vram__ptr_map_take(&sh->map, addr);
    pool_spin_unlock(&sh->lock);
    if (park) {
        b->size = c->size;
        c->cache_next = b->head;
        c->cached = 1;
        b->head = c;
        atomic_store_explicit(&tc->cached, cached + c->size, memory_order_relaxed);
        tc->parks++;
    }
    pool_spin_unlock(&tc->lock);
    return park;
}

int vram__tc_parking(const pool_arena *p) {
    return p->tc.cap != 0 && atomic_load_explicit(&p->tc.multi, memory_order_relaxed);
}

int vram__tc_holds_any(pool_arena *p) {
    if (!vram__tc_parking(p)) return 0;
    for (int i = 0; i < TC_CACHES; i++) {
        if (atomic_load_explicit(&p->tc.caches[i].cached, memory_order_relaxed) != 0) return 1;
    }
    return 0;
}

pool_chunk *vram__tc_flush_all_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *first = NULL, **tail = &first;      /* in the order of the caches and their bins */
    if (p->tc.cap == 0) return NULL;
    for (int i = 0; i < TC_CACHES; i++) {
        pool_tcache *tc = &p->tc.caches[i];
        if (atomic_load_explicit(&tc->cached, memory_order_relaxed) == 0) continue;
        pool_spin_lock(&tc->lock, POOL_RANK_TCACHE);
        for (int k = 0; k < TC_BINS; k++) {
            for (pool_chunk *c = tc->bin[k].head; c != NULL; c = c->cache_next) {
                c->cached = 0;
                *tail = c;
                tail = &c->cache_next;
            }
            tc->bin[k].head = NULL;
        }
        atomic_store_explicit(&tc->cached, 0, memory_order_relaxed);
        pool_spin_unlock(&tc->lock);
    }
    *tail = NULL;
    return first;
}

void vram__tc_stats_locked(pool_arena *p, tc_stats *out) {
    POOL_ASSERT_LOCKED(p);
    *out = (tc_stats){0};
    for (int i = 0; p->tc.caches != NULL && i < TC_CACHES; i++) {
        pool_tcache *tc = &p->tc.caches[i];
        pool_spin_lock(&tc->lock, POOL_RANK_TCACHE);
        out->hits += tc->hits;
        out->parks += tc->parks;
        out->cached += atomic_load_explicit(&tc->cached, memory_order_relaxed);
        pool_spin_unlock(&tc->lock);
    }
}
