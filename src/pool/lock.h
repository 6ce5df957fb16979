/*
 * lock.h: the arena lock. Taking it when free is one compare-and-swap inline, giving it back one
 * exchange; a thread that finds it held spins a little (the sections are short: a best-fit search,
 * a split or a merge) and then sleeps on a futex, since a section that maps memory lasts tens of
 * microseconds. Same cost on contention as glibc's adaptive mutex, without its call and type checks
 * on every call (about 45 instructions a call on the traces).
 *
 * state: 0 free, 1 held, 2 held and a thread may be asleep on it (the holder wakes one when it
 * gives it back).
 *
 * The bias (lock.c): a lock that one thread alone has taken many times in a row is biased to it
 * (`owner`), and from then on that thread takes and gives it with plain stores and loads, no
 * read-modify-write: it marks itself inside (owner_in), and goes in unless the bias was revoked. A
 * thread that takes the lock by `state` while it is biased to another revokes the bias: it marks
 * it revoked, runs membarrier (the owner's fence between its mark and its look at `revoked`, as the
 * runtime's readers do), waits until the owner is out, and the lock is a plain one again until a
 * thread has taken it alone `need` times in a row: 64, twice as many after a bias that was revoked
 * before it served 64 x need takes (a lock shared often stops being biased; one whose bias a rare
 * query or tick revokes gets it back as soon as at first).
 * Only with membarrier registered (vram__membarrier_ready) and by pool_lock_take_by, which the
 * allocation and free paths use with the calling thread's record; every other taker goes by state.
 * by_bias is written inside biased sections only, so whoever holds the lock reads it at the give.
 * A revoker that finds the owner inside sleeps on owner_in (a futex, 1 ms at most a wait) and the
 * owner, leaving, wakes it when it sees the revocation.
 */
#ifndef VRAM_POOL_LOCK_H
#define VRAM_POOL_LOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/debug.h"

#define POOL_LOCK_NEED 64   /* takes in a row by one thread that bias a lock to it */

typedef struct pool_lock {
    atomic_int            state;
    _Atomic(const void *) owner;      /* the thread the lock is biased to (NULL: none) */
    atomic_int            owner_in;   /* 1 while the owner is in (or about to be); written by it alone */
    atomic_int            revoked;    /* 1 from a revocation until the owner takes the bias again */
    int                   by_bias;    /* the holder took it by the bias */
    uint64_t              bias_uses;  /* the owner's takes by the bias since it was given (written by it) */
    /* under the lock held by state */
    const void           *streak_by;  /* the thread of the last takes by state in a row (NULL: none) */
    uint32_t              streak;     /* how many */
    uint32_t              need;       /* takes in a row that bias the lock to their thread: 64, doubled at a
                                         revocation that came before 64 x need takes by the bias */
} pool_lock;

void vram__pool_lock_wait(pool_lock *l);   /* lock.c: the held case */
void vram__pool_lock_wake(pool_lock *l);
void vram__pool_lock_unbias(pool_lock *l);                       /* held by state, biased to another */
void vram__pool_lock_wake_revoker(pool_lock *l);                 /* the owner left while a revoker waits */
void vram__pool_lock_take_slow(pool_lock *l, const void *self);  /* by state; may bias it to self */

static inline void pool_lock_init(pool_lock *l) {
    atomic_init(&l->state, 0);
    atomic_init(&l->owner, NULL);
    atomic_init(&l->owner_in, 0);
    atomic_init(&l->revoked, 0);
    l->by_bias = 0;
    l->bias_uses = 0;
    l->streak_by = NULL;
    l->streak = 0;
    l->need = POOL_LOCK_NEED;
}

static inline void pool_lock_take(pool_lock *l) {
    int free_state = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &free_state, 1, memory_order_acquire,
                                                 memory_order_relaxed)) {
        vram__pool_lock_wait(l);
    }
    if (__builtin_expect(atomic_load_explicit(&l->owner, memory_order_relaxed) != NULL, 0)) vram__pool_lock_unbias(l);
    l->streak_by = NULL;
    POOL_DEBUG_TAKE(l, POOL_RANK_ARENA);
}

/* Takes it as thread `self` (not NULL): by the bias when it is self's. */
static inline void pool_lock_take_by(pool_lock *l, const void *self) {
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == self) {
        atomic_store_explicit(&l->owner_in, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);       /* a revoker's membarrier is the fence */
        if (!atomic_load_explicit(&l->revoked, memory_order_acquire)) {
            l->by_bias = 1;
            l->bias_uses++;
            POOL_DEBUG_TAKE(l, POOL_RANK_ARENA);
            return;
        }
        atomic_store_explicit(&l->owner_in, 0, memory_order_release);
        vram__pool_lock_wake_revoker(l);
    }
    vram__pool_lock_take_slow(l, self);
    POOL_DEBUG_TAKE(l, POOL_RANK_ARENA);
}

static inline void pool_lock_give(pool_lock *l) {
    POOL_DEBUG_GIVE(l);
    if (l->by_bias) {
        l->by_bias = 0;
        atomic_store_explicit(&l->owner_in, 0, memory_order_release);
        /* a revoker that found the owner inside ran membarrier before: this load sees its mark */
        if (__builtin_expect(atomic_load_explicit(&l->revoked, memory_order_relaxed), 0)) vram__pool_lock_wake_revoker(l);
        return;
    }
    if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2) vram__pool_lock_wake(l);
}

#endif /* VRAM_POOL_LOCK_H */
