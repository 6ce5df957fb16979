/*
 * cuda_internal.h: what the two files of the CUDA driver backend share: the table of the driver's
 * functions as resolved (cuda_api), a device's state, the backend's one state (vram__cuda_st) and the
 * calls cuda.c makes of cuda_load.c. Nothing outside src/backend/cuda*.c includes this.
 *
 *   cuda_load.c  loading libcuda.so.1 and resolving its functions, cuInit and device discovery,
 *                unloading; the driver's errors as messages; entering and leaving a device's
 *                primary context
 *   cuda.c       the contract's calls (backend.h): devices, memory, virtual memory management,
 *                IPC, events, the counters and the backend table
 *   cuda_overflow.c  host memory mapped for a device (overflow:host)
 *
 * Invariants: vram__cuda_st is written only by vram__cuda_load / vram__cuda_unload, which the runtime serialises with
 * every other call (open and close run under its write lock); a device's ctx goes from NULL to the
 * retained primary context once (under cuda_retain_lock, in cuda_load.c) and back only in close.
 * Locks: cuda_retain_lock (cuda_load.c) for retaining a primary context; a device's ev_lock for its
 * spare events (cuda.c). Neither is held while the other is taken.
 */
#ifndef VRAM_BACKEND_CUDA_INTERNAL_H
#define VRAM_BACKEND_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "common/cuda_abi.h"

#define CUDA_DEFAULT_GRANULARITY (2 * VRAM_MIB)
#define CUDA_SIM_HINT "To run without a GPU set VRAM_BACKEND=sim."

/* ---- the driver's functions ----------------------------------------------------------------- */

typedef enum cuda_need { CUDA_ESSENTIAL, CUDA_OPTIONAL, CUDA_VMM } cuda_need;

/* X(field, type, symbol, older symbol or NULL, need): the driver functions the backend resolves
 * (cuda_load.c) into cuda_api's `field`, of type pfn_<type> (common/cuda_abi.h's table); `symbol` is
 * the name cuda.h maps the call to, the older one has the same ABI. CUDA_OPTIONAL functions may be
 * missing (IPC, names of errors, pinned host memory and copies); without every CUDA_VMM one there is no
 * virtual memory management. */
#define CUDA_BACKEND_FUNCTIONS(X) \
    X(Init, cuInit, "cuInit", NULL, CUDA_ESSENTIAL) \
    X(DriverGetVersion, cuDriverGetVersion, "cuDriverGetVersion", NULL, CUDA_OPTIONAL) \
    X(GetErrorName, cuGetErrorName, "cuGetErrorName", NULL, CUDA_OPTIONAL) \
    X(GetErrorString, cuGetErrorString, "cuGetErrorString", NULL, CUDA_OPTIONAL) \
    X(DeviceGetCount, cuDeviceGetCount, "cuDeviceGetCount", NULL, CUDA_ESSENTIAL) \
    X(DeviceGet, cuDeviceGet, "cuDeviceGet", NULL, CUDA_ESSENTIAL) \
    X(DeviceGetName, cuDeviceGetName, "cuDeviceGetName", NULL, CUDA_ESSENTIAL) \
    X(DeviceGetUuid, cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid", CUDA_OPTIONAL) \
    X(DeviceGetPCIBusId, cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", NULL, CUDA_ESSENTIAL) \
    X(DeviceTotalMem, cuDeviceTotalMem_v2, "cuDeviceTotalMem_v2", NULL, CUDA_ESSENTIAL) \
    X(DeviceGetAttribute, cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL, CUDA_ESSENTIAL) \
    X(PrimaryCtxRetain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, CUDA_ESSENTIAL) \
    X(PrimaryCtxRelease, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", CUDA_ESSENTIAL) \
    X(CtxPushCurrent, cuCtxPushCurrent_v2, "cuCtxPushCurrent_v2", NULL, CUDA_ESSENTIAL) \
    X(CtxPopCurrent, cuCtxPopCurrent_v2, "cuCtxPopCurrent_v2", NULL, CUDA_ESSENTIAL) \
    X(MemGetInfo, cuMemGetInfo_v2, "cuMemGetInfo_v2", NULL, CUDA_ESSENTIAL) \
    X(MemAlloc, cuMemAlloc_v2, "cuMemAlloc_v2", NULL, CUDA_ESSENTIAL) \
    X(MemFree, cuMemFree_v2, "cuMemFree_v2", NULL, CUDA_ESSENTIAL) \
    X(EventCreate, cuEventCreate, "cuEventCreate", NULL, CUDA_ESSENTIAL) \
    X(EventRecord, cuEventRecord, "cuEventRecord", NULL, CUDA_ESSENTIAL) \
    X(EventQuery, cuEventQuery, "cuEventQuery", NULL, CUDA_ESSENTIAL) \
    X(EventSynchronize, cuEventSynchronize, "cuEventSynchronize", NULL, CUDA_ESSENTIAL) \
    X(EventDestroy, cuEventDestroy_v2, "cuEventDestroy_v2", "cuEventDestroy", CUDA_ESSENTIAL) \
    X(MemAddressReserve, cuMemAddressReserve, "cuMemAddressReserve", NULL, CUDA_VMM) \
    X(MemAddressFree, cuMemAddressFree, "cuMemAddressFree", NULL, CUDA_VMM) \
    X(MemCreate, cuMemCreate, "cuMemCreate", NULL, CUDA_VMM) \
    X(MemRelease, cuMemRelease, "cuMemRelease", NULL, CUDA_VMM) \
    X(MemMap, cuMemMap, "cuMemMap", NULL, CUDA_VMM) \
    X(MemUnmap, cuMemUnmap, "cuMemUnmap", NULL, CUDA_VMM) \
    X(MemSetAccess, cuMemSetAccess, "cuMemSetAccess", NULL, CUDA_VMM) \
    X(MemGetAllocationGranularity, cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", NULL, CUDA_VMM) \
    X(MemExportToShareableHandle, cuMemExportToShareableHandle, "cuMemExportToShareableHandle", NULL, CUDA_OPTIONAL) \
    X(MemImportFromShareableHandle, cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", NULL, CUDA_OPTIONAL) \
    X(IpcGetMemHandle, cuIpcGetMemHandle, "cuIpcGetMemHandle", NULL, CUDA_OPTIONAL) \
    X(IpcOpenMemHandle, cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", CUDA_OPTIONAL) \
    X(IpcCloseMemHandle, cuIpcCloseMemHandle, "cuIpcCloseMemHandle", NULL, CUDA_OPTIONAL) \
    X(MemHostAlloc, cuMemHostAlloc, "cuMemHostAlloc", NULL, CUDA_OPTIONAL) \
    X(MemFreeHost, cuMemFreeHost, "cuMemFreeHost", NULL, CUDA_OPTIONAL) \
    X(MemcpyDtoH, cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2", NULL, CUDA_OPTIONAL) \
    X(MemcpyHtoD, cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", NULL, CUDA_OPTIONAL) \
    X(MemRetainAllocationHandle, cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", NULL, CUDA_OPTIONAL) \
    X(HostGetDevicePointer, cuMemHostGetDevicePointer_v2, "cuMemHostGetDevicePointer_v2", \
      "cuMemHostGetDevicePointer", CUDA_OPTIONAL)

#define CUDA_API_FIELD(field, type, symbol, alt, need) pfn_##type field;
typedef struct cuda_api {
    CUDA_BACKEND_FUNCTIONS(CUDA_API_FIELD)
} cuda_api;
#undef CUDA_API_FIELD

/* ---- state ---------------------------------------------------------------------------------- */

/* Events the pool is done with are kept (up to this many per device) and recorded again, instead
 * of cuEventDestroy + cuEventCreate for every stream-ordered free. */
#define CUDA_EVENT_SPARES 256

typedef struct cuda_device {
    CUdevice            handle;
    int                 vmm;          /* VMM usable on this device */
    size_t              granularity;
    atomic_int          shareable;    /* physical memory is created exportable (1 until refused) */
    _Atomic(CUcontext)  ctx;          /* retained primary context, NULL until first needed */
    pthread_mutex_t     ev_lock;      /* guards the spare events */
    int                 ev_spares;
    CUevent             ev_spare[CUDA_EVENT_SPARES];   /* destroyed events kept for reuse */
} cuda_device;

/* Written only by vram__cuda_load / vram__cuda_unload (the runtime serialises those with everything else). */
typedef struct cuda_state {
    void        *lib;
    cuda_api     api;
    int          vmm_api;   /* every VMM symbol was found */
    int          count;
    cuda_device *devs;
} cuda_state;

extern cuda_state vram__cuda_st;

/* ---- cuda_load.c ---------------------------------------------------------------------------- */

/* Sets "<what>: <NAME> (<description>)" and returns the mapped status. */
vram_status vram__cuda_fail(CUresult r, const char *fmt, ...) VRAM_PRINTF(2, 3);

#define CUDA_TRY(call, ...)                                            \
    do {                                                               \
        CUresult cuda_r_ = (call);                                     \
        if (cuda_r_ != CUDA_SUCCESS) return vram__cuda_fail(cuda_r_, __VA_ARGS__); \
    } while (0)

/* Loads the driver, resolves its functions, runs cuInit and finds the devices; on failure nothing
 * stays loaded. */
vram_status vram__cuda_load(void);
/* Frees the devices' records and closes the library; vram__cuda_st is all zero afterwards. */
void vram__cuda_unload(void);

vram_status vram__cuda_device_at(int dev, cuda_device **out);
/* Makes the device's primary context current on this thread until vram__cuda_leave(). */
vram_status vram__cuda_enter(int dev);
void vram__cuda_leave(void);
/* As vram__cuda_enter, for the virtual memory management calls: VRAM_ERR_UNSUPPORTED without them. */
vram_status vram__cuda_enter_vmm(int dev, cuda_device **out);

/* ---- cuda_overflow.c: host memory for overflow (backend.h's overflow_alloc / overflow_free) ---- */

vram_status vram__cuda_overflow_alloc(int dev, size_t size, uint64_t *dptr, size_t *held);
vram_status vram__cuda_overflow_free(int dev, uint64_t dptr, size_t held);
extern vram__backend_counts vram__cuda_count;

#endif /* VRAM_BACKEND_CUDA_INTERNAL_H */
