/*
 * ids.c: the pool's process-wide sequences, a leaf that every file of the pool may call: the uids
 * of pools and arenas (one counter for both: a thread's records compare a uid only with uids of
 * its own kind, so that a pool or arena created at a freed one's address is told from it), and the
 * order in which threads first called on any pool (arenas.c places threads on arenas by it,
 * thread_cache.c on caches).
 *
 * Invariants: uids start at 1 and are never reused; a thread's seq is set once, by the thread
 * itself (its vram__pool_thread record is its own). Atomics only, no lock.
 */
#include "pool/arena.h"

static atomic_ullong uids;               /* pools and arenas created so far */
static atomic_uint threads;              /* threads that asked for their seq so far */

uint64_t vram__pool_new_uid(void) {
    return atomic_fetch_add(&uids, 1) + 1;
}

unsigned vram__pool_thread_seq(vram__pool_thread *me) {
    if (me->seq == 0) me->seq = atomic_fetch_add_explicit(&threads, 1, memory_order_relaxed) + 1;
    return me->seq;
}
