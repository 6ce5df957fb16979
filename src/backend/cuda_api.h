/*
 * cuda_api.h: the small part of the CUDA driver API (cuda.h) that backend/cuda.c and cuda_load.c use, written out
 * by hand so that libvram builds without a CUDA toolkit (the types the preload library needs too
 * are in common/cuda_abi.h). Enum values and struct layouts are the driver's ABI (checked against
 * cuda.h of CUDA 13.0) for 64-bit hosts; functions are reached through the pointer types below,
 * resolved with dlsym from libcuda.so.1 at run time.
 * Private to backend/cuda*.c.
 */
#ifndef VRAM_CUDA_API_H
#define VRAM_CUDA_API_H

#include <stddef.h>

#include "common/cuda_abi.h"

/* ---- device attributes ---------------------------------------------------------------------- */

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102
} CUdevice_attribute;

/* ---- events --------------------------------------------------------------------------------- */

typedef enum CUevent_flags_enum {
    CU_EVENT_DEFAULT = 0x0,
    CU_EVENT_DISABLE_TIMING = 0x2
} CUevent_flags;

/* ---- virtual memory management -------------------------------------------------------------- */

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1
} CUmemAllocationGranularity_flags;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

/* The driver's ABI on the 64-bit hosts libvram supports. */
_Static_assert(sizeof(void *) == 8, "the CUDA backend needs a 64-bit host");
_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation layout");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp layout");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");
_Static_assert(sizeof(CUuuid) == 16, "CUuuid layout");

/* ---- function pointer types (named after the symbol they are resolved from) ---------------- */

typedef CUresult (*cuda_pfn_cuInit)(unsigned int flags);
typedef CUresult (*cuda_pfn_cuDriverGetVersion)(int *version);

typedef CUresult (*cuda_pfn_cuDeviceGetCount)(int *count);
typedef CUresult (*cuda_pfn_cuDeviceGet)(CUdevice *device, int ordinal);
typedef CUresult (*cuda_pfn_cuDeviceGetName)(char *name, int len, CUdevice dev);
typedef CUresult (*cuda_pfn_cuDeviceGetUuid)(CUuuid *uuid, CUdevice dev);         /* and _v2 */
typedef CUresult (*cuda_pfn_cuDeviceGetPCIBusId)(char *bus_id, int len, CUdevice dev);
typedef CUresult (*cuda_pfn_cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
typedef CUresult (*cuda_pfn_cuDeviceGetAttribute)(int *value, CUdevice_attribute attrib, CUdevice dev);

typedef CUresult (*cuda_pfn_cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
typedef CUresult (*cuda_pfn_cuDevicePrimaryCtxRelease)(CUdevice dev);             /* and _v2 */
typedef CUresult (*cuda_pfn_cuCtxPushCurrent_v2)(CUcontext ctx);
typedef CUresult (*cuda_pfn_cuCtxPopCurrent_v2)(CUcontext *ctx);

typedef CUresult (*cuda_pfn_cuMemGetInfo_v2)(size_t *free_bytes, size_t *total_bytes);
typedef CUresult (*cuda_pfn_cuMemAlloc_v2)(CUdeviceptr *dptr, size_t size);
typedef CUresult (*cuda_pfn_cuMemFree_v2)(CUdeviceptr dptr);

typedef CUresult (*cuda_pfn_cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
                                                 CUdeviceptr addr, unsigned long long flags);
typedef CUresult (*cuda_pfn_cuMemAddressFree)(CUdeviceptr ptr, size_t size);
typedef CUresult (*cuda_pfn_cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                                         const CUmemAllocationProp *prop, unsigned long long flags);
typedef CUresult (*cuda_pfn_cuMemRelease)(CUmemGenericAllocationHandle handle);
typedef CUresult (*cuda_pfn_cuMemExportToShareableHandle)(void *shareable, CUmemGenericAllocationHandle handle,
                                                          CUmemAllocationHandleType type, unsigned long long flags);
typedef CUresult (*cuda_pfn_cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *handle, void *os_handle,
                                                            CUmemAllocationHandleType type);

/* ---- IPC of plain allocations --------------------------------------------------------------- */

#define CU_IPC_HANDLE_SIZE 64
typedef struct CUipcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
typedef CUresult (*cuda_pfn_cuIpcGetMemHandle)(CUipcMemHandle *handle, CUdeviceptr dptr);
typedef CUresult (*cuda_pfn_cuIpcOpenMemHandle_v2)(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags);
typedef CUresult (*cuda_pfn_cuIpcCloseMemHandle)(CUdeviceptr dptr);
typedef CUresult (*cuda_pfn_cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                                      CUmemGenericAllocationHandle handle, unsigned long long flags);
typedef CUresult (*cuda_pfn_cuMemUnmap)(CUdeviceptr ptr, size_t size);
typedef CUresult (*cuda_pfn_cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                            size_t count);
typedef CUresult (*cuda_pfn_cuMemGetAllocationGranularity)(size_t *granularity,
                                                           const CUmemAllocationProp *prop,
                                                           CUmemAllocationGranularity_flags option);

typedef CUresult (*cuda_pfn_cuEventCreate)(CUevent *event, unsigned int flags);
typedef CUresult (*cuda_pfn_cuEventRecord)(CUevent event, CUstream stream);
typedef CUresult (*cuda_pfn_cuEventQuery)(CUevent event);
typedef CUresult (*cuda_pfn_cuEventSynchronize)(CUevent event);
typedef CUresult (*cuda_pfn_cuEventDestroy_v2)(CUevent event);

#endif /* VRAM_CUDA_API_H */
