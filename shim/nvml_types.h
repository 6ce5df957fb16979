/*
 * nvml_types.h: the part of NVML (nvml.h) that the preload library interposes on, written out by
 * hand like cuda_driver.h. Layouts are NVML's ABI (64-bit hosts). Shared by shim/nvml.c,
 * tests/shim/fake_nvml.c (a libnvidia-ml.so.1 double) and the test programs.
 */
#ifndef VRAM_SHIM_NVML_TYPES_H
#define VRAM_SHIM_NVML_TYPES_H

#ifndef SHIM_EXPORT
#define SHIM_EXPORT __attribute__((visibility("default")))
#endif

typedef int nvmlReturn_t;   /* an enum in nvml.h */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_MIG_ENABLE 1

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;   /* nvmlMemory_v2 */
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");

/* the interposed functions (exported by libvram_preload.so and by the fake NVML) */
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

typedef nvmlReturn_t (*pfn_nvmlInit_v2)(void);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetCount_v2)(unsigned int *count);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetHandleByIndex_v2)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetUUID)(nvmlDevice_t device, char *uuid, unsigned int length);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetIndex)(nvmlDevice_t device, unsigned int *index);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetName)(nvmlDevice_t device, char *name, unsigned int length);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetMigMode)(nvmlDevice_t device, unsigned int *current_mode,
                                                 unsigned int *pending_mode);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetMemoryInfo)(nvmlDevice_t device, nvmlMemory_t *memory);
typedef nvmlReturn_t (*pfn_nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t device, nvmlMemory_v2_t *memory);

#endif /* VRAM_SHIM_NVML_TYPES_H */
