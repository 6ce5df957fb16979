/*
 * cuda_internal.h: what the two files of the CUDA driver backend share: the table of the driver's
 * functions as resolved (cuda_api), a device's state, the backend's one state (cuda_st) and the
 * calls cuda.c makes of cuda_load.c. Nothing outside src/backend/cuda*.c includes this.
 *
 *   cuda_load.c  loading libcuda.so.1 and resolving its functions, cuInit and device discovery,
 *                unloading; the driver's errors as messages; entering and leaving a device's
 *                primary context
 *   cuda.c       the contract's calls (backend.h): devices, memory, virtual memory management,
 *                IPC, events, the counters and the backend table
 *
 * Invariants: cuda_st is written only by cuda_load / cuda_unload, which the runtime serialises with
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
#include "backend/cuda_api.h"

#define CUDA_DEFAULT_GRANULARITY (2 * VRAM_MIB)
#define CUDA_SIM_HINT "To run without a GPU set VRAM_BACKEND=sim."

/* ---- the driver's functions ----------------------------------------------------------------- */

typedef struct cuda_api {
    cuda_pfn_cuInit Init;
    cuda_pfn_cuDriverGetVersion DriverGetVersion;
    cuda_pfn_cuGetErrorName GetErrorName;
    cuda_pfn_cuGetErrorString GetErrorString;
    cuda_pfn_cuDeviceGetCount DeviceGetCount;
    cuda_pfn_cuDeviceGet DeviceGet;
    cuda_pfn_cuDeviceGetName DeviceGetName;
    cuda_pfn_cuDeviceGetUuid DeviceGetUuid;
    cuda_pfn_cuDeviceGetPCIBusId DeviceGetPCIBusId;
    cuda_pfn_cuDeviceTotalMem_v2 DeviceTotalMem;
    cuda_pfn_cuDeviceGetAttribute DeviceGetAttribute;
    cuda_pfn_cuDevicePrimaryCtxRetain PrimaryCtxRetain;
    cuda_pfn_cuDevicePrimaryCtxRelease PrimaryCtxRelease;
    cuda_pfn_cuCtxPushCurrent_v2 CtxPushCurrent;
    cuda_pfn_cuCtxPopCurrent_v2 CtxPopCurrent;
    cuda_pfn_cuMemGetInfo_v2 MemGetInfo;
    cuda_pfn_cuMemAlloc_v2 MemAlloc;
    cuda_pfn_cuMemFree_v2 MemFree;
    cuda_pfn_cuEventCreate EventCreate;
    cuda_pfn_cuEventRecord EventRecord;
    cuda_pfn_cuEventQuery EventQuery;
    cuda_pfn_cuEventSynchronize EventSynchronize;
    cuda_pfn_cuEventDestroy_v2 EventDestroy;
    /* optional: virtual memory management (CUDA 10.2 and later) */
    cuda_pfn_cuMemAddressReserve MemAddressReserve;
    cuda_pfn_cuMemAddressFree MemAddressFree;
    cuda_pfn_cuMemCreate MemCreate;
    cuda_pfn_cuMemRelease MemRelease;
    cuda_pfn_cuMemMap MemMap;
    cuda_pfn_cuMemUnmap MemUnmap;
    cuda_pfn_cuMemSetAccess MemSetAccess;
    cuda_pfn_cuMemGetAllocationGranularity MemGetAllocationGranularity;
    /* optional: IPC */
    cuda_pfn_cuMemExportToShareableHandle MemExportToShareableHandle;
    cuda_pfn_cuMemImportFromShareableHandle MemImportFromShareableHandle;
    cuda_pfn_cuIpcGetMemHandle IpcGetMemHandle;
    cuda_pfn_cuIpcOpenMemHandle_v2 IpcOpenMemHandle;
    cuda_pfn_cuIpcCloseMemHandle IpcCloseMemHandle;
} cuda_api;

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

/* Written only by cuda_load / cuda_unload (the runtime serialises those with everything else). */
typedef struct cuda_state {
    void        *lib;
    cuda_api     api;
    int          vmm_api;   /* every VMM symbol was found */
    int          count;
    cuda_device *devs;
} cuda_state;

extern cuda_state cuda_st;

/* ---- cuda_load.c ---------------------------------------------------------------------------- */

/* Sets "<what>: <NAME> (<description>)" and returns the mapped status. */
vram_status cuda_fail(CUresult r, const char *fmt, ...) VRAM_PRINTF(2, 3);

#define CUDA_TRY(call, ...)                                            \
    do {                                                               \
        CUresult cuda_r_ = (call);                                     \
        if (cuda_r_ != CUDA_SUCCESS) return cuda_fail(cuda_r_, __VA_ARGS__); \
    } while (0)

/* Loads the driver, resolves its functions, runs cuInit and finds the devices; on failure nothing
 * stays loaded. */
vram_status cuda_load(void);
/* Frees the devices' records and closes the library; cuda_st is all zero afterwards. */
void cuda_unload(void);

vram_status cuda_device_at(int dev, cuda_device **out);
/* Makes the device's primary context current on this thread until cuda_leave(). */
vram_status cuda_enter(int dev);
void cuda_leave(void);
/* As cuda_enter, for the virtual memory management calls: VRAM_ERR_UNSUPPORTED without them. */
vram_status cuda_enter_vmm(int dev, cuda_device **out);

#endif /* VRAM_BACKEND_CUDA_INTERNAL_H */
