/*
 * app_linked.c: a test program linked against libcuda.so.1 at build time (the fake driver), so its
 * driver calls bind to the exported symbols, which LD_PRELOAD interposes on. It also asks a library
 * it links (next_lib.c) whether dlsym(RTLD_NEXT, ...) still means "after the caller" with the
 * preload library's dlsym in between. Prints chunks=N bytes=B err=E, total=, rtld_next=ok|wrong.
 */
#include <stdio.h>

#include "cuda_driver.h"

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
cuda_fn_cuMemAlloc_v2 cuMemAlloc_v2;
cuda_fn_cuMemFree_v2 cuMemFree_v2;
cuda_fn_cuMemGetInfo_v2 cuMemGetInfo_v2;
int next_lib_rtld_next_ok(void);

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fputs("app_linked: no device\n", stderr);
        return 3;
    }
    CUdeviceptr p[100];
    int n = 0;
    CUresult err = CUDA_SUCCESS;
    while (n < 100 && (err = cuMemAlloc_v2(&p[n], 256u << 20)) == CUDA_SUCCESS) n++;
    printf("chunks=%d bytes=%zu err=%d\n", n, (size_t)n << 28, (int)err);
    for (int i = 0; i < n; i++) cuMemFree_v2(p[i]);
    size_t f = 0, t = 0;
    cuMemGetInfo_v2(&f, &t);
    printf("total=%zu free=%zu\n", t, f);
    printf("rtld_next=%s\n", next_lib_rtld_next_ok() ? "ok" : "wrong");
    return 0;
}
