/*
 * spin.h: a test-and-test-and-set lock for the pool's short critical sections (a thread cache, a
 * shard of the pointer table): one atomic exchange to take it when free, a plain release store
 * to give it back. A waiter spins briefly, then yields, so that more threads than cores still
 * make progress.
 */
#ifndef VRAM_POOL_SPIN_H
#define VRAM_POOL_SPIN_H

#include <sched.h>
#include <stdatomic.h>

#include "pool/debug.h"

typedef struct pool_spin {
    atomic_int held;
} pool_spin;

static inline void pool_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* `rank`: the lock's place in the lock order (debug.h: POOL_RANK_TCACHE or POOL_RANK_SHARD), checked
 * in debug builds only. */
static inline void pool_spin_lock(pool_spin *s, int rank) {
    int spins = 0;
    while (atomic_exchange_explicit(&s->held, 1, memory_order_acquire)) {
        while (atomic_load_explicit(&s->held, memory_order_relaxed)) {
            if (++spins < 64) pool_spin_pause(); else sched_yield();
        }
    }
    POOL_DEBUG_TAKE(s, rank);
    (void)rank;
}

static inline void pool_spin_unlock(pool_spin *s) {
    POOL_DEBUG_GIVE(s);
    atomic_store_explicit(&s->held, 0, memory_order_release);
}

#endif /* VRAM_POOL_SPIN_H */
