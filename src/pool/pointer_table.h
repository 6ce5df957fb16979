/*
 * pointer_table.h: the pointer table, every live block of an arena by its address (pool_arena's
 * `ptr_table`: POOL_SHARDS shards of a ptr_map each, with a spin lock each, so that frees on several
 * threads do not meet on one lock). Helpers of the header (POOL_HELPER, arena.h): every hand-out and
 * free goes through them. Lock order: the arena lock, then a thread cache's, then a shard's.
 */
#ifndef VRAM_POOL_POINTER_TABLE_H
#define VRAM_POOL_POINTER_TABLE_H

#include "pool/arena.h"

/* Both under the arena lock. Until the caches start parking (tc.multi, set under the arena lock
 * before any thread may touch a shard without it), the arena lock alone guards the shards, and
 * their own locks are not taken: one atomic less per call for a single thread. */
POOL_HELPER int shards_shared(const pool_arena *p) {
    return atomic_load_explicit(&p->tc.multi, memory_order_relaxed);   /* stable under the arena lock */
}

/* The shard of addr, its lock taken when the shards are shared; shard_open gives it back. */
POOL_HELPER pool_shard *shard_hold(pool_arena *p, uint64_t addr, int shared) {
    pool_shard *sh = pool_shard_of(p, addr);
    if (shared) pool_spin_lock(&sh->lock, POOL_RANK_SHARD);
    return sh;
}

POOL_HELPER void shard_open(pool_shard *sh, int shared) {
    if (shared) pool_spin_unlock(&sh->lock);
}

/* 0, or -1 without host memory for a larger table. Always inlined: left to the compiler, the hand-out
 * called it out of line once the front door moved to arena.c (11 instructions more a warm call,
 * bench/instructions.sh, prealloc on gpt2_train). */
static inline __attribute__((always_inline)) int ptr_table_put(pool_arena *p, pool_chunk *c) {
    int shared = shards_shared(p);
    pool_shard *sh = shard_hold(p, c->addr, shared);
    int r = vram__ptr_map_insert(&sh->map, c->addr, c);
    shard_open(sh, shared);
    return r;
}

/* What a lookup does with the block it finds: get it, take it out of the table, or take it out unless it
 * has uses on other streams (vram__ptr_map_take_unused). Each wrapper below passes a constant, so that the
 * always-inlined lookup keeps one call of ptr_map and no test of `how`: a flag passed down to ptr_map at
 * run time cost the free path 7-13 instructions a call (bench/instructions.sh, gpt2_train: 462-468
 * against 455). */
enum { PTR_TABLE_GET, PTR_TABLE_TAKE, PTR_TABLE_TAKE_UNUSED };

static inline __attribute__((always_inline)) pool_chunk *ptr_table_lookup(pool_arena *p, uint64_t addr,
                                                                          int how) {
    int shared = shards_shared(p);
    pool_shard *sh = shard_hold(p, addr, shared);
    pool_chunk *c = how == PTR_TABLE_GET  ? vram__ptr_map_get(&sh->map, addr)
                  : how == PTR_TABLE_TAKE ? vram__ptr_map_take(&sh->map, addr)
                                          : vram__ptr_map_take_unused(&sh->map, addr);
    shard_open(sh, shared);
    return c;
}

POOL_HELPER pool_chunk *ptr_table_get(pool_arena *p, uint64_t a) { return ptr_table_lookup(p, a, PTR_TABLE_GET); }
POOL_HELPER pool_chunk *ptr_table_take(pool_arena *p, uint64_t a) { return ptr_table_lookup(p, a, PTR_TABLE_TAKE); }
/* The block at a, out of the table unless it has uses on other streams. */
POOL_HELPER pool_chunk *ptr_table_take_unused(pool_arena *p, uint64_t a) {
    return ptr_table_lookup(p, a, PTR_TABLE_TAKE_UNUSED);
}

#endif /* VRAM_POOL_POINTER_TABLE_H */
