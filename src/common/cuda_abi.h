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
#include <stdio.h>

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
    CU_MEM_HANDLE_TYPE_NONE = 0x0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1
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

/* ---- naming a result ------------------------------------------------------------------------ */

typedef CUresult (*cuda_pfn_cuGetErrorName)(CUresult error, const char **str);
typedef CUresult (*cuda_pfn_cuGetErrorString)(CUresult error, const char **str);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for r: the driver's own name and text when its
 * cuGetErrorName / cuGetErrorString are given and answer, else from a table of the codes that
 * matter when the driver cannot name them (the toolkit's stub library answers
 * CUDA_ERROR_STUB_LIBRARY to everything, cuGetErrorName included), else "CUDA error N". */
static inline void cuda_abi_error_text(CUresult r, cuda_pfn_cuGetErrorName get_name, cuda_pfn_cuGetErrorString get_string,
                                       char *buf, size_t len) {
    static const struct { CUresult code; const char *name, *text; } known[] = {
        { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
        { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
        { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
        { CUDA_ERROR_INSUFFICIENT_DRIVER, "CUDA_ERROR_INSUFFICIENT_DRIVER",
          "CUDA driver version is insufficient for CUDA runtime version" },
        { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
        { CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
          "system has unsupported display driver / cuda driver combination" },
        { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    };
    const char *name = NULL, *text = NULL;
    if (get_name && get_name(r, &name) != CUDA_SUCCESS) name = NULL;
    if (get_string && get_string(r, &text) != CUDA_SUCCESS) text = NULL;
    for (size_t i = 0; name == NULL && i < sizeof known / sizeof known[0]; i++) {
        if (known[i].code == r) {
            name = known[i].name;
            text = known[i].text;
        }
    }
    if (name == NULL) snprintf(buf, len, "CUDA error %d (%s)", (int)r, text ? text : "unknown error");
    else snprintf(buf, len, "%s (%s)", name, text ? text : "no description");
}

_Static_assert(sizeof(void *) == 8, "the CUDA driver types here are those of 64-bit hosts");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");

#endif /* VRAM_CUDA_ABI_H */
