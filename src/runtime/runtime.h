/*
 * runtime.h: the runtime's state: the configuration set through the API, the devices found by the
 * backend, and, once started, the logical devices with their pools.
 *
 * Locking: configuration, start and shutdown hold the runtime for writing (vram__rt_write_lock:
 * `rt.lock` plus draining the per-thread reader marks); allocation, free and stats hold it for
 * reading (vram__rt_read_enter), so they run concurrently and a shutdown cannot pull a pool away
 * underneath them. Lock order: the runtime, then a device allocator's grow_lock, then an
 * arena lock (docs/DESIGN.md, "Locks, in order").
 */
#ifndef VRAM_RUNTIME_H
#define VRAM_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "pool/pool.h"
#include "runtime/env.h"

#define VRAM_MAX_LOGICAL 256

typedef struct rt_physical_config {      /* what the program asked for, kept across shutdown */
    int                                growth_set; /* 0 until vram_set_memory_growth */
    int                                growth;
    size_t                             limit;      /* 0: none */
    vram_logical_device_configuration *configs;
    int                                nconfigs;
} rt_physical_config;

typedef struct rt_logical {
    vram_logical_device info;
    vram__pool         *pool;
} rt_logical;

/* The runtime's reader-writer lock (runtime.c): a mutex, a condition and counts rather than a
 * pthread_rwlock_t, so that a child of fork() can be given it free (glibc's rwlock knows its writer by
 * kernel thread id, which fork changes). Writers are preferred. */
typedef struct rt_rwlock {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             readers, writer, writers_waiting;
} rt_rwlock;

typedef struct rt_state {
    rt_rwlock            lock;
    /* discovery: valid while `discovered` */
    int                  discovered;
    const vram__backend *backend;
    int                  ndev;
    vram_physical_device devices[VRAM_MAX_DEVICES];
    vram__device_caps    caps[VRAM_MAX_DEVICES];
    /* configuration */
    int                  visible_set;
    unsigned char        visible[VRAM_MAX_DEVICES];
    rt_physical_config   config[VRAM_MAX_DEVICES];
    vram__alloc_conf     alloc_conf;           /* vram_set_alloc_conf (VRAM_ALLOC_CONF overrides) */
    /* started runtime */
    atomic_int           initialized;
    unsigned char        visible_in_force[VRAM_MAX_DEVICES];
    int                  growth_in_force[VRAM_MAX_DEVICES];
    size_t               limit_in_force[VRAM_MAX_DEVICES];   /* 0: none */
    vram__card_budget    budgets[VRAM_MAX_DEVICES];
    vram__alloc_conf     alloc_conf_in_force;
    int                  nlogical;
    rt_logical           logical[VRAM_MAX_LOGICAL];
    /* idle release: a thread that ticks growth pools every idle_release_ms */
    int                  idle_thread_running;
    pthread_t            idle_thread;
    pthread_mutex_t      idle_lock;
    pthread_cond_t       idle_wake;
    int                  idle_stop;
} rt_state;

extern rt_state vram__rt;

/* Writers (configuration, start, shutdown) hold the runtime exclusively between these two;
 * all `_wlocked` functions need it. */
void        vram__rt_write_lock(void);
void        vram__rt_write_unlock(void);
/* The calling thread's record, looked up once per call (a thread-local: through libvram.so each
 * lookup is a __tls_get_addr call) and passed to the calls below and to the pool. */
typedef struct vram__thread {
    int               mark;      /* its reader mark: -1 not chosen yet, -2 none free (the rwlock then) */
    int               fast;      /* the read side now held is the mark (else the rwlock) */
    vram__pool_thread pool;      /* what the pools remember of the thread */
} vram__thread;
vram__thread *vram__rt_self(void);
/* Read side for calls on a started runtime: 1 with read access held (vram__rt_leave ends it), or
 * 0 when the runtime is not started (nothing held). */
int         vram__rt_read_enter(vram__thread *me);
vram_status vram__rt_discover_wlocked(void);
vram_status vram__rt_start_wlocked(void);
vram_status vram__rt_stop_wlocked(void);
/* Starts the runtime if needed and returns with read access held. */
vram_status vram__rt_enter_started(vram__thread *me);
void        vram__rt_leave(vram__thread *me);
/* 1 when readers fence their own entry (VRAM_MEMBARRIER=0, or no membarrier), 0 when the writers
 * fence for them; -1 before the first writer decided. For tests. */
int         vram__rt_readers_fence(void);

/* The word readers test on entry (runtime.c): RT_WRITER while a writer holds the runtime, RT_ATTENTION
 * while a limit that moves needs applying (limits.c); either sends readers through the rwlock. */
extern atomic_int vram__rt_writer;
enum { RT_WRITER = 1, RT_ATTENTION = 2 };

/* ---- limits that move (limits.c) ---- */

/* A limit on this process's use of physical card `physical_index` (the driver's ordinal), set from
 * outside it: the hook for `vram limit` through the ledger (the caller reads the ledger and posts
 * what it finds), `bytes` or SIZE_MAX to lift it. It only stores the value and raises RT_ATTENTION:
 * lock-free and async-signal-safe, callable from any thread, inside vram's calls or not, before the
 * start too. The next call that enters the runtime (an allocation, a free, a query) applies it: the
 * card's budget and each of its logical devices are capped at min(what the configuration allowed,
 * bytes) at once, and the idle memory above goes back; live blocks stay (the devices are over their
 * limit until they are freed). A value above the configured limit changes nothing: nothing lifts a
 * limit from outside either. An ordinal out of range is ignored. */
void   vram__limit_post(int physical_index, size_t bytes);
size_t vram__limit_posted(int physical_index);     /* SIZE_MAX: none */
/* Raises RT_ATTENTION: a logical device may be over its limit, so calls give idle memory back until
 * it is under (vram_set_live_limit, vram_set_memory_fraction). */
void   vram__limits_watch(void);
/* Runtime held for reading (vram__rt_read_enter's slow path): applies the limits posted since the last
 * time, gives back the idle memory of every logical device over its limit, and raises RT_ATTENTION
 * again while one still is (its next calls come back here until frees bring it under). */
void   vram__limits_apply(void);
/* The runtime started (runtime.c, writer lock held): limits posted before apply at the first call. */
void   vram__limits_started(void);

/* The ledger (common/ledger_member.h; docs/DESIGN.md, "Limits that move"). At the start, before the
 * pools (writer lock held): whether the process is listed and how. Under the preload library with the
 * CUDA backend it follows the preload library's ledger slots (which count its driver calls); else,
 * under the preload library (the simulated backend), with VRAM_GROUP or with VRAM_LEDGER_DIR it has
 * ledger slots of its own, and each card's budget gets the member's gate; otherwise it is not listed.
 * A ledger that cannot be opened leaves the process unlisted (said with a group budget or VRAM_LOG=1),
 * never failing the start. `start_limit`: each card's limit in force at start (0 none). A watcher
 * thread then posts the limits set on its ledger slots (vram__limit_post) as soon as they change. */
vram_status vram__limits_link_wlocked(const vram__env *env, const size_t *start_limit);
/* Stops the watcher (shutdown, first); unlink, after the pools gave their memory back: its ledger
 * slots freed. */
void   vram__limits_watcher_stop_wlocked(void);
void   vram__limits_unlink_wlocked(void);
/* In the child of fork: not listed (the ledger slots are the parent's). */
void   vram__limits_forked(void);
/* Whether libvram_preload.so is loaded in this process. */
int    vram__limits_preload_present(void);

/* For the framework faces (src/faces): vram_free_async on a stream that the caller keeps alive as
 * long as the runtime runs, as PyTorch does with its streams. No event is recorded per free: while
 * one stream has all the stream-ordered requests the block is free at once (the pool waits for
 * the stream before its memory goes elsewhere); otherwise the stream reuses it at once, and one
 * event per stream, recorded for a batch of such frees, tells the others when they may have it. */
vram_status vram__free_async_owned_stream(void *ptr, void *stream);
/* The same on the stream the block was allocated on (NULL for a block of vram_malloc). */
vram_status vram__free_on_alloc_stream(void *ptr);
/* vram_malloc_async on the first logical device of physical card `physical_index` (what
 * vram_logical_device_of finds), entering the runtime once: PyTorch's allocation entry point. */
vram_status vram__malloc_async_on_card(void **ptr, size_t size, int physical_index, void *stream);

#endif /* VRAM_RUNTIME_H */
