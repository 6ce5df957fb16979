/*
 * fake_procs.c: cuGetProcAddress (v1) and cuGetProcAddress_v2 of the fake driver (fake_cuda.c says
 * what the fake models). A table gives, per base name ("cuMemAlloc"), each version of the function
 * with the CUDA version that introduced it and whether it is the per-thread-default-stream (_ptsz)
 * one, as cudaTypedefs.h lists them: a lookup returns the newest version not newer than the CUDA
 * version asked for, the _ptsz one when the flag CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is
 * given and there is one. It hands out the exported symbol, or with FAKE_CUDA_PROC=internal the same
 * function at another address (its fault_ twin, which no exported symbol names; fake_internal.h). _v2 also reports the
 * symbol's status (found, version not sufficient, not found).
 *
 * Invariants: every entry's two pointers have the type of the version the entry names. No state, no
 * lock.
 */
#include <string.h>
#include <stdlib.h>

#include "fake_internal.h"

typedef struct fake_proc {
    const char *base;
    int min_version, ptsz;
    void *fn;         /* the exported function */
    void *internal;   /* the same function at another address (FAKE_CUDA_PROC=internal) */
} fake_proc;

#define P(base, version, symbol) { base, version, 0, (void *)symbol, (void *)fault_##symbol }
#define PTSZ(base, version, symbol) { base, version, 1, (void *)symbol, (void *)fault_##symbol }

static const fake_proc fake_procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxCreate", 11040, cuCtxCreate_v3),
    P("cuCtxCreate", 12050, cuCtxCreate_v4),
    P("cuCtxDestroy", 2000, cuCtxDestroy),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxSetLimit", 3010, cuCtxSetLimit),
    P("cuCtxGetLimit", 3010, cuCtxGetLimit),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuGetErrorString", 6000, cuGetErrorString),
    /* streams and events */
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    P("cuStreamQuery", 2000, cuStreamQuery),
    P("cuEventCreate", 2000, cuEventCreate),
    P("cuEventRecord", 2000, cuEventRecord),
    P("cuEventQuery", 2000, cuEventQuery),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    P("cuEventDestroy", 2000, cuEventDestroy),
    P("cuEventDestroy", 4000, cuEventDestroy_v2),
    /* sharing memory with other processes */
    P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    P("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
    P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    /* pinned host memory mapped for the device */
    P("cuMemHostAlloc", 3020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    P("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    P("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    /* plain memory: the CUDA < 3.2 entry points, then the _v2 ones */
    P("cuMemAlloc", 2000, cuMemAlloc),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAllocPitch", 2000, cuMemAllocPitch),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemFree", 2000, cuMemFree),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemGetInfo", 2000, cuMemGetInfo),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    /* stream-ordered memory and pools */
    P("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PTSZ("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PTSZ("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PTSZ("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    PTSZ("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    /* virtual memory management and multicast */
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    P("cuMulticastCreate", 12010, cuMulticastCreate),
    P("cuMulticastBindMem", 12010, cuMulticastBindMem),
    P("cuMulticastBindAddr", 12010, cuMulticastBindAddr),
    P("cuMulticastUnbind", 12010, cuMulticastUnbind),
    /* arrays */
    P("cuArrayCreate", 2000, cuArrayCreate),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 2000, cuArray3DCreate),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
    P("cuMemMapArrayAsync", 11010, cuMemMapArrayAsync),
    PTSZ("cuMemMapArrayAsync", 11010, cuMemMapArrayAsync_ptsz),
    /* graphs */
    P("cuGraphCreate", 10000, cuGraphCreate),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    P("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    P("cuGraphAddChildGraphNode", 10000, cuGraphAddChildGraphNode),
    P("cuGraphGetNodes", 10000, cuGraphGetNodes),
    P("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    P("cuGraphMemAllocNodeGetParams", 11040, cuGraphMemAllocNodeGetParams),
    P("cuGraphChildGraphNodeGetGraph", 10000, cuGraphChildGraphNodeGetGraph),
    P("cuGraphInstantiate", 10000, cuGraphInstantiate),
    P("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    P("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    PTSZ("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams_ptsz),
    P("cuGraphUpload", 11010, cuGraphUpload),
    PTSZ("cuGraphUpload", 11010, cuGraphUpload_ptsz),
    P("cuGraphLaunch", 10000, cuGraphLaunch),
    PTSZ("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    P("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
    P("cuDeviceGetGraphMemAttribute", 11040, cuDeviceGetGraphMemAttribute),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    /* launches, copies, sets, synchronisation */
    P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    P("cuLaunchKernel", 4000, cuLaunchKernel),
    PTSZ("cuLaunchKernel", 7000, cuLaunchKernel_ptsz),
    P("cuLaunchKernelEx", 11060, cuLaunchKernelEx),
    PTSZ("cuLaunchKernelEx", 11060, cuLaunchKernelEx_ptsz),
    P("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel),
    PTSZ("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel_ptsz),
    P("cuMemcpy", 4000, cuMemcpy),
    PTSZ("cuMemcpy", 7000, cuMemcpy_ptds),
    P("cuMemcpyAsync", 4000, cuMemcpyAsync),
    PTSZ("cuMemcpyAsync", 7000, cuMemcpyAsync_ptsz),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    PTSZ("cuMemcpyHtoD", 7000, cuMemcpyHtoD_v2_ptds),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    PTSZ("cuMemcpyDtoH", 7000, cuMemcpyDtoH_v2_ptds),
    P("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    PTSZ("cuMemcpyDtoD", 7000, cuMemcpyDtoD_v2_ptds),
    P("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    PTSZ("cuMemcpyHtoDAsync", 7000, cuMemcpyHtoDAsync_v2_ptsz),
    P("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    PTSZ("cuMemcpyDtoHAsync", 7000, cuMemcpyDtoHAsync_v2_ptsz),
    P("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    PTSZ("cuMemcpyDtoDAsync", 7000, cuMemcpyDtoDAsync_v2_ptsz),
    P("cuMemsetD8Async", 3020, cuMemsetD8Async),
    PTSZ("cuMemsetD8Async", 7000, cuMemsetD8Async_ptsz),
    P("cuMemsetD32Async", 3020, cuMemsetD32Async),
    PTSZ("cuMemsetD32Async", 7000, cuMemsetD32Async_ptsz),
#ifndef FAKE_NO_CHECKPOINT
    /* the process checkpoint API (CUDA 12.8) */
    P("cuCheckpointProcessGetRestoreThreadId", 12080, cuCheckpointProcessGetRestoreThreadId),
    P("cuCheckpointProcessGetState", 12080, cuCheckpointProcessGetState),
    P("cuCheckpointProcessLock", 12080, cuCheckpointProcessLock),
    P("cuCheckpointProcessCheckpoint", 12080, cuCheckpointProcessCheckpoint),
    P("cuCheckpointProcessRestore", 12080, cuCheckpointProcessRestore),
    P("cuCheckpointProcessUnlock", 12080, cuCheckpointProcessUnlock),
#endif
};

#undef P
#undef PTSZ

static CUresult fake_lookup(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status) {
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, found = 0;
    const fake_proc *best = NULL;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof fake_procs / sizeof fake_procs[0]; i++) {
        const fake_proc *p = &fake_procs[i];
        if (strcmp(p->base, symbol) != 0) continue;
        found = 1;
        if (p->min_version > cuda_version) continue;
        if (p->ptsz && !ptsz) continue;
        if (!best || p->min_version > best->min_version || (p->ptsz && !best->ptsz)) best = p;
    }
    const char *mode = getenv("FAKE_CUDA_PROC");
    int internal = mode && strcmp(mode, "internal") == 0;
    *pfn = best ? (internal ? best->internal : best->fn) : NULL;
    if (status)
        *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                       : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult impl_cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags) {
    return fake_lookup(symbol, pfn, cuda_version, flags, NULL);
}

CUresult impl_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status) {
    return fake_lookup(symbol, pfn, cuda_version, flags, status);
}

FAKE_EXPORT(cuGetProcAddress, (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags),
            (symbol, pfn, cuda_version, flags))
FAKE_EXPORT(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status), (symbol, pfn, cuda_version, flags, status))
