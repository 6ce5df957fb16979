/*
 * cuda_driver.h: the CUDA driver functions the preload library interposes on, declared with the
 * types of common/cuda_abi.h's one table of driver functions (VRAM_CUDA_FUNCTIONS: cuda_fn_<symbol>
 * the function's type, pfn_<symbol> a pointer to it), which this header brings in with the
 * driver's handles, results and structs. Shared by the shim (shim/calls.c and shim/interpose.c
 * define the interposed functions), tests/shim/fake_cuda.c (a libcuda.so.1 double that defines
 * them too) and the test programs (which call them through the pfn_ pointers).
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

/* ---- the interposed functions (exported by libvram_preload.so and by the fake driver) ------- */

SHIM_EXPORT cuda_fn_cuMemAlloc_v2 cuMemAlloc_v2;
SHIM_EXPORT cuda_fn_cuMemAllocPitch_v2 cuMemAllocPitch_v2;
SHIM_EXPORT cuda_fn_cuMemAllocManaged cuMemAllocManaged;
SHIM_EXPORT cuda_fn_cuMemFree_v2 cuMemFree_v2;
SHIM_EXPORT cuda_fn_cuMemGetInfo_v2 cuMemGetInfo_v2;
SHIM_EXPORT cuda_fn_cuDeviceTotalMem_v2 cuDeviceTotalMem_v2;
SHIM_EXPORT cuda_fn_cuMemCreate cuMemCreate;
SHIM_EXPORT cuda_fn_cuMemRelease cuMemRelease;
SHIM_EXPORT cuda_fn_cuMemAllocAsync cuMemAllocAsync;
SHIM_EXPORT cuda_fn_cuMemAllocAsync cuMemAllocAsync_ptsz;
SHIM_EXPORT cuda_fn_cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync;
SHIM_EXPORT cuda_fn_cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync_ptsz;
SHIM_EXPORT cuda_fn_cuMemFreeAsync cuMemFreeAsync;
SHIM_EXPORT cuda_fn_cuMemFreeAsync cuMemFreeAsync_ptsz;
SHIM_EXPORT cuda_fn_cuGetProcAddress cuGetProcAddress;
SHIM_EXPORT cuda_fn_cuGetProcAddress_v2 cuGetProcAddress_v2;

#endif /* VRAM_SHIM_CUDA_DRIVER_H */
