/*
 * gpu_common.h: what the real-GPU tests (gpu_test.c, gpu_multi_test.c) share: the few driver
 * calls they check vram against (loaded with dlopen, as vram does), their CHECK macros, and
 * small helpers. Each test includes it once.
 */
#ifndef VRAM_TESTS_GPU_COMMON_H
#define VRAM_TESTS_GPU_COMMON_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "vram.h"

#define SKIP 77
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define GPU_MAX_CARDS 8

static struct {
    int (*cuInit)(unsigned);
    int (*cuDeviceGet)(int *, int);
    int (*cuDevicePrimaryCtxRetain)(void **, int);
    int (*cuCtxSetCurrent)(void *);
    int (*cuMemsetD8)(unsigned long long, unsigned char, size_t);
    int (*cuMemcpyDtoH)(void *, unsigned long long, size_t);
    int (*cuPointerGetAttribute)(void *, int, unsigned long long);
    int (*cuMemGetInfo)(size_t *, size_t *);
    int (*cuStreamCreate)(void **, unsigned);
    int (*cuCtxSynchronize)(void);
} cu;
static void *gpu_ctx[GPU_MAX_CARDS];
static int failures;

#define CHECK(cond)                                                                                 \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "FAIL %s:%d: %s\n  last error: %s\n", __FILE__, __LINE__, #cond,        \
                    vram_last_error());                                                             \
            failures++;                                                                             \
        }                                                                                           \
    } while (0)
#define CHECK_OK(call) CHECK((call) == VRAM_OK)

/* Loads the driver and retains the primary context of cards 0..ncards-1 (card 0's current). */
static int gpu_load_driver(int ncards) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL || ncards > GPU_MAX_CARDS) return -1;
#define GPU_LOAD(field, sym) *(void **)&cu.field = dlsym(lib, sym)
    GPU_LOAD(cuInit, "cuInit");
    GPU_LOAD(cuDeviceGet, "cuDeviceGet");
    GPU_LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    GPU_LOAD(cuCtxSetCurrent, "cuCtxSetCurrent");
    GPU_LOAD(cuMemsetD8, "cuMemsetD8_v2");
    GPU_LOAD(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    GPU_LOAD(cuPointerGetAttribute, "cuPointerGetAttribute");
    GPU_LOAD(cuMemGetInfo, "cuMemGetInfo_v2");
    GPU_LOAD(cuStreamCreate, "cuStreamCreate");
    GPU_LOAD(cuCtxSynchronize, "cuCtxSynchronize");
#undef GPU_LOAD
    if (cu.cuInit(0) != 0) return -1;
    for (int d = 0; d < ncards; d++) {
        int dev = 0;
        if (cu.cuDeviceGet(&dev, d) != 0 || cu.cuDevicePrimaryCtxRetain(&gpu_ctx[d], dev) != 0) return -1;
    }
    return cu.cuCtxSetCurrent(gpu_ctx[0]) == 0 ? 0 : -1;
}

/* Free memory of card d, as its driver context sees it (card d's context becomes current). */
static size_t gpu_card_free(int d) {
    size_t free_bytes = 0, total = 0;
    cu.cuCtxSetCurrent(gpu_ctx[d]);
    cu.cuMemGetInfo(&free_bytes, &total);
    return free_bytes;
}

static size_t reserved_of(int logical) {
    vram_memory_info info;
    memset(&info, 0, sizeof info);
    vram_get_memory_info(logical, &info);
    return info.reserved;
}

static int near(size_t a, size_t b, size_t tolerance) {
    return (a > b ? a - b : b - a) <= tolerance;
}

#endif /* VRAM_TESTS_GPU_COMMON_H */
