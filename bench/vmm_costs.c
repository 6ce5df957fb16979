/*
 * bench/vmm_costs.c: what the CUDA driver's virtual memory calls cost, by size, on this machine.
 *
 *   cc -O2 -I/usr/local/cuda/include bench/vmm_costs.c -ldl -o build-bench/vmm_costs
 *   build-bench/vmm_costs [ROUNDS]
 *
 * For each size (2 MiB to 2 GiB): cuMemCreate, cuMemMap + cuMemSetAccess at a reserved address,
 * cuMemUnmap, the same handle mapped again at another address (a move: cuMemMap + cuMemSetAccess,
 * no new physical memory), and cuMemUnmap + cuMemRelease; the median of ROUNDS (default 7) in
 * microseconds, one line of JSON per size (map_us and access_us split map_and_access_us).
 * Then eight 2 MiB handles mapped side by side: what the eight maps cost, cuMemSetAccess once over all
 * eight against once per piece, and cuMemUnmap once over all eight (whether the driver takes a range
 * of several mappings) against once per piece; and whether cuMemMap takes a piece of a handle at an
 * offset. The driver is loaded with dlopen, as libvram does.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CALL(fn, ...)                                                                     \
    do {                                                                                  \
        CUresult r_ = fn(__VA_ARGS__);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                         \
            fprintf(stderr, "vmm_costs: %s failed: %d (line %d)\n", #fn, (int)r_, __LINE__); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

#define SYM(name) name##_fn = (__typeof__(&name))dlsym(lib, #name "_v2") ? (__typeof__(&name))dlsym(lib, #name "_v2") : (__typeof__(&name))dlsym(lib, #name)
static __typeof__(&cuInit) cuInit_fn;
static __typeof__(&cuDeviceGet) cuDeviceGet_fn;
static __typeof__(&cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain_fn;
static __typeof__(&cuCtxSetCurrent) cuCtxSetCurrent_fn;
static __typeof__(&cuMemAddressReserve) cuMemAddressReserve_fn;
static __typeof__(&cuMemCreate) cuMemCreate_fn;
static __typeof__(&cuMemMap) cuMemMap_fn;
static __typeof__(&cuMemSetAccess) cuMemSetAccess_fn;
static __typeof__(&cuMemUnmap) cuMemUnmap_fn;
static __typeof__(&cuMemRelease) cuMemRelease_fn;

/* Pieces of one handle mapped at its offsets (cuMemMap's offset argument): 0 when the driver takes it,
 * else its error (a line of JSON either way). */
static int offset_maps(CUdeviceptr va, const CUmemAllocationProp *prop) {
    size_t piece = (size_t)2 << 20;
    CUmemGenericAllocationHandle h;
    CALL(cuMemCreate_fn, &h, 2 * piece, prop, 0);
    CUresult e = cuMemMap_fn(va + piece, piece, piece, h, 0);
    if (e == CUDA_SUCCESS) CALL(cuMemUnmap_fn, va + piece, piece);
    CALL(cuMemRelease_fn, h);
    printf("{\"offset_maps\": \"%s\", \"result\": %d}\n", e == CUDA_SUCCESS ? "taken" : "refused", (int)e);
    return 0;
}

/* Eight handles of 2 MiB mapped side by side: access set once over all eight against once each, and
 * one cuMemUnmap over all eight against one each (0 in "unmap_once_taken" when the driver refuses a
 * range of several mappings; each is then unmapped on its own). */
static int pieces(CUdeviceptr va, const CUmemAllocationProp *prop, const CUmemAccessDesc *access, int rounds) {
    enum { N = 8 };
    size_t piece = (size_t)2 << 20;
    double maps[100], once[100], each[100], unmap_once[100], unmap_each[100];
    int unmap_taken = 1;
    for (int r = 0; r < rounds; r++) {
        CUmemGenericAllocationHandle h[N];
        for (int k = 0; k < N; k++) CALL(cuMemCreate_fn, &h[k], piece, prop, 0);
        double t0 = now_us();
        for (int k = 0; k < N; k++) CALL(cuMemMap_fn, va + (size_t)k * piece, piece, 0, h[k], 0);
        double t1 = now_us();
        CALL(cuMemSetAccess_fn, va, N * piece, access, 1);
        double t2 = now_us();
        CUresult e = cuMemUnmap_fn(va, N * piece);
        double t3 = now_us();
        if (e != CUDA_SUCCESS) {
            unmap_taken = 0;
            for (int k = 0; k < N; k++) CALL(cuMemUnmap_fn, va + (size_t)k * piece, piece);
        }
        for (int k = 0; k < N; k++) CALL(cuMemMap_fn, va + (size_t)k * piece, piece, 0, h[k], 0);
        double t4 = now_us();
        for (int k = 0; k < N; k++) CALL(cuMemSetAccess_fn, va + (size_t)k * piece, piece, access, 1);
        double t5 = now_us();
        for (int k = 0; k < N; k++) CALL(cuMemUnmap_fn, va + (size_t)k * piece, piece);
        double t6 = now_us();
        for (int k = 0; k < N; k++) CALL(cuMemRelease_fn, h[k]);
        maps[r] = t1 - t0, once[r] = t2 - t1, unmap_once[r] = t3 - t2, each[r] = t5 - t4, unmap_each[r] = t6 - t5;
    }
    printf("{\"pieces\": %d, \"piece_bytes\": %zu, \"map_pieces_us\": %.1f, \"access_once_us\": %.1f, "
           "\"access_each_us\": %.1f, \"unmap_once_taken\": %d, \"unmap_once_us\": %.1f, \"unmap_each_us\": %.1f, "
           "\"rounds\": %d}\n", N, piece, median(maps, rounds), median(once, rounds), median(each, rounds),
           unmap_taken, median(unmap_once, rounds), median(unmap_each, rounds), rounds);
    return offset_maps(va, prop);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 100) rounds = 7;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "vmm_costs: %s\n", dlerror());
        return 1;
    }
    SYM(cuInit); SYM(cuDeviceGet); SYM(cuDevicePrimaryCtxRetain); SYM(cuCtxSetCurrent);
    SYM(cuMemAddressReserve); SYM(cuMemCreate); SYM(cuMemMap); SYM(cuMemSetAccess); SYM(cuMemUnmap);
    SYM(cuMemRelease);
    CUdevice dev;
    CUcontext ctx;
    CALL(cuInit_fn, 0);
    CALL(cuDeviceGet_fn, &dev, 0);
    CALL(cuDevicePrimaryCtxRetain_fn, &ctx, dev);
    CALL(cuCtxSetCurrent_fn, ctx);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    size_t sizes[] = {(size_t)2 << 20, (size_t)64 << 20, (size_t)512 << 20, (size_t)2 << 30};
    CUdeviceptr va;
    size_t span = (size_t)8 << 30;
    CALL(cuMemAddressReserve_fn, &va, 2 * span, 0, 0, 0);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t size = sizes[i];
        double create[100], map[100], map_only[100], access_only[100], unmap[100], move[100], release[100];
        for (int r = 0; r < rounds; r++) {
            CUmemGenericAllocationHandle h;
            double t0 = now_us();
            CALL(cuMemCreate_fn, &h, size, &prop, 0);
            double t1 = now_us();
            CALL(cuMemMap_fn, va, size, 0, h, 0);
            double t1a = now_us();
            CALL(cuMemSetAccess_fn, va, size, &access, 1);
            double t2 = now_us();
            map_only[r] = t1a - t1, access_only[r] = t2 - t1a;
            CALL(cuMemUnmap_fn, va, size);
            double t3 = now_us();
            CALL(cuMemMap_fn, va + span, size, 0, h, 0);
            CALL(cuMemSetAccess_fn, va + span, size, &access, 1);
            double t4 = now_us();
            CALL(cuMemUnmap_fn, va + span, size);
            CALL(cuMemRelease_fn, h);
            double t5 = now_us();
            create[r] = t1 - t0, map[r] = t2 - t1, unmap[r] = t3 - t2, move[r] = t4 - t3, release[r] = t5 - t4;
        }
        printf("{\"bytes\": %zu, \"create_us\": %.1f, \"map_and_access_us\": %.1f, \"map_us\": %.1f, "
               "\"access_us\": %.1f, \"unmap_us\": %.1f, \"map_again_us\": %.1f, \"unmap_and_release_us\": %.1f, "
               "\"rounds\": %d}\n",
               size, median(create, rounds), median(map, rounds), median(map_only, rounds),
               median(access_only, rounds), median(unmap, rounds), median(move, rounds), median(release, rounds),
               rounds);
    }
    return pieces(va, &prop, &access, rounds);
}
