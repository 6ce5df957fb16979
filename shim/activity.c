/*
 * activity.c: what an idle watcher (`vram run --idle-sleep`, the Slurm plugin's --vram-idle-sleep;
 * shim/watch.c) sees of a process: its activity page, and the interposed calls of role ACTIVITY
 * (shim.h's coverage table: kernel launches, copies, sets and synchronisations), which hold no memory
 * the shim counts and are interposed only to be seen.
 *
 * The page (ledger.h's ledger_activity): with VRAM_IDLE_WATCHER set (env.c), the first ledger slot
 * this process registers (group.c) makes a sealed memfd named "vram-activity" of one page, maps it for
 * the life of the process and names its descriptor in the process's ledger slots, where the watcher finds
 * it (it opens /proc/<pid>/fd/<fd>). Every driver call the shim sees, of any role, adds one to
 * `calls` before the driver is called (shim_activity, from shim_real_fn: so a call that blocks in the
 * driver of a process put to sleep is seen, and the watcher wakes the process); the synchronising
 * calls (cuStreamSynchronize and _ptsz, cuEventSynchronize, cuCtxSynchronize and _v2) also count in
 * `waits` while they run, during which the watcher does not take the process for idle. NVML queries
 * are not driver calls and do not count (a monitor polling NVML would keep a process awake).
 *
 * The cost on every call: one relaxed load of g.activity and, when there is a page, a relaxed load
 * and store of `calls` (no read-modify-write: two threads may lose an increment, the value changes
 * all the same, which is all the watcher asks). The ACTIVITY wrappers get their driver function
 * through shim_real_hot (no pthread_once once the driver is loaded). Measured with callgrind over the
 * fake driver (tests/shim/app_driver.c `launches N`, the difference of two N): a cuLaunchKernel
 * costs 283 instructions without vram, 319 under vram run, 323 with the activity page (an idle
 * watcher): the interposition 36 instructions, the count 4, a few ns. The sleep gate (a process
 * asleep holds its calls in the preload library, shim_sleep_gate) adds 6 to each interposed call of a
 * process with a ledger slot: 169 -> 175 a launch under vram run (callgrind, LD_PRELOAD of the shim
 * into `vram_shim_app_driver dlsym launches N`, N 1000 and 3000, default build type, 2026-12-05). Calls the shim does not interpose (queries, events,
 * stream waits, module loads, 2D/3D and peer copies, ...) are not seen and not held: a process whose
 * next call after an idle spell is one of them goes into the driver while asleep (the checkpoint API
 * documents that its lock holds every call; on the real driver a process died at its first work after its memory was checkpointed, shim.h's
 * shim_activity), until a call the shim sees comes (from any of its threads) or `vram wake PID`.
 *
 * Invariants: g.activity is NULL, or the page, mapped until the process ends (never unmapped while
 * another thread may count into it; a fork child unmaps the parent's page, being single-threaded
 * then: env.c); g.activity_fd is its descriptor (-1 none). shim_activity_start runs under ledger_mu.
 * No lock on the counting path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/* ---- the page ---------------------------------------------------------------------------------- */

int shim_activity_start(void) {
    if (g.activity) return 0;
    if (!g.watcher_pid) return -1;
    int fd = memfd_create(LEDGER_ACTIVITY_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    void *m = MAP_FAILED;
    if (ftruncate(fd, LEDGER_ACTIVITY_BYTES) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        m = mmap(NULL, LEDGER_ACTIVITY_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        if (g.log) fputs("vram: cannot make the activity page of this process: its idle watcher cannot see it\n", stderr);
        return -1;
    }
    ledger_activity *a = m;
    a->pid = g.self_pid;
    a->start_time = g.self_start;
    __atomic_store_n(&a->magic, LEDGER_ACTIVITY_MAGIC, __ATOMIC_RELEASE);
    g.activity_fd = fd;
    __atomic_store_n(&g.activity, a, __ATOMIC_RELEASE);
    return 0;
}

/* The calls of a process asleep wait here: from the first mark of a sleep (LEDGER_SLEEPING, before the
 * driver's lock) to the last of its wake (LEDGER_AWAKE, after the driver's unlock), polled every
 * millisecond (a wake takes hundreds). The slot is read again each time: a slot found anew (the
 * ledger replaced) or dropped (exit, fork) is followed. */
void shim_sleep_gate(void) {
    for (;;) {
        ledger_slot *s = __atomic_load_n(&g.sleep_slot, __ATOMIC_ACQUIRE);
        if (!s || __atomic_load_n(&s->sleep, __ATOMIC_ACQUIRE) == LEDGER_AWAKE) return;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* The slot the gate reads: the first of g.slot (g.mu held). */
void shim_sleep_slot_unsafe(void) {
    ledger_slot *first = NULL;
    for (int d = 0; d < SHIM_MAX_DEVICES && !first; d++) first = g.slot[d];
    __atomic_store_n(&g.sleep_slot, first, __ATOMIC_RELEASE);
}

/* A synchronising call runs: the process waits for its GPU, it is not idle. */
static inline void shim_wait_begin(void) {
    ledger_activity *a = __atomic_load_n(&g.activity, __ATOMIC_RELAXED);
    if (a) __atomic_add_fetch(&a->waits, 1, __ATOMIC_RELAXED);
}

static inline void shim_wait_end(void) {
    ledger_activity *a = __atomic_load_n(&g.activity, __ATOMIC_RELAXED);
    if (a) __atomic_sub_fetch(&a->waits, 1, __ATOMIC_RELAXED);
}

/* ---- the interposed calls of role ACTIVITY ----------------------------------------------------- */

/* X(symbol, parameters, arguments): every ACTIVITY entry of SHIM_HOOKS but the synchronising ones
 * (below). Each counts (in shim_real_fn) and passes the call on unchanged. */
#define SHIM_ACTIVITY_PLAIN(X)                                                                             \
    X(cuLaunchKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,    \
                       unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,    \
                       void **extra), (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))                \
    X(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,                \
                            unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,        \
                            CUstream s, void **params, void **extra),                                      \
      (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))                                               \
    X(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),          \
      (config, f, params, extra))                                                                           \
    X(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),     \
      (config, f, params, extra))                                                                           \
    X(cuLaunchCooperativeKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,          \
                                  unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,  \
                                  CUstream s, void **params), (f, gx, gy, gz, bx, by, bz, shared, s, params)) \
    X(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,     \
                                       unsigned int bx, unsigned int by, unsigned int bz,                  \
                                       unsigned int shared, CUstream s, void **params),                    \
      (f, gx, gy, gz, bx, by, bz, shared, s, params))                                                      \
    X(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))                                \
    X(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))                           \
    X(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))            \
    X(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))       \
    X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n), (dst, src, n))                         \
    X(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void *src, size_t n), (dst, src, n))                    \
    X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), (dst, src, n))                               \
    X(cuMemcpyDtoH_v2_ptds, (void *dst, CUdeviceptr src, size_t n), (dst, src, n))                          \
    X(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))                         \
    X(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))                    \
    X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s))     \
    X(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s)) \
    X(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))           \
    X(cuMemcpyDtoHAsync_v2_ptsz, (void *dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))      \
    X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))     \
    X(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) \
    X(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), (dst, v, n, s))            \
    X(cuMemsetD8Async_ptsz, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), (dst, v, n, s))       \
    X(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), (dst, v, n, s))            \
    X(cuMemsetD32Async_ptsz, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), (dst, v, n, s))

/* The synchronising ones: counted in waits while they run. */
#define SHIM_ACTIVITY_WAITS(X)                                     \
    X(cuStreamSynchronize, (CUstream s), (s))                      \
    X(cuStreamSynchronize_ptsz, (CUstream s), (s))                 \
    X(cuEventSynchronize, (CUevent e), (e))                        \
    X(cuCtxSynchronize, (void), ())                                \
    X(cuCtxSynchronize_v2, (CUcontext ctx), (ctx))

#define SHIM_ACTIVITY_DEFINE(sym, params, args)                \
    SHIM_EXPORT CUresult sym params {                          \
        pfn_##sym real = (pfn_##sym)shim_real_hot(SHIM_HOOK_##sym); \
        if (!real) return CUDA_ERROR_NOT_FOUND;                \
        return real args;                                      \
    }
SHIM_ACTIVITY_PLAIN(SHIM_ACTIVITY_DEFINE)
#undef SHIM_ACTIVITY_DEFINE

#define SHIM_ACTIVITY_DEFINE_WAIT(sym, params, args)           \
    SHIM_EXPORT CUresult sym params {                          \
        pfn_##sym real = (pfn_##sym)shim_real_hot(SHIM_HOOK_##sym); \
        if (!real) return CUDA_ERROR_NOT_FOUND;                \
        shim_wait_begin();                                     \
        CUresult r = real args;                                \
        shim_wait_end();                                       \
        return r;                                              \
    }
SHIM_ACTIVITY_WAITS(SHIM_ACTIVITY_DEFINE_WAIT)
#undef SHIM_ACTIVITY_DEFINE_WAIT
