/*
 * shim.h: the inside of libvram_preload.so, the LD_PRELOAD library of `vram run`: it caps the device
 * memory an unmodified CUDA program takes by interposing on the CUDA driver API. A sibling of
 * libvram, not a layer on it: it shares src/common (sizes, formatting, CUDA_VISIBLE_DEVICES, the
 * ledger: compiled in hidden) with libvram and `vram top`, nothing else. A libvram program under
 * `vram run` on the CUDA backend follows this library's slots (common/ledger_member.h, "follow"):
 * its driver calls are counted here once.
 *
 * The files, one concern each (their headers say what they own, their invariants and locks), calls
 * running one way, from the interposed calls down:
 *   interpose.c  how calls reach the shim: the table of exported (interposed) names, the real dlsym,
 *                loading the driver, cuGetProcAddress and dlsym handing out this library's versions
 *   calls.c, vmm.c, arrays.c, pools.c, graphs.c, ctxlimit.c
 *                the interposed driver calls, one family a file (the coverage table below says which
 *                counts what); nvml.c: nvmlDeviceGetMemoryInfo / _v2, the program's view through NVML
 *   allocs.c     cuMemCreate allocations and everything that keeps one alive (handles, mappings,
 *                tiles of sparse arrays, multicast bindings)
 *   held.c       memory the driver holds beyond allocations, read from the driver (pools, graph
 *                memory), and shim_take, the reservation every accounted call makes
 *   limits.c     accounting and limits: reserving against the limits, settling after the driver
 *                answered, giving bytes back at frees, the refusal messages, the program's view
 *   table.c      the table of live memory (pointers, arrays, handles, allocations, mappings, ...)
 *   balloon.c    preallocation (VRAM_GROWTH=0): the balloon of cuMemCreate pieces
 *   overflow.c   overflow to host memory (VRAM_OVERFLOW=host): pinned host memory mapped for the
 *                device for a cuMemAlloc the limit or the card refused, and its free
 *   group.c      the ledger glue (a slot per device, the shadow, a truncated or replaced file) and
 *                group limits
 *   env.c        the environment (VRAM_LIMIT, VRAM_LIMIT_<i>, VRAM_GROWTH, VRAM_LOG, VRAM_GROUP,
 *                VRAM_GROUP_LIMIT), read once; the process state g and what a fork child resets
 *   activity.c   what an idle watcher sees of the process: its activity page (every interposed
 *                call counts there, shim_activity) and the calls interposed only to be seen
 *                (role ACTIVITY: kernel launches, copies, sets, synchronisations)
 *   src/common/ledger.c, ledger_proc.c  the ledger file itself (ledger.h), shared with libvram,
 *                `vram top` and the Slurm plugin; ledger_proc.c: slot liveness and carrying live slots
 *                over into a file made anew, through /proc
 *
 * Locks, in the order they are taken: held.c's held_mu (never while holding another), balloon_mu,
 * then ledger_mu (never together with balloon_mu), the ledger's flock, then g.mu (the counters and the
 * table; held briefly, never across a driver call). Everything set from the environment is set once,
 * under shim_env's pthread_once, before any accounted call reads it.
 *
 * What is not covered: SHIM_UNCOVERED below, with the reasons; also dlvsym lookups of driver symbols,
 * and NVML calls other than nvmlDeviceGetMemoryInfo / _v2.
 */
#ifndef VRAM_SHIM_SHIM_H
#define VRAM_SHIM_SHIM_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "cuda_driver.h"
#include "common/ledger.h"
#include "nvml_types.h"

#define SHIM_MAX_DEVICES 64
#define SHIM_LEDGER_BYTES (sizeof(ledger_header) + (size_t)LEDGER_SLOTS * sizeof(ledger_slot))

/* ---- the coverage table: every way a program makes the driver hold device memory ------------- */

/*
 * SHIM_HOOKS lists every driver symbol libvram_preload.so exports (interposes), with the base name
 * cuGetProcAddress takes, the CUDA version from which cuGetProcAddress returns that symbol, whether
 * it is the per-thread-stream (_ptsz) variant, and its role:
 *   TAKES  makes the driver hold device memory: counted from the call, refused past the limit
 *          (CUDA_ERROR_OUT_OF_MEMORY, the driver not called or its memory given back at once);
 *   HOLDS  keeps memory held after the call that took it: counted until the driver frees it;
 *   GIVES  gives memory back: the count falls when the driver really freed it;
 *   VIEW   what the program sees of its card (the limit as the total);
 *   ROUTE  how the program finds the others (cuGetProcAddress);
 *   ACTIVITY  holds no memory the shim counts: interposed only so that an idle watcher sees the
 *          process work (kernel launches, copies, sets, synchronisations; activity.c). Every entry
 *          of every role counts as activity (shim_real_fn).
 * tests/shim/app_cover.c must define a scenario cover_<symbol> for every entry of role TAKES, HOLDS
 * and GIVES (its build fails otherwise), which tests/shim/shim_test.sh runs through dlsym and through
 * cuGetProcAddress, with and without a limit, and runs every ACTIVITY entry by both routes, checking
 * that it reaches the driver's function of its own name and is counted; tests/shim/coverage_test.sh
 * checks this table and SHIM_UNCOVERED against tests/shim/driver_symbols.txt, every symbol
 * libcuda.so.1 of CUDA 13.0 exports, each classed hook, uncovered, hook+uncovered (an ACTIVITY
 * entry that can also make the driver hold memory the shim does not count: the kernel launches) or
 * none (holds no device memory of its own: copies, sets, queries, streams, events, ...).
 *
 * How each family is counted (the files' headers say more):
 *   calls.c      cuMemAlloc, cuMemAllocPitch (pitch x height), cuMemAllocManaged (on the current
 *                device, although managed memory may migrate) and cuMemFree, in their _v2 and CUDA < 3.2
 *                (32-bit) forms: by pointer, from the allocation until the free;
 *   vmm.c        cuMemCreate: by allocation, from the create until the driver frees it: the last of
 *                its handle (cuMemRelease, and each cuMemRetainAllocationHandle's), its mappings
 *                (cuMemMap until cuMemUnmap), its tiles in sparse arrays (cuMemMapArrayAsync, held
 *                until the array is destroyed) and its multicast bindings (cuMulticastBindMem /
 *                BindAddr, until cuMulticastUnbind or the multicast object's release) has gone, in
 *                whatever order the program calls them;
 *   arrays.c     cuArrayCreate, cuArray3DCreate (_v2 and 32-bit), cuMipmappedArrayCreate: the
 *                texels' bytes (width x height x depth or layers x the format's bytes per texel,
 *                every level of a mipmapped array), until cuArrayDestroy / cuMipmappedArrayDestroy;
 *                sparse and deferred-mapping arrays hold nothing of their own (their tiles are
 *                cuMemCreate memory);
 *   pools.c      the stream-ordered calls: by the memory the pool holds (its reserved memory, the
 *                cache kept under its release threshold included), re-read from the driver; a
 *                refusal first gives the pools' unused memory back (cuMemPoolTrimTo);
 *   graphs.c     graph memory nodes: the device's graph memory (reserved by the driver for graphs),
 *                checked before a launch or upload that may need more and re-read after it;
 *   ctxlimit.c   cuCtxSetLimit: the device memory a larger malloc heap, printf FIFO or stack size
 *                reserves, until the context is destroyed or reset.
 */
#define SHIM_HOOKS(X)                                                              \
    /* plain allocations (calls.c) */                                              \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, TAKES)                                 \
    X(cuMemAlloc, "cuMemAlloc", 2000, 0, TAKES)                                    \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, TAKES)                       \
    X(cuMemAllocPitch, "cuMemAllocPitch", 2000, 0, TAKES)                          \
    X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, TAKES)                      \
    X(cuMemFree_v2, "cuMemFree", 3020, 0, GIVES)                                   \
    X(cuMemFree, "cuMemFree", 2000, 0, GIVES)                                      \
    X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0, VIEW)                              \
    X(cuMemGetInfo, "cuMemGetInfo", 2000, 0, VIEW)                                 \
    X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, 0, VIEW)                      \
    X(cuDeviceTotalMem, "cuDeviceTotalMem", 2000, 0, VIEW)                         \
    /* virtual memory management (vmm.c) */                                        \
    X(cuMemCreate, "cuMemCreate", 10020, 0, TAKES)                                 \
    X(cuMemRelease, "cuMemRelease", 10020, 0, GIVES)                               \
    X(cuMemMap, "cuMemMap", 10020, 0, HOLDS)                                       \
    X(cuMemUnmap, "cuMemUnmap", 10020, 0, GIVES)                                   \
    X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, 0, HOLDS) \
    X(cuMemMapArrayAsync, "cuMemMapArrayAsync", 11010, 0, HOLDS)                   \
    X(cuMemMapArrayAsync_ptsz, "cuMemMapArrayAsync", 11010, 1, HOLDS)              \
    X(cuMulticastCreate, "cuMulticastCreate", 12010, 0, HOLDS)                     \
    X(cuMulticastBindMem, "cuMulticastBindMem", 12010, 0, HOLDS)                   \
    X(cuMulticastBindAddr, "cuMulticastBindAddr", 12010, 0, HOLDS)                 \
    X(cuMulticastUnbind, "cuMulticastUnbind", 12010, 0, GIVES)                     \
    /* CUDA arrays (arrays.c) */                                                   \
    X(cuArrayCreate_v2, "cuArrayCreate", 3020, 0, TAKES)                           \
    X(cuArrayCreate, "cuArrayCreate", 2000, 0, TAKES)                              \
    X(cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0, TAKES)                       \
    X(cuArray3DCreate, "cuArray3DCreate", 2000, 0, TAKES)                          \
    X(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, 0, TAKES)            \
    X(cuArrayDestroy, "cuArrayDestroy", 2000, 0, GIVES)                            \
    X(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, 0, GIVES)          \
    /* stream-ordered allocation and memory pools (pools.c) */                     \
    X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, TAKES)                         \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 1, TAKES)                    \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0, TAKES)         \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 1, TAKES)    \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, GIVES)                           \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 1, GIVES)                      \
    X(cuMemPoolCreate, "cuMemPoolCreate", 11020, 0, HOLDS)                         \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 11020, 0, HOLDS)             \
    X(cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, 0, GIVES)                         \
    X(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, 0, GIVES)                       \
    /* graph memory nodes (graphs.c) */                                            \
    X(cuGraphInstantiate, "cuGraphInstantiate", 10000, 0, TAKES)                   \
    X(cuGraphInstantiate_v2, "cuGraphInstantiate", 11000, 0, TAKES)                \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, 0, TAKES) \
    X(cuGraphInstantiateWithParams, "cuGraphInstantiateWithParams", 12000, 0, TAKES) \
    X(cuGraphInstantiateWithParams_ptsz, "cuGraphInstantiateWithParams", 12000, 1, TAKES) \
    X(cuGraphUpload, "cuGraphUpload", 11010, 0, TAKES)                             \
    X(cuGraphUpload_ptsz, "cuGraphUpload", 11010, 1, TAKES)                        \
    X(cuGraphLaunch, "cuGraphLaunch", 10000, 0, TAKES)                             \
    X(cuGraphLaunch_ptsz, "cuGraphLaunch", 10000, 1, TAKES)                        \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", 10000, 0, GIVES)                   \
    X(cuDeviceGraphMemTrim, "cuDeviceGraphMemTrim", 11040, 0, GIVES)               \
    /* context limits that reserve device memory (ctxlimit.c) */                   \
    X(cuCtxSetLimit, "cuCtxSetLimit", 3010, 0, TAKES)                              \
    X(cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0, GIVES)                             \
    X(cuCtxDestroy, "cuCtxDestroy", 2000, 0, GIVES)                                \
    X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0, GIVES)      \
    X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 7000, 0, GIVES)          \
    X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, 0, GIVES)  \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 7000, 0, GIVES)      \
    /* how the program finds the others (interpose.c) */                           \
    X(cuGetProcAddress, "cuGetProcAddress", 0, 0, ROUTE)                           \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, ROUTE)                    \
    /* what an idle watcher sees of a process (activity.c) */                      \
    X(cuLaunchKernel, "cuLaunchKernel", 4000, 0, ACTIVITY)                         \
    X(cuLaunchKernel_ptsz, "cuLaunchKernel", 7000, 1, ACTIVITY)                    \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", 11060, 0, ACTIVITY)                    \
    X(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 11060, 1, ACTIVITY)               \
    X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000, 0, ACTIVITY)   \
    X(cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel", 9000, 1, ACTIVITY) \
    X(cuMemcpy, "cuMemcpy", 4000, 0, ACTIVITY)                                     \
    X(cuMemcpy_ptds, "cuMemcpy", 7000, 1, ACTIVITY)                                \
    X(cuMemcpyAsync, "cuMemcpyAsync", 4000, 0, ACTIVITY)                           \
    X(cuMemcpyAsync_ptsz, "cuMemcpyAsync", 7000, 1, ACTIVITY)                      \
    X(cuMemcpyHtoD_v2, "cuMemcpyHtoD", 3020, 0, ACTIVITY)                          \
    X(cuMemcpyHtoD_v2_ptds, "cuMemcpyHtoD", 7000, 1, ACTIVITY)                     \
    X(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 3020, 0, ACTIVITY)                          \
    X(cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH", 7000, 1, ACTIVITY)                     \
    X(cuMemcpyDtoD_v2, "cuMemcpyDtoD", 3020, 0, ACTIVITY)                          \
    X(cuMemcpyDtoD_v2_ptds, "cuMemcpyDtoD", 7000, 1, ACTIVITY)                     \
    X(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", 3020, 0, ACTIVITY)                \
    X(cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync", 7000, 1, ACTIVITY)           \
    X(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 3020, 0, ACTIVITY)                \
    X(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync", 7000, 1, ACTIVITY)           \
    X(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", 3020, 0, ACTIVITY)                \
    X(cuMemcpyDtoDAsync_v2_ptsz, "cuMemcpyDtoDAsync", 7000, 1, ACTIVITY)           \
    X(cuMemsetD8Async, "cuMemsetD8Async", 3020, 0, ACTIVITY)                       \
    X(cuMemsetD8Async_ptsz, "cuMemsetD8Async", 7000, 1, ACTIVITY)                  \
    X(cuMemsetD32Async, "cuMemsetD32Async", 3020, 0, ACTIVITY)                     \
    X(cuMemsetD32Async_ptsz, "cuMemsetD32Async", 7000, 1, ACTIVITY)                \
    X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0, ACTIVITY)               \
    X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 7000, 1, ACTIVITY)          \
    X(cuEventSynchronize, "cuEventSynchronize", 2000, 0, ACTIVITY)                 \
    X(cuCtxSynchronize, "cuCtxSynchronize", 2000, 0, ACTIVITY)                     \
    X(cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, 0, ACTIVITY)

/*
 * SHIM_UNCOVERED: the entry points through which the driver can hold device memory that vram does not
 * count, and why. docs/reference.md lists them (tests/shim/coverage_test.sh checks that it names each).
 */
#define SHIM_UNCOVERED(X)                                                                                 \
    X(cuMemAllocHost, "page-locked host memory, not device memory")                                   \
    X(cuMemAllocHost_v2, "page-locked host memory, not device memory")                                \
    X(cuMemHostAlloc, "page-locked host memory, not device memory")                                   \
    X(cuMemHostRegister, "page-locked host memory, not device memory")                                \
    X(cuMemHostRegister_v2, "page-locked host memory, not device memory")                             \
    X(cuIpcOpenMemHandle, "memory of another process, counted by that process")                       \
    X(cuIpcOpenMemHandle_v2, "memory of another process, counted by that process")                    \
    X(cuMemPoolImportPointer, "memory of another process, counted by that process")                   \
    X(cuMemPoolImportFromShareableHandle, "a pool of another process, counted by that process")       \
    X(cuMemImportFromShareableHandle, "memory of another process, counted by that process while it "   \
      "holds it (an imported handle kept after the exporter released it is not counted)")              \
    X(cuMemExportToShareableHandle, "an exported descriptor that outlives the handle's release is "    \
      "not counted")                                                                                    \
    X(cuImportExternalMemory, "memory of another API (Vulkan, Direct3D, NvSci), allocated there")     \
    X(cuExternalMemoryGetMappedBuffer, "memory of another API, allocated there")                      \
    X(cuExternalMemoryGetMappedMipmappedArray, "memory of another API, allocated there")              \
    X(cuGraphicsMapResources, "OpenGL, Vulkan or EGL memory, allocated by that API")                  \
    X(cuGraphicsMapResources_ptsz, "OpenGL, Vulkan or EGL memory, allocated by that API")             \
    X(cuModuleLoad, "a module's code and its __device__ and __managed__ variables: sized by the "     \
      "compiled image, not asked for at run time")                                                      \
    X(cuModuleLoadData, "a module's code and static variables (as cuModuleLoad)")                     \
    X(cuModuleLoadDataEx, "a module's code and static variables (as cuModuleLoad)")                   \
    X(cuModuleLoadFatBinary, "a module's code and static variables (as cuModuleLoad)")                \
    X(cuLibraryLoadData, "a library's code and static variables (as cuModuleLoad)")                   \
    X(cuLibraryLoadFromFile, "a library's code and static variables (as cuModuleLoad)")               \
    X(cuCtxCreate, "the context itself (a few hundred MiB on current cards): a fixed cost the driver " \
      "does not report per call")                                                                       \
    X(cuCtxCreate_v2, "the context itself (as cuCtxCreate)")                                          \
    X(cuCtxCreate_v3, "the context itself (as cuCtxCreate)")                                          \
    X(cuCtxCreate_v4, "the context itself (as cuCtxCreate)")                                          \
    X(cuDevicePrimaryCtxRetain, "the primary context itself (as cuCtxCreate)")                        \
    X(cuGreenCtxCreate, "a green context's own memory (as cuCtxCreate)")                              \
    X(cuLaunchKernel, "the local memory a launch grows to fit its kernel's per-thread local memory "  \
      "(sized by the compiled kernel; kept by the context)")                                            \
    X(cuLaunchKernel_ptsz, "local memory grown at launch (as cuLaunchKernel)")                        \
    X(cuLaunchKernelEx, "local memory grown at launch (as cuLaunchKernel)")                           \
    X(cuLaunchKernelEx_ptsz, "local memory grown at launch (as cuLaunchKernel)")                      \
    X(cuLaunchCooperativeKernel, "local memory grown at launch (as cuLaunchKernel)")                  \
    X(cuLaunchCooperativeKernel_ptsz, "local memory grown at launch (as cuLaunchKernel)")             \
    X(cuLaunchCooperativeKernelMultiDevice, "local memory grown at launch (as cuLaunchKernel)")       \
    X(cuLaunch, "local memory grown at launch (as cuLaunchKernel)")                                   \
    X(cuLaunchGrid, "local memory grown at launch (as cuLaunchKernel)")                               \
    X(cuLaunchGridAsync, "local memory grown at launch (as cuLaunchKernel)")                          \
    X(cuMemPrefetchAsync, "moves managed memory to another device: it stays counted on the device "   \
      "that allocated it")                                                                              \
    X(cuMemPrefetchAsync_ptsz, "moves managed memory (as cuMemPrefetchAsync)")                        \
    X(cuMemPrefetchAsync_v2, "moves managed memory (as cuMemPrefetchAsync)")                          \
    X(cuMemPrefetchAsync_v2_ptsz, "moves managed memory (as cuMemPrefetchAsync)")                     \
    X(cuMemPrefetchBatchAsync, "moves managed memory (as cuMemPrefetchAsync)")                        \
    X(cuMemPrefetchBatchAsync_ptsz, "moves managed memory (as cuMemPrefetchAsync)")                   \
    X(cuCheckpointProcessRestore, "restores memory the process held before its checkpoint, counted "  \
      "then and not given back by the checkpoint")

/* The roles as numbers (for the tables compiled from SHIM_HOOKS). */
enum { SHIM_ROLE_TAKES = 1, SHIM_ROLE_HOLDS, SHIM_ROLE_GIVES, SHIM_ROLE_VIEW, SHIM_ROLE_ROUTE, SHIM_ROLE_ACTIVITY };

enum {
#define X(sym, base, ver, ptsz, role) SHIM_HOOK_##sym,
    SHIM_HOOKS(X)
#undef X
    SHIM_NUM_HOOKS
};

typedef void *(*shim_dlsym_fn)(void *handle, const char *symbol);

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

/* The driver's functions the shim calls besides the interposed ones (resolved once, may be NULL). */
#define SHIM_DRIVER_EXTRAS(X)                                                       \
    X(cuCtxGetDevice) X(cuCtxGetCurrent) X(cuMemGetAllocationGranularity)           \
    X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetAttribute) X(cuDeviceGetCount) \
    X(cuCtxGetLimit) X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain)       \
    X(cuMemPoolGetAttribute) X(cuDeviceGetMemPool) X(cuDeviceGetDefaultMemPool)      \
    X(cuDeviceGetGraphMemAttribute) X(cuGraphGetNodes) X(cuGraphNodeGetType)         \
    X(cuGraphMemAllocNodeGetParams) X(cuGraphChildGraphNodeGetGraph)                 \
    X(cuDeviceTotalMem_v2) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer_v2)

typedef struct shim_real {
    void *lib;                              /* libcuda.so.1, or NULL when it cannot be loaded */
    void *fn[SHIM_NUM_HOOKS];               /* the driver's own versions, by SHIM_HOOK_* */
#define X(sym) pfn_##sym sym;
    SHIM_DRIVER_EXTRAS(X)
#undef X
} shim_real;

/* The interposed functions, declared from the table (their types: cuda_driver.h). */
#define X(sym, base, ver, ptsz, role) SHIM_EXPORT cuda_fn_##sym sym;
SHIM_HOOKS(X)
#undef X

/* ---- the process state (defined in env.c) ----------------------------------------------------- */

/* What a record of the table of live memory (table.c) is, by kind. */
enum {
    SHIM_KIND_PTR = 1,   /* key: a device pointer of the cuMemAlloc family (and of a stream-ordered call
                          * whose pool cannot be read); size, dev */
    SHIM_KIND_ARRAY,     /* key: a CUarray; size, dev */
    SHIM_KIND_MIPMAP,    /* key: a CUmipmappedArray; size, dev */
    SHIM_KIND_HANDLE,    /* key: a cuMemCreate handle the program holds; ref: its allocation's id */
    SHIM_KIND_ALLOC,     /* key: an allocation's id; size, dev; refs (handles: the create's and each
                          * retain's), maps (mappings), pins (tiles of sparse arrays, multicast bindings) */
    SHIM_KIND_MAP,       /* key: the address of a mapping (cuMemMap); size; ref: the allocation's id */
    SHIM_KIND_PIN,       /* key: a pin's id; ref: the allocation's id; owner: the array, mipmapped array or
                          * multicast handle holding it; at, size: the multicast range it is bound to */
    SHIM_KIND_MCAST,     /* key: a multicast handle (cuMulticastCreate), until its cuMemRelease */
    SHIM_KIND_CTXLIM,    /* key: context << 3 | CUlimit; size: the bytes counted; ref: the context; dev;
                          * at: the limit's value before the program first set it; owner: 1 when the
                          * context is dev's primary context */
    SHIM_KIND_GRAPH,     /* key: a graph exec with memory nodes; owner: the mask of its devices */
    SHIM_KIND_GRAPHDEV,  /* key: exec | (dev + 1) << 56; size: what its memory nodes take on dev; at: the
                          * graph-memory generation (held.c) it was mapped in, 0 when not mapped */
    SHIM_KIND_OVERFLOW   /* key: the device pointer of an overflow block (overflow.c); at: its host
                          * pointer (cuMemFreeHost's); size, dev: counted in g.overflow_bytes, not g.used */
};

typedef struct shim_entry {
    unsigned long long key;
    unsigned long long ref;
    unsigned long long owner;
    unsigned long long at;
    size_t size;
    int dev;
    int kind;                 /* 0: an empty bucket */
    unsigned int refs, maps, pins, pad;
} shim_entry;

enum { SHIM_LIMIT_NONE = 0, SHIM_LIMIT_ALL = 1, SHIM_LIMIT_DEVICE = 2, SHIM_LIMIT_SET = 3, SHIM_LIMIT_CAP = 4 };

typedef struct shim_state {
    pthread_mutex_t mu;                      /* guards used and the table */
    size_t used[SHIM_MAX_DEVICES];           /* bytes in use (reserved included) per device */
    size_t limit[SHIM_MAX_DEVICES];          /* the limit in force, 0: none; written under g.mu (limits.c:
                                              * the start limit, then what the ledger sets), read under it
                                              * or with an atomic load */
    int limit_src[SHIM_MAX_DEVICES];         /* SHIM_LIMIT_*: where limit[d] came from (as limit) */
    size_t limit_start[SHIM_MAX_DEVICES];    /* VRAM_LIMIT / VRAM_LIMIT_<i>, 0 none; set once */
    int limit_start_src[SHIM_MAX_DEVICES];   /* SHIM_LIMIT_ALL or _DEVICE (NONE); set once */
    size_t limit_max, group_limit_max;       /* VRAM_LIMIT_MAX, VRAM_GROUP_LIMIT_MAX: the most a limit or a
                                              * group budget set from outside may be (the Slurm plugin's), 0
                                              * none (the card); set once */
    size_t group_limit_start;                /* VRAM_GROUP_LIMIT, 0 none; set once */
    size_t card[SHIM_MAX_DEVICES];           /* the card's memory, 0 unknown (registration, under ledger_mu) */
    uint32_t limits_seen[SHIM_MAX_DEVICES];  /* the slot's limits_gen last applied (under g.mu) */
    int priority;                            /* LEDGER_PRIORITY_*, VRAM_PRIORITY; set once */
    int saw_opportunistic;                   /* the group had opportunistic members at the last rebalance
                                              * (relaxed atomics): a guaranteed member's frees rebalance */
    int overflow;                            /* VRAM_OVERFLOW=host; set once */
    size_t overflow_max;                     /* VRAM_OVERFLOW_MAX (0: the device's start limit, else its
                                              * card); set once */
    int overflow_max_set;
    size_t overflow_bytes[SHIM_MAX_DEVICES]; /* host memory of the live overflow blocks, under mu */
    int log;                                 /* VRAM_LOG=1; set once */
    shim_entry *table;                       /* open addressing, linear probing (table.c) */
    size_t cap, count;                       /* cap is a power of two */
    size_t npins;                            /* records of kind SHIM_KIND_PIN (scans skipped at 0) */
    unsigned long long next_id;              /* the last allocation or pin id given */
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
    int shadow_fd;                           /* vram__ledger_shadow_create's memfd, or -1 (under ledger_mu) */
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
    size_t group_limit;                      /* the group's budget in force, 0 none: VRAM_GROUP_LIMIT, then
                                              * what the ledger sets (under g.mu; atomic loads elsewhere) */
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
    /* the idle watcher (VRAM_IDLE_WATCHER; set once) and the activity page (activity.c) */
    int watcher_pid;                         /* 0: no watcher */
    uint64_t watcher_start, idle_ns;
    ledger_activity *activity;               /* NULL, or mapped for the process's life (relaxed loads) */
    ledger_slot *sleep_slot;                 /* the slot whose sleep field holds the process's calls while
                                              * it is asleep (shim_activity): its first slot, NULL none;
                                              * written under g.mu (shim_sleep_slot_unsafe), read relaxed:
                                              * a ledger left behind stays readable (vram__ledger_follow_locked) */
    int activity_fd;                         /* its descriptor, -1 none (under ledger_mu) */
    int real_ready;                          /* g.real is loaded (set once, release, after it) */
} shim_state;

extern shim_state g;

void shim_sleep_gate(void);

/* One more driver call seen (activity.c says why and what it costs): every interposed call, before
 * the driver is called; then, while the process is asleep (put to sleep by `vram sleep` or its idle
 * watcher: its slot's sleep field is not LEDGER_AWAKE), the call waits here until it is awake
 * (shim_sleep_gate), rather than in the driver: a process whose memory was checkpointed died at its first work
 * on the real driver (activity.c). */
static inline void shim_activity(void) {
    ledger_activity *a = __atomic_load_n(&g.activity, __ATOMIC_RELAXED);
    if (a) __atomic_store_n(&a->calls, __atomic_load_n(&a->calls, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    ledger_slot *s = __atomic_load_n(&g.sleep_slot, __ATOMIC_RELAXED);
    if (s && __builtin_expect(__atomic_load_n(&s->sleep, __ATOMIC_ACQUIRE) != LEDGER_AWAKE, 0)) shim_sleep_gate();
}

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
/* The driver's function of hook i for the hot calls (the ACTIVITY entries: kernel launches, copies):
 * counted as shim_real_fn does, without its call once the driver is loaded (an acquire load of
 * g.real_ready), so that the wrapper can jump straight to the driver (activity.c says what it costs). */
static inline void *shim_real_hot(int i) {
    shim_activity();
    if (__builtin_expect(__atomic_load_n(&g.real_ready, __ATOMIC_ACQUIRE), 1)) return g.real.fn[i];
    return shim_real_fn(i);
}
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
/* The first record of `kind` for which match(e, arg) holds, or NULL (a scan of the whole table). */
shim_entry *shim_scan_unsafe(int kind, int (*match)(const shim_entry *e, const void *arg), const void *arg);

/* ---- limits.c --------------------------------------------------------------------------------- */

/* Reserves `size` bytes on `dev` against its limits; 0, or -1 when refused (said when `say`). */
int shim_reserve(const char *fn, int dev, size_t size, int say);
void shim_unreserve(int dev, size_t size);
/* Gives the bytes of memory the driver freed back (and refills the balloon). */
void shim_uncount(int dev, size_t size);
/* Moves dev's use by `delta` bytes: what the driver holds for the program changed (held.c). */
void shim_adjust(int dev, long long delta);
/* Whether dev's use is above its limit. */
int shim_over_limit(int dev);
int shim_forget(int kind, unsigned long long key, shim_entry *out);
void shim_freed(CUresult r, const shim_entry *e);
/* Records a pointer, array or mipmapped array whose bytes were reserved (kinds PTR, ARRAY,
 * MIPMAP); when the driver failed or the table cannot hold it, the reservation goes back (and the
 * memory, freed with the kind's own call, with CUDA_ERROR_OUT_OF_MEMORY). */
CUresult shim_settle(CUresult r, int kind, unsigned long long *value, size_t size, int dev);

/* The limits set from outside (ledger.h, "Limits that move"): when dev's slot says they moved since
 * they were last applied, applies them (g.limit, g.group_limit; a balloon fitted to the new limit).
 * One atomic load when nothing moved. Caller holds no lock of the shim but held_mu. */
void shim_limits_follow(int dev);
/* Caller holds g.mu: the same without the balloon; 1 when dev's limit changed. */
int shim_limits_follow_unsafe(int dev);

enum { SHIM_VIEW_LIMIT = 1, SHIM_VIEW_GROUP = 2 };
int shim_view(int dev, size_t group_free, size_t *total, size_t *free_bytes);

/* ---- allocs.c: cuMemCreate allocations and what holds them ------------------------------------ */

int shim_allocs_created(unsigned long long handle, size_t size, int dev);
int shim_allocs_release_begin(unsigned long long handle, shim_entry *saved);
void shim_allocs_release_end(CUresult r, const shim_entry *saved);
void shim_allocs_mapped(unsigned long long ptr, size_t size, unsigned long long handle);
typedef struct shim_unmapping {
    shim_entry *maps;         /* the mappings taken out, n of them (local, or malloc'd when more) */
    size_t n;
    shim_entry local[4];
} shim_unmapping;
void shim_allocs_unmap_begin(unsigned long long ptr, size_t size, shim_unmapping *u);
void shim_allocs_unmap_end(CUresult r, shim_unmapping *u);
void shim_allocs_retained(unsigned long long handle, unsigned long long addr);
void shim_allocs_multicast(unsigned long long mc);
/* Pins the allocation of `handle` (or, when handle is 0, the one mapped at `addr`) to `owner`. */
void shim_allocs_pin(unsigned long long owner, unsigned long long handle, unsigned long long addr,
                     unsigned long long at, size_t size);
/* Drops the pins of `owner` (all of them, or those bound within [at, at + size) on dev when size). */
void shim_allocs_unpin(unsigned long long owner, int dev, unsigned long long at, size_t size);

/* ---- held.c: memory the driver holds for the program beyond its allocations ------------------- */

/* Reserves like shim_reserve, after re-reading what the driver holds for dev; when refused, first
 * gives the unused memory of dev's pools and graphs back and tries once more. */
int shim_take(const char *fn, int dev, size_t size);
/* Re-reads the memory dev's pools and graphs hold (nothing to do while dev has none). */
void shim_held_refresh(int dev);
void shim_held_refresh_all(void);
/* After the driver answered a call that reserved `reserved` bytes on dev for memory a pool or graph
 * holds: dev re-read and the reservation given back in one change (no moment counts both). */
void shim_held_settle(int dev, size_t reserved);
/* Notes a pool (its device, -1 when not a device's): 1 when its memory can be read from the driver
 * (then it is counted by the pool), 0 when its allocations are to be counted one by one. */
int shim_held_pool(CUmemoryPool pool, int dev);
/* The device of a pool noted before, or -1. */
int shim_held_pool_device(CUmemoryPool pool);
/* cuMemPoolDestroy and cuMemPoolTrimTo, called through these so that no re-read meets the pool
 * half destroyed; the pool's figures follow. */
CUresult shim_held_pool_destroy(CUmemoryPool pool, pfn_cuMemPoolDestroy real);
CUresult shim_held_pool_trim(CUmemoryPool pool, size_t keep, pfn_cuMemPoolTrimTo real);
/* Follows dev's graph memory from now on (graphs.c, at the first graph with memory nodes). */
void shim_held_graph_on(int dev);
/* The generation of dev's graph memory: it changes whenever graph memory was trimmed (a trim gives
 * back the memory of graphs not running, which their next launch maps anew). */
unsigned long long shim_held_graph_generation(int dev);
/* The program trimmed dev's graph memory (cuDeviceGraphMemTrim): a new generation, re-read. */
void shim_held_graph_trimmed(int dev);
/* The device's allocation granularity (2 MiB when the driver does not say). */
size_t shim_granularity(int dev);

/* ---- activity.c ------------------------------------------------------------------------------- */

/* Makes and maps the activity page (with a watcher; caller holds ledger_mu); 0 when there is one. */
int shim_activity_start(void);
/* g.sleep_slot follows g.slot: after every change of g.slot (g.mu held). */
void shim_sleep_slot_unsafe(void);

/* ---- balloon.c -------------------------------------------------------------------------------- */

void shim_balloon_start(int dev);
void shim_balloon_make_room(int dev, size_t size);
void shim_balloon_refill(int dev);
size_t shim_balloon_bytes(int dev);
/* After dev's limit moved: the balloon released down to, or filled up to, limit - in use. */
void shim_balloon_fit(int dev);

/* ---- overflow.c ------------------------------------------------------------------------------- */

/* With VRAM_OVERFLOW=host: `size` bytes of host memory mapped for the device into *dptr, for an
 * allocation the limit (or the card) refused; counted apart, under the cap. CUDA_ERROR_OUT_OF_MEMORY
 * when overflow is off or its cap is reached, else the driver's error. */
CUresult shim_overflow_alloc(const char *fn, CUdeviceptr *dptr, size_t size, int dev);
/* The same for cuMemAllocPitch_v2: rows of width_bytes rounded up to SHIM_OVERFLOW_PITCH bytes (*pitch),
 * height of them. CUDA_ERROR_OUT_OF_MEMORY as above, or when the size does not fit in size_t. */
#define SHIM_OVERFLOW_PITCH 512
CUresult shim_overflow_alloc_pitch(const char *fn, CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                   size_t height, int dev);
/* A cuMemFree of an overflow block: 1 when dptr is one (*r: cuMemFreeHost's result), else 0. */
int shim_overflow_free(CUdeviceptr dptr, CUresult *r);

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
/* Caller holds the locks of shim_group_begin: the group rebalances on dev's card (ledger.h,
 * vram__ledger_group_rebalance_locked) under its budget; returns what its guaranteed members use. */
uint64_t shim_group_rebalance_locked(int dev);
/* After a guaranteed member's free: its group's opportunistic members get their room back. */
void shim_group_freed(int dev);
size_t shim_group_free_uuid(const char *uuid);
size_t shim_group_free(int dev);

#endif /* VRAM_SHIM_SHIM_H */
