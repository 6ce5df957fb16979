/*
 * sim_internal.h: what the files of the simulated GPU backend share: its limits and CUDA error
 * names, its bookkeeping types, its one state (vram__sim_st, under vram__sim_lock) and the calls one file makes
 * of another. The model and the rules are in sim.c's header; nothing outside src/backend/sim*.c
 * includes this (tests use sim_hooks.h, the layers above backend.h).
 *
 *   sim.c         open and close, devices, the accounting of a card's bytes, plain memory, the
 *                 counters and the backend table
 *   sim_env.c     VRAM_SIM_DEVICES, VRAM_SIM_FAIL_ALLOC_AFTER and CUDA_VISIBLE_DEVICES
 *   sim_table.c   the hash table of records (allocations, handles, events)
 *   sim_vmm.c     address reservations, physical handles, map and unmap, sharing (IPC)
 *   sim_events.c  streams and events
 *   sim_host.c    pinned host memory, copies between it and device memory, and the cards shared
 *                 with other processes (VRAM_SIM_SHARED)
 *   sim_hooks.c   the test hooks (sim_hooks.h)
 *   sim_overflow.c host memory for overflow (overflow:host), counted apart from the card's
 *
 * Lock: every sim_* call below that touches vram__sim_st runs under vram__sim_lock (the _locked entry points
 * and the helpers they call); the backend entry points take it themselves.
 */
#ifndef VRAM_BACKEND_SIM_INTERNAL_H
#define VRAM_BACKEND_SIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define SIM_MAX_CARDS    64
#define SIM_GRANULARITY  (2 * VRAM_MIB)
#define SIM_DEFAULT_CARD (16 * VRAM_GIB)
#define SIM_DEFAULT_MAJOR 9      /* compute capability 9.0 unless VRAM_SIM_DEVICES gives one */
#define SIM_DEFAULT_MINOR 0
#define SIM_DEVICES_HINT "expected e.g. 2x16GiB, 80GiB,24GiB or 2x24GiB@8.6"

#define SIM_EINVAL  "CUDA_ERROR_INVALID_VALUE (invalid argument)"
#define SIM_EOOM    "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
#define SIM_EHANDLE "CUDA_ERROR_INVALID_HANDLE (invalid resource handle)"
#define SIM_EUNKNOWN "CUDA_ERROR_UNKNOWN (unknown error)"
#define SIM_ELAUNCH "CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)"
#define SIM_ENOTSUP "CUDA_ERROR_NOT_SUPPORTED (operation not supported)"

/* ---- bookkeeping types ---------------------------------------------------------------------- */

/* An open-addressing hash table from non-zero 64-bit keys (addresses, handles) to records. */
typedef struct sim_bucket {
    uint64_t key;   /* 0: empty */
    void    *val;
} sim_bucket;

typedef struct sim_table {
    sim_bucket *buckets;
    size_t      cap, count;   /* cap: 0 or a power of two */
} sim_table;

typedef struct sim_mem {        /* a cuMemAlloc block; its address is the key */
    int    dev;
    size_t size;
} sim_mem;

typedef struct sim_phys {       /* a cuMemCreate handle: the record's address */
    int      dev;
    size_t   size;
    uint64_t mapped_va;         /* 0 while unmapped */
    int      fd;                /* exported or imported: the memfd its bytes live in; else -1 */
    int      imported;          /* phys_import's: not counted against the card */
} sim_phys;

typedef struct sim_piece {      /* one mapping inside a reservation */
    uint64_t  va;
    size_t    size;
    sim_phys *phys;
} sim_piece;

typedef struct sim_resv {       /* a cuMemAddressReserve range; pieces sorted by address */
    struct sim_resv *next;
    int              dev;
    uint64_t         base;
    size_t           size;
    sim_piece       *pieces;
    size_t           npieces, cap;
} sim_resv;

typedef struct sim_stream {
    struct sim_stream *next;
    void              *stream;
    uint64_t           recorded, completed;
} sim_stream;

typedef struct sim_event {
    int         dev;
    sim_stream *stream;
    uint64_t    seq;
} sim_event;

typedef struct sim_config {     /* what open() reads from the environment */
    int                ncards;
    size_t             card_size[SIM_MAX_CARDS];
    int                card_major[SIM_MAX_CARDS], card_minor[SIM_MAX_CARDS];   /* compute capability */
    int                ndev;
    int                dev_card[SIM_MAX_CARDS];   /* visible ordinal -> card index */
    int                fail_set;
    unsigned long long fail_after;
} sim_config;

typedef struct sim_device {
    int    card;
    size_t capacity, used;
} sim_device;

typedef struct sim_host {       /* a host_alloc block; its address is the key */
    size_t size;
} sim_host;

/* VRAM_SIM_SHARED=FILE: the cards' use shared by every process that names FILE, an entry per process
 * (its pid and its bytes on each card); an entry whose process is gone counts nothing, as the driver
 * frees a process's memory when it ends. Changed and summed under the file's flock. */
#define SIM_SHARE_ENTRIES 128
typedef struct sim_share_entry {
    int32_t  pid;               /* 0: free */
    int32_t  pad;
    uint64_t used[SIM_MAX_CARDS];
} sim_share_entry;

typedef struct sim_state {
    int                open;
    sim_config         cfg;
    sim_device         dev[SIM_MAX_CARDS];
    unsigned long long alloc_ok;   /* successful allocations, for VRAM_SIM_FAIL_ALLOC_AFTER */
    int                event_failures;   /* event records still to fail (vram__sim_fail_event_records) */
    int                map_failures, unmap_failures;   /* maps / unmaps still to fail (vram__sim_fail_maps) */
    int                copy_failures, host_failures;   /* copies / host allocations still to fail
                                                           (vram__sim_fail_copies) */
    sim_table          mems, phys, events, hosts;
    sim_share_entry   *share;      /* VRAM_SIM_SHARED's entries (mapped), or NULL */
    int                share_fd, share_me;   /* its descriptor and this process's entry */
    sim_resv          *resvs;
    sim_stream        *streams;
} sim_state;

/* The state of the simulated driver, under vram__sim_lock (defined in sim.c). */
extern sim_state       vram__sim_st;
extern pthread_mutex_t vram__sim_lock;
/* vram__sim_hold_event_syncs: event_sync waits on it for the stream to get there (under vram__sim_lock) */
extern pthread_cond_t  vram__sim_stream_done;
extern int             vram__sim_hold_syncs, vram__sim_syncs_blocked;   /* under vram__sim_lock; kept across close */
/* The driver-call counters (atomics, no lock). */
extern vram__backend_counts vram__sim_count;

#define SIM_COUNT(field) vram__backend_count(&vram__sim_count, field)

/* Runs `expr` (a vram_status expression) under the lock and returns its value. */
#define SIM_LOCKED(expr)                      \
    do {                                      \
        pthread_mutex_lock(&vram__sim_lock);        \
        vram_status sim_s_ = (expr);          \
        pthread_mutex_unlock(&vram__sim_lock);      \
        return sim_s_;                        \
    } while (0)


/* ---- calls between the files (all under vram__sim_lock unless the entry point takes it) ----------- */

/* sim.c: sets "<call> on device <dev>: <error> [<why>]" and returns s. */
vram_status vram__sim_fail(vram_status s, const char *call, int dev, const char *error, const char *fmt, ...)
    VRAM_PRINTF(5, 6);
vram_status vram__sim_host_oom(const char *call, int dev);
vram_status vram__sim_check_dev(int dev);
void vram__sim_drop_phys(uint64_t key, void *val);
/* May `size` more bytes be taken on dev (fault injection, the card's capacity, with VRAM_SIM_SHARED the
 * other processes' use)? On VRAM_OK they are counted as taken; vram__sim_untake gives them back (a failure
 * after the check, or a free), vram__sim_took counts a successful allocation. */
vram_status vram__sim_take(const char *call, int dev, size_t size);
void vram__sim_untake(int dev, size_t size);
void vram__sim_took(void);

/* sim_table.c */
void *vram__sim_tab_get(const sim_table *t, uint64_t key);
int vram__sim_tab_reserve(sim_table *t);
void vram__sim_tab_put(sim_table *t, uint64_t key, void *val);
void vram__sim_tab_del(sim_table *t, uint64_t key);
void vram__sim_tab_clear(sim_table *t, void (*drop)(uint64_t key, void *val));

/* sim_env.c: what open() reads */
vram_status vram__sim_parse_devices(const char *text, sim_config *cfg);
vram_status vram__sim_parse_fail_after(const char *text, sim_config *cfg);
void vram__sim_uuid(int card, char *buf, size_t len);
vram_status vram__sim_parse_visible(const char *text, sim_config *cfg);

/* sim_vmm.c: the backend entry points (they take vram__sim_lock) */
vram_status vram__sim_va_reserve(int dev, size_t size, uint64_t *va);
vram_status vram__sim_va_free(int dev, uint64_t va, size_t size);
vram_status vram__sim_phys_create(int dev, size_t size, uint64_t *handle);
vram_status vram__sim_phys_release(int dev, uint64_t handle);
vram_status vram__sim_map(int dev, uint64_t va, size_t size, uint64_t handle);
vram_status vram__sim_unmap(int dev, uint64_t va, size_t size);
vram_status vram__sim_phys_export(int dev, uint64_t handle, int *fd);
vram_status vram__sim_phys_import(int dev, int fd, size_t size, uint64_t *handle);
vram_status vram__sim_ipc_get(int dev, uint64_t dptr, unsigned char handle[64]);
vram_status vram__sim_ipc_open(int dev, const unsigned char handle[64], uint64_t *dptr);
vram_status vram__sim_ipc_close(int dev, uint64_t dptr);

/* sim_vmm.c: whether [addr, addr + size) is device memory of dev: in one plain allocation, or mapped
 * without a gap in one reservation (under vram__sim_lock) */
int vram__sim_device_range(int dev, uint64_t addr, size_t size);

/* sim_host.c: the backend entry points (they take vram__sim_lock); the shared cards under it */
vram_status vram__sim_host_alloc(int dev, size_t size, void **host);
vram_status vram__sim_host_free(int dev, void *host);
vram_status vram__sim_copy_to_host(int dev, void *dst, uint64_t src, size_t size);
vram_status vram__sim_copy_to_device(int dev, uint64_t dst, const void *src, size_t size);
/* VRAM_SIM_SHARED: opens the file and takes an entry (VRAM_ERR_INVALID_ARGUMENT naming the variable when it
 * cannot); vram__sim_share_close gives the entry back. Between vram__sim_share_lock and vram__sim_share_unlock (the file's
 * flock): vram__sim_share_write stores dev's used bytes in this process's entry, vram__sim_card_held gives the bytes
 * held on dev's card: by every live process (their entries), or without the variable this one's. Without
 * it the others do nothing. */
vram_status vram__sim_share_open(void);
void vram__sim_share_close(void);
void vram__sim_share_lock(void);
void vram__sim_share_unlock(void);
void vram__sim_share_write(int dev);
size_t vram__sim_card_held(int dev);

/* sim_events.c: the backend entry points (they take vram__sim_lock); vram__sim_stream_find under it */
sim_stream *vram__sim_stream_find(void *stream);
vram_status vram__sim_event_record(int dev, void *stream, void **event);
vram_status vram__sim_event_query(int dev, void *event, int *done);
vram_status vram__sim_event_sync(int dev, void *event);
void vram__sim_event_destroy(int dev, void *event);

/* sim_overflow.c: host memory for overflow (the backend entry points take vram__sim_lock); everything it
 * holds freed at close (vram__sim_lock held) */
vram_status vram__sim_overflow_alloc(int dev, size_t size, uint64_t *dptr, size_t *held);
vram_status vram__sim_overflow_free(int dev, uint64_t dptr, size_t held);
void vram__sim_overflow_reset_locked(void);

#endif /* VRAM_BACKEND_SIM_INTERNAL_H */
