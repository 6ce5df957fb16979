/*
 * debug.h: the pool's assertions of its own rules, in debug builds only (VRAM_DEBUG: the CMake option of
 * that name, on by default with CMAKE_BUILD_TYPE=Debug, as in CI's sanitizer builds). In other builds
 * every macro here is empty and nothing of debug.c is called: no cost.
 *
 * What is checked (a failure prints one line naming the rule, the file and the line to stderr, and
 * aborts):
 *   - the arena lock is held by the calling thread in every `*_locked` function of an arena's files
 *     (POOL_ASSERT_LOCKED at their start: SQLite's mem5 asserts its mutex in every ...Unsafe function);
 *   - the lock order (docs/DESIGN.md, "Locks, in order"): a thread takes the arena lock (rank
 *     POOL_RANK_ARENA), then a thread cache's spin lock (POOL_RANK_TCACHE), then a pointer-table
 *     shard's (POOL_RANK_SHARD), never one of a lower rank while it holds one of a higher (several of
 *     one rank at once are allowed: statistics lock every arena, the check every cache and shard). Each
 *     thread keeps the locks it holds (debug.c, thread-local), as jemalloc's witnesses do;
 *   - a chunk's shape at hand-out and at free (POOL_ASSERT_CHUNK: USED, a positive multiple of the
 *     unit, its address neighbours touching it);
 *   - on the simulated card, whose device addresses are the host's, a block handed out is filled with
 *     POOL_FILL_NEW and a block freed to the free bins with POOL_FILL_FREED (its first
 *     POOL_FILL_BYTES), so that a program reading memory it never wrote, or after its free, reads
 *     a pattern rather than what it left (mem5's debug fills).
 * Locks: the tracking is per thread and takes none.
 */
#ifndef VRAM_POOL_DEBUG_H
#define VRAM_POOL_DEBUG_H

#include <stddef.h>
#include <stdint.h>

enum { POOL_RANK_ARENA = 3, POOL_RANK_TCACHE = 4, POOL_RANK_SHARD = 5 };

#define POOL_FILL_NEW 0xa5
#define POOL_FILL_FREED 0xdd
#define POOL_FILL_BYTES ((size_t)4096)

#ifdef VRAM_DEBUG
/* The calling thread takes (after it got it) or gives (before it lets it go) lock l of `rank`. */
void vram__pool_debug_take(const void *l, int rank);
void vram__pool_debug_give(const void *l);
/* Whether the calling thread holds lock l. */
int  vram__pool_debug_holds(const void *l);
_Noreturn void vram__pool_debug_fail(const char *file, int line, const char *rule);
/* The first POOL_FILL_BYTES of block c of arena p filled with `byte` on the simulated card (whose
 * device addresses are the host's), where its memory is mapped; nothing on other backends, nor for
 * a block asleep. */
struct pool_arena;
struct pool_chunk;
void vram__pool_debug_fill(const struct pool_arena *p, const struct pool_chunk *c, int byte);

#define POOL_ASSERT(cond, rule) ((cond) ? (void)0 : vram__pool_debug_fail(__FILE__, __LINE__, rule))
#define POOL_DEBUG_TAKE(l, rank) vram__pool_debug_take((l), (rank))
#define POOL_DEBUG_GIVE(l) vram__pool_debug_give(l)
#define POOL_DEBUG_FILL(p, c, byte) vram__pool_debug_fill((p), (c), (byte))
#else
#define POOL_ASSERT(cond, rule) ((void)0)
#define POOL_DEBUG_TAKE(l, rank) ((void)0)
#define POOL_DEBUG_GIVE(l) ((void)0)
#define POOL_DEBUG_FILL(p, c, byte) ((void)0)
#endif

/* In a `*_locked` function of an arena: its lock is held by the calling thread. */
#define POOL_ASSERT_LOCKED(p) POOL_ASSERT(vram__pool_debug_holds(&(p)->lock), "the arena lock is held in a _locked function")
/* Chunk c as handed out or freed: USED, a positive multiple of the unit, touching its neighbours. */
#define POOL_ASSERT_CHUNK(c)                                                                            \
    POOL_ASSERT((c)->state == CHUNK_USED && (c)->size > 0 && (c)->size % VRAM_POOL_UNIT == 0 &&         \
                    ((c)->prev == NULL || (c)->prev->addr + (c)->prev->size == (c)->addr) &&            \
                    ((c)->next == NULL || (c)->addr + (c)->size == (c)->next->addr),                    \
                "a block handed out or freed is USED, a positive multiple of 256 bytes, between its neighbours")

#endif /* VRAM_POOL_DEBUG_H */
