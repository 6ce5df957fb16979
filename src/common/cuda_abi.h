/*
 * cuda_abi.h: the part of the CUDA driver API (cuda.h) that vram's code uses, for its three users of
 * the driver: the backend (backend/cuda.c, cuda_load.c), the preload library (shim/, whose exported
 * functions shim/cuda_driver.h declares), the Slurm plugin (spank/vram_spank.c), and shim/sleep.c's
 * process checkpoint API (`vram sleep`, `vram wake`, the idle watcher). Handles, result
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
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlaunchConfig_st CUlaunchConfig;     /* cuLaunchKernelEx's; only passed through here */
typedef unsigned int CUdeviceptr_v1;                   /* the 32-bit address of the CUDA < 3.2 entry points */

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
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_PERMITTED = 800,
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
    CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
    CU_MEM_LOCATION_TYPE_HOST = 0x2,
    CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4
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
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
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

/* ---- CUDA arrays (cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate, cuMemMapArrayAsync) ---- */

typedef enum CUarray_format_enum {
    CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    CU_AD_FORMAT_SIGNED_INT8 = 0x08,
    CU_AD_FORMAT_SIGNED_INT16 = 0x09,
    CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
    CU_AD_FORMAT_HALF = 0x10,
    CU_AD_FORMAT_FLOAT = 0x20,
    CU_AD_FORMAT_MAX = 0x7FFFFFFF              /* many more (packed, block-compressed, YUV): their codes */
} CUarray_format;                              /* are numbers the preload library's size table knows */

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    size_t Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* the CUDA < 3.2 descriptors of cuArrayCreate / cuArray3DCreate (no _v2): 32-bit dimensions */
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
    unsigned int Width;
    unsigned int Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
    unsigned int Width;
    unsigned int Height;
    unsigned int Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

#define CUDA_ARRAY3D_LAYERED 0x01
#define CUDA_ARRAY3D_CUBEMAP 0x04
#define CUDA_ARRAY3D_SPARSE 0x40
#define CUDA_ARRAY3D_DEFERRED_MAPPING 0x80

typedef enum CUresourcetype_enum {
    CU_RESOURCE_TYPE_ARRAY = 0x00,
    CU_RESOURCE_TYPE_MIPMAPPED_ARRAY = 0x01
} CUresourcetype;

typedef enum CUmemOperationType_enum { CU_MEM_OPERATION_TYPE_MAP = 1, CU_MEM_OPERATION_TYPE_UNMAP = 2 } CUmemOperationType;
typedef enum CUmemHandleType_enum { CU_MEM_HANDLE_TYPE_GENERIC = 0 } CUmemHandleType;

typedef struct CUarrayMapInfo_st {
    CUresourcetype resourceType;
    union {
        CUmipmappedArray mipmap;
        CUarray array;
    } resource;
    int subresourceType;                   /* CUarraySparseSubresourceType */
    union {
        struct {
            unsigned int level, layer, offsetX, offsetY, offsetZ, extentWidth, extentHeight, extentDepth;
        } sparseLevel;
        struct {
            unsigned int layer;
            unsigned long long offset;
            unsigned long long size;
        } miptail;
    } subresource;
    CUmemOperationType memOperationType;
    CUmemHandleType memHandleType;
    union {
        CUmemGenericAllocationHandle memHandle;
    } memHandle;
    unsigned long long offset;
    unsigned int deviceBitMask;
    unsigned int flags;
    unsigned int reserved[2];
} CUarrayMapInfo;

/* ---- memory pools (stream-ordered allocation) ------------------------------------------------ */

typedef enum CUmemPool_attribute_enum {
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,      /* cuuint64_t: reserved bytes kept at a synchronization */
    CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,   /* cuuint64_t: the physical memory the pool holds */
    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT,       /* cuuint64_t: of which live allocations use */
    CU_MEMPOOL_ATTR_USED_MEM_HIGH
} CUmemPool_attribute;

typedef struct CUmemPoolProps_st {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

/* ---- graphs and their memory nodes ---------------------------------------------------------- */

typedef enum CUgraphNodeType_enum {
    CU_GRAPH_NODE_TYPE_GRAPH = 4,           /* a child graph */
    CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
    CU_GRAPH_NODE_TYPE_MEM_FREE = 11
} CUgraphNodeType;

typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_st {
    CUmemPoolProps poolProps;               /* location: where the allocation resides */
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;                       /* out */
} CUDA_MEM_ALLOC_NODE_PARAMS;

typedef enum CUgraphMem_attribute_enum {
    CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT,
    CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
    CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
    CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH
} CUgraphMem_attribute;

#define CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2

typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
    cuuint64_t flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    int result_out;                         /* CUgraphInstantiateResult */
} CUDA_GRAPH_INSTANTIATE_PARAMS;

/* ---- context limits and multicast objects ---------------------------------------------------- */

typedef enum CUlimit_enum {
    CU_LIMIT_STACK_SIZE = 0x00,             /* bytes per thread, for every thread the device can hold */
    CU_LIMIT_PRINTF_FIFO_SIZE = 0x01,
    CU_LIMIT_MALLOC_HEAP_SIZE = 0x02,
    CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH = 0x03,
    CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT = 0x04
} CUlimit;

typedef struct CUmulticastObjectProp_st {
    unsigned int numDevices;
    size_t size;
    unsigned long long handleTypes;
    unsigned long long flags;
} CUmulticastObjectProp;

/* ---- the process checkpoint API (CUDA 12.8 and later; `vram sleep`, `vram wake`) -------------- */

/* Another process (same user, or root) locks a CUDA process (its CUDA calls block), checkpoints it
 * (its device memory goes to host memory, the GPU's memory is released), later restores it (onto the
 * same GPUs, or others of the same kind by gpuPairs) and unlocks it. */
typedef enum CUprocessState_enum {
    CU_PROCESS_STATE_RUNNING = 0,
    CU_PROCESS_STATE_LOCKED,                /* its CUDA calls block */
    CU_PROCESS_STATE_CHECKPOINTED,          /* its device memory is in host memory */
    CU_PROCESS_STATE_FAILED                 /* an uncorrectable error during a checkpoint or restore */
} CUprocessState;

typedef struct CUcheckpointLockArgs_st {
    unsigned int timeoutMs;                 /* 0: no timeout; else the process stays RUNNING after it */
    unsigned int reserved0;
    cuuint64_t reserved1[7];
} CUcheckpointLockArgs;

typedef struct CUcheckpointCheckpointArgs_st {
    cuuint64_t reserved[8];
} CUcheckpointCheckpointArgs;

typedef struct CUcheckpointGpuPair_st {
    CUuuid oldUuid;                         /* a GPU the process was checkpointed on */
    CUuuid newUuid;                         /* the GPU (same chip) to restore it onto */
} CUcheckpointGpuPair;

typedef struct CUcheckpointRestoreArgs_st {
    CUcheckpointGpuPair *gpuPairs;          /* NULL, or a pair for every checkpointed GPU */
    unsigned int gpuPairsCount;
    char reserved[52 - sizeof(CUcheckpointGpuPair *)];
    cuuint64_t reserved1;
} CUcheckpointRestoreArgs;

typedef struct CUcheckpointUnlockArgs_st {
    cuuint64_t reserved[8];
} CUcheckpointUnlockArgs;

/* ---- cuGetProcAddress: its flags and (for _v2) the symbol status it reports ----------------- */

/* cuMemHostAlloc's flags: pinned for every context, not only the caller's; mapped into the device's
 * address space */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

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
    /* pinned host memory and the copies between it and device memory (vram_sleep's offload) */ \
    X(cuMemHostAlloc, CUresult, (void **host, size_t bytesize, unsigned int flags)) \
    X(cuMemFreeHost, CUresult, (void *host)) \
    X(cuMemcpyDtoH_v2, CUresult, (void *dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr dst, const void *src, size_t bytes)) \
    /* events */ \
    X(cuEventCreate, CUresult, (CUevent *event, unsigned int flags)) \
    X(cuEventRecord, CUresult, (CUevent event, CUstream stream)) \
    X(cuEventQuery, CUresult, (CUevent event)) \
    X(cuEventSynchronize, CUresult, (CUevent event)) \
    X(cuEventDestroy_v2, CUresult, (CUevent event)) \
    X(cuStreamSynchronize, CUresult, (CUstream stream)) \
    X(cuCtxSynchronize, CUresult, (void)) \
    X(cuCtxSynchronize_v2, CUresult, (CUcontext ctx)) \
    /* kernel launches, copies and sets (the preload library counts them as a process's activity) */ \
    X(cuLaunchKernel, CUresult, (CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, \
                                 unsigned int block_x, unsigned int block_y, unsigned int block_z, \
                                 unsigned int shared_bytes, CUstream stream, void **params, void **extra)) \
    X(cuLaunchKernelEx, CUresult, (const CUlaunchConfig *config, CUfunction f, void **params, void **extra)) \
    X(cuLaunchCooperativeKernel, CUresult, (CUfunction f, unsigned int grid_x, unsigned int grid_y, \
                                            unsigned int grid_z, unsigned int block_x, unsigned int block_y, \
                                            unsigned int block_z, unsigned int shared_bytes, CUstream stream, \
                                            void **params)) \
    X(cuMemcpy, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyAsync, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr dst, const void *src, size_t bytes)) \
    X(cuMemcpyDtoH_v2, CUresult, (void *dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyDtoD_v2, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)) \
    X(cuMemcpyDtoHAsync_v2, CUresult, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemsetD8Async, CUresult, (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream)) \
    X(cuMemsetD32Async, CUresult, (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream)) \
    /* the process checkpoint API (CUDA 12.8 and later) */ \
    X(cuCheckpointProcessGetRestoreThreadId, CUresult, (int pid, int *tid)) \
    X(cuCheckpointProcessGetState, CUresult, (int pid, CUprocessState *state)) \
    X(cuCheckpointProcessLock, CUresult, (int pid, CUcheckpointLockArgs *args)) \
    X(cuCheckpointProcessCheckpoint, CUresult, (int pid, CUcheckpointCheckpointArgs *args)) \
    X(cuCheckpointProcessRestore, CUresult, (int pid, CUcheckpointRestoreArgs *args)) \
    X(cuCheckpointProcessUnlock, CUresult, (int pid, CUcheckpointUnlockArgs *args)) \
    /* the CUDA < 3.2 entry points (32-bit sizes and addresses; the driver still exports them) */ \
    X(cuMemAlloc, CUresult, (CUdeviceptr_v1 *dptr, unsigned int bytesize)) \
    X(cuMemAllocPitch, CUresult, (CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width_bytes, \
                                  unsigned int height, unsigned int element_size_bytes)) \
    X(cuMemFree, CUresult, (CUdeviceptr_v1 dptr)) \
    X(cuMemGetInfo, CUresult, (unsigned int *free_bytes, unsigned int *total_bytes)) \
    X(cuDeviceTotalMem, CUresult, (unsigned int *bytes, CUdevice dev)) \
    X(cuArrayCreate, CUresult, (CUarray *array, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)) \
    X(cuArray3DCreate, CUresult, (CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)) \
    /* CUDA arrays */ \
    X(cuArrayCreate_v2, CUresult, (CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc)) \
    X(cuArray3DCreate_v2, CUresult, (CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc)) \
    X(cuMipmappedArrayCreate, CUresult, (CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc, \
                                         unsigned int levels)) \
    X(cuArrayDestroy, CUresult, (CUarray array)) \
    X(cuMipmappedArrayDestroy, CUresult, (CUmipmappedArray array)) \
    X(cuMemMapArrayAsync, CUresult, (CUarrayMapInfo *infos, unsigned int count, CUstream stream)) \
    /* what keeps a cuMemCreate allocation alive besides its handle */ \
    X(cuMemRetainAllocationHandle, CUresult, (CUmemGenericAllocationHandle *handle, void *addr)) \
    /* the device's address of pinned mapped host memory (libvram's overflow:host where VMM cannot \
       place memory on the host) */ \
    X(cuMemHostGetDevicePointer_v2, CUresult, (CUdeviceptr *dptr, void *host, unsigned int flags)) \
    X(cuMulticastCreate, CUresult, (CUmemGenericAllocationHandle *mc, const CUmulticastObjectProp *prop)) \
    X(cuMulticastBindMem, CUresult, (CUmemGenericAllocationHandle mc, size_t mc_offset, \
                                     CUmemGenericAllocationHandle mem, size_t mem_offset, size_t size, \
                                     unsigned long long flags)) \
    X(cuMulticastBindAddr, CUresult, (CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr ptr, \
                                      size_t size, unsigned long long flags)) \
    X(cuMulticastUnbind, CUresult, (CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset, size_t size)) \
    /* memory pools */ \
    X(cuMemPoolCreate, CUresult, (CUmemoryPool *pool, const CUmemPoolProps *props)) \
    X(cuMemPoolDestroy, CUresult, (CUmemoryPool pool)) \
    X(cuMemPoolTrimTo, CUresult, (CUmemoryPool pool, size_t keep)) \
    X(cuMemPoolGetAttribute, CUresult, (CUmemoryPool pool, CUmemPool_attribute attr, void *value)) \
    X(cuMemPoolSetAttribute, CUresult, (CUmemoryPool pool, CUmemPool_attribute attr, void *value)) \
    X(cuDeviceGetMemPool, CUresult, (CUmemoryPool *pool, CUdevice dev)) \
    X(cuDeviceGetDefaultMemPool, CUresult, (CUmemoryPool *pool, CUdevice dev)) \
    X(cuDeviceSetMemPool, CUresult, (CUdevice dev, CUmemoryPool pool)) \
    /* graphs and their memory */ \
    X(cuGraphCreate, CUresult, (CUgraph *graph, unsigned int flags)) \
    X(cuGraphDestroy, CUresult, (CUgraph graph)) \
    X(cuGraphAddMemAllocNode, CUresult, (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps, \
                                         CUDA_MEM_ALLOC_NODE_PARAMS *params)) \
    X(cuGraphAddMemFreeNode, CUresult, (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps, \
                                        CUdeviceptr dptr)) \
    X(cuGraphAddChildGraphNode, CUresult, (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps, \
                                           CUgraph child)) \
    X(cuGraphGetNodes, CUresult, (CUgraph graph, CUgraphNode *nodes, size_t *count)) \
    X(cuGraphNodeGetType, CUresult, (CUgraphNode node, CUgraphNodeType *type)) \
    X(cuGraphMemAllocNodeGetParams, CUresult, (CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *params)) \
    X(cuGraphChildGraphNodeGetGraph, CUresult, (CUgraphNode node, CUgraph *child)) \
    X(cuGraphInstantiate, CUresult, (CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log, \
                                     size_t log_size)) \
    X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *exec, CUgraph graph, unsigned long long flags)) \
    X(cuGraphInstantiateWithParams, CUresult, (CUgraphExec *exec, CUgraph graph, \
                                               CUDA_GRAPH_INSTANTIATE_PARAMS *params)) \
    X(cuGraphUpload, CUresult, (CUgraphExec exec, CUstream stream)) \
    X(cuGraphLaunch, CUresult, (CUgraphExec exec, CUstream stream)) \
    X(cuGraphExecDestroy, CUresult, (CUgraphExec exec)) \
    X(cuDeviceGraphMemTrim, CUresult, (CUdevice dev)) \
    X(cuDeviceGetGraphMemAttribute, CUresult, (CUdevice dev, CUgraphMem_attribute attr, void *value)) \
    /* context limits that reserve device memory */ \
    X(cuCtxGetCurrent, CUresult, (CUcontext *ctx)) \
    X(cuCtxCreate_v2, CUresult, (CUcontext *ctx, unsigned int flags, CUdevice dev)) \
    X(cuCtxSetLimit, CUresult, (CUlimit limit, size_t value)) \
    X(cuCtxGetLimit, CUresult, (size_t *value, CUlimit limit)) \
    X(cuCtxDestroy_v2, CUresult, (CUcontext ctx)) \
    X(cuDevicePrimaryCtxReset_v2, CUresult, (CUdevice dev)) \
    X(cuDevicePrimaryCtxGetState, CUresult, (CUdevice dev, unsigned int *flags, int *active))

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
        { CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
        { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
        { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
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
_Static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24, "CUDA_ARRAY_DESCRIPTOR layout");
_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40, "CUDA_ARRAY3D_DESCRIPTOR layout");
_Static_assert(sizeof(CUarrayMapInfo) == 96, "CUarrayMapInfo layout");
_Static_assert(offsetof(CUarrayMapInfo, memHandle) == 64, "CUarrayMapInfo layout");
_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps layout");
_Static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120, "CUDA_MEM_ALLOC_NODE_PARAMS layout");
_Static_assert(offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize) == 104, "CUDA_MEM_ALLOC_NODE_PARAMS layout");
_Static_assert(sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == 32, "CUDA_GRAPH_INSTANTIATE_PARAMS layout");
_Static_assert(sizeof(CUmulticastObjectProp) == 32, "CUmulticastObjectProp layout");
_Static_assert(sizeof(CUprocessState) == 4, "CUprocessState layout");
_Static_assert(sizeof(CUcheckpointLockArgs) == 64, "CUcheckpointLockArgs layout");
_Static_assert(offsetof(CUcheckpointLockArgs, reserved1) == 8, "CUcheckpointLockArgs layout");
_Static_assert(sizeof(CUcheckpointCheckpointArgs) == 64, "CUcheckpointCheckpointArgs layout");
_Static_assert(sizeof(CUcheckpointGpuPair) == 32, "CUcheckpointGpuPair layout");
_Static_assert(offsetof(CUcheckpointGpuPair, newUuid) == 16, "CUcheckpointGpuPair layout");
_Static_assert(sizeof(CUcheckpointRestoreArgs) == 64, "CUcheckpointRestoreArgs layout");
_Static_assert(offsetof(CUcheckpointRestoreArgs, gpuPairsCount) == 8, "CUcheckpointRestoreArgs layout");
_Static_assert(offsetof(CUcheckpointRestoreArgs, reserved1) == 56, "CUcheckpointRestoreArgs layout");
_Static_assert(sizeof(CUcheckpointUnlockArgs) == 64, "CUcheckpointUnlockArgs layout");

#endif /* VRAM_CUDA_ABI_H */
