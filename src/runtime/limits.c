/*
 * limits.c: limits that move while the runtime runs, as the runtime applies them: a limit set on
 * the process from outside it (vram__limit_post, per physical card: the hook through which `vram
 * limit` reaches a libvram program, the ledger read by the caller), and the watch over logical
 * devices left above a limit that was lowered (vram_set_live_limit, vram_set_memory_fraction, a
 * posted limit), whose idle memory goes back at their next calls until frees bring them under it.
 * The pool keeps the caps themselves (arenas.c, "limits that move").
 *
 * How it reaches the program without costing the warm path anything: posting stores the value and
 * raises RT_ATTENTION in the word every reader already tests on entry (vram__rt_writer, runtime.c),
 * so the next call takes the rwlock's read side and, there, vram__limits_apply. That clears the bit
 * first, applies what was posted, trims every logical device above its limit, and raises the bit
 * again while one still is: a device over its limit costs each call the trip through the rwlock and
 * a look at the pools until it is under (a training step's frees bring it there within the step).
 *
 * Invariants: posted_inv[i] is ~ what the last post said (0: none); applied_inv[i] ~ what the
 * card's budget and pools were given, under limits_mu; a card's budget cap is min(its configured cap,
 * applied). Locks: limits_mu (apply only: two readers applying at once would otherwise leave an
 * older value last), taken with the runtime held for reading, before any pool lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "runtime/runtime.h"

#define rt vram__rt

/* Both kept inverted (~bytes), so that the zero they start with means none (SIZE_MAX). */
static _Atomic size_t  posted_inv[VRAM_MAX_DEVICES];
static size_t          applied_inv[VRAM_MAX_DEVICES];
static pthread_mutex_t limits_mu = PTHREAD_MUTEX_INITIALIZER;

void vram__limit_post(int physical_index, size_t bytes) {
    if (physical_index < 0 || physical_index >= VRAM_MAX_DEVICES) return;
    atomic_store(&posted_inv[physical_index], ~bytes);
    atomic_fetch_or(&vram__rt_writer, RT_ATTENTION);
}

size_t vram__limit_posted(int physical_index) {
    if (physical_index < 0 || physical_index >= VRAM_MAX_DEVICES) return SIZE_MAX;
    return ~atomic_load(&posted_inv[physical_index]);
}

void vram__limits_watch(void) {
    atomic_fetch_or(&vram__rt_writer, RT_ATTENTION);
}

void vram__limits_started(void) {
    pthread_mutex_lock(&limits_mu);
    int any = 0;
    for (int i = 0; i < VRAM_MAX_DEVICES; i++) {
        applied_inv[i] = 0;                    /* the budgets start with none (runtime.c) */
        any |= atomic_load(&posted_inv[i]) != 0;
    }
    pthread_mutex_unlock(&limits_mu);
    if (any) vram__limits_watch();
}

/* Card i's budget and logical devices take the posted limit `bytes` (limits_mu held). */
static void apply_card_locked(int i, size_t bytes) {
    vram__card_budget *b = &rt.budgets[i];
    size_t configured = rt.limit_in_force[i] ? rt.limit_in_force[i] : SIZE_MAX;
    atomic_store(&b->external, bytes);
    atomic_store(&b->cap, bytes < configured ? bytes : configured);
    for (int k = 0; k < rt.nlogical; k++) {
        if (rt.logical[k].info.physical_index == i) vram__pool_set_external_limit(rt.logical[k].pool, bytes);
    }
}

void vram__limits_apply(void) {
    atomic_fetch_and(&vram__rt_writer, ~RT_ATTENTION);   /* first: a post from now on raises it again */
    pthread_mutex_lock(&limits_mu);
    for (int i = 0; i < rt.ndev && i < VRAM_MAX_DEVICES; i++) {
        size_t want = atomic_load(&posted_inv[i]);
        if (want == applied_inv[i] || !rt.visible_in_force[i]) continue;
        applied_inv[i] = want;
        apply_card_locked(i, ~want);
    }
    int over_any = 0;
    for (int k = 0; k < rt.nlogical; k++) {
        size_t limit = 0, over = 0;
        vram__pool_limit_now(rt.logical[k].pool, &limit, &over);
        if (over == 0) continue;
        vram__pool_fit(rt.logical[k].pool);
        vram__pool_limit_now(rt.logical[k].pool, &limit, &over);
        over_any |= over > 0;
    }
    pthread_mutex_unlock(&limits_mu);
    if (over_any) vram__limits_watch();
}
