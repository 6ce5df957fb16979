/*
 * runtime.c: discovery of the physical devices, the start of the runtime (configuration frozen,
 * environment applied, logical devices and their pools created) and its shutdown.
 *
 * How much memory a logical device gets (see docs/DESIGN.md):
 *   card cap    = VRAM_MEMORY_LIMIT_<i>, else VRAM_MEMORY_LIMIT, else vram_set_memory_limit;
 *                 VRAM_MEMORY_FRACTION * total when smaller; none when nothing is set.
 *   default     = free memory at start - MinSystemMemory (TensorFlow's rule).
 *   logical cap = min(its configured MiB, card cap) for a split card, else card cap or default.
 * Without growth each pool takes its cap at start; with growth it may reach it. A card's cap also
 * bounds the sum over its logical devices (the shared budget).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/membarrier.h"
#include "runtime/runtime.h"

rt_state vram__rt = {
    .lock = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0},
    .alloc_conf = VRAM_ALLOC_CONF_INIT,
    .idle_lock = PTHREAD_MUTEX_INITIALIZER,
    .idle_wake = PTHREAD_COND_INITIALIZER,
};
#define rt vram__rt

/* ---- discovery ------------------------------------------------------------------------------- */

vram_status vram__rt_discover_wlocked(void) {
    if (rt.discovered) return VRAM_OK;
    const vram__backend *be = NULL;
    vram_status s = vram__env_backend(&be);
    if (s == VRAM_OK) s = be->open();
    if (s != VRAM_OK) return s;
    int n = 0;
    s = be->device_count(&n);
    if (s == VRAM_OK && n <= 0) {
        s = vram__fail(VRAM_ERR_NO_DEVICE, "the %s backend reports no device", be->name);
    }
    if (n > VRAM_MAX_DEVICES) n = VRAM_MAX_DEVICES;
    for (int i = 0; s == VRAM_OK && i < n; i++) {
        memset(&rt.devices[i], 0, sizeof rt.devices[i]);
        s = be->device_props(i, &rt.devices[i], &rt.caps[i]);
        rt.devices[i].index = i;
        snprintf(rt.devices[i].name, sizeof rt.devices[i].name, "/physical_device:GPU:%d", i);
    }
    if (s != VRAM_OK) {
        be->close();
        return s;
    }
    rt.backend = be;
    rt.ndev = n;
    rt.discovered = 1;
    return VRAM_OK;
}

/* ---- start ----------------------------------------------------------------------------------- */

/* TensorFlow's MinSystemMemory (gpu_device.cc): what it leaves to the system by default. */
static size_t min_system_memory(size_t available, int compute_major) {
    if (available < 2 * VRAM_GIB) return 225 * VRAM_MIB;
    if (compute_major <= 6) return 500 * VRAM_MIB;
    if (compute_major <= 7) return 1050 * VRAM_MIB;
    if (compute_major <= 8) return 1536 * VRAM_MIB;
    return 1800 * VRAM_MIB;
}

/* What a card starts with (setup_card): growth, the cap set on it and where from, the default amount. */
typedef struct card_setup {
    int    growth;
    size_t cap;             /* 0: none */
    char   cap_source[VRAM_SOURCE_LEN];
    size_t default_amount;
    char   default_source[VRAM_SOURCE_LEN];
} card_setup;

static vram_status setup_cap(int i, const vram__env *env, card_setup *setup) {
    const vram__env_size *e = env->limit_dev[i].set ? &env->limit_dev[i]
                            : env->limit_all.set    ? &env->limit_all : NULL;
    size_t total = rt.devices[i].total_bytes;
    if (e != NULL) {
        if (e->bytes > total) {
            return vram__fail(VRAM_ERR_CONFLICT, "%s is more than the %zu bytes of %s (%s)", e->text, total,
                              rt.devices[i].name, rt.devices[i].product);
        }
        setup->cap = e->bytes;
        snprintf(setup->cap_source, sizeof setup->cap_source, "%s", e->text);
    } else if (rt.config[i].limit != 0) {
        setup->cap = rt.config[i].limit;
        snprintf(setup->cap_source, sizeof setup->cap_source, "vram_set_memory_limit(%d, %zu)", i, setup->cap);
    }
    if (env->fraction_set) {
        size_t f = (size_t)(env->fraction * (double)total);
        if (f == 0) {                    /* 0 would read as "no limit": every limit gone */
            return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s of the %zu bytes of %s is 0 bytes: a limit must be at "
                              "least one byte (unset the variable for no limit)", env->fraction_text, total,
                              rt.devices[i].name);
        }
        if (setup->cap == 0 || f < setup->cap) {
            setup->cap = f;
            snprintf(setup->cap_source, sizeof setup->cap_source, "%s of %zu bytes", env->fraction_text, total);
        }
    }
    return VRAM_OK;
}

/* Growth on card i: VRAM_FORCE_ALLOW_GROWTH, else what the program set. */
static int setup_growth(int i, const vram__env *env) {
    return env->force_growth >= 0 ? env->force_growth : rt.config[i].growth_set && rt.config[i].growth;
}

static vram_status setup_card(int i, const vram__env *env, card_setup *setup) {
    memset(setup, 0, sizeof *setup);
    setup->growth = setup_growth(i, env);
    vram_status s = setup_cap(i, env, setup);
    if (s != VRAM_OK) return s;
    size_t free_bytes = 0, total = 0;
    s = rt.backend->mem_info(i, &free_bytes, &total);
    if (s != VRAM_OK) return vram__fail_wrap(s, "reading the free memory of %s", rt.devices[i].name);
    size_t reserve = min_system_memory(free_bytes, rt.devices[i].compute_major);
    setup->default_amount = free_bytes > reserve ? free_bytes - reserve : 0;
    snprintf(setup->default_source, sizeof setup->default_source,
             "the default (free memory at start minus %zu MiB left to the system)", reserve / VRAM_MIB);
    return VRAM_OK;
}

/* Adds logical device rt.nlogical on card `phys` with `limit` bytes; `chosen`: the limit was set (an
 * environment variable, the API, a logical device's size), not the card's default. */
static vram_status add_logical_wlocked(int phys, const card_setup *setup, size_t limit, int chosen,
                                       const char *source) {
    if (rt.nlogical == VRAM_MAX_LOGICAL) {
        return vram__fail(VRAM_ERR_CONFLICT, "more than %d logical devices", VRAM_MAX_LOGICAL);
    }
    rt_logical *l = &rt.logical[rt.nlogical];
    memset(l, 0, sizeof *l);
    l->info.index = rt.nlogical;
    l->info.physical_index = phys;
    l->info.memory_limit_bytes = limit;
    snprintf(l->info.name, sizeof l->info.name, "/device:GPU:%d", rt.nlogical);
    vram__pool_config cfg = {
        .backend = rt.backend,
        .dev = phys,
        .growth = setup->growth,
        .limit = limit,
        .limit_chosen = chosen,
        .caps = rt.caps[phys],
        .budget = &rt.budgets[phys],
    };
    cfg.caps.vmm_supported = rt.caps[phys].vmm_supported && rt.alloc_conf_in_force.vmm != 0;
    cfg.max_extent = rt.alloc_conf_in_force.extent_mb * VRAM_MIB;   /* 0: the pool's default */
    cfg.hold_peak = rt.alloc_conf_in_force.hold_peak;
    cfg.plan = rt.alloc_conf_in_force.plan;
    cfg.hold_large = rt.alloc_conf_in_force.hold_large_mb * VRAM_MIB;
    cfg.small_max = rt.alloc_conf_in_force.small_pool_kb * 1024;
    cfg.map_ahead = rt.alloc_conf_in_force.map_ahead_mb * VRAM_MIB;
    cfg.arenas = rt.alloc_conf_in_force.arenas;
    cfg.thread_cache = rt.alloc_conf_in_force.thread_cache_mb < 0 ? VRAM_POOL_TCACHE_AUTO
                     : (size_t)rt.alloc_conf_in_force.thread_cache_mb * VRAM_MIB;
    cfg.overflow = rt.alloc_conf_in_force.overflow;
    cfg.overflow_max = rt.alloc_conf_in_force.overflow_max_mb < 0 ? limit   /* the default: see vram.h */
                     : (size_t)rt.alloc_conf_in_force.overflow_max_mb * VRAM_MIB;
    snprintf(cfg.limit_source, sizeof cfg.limit_source, "%s", source);
    snprintf(cfg.name, sizeof cfg.name, "%s", l->info.name);
    vram_status s = vram__pool_create(&cfg, &l->pool);
    if (s != VRAM_OK) return vram__fail_wrap(s, "creating %s on %s", l->info.name, rt.devices[phys].name);
    rt.nlogical++;
    return VRAM_OK;
}

static vram_status start_card_wlocked(int i, const card_setup *setup) {
    vram__card_budget *b = &rt.budgets[i];
    atomic_store(&b->reserved, 0);
    b->cap = setup->cap ? setup->cap : SIZE_MAX;
    atomic_store(&b->external, SIZE_MAX);      /* (a limit posted from outside: applied at the first call) */
    snprintf(b->cap_source, sizeof b->cap_source, "%s", setup->cap ? setup->cap_source : "none");
    rt.growth_in_force[i] = setup->growth;
    rt.limit_in_force[i] = setup->cap;
    const rt_physical_config *c = &rt.config[i];
    if (c->nconfigs == 0) {
        return add_logical_wlocked(i, setup, setup->cap ? setup->cap : setup->default_amount, setup->cap != 0,
                                   setup->cap ? setup->cap_source : setup->default_source);
    }
    for (int k = 0; k < c->nconfigs; k++) {
        size_t limit = c->configs[k].memory_limit_mb * VRAM_MIB;
        char source[VRAM_SOURCE_LEN];
        snprintf(source, sizeof source, "the logical device configuration (%zu MiB)", c->configs[k].memory_limit_mb);
        if (setup->cap != 0 && setup->cap < limit) {
            limit = setup->cap;
            snprintf(source, sizeof source, "%s", setup->cap_source);
        }
        vram_status s = add_logical_wlocked(i, setup, limit, 1, source);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

/* Every pool goes; the first refusal of the driver to free memory (then held by the driver until
 * the process ends) is returned with its message. */
static vram_status destroy_pools_wlocked(void) {
    vram_status refusal = VRAM_OK;
    char why[1024] = "";
    while (rt.nlogical > 0) {
        rt_logical *l = &rt.logical[--rt.nlogical];
        vram_status s = vram__pool_destroy(l->pool);
        if (s != VRAM_OK && refusal == VRAM_OK) {
            refusal = s;
            snprintf(why, sizeof why, "%s", vram_last_error());
        }
        l->pool = NULL;
    }
    return refusal == VRAM_OK ? VRAM_OK : vram__fail(refusal, "%s", why);
}

/* The allocator options in force: VRAM_ALLOC_CONF, else VRAM_OVERFLOW and VRAM_OVERFLOW_MAX (what `vram
 * run --overflow` sets) for overflow and overflow_max_mb, else what the program set. */
static vram_status apply_alloc_conf_wlocked(const vram__env *env) {
    vram__alloc_conf base = rt.alloc_conf;
    if (env->overflow >= 0) base.overflow = env->overflow;
    if (env->overflow_max_mb >= 0) base.overflow_max_mb = env->overflow_max_mb;
    rt.alloc_conf_in_force = base;              /* VRAM_ALLOC_CONF's keys override the rest */
    if (env->alloc_conf_text != NULL) {
        vram_status s = vram__alloc_conf_parse(env->alloc_conf_text, "VRAM_ALLOC_CONF", &base,
                                               &rt.alloc_conf_in_force);
        if (s != VRAM_OK) return s;
    }
    if (rt.alloc_conf_in_force.vmm != 1) return VRAM_OK;
    for (int i = 0; i < rt.ndev; i++) {
        if (rt.visible_in_force[i] && !rt.caps[i].vmm_supported) {
            return vram__fail(VRAM_ERR_CONFLICT, "the allocator option vmm:true needs virtual memory management, "
                              "which %s (%s) does not support", rt.devices[i].name, rt.devices[i].product);
        }
    }
    return VRAM_OK;
}

/* ---- the runtime's reader-writer lock (see rt_rwlock) ------------------------------------------ */

static void rw_rdlock(rt_rwlock *l) {
    pthread_mutex_lock(&l->mu);
    while (l->writer || l->writers_waiting) pthread_cond_wait(&l->cv, &l->mu);
    l->readers++;
    pthread_mutex_unlock(&l->mu);
}

static int rw_tryrdlock(rt_rwlock *l) {
    pthread_mutex_lock(&l->mu);
    int free = !l->writer && !l->writers_waiting;
    l->readers += free;
    pthread_mutex_unlock(&l->mu);
    return free ? 0 : -1;
}

static void rw_wrlock(rt_rwlock *l) {
    pthread_mutex_lock(&l->mu);
    l->writers_waiting++;
    while (l->writer || l->readers) pthread_cond_wait(&l->cv, &l->mu);
    l->writers_waiting--;
    l->writer = 1;
    pthread_mutex_unlock(&l->mu);
}

static void rw_unlock(rt_rwlock *l) {
    pthread_mutex_lock(&l->mu);
    if (l->writer) l->writer = 0; else l->readers--;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* ---- idle release ------------------------------------------------------------------------------ */

static void *idle_thread_main(void *arg) {
    (void)arg;
    uint64_t ms = rt.alloc_conf_in_force.idle_release_ms;
    pthread_mutex_lock(&rt.idle_lock);
    while (!rt.idle_stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(ms / 1000);
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&rt.idle_wake, &rt.idle_lock, &until) == 0 || rt.idle_stop) continue;
        pthread_mutex_unlock(&rt.idle_lock);
        /* Never blocks on rt.lock: a shutdown holds it for writing while it joins this thread. */
        if (rw_tryrdlock(&rt.lock) == 0) {
            for (int k = 0; k < rt.nlogical; k++) {
                if (rt.growth_in_force[rt.logical[k].info.physical_index]) vram__pool_idle_tick(rt.logical[k].pool);
            }
            rw_unlock(&rt.lock);
        }
        pthread_mutex_lock(&rt.idle_lock);
    }
    pthread_mutex_unlock(&rt.idle_lock);
    return NULL;
}

static vram_status idle_thread_start_wlocked(void) {
    if (rt.alloc_conf_in_force.idle_release_ms == 0) return VRAM_OK;
    rt.idle_stop = 0;
    if (pthread_create(&rt.idle_thread, NULL, idle_thread_main, NULL) != 0) {
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "could not start the idle-release thread");
    }
    rt.idle_thread_running = 1;
    return VRAM_OK;
}

static void idle_thread_stop_wlocked(void) {
    if (!rt.idle_thread_running) return;
    pthread_mutex_lock(&rt.idle_lock);
    rt.idle_stop = 1;
    pthread_cond_signal(&rt.idle_wake);
    pthread_mutex_unlock(&rt.idle_lock);
    pthread_join(rt.idle_thread, NULL);
    rt.idle_thread_running = 0;
}

static vram_status check_visible_wlocked(void) {
    for (int i = 0; i < VRAM_MAX_DEVICES; i++) {
        if (rt.visible_set && rt.visible[i] && i >= rt.ndev) {
            return vram__fail(VRAM_ERR_UNRECOGNIZED_DEVICE, "Unrecognized device: %d (set visible, but the "
                              "driver now shows %d devices)", i, rt.ndev);
        }
        rt.visible_in_force[i] = i < rt.ndev && (!rt.visible_set || rt.visible[i]);
    }
    return VRAM_OK;
}

vram_status vram__rt_start_wlocked(void) {
    if (atomic_load(&rt.initialized)) return VRAM_OK;
    vram_status s = vram__rt_discover_wlocked();
    vram__env env;
    if (s == VRAM_OK) s = vram__env_read(&env, rt.ndev);
    if (s == VRAM_OK) s = check_visible_wlocked();
    if (s == VRAM_OK) s = apply_alloc_conf_wlocked(&env);
    card_setup setups[VRAM_MAX_DEVICES];
    for (int i = 0; s == VRAM_OK && i < rt.ndev; i++) {
        if (rt.visible_in_force[i]) {
            s = setup_card(i, &env, &setups[i]);
            continue;
        }
        /* a hidden card is not set up (no driver call, no limit checked against it); what the program set
         * for it stays what is in force, for the configuration calls after the start */
        rt.growth_in_force[i] = setup_growth(i, &env);
        rt.limit_in_force[i] = rt.config[i].limit;
    }
    size_t start_limit[VRAM_MAX_DEVICES] = { 0 };
    for (int i = 0; s == VRAM_OK && i < rt.ndev; i++) start_limit[i] = rt.visible_in_force[i] ? setups[i].cap : 0;
    if (s == VRAM_OK) s = vram__limits_link_wlocked(&env, start_limit);   /* before the pools take memory */
    for (int i = 0; s == VRAM_OK && i < rt.ndev; i++) {
        if (rt.visible_in_force[i]) s = start_card_wlocked(i, &setups[i]);
    }
    if (s == VRAM_OK) s = idle_thread_start_wlocked();
    if (s != VRAM_OK) {
        char why[1024];                          /* the cause, whatever the cleanup says */
        snprintf(why, sizeof why, "%s", vram_last_error());
        vram__limits_watcher_stop_wlocked();
        (void)destroy_pools_wlocked();
        vram__limits_unlink_wlocked();
        return vram__fail(s, "%s", why);
    }
    atomic_store(&rt.initialized, 1);
    vram__limits_started();               /* limits posted from outside before the start: at the first call */
    return VRAM_OK;
}

/* ---- shutdown -------------------------------------------------------------------------------- */

vram_status vram__rt_stop_wlocked(void) {
    if (!atomic_load(&rt.initialized)) {   /* forget a discovery, so the next call looks again */
        if (rt.discovered) rt.backend->close();
        rt.discovered = 0;
        return VRAM_OK;
    }
    for (int k = 0; k < rt.nlogical; k++) {
        size_t live = vram__pool_live_bytes(rt.logical[k].pool);
        if (live != 0) {
            return vram__fail(VRAM_ERR_CONFLICT, "vram_shutdown: %s still holds %zu bytes of live allocations; "
                              "free them first", rt.logical[k].info.name, live);
        }
    }
    idle_thread_stop_wlocked();
    vram__limits_watcher_stop_wlocked();
    vram_status refusal = destroy_pools_wlocked();   /* stopped all the same: the memory is the driver's now */
    vram__limits_unlink_wlocked();                   /* (the ledger slots go once the pools gave their memory back) */
    rt.backend->close();
    rt.discovered = 0;
    atomic_store(&rt.initialized, 0);
    if (refusal != VRAM_OK) {
        return vram__fail_wrap(refusal, "vram_shutdown: the driver refused to free memory, which it holds until "
                               "the process ends");
    }
    return VRAM_OK;
}

/* ---- entry for calls that need a started runtime -------------------------------------------- */

/*
 * Calls that use a started runtime (allocation, free, stats) must not see it start or stop under
 * them. A plain reader-writer lock would make every such call write one shared cache line; instead
 * each thread announces itself in a reader mark of its own cache line (biased locking), and a writer
 * takes the rwlock, raises `rt_writer` and waits until every mark is clear. Readers that see the
 * flag, and threads beyond RT_MARKS, take the rwlock's read side. The same word's RT_ATTENTION
 * (limits.c: a limit posted from outside, or a logical device over a limit that moved) sends
 * readers the same way, where the first applies what is pending: no instruction more on the warm
 * path. A reader and a writer must not
 * miss each other: the reader stores its mark then loads the flag, the writer stores the flag then
 * loads the marks, and each needs a full fence between its store and its load. The writer (rare:
 * start, shutdown, configuration) pays for both with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED),
 * which runs a full fence on every running thread of the process, so that the reader (every
 * allocation and free) needs none: a plain store, a compiler barrier, a load. Where the kernel
 * has no such membarrier (before Linux 4.14, some sandboxes), readers keep a sequentially
 * consistent store (an exchange: a full fence on each call).
 */
#define RT_MARKS 256

typedef struct rt_mark {
    atomic_int active;
    char       pad[64 - sizeof(atomic_int)];
} rt_mark;

static rt_mark         rt_marks[RT_MARKS];
static atomic_int      rt_mark_taken[RT_MARKS];
atomic_int             vram__rt_writer;   /* RT_WRITER | RT_ATTENTION (runtime.h) */
#define rt_writer vram__rt_writer
static atomic_int      rt_asym;        /* 1 once writers fence for readers (membarrier registered);
                                        * set under the writer lock, never cleared */
static pthread_once_t  rt_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t   rt_key;
/* The calling thread's record: looked up once per call (vram__rt_self) and passed down. Not
 * inlined: inlined, GCC computes the thread-local's address again at every use (a __tls_get_addr
 * call each in libvram.so) instead of keeping the pointer. */
static _Thread_local vram__thread rt_me = {.mark = -1};

VRAM_NOINLINE vram__thread *vram__rt_self(void) {
    return &rt_me;
}

static void mark_release(void *value) {
    atomic_store(&rt_mark_taken[(intptr_t)value - 1], 0);
}

static void key_create(void) {
    pthread_key_create(&rt_key, mark_release);
}

static int thread_mark(vram__thread *me) {
    if (me->mark != -1) return me->mark;
    me->mark = -2;
    pthread_once(&rt_key_once, key_create);
    for (int i = 0; i < RT_MARKS; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&rt_mark_taken[i], &expected, 1)) {
            me->mark = i;
            pthread_setspecific(rt_key, (void *)(intptr_t)(i + 1));
            break;
        }
    }
    return me->mark;
}

/* vram__rt_read_enter's way through the rwlock (a writer, no mark, or RT_ATTENTION): out of line, so
 * that the fast path keeps its registers (with the limits' call inside, it pushed more). */
static VRAM_NOINLINE int read_enter_locked(vram__thread *me) {
    rw_rdlock(&rt.lock);
    if (atomic_load(&rt.initialized)) {
        me->fast = 0;
        if (atomic_load(&rt_writer) & RT_ATTENTION) vram__limits_apply();   /* a limit moved (limits.c) */
        return 1;
    }
    rw_unlock(&rt.lock);
    return 0;
}

int vram__rt_read_enter(vram__thread *me) {
    int mark = thread_mark(me);
    if (mark >= 0) {
        if (atomic_load_explicit(&rt_asym, memory_order_relaxed)) {
            atomic_store_explicit(&rt_marks[mark].active, 1, memory_order_relaxed);
            atomic_signal_fence(memory_order_seq_cst);   /* the writer's membarrier is the fence */
        } else {
            atomic_store(&rt_marks[mark].active, 1);
        }
        if (!atomic_load(&rt_writer)) {              /* (nor RT_ATTENTION: limits.c) */
            if (atomic_load(&rt.initialized)) {
                me->fast = 1;
                return 1;
            }
            atomic_store(&rt_marks[mark].active, 0);
            return 0;
        }
        atomic_store(&rt_marks[mark].active, 0);
    }
    return read_enter_locked(me);
}

void vram__rt_leave(vram__thread *me) {
    if (me->fast) {         /* release: the writer's load of the mark sees everything done before */
        atomic_store_explicit(&rt_marks[me->mark].active, 0, memory_order_release);
    } else {
        rw_unlock(&rt.lock);
    }
}

/* Registers the process for expedited private membarrier: 1 when the writers may use it. */
static int asym_register(void) {
    if (!vram__env_membarrier()) return 0;                   /* readers fence on every call */
    return vram__membarrier_register();
}

static atomic_int rt_asym_tried;          /* 1 once the first writer decided rt_asym */

int vram__rt_readers_fence(void) {
    return atomic_load(&rt_asym_tried) ? !atomic_load(&rt_asym) : -1;
}

void vram__rt_write_lock(void) {
    rw_wrlock(&rt.lock);
    if (!atomic_load_explicit(&rt_asym_tried, memory_order_relaxed)) {   /* (under the writer lock) */
        if (asym_register()) atomic_store(&rt_asym, 1);
        atomic_store(&rt_asym_tried, 1);
    }
    atomic_fetch_or(&rt_writer, RT_WRITER);
    if (atomic_load(&rt_asym)) vram__membarrier_fence();   /* the readers' fence (above) */
    for (int i = 0; i < RT_MARKS; i++) {
        while (atomic_load(&rt_marks[i].active)) sched_yield();
    }
}

void vram__rt_write_unlock(void) {
    atomic_fetch_and(&rt_writer, ~RT_WRITER);
    rw_unlock(&rt.lock);
}

/* ---- fork ------------------------------------------------------------------------------------- *
 *
 * fork() while other threads are inside vram would give the child locks that no thread of it will
 * ever release. The handlers make the fork wait until no call is inside (the runtime held for writing,
 * which every pool call is under, and the idle thread's lock), so the child gets the runtime as it is
 * between calls: it works as the parent's did (on the simulated card; on a GPU the driver refuses a
 * context inherited through fork, and each call says so with the driver's error). The child has no
 * idle-release thread (threads do not survive fork) until it starts the runtime again. */
static void fork_prepare(void) {
    vram__rt_write_lock();
    pthread_mutex_lock(&rt.idle_lock);
    pthread_mutex_lock(&rt.lock.mu);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&rt.lock.mu);
    pthread_mutex_unlock(&rt.idle_lock);
    vram__rt_write_unlock();
}

/* In the child only this thread exists: what the others were doing at the fork (waiting for the lock,
 * a reader mark set for a moment on the way to it, the idle thread's wait) is forgotten. */
static void fork_child(void) {
    rt.idle_thread_running = 0;       /* (it stayed in the parent) */
    pthread_cond_init(&rt.idle_wake, NULL);
    pthread_mutex_unlock(&rt.idle_lock);
    rt.lock.writer = 0;
    rt.lock.readers = 0;
    rt.lock.writers_waiting = 0;
    pthread_cond_init(&rt.lock.cv, NULL);
    pthread_mutex_unlock(&rt.lock.mu);
    for (int i = 0; i < RT_MARKS; i++) atomic_store(&rt_marks[i].active, 0);
    atomic_fetch_and(&rt_writer, ~RT_WRITER);
    vram__limits_forked();
}

__attribute__((constructor)) static void fork_handlers_install(void) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

vram_status vram__rt_enter_started(vram__thread *me) {
    while (!vram__rt_read_enter(me)) {
        vram__rt_write_lock();
        vram_status s = vram__rt_start_wlocked();
        vram__rt_write_unlock();
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}
