/*
 * cuda_driver.h: the types of the CUDA driver functions the preload library interposes on, from
 * common/cuda_abi.h's one table of driver functions (VRAM_CUDA_FUNCTIONS: cuda_fn_<symbol> the
 * function's type, pfn_<symbol> a pointer to it), which this header brings in with the driver's
 * handles, results and structs, plus the names that table does not spell: the per-thread-stream
 * (_ptsz) variants and the older versions of a function with the same parameters. Shared by the
 * shim (shim.h declares every interposed function from its coverage table, SHIM_HOOKS),
 * tests/shim/fake_cuda.c (a libcuda.so.1 double that defines them too) and the test programs
 * (which call them through the pfn_ pointers).
 *
 * Names: the exported symbols carry the driver's version suffix (cuMemAlloc_v2); cuGetProcAddress
 * takes the base name ("cuMemAlloc") and a CUDA version and returns the matching version.
 */
#ifndef VRAM_SHIM_CUDA_DRIVER_H
#define VRAM_SHIM_CUDA_DRIVER_H

#include <stddef.h>

#include "common/cuda_abi.h"   /* handles, results, structs, the driver functions' types */

#ifndef SHIM_EXPORT
#define SHIM_EXPORT __attribute__((visibility("default")))
#endif

/* X(alias, same_as): a symbol whose parameters are those of another table entry. */
#define SHIM_DRIVER_ALIASES(X)                                       \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync)                         \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync)         \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync)                           \
    X(cuMemMapArrayAsync_ptsz, cuMemMapArrayAsync)                   \
    X(cuGraphInstantiate_v2, cuGraphInstantiate)                     \
    X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams) \
    X(cuGraphUpload_ptsz, cuGraphUpload)                             \
    X(cuGraphLaunch_ptsz, cuGraphLaunch)                             \
    X(cuCtxDestroy, cuCtxDestroy_v2)                                 \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2)           \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease)      \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize)                 \
    X(cuLaunchKernel_ptsz, cuLaunchKernel)                           \
    X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx)                       \
    X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel)     \
    X(cuMemcpy_ptds, cuMemcpy)                                       \
    X(cuMemcpyAsync_ptsz, cuMemcpyAsync)                             \
    X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2)                         \
    X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2)                         \
    X(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2)                         \
    X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2)               \
    X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2)               \
    X(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2)               \
    X(cuMemsetD8Async_ptsz, cuMemsetD8Async)                         \
    X(cuMemsetD32Async_ptsz, cuMemsetD32Async)

#define SHIM_DRIVER_ALIAS_TYPES(alias, same_as) \
    typedef cuda_fn_##same_as cuda_fn_##alias;  \
    typedef pfn_##same_as pfn_##alias;
SHIM_DRIVER_ALIASES(SHIM_DRIVER_ALIAS_TYPES)
#undef SHIM_DRIVER_ALIAS_TYPES

#endif /* VRAM_SHIM_CUDA_DRIVER_H */
