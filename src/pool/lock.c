/*
 * lock.c: the arena lock's slow paths (lock.h): spin, then sleep on a futex (Linux).
 */
#include "pool/lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool/spin.h"

#define LOCK_SPINS 100

void pool_lock_wait(pool_lock *l) {
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

void pool_lock_wake(pool_lock *l) {
    syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
