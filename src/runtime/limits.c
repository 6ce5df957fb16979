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
 * The ledger (common/ledger_member.h): at the start the runtime decides whether the process is listed
 * and how (vram__limits_link_wlocked: following the preload library's ledger slots under `vram run`
 * on the CUDA backend, ledger slots of its own under `vram run` on the simulated backend or with
 * VRAM_GROUP or VRAM_LEDGER_DIR, else not at all), and a watcher thread waits on its ledger slots'
 * limits_gen (a shared futex every setter wakes; a quarter of a second at most) and posts the limits
 * set from outside that it reads there: the hook above, so the warm path pays nothing for it.
 *
 * Invariants: posted_inv[i] is ~ what the last post said (0: none); applied_inv[i] ~ what the
 * card's budget and pools were given, under limits_mu; a card's budget cap is min(its configured cap,
 * applied). Locks: limits_mu (apply only: two readers applying at once would otherwise leave an
 * older value last), taken with the runtime held for reading, before a device allocator's grow_lock
 * or any arena lock.
 */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ledger_member.h"
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

/* ---- the ledger: `vram limit` and groups reaching a libvram process (common/ledger_member.h) ---- */

static ledger_member member;
static int           member_on;          /* the runtime started with the process in the ledger */
static pthread_t     watcher;
static int           watcher_running;
static atomic_int    watcher_stop;

/* Whether libvram_preload.so (`vram run`, the Slurm plugin) is loaded in this process. */
static int preload_found(struct dl_phdr_info *info, size_t size, void *found) {
    (void)size;
    const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    name = name ? name + 1 : info->dlpi_name;
    if (name && strncmp(name, "libvram_preload.so", 18) == 0) *(int *)found = 1;
    return *(int *)found;
}

int vram__limits_preload_present(void) {
    int found = 0;
    dl_iterate_phdr(preload_found, &found);
    return found;
}

/* The watcher: waits for a change of the process's ledger slots (a shared futex that every setter wakes, or
 * a quarter of a second), reads the limits set from outside and posts them; the next call applies. */
static void *watcher_main(void *arg) {
    (void)arg;
    uint64_t limit[LEDGER_MEMBER_CARDS];
    while (!atomic_load(&watcher_stop)) {
        if (vram__ledger_member_poll(&member, limit) > 0) {
            for (int i = 0; i < LEDGER_MEMBER_CARDS && i < VRAM_MAX_DEVICES; i++)
                if (member.card[i].used) vram__limit_post(i, limit[i] >= SIZE_MAX ? SIZE_MAX : (size_t)limit[i]);
        }
        vram__ledger_member_wait(&member, 250);
    }
    return NULL;
}

vram_status vram__limits_link_wlocked(const vram__env *env, const size_t *start_limit) {
    int preload = vram__limits_preload_present();
    /* under the preload library, the CUDA backend's driver calls are its to count: its ledger slots are followed */
    int follow = preload && strcmp(rt.backend->name, "cuda") == 0;
    if (!follow && !preload && !env->group[0] && !env->ledger_dir_set) return VRAM_OK;   /* not listed */
    vram__ledger_member_init(&member);
    member.follow = follow;
    snprintf(member.group, sizeof member.group, "%s", env->group);
    member.group_limit = env->group[0] && env->group_limit.set ? env->group_limit.bytes : 0;
    member.limit_max = env->limit_max.set ? env->limit_max.bytes : 0;
    member.group_limit_max = env->group_limit_max.set ? env->group_limit_max.bytes : 0;
    member.priority = env->group[0] ? env->priority : (int)LEDGER_PRIORITY_GUARANTEED;
    for (int i = 0; i < rt.ndev && i < LEDGER_MEMBER_CARDS; i++) {
        if (!rt.visible_in_force[i]) continue;
        ledger_member_card *c = &member.card[i];
        c->used = 1;
        snprintf(c->uuid, sizeof c->uuid, "%s", rt.devices[i].uuid[0] ? rt.devices[i].uuid : "unknown");
        if (!rt.devices[i].uuid[0]) snprintf(c->uuid, sizeof c->uuid, "unknown-%d", i);
        c->start_limit = start_limit[i];
        c->card_bytes = rt.devices[i].total_bytes;
        const vram__alloc_conf *a = &rt.alloc_conf_in_force;
        c->overflow_max = !a->overflow ? 0 : a->overflow_max_mb < 0 ? (start_limit[i] ? start_limit[i] : c->card_bytes)
                                                                    : (uint64_t)a->overflow_max_mb * VRAM_MIB;
    }
    if (vram__ledger_member_open(&member) != 0) {
        const char *log = getenv("VRAM_LOG");
        if (member.group_limit || (log && strcmp(log, "1") == 0))
            fprintf(stderr, "vram: the ledger is unavailable (%s): this process is not listed by vram top, a limit set "
                    "from outside does not reach it%s\n", member.said,
                    member.group_limit ? ", and its group's budget holds for its own use alone" : "");
    }
    member_on = 1;
    for (int i = 0; !follow && i < rt.ndev && i < LEDGER_MEMBER_CARDS; i++) {
        if (!member.card[i].used) continue;
        rt.budgets[i].member = &member;     /* (before the pools: a preallocation passes the gate) */
        rt.budgets[i].member_card = i;
        atomic_store(&rt.budgets[i].overflow, 0);
    }
    if (!member.open) return VRAM_OK;       /* nothing to watch */
    atomic_store(&watcher_stop, 0);
    if (pthread_create(&watcher, NULL, watcher_main, NULL) != 0) {
        vram__limits_unlink_wlocked();
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "could not start the thread that follows the ledger's limits");
    }
    watcher_running = 1;
    return VRAM_OK;
}

void vram__limits_watcher_stop_wlocked(void) {
    if (!watcher_running) return;
    atomic_store(&watcher_stop, 1);
    vram__ledger_member_wake_all(&member);
    pthread_join(watcher, NULL);
    watcher_running = 0;
}

void vram__limits_unlink_wlocked(void) {
    vram__limits_watcher_stop_wlocked();
    if (!member_on) return;
    for (int i = 0; i < VRAM_MAX_DEVICES; i++) rt.budgets[i].member = NULL;
    vram__ledger_member_close(&member);
    member_on = 0;
}

void vram__limits_forked(void) {
    watcher_running = 0;                     /* (it stayed in the parent) */
    if (!member_on) return;
    for (int i = 0; i < VRAM_MAX_DEVICES; i++) rt.budgets[i].member = NULL;
    vram__ledger_member_forget(&member);           /* the ledger slots are the parent's */
    member_on = 0;
}
