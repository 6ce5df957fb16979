/*
 * shim.h: the inside of libvram_preload.so, the LD_PRELOAD library of `vram run`: it caps the device
 * memory an unmodified CUDA program takes by interposing on the CUDA driver API. A sibling of
 * libvram, not a layer on it: it shares src/common (sizes, formatting, CUDA_VISIBLE_DEVICES, compiled
 * in hidden) and the ledger format (ledger.h) with `vram top`, nothing else.
 *
 * The files, one concern each (their headers say what they own, their invariants and locks):
 *   interpose.c  how calls reach the shim: the table of exported (interposed) names, the real dlsym,
 *                loading the driver, cuGetProcAddress and dlsym handing out this library's versions
 *   env.c        the environment (VRAM_LIMIT, VRAM_LIMIT_<i>, VRAM_GROWTH, VRAM_LOG, VRAM_GROUP,
 *                VRAM_GROUP_LIMIT), read once; the process state g and what a fork child resets
 *   table.c      the table of live allocations (pointer or VMM handle -> size, device)
 *   limits.c     accounting and limits: reserving against the limits, settling after the driver
 *                answered, giving bytes back at frees, the refusal messages, the program's view
 *   calls.c      the interposed driver calls (the cuMemAlloc family, cuMemCreate/Release, the
 *                stream-ordered calls, cuMemGetInfo, cuDeviceTotalMem)
 *   balloon.c    preallocation (VRAM_GROWTH=0): the balloon of cuMemCreate pieces
 *   group.c      the ledger glue (a slot per device, the shadow, a truncated or replaced file) and
 *                group limits
 *   nvml.c       nvmlDeviceGetMemoryInfo / _v2: the program's view of its cards through NVML
 *   ledger.c, ledger_proc.c  the ledger file itself (ledger.h), shared with `vram top` and the
 *                Slurm plugin; ledger_proc.c: slot liveness and carrying live slots over into a
 *                file made anew, through /proc
 *
 * Locks, in the order they are taken: balloon_mu, then ledger_mu (never together with balloon_mu),
 * the ledger's flock, then g.mu (the counters and the table; held briefly, never across a driver
 * call). Everything set from the environment is set once, under shim_env's pthread_once, before
 * any accounted call reads it.
 *
 * Not covered yet: the legacy v1 entry points (32-bit sizes, CUDA < 3.2), dlvsym lookups of driver
 * symbols, NVML calls other than nvmlDeviceGetMemoryInfo / _v2.
 */
#ifndef VRAM_SHIM_SHIM_H
#define VRAM_SHIM_SHIM_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "cuda_driver.h"
#include "ledger.h"
#include "nvml_types.h"

#define SHIM_MAX_DEVICES 64
#define SHIM_LEDGER_BYTES (sizeof(ledger_header) + (size_t)LEDGER_SLOTS * sizeof(ledger_slot))

/* ---- the interposed names (interpose.c) ------------------------------------------------------ */

typedef void *(*shim_dlsym_fn)(void *handle, const char *symbol);

/* Every exported (interposed) driver symbol, with its base name for cuGetProcAddress, the CUDA
 * version from which cuGetProcAddress returns it and whether it is the per-thread-stream variant. */
#define SHIM_HOOKS(X)                                                              \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0)                                        \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0)                              \
    X(cuMemAllocManaged, "cuMemAllocManaged", 0, 0)                                \
    X(cuMemFree_v2, "cuMemFree", 3020, 0)                                          \
    X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0)                                    \
    X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, 0)                            \
    X(cuMemCreate, "cuMemCreate", 0, 0)                                            \
    X(cuMemRelease, "cuMemRelease", 0, 0)                                          \
    X(cuMemAllocAsync, "cuMemAllocAsync", 0, 0)                                    \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 0, 1)                               \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 0)                    \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, 1)               \
    X(cuMemFreeAsync, "cuMemFreeAsync", 0, 0)                                      \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 0, 1)                                 \
    X(cuGetProcAddress, "cuGetProcAddress", 0, 0)                                  \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0)

enum {
#define X(sym, base, ver, ptsz) SHIM_HOOK_##sym,
    SHIM_HOOKS(X)
#undef X
    SHIM_NUM_HOOKS
};

/* The exported NVML symbols (their wrappers in nvml.c). */
#define SHIM_NVML_HOOKS(X)            \
    X(nvmlDeviceGetMemoryInfo)        \
    X(nvmlDeviceGetMemoryInfo_v2)

enum {
#define X(sym) SHIM_NVML_HOOK_##sym,
    SHIM_NVML_HOOKS(X)
#undef X
    SHIM_NUM_NVML_HOOKS
};

typedef struct shim_nvml_hook {
    const char *symbol;
    void       *wrapper;
} shim_nvml_hook;

extern const shim_nvml_hook shim_nvml_hooks[SHIM_NUM_NVML_HOOKS];

typedef struct shim_real {
    void *lib;                              /* libcuda.so.1, or NULL when it cannot be loaded */
    void *fn[SHIM_NUM_HOOKS];               /* the driver's own versions, by SHIM_HOOK_* */
    pfn_cuCtxGetDevice cuCtxGetDevice;
    pfn_cuMemGetAllocationGranularity cuMemGetAllocationGranularity;   /* CUDA 10.2; NULL on drivers without it */
    pfn_cuGetErrorName cuGetErrorName;                    /* for messages; may be NULL */
    pfn_cuGetErrorString cuGetErrorString;
} shim_real;

/* ---- the process state (defined in env.c) ----------------------------------------------------- */

enum { SHIM_KIND_PTR = 1, SHIM_KIND_HANDLE = 2 };

typedef struct shim_entry {
    unsigned long long key;   /* device pointer or VMM handle */
    size_t size;
    int dev;
    int kind;                 /* 0: empty slot */
} shim_entry;

enum { SHIM_LIMIT_NONE = 0, SHIM_LIMIT_ALL = 1, SHIM_LIMIT_DEVICE = 2 };

typedef struct shim_state {
    pthread_mutex_t mu;                      /* guards used and the table */
    size_t used[SHIM_MAX_DEVICES];           /* bytes in use (reserved included) per device */
    size_t limit[SHIM_MAX_DEVICES];          /* 0: none; set once, at the first interposed call */
    int limit_src[SHIM_MAX_DEVICES];         /* SHIM_LIMIT_*; set once */
    int log;                                 /* VRAM_LOG=1; set once */
    shim_entry *table;                       /* open addressing, linear probing (table.c) */
    size_t cap, count;                       /* cap is a power of two */
    shim_real real;
    /* the ledger (ledger.h): this process's slot per device, registered at the first accounted call */
    pthread_mutex_t ledger_mu;               /* guards the fields below; taken before g.mu, never after */
    int ledger_state;                        /* 0 not opened yet, 1 open, -1 unavailable */
    volatile sig_atomic_t ledger_lost;       /* the ledger file shrank under the mapping (another process
                                              * truncated it): the SIGBUS handler put private memory
                                              * there; from then on no slot counts (see shim_sigbus) */
    int ledger_lost_said;
    ledger ledger;
    ledger_slot *slot[SHIM_MAX_DEVICES];     /* written under ledger_mu and g.mu; read under g.mu */
    int shadow_fd;                           /* ledger_shadow_create's memfd, or -1 (under ledger_mu) */
    void *shadow_map;                        /* its mapping (LEDGER_FILE_SIZE bytes), or NULL */
    ledger_slot *shadow;                     /* its slots: this process's slot of device d at d; the
                                              * counters written with the ledger's, under g.mu */
    int slot_tried[SHIM_MAX_DEVICES];        /* registration attempted (atomic read on the fast path) */
    char uuid[SHIM_MAX_DEVICES][LEDGER_UUID_LEN];
    size_t peak[SHIM_MAX_DEVICES];           /* under mu */
    int self_pid;
    uint64_t self_start;
    char command[LEDGER_NAME_LEN];           /* /proc/self/comm, at the first registration */
    char group[LEDGER_NAME_LEN];             /* VRAM_GROUP, "" none; set once */
    char malformed[160];                     /* a limit variable that is no size: every allocation is
                                              * refused (fail closed), this says which; "" none */
    size_t group_limit;                      /* VRAM_GROUP_LIMIT, 0 none; set once */
    /* preallocation (VRAM_GROWTH=0): the balloon per device, under balloon_mu */
    int prealloc;                            /* VRAM_GROWTH=0; set once */
    pthread_mutex_t balloon_mu;              /* taken before g.mu; never together with ledger_mu */
    int balloon_state[SHIM_MAX_DEVICES];     /* 0 not started, 1 active, -1 on demand (atomic reads) */
    size_t balloon_bytes[SHIM_MAX_DEVICES];  /* the sum of the pieces held */
    size_t balloon_piece[SHIM_MAX_DEVICES];  /* the size of a full piece */
    size_t balloon_gran[SHIM_MAX_DEVICES];   /* the device's allocation granularity */
    CUmemGenericAllocationHandle *balloon_h[SHIM_MAX_DEVICES];   /* the pieces' handles */
    size_t *balloon_sz[SHIM_MAX_DEVICES];    /* their sizes (the last piece may be smaller) */
    size_t balloon_n[SHIM_MAX_DEVICES], balloon_cap[SHIM_MAX_DEVICES];
    int balloon_short[SHIM_MAX_DEVICES];     /* the last fill stopped below limit - in use (card full) */
    size_t balloon_slack[SHIM_MAX_DEVICES];  /* while short: released beyond what allocations took */
    int fallback_said;                       /* the on-demand note was printed */
} shim_state;

extern shim_state g;

/* ---- env.c ------------------------------------------------------------------------------------ */

/* Reads the environment once (pthread_once) and registers the fork handlers. */
void shim_env(void);
/* The VRAM_LOG=1 line of the limits in force, said when the driver is loaded (or could not be). */
void shim_env_say(int cuda_loaded);

/* ---- interpose.c ------------------------------------------------------------------------------ */

shim_dlsym_fn shim_real_dlsym(void);
/* Loads the driver once (shim_cuda_init under pthread_once); then g.real is set. */
void shim_cuda_load(void);
/* The driver's own function for hook `i`, or NULL (loads the driver first). */
void *shim_real_fn(int i);
#define SHIM_REAL(sym) ((pfn_##sym)shim_real_fn(SHIM_HOOK_##sym))
/* The device of the calling thread's current context, or -1 (no context, or beyond the table). */
int shim_current_device(void);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", for messages (after the driver is loaded). */
void shim_error_text(CUresult r, char *buf, size_t len);
/* The UUID of the program's device `dev` as the ledger keeps it ("GPU-...", "unknown-<dev>"). */
void shim_device_uuid(int dev, char *out, size_t len);

/* ---- table.c (callers hold g.mu) -------------------------------------------------------------- */

shim_entry *shim_find_unsafe(unsigned long long key, int kind);
int shim_insert_unsafe(const shim_entry *e);
void shim_remove_unsafe(shim_entry *e);

/* ---- limits.c --------------------------------------------------------------------------------- */

int shim_reserve(const char *fn, int dev, size_t size);
void shim_unreserve(int dev, size_t size);
int shim_forget(int kind, unsigned long long key, shim_entry *out);
void shim_freed(CUresult r, const shim_entry *e);
CUresult shim_settle(CUresult r, int kind, unsigned long long *value, size_t size, int dev);

enum { SHIM_VIEW_LIMIT = 1, SHIM_VIEW_GROUP = 2 };
int shim_view(int dev, size_t group_free, size_t *total, size_t *free_bytes);

/* ---- balloon.c -------------------------------------------------------------------------------- */

void shim_balloon_start(int dev);
void shim_balloon_make_room(int dev, size_t size);
void shim_balloon_refill(int dev);
size_t shim_balloon_bytes(int dev);

/* ---- group.c ---------------------------------------------------------------------------------- */

/* Publishes g.used[dev] (and the peak) into this process's slot. Caller holds g.mu. */
void shim_publish_unsafe(int dev);
/* Registers this process's slot for `dev` at the first accounted call on it. */
void shim_register(int dev);
void shim_note_ledger_lost(void);
/* With a group limit and the ledger open: takes ledger_mu and the ledger lock and sums the group's
 * use on dev into *total; returns 1 when the locks are held (shim_group_end releases them). */
int shim_group_begin(int dev, uint64_t *total);
void shim_group_end(void);
void shim_log_group_refusal(const char *fn, int dev, size_t size, uint64_t total);
size_t shim_group_free_uuid(const char *uuid);
size_t shim_group_free(int dev);

#endif /* VRAM_SHIM_SHIM_H */
