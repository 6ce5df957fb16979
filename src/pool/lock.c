/*
 * lock.c: the arena lock's slow paths (lock.h): spin, then sleep on a futex (Linux); the bias,
 * given and revoked.
 */
#include "pool/lock.h"

#include <linux/futex.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/membarrier.h"
#include "pool/spin.h"

#define LOCK_SPINS 100
#define LOCK_NEED_MAX (1u << 24)   /* takes in a row that bias a lock whose bias was revoked often */
#ifdef VRAM_NO_LOCK_BIAS             /* (a build without the bias, to measure it: bench/README.md) */
#define LOCK_BIAS 0
#else
#define LOCK_BIAS 1
#endif

void vram__pool_lock_wait(pool_lock *l) {
    for (int i = 0; i < LOCK_SPINS; i++) {
        int expected = 0;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
        pool_spin_pause();
    }
    /* Marked 2 before sleeping: whoever gives it back then wakes a sleeper. Taken as 2 too (we
     * cannot know that no other thread sleeps), which costs at most one needless wake. */
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0) {
        syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
}

void vram__pool_lock_wake(pool_lock *l) {
    syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Held by state while biased to another thread: the bias goes. The revoked mark, then the owner's
 * fence (membarrier), so that an owner on its way in either is seen inside here or sees the mark
 * and takes the lock by state; then wait for it to leave. */
void vram__pool_lock_unbias(pool_lock *l) {
    atomic_store(&l->revoked, 1);
    vram__membarrier_fence();
    for (int i = 0; atomic_load_explicit(&l->owner_in, memory_order_acquire); i++) {
        if (i < LOCK_SPINS) {
            pool_spin_pause();
        } else {   /* (a section that maps memory lasts tens of microseconds; the owner wakes this) */
            struct timespec ms = {0, 1000000};
            syscall(SYS_futex, &l->owner_in, FUTEX_WAIT_PRIVATE, 1, &ms, NULL, 0);
        }
    }
    atomic_store_explicit(&l->owner, NULL, memory_order_relaxed);
    if (l->bias_uses >= (uint64_t)l->need * 64) l->need = POOL_LOCK_NEED;   /* it paid for its revocation */
    else if (l->need < LOCK_NEED_MAX) l->need *= 2;
}

void vram__pool_lock_wake_revoker(pool_lock *l) {
    syscall(SYS_futex, &l->owner_in, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void vram__pool_lock_take_slow(pool_lock *l, const void *self) {
    int free_state = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &free_state, 1, memory_order_acquire,
                                                 memory_order_relaxed)) {
        vram__pool_lock_wait(l);
    }
    const void *owner = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (owner != NULL && owner != self) vram__pool_lock_unbias(l);
    if (l->streak_by != self) {
        l->streak_by = self;
        l->streak = 0;
    }
    if (++l->streak >= l->need && owner == NULL && LOCK_BIAS && vram__membarrier_ready()) {   /* biased to self from */
        l->bias_uses = 0;
        atomic_store_explicit(&l->revoked, 0, memory_order_relaxed);            /* its next take on */
        atomic_store_explicit(&l->owner, self, memory_order_relaxed);
    }
}
