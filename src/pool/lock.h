/*
 * lock.h: the arena lock. Taking it when free is one compare-and-swap inline, giving it back one
 * exchange; a thread that finds it held spins a little (the sections are short: a best-fit search,
 * a split or a merge) and then sleeps on a futex, since a section that maps memory lasts tens of
 * microseconds. Same cost on contention as glibc's adaptive mutex, without its call and type checks
 * on every call (about 45 instructions a call on the traces).
 *
 * state: 0 free, 1 held, 2 held and a thread may be asleep on it (the holder wakes one when it
 * gives it back).
 */
#ifndef VRAM_POOL_LOCK_H
#define VRAM_POOL_LOCK_H

#include <stdatomic.h>

typedef struct pool_lock {
    atomic_int state;
} pool_lock;

void pool_lock_wait(pool_lock *l);   /* lock.c: the held case */
void pool_lock_wake(pool_lock *l);

static inline void pool_lock_init(pool_lock *l) {
    atomic_init(&l->state, 0);
}

static inline void pool_lock_take(pool_lock *l) {
    int free_state = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &free_state, 1, memory_order_acquire,
                                                 memory_order_relaxed)) {
        pool_lock_wait(l);
    }
}

static inline void pool_lock_give(pool_lock *l) {
    if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2) pool_lock_wake(l);
}

#endif /* VRAM_POOL_LOCK_H */
