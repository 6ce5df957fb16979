/*
 * fake_internal.h: what the files of the fake libcuda.so.1 (tests/shim/fake_*.c; fake_cuda.c says
 * what the fake models) share: the lock, the bytes the driver holds per device, the devices and the
 * calling thread's context, the list of device pointers, opaque handle values, fault injection, and
 * every driver function of the fake three times: the exported symbol (SHIM_EXPORT), its internal
 * twin fault_<symbol> (what cuGetProcAddress hands out with FAKE_CUDA_PROC=internal; both ask
 * fake_fault first) and impl_<symbol>, what the call does. Not for the tests: they see only
 * fake_cuda.h.
 *
 * Layers (calls run one way): fake_cuda.c and fake_fault.c (core) <- fake_mem.c, fake_vmm.c,
 * fake_graph.c, fake_events.c, fake_launch.c, fake_ckpt.c <- fake_procs.c. Locks: fake_mu (fake_lock / fake_unlock, which with
 * FAKE_CUDA_SHARED also hold the shared file's flock) for memory, contexts and their limits; every
 * *_unsafe function wants it held. fake_fault.c's and fake_events.c's own locks are never held with
 * it or with each other. No function calls the driver's exported symbols (a call from inside the
 * library would bind to the preload library's version).
 */
#ifndef VRAM_FAKE_INTERNAL_H
#define VRAM_FAKE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "fake_cuda.h"

#define FAKE_MAX_DEVICES 16
#define FAKE_TOTAL (16ull << 30)         /* each card, unless FAKE_CUDA_MEM says otherwise */
#define FAKE_GRANULE (2ull << 20)        /* VMM, pool and graph granule */
#define FAKE_SMS 132                     /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
#define FAKE_THREADS_PER_SM 2048         /* CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR */

/* results that common/cuda_abi.h does not name */
#define FAKE_ERROR_UNSUPPORTED_LIMIT ((CUresult)215)
#define FAKE_ERROR_CONTEXT_IS_DESTROYED ((CUresult)709)
#define FAKE_ERROR_OPERATING_SYSTEM ((CUresult)304)

/* ---- arithmetic that saturates (a saturated size never fits a card: out of memory) ------------- */

static inline size_t fake_add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static inline size_t fake_mul_sat(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }
static inline size_t fake_round_up(size_t v, size_t to) {
    return v > SIZE_MAX - (to - 1) ? SIZE_MAX : (v + to - 1) / to * to;
}

/* ---- core (fake_cuda.c) ---------------------------------------------------------------------- */

void fake_lock(void);
void fake_unlock(void);
int fake_is_initialized(void);
int fake_device_count(void);
int fake_vmm_off(void);   /* FAKE_CUDA_VMM=off */
int fake_shareable_off(void);   /* FAKE_CUDA_SHAREABLE=off */
/* The bytes of the card of ordinal dev (FAKE_CUDA_MEM, else 16 GiB); 0 for no such device. */
size_t fake_card_bytes(int dev);

/* The device of the calling thread's context: CUDA_ERROR_INVALID_CONTEXT without one,
 * FAKE_ERROR_CONTEXT_IS_DESTROYED when it was destroyed. Takes the lock itself. */
CUresult fake_current_device(int *dev);

/* What the driver holds on dev grows by `bytes` when the card (every process's bytes, when shared)
 * has room; else CUDA_ERROR_OUT_OF_MEMORY and nothing changes. _each: one figure per device, all
 * or nothing. dev FAKE_HOST (memory on the host: VMM allocations and pools there) holds nothing. */
#define FAKE_HOST (-1)
CUresult fake_hold_unsafe(int dev, size_t bytes);
CUresult fake_hold_each_unsafe(const size_t bytes[FAKE_MAX_DEVICES]);
void fake_unhold_unsafe(int dev, size_t bytes);
size_t fake_room_unsafe(int dev);   /* what the card has left (every process's bytes, when shared) */

/* Room for `more` items in a growable array of `elem`-byte items: 0, or -1 when memory is short. */
int fake_reserve(void **items, size_t *cap, size_t count, size_t more, size_t elem);

/* Opaque handle values (arrays, pools, graphs, contexts...): non-NULL, distinct per kind and never
 * reused; non-canonical addresses, so that a dereference faults at once. */
enum { FAKE_OBJ_ARRAY = 1, FAKE_OBJ_MIPMAP, FAKE_OBJ_POOL, FAKE_OBJ_GRAPH, FAKE_OBJ_NODE, FAKE_OBJ_EXEC,
       FAKE_OBJ_CONTEXT, FAKE_OBJ_EVENT, FAKE_OBJ_STREAM };
uintptr_t fake_opaque_unsafe(int kind);

/* A fresh device address range of `size` bytes aligned to `align` (a power of two, at least 1 MiB),
 * never handed out before; with `hint` non-zero, that address when it is aligned and unused; 0 when
 * the simulated address space is used up. */
unsigned long long fake_address_unsafe(size_t size, size_t align, unsigned long long hint);

/* Device pointers: plain allocations (their bytes held), stream-ordered blocks of a pool (the pool's
 * reserve holds them), the live allocations of launched graphs (graph memory holds them) and another
 * process's plain allocation opened here with cuIpcOpenMemHandle (that process holds it). */
enum { FAKE_BLOCK_PLAIN, FAKE_BLOCK_POOL, FAKE_BLOCK_GRAPH, FAKE_BLOCK_IPC };
typedef struct fake_block {
    unsigned long long key;   /* the address */
    size_t size;              /* plain: the bytes held; pool: the rounded block; graph: the node's bytes */
    int dev;
    int kind;
    uintptr_t owner;          /* pool: the pool; graph: the executable graph that allocated it */
} fake_block;

int fake_blocks_reserve_unsafe(size_t more);        /* then fake_block_add_unsafe cannot fail */
void fake_block_add_unsafe(const fake_block *b);
fake_block *fake_block_find_unsafe(unsigned long long key);
fake_block *fake_block_containing_unsafe(unsigned long long addr);   /* the block addr lies in */
void fake_block_remove_unsafe(fake_block *b);       /* invalidates every fake_block pointer */

/* ---- the checkpoint API's state in the shared file (fake_cuda.c; the calls: fake_ckpt.c) ---------- */

/* Per entry of FAKE_CUDA_SHARED (the same index as the process's usage): what another process did to
 * this one through the checkpoint API. state and inflight are atomics shared by the processes; the
 * rest is changed under the file's flock (fake_lock). */
typedef struct fake_ckpt_entry {
    int state;                                    /* CUprocessState */
    int inflight;                                 /* the process's calls inside the driver now */
    unsigned long long saved[FAKE_MAX_DEVICES];   /* checkpointed: its bytes per ordinal, off the cards */
    int card[FAKE_MAX_DEVICES];                   /* 0: ordinal o is card o; else card + 1 (a restore moved it) */
    unsigned long long data, saved_data;          /* the contents word (fake_cuda_poke); saved while checkpointed */
} fake_ckpt_entry;

/* Every call of the driver passes the gate (FAKE_EXPORT): while its process is locked or
 * checkpointed the call waits (polling, 1 ms) until it is unlocked; a call inside counts in inflight,
 * which a lock waits to drain. Without FAKE_CUDA_SHARED there is no gate (no other process can lock
 * this one). */
void fake_gate_enter(void);
void fake_gate_leave(void);
/* 1 when this process's device memory is checkpointed (fake_ckpt.c): a launch then faults (fake_launch.c). */
int fake_checkpointed_self(void);
/* Under fake_lock: the entry index of live process pid in the shared file with its checkpoint state
 * and usage per ordinal, or -1 (not shared, no such CUDA process). */
int fake_ckpt_find_unsafe(int pid, fake_ckpt_entry **ck, unsigned long long **used);
/* Under fake_lock: what card `card` has left (every live process's bytes). */
size_t fake_ckpt_card_room_unsafe(int card);
/* The card entry `entry`'s process uses for its ordinal. */
int fake_ckpt_entry_card(int entry, int ordinal);

/* ---- fault injection and the driver's error names (fake_fault.c) --------------------------------- */

/* CUDA_SUCCESS, or the error FAKE_CUDA_FAIL / fake_cuda_fail() planned for this call of `symbol`
 * (every call of an exported function and of its internal twin counts, once). Takes its own lock. */
CUresult fake_fault(const char *symbol);

/* ---- the driver functions: exported symbols and their internal twins ------------------------------ */

/* Types that common/cuda_abi.h does not have. */
typedef CUresult cuda_fn_cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
typedef CUresult cuda_fn_cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev);
typedef CUresult cuda_fn_cuCtxCreate_v3(CUcontext *ctx, void *affinity_params, int num_params, unsigned int flags,
                                        CUdevice dev);
typedef CUresult cuda_fn_cuCtxCreate_v4(CUcontext *ctx, void *create_params, unsigned int flags, CUdevice dev);
typedef cuda_fn_cuEventDestroy_v2 cuda_fn_cuEventDestroy;
typedef cuda_fn_cuIpcOpenMemHandle_v2 cuda_fn_cuIpcOpenMemHandle;
typedef CUresult cuda_fn_cuStreamCreate(CUstream *stream, unsigned int flags);
typedef CUresult cuda_fn_cuStreamDestroy_v2(CUstream stream);
typedef CUresult cuda_fn_cuStreamQuery(CUstream stream);

/* X(symbol, type): every driver function the fake has. */
#define FAKE_FUNCTIONS(X)                                                        \
    /* fake_cuda.c: devices, contexts, limits */                                 \
    X(cuInit, cuInit)                                                            \
    X(cuDeviceGetCount, cuDeviceGetCount)                                        \
    X(cuDeviceGet, cuDeviceGet)                                                  \
    X(cuDeviceGetUuid, cuDeviceGetUuid)                                          \
    X(cuDeviceGetUuid_v2, cuDeviceGetUuid_v2)                                    \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute)                                \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)                        \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease)                      \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2)                \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset)                          \
    X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset_v2)                    \
    X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState)                    \
    X(cuCtxCreate_v2, cuCtxCreate_v2)                                            \
    X(cuCtxCreate_v3, cuCtxCreate_v3)                                            \
    X(cuCtxCreate_v4, cuCtxCreate_v4)                                            \
    X(cuCtxDestroy, cuCtxDestroy)                                                \
    X(cuCtxDestroy_v2, cuCtxDestroy_v2)                                          \
    X(cuCtxSetCurrent, cuCtxSetCurrent)                                          \
    X(cuCtxGetCurrent, cuCtxGetCurrent)                                          \
    X(cuCtxGetDevice, cuCtxGetDevice)                                            \
    X(cuCtxSetLimit, cuCtxSetLimit)                                              \
    X(cuCtxGetLimit, cuCtxGetLimit)                                              \
    X(cuCtxPushCurrent_v2, cuCtxPushCurrent_v2)                                  \
    X(cuCtxPopCurrent_v2, cuCtxPopCurrent_v2)                                    \
    X(cuDriverGetVersion, cuDriverGetVersion)                                    \
    X(cuDeviceGetName, cuDeviceGetName)                                          \
    X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId)                                  \
    /* fake_fault.c: the driver's error names */                                 \
    X(cuGetErrorName, cuGetErrorName)                                            \
    X(cuGetErrorString, cuGetErrorString)                                        \
    /* fake_events.c: streams and events */                                      \
    X(cuStreamCreate, cuStreamCreate)                                            \
    X(cuStreamDestroy_v2, cuStreamDestroy_v2)                                    \
    X(cuStreamQuery, cuStreamQuery)                                              \
    X(cuStreamSynchronize, cuStreamSynchronize)                                  \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize_ptsz)                        \
    X(cuCtxSynchronize, cuCtxSynchronize)                                        \
    X(cuEventCreate, cuEventCreate)                                              \
    X(cuEventRecord, cuEventRecord)                                              \
    X(cuEventQuery, cuEventQuery)                                                \
    X(cuEventSynchronize, cuEventSynchronize)                                    \
    X(cuEventDestroy, cuEventDestroy)                                            \
    X(cuEventDestroy_v2, cuEventDestroy_v2)                                      \
    /* fake_mem.c: plain memory, pools, frees */                                 \
    X(cuMemAlloc_v2, cuMemAlloc_v2)                                              \
    X(cuMemAllocPitch_v2, cuMemAllocPitch_v2)                                    \
    X(cuMemAllocManaged, cuMemAllocManaged)                                      \
    X(cuMemFree_v2, cuMemFree_v2)                                                \
    X(cuMemGetInfo_v2, cuMemGetInfo_v2)                                          \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem_v2)                                  \
    X(cuMemAlloc, cuMemAlloc)                                                    \
    X(cuMemAllocPitch, cuMemAllocPitch)                                          \
    X(cuMemFree, cuMemFree)                                                      \
    X(cuMemGetInfo, cuMemGetInfo)                                                \
    X(cuDeviceTotalMem, cuDeviceTotalMem)                                        \
    X(cuMemAllocAsync, cuMemAllocAsync)                                          \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync_ptsz)                                \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)                          \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync_ptsz)                \
    X(cuMemFreeAsync, cuMemFreeAsync)                                            \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync_ptsz)                                  \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle)                                      \
    X(cuIpcOpenMemHandle, cuIpcOpenMemHandle)                                    \
    X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle_v2)                              \
    X(cuIpcCloseMemHandle, cuIpcCloseMemHandle)                                  \
    X(cuMemHostAlloc, cuMemHostAlloc)                                            \
    X(cuMemFreeHost, cuMemFreeHost)                                              \
    X(cuMemHostGetDevicePointer_v2, cuMemHostGetDevicePointer_v2)                \
    X(cuMemPoolCreate, cuMemPoolCreate)                                          \
    X(cuMemPoolDestroy, cuMemPoolDestroy)                                        \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo)                                          \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute)                              \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute)                              \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool)                      \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool)                                    \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool)                                    \
    /* fake_vmm.c: virtual memory management, multicast, arrays */               \
    X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity)              \
    X(cuMemCreate, cuMemCreate)                                                  \
    X(cuMemRelease, cuMemRelease)                                                \
    X(cuMemAddressReserve, cuMemAddressReserve)                                  \
    X(cuMemAddressFree, cuMemAddressFree)                                        \
    X(cuMemMap, cuMemMap)                                                        \
    X(cuMemUnmap, cuMemUnmap)                                                    \
    X(cuMemSetAccess, cuMemSetAccess)                                            \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle)                  \
    X(cuMemExportToShareableHandle, cuMemExportToShareableHandle)                \
    X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle)            \
    X(cuMulticastCreate, cuMulticastCreate)                                      \
    X(cuMulticastBindMem, cuMulticastBindMem)                                    \
    X(cuMulticastBindAddr, cuMulticastBindAddr)                                  \
    X(cuMulticastUnbind, cuMulticastUnbind)                                      \
    X(cuArrayCreate, cuArrayCreate)                                              \
    X(cuArray3DCreate, cuArray3DCreate)                                          \
    X(cuArrayCreate_v2, cuArrayCreate_v2)                                        \
    X(cuArray3DCreate_v2, cuArray3DCreate_v2)                                    \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate)                            \
    X(cuArrayDestroy, cuArrayDestroy)                                            \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy)                          \
    X(cuMemMapArrayAsync, cuMemMapArrayAsync)                                    \
    X(cuMemMapArrayAsync_ptsz, cuMemMapArrayAsync_ptsz)                          \
    /* fake_graph.c: graphs and graph memory */                                  \
    X(cuGraphCreate, cuGraphCreate)                                              \
    X(cuGraphDestroy, cuGraphDestroy)                                            \
    X(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode)                            \
    X(cuGraphAddMemFreeNode, cuGraphAddMemFreeNode)                              \
    X(cuGraphAddChildGraphNode, cuGraphAddChildGraphNode)                        \
    X(cuGraphGetNodes, cuGraphGetNodes)                                          \
    X(cuGraphNodeGetType, cuGraphNodeGetType)                                    \
    X(cuGraphMemAllocNodeGetParams, cuGraphMemAllocNodeGetParams)                \
    X(cuGraphChildGraphNodeGetGraph, cuGraphChildGraphNodeGetGraph)              \
    X(cuGraphInstantiate, cuGraphInstantiate)                                    \
    X(cuGraphInstantiate_v2, cuGraphInstantiate_v2)                              \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags)                  \
    X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams)                \
    X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams_ptsz)      \
    X(cuGraphUpload, cuGraphUpload)                                              \
    X(cuGraphUpload_ptsz, cuGraphUpload_ptsz)                                    \
    X(cuGraphLaunch, cuGraphLaunch)                                              \
    X(cuGraphLaunch_ptsz, cuGraphLaunch_ptsz)                                    \
    X(cuGraphExecDestroy, cuGraphExecDestroy)                                    \
    X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim)                                \
    X(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute)                \
    /* fake_procs.c */                                                           \
    X(cuGetProcAddress, cuGetProcAddress)                                        \
    X(cuGetProcAddress_v2, cuGetProcAddress_v2)                                  \
    /* fake_launch.c: kernel launches, copies and sets (they run nothing) */     \
    X(cuLaunchKernel, cuLaunchKernel)                                            \
    X(cuLaunchKernel_ptsz, cuLaunchKernel_ptsz)                                  \
    X(cuLaunchKernelEx, cuLaunchKernelEx)                                        \
    X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz)                              \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel)                      \
    X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel_ptsz)            \
    X(cuMemcpy, cuMemcpy)                                                        \
    X(cuMemcpy_ptds, cuMemcpy_ptds)                                              \
    X(cuMemcpyAsync, cuMemcpyAsync)                                              \
    X(cuMemcpyAsync_ptsz, cuMemcpyAsync_ptsz)                                    \
    X(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2)                                          \
    X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2_ptds)                                \
    X(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2)                                          \
    X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2_ptds)                                \
    X(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2)                                          \
    X(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2_ptds)                                \
    X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2)                                \
    X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2_ptsz)                      \
    X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2)                                \
    X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2_ptsz)                      \
    X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2)                                \
    X(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2_ptsz)                      \
    X(cuMemsetD8Async, cuMemsetD8Async)                                          \
    X(cuMemsetD8Async_ptsz, cuMemsetD8Async_ptsz)                                \
    X(cuMemsetD32Async, cuMemsetD32Async)                                        \
    X(cuMemsetD32Async_ptsz, cuMemsetD32Async_ptsz)                              \
    X(cuCtxSynchronize_v2, cuCtxSynchronize_v2)                                  \
    FAKE_CHECKPOINT_FUNCTIONS(X)

/* fake_ckpt.c: the process checkpoint API (not in the build of FAKE_NO_CHECKPOINT, a driver older than
 * CUDA 12.8). Not gated: they act on other processes. */
#ifdef FAKE_NO_CHECKPOINT
#define FAKE_CHECKPOINT_FUNCTIONS(X)
#else
#define FAKE_CHECKPOINT_FUNCTIONS(X)                                             \
    X(cuCheckpointProcessGetRestoreThreadId, cuCheckpointProcessGetRestoreThreadId) \
    X(cuCheckpointProcessGetState, cuCheckpointProcessGetState)                  \
    X(cuCheckpointProcessLock, cuCheckpointProcessLock)                          \
    X(cuCheckpointProcessCheckpoint, cuCheckpointProcessCheckpoint)              \
    X(cuCheckpointProcessRestore, cuCheckpointProcessRestore)                    \
    X(cuCheckpointProcessUnlock, cuCheckpointProcessUnlock)
#endif

/* Per function: the exported symbol, its internal twin fault_<symbol> (the same call at another
 * address, which cuGetProcAddress hands out with FAKE_CUDA_PROC=internal) and impl_<symbol>, what
 * the call does. Both entries first ask fake_fault whether this call is to fail. */
#define FAKE_DECLARE(symbol, type) \
    SHIM_EXPORT cuda_fn_##type symbol; \
    cuda_fn_##type fault_##symbol;     \
    cuda_fn_##type impl_##symbol;
FAKE_FUNCTIONS(FAKE_DECLARE)
#undef FAKE_DECLARE

/* The internal twin (`before`, the gate, a planned failure, else impl_<symbol>) and the exported
 * symbol that calls it. */
#define FAKE_EXPORT_BEFORE(symbol, params, args, before)                                   \
    CUresult fault_##symbol params {                                                       \
        before;                                                                            \
        fake_gate_enter();                                                                 \
        CUresult fault_r_ = fake_fault(#symbol);                                           \
        if (fault_r_ == CUDA_SUCCESS) fault_r_ = impl_##symbol args;                       \
        fake_gate_leave();                                                                 \
        return fault_r_;                                                                   \
    }                                                                                      \
    SHIM_EXPORT CUresult symbol params { return fault_##symbol args; }
#define FAKE_EXPORT(symbol, params, args) FAKE_EXPORT_BEFORE(symbol, params, args, (void)0)

/* The same without the gate (the checkpoint API: a call about another process). */
#define FAKE_EXPORT_UNGATED(symbol, params, args)                                          \
    CUresult fault_##symbol params {                                                       \
        CUresult fault_r_ = fake_fault(#symbol);                                           \
        return fault_r_ != CUDA_SUCCESS ? fault_r_ : impl_##symbol args;                   \
    }                                                                                      \
    SHIM_EXPORT CUresult symbol params { return fault_##symbol args; }

#endif /* VRAM_FAKE_INTERNAL_H */
