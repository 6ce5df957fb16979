/*
 * preload.c: libvram_preload.so, loaded with LD_PRELOAD by `vram run`. It caps the device memory an
 * unmodified CUDA program takes, by interposing on the CUDA driver API.
 *
 * How calls reach it
 *   - Programs linked against libcuda bind to the exported symbols below (LD_PRELOAD puts this
 *     library first in the global lookup scope).
 *   - Programs that dlopen("libcuda.so.1") and dlsym the driver's symbols (the CUDA runtime, JAX,
 *     PyTorch's lazy loading) go through the exported dlsym: for an interposed name that resolves,
 *     it returns this library's version; everything else is forwarded to the real dlsym as a tail
 *     call, so that RTLD_NEXT keeps meaning "after the caller" (the build compiles this file with
 *     -O2 for that; tests/shim checks it).
 *   - Entry points obtained through cuGetProcAddress (v1 and _v2; the CUDA runtime of CUDA 12/13
 *     gets all its driver functions that way) are replaced by this library's versions for the
 *     interposed names, including cuGetProcAddress itself and the per-thread-stream (_ptsz)
 *     variants of the stream-ordered calls.
 *   - NVML: nvmlDeviceGetMemoryInfo and _v2 are exported and handed out by dlsym the same way (their
 *     real versions from dlopen("libnvidia-ml.so.1")); see "NVML" below.
 *   The real functions come from dlopen("libcuda.so.1") (the already loaded driver, found by its
 *   soname) and the real dlsym (dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), else "GLIBC_2.2.5").
 *
 * Accounting
 *   Per device (the current context's device, cuCtxGetDevice; for cuMemCreate the device named in
 *   its properties), bytes in use = the sum of the sizes of live allocations made through the
 *   interposed calls: cuMemAlloc, cuMemAllocPitch (pitch x height), cuMemAllocManaged (counted on
 *   the current device although managed memory may migrate), cuMemCreate, cuMemAllocAsync,
 *   cuMemAllocFromPoolAsync. A hash table maps each live pointer (or VMM handle) to its size and
 *   device. Frees (cuMemFree, cuMemRelease, cuMemFreeAsync) subtract when the driver's call returned
 *   success (never before: no one is granted bytes the driver still holds): a stream-ordered free
 *   gives its bytes back when it is enqueued, not when the GPU reaches it, and memory a CUDA
 *   memory pool caches beyond live allocations (its release threshold) is not counted.
 *   An allocation is reserved against the limit before the driver is called (so concurrent threads
 *   cannot together pass the limit) and settled afterwards. One mutex guards the counters and table.
 *
 * Limits (environment, read at the first interposed call)
 *   VRAM_LIMIT=BYTES every device; VRAM_LIMIT_<i>=BYTES device <i> as the program numbers it (after
 *   CUDA_VISIBLE_DEVICES), winning over VRAM_LIMIT. An allocation that would pass the limit fails
 *   with CUDA_ERROR_OUT_OF_MEMORY, the program's normal error path; with VRAM_LOG=1 one line on
 *   stderr says the vram limit was the cause, with the numbers. cuMemGetInfo reports total = the
 *   limit and free = limit - in use (0 when in use exceeds the limit, never an unsigned wrap; never
 *   more than the driver's own free plus the balloon), cuDeviceTotalMem the limit (at most the
 *   card's memory). With a group limit, cuMemGetInfo's free is at most what the group has left on
 *   the device. NVML's memory numbers are the same view (shim_view; see "NVML").
 *
 * Preallocation (VRAM_GROWTH=0, the default of `vram run` without --growth)
 *   A device with a limit keeps the limit reserved on the card: at the first accounted call on it
 *   the shim takes physical memory up to limit - in use with the real cuMemCreate (pinned device
 *   memory, never mapped) in pieces of 64 MiB rounded up to the device's allocation granularity
 *   (cuMemGetAllocationGranularity; 2 MiB when the driver has none), the "balloon", holding the
 *   handles per device. Before an allocation of the program is forwarded to the driver, balloon
 *   pieces are released (real cuMemRelease) until the balloon is at most limit - in use (the
 *   request's reservation included), so the program's memory comes out of its own reservation and
 *   a second process cannot take it away. After a free (and after a refused allocation gave its
 *   reservation back) the balloon is filled again up to limit - in use, in pieces; when another
 *   process took that memory meanwhile this is no error (VRAM_LOG=1 says so). The balloon is not
 *   the program's usage: cuMemGetInfo, cuDeviceTotalMem and the ledger show what they show with
 *   growth (cuMemGetInfo counts the balloon as free to the program). When cuMemCreate is missing
 *   or its first piece fails, that device falls back to memory on demand, said once on stderr.
 *   One mutex (balloon_mu, taken before g.mu, never with ledger_mu) serialises balloon changes, each
 *   against the current in-use count, so threads cannot together hold more than the limit.
 *   VRAM_GROWTH unset or 1: memory on demand, nothing taken up front.
 *
 * The ledger (ledger.h; read by `vram top`)
 *   At the first accounted call on a device the process claims a slot for (itself, that device) in
 *   the per-machine ledger: pid, start time, the device's UUID (cuDeviceGetUuid_v2 / cuDeviceGetUuid
 *   of the real driver; "unknown-<ordinal>" when there is none), its limit, VRAM_GROUP, the group
 *   limit and /proc/self/comm. Every change of a device's usage stores in_use and peak into the
 *   process's own slot (two relaxed atomic stores under g.mu; no ledger lock). The slots are freed
 *   at exit (a destructor); a process killed before that is reclaimed by whoever scans the ledger.
 *   Each slot is mirrored in the process's shadow (ledger_shadow_create: a sealed memfd no one can
 *   shrink, published with the same stores), from which a ledger made anew after a truncation or
 *   deletion recovers the process's slot and usage even when it makes no call.
 *   After fork the child starts with no slot and nothing counted. A ledger that cannot be opened (bad
 *   permissions, full) is said on stderr with VRAM_LOG=1 or a group limit, and the program runs on.
 *
 * Group limits (VRAM_GROUP=NAME, VRAM_GROUP_LIMIT=BYTES)
 *   An allocation on a device is refused (CUDA_ERROR_OUT_OF_MEMORY; with VRAM_LOG=1 a line naming
 *   the group limit) when the bytes in use of the group's live slots on that device's UUID plus the
 *   request would pass VRAM_GROUP_LIMIT. The slow path: under a process mutex and the ledger's flock
 *   the ledger's slots are scanned (1024 slots, a /proc/<pid>/stat read per live slot), then the
 *   reservation is published into the slot before the lock is released, so that processes of the
 *   group cannot pass the limit together. Frees need no lock (usage only falls). Each process
 *   enforces its own VRAM_GROUP_LIMIT. When the ledger file was rebuilt, deleted or replaced by
 *   another process, or truncated under this one, the slow path first follows the file now at the
 *   path (shim_follow_locked: maps it, finds or claims this process's slots, publishes its usage);
 *   meanwhile whoever made the new file carried this process's slot over from the old one (ledger.h,
 *   "Faults to the file"), so a member that makes no call is still counted.
 *
 * Not covered yet: the legacy v1 entry points (32-bit sizes, CUDA < 3.2), dlvsym lookups of driver
 * symbols, NVML calls other than nvmlDeviceGetMemoryInfo / _v2 (see "NVML" below).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/common.h"
#include "cuda_driver.h"
#include "ledger.h"
#include "nvml_types.h"

#define SHIM_MAX_DEVICES 64
#define SHIM_LEDGER_BYTES (sizeof(ledger_header) + (size_t)LEDGER_SLOTS * sizeof(ledger_slot))

/* ---- the real functions ---------------------------------------------------------------------- */

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

typedef struct shim_hook {
    const char *symbol;   /* exported name, "cuMemAlloc_v2" */
    const char *base;     /* name given to cuGetProcAddress, "cuMemAlloc" */
    int         min_version;
    int         ptsz;
    void       *wrapper;  /* this library's function */
} shim_hook;

static const shim_hook shim_hooks[SHIM_NUM_HOOKS] = {
#define X(sym, base, ver, ptsz) { #sym, base, ver, ptsz, (void *)sym },
    SHIM_HOOKS(X)
#undef X
};

/* cuMemGetAllocationGranularity (CUDA 10.2); option 0 = CU_MEM_ALLOC_GRANULARITY_MINIMUM. */
typedef CUresult (*shim_pfn_granularity)(size_t *granularity, const CUmemAllocationProp *prop, int option);

typedef struct shim_real {
    void *lib;                              /* libcuda.so.1, or NULL when it cannot be loaded */
    void *fn[SHIM_NUM_HOOKS];               /* the driver's own versions, by SHIM_HOOK_* */
    pfn_cuCtxGetDevice cuCtxGetDevice;
    shim_pfn_granularity cuMemGetAllocationGranularity;   /* NULL on drivers without it */
    cuda_pfn_cuGetErrorName cuGetErrorName;                    /* for messages; may be NULL */
    cuda_pfn_cuGetErrorString cuGetErrorString;
} shim_real;

/* ---- state ----------------------------------------------------------------------------------- */

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
    shim_entry *table;                       /* open addressing, linear probing */
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

static shim_state g = { .mu = PTHREAD_MUTEX_INITIALIZER, .ledger_mu = PTHREAD_MUTEX_INITIALIZER,
                        .balloon_mu = PTHREAD_MUTEX_INITIALIZER, .shadow_fd = -1 };
static pthread_once_t shim_dl_once = PTHREAD_ONCE_INIT;
static pthread_once_t shim_cuda_once = PTHREAD_ONCE_INIT;
static shim_dlsym_fn shim_real_dlsym_fn;

/* ---- the real dlsym and the driver ------------------------------------------------------------- */

static void shim_dl_init(void) {
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    shim_real_dlsym_fn = (shim_dlsym_fn)f;
}

static shim_dlsym_fn shim_real_dlsym(void) {
    pthread_once(&shim_dl_once, shim_dl_init);
    return shim_real_dlsym_fn;
}

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", for messages (after shim_cuda_init). */
static void shim_error_text(CUresult r, char *buf, size_t len) {
    cuda_abi_error_text(r, g.real.cuGetErrorName, g.real.cuGetErrorString, buf, len);
}

static void shim_fmt_bytes(char *buf, size_t len, size_t bytes) {
    double b = (double)bytes;
    if (bytes >= (1ull << 30)) snprintf(buf, len, "%.2f GiB", b / (double)(1ull << 30));
    else if (bytes >= (1ull << 20)) snprintf(buf, len, "%.2f MiB", b / (double)(1ull << 20));
    else snprintf(buf, len, "%zu bytes", bytes);
}

/* A size as everywhere in vram ("1073741824", "1G", "1.5GiB"): vram_parse_size, the library's own
 * parser, compiled in from src/common; 0 on success. */
static int shim_parse_bytes(const char *s, size_t *out) {
    return vram_parse_size(s, out) == VRAM_OK ? 0 : -1;
}

/* A limit variable that is not a size: nothing is allowed then (a limit never silently drops). */
static void shim_malformed(const char *name, const char *value) {
    if (!g.malformed[0]) snprintf(g.malformed, sizeof g.malformed, "%s='%.80s'", name, value);
    fprintf(stderr, "vram: %s='%s' is not a size (bytes, or a number with K, M, G or T, e.g. 6GiB): every "
            "allocation is refused\n", name, value);
}

static void shim_read_limit(const char *name, int dev, int src) {
    const char *v = getenv(name);
    size_t bytes = 0;
    if (!v) return;
    if (shim_parse_bytes(v, &bytes) != 0) {
        shim_malformed(name, v);
        return;
    }
    for (int d = (dev < 0 ? 0 : dev); d < (dev < 0 ? SHIM_MAX_DEVICES : dev + 1); d++) {
        if (src == SHIM_LIMIT_ALL && g.limit_src[d] == SHIM_LIMIT_DEVICE) continue;
        g.limit[d] = bytes;
        g.limit_src[d] = bytes ? src : SHIM_LIMIT_NONE;
    }
}

/* VRAM_GROUP=NAME, VRAM_GROUP_LIMIT=BYTES (a limit without a group is ignored, said on stderr). */
static void shim_read_group(void) {
    const char *name = getenv("VRAM_GROUP"), *lim = getenv("VRAM_GROUP_LIMIT");
    if (name && *name) {
        if (ledger_valid_group(name)) snprintf(g.group, sizeof g.group, "%s", name);
        else fprintf(stderr, "vram: VRAM_GROUP='%s' is not a group name (1-31 of A-Z a-z 0-9 . _ -); ignored\n", name);
    }
    if (lim && *lim) {
        size_t bytes = 0;
        if (shim_parse_bytes(lim, &bytes) != 0) {
            shim_malformed("VRAM_GROUP_LIMIT", lim);
        } else if (!g.group[0]) {
            /* a group limit with no group to share it: this process alone is held to it */
            fputs("vram: VRAM_GROUP_LIMIT without a valid VRAM_GROUP: it limits this process alone\n", stderr);
            g.group_limit = bytes;
        } else {
            g.group_limit = bytes;
        }
    }
}

/* fork: the child must not write the parent's slots nor share its ledger lock (flock belongs to the
 * open file description, which the child inherits): it starts with no slot, no ledger and nothing
 * counted (memory the parent allocated is the parent's), and registers anew at its first call. */
static void shim_fork_prepare(void) {
    pthread_mutex_lock(&g.balloon_mu);
    pthread_mutex_lock(&g.ledger_mu);
    pthread_mutex_lock(&g.mu);
}

static void shim_fork_parent(void) {
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.ledger_mu);
    pthread_mutex_unlock(&g.balloon_mu);
}

static void shim_fork_child(void) {
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        g.slot[d] = NULL;
        g.slot_tried[d] = 0;
        g.used[d] = 0;
        g.peak[d] = 0;
        /* the parent's balloon pieces are the parent's: forgotten, not released */
        g.balloon_state[d] = 0;
        g.balloon_bytes[d] = 0;
        g.balloon_n[d] = 0;
        g.balloon_short[d] = 0;
        g.balloon_slack[d] = 0;
    }
    if (g.table) memset(g.table, 0, g.cap * sizeof *g.table);
    g.count = 0;
    if (g.ledger_state == 1) ledger_close(&g.ledger);
    g.ledger_state = 0;
    if (g.shadow_map) munmap(g.shadow_map, SHIM_LEDGER_BYTES);
    if (g.shadow_fd >= 0) close(g.shadow_fd);   /* the parent's; the child makes its own */
    g.shadow_map = NULL;
    g.shadow = NULL;
    g.shadow_fd = -1;
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.ledger_mu);
    pthread_mutex_unlock(&g.balloon_mu);
}

/* The environment (limits, log, growth, group), read once: at the first interposed call, or at an NVML
 * query of a program that has not loaded CUDA (which must not load it: see "NVML"). */
static void shim_env_init(void) {
    const char *log = getenv("VRAM_LOG");
    g.log = log && strcmp(log, "1") == 0;
    const char *growth_env = getenv("VRAM_GROWTH");
    g.prealloc = growth_env && strcmp(growth_env, "0") == 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        char name[32];
        snprintf(name, sizeof name, "VRAM_LIMIT_%d", d);
        shim_read_limit(name, d, SHIM_LIMIT_DEVICE);
    }
    shim_read_limit("VRAM_LIMIT", -1, SHIM_LIMIT_ALL);
    shim_read_group();
    pthread_atfork(shim_fork_prepare, shim_fork_parent, shim_fork_child);
}

static pthread_once_t shim_env_once = PTHREAD_ONCE_INIT;

static void shim_env(void) { pthread_once(&shim_env_once, shim_env_init); }

static void shim_cuda_init(void) {
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    shim_env();
    g.real.lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (g.real.lib && real_dlsym) {
        for (int i = 0; i < SHIM_NUM_HOOKS; i++) g.real.fn[i] = real_dlsym(g.real.lib, shim_hooks[i].symbol);
        g.real.cuCtxGetDevice = (pfn_cuCtxGetDevice)real_dlsym(g.real.lib, "cuCtxGetDevice");
        g.real.cuMemGetAllocationGranularity =
            (shim_pfn_granularity)real_dlsym(g.real.lib, "cuMemGetAllocationGranularity");
        g.real.cuGetErrorName = (cuda_pfn_cuGetErrorName)real_dlsym(g.real.lib, "cuGetErrorName");
        g.real.cuGetErrorString = (cuda_pfn_cuGetErrorString)real_dlsym(g.real.lib, "cuGetErrorString");
    }
    if (g.log) {
        char all[32] = "none";
        int per_device = 0;
        for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
            if (g.limit_src[d] == SHIM_LIMIT_ALL) shim_fmt_bytes(all, sizeof all, g.limit[d]);
            per_device += g.limit_src[d] == SHIM_LIMIT_DEVICE;
        }
        char grp[96] = "";
        if (g.group[0]) {
            char gl[32] = "none";
            if (g.group_limit) shim_fmt_bytes(gl, sizeof gl, g.group_limit);
            snprintf(grp, sizeof grp, ", group %s (group limit %s)", g.group, gl);
        }
        fprintf(stderr, "vram: preload active in pid %ld: VRAM_LIMIT %s, %d device limit(s) from "
                "VRAM_LIMIT_<i>%s, %s%s\n", (long)getpid(), all, per_device, grp,
                g.prealloc ? "preallocation (the limit is reserved at the first allocation)"
                           : "memory on demand (growth)",
                g.real.lib ? "" : "; libcuda.so.1 could not be loaded");
    }
}

/* The driver's own function for hook `i`, or NULL. */
static void *shim_real_fn(int i) {
    pthread_once(&shim_cuda_once, shim_cuda_init);
    return g.real.fn[i];
}

#define SHIM_REAL(sym) ((pfn_##sym)shim_real_fn(SHIM_HOOK_##sym))

/* The device of the calling thread's current context, or -1 (no context, or beyond the table). */
static int shim_current_device(void) {
    CUdevice dev = -1;
    pthread_once(&shim_cuda_once, shim_cuda_init);
    if (!g.real.cuCtxGetDevice || g.real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
    return dev >= 0 && dev < SHIM_MAX_DEVICES ? dev : -1;
}

/* ---- the table of live allocations (callers hold g.mu) ------------------------------------------ */

static size_t shim_hash(unsigned long long key, int kind) {
    unsigned long long h = (key ^ (unsigned long long)kind) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

static shim_entry *shim_find_unsafe(unsigned long long key, int kind) {
    if (!g.cap) return NULL;
    for (size_t i = shim_hash(key, kind) & (g.cap - 1);; i = (i + 1) & (g.cap - 1)) {
        shim_entry *e = &g.table[i];
        if (!e->kind) return NULL;
        if (e->key == key && e->kind == kind) return e;
    }
}

static void shim_place_unsafe(shim_entry *t, size_t cap, const shim_entry *e) {
    size_t i = shim_hash(e->key, e->kind) & (cap - 1);
    while (t[i].kind) i = (i + 1) & (cap - 1);
    t[i] = *e;
}

/* Inserts (or replaces) an entry; -1 when the table cannot grow. */
static int shim_insert_unsafe(const shim_entry *e) {
    shim_entry *old = shim_find_unsafe(e->key, e->kind);
    if (old) { *old = *e; return 0; }
    if ((g.count + 1) * 2 > g.cap) {
        size_t cap = g.cap ? g.cap * 2 : 1024;
        shim_entry *t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < g.cap; i++)
            if (g.table[i].kind) shim_place_unsafe(t, cap, &g.table[i]);
        free(g.table);
        g.table = t;
        g.cap = cap;
    }
    shim_place_unsafe(g.table, g.cap, e);
    g.count++;
    return 0;
}

/* Removes the entry at e, shifting later entries of its probe run back (no tombstones). */
static void shim_remove_unsafe(shim_entry *e) {
    size_t mask = g.cap - 1, hole = (size_t)(e - g.table);
    g.table[hole].kind = 0;
    g.count--;
    for (size_t i = (hole + 1) & mask; g.table[i].kind; i = (i + 1) & mask) {
        size_t home = shim_hash(g.table[i].key, g.table[i].kind) & mask;
        /* The entry at i may move to the hole when its home is not cyclically in (hole, i]. */
        int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        g.table[hole] = g.table[i];
        g.table[i].kind = 0;
        hole = i;
    }
}

/* ---- accounting ------------------------------------------------------------------------------------- */

static void shim_log_refusal(const char *fn, int dev, size_t size, size_t used, size_t limit, int src) {
    char req[32], in_use[32], lim[32], from[32];
    shim_fmt_bytes(req, sizeof req, size);
    shim_fmt_bytes(in_use, sizeof in_use, used);
    shim_fmt_bytes(lim, sizeof lim, limit);
    if (src == SHIM_LIMIT_DEVICE) snprintf(from, sizeof from, "VRAM_LIMIT_%d", dev);
    else snprintf(from, sizeof from, "VRAM_LIMIT");
    fprintf(stderr,
            "vram: %s of %s (%zu bytes) on device %d refused: the vram limit would be exceeded "
            "(in use %s = %zu bytes, limit %s = %zu bytes, from %s); returning "
            "CUDA_ERROR_OUT_OF_MEMORY\n",
            fn, req, size, dev, in_use, used, lim, limit, from);
}

/* ---- the ledger ---------------------------------------------------------------------------------- */

/* Publishes g.used[dev] (and the peak) into this process's slot: two stores, no lock. Caller holds g.mu. */
static void shim_publish_unsafe(int dev) {
    if (g.used[dev] > g.peak[dev]) g.peak[dev] = g.used[dev];
    ledger_slot *s = g.slot[dev];
    if (!s) return;
    if (g.shadow) {
        __atomic_store_n(&g.shadow[dev].in_use, (uint64_t)g.used[dev], __ATOMIC_RELAXED);
        __atomic_store_n(&g.shadow[dev].peak, (uint64_t)g.peak[dev], __ATOMIC_RELAXED);
    }
    /* a ledger re-initialised under this process may have given the place to another process: never
     * write its counters (shim_follow_locked finds this process's slot again) */
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != LEDGER_SLOT_LIVE || s->pid != g.self_pid ||
        s->start_time != g.self_start)
        return;
    __atomic_store_n(&s->in_use, (uint64_t)g.used[dev], __ATOMIC_RELAXED);
    __atomic_store_n(&s->peak, (uint64_t)g.peak[dev], __ATOMIC_RELAXED);
}

/* Copies this process's slot of `dev` into its shadow (ledger_shadow_create), the state last, or
 * clears the shadow's slot when s is NULL. Caller holds g.mu. */
static void shim_shadow_set_unsafe(int dev, const ledger_slot *s) {
    if (!g.shadow) return;
    ledger_slot *t = &g.shadow[dev];
    __atomic_store_n(&t->state, 0, __ATOMIC_RELEASE);
    if (!s) return;
    ledger_slot c = *s;
    c.state = 0;
    c.reserved0 = (uint32_t)(s - g.ledger.slots) + 1;   /* its place in the ledger, for a recovery */
    memcpy(t, &c, sizeof c);
    __atomic_store_n(&t->state, LEDGER_SLOT_LIVE, __ATOMIC_RELEASE);
}

static void shim_device_uuid(int dev, char *out, size_t len) {
    typedef struct { unsigned char b[16]; } shim_uuid;
    typedef CUresult (*pfn_uuid)(shim_uuid *uuid, CUdevice dev);
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    pfn_uuid get = NULL;
    pfn_cuDeviceGet device_get = NULL;
    if (g.real.lib && real_dlsym) {
        get = (pfn_uuid)real_dlsym(g.real.lib, "cuDeviceGetUuid_v2");
        if (!get) get = (pfn_uuid)real_dlsym(g.real.lib, "cuDeviceGetUuid");
        device_get = (pfn_cuDeviceGet)real_dlsym(g.real.lib, "cuDeviceGet");
    }
    CUdevice d = dev;
    shim_uuid u;
    if (get && (!device_get || device_get(&d, dev) == CUDA_SUCCESS) && get(&u, d) == CUDA_SUCCESS) {
        const unsigned char *b = u.b;
        snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    } else {
        snprintf(out, len, "unknown-%d", dev);   /* group totals then go by ordinal */
    }
}

/* ---- a ledger file truncated under the mapping ---------------------------------------------------- *
 *
 * The ledger is a shared mapping of a file any process of the user may truncate; a store or load past
 * its new end raises SIGBUS, which would kill the program over a bookkeeping file. The handler
 * replaces the whole mapping with private memory and returns: the access is made again and succeeds,
 * and the process goes on: one with a group limit reads the file at the path again before its next
 * allocation is decided (shim_follow_locked; the allocation is refused when the file keeps being
 * truncated), one without stays unlisted; meanwhile its shadow keeps it counted. A SIGBUS anywhere
 * else goes to the handler the program had (or the default action). */
static struct sigaction shim_old_sigbus;

static void shim_sigbus(int sig, siginfo_t *si, void *uctx) {
    char *map = g.ledger.map, *addr = si ? (char *)si->si_addr : NULL;
    size_t size = g.ledger.size;
    if (map != NULL && addr >= map && addr < map + size &&
        mmap(map, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
        g.ledger_lost = 1;
        return;
    }
    if (shim_old_sigbus.sa_flags & SA_SIGINFO) {
        shim_old_sigbus.sa_sigaction(sig, si, uctx);
    } else if (shim_old_sigbus.sa_handler != SIG_DFL && shim_old_sigbus.sa_handler != SIG_IGN) {
        shim_old_sigbus.sa_handler(sig);
    } else {
        signal(SIGBUS, SIG_DFL);      /* the access is made again on return: the default action then */
    }
}

/* Says once, outside the handler, that the ledger was lost. */
static void shim_note_ledger_lost(void) {
    if (!g.ledger_lost || __atomic_exchange_n(&g.ledger_lost_said, 1, __ATOMIC_RELAXED)) return;
    fprintf(stderr, "vram: the ledger file was truncated under this process: %s\n",
            g.group_limit ? "it reads the file at the path again at its next allocation"
                          : "it is no longer listed by vram top");
}

static void shim_sigbus_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = shim_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &shim_old_sigbus);
}

/* Opens the ledger once (caller holds ledger_mu); 0 when it is open. */
static int shim_ledger_ready_locked(void) {
    if (g.ledger_state) return g.ledger_state == 1 ? 0 : -1;
    char err[512];
    g.self_pid = (int)getpid();
    if (ledger_start_time(g.self_pid, &g.self_start) != 0 || ledger_open(&g.ledger, err, sizeof err) != 0) {
        if (!g.self_start) snprintf(err, sizeof err, "cannot read /proc/%d/stat", g.self_pid);
        g.ledger_state = -1;
        if (g.log || g.group_limit)
            fprintf(stderr, "vram: the ledger is unavailable (%s): this process is not listed by vram top%s\n",
                    err, g.group_limit ? " and its group limit holds for its own usage alone" : "");
        return -1;
    }
    if (g.ledger.rebuilt[0] && g.log) fprintf(stderr, "vram: the ledger %s\n", g.ledger.rebuilt);
    shim_sigbus_install();
    g.shadow_fd = ledger_shadow_create(&g.ledger);
    if (g.shadow_fd >= 0) {
        void *m = mmap(NULL, SHIM_LEDGER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, g.shadow_fd, 0);
        if (m != MAP_FAILED) {
            g.shadow_map = m;
            g.shadow = (ledger_slot *)((char *)m + sizeof(ledger_header));
        }
    }
    __atomic_store_n(&g.ledger_state, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Caller holds ledger_mu and the ledger lock (ledger_state 1). When the ledger file at the path is no
 * longer the one mapped (deleted, replaced, rebuilt by another process) or the mapping was lost to a
 * truncation, maps the current file; and every slot of this process that is no longer its own there
 * (not carried over, or wiped by a re-initialised file) is found or claimed again, with the current
 * usage published, so the group's budget counts this process again. 0, or -1 when the file at the
 * path cannot be opened (the old mapping is kept; it may miss what other members hold now). g.mu is
 * held across the swap of the mapping (slot pointers change), so a free waits for a recovery's
 * search of /proc while it runs: rare, after a fault only. */
static int shim_follow_locked(void) {
    char err[512];
    pthread_mutex_lock(&g.mu);
    int lost = g.ledger_lost;
    int r = ledger_follow_locked(&g.ledger, lost, err, sizeof err);
    if (r < 0) {
        pthread_mutex_unlock(&g.mu);
        static int said;   /* under ledger_mu */
        if (!said && (g.log || g.group_limit)) {
            said = 1;
            fprintf(stderr, "vram: the ledger was replaced and the new one cannot be opened (%s): this process's "
                    "allocations under its group limit are refused until it can be\n", err);
        }
        return -1;
    }
    if (r > 0) {
        g.ledger_lost = 0;
        __atomic_store_n(&g.ledger_lost_said, 0, __ATOMIC_RELAXED);
    }
    int reclaimed = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        ledger_slot *s = g.slot[d];
        if (!s && !g.slot_tried[d]) continue;
        if (!s && r == 0) continue;   /* the ledger was full when this device came: it stays unlisted */
        if (s && r == 0 && s->state == LEDGER_SLOT_LIVE && s->pid == g.self_pid && s->start_time == g.self_start &&
            s->device == d)
            continue;
        s = ledger_find_locked(&g.ledger, g.self_pid, g.self_start, d);
        if (!s) s = ledger_claim_locked(&g.ledger, g.self_pid, g.self_start, d, g.uuid[d], g.group, g.command,
                                        g.limit[d], g.group_limit);
        g.slot[d] = s;
        shim_shadow_set_unsafe(d, s);
        if (s) shim_publish_unsafe(d);
        reclaimed++;
    }
    pthread_mutex_unlock(&g.mu);
    if (reclaimed && g.log)
        fprintf(stderr, "vram: the ledger file was %s: this process follows the file now at %s and is listed there again\n",
                r > 0 ? "replaced" : "re-initialised", g.ledger.path);
    return 0;
}

/* Registers this process's slot for `dev` at the first accounted call on it (slow path, once). */
static void shim_register(int dev) {
    if (__atomic_load_n(&g.slot_tried[dev], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g.ledger_mu);
    if (!g.slot_tried[dev] && shim_ledger_ready_locked() == 0) {
        char comm[LEDGER_NAME_LEN] = "?";
        FILE *f = fopen("/proc/self/comm", "re");
        if (f) {
            if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        memcpy(g.command, comm, sizeof comm);
        shim_device_uuid(dev, g.uuid[dev], sizeof g.uuid[dev]);
        ledger_lock(&g.ledger);
        ledger_slot *s = ledger_claim_locked(&g.ledger, g.self_pid, g.self_start, dev, g.uuid[dev], g.group,
                                             comm, g.limit[dev], g.group_limit);
        pthread_mutex_lock(&g.mu);
        g.slot[dev] = s;
        shim_shadow_set_unsafe(dev, s);
        if (s) shim_publish_unsafe(dev);
        pthread_mutex_unlock(&g.mu);
        ledger_unlock(&g.ledger);
        if (!s && (g.log || g.group_limit))
            fprintf(stderr, "vram: the ledger is full (%u slots): device %d of this process is not listed "
                    "by vram top%s\n", LEDGER_SLOTS, dev,
                    g.group_limit ? " and its group limit holds for its own usage alone" : "");
    }
    __atomic_store_n(&g.slot_tried[dev], 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g.ledger_mu);
}

/* At exit: the slots are freed (a process killed before this is reclaimed by whoever scans). */
__attribute__((destructor)) static void shim_unregister(void) {
    pthread_mutex_lock(&g.ledger_mu);
    if (g.ledger_state == 1 && g.self_pid == (int)getpid()) {
        ledger_lock(&g.ledger);
        pthread_mutex_lock(&g.mu);
        for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
            if (g.slot[d]) ledger_release_locked(g.slot[d], g.self_pid, g.self_start);
            g.slot[d] = NULL;
            shim_shadow_set_unsafe(d, NULL);
        }
        pthread_mutex_unlock(&g.mu);
        ledger_unlock(&g.ledger);
    }
    pthread_mutex_unlock(&g.ledger_mu);
}

static void shim_log_group_refusal(const char *fn, int dev, size_t size, uint64_t total) {
    char req[32], in_use[32], lim[32];
    shim_fmt_bytes(req, sizeof req, size);
    shim_fmt_bytes(in_use, sizeof in_use, (size_t)total);
    shim_fmt_bytes(lim, sizeof lim, g.group_limit);
    fprintf(stderr,
            "vram: %s of %s (%zu bytes) on device %d refused: the vram group limit would be exceeded "
            "(group %s uses %s = %llu bytes on %s, group limit %s = %zu bytes, from VRAM_GROUP_LIMIT); "
            "returning CUDA_ERROR_OUT_OF_MEMORY\n",
            fn, req, size, dev, g.group, in_use, (unsigned long long)total, g.uuid[dev], lim, g.group_limit);
}

/* ---- preallocation: the balloon (see the header) ----------------------------------------------- */

#define SHIM_BALLOON_PIECE (64ull << 20)
#define SHIM_BALLOON_GRAN_DEFAULT (2ull << 20)

/* What the balloon may hold on `dev`: limit - in use, 0 when in use reached the limit. */
static size_t shim_balloon_target(int dev) {
    pthread_mutex_lock(&g.mu);
    size_t used = g.used[dev], limit = g.limit[dev];
    pthread_mutex_unlock(&g.mu);
    return used >= limit ? 0 : limit - used;
}

static CUmemAllocationProp shim_balloon_prop(int dev) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

/* Appends a piece to dev's list (caller holds balloon_mu); -1 when the list cannot grow. */
static int shim_balloon_push_locked(int dev, CUmemGenericAllocationHandle h, size_t size) {
    if (g.balloon_n[dev] == g.balloon_cap[dev]) {
        size_t cap = g.balloon_cap[dev] ? g.balloon_cap[dev] * 2 : 64;
        CUmemGenericAllocationHandle *hs = realloc(g.balloon_h[dev], cap * sizeof *hs);
        if (!hs) return -1;
        g.balloon_h[dev] = hs;
        size_t *sz = realloc(g.balloon_sz[dev], cap * sizeof *sz);
        if (!sz) return -1;
        g.balloon_sz[dev] = sz;
        g.balloon_cap[dev] = cap;
    }
    g.balloon_h[dev][g.balloon_n[dev]] = h;
    g.balloon_sz[dev][g.balloon_n[dev]] = size;
    g.balloon_n[dev]++;
    __atomic_store_n(&g.balloon_bytes[dev], g.balloon_bytes[dev] + size, __ATOMIC_RELAXED);
    return 0;
}

/* Fills dev's balloon up to limit - in use, in pieces (caller holds balloon_mu). Returns the
 * driver's error of the piece that failed, CUDA_SUCCESS when the balloon reached its target. */
static CUresult shim_balloon_fill_locked(int dev) {
    pfn_cuMemCreate create = SHIM_REAL(cuMemCreate);
    pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
    CUmemAllocationProp prop = shim_balloon_prop(dev);
    size_t gran = g.balloon_gran[dev], target = shim_balloon_target(dev);
    while (g.balloon_bytes[dev] < target && target - g.balloon_bytes[dev] >= gran) {
        size_t want = target - g.balloon_bytes[dev];
        want -= want % gran;
        if (want > g.balloon_piece[dev]) want = g.balloon_piece[dev];
        CUmemGenericAllocationHandle h = 0;
        CUresult r = create(&h, want, &prop, 0);
        if (r == CUDA_SUCCESS && shim_balloon_push_locked(dev, h, want) != 0) {
            release(h);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != CUDA_SUCCESS) {
            g.balloon_short[dev] = 1;
            return r;
        }
    }
    g.balloon_short[dev] = 0;
    g.balloon_slack[dev] = 0;
    return CUDA_SUCCESS;
}

/* Releases pieces, newest first, until the balloon is at most `target` bytes (caller holds
 * balloon_mu); returns the bytes released. */
static size_t shim_balloon_shrink_locked(int dev, size_t target) {
    pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
    size_t before = g.balloon_bytes[dev];
    while (g.balloon_bytes[dev] > target && g.balloon_n[dev] > 0) {
        size_t i = --g.balloon_n[dev];
        CUresult r = release(g.balloon_h[dev][i]);
        __atomic_store_n(&g.balloon_bytes[dev], g.balloon_bytes[dev] - g.balloon_sz[dev][i], __ATOMIC_RELAXED);
        if (r != CUDA_SUCCESS && g.log) {
            char err[160];
            shim_error_text(r, err, sizeof err);
            fprintf(stderr, "vram: cuMemRelease of a preallocated piece on device %d failed: %s\n", dev, err);
        }
    }
    return before - g.balloon_bytes[dev];
}

static void shim_balloon_fallback_locked(int dev, const char *why) {
    __atomic_store_n(&g.balloon_state[dev], -1, __ATOMIC_RELEASE);
    if (g.fallback_said && !g.log) return;
    g.fallback_said = 1;
    fprintf(stderr, "vram: preallocation is not available on device %d (%s); memory is taken on demand\n", dev, why);
}

/* At the first accounted call on `dev` with VRAM_GROWTH=0 and a limit: the balloon is filled up
 * to the limit (less what is in use), or the device falls back to memory on demand. */
static void shim_balloon_start(int dev) {
    if (!g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g.balloon_mu);
    if (!g.balloon_state[dev]) {
        pfn_cuMemCreate create = SHIM_REAL(cuMemCreate);
        pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
        if (!g.limit[dev]) {
            __atomic_store_n(&g.balloon_state[dev], -1, __ATOMIC_RELEASE);   /* nothing to reserve */
        } else if (!create || !release) {
            shim_balloon_fallback_locked(dev, "the driver has no cuMemCreate/cuMemRelease");
        } else {
            CUmemAllocationProp prop = shim_balloon_prop(dev);
            size_t gran = 0;
            if (!g.real.cuMemGetAllocationGranularity ||
                g.real.cuMemGetAllocationGranularity(&gran, &prop, 0) != CUDA_SUCCESS || gran == 0)
                gran = SHIM_BALLOON_GRAN_DEFAULT;
            g.balloon_gran[dev] = gran;
            g.balloon_piece[dev] = (SHIM_BALLOON_PIECE + gran - 1) / gran * gran;
            CUresult r = shim_balloon_fill_locked(dev);
            char err[160] = "";
            if (r != CUDA_SUCCESS) shim_error_text(r, err, sizeof err);
            if (r != CUDA_SUCCESS && g.balloon_n[dev] == 0) {
                char why[200];
                snprintf(why, sizeof why, "cuMemCreate failed: %s", err);
                shim_balloon_fallback_locked(dev, why);
            } else {
                __atomic_store_n(&g.balloon_state[dev], 1, __ATOMIC_RELEASE);
                if (r != CUDA_SUCCESS && g.log) {
                    char held[32];
                    shim_fmt_bytes(held, sizeof held, g.balloon_bytes[dev]);
                    fprintf(stderr, "vram: preallocation on device %d reserved only %s (cuMemCreate: %s%s); the "
                            "rest is taken on demand\n", dev, held, err,
                            r == CUDA_ERROR_OUT_OF_MEMORY ? "; the card has less free memory" : "");
                }
            }
        }
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

/* Before an allocation of `size` bytes, just reserved, goes to the driver: room out of the balloon.
 * The balloon shrinks to limit - in use (the reservation included). While it is short (the card
 * had less free memory than the limit) that may not free anything, so `size` more is released
 * then (less what earlier releases left unused, the slack). */
static void shim_balloon_make_room(int dev, size_t size) {
    if (!g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE) != 1) return;
    pthread_mutex_lock(&g.balloon_mu);
    size_t released = shim_balloon_shrink_locked(dev, shim_balloon_target(dev));
    if (g.balloon_short[dev]) {
        size_t slack = g.balloon_slack[dev] + released;
        if (slack >= size) {
            slack -= size;
        } else {
            size_t need = size - slack, have = g.balloon_bytes[dev];
            size_t got = shim_balloon_shrink_locked(dev, have > need ? have - need : 0);
            slack = got > need ? got - need : 0;
        }
        g.balloon_slack[dev] = slack;
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

/* After bytes of `dev` were given back: the balloon is filled again up to limit - in use; memory
 * another process took meanwhile is no error (said with VRAM_LOG=1). */
static void shim_balloon_refill(int dev) {
    if (dev < 0 || !g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE) != 1) return;
    pthread_mutex_lock(&g.balloon_mu);
    int was_short = g.balloon_short[dev];
    CUresult r = shim_balloon_fill_locked(dev);
    if (r != CUDA_SUCCESS && !was_short && g.log) {   /* said when it starts falling short */
        char held[32], err[160];
        shim_fmt_bytes(held, sizeof held, g.balloon_bytes[dev]);
        shim_error_text(r, err, sizeof err);
        fprintf(stderr, "vram: preallocation on device %d could not take freed memory back (cuMemCreate: %s; "
                "another process may hold it): %s of the limit stay reserved, the rest is taken on demand\n",
                dev, err, held);
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

/* The bytes the balloon holds on `dev` (free to the program). */
static size_t shim_balloon_bytes(int dev) {
    return __atomic_load_n(&g.balloon_bytes[dev], __ATOMIC_RELAXED);
}

/* Reserves `size` bytes on `dev` against its limit and, with a group limit, against the group's
 * total on that device (summed over the ledger's live slots under the ledger lock: the slow path,
 * one scan of the ledger per allocation, taken only when a group limit is set). 0 on success, -1
 * (logged) when a limit would be passed. dev -1 is not accounted. */
static int shim_reserve(const char *fn, int dev, size_t size) {
    if (dev < 0) return 0;
    shim_register(dev);
    shim_balloon_start(dev);
    /* the group's total from the ledger; without a slot there (the ledger unavailable or full) the
     * group limit still holds, for this process's own usage (it fails closed, never open) */
    shim_note_ledger_lost();
    int grouped = 0;
    uint64_t total = 0;
    if (g.group_limit && __atomic_load_n(&g.ledger_state, __ATOMIC_ACQUIRE) == 1) {
        pthread_mutex_lock(&g.ledger_mu);
        ledger_lock(&g.ledger);
        /* A truncation while following or scanning (the rest reads as zeros) may hide members: the
         * file now at the path is read again, and the allocation refused when it keeps being
         * truncated; never this process's own usage alone, which would forget the others. */
        for (int tries = 0;; tries++) {
            if (shim_follow_locked() == 0 && !g.ledger_lost) {
                grouped = g.slot[dev] != NULL;   /* none: the ledger was full (own usage, below) */
                if (!grouped) break;
                total = ledger_group_total_locked(&g.ledger, g.group, g.uuid[dev]);
                if (!g.ledger_lost) break;
            }
            if (tries == 2) {
                grouped = 1;
                total = UINT64_MAX;
                break;
            }
        }
        if (!grouped) {
            ledger_unlock(&g.ledger);
            pthread_mutex_unlock(&g.ledger_mu);
        }
    }
    pthread_mutex_lock(&g.mu);
    size_t used = g.used[dev], limit = g.limit[dev];
    if (g.group_limit && !grouped) total = used;
    int over = (limit && (size > limit || used > limit - size)) || g.malformed[0];
    int over_group = !over && g.group_limit && (size > g.group_limit || total > g.group_limit - size);
    if (!over && !over_group) {
        g.used[dev] = used + size;
        shim_publish_unsafe(dev);
    }
    pthread_mutex_unlock(&g.mu);
    if (grouped) {
        ledger_unlock(&g.ledger);
        pthread_mutex_unlock(&g.ledger_mu);
    }
    if (over && g.malformed[0]) {
        if (g.log) fprintf(stderr, "vram: %s of %zu bytes on device %d refused: %s is not a size; returning "
                           "CUDA_ERROR_OUT_OF_MEMORY\n", fn, size, dev, g.malformed);
    } else if (over && g.log) {
        shim_log_refusal(fn, dev, size, used, limit, g.limit_src[dev]);
    }
    if (over_group && g.log) shim_log_group_refusal(fn, dev, size, total);
    if (over || over_group) return -1;
    shim_balloon_make_room(dev, size);
    return 0;
}

static void shim_unreserve(int dev, size_t size) {
    if (dev < 0) return;
    pthread_mutex_lock(&g.mu);
    g.used[dev] = g.used[dev] > size ? g.used[dev] - size : 0;
    shim_publish_unsafe(dev);
    pthread_mutex_unlock(&g.mu);
    shim_note_ledger_lost();
    shim_balloon_refill(dev);
}

/* Records a successful allocation whose bytes were reserved; -1 when the table cannot hold it
 * (the reservation is then given back). */
static int shim_record(int kind, unsigned long long key, size_t size, int dev) {
    if (dev < 0) return 0;
    shim_entry e = { .key = key, .size = size, .dev = dev, .kind = kind };
    pthread_mutex_lock(&g.mu);
    int rc = shim_insert_unsafe(&e);
    pthread_mutex_unlock(&g.mu);
    if (rc != 0) shim_unreserve(dev, size);
    return rc;
}

/* Subtracts a freed entry's bytes from use (after the driver freed them). */
static void shim_uncount(const shim_entry *e) {
    pthread_mutex_lock(&g.mu);
    g.used[e->dev] = g.used[e->dev] > e->size ? g.used[e->dev] - e->size : 0;
    shim_publish_unsafe(e->dev);
    pthread_mutex_unlock(&g.mu);
    shim_note_ledger_lost();
}

/* Takes the entry of a pointer or handle being freed out of the table (before the driver call, so
 * that the address, once freed, can be handed out and recorded again); its bytes stay in use until
 * the driver freed them (shim_freed), so that no other process or thread is granted them while
 * the memory is still held. 1 when there was one (copied to *out), 0 for memory not counted. */
static int shim_forget(int kind, unsigned long long key, shim_entry *out) {
    int found = 0;
    pthread_mutex_lock(&g.mu);
    shim_entry *e = shim_find_unsafe(key, kind);
    if (e) {
        *out = *e;
        shim_remove_unsafe(e);
        found = 1;
    }
    pthread_mutex_unlock(&g.mu);
    return found;
}

/* After the driver's free of a forgotten entry: r success gives its bytes back; a refusal puts the
 * entry back in the table (its bytes were never given back; when the table cannot hold it again,
 * they are: an entry not in the table could never be freed). */
static void shim_freed(CUresult r, const shim_entry *e) {
    if (r == CUDA_SUCCESS) {
        shim_uncount(e);
        shim_balloon_refill(e->dev);
        return;
    }
    pthread_mutex_lock(&g.mu);
    int rc = shim_insert_unsafe(e);
    pthread_mutex_unlock(&g.mu);
    if (rc != 0) shim_uncount(e);
}

/* The common tail of an allocation (a pointer or, for cuMemCreate, a handle): settles the
 * reservation after the driver answered; when the shim cannot record it, the memory goes back. */
static CUresult shim_settle(CUresult r, int kind, unsigned long long *value, size_t size, int dev) {
    if (r != CUDA_SUCCESS) {
        shim_unreserve(dev, size);
        return r;
    }
    if (shim_record(kind, *value, size, dev) != 0) {
        if (kind == SHIM_KIND_HANDLE) {
            pfn_cuMemRelease real_release = SHIM_REAL(cuMemRelease);
            if (real_release) real_release(*value);
        } else {
            pfn_cuMemFree_v2 real_free = SHIM_REAL(cuMemFree_v2);
            if (real_free) real_free(*value);
        }
        *value = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static CUresult shim_settle_ptr(CUresult r, CUdeviceptr *dptr, size_t size, int dev) {
    return shim_settle(r, SHIM_KIND_PTR, dptr, size, dev);
}

/* ---- the interposed allocation calls --------------------------------------------------------------- */

SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    pfn_cuMemAlloc_v2 real = SHIM_REAL(cuMemAlloc_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve("cuMemAlloc", dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize), dptr, bytesize, dev);
}

SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    pfn_cuMemAllocManaged real = SHIM_REAL(cuMemAllocManaged);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve("cuMemAllocManaged", dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize, flags), dptr, bytesize, dev);
}

/* The size is known only after the driver chose the pitch: width x height is reserved first,
 * then the rest of pitch x height; if that passes the limit the allocation is freed again. */
SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                        size_t height, unsigned int element_size_bytes) {
    pfn_cuMemAllocPitch_v2 real = SHIM_REAL(cuMemAllocPitch_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr && pitch ? shim_current_device() : -1;
    size_t estimate = 0;
    if (height && width_bytes > SIZE_MAX / height) dev = -1;   /* the driver refuses it */
    else estimate = width_bytes * height;
    if (shim_reserve("cuMemAllocPitch", dev, estimate) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pitch, width_bytes, height, element_size_bytes);
    if (r != CUDA_SUCCESS || dev < 0) return shim_settle_ptr(r, dptr, estimate, dev);
    size_t actual = estimate;
    if (*pitch >= width_bytes && (!height || *pitch <= SIZE_MAX / height)) actual = *pitch * height;
    if (actual > estimate && shim_reserve("cuMemAllocPitch", dev, actual - estimate) != 0) {
        pfn_cuMemFree_v2 real_free = SHIM_REAL(cuMemFree_v2);
        if (real_free) real_free(*dptr);
        *dptr = 0;
        shim_unreserve(dev, estimate);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return shim_settle_ptr(r, dptr, actual, dev);
}

SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    pfn_cuMemFree_v2 real = SHIM_REAL(cuMemFree_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr);
    if (counted) shim_freed(r, &e);
    return r;
}

/* VMM: counted by handle, on the device its properties name (other locations are not device memory). */
SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
    pfn_cuMemCreate real = SHIM_REAL(cuMemCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = -1;
    if (handle && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        prop->location.id >= 0 && prop->location.id < SHIM_MAX_DEVICES)
        dev = prop->location.id;
    if (shim_reserve("cuMemCreate", dev, size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle(real(handle, size, prop, flags), SHIM_KIND_HANDLE, handle, size, dev);
}

/* The bytes are counted as given back at the release (the driver frees them when the last
 * mapping of the handle goes). */
SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    pfn_cuMemRelease real = SHIM_REAL(cuMemRelease);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = shim_forget(SHIM_KIND_HANDLE, handle, &e);
    CUresult r = real(handle);
    if (counted) shim_freed(r, &e);
    return r;
}

/* Stream-ordered: counted on the current context's device at the call. */
static CUresult shim_alloc_async(pfn_cuMemAllocAsync real, const char *fn, CUdeviceptr *dptr,
                                 size_t bytesize, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve(fn, dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize, stream), dptr, bytesize, dev);
}

static CUresult shim_alloc_pool_async(pfn_cuMemAllocFromPoolAsync real, const char *fn,
                                      CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = dptr ? shim_current_device() : -1;
    if (shim_reserve(fn, dev, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return shim_settle_ptr(real(dptr, bytesize, pool, stream), dptr, bytesize, dev);
}

/* Subtracts when the free is enqueued, before the GPU reached it (see the header). */
static CUresult shim_free_async(pfn_cuMemFreeAsync real, CUdeviceptr dptr, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry e;
    int counted = dptr && shim_forget(SHIM_KIND_PTR, dptr, &e);
    CUresult r = real(dptr, stream);
    if (counted) shim_freed(r, &e);
    return r;
}

SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return shim_alloc_async(SHIM_REAL(cuMemAllocAsync), "cuMemAllocAsync", dptr, bytesize, stream);
}

SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return shim_alloc_async((pfn_cuMemAllocAsync)shim_real_fn(SHIM_HOOK_cuMemAllocAsync_ptsz),
                            "cuMemAllocAsync", dptr, bytesize, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream) {
    return shim_alloc_pool_async(SHIM_REAL(cuMemAllocFromPoolAsync), "cuMemAllocFromPoolAsync", dptr,
                                 bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream stream) {
    return shim_alloc_pool_async(
        (pfn_cuMemAllocFromPoolAsync)shim_real_fn(SHIM_HOOK_cuMemAllocFromPoolAsync_ptsz),
        "cuMemAllocFromPoolAsync", dptr, bytesize, pool, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    return shim_free_async(SHIM_REAL(cuMemFreeAsync), dptr, stream);
}

SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    return shim_free_async((pfn_cuMemFreeAsync)shim_real_fn(SHIM_HOOK_cuMemFreeAsync_ptsz), dptr, stream);
}

/* ---- the limited totals ------------------------------------------------------------------------------ */

/* What the group may still take on the device of UUID `uuid` (its limit minus its members' use there,
 * from the ledger under its lock), or SIZE_MAX without a group limit or a ledger. */
static size_t shim_group_free_uuid(const char *uuid) {
    if (!g.group_limit) return SIZE_MAX;
    size_t left = SIZE_MAX;
    pthread_mutex_lock(&g.ledger_mu);
    if (shim_ledger_ready_locked() == 0) {
        ledger_lock(&g.ledger);
        /* a ledger that cannot be followed or keeps faulting reports nothing left (as allocations are refused) */
        int ok = shim_follow_locked() == 0 && !g.ledger_lost;
        uint64_t total = ok ? ledger_group_total_locked(&g.ledger, g.group, uuid) : UINT64_MAX;
        if (g.ledger_lost) total = UINT64_MAX;
        ledger_unlock(&g.ledger);
        left = total >= g.group_limit ? 0 : (size_t)(g.group_limit - total);
    }
    pthread_mutex_unlock(&g.ledger_mu);
    return left;
}

/* The same for the program's device `dev` (-1: none), whose slot it registers: a member that only
 * asks is still listed. */
static size_t shim_group_free(int dev) {
    if (dev < 0 || !g.group_limit) return SIZE_MAX;
    shim_register(dev);
    if (!g.slot[dev]) return SIZE_MAX;
    return shim_group_free_uuid(g.uuid[dev]);
}

enum { SHIM_VIEW_LIMIT = 1, SHIM_VIEW_GROUP = 2 };

/* The program's view of its device `dev` (-1: none), shared by cuMemGetInfo and NVML. *total and
 * *free_bytes come in as the card's numbers (SIZE_MAX where not known) and are narrowed: with a
 * limit, total = the limit (the card when smaller) and free = total - in use (0 when in use passes
 * it, never an unsigned wrap), never more than the card's free plus the balloon (preallocated memory
 * is free to the program, not to the driver); with a group limit, free is at most `group_free`, what
 * the group has left on the device (SIZE_MAX: no group limit). Returns the SHIM_VIEW_* that applied. */
static int shim_view(int dev, size_t group_free, size_t *total, size_t *free_bytes) {
    int applied = 0;
    size_t limit = 0, used = 0, balloon = 0;
    if (dev >= 0) {
        pthread_mutex_lock(&g.mu);
        limit = g.limit[dev];
        used = g.used[dev];
        pthread_mutex_unlock(&g.mu);
        balloon = shim_balloon_bytes(dev);
    }
    if (limit) {
        size_t t = *total < limit ? *total : limit;
        size_t f = used >= t ? 0 : t - used;
        size_t room = *free_bytes > SIZE_MAX - balloon ? SIZE_MAX : *free_bytes + balloon;
        *total = t;
        *free_bytes = room < f ? room : f;
        applied |= SHIM_VIEW_LIMIT;
    }
    if (group_free != SIZE_MAX) {
        if (group_free < *free_bytes) *free_bytes = group_free;
        applied |= SHIM_VIEW_GROUP;
    }
    return applied;
}

SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    pfn_cuMemGetInfo_v2 real = SHIM_REAL(cuMemGetInfo_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t real_free = 0, real_total = 0;
    CUresult r = real(free_bytes ? &real_free : NULL, total_bytes ? &real_total : NULL);
    if (r != CUDA_SUCCESS) return r;
    int dev = shim_current_device();
    /* the card's total is only known when it was asked for; the limit is the total either way */
    size_t total = total_bytes ? real_total : SIZE_MAX, free_left = real_free;
    shim_view(dev, shim_group_free(dev), &total, &free_left);
    if (free_bytes) *free_bytes = free_left;
    if (total_bytes) *total_bytes = total;
    return CUDA_SUCCESS;
}

SHIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    pfn_cuDeviceTotalMem_v2 real = SHIM_REAL(cuDeviceTotalMem_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(bytes, dev);
    if (r != CUDA_SUCCESS || dev < 0 || dev >= SHIM_MAX_DEVICES) return r;
    pthread_mutex_lock(&g.mu);
    size_t limit = g.limit[dev];
    pthread_mutex_unlock(&g.mu);
    if (limit && limit < *bytes) *bytes = limit;
    return r;
}

/* ---- NVML (nvidia-smi-style queries) ----------------------------------------------------------------- */

/* nvmlDeviceGetMemoryInfo / _v2 of one of the program's devices under a limit or a group limit report
 * the program's view, the numbers cuMemGetInfo gives (shim_view): total = the limit (the card when
 * smaller), free = what cuMemGetInfo calls free (the limit less this process's use, at most the
 * card's free plus the balloon, at most what the group has left on the card), and used = total - free
 * (for _v2, total - reserved - free), as NVML's used is on a card: this process's use when nothing
 * else narrows free. _v2's reserved is 0 under a limit (driver-reserved memory is not the program's)
 * and the card's under a group limit alone. A device that is not the program's, or has neither
 * limit, passes through unchanged.
 * Which NVML device is which of the program's: NVML enumerates every GPU whatever
 * CUDA_VISIBLE_DEVICES says.
 *   - Once the program has initialised CUDA: by UUID (the real nvmlDeviceGetUUID against
 *     cuDeviceGetUuid of every visible CUDA device, looked up once).
 *   - Before that, and in programs that never load CUDA (nvidia-smi, NVML monitors): from
 *     CUDA_VISIBLE_DEVICES, read at each query as the driver will read it, without loading or
 *     initialising CUDA (cuInit before a fork would break the child's CUDA). A UUID (or a unique
 *     prefix of one) names its card; an index names the card of that index in NVML's order (PCI bus
 *     order), which is CUDA's when CUDA_DEVICE_ORDER=PCI_BUS_ID or when every card has the same name
 *     (CUDA's default order puts the fastest first and breaks ties by PCI bus id); unset, every card
 *     in that order. The list ends at an entry that names no card, as the driver's does. When the
 *     order cannot be told (cards of different names, and indices given or limits that differ by
 *     device) or a card is in MIG mode, every device passes through. Nothing is in use then, and
 *     the group's numbers come from the ledger by the card's NVML UUID (no slot is claimed).
 * The real functions come from dlopen("libnvidia-ml.so.1") (the loaded library, by soname). */

#define SHIM_NVML_HOOKS(X)            \
    X(nvmlDeviceGetMemoryInfo)        \
    X(nvmlDeviceGetMemoryInfo_v2)

enum {
#define X(sym) SHIM_NVML_HOOK_##sym,
    SHIM_NVML_HOOKS(X)
#undef X
    SHIM_NUM_NVML_HOOKS
};

static const struct { const char *symbol; void *wrapper; } shim_nvml_hooks[SHIM_NUM_NVML_HOOKS] = {
#define X(sym) { #sym, (void *)sym },
    SHIM_NVML_HOOKS(X)
#undef X
};

typedef struct shim_nvml_real_t {
    void *fn[SHIM_NUM_NVML_HOOKS];
    pfn_nvmlDeviceGetUUID uuid;
    pfn_nvmlDeviceGetCount_v2 count;                   /* these five: the mapping before CUDA */
    pfn_nvmlDeviceGetHandleByIndex_v2 handle;
    pfn_nvmlDeviceGetIndex index;
    pfn_nvmlDeviceGetName name;
    pfn_nvmlDeviceGetMigMode mig_mode;                 /* NULL on drivers without MIG */
} shim_nvml_real_t;

static pthread_once_t shim_nvml_once = PTHREAD_ONCE_INIT;
static shim_nvml_real_t shim_nvml;
/* the visible CUDA devices' UUIDs, looked up once (published under g.mu; ready read atomically) */
static int shim_nvml_cuda_ready, shim_nvml_cuda_count;
static char shim_nvml_cuda_uuid[SHIM_MAX_DEVICES][LEDGER_UUID_LEN];

static void shim_nvml_init(void) {
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib || !real_dlsym) return;
    for (int i = 0; i < SHIM_NUM_NVML_HOOKS; i++) shim_nvml.fn[i] = real_dlsym(lib, shim_nvml_hooks[i].symbol);
    shim_nvml.uuid = (pfn_nvmlDeviceGetUUID)real_dlsym(lib, "nvmlDeviceGetUUID");
    shim_nvml.count = (pfn_nvmlDeviceGetCount_v2)real_dlsym(lib, "nvmlDeviceGetCount_v2");
    shim_nvml.handle = (pfn_nvmlDeviceGetHandleByIndex_v2)real_dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    shim_nvml.index = (pfn_nvmlDeviceGetIndex)real_dlsym(lib, "nvmlDeviceGetIndex");
    shim_nvml.name = (pfn_nvmlDeviceGetName)real_dlsym(lib, "nvmlDeviceGetName");
    shim_nvml.mig_mode = (pfn_nvmlDeviceGetMigMode)real_dlsym(lib, "nvmlDeviceGetMigMode");
}

static void *shim_nvml_real_fn(int i) {
    pthread_once(&shim_nvml_once, shim_nvml_init);
    return shim_nvml.fn[i];
}

/* Looks up the UUIDs of the program's CUDA devices once CUDA is loaded and initialised; 0 when known. */
static int shim_nvml_cuda_uuids(void) {
    if (__atomic_load_n(&shim_nvml_cuda_ready, __ATOMIC_ACQUIRE)) return 0;
    void *loaded = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!loaded) return -1;   /* the program does not use CUDA (yet): no CUDA devices */
    dlclose(loaded);
    pthread_once(&shim_cuda_once, shim_cuda_init);
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    if (!g.real.lib || !real_dlsym) return -1;
    typedef CUresult (*pfn_count)(int *count);
    pfn_count get_count = (pfn_count)real_dlsym(g.real.lib, "cuDeviceGetCount");
    int n = 0;
    if (!get_count || get_count(&n) != CUDA_SUCCESS) return -1;   /* not initialised: try again later */
    if (n < 0) n = 0;
    if (n > SHIM_MAX_DEVICES) n = SHIM_MAX_DEVICES;
    char (*uuid)[LEDGER_UUID_LEN] = calloc((size_t)(n ? n : 1), LEDGER_UUID_LEN);
    if (!uuid) return -1;
    for (int d = 0; d < n; d++) shim_device_uuid(d, uuid[d], LEDGER_UUID_LEN);
    pthread_mutex_lock(&g.mu);
    if (!shim_nvml_cuda_ready) {
        memcpy(shim_nvml_cuda_uuid, uuid, (size_t)n * LEDGER_UUID_LEN);
        shim_nvml_cuda_count = n;
        __atomic_store_n(&shim_nvml_cuda_ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g.mu);
    free(uuid);
    return 0;
}

/* The UUID of an NVML device as the ledger keeps them ("GPU-" and lower-case hex); 0 on success. */
static int shim_nvml_uuid(nvmlDevice_t device, char *uuid, size_t len) {
    if (!shim_nvml.uuid || shim_nvml.uuid(device, uuid, (unsigned int)len) != NVML_SUCCESS) return -1;
    uuid[len - 1] = '\0';
    char *dash = strchr(uuid, '-');
    for (char *c = dash ? dash : uuid; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    return 0;
}

/* NVML's cards as the guess below needs them, read once (cards do not come and go under a
 * process): count, UUIDs, whether all have one name; unusable when a read failed or a card is in
 * MIG mode (CUDA shows MIG instances, not cards). */
static struct {
    pthread_once_t once;
    int            usable;
    unsigned int   n;
    int            same_names;
    char           uuid[SHIM_MAX_DEVICES][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
} shim_nvml_cards = {.once = PTHREAD_ONCE_INIT};

static void shim_nvml_cards_read(void) {
    unsigned int n = 0;
    if (!shim_nvml.count || !shim_nvml.handle || !shim_nvml.name || shim_nvml.count(&n) != NVML_SUCCESS) return;
    if (n > SHIM_MAX_DEVICES) n = SHIM_MAX_DEVICES;
    char first[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    shim_nvml_cards.same_names = 1;
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t h;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        unsigned int mig = 0, pending = 0;
        if (shim_nvml.handle(i, &h) != NVML_SUCCESS ||
            shim_nvml_uuid(h, shim_nvml_cards.uuid[i], sizeof shim_nvml_cards.uuid[i]) != 0 ||
            shim_nvml.name(h, name, sizeof name) != NVML_SUCCESS)
            return;
        if (shim_nvml.mig_mode && shim_nvml.mig_mode(h, &mig, &pending) == NVML_SUCCESS && mig == NVML_DEVICE_MIG_ENABLE)
            return;
        name[sizeof name - 1] = '\0';
        if (i == 0) snprintf(first, sizeof first, "%s", name);
        else if (strcmp(first, name) != 0) shim_nvml_cards.same_names = 0;
    }
    shim_nvml_cards.n = n;
    shim_nvml_cards.usable = 1;
}

/* Before CUDA is initialised: the program's device that NVML device `index` will be, from
 * CUDA_VISIBLE_DEVICES (see above); -1 when it is none of them or that cannot be told. */
static int shim_nvml_guess_device(unsigned int index) {
    pthread_once(&shim_nvml_cards.once, shim_nvml_cards_read);
    unsigned int n = shim_nvml_cards.n;
    if (!shim_nvml_cards.usable || index >= n) return -1;
    char (*uuid)[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = shim_nvml_cards.uuid;
    int same_names = shim_nvml_cards.same_names;
    const char *order = getenv("CUDA_DEVICE_ORDER");
    int pci_order = same_names || (order && strcmp(order, "PCI_BUS_ID") == 0);
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        if (pci_order) return (int)index;
        /* CUDA's order is unknown; it does not matter when every card has the same limit */
        for (unsigned int d = 1; d < n; d++)
            if (g.limit[d] != g.limit[0]) return -1;
        return (int)index;
    }
    /* the list: each entry's NVML index in turn; the program's device d is the d-th entry */
    int d = 0, used[SHIM_MAX_DEVICES] = { 0 };
    while (*v && d < SHIM_MAX_DEVICES) {
        size_t len = strcspn(v, ",");
        char item[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        if (len == 0 || len >= sizeof item) break;
        memcpy(item, v, len);
        item[len] = '\0';
        int card = -1;
        if (item[0] >= '0' && item[0] <= '9') {
            char *end;
            long k = strtol(item, &end, 10);
            if (*end || !pci_order) return -1;   /* not a number, or CUDA's order is unknown */
            card = k < (long)n ? (int)k : -1;
        } else if (strncasecmp(item, "GPU-", 4) == 0) {
            for (unsigned int i = 0; i < n; i++) {
                if (strncasecmp(uuid[i], item, len) != 0) continue;
                if (card >= 0) { card = -1; break; }   /* an ambiguous prefix names no card */
                card = (int)i;
            }
        }
        if (card < 0 || used[card]) break;   /* MIG-..., an unknown or repeated card: the list ends */
        used[card] = 1;
        if ((unsigned int)card == index) return d;
        d++;
        v += len;
        if (*v == ',') v++;
    }
    return -1;
}

/* The program's device that NVML device `device` is, with the card's UUID, when a limit or a group
 * limit applies to it; -1 otherwise. */
static int shim_nvml_device(nvmlDevice_t device, char *uuid, size_t len) {
    pthread_once(&shim_nvml_once, shim_nvml_init);
    if (shim_nvml_uuid(device, uuid, len) != 0) return -1;
    int d = -1;
    if (shim_nvml_cuda_uuids() == 0) {
        for (int i = 0; i < shim_nvml_cuda_count && d < 0; i++)
            if (strncmp(shim_nvml_cuda_uuid[i], "unknown-", 8) != 0 && strcasecmp(shim_nvml_cuda_uuid[i], uuid) == 0)
                d = i;
    } else {   /* CUDA is not in use (yet) */
        unsigned int index = 0;
        shim_env();
        if (shim_nvml.index && shim_nvml.index(device, &index) == NVML_SUCCESS) d = shim_nvml_guess_device(index);
    }
    if (d < 0) return -1;
    pthread_mutex_lock(&g.mu);
    size_t limit = g.limit[d];
    pthread_mutex_unlock(&g.mu);
    return limit || g.group_limit ? d : -1;
}

/* The program's view of NVML device `device` whose real numbers are in *total, *free_bytes: 0 when it
 * passes through unchanged, else the SHIM_VIEW_* that applied. The group's numbers come from the
 * ledger by the card's UUID (no slot is claimed for a query). */
static int shim_nvml_view(nvmlDevice_t device, unsigned long long *total, unsigned long long *free_bytes) {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    int dev = shim_nvml_device(device, uuid, sizeof uuid);
    if (dev < 0) return 0;
    size_t t = *total > SIZE_MAX ? SIZE_MAX : (size_t)*total;
    size_t f = *free_bytes > SIZE_MAX ? SIZE_MAX : (size_t)*free_bytes;
    int applied = shim_view(dev, shim_group_free_uuid(uuid), &t, &f);
    *total = t;
    *free_bytes = f;
    return applied;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    pfn_nvmlDeviceGetMemoryInfo real =
        (pfn_nvmlDeviceGetMemoryInfo)shim_nvml_real_fn(SHIM_NVML_HOOK_nvmlDeviceGetMemoryInfo);
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = real(device, memory);
    if (r != NVML_SUCCESS || !memory || !shim_nvml_view(device, &memory->total, &memory->free)) return r;
    memory->used = memory->total - memory->free;
    return r;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    pfn_nvmlDeviceGetMemoryInfo_v2 real =
        (pfn_nvmlDeviceGetMemoryInfo_v2)shim_nvml_real_fn(SHIM_NVML_HOOK_nvmlDeviceGetMemoryInfo_v2);
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = real(device, memory);
    int applied;
    if (r != NVML_SUCCESS || !memory || !(applied = shim_nvml_view(device, &memory->total, &memory->free))) return r;
    if (applied & SHIM_VIEW_LIMIT) memory->reserved = 0;
    unsigned long long taken = memory->reserved + memory->free;
    memory->used = taken >= memory->total ? 0 : memory->total - taken;
    return r;
}

/* ---- entry points handed out by cuGetProcAddress and dlsym ----------------------------------------- */

/* This library's version of what the driver returned for `symbol`, or NULL to keep the driver's.
 * The driver's pointer is matched against its exported versions first; when it is none of them the
 * version and per-thread-stream flag decide. */
static void *shim_proc_replacement(const char *symbol, void *driver_fn, int cuda_version, cuuint64_t flags) {
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1;
    for (int i = 0; i < SHIM_NUM_HOOKS; i++) {
        const shim_hook *h = &shim_hooks[i];
        if (strcmp(h->base, symbol) != 0) continue;
        if (driver_fn == shim_real_fn(i) || driver_fn == h->wrapper) return h->wrapper;
        if ((h->ptsz && !ptsz) || h->min_version > cuda_version) continue;
        /* the newest version; with the per-thread flag its _ptsz variant where there is one */
        if (best < 0 || h->min_version > shim_hooks[best].min_version ||
            (h->min_version == shim_hooks[best].min_version && h->ptsz))
            best = i;
    }
    return best >= 0 ? shim_hooks[best].wrapper : NULL;
}

SHIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags) {
    pfn_cuGetProcAddress real = SHIM_REAL(cuGetProcAddress);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(symbol, pfn, cuda_version, flags);
    if (r == CUDA_SUCCESS && symbol && pfn && *pfn) {
        void *mine = shim_proc_replacement(symbol, *pfn, cuda_version, flags);
        if (mine) *pfn = mine;
    }
    return r;
}

SHIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    pfn_cuGetProcAddress_v2 real = SHIM_REAL(cuGetProcAddress_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(symbol, pfn, cuda_version, flags, status);
    if (r == CUDA_SUCCESS && symbol && pfn && *pfn) {
        void *mine = shim_proc_replacement(symbol, *pfn, cuda_version, flags);
        if (mine) *pfn = mine;
    }
    return r;
}

static int shim_hook_index(const char *symbol) {
    if (symbol[0] != 'c' || symbol[1] != 'u') return -1;
    for (int i = 0; i < SHIM_NUM_HOOKS; i++)
        if (strcmp(shim_hooks[i].symbol, symbol) == 0) return i;
    return -1;
}

static int shim_nvml_hook_index(const char *symbol) {
    if (strncmp(symbol, "nvml", 4) != 0) return -1;
    for (int i = 0; i < SHIM_NUM_NVML_HOOKS; i++)
        if (strcmp(shim_nvml_hooks[i].symbol, symbol) == 0) return i;
    return -1;
}

/* An interposed driver (or NVML) name that resolves gives this library's version; anything else goes to the
 * real dlsym as a tail call, so that the real dlsym sees the original caller (RTLD_NEXT). */
SHIM_EXPORT void *dlsym(void *handle, const char *symbol) {
    shim_dlsym_fn real = shim_real_dlsym();
    int i = shim_hook_index(symbol);   /* symbol is nonnull, as for the real dlsym */
    if (i >= 0) return real(handle, symbol) ? shim_hooks[i].wrapper : NULL;
    i = shim_nvml_hook_index(symbol);
    if (i >= 0) return real(handle, symbol) ? shim_nvml_hooks[i].wrapper : NULL;
    return real(handle, symbol);
}
