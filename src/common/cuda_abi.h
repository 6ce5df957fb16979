/*
 * cuda_abi.h: the CUDA driver types that both users of the driver need, the backend
 * (backend/cuda_api.h) and the preload library (shim/cuda_driver.h): handles, result codes and the
 * allocation properties of the virtual memory calls. Written out by hand so that nothing needs a
 * CUDA toolkit to build; values and layouts are the driver's ABI (cuda.h of CUDA 12 and 13) on
 * 64-bit hosts.
 */
#ifndef VRAM_CUDA_ABI_H
#define VRAM_CUDA_ABI_H

#include <stddef.h>

/* ---- handles ------------------------------------------------------------------------------- */

typedef int CUdevice;                                  /* a device ordinal */
typedef unsigned long long CUdeviceptr;                /* CUdeviceptr_v2: 64-bit device address */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* ---- results ------------------------------------------------------------------------------- */

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

/* ---- physical allocation properties (cuMemCreate) ------------------------------------------- */

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0x0
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0x0,
    CU_MEM_LOCATION_TYPE_DEVICE = 0x1
} CUmemLocationType;

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
    CU_MEM_ALLOCATION_TYPE_PINNED = 0x1
} CUmemAllocationType;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;                                 /* device ordinal for CU_MEM_LOCATION_TYPE_DEVICE */
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;              /* must be NULL off Windows */
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

_Static_assert(sizeof(void *) == 8, "the CUDA driver types here are those of 64-bit hosts");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");

#endif /* VRAM_CUDA_ABI_H */
