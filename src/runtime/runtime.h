/*
 * runtime.h: the runtime's state: the configuration set through the API, the devices found by the
 * backend, and, once started, the logical devices with their pools.
 *
 * Locking: `rt.lock` (a rwlock) guards everything here. Configuration, start and shutdown take it
 * for writing; allocation, free and stats take it for reading, so they run concurrently and a
 * shutdown cannot pull a pool away underneath them. Lock order: rt.lock, then a pool's lock.
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

typedef struct rt_state {
    pthread_rwlock_t     lock;
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

/* All `_wlocked` functions need vram__rt.lock held for writing. */
vram_status vram__rt_discover_wlocked(void);
vram_status vram__rt_start_wlocked(void);
vram_status vram__rt_stop_wlocked(void);
/* Starts the runtime if needed and returns with the lock held for reading. */
vram_status vram__rt_enter_started(void);
void        vram__rt_leave(void);

#endif /* VRAM_RUNTIME_H */
