/*
 * cuda_driver.h: the part of the CUDA driver API (cuda.h) that the preload library interposes on,
 * written out by hand so that nothing needs a CUDA toolkit to build. Types, enum values, struct
 * layouts and symbol names are the driver's ABI (CUDA 12 and 13, 64-bit hosts). Shared by the
 * shim (shim/calls.c and shim/interpose.c define the interposed functions), tests/shim/fake_cuda.c
 * (a libcuda.so.1 double that defines them too) and the test programs (which call them through
 * pointers).
 *
 * Names: the exported symbols carry the driver's version suffix (cuMemAlloc_v2); cuGetProcAddress
 * takes the base name ("cuMemAlloc") and a CUDA version and returns the matching version.
 */
#ifndef VRAM_SHIM_CUDA_DRIVER_H
#define VRAM_SHIM_CUDA_DRIVER_H

#include <stddef.h>

#include "common/cuda_abi.h"   /* handles, results, allocation properties */

#ifndef SHIM_EXPORT
#define SHIM_EXPORT __attribute__((visibility("default")))
#endif

/* cuGetProcAddress flags and (for _v2) the symbol status it reports. */
#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM 1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2

typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

/* ---- the interposed functions (exported by libvram_preload.so and by the fake driver) ------- */

SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                        size_t height, unsigned int element_size_bytes);
SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
SHIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags);
SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream);
SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream stream);
SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
SHIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                                      cuuint64_t flags);
SHIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status);

/* ---- pointer types, for callers that resolve the functions at run time ---------------------- */

typedef CUresult (*pfn_cuInit)(unsigned int flags);
typedef CUresult (*pfn_cuDeviceGet)(CUdevice *dev, int ordinal);
typedef CUresult (*pfn_cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
typedef CUresult (*pfn_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*pfn_cuCtxGetDevice)(CUdevice *dev);
typedef CUresult (*pfn_cuMemAlloc_v2)(CUdeviceptr *dptr, size_t bytesize);
typedef CUresult (*pfn_cuMemAllocPitch_v2)(CUdeviceptr *dptr, size_t *pitch, size_t width_bytes,
                                           size_t height, unsigned int element_size_bytes);
typedef CUresult (*pfn_cuMemAllocManaged)(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
typedef CUresult (*pfn_cuMemFree_v2)(CUdeviceptr dptr);
typedef CUresult (*pfn_cuMemGetInfo_v2)(size_t *free_bytes, size_t *total_bytes);
typedef CUresult (*pfn_cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
typedef CUresult (*pfn_cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags);
typedef CUresult (*pfn_cuMemRelease)(CUmemGenericAllocationHandle handle);
typedef CUresult (*pfn_cuMemAllocAsync)(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
typedef CUresult (*pfn_cuMemAllocFromPoolAsync)(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream stream);
typedef CUresult (*pfn_cuMemFreeAsync)(CUdeviceptr dptr, CUstream stream);
typedef CUresult (*pfn_cuGetProcAddress)(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags);
typedef CUresult (*pfn_cuGetProcAddress_v2)(const char *symbol, void **pfn, int cuda_version,
                                            cuuint64_t flags, CUdriverProcAddressQueryResult *status);

#endif /* VRAM_SHIM_CUDA_DRIVER_H */
