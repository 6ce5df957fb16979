/*
 * app_nvml_linked.c: a test program linked against libcuda.so.1 and libnvidia-ml.so.1 at build time
 * (the fakes), so its NVML calls bind to the exported symbols, which LD_PRELOAD interposes on. It
 * takes 256 MiB with cuMemAlloc on device 0, then prints for every NVML device
 * "nvml i total= free= used=" (nvmlDeviceGetMemoryInfo) and "nvml_v2 i total= reserved= free= used=".
 */
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"
#include "nvml_types.h"

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
cuda_fn_cuMemAlloc_v2 cuMemAlloc_v2;
cuda_fn_cuMemFree_v2 cuMemFree_v2;
cuda_fn_cuMemGetInfo_v2 cuMemGetInfo_v2;
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fputs("app_nvml_linked: no device\n", stderr);
        return 3;
    }
    CUdeviceptr p = 0;
    printf("nvml_alloc=%d\n", (int)cuMemAlloc_v2(&p, 256u << 20));
    unsigned int n = 0;
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS) {
        fputs("app_nvml_linked: NVML failed\n", stderr);
        return 3;
    }
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t h;
        nvmlMemory_t m;
        nvmlMemory_v2_t m2;
        memset(&m2, 0, sizeof m2);
        m2.version = nvmlMemory_v2;
        if (nvmlDeviceGetHandleByIndex_v2(i, &h) != NVML_SUCCESS || nvmlDeviceGetMemoryInfo(h, &m) != NVML_SUCCESS ||
            nvmlDeviceGetMemoryInfo_v2(h, &m2) != NVML_SUCCESS) {
            fputs("app_nvml_linked: NVML memory query failed\n", stderr);
            return 3;
        }
        printf("nvml %u total=%llu free=%llu used=%llu\n", i, m.total, m.free, m.used);
        printf("nvml_v2 %u total=%llu reserved=%llu free=%llu used=%llu\n", i, m2.total, m2.reserved, m2.free, m2.used);
    }
    return 0;
}
