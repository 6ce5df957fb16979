/*
 * cuda_abi.h: the part of the CUDA driver API (cuda.h) that vram's code uses, for its three users of
 * the driver: the backend (backend/cuda.c, cuda_load.c), the preload library (shim/, whose exported
 * functions shim/cuda_driver.h declares) and the Slurm plugin (spank/vram_spank.c). Handles, result
 * codes, the enums and structs of the calls used, and one table of the driver functions,
 * VRAM_CUDA_FUNCTIONS, which gives each function's type (cuda_fn_<symbol>) and pointer type
 * (pfn_<symbol>). Written out by hand so that nothing needs a CUDA toolkit to build; values and
 * layouts are the driver's ABI (cuda.h of CUDA 12 and 13, checked against 13.0) on 64-bit hosts.
 * Header only: types and one static inline function, no symbol of libvram.
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

/* ---- device attributes, events, virtual memory management ---------------------------------- */

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102
} CUdevice_attribute;

typedef enum CUevent_flags_enum {
    CU_EVENT_DEFAULT = 0x0,
    CU_EVENT_DISABLE_TIMING = 0x2
} CUevent_flags;

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

/* ---- IPC of plain allocations --------------------------------------------------------------- */

#define CU_IPC_HANDLE_SIZE 64
typedef struct CUipcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1

/* ---- cuGetProcAddress: its flags and (for _v2) the symbol status it reports ----------------- */

#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM 1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2

typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

/* ---- the driver's functions ----------------------------------------------------------------- */

/* X(symbol, return type, (parameters)) for every driver function vram calls, resolves or
 * interposes on, named as the driver exports it (with its version suffix; where an older symbol has
 * the same ABI, e.g. cuDeviceGetUuid and cuDeviceGetUuid_v2, one entry serves both). */
#define VRAM_CUDA_FUNCTIONS(X) \
    X(cuInit, CUresult, (unsigned int flags)) \
    X(cuDriverGetVersion, CUresult, (int *version)) \
    X(cuGetErrorName, CUresult, (CUresult error, const char **str)) \
    X(cuGetErrorString, CUresult, (CUresult error, const char **str)) \
    X(cuGetProcAddress, CUresult, (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)) \
    X(cuGetProcAddress_v2, CUresult, (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags, \
                                      CUdriverProcAddressQueryResult *status)) \
    /* devices */ \
    X(cuDeviceGetCount, CUresult, (int *count)) \
    X(cuDeviceGet, CUresult, (CUdevice *device, int ordinal)) \
    X(cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev)) \
    X(cuDeviceGetUuid, CUresult, (CUuuid *uuid, CUdevice dev)) \
    X(cuDeviceGetPCIBusId, CUresult, (char *bus_id, int len, CUdevice dev)) \
    X(cuDeviceTotalMem_v2, CUresult, (size_t *bytes, CUdevice dev)) \
    X(cuDeviceGetAttribute, CUresult, (int *value, CUdevice_attribute attrib, CUdevice dev)) \
    /* contexts */ \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *ctx, CUdevice dev)) \
    X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice dev)) \
    X(cuCtxPushCurrent_v2, CUresult, (CUcontext ctx)) \
    X(cuCtxPopCurrent_v2, CUresult, (CUcontext *ctx)) \
    X(cuCtxSetCurrent, CUresult, (CUcontext ctx)) \
    X(cuCtxGetDevice, CUresult, (CUdevice *dev)) \
    /* plain memory */ \
    X(cuMemGetInfo_v2, CUresult, (size_t *free_bytes, size_t *total_bytes)) \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *dptr, size_t bytesize)) \
    X(cuMemAllocPitch_v2, CUresult, (CUdeviceptr *dptr, size_t *pitch, size_t width_bytes, size_t height, \
                                     unsigned int element_size_bytes)) \
    X(cuMemAllocManaged, CUresult, (CUdeviceptr *dptr, size_t bytesize, unsigned int flags)) \
    X(cuMemFree_v2, CUresult, (CUdeviceptr dptr)) \
    /* stream-ordered memory (the _ptsz variants have the same types) */ \
    X(cuMemAllocAsync, CUresult, (CUdeviceptr *dptr, size_t bytesize, CUstream stream)) \
    X(cuMemAllocFromPoolAsync, CUresult, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, \
                                          CUstream stream)) \
    X(cuMemFreeAsync, CUresult, (CUdeviceptr dptr, CUstream stream)) \
    /* virtual memory management (CUDA 10.2 and later) */ \
    X(cuMemAddressReserve, CUresult, (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, \
                                      unsigned long long flags)) \
    X(cuMemAddressFree, CUresult, (CUdeviceptr ptr, size_t size)) \
    X(cuMemCreate, CUresult, (CUmemGenericAllocationHandle *handle, size_t size, \
                              const CUmemAllocationProp *prop, unsigned long long flags)) \
    X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle)) \
    X(cuMemMap, CUresult, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, \
                           unsigned long long flags)) \
    X(cuMemUnmap, CUresult, (CUdeviceptr ptr, size_t size)) \
    X(cuMemSetAccess, CUresult, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)) \
    X(cuMemGetAllocationGranularity, CUresult, (size_t *granularity, const CUmemAllocationProp *prop, \
                                                CUmemAllocationGranularity_flags option)) \
    X(cuMemExportToShareableHandle, CUresult, (void *shareable, CUmemGenericAllocationHandle handle, \
                                               CUmemAllocationHandleType type, unsigned long long flags)) \
    X(cuMemImportFromShareableHandle, CUresult, (CUmemGenericAllocationHandle *handle, void *os_handle, \
                                                 CUmemAllocationHandleType type)) \
    /* IPC of plain allocations */ \
    X(cuIpcGetMemHandle, CUresult, (CUipcMemHandle *handle, CUdeviceptr dptr)) \
    X(cuIpcOpenMemHandle_v2, CUresult, (CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags)) \
    X(cuIpcCloseMemHandle, CUresult, (CUdeviceptr dptr)) \
    /* events */ \
    X(cuEventCreate, CUresult, (CUevent *event, unsigned int flags)) \
    X(cuEventRecord, CUresult, (CUevent event, CUstream stream)) \
    X(cuEventQuery, CUresult, (CUevent event)) \
    X(cuEventSynchronize, CUresult, (CUevent event)) \
    X(cuEventDestroy_v2, CUresult, (CUevent event))

/* cuda_fn_<symbol>: the function's type (a declaration `cuda_fn_cuMemAlloc_v2 cuMemAlloc_v2;`
 * declares the function itself); pfn_<symbol>: a pointer to it, for what is resolved at run time. */
#define VRAM_CUDA_FN_TYPES(symbol, ret, params) \
    typedef ret cuda_fn_##symbol params;        \
    typedef cuda_fn_##symbol *pfn_##symbol;
VRAM_CUDA_FUNCTIONS(VRAM_CUDA_FN_TYPES)
#undef VRAM_CUDA_FN_TYPES

/* ---- naming a result ------------------------------------------------------------------------ */

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for r: the driver's own name and text when its
 * cuGetErrorName / cuGetErrorString are given and answer, else from a table of the codes that
 * matter when the driver cannot name them (the toolkit's stub library answers
 * CUDA_ERROR_STUB_LIBRARY to everything, cuGetErrorName included), else "CUDA error N". */
static inline void cuda_abi_error_text(CUresult r, pfn_cuGetErrorName get_name, pfn_cuGetErrorString get_string,
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

/* The driver's ABI on the 64-bit hosts vram supports. */
_Static_assert(sizeof(void *) == 8, "the CUDA driver types here are those of 64-bit hosts");
_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation layout");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp layout");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");
_Static_assert(sizeof(CUuuid) == 16, "CUuuid layout");

#endif /* VRAM_CUDA_ABI_H */
