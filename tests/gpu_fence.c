/*
 * gpu_fence.c: the preload library's fence on the real driver (a GPU machine; not part of ctest: CI
 * has no GPU; tests/shim/app_cover.c checks the same entry points over the fake driver in CI).
 * Run by tests/gpu_fence.sh, under `vram run --limit ... --growth` and without it as the control.
 *
 *   gpu_fence SCENARIO [PIECES [HOLD_S]]
 *
 * takes device memory 256 MiB at a time through one way of taking it, up to PIECES times (default
 * 8), until the driver (or vram) refuses; keeps all of it for HOLD_S seconds (default 0), then gives
 * it back. Scenarios:
 *
 *   alloc        cuMemAlloc
 *   vmm_release  cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess, then cuMemRelease at once
 *                (the memory stays until the last unmap: ggml's VMM pool, NVIDIA's vectorAddMMAP)
 *   array        cuArrayCreate of 8192 x 8192 floats
 *   graph        a graph with one memory node (cuGraphAddMemAllocNode), instantiated and launched,
 *                its memory never freed in the graph (the driver keeps it until the exec goes)
 *   heap         cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE) raised 256 MiB at a time
 *
 * After every piece it reads what the card really holds from nvidia-smi (run without LD_PRELOAD, so
 * it sees the driver's figure, not vram's) and prints one JSON line at the end:
 *   {"scenario", "taken", "refused_by", "real_mib" (the card's used memory above the start, at the
 *    most taken), "limit_mib" (VRAM_LIMIT, else VRAM_GROUP_LIMIT, 0 without)}
 * Exit status 0 when the fence held: with VRAM_LIMIT, what was taken (and what the card shows above
 * the start, within 64 MiB for the driver's own rounding) is at most the limit, and the refusal was
 * CUDA_ERROR_OUT_OF_MEMORY; without it, every piece was taken (the control: the card could).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define PIECE (256 * MiB)
#define MAXP 64

static CUdevice dev;
static CUcontext ctx;
static CUstream stream;

static long smi_used_mib(void) {
    /* nvidia-smi without the preload library: the driver's own figure */
    FILE *p = popen("env -u LD_PRELOAD nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0",
                    "r");
    long v = -1;
    if (p) {
        if (fscanf(p, "%ld", &v) != 1) v = -1;
        pclose(p);
    }
    return v;
}

static const char *errname(CUresult r) {
    const char *s = NULL;
    if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "unknown";
    return s;
}

#define CK(call)                                                                 \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                \
            fprintf(stderr, "gpu_fence: %s: %s\n", #call, errname(r_));           \
            exit(2);                                                             \
        }                                                                        \
    } while (0)

/* what each piece keeps, to give it back at the end */
static CUdeviceptr ptrs[MAXP];
static CUmemGenericAllocationHandle handles[MAXP];
static CUarray arrays[MAXP];
static CUgraph graphs[MAXP];
static CUgraphExec execs[MAXP];

static CUresult take(const char *sc, int i) {
    if (!strcmp(sc, "alloc")) return cuMemAlloc(&ptrs[i], PIECE);
    if (!strcmp(sc, "vmm_release")) {
        CUmemAllocationProp prop = {0};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        CUresult r = cuMemCreate(&handles[i], PIECE, &prop, 0);
        if (r != CUDA_SUCCESS) return r;
        CK(cuMemAddressReserve(&ptrs[i], PIECE, 0, 0, 0));
        CK(cuMemMap(ptrs[i], PIECE, 0, handles[i], 0));
        CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CK(cuMemSetAccess(ptrs[i], PIECE, &acc, 1));
        CK(cuMemRelease(handles[i]));   /* the idiom: released at once, held until the unmap */
        CK(cuMemsetD8(ptrs[i], 0x5a, PIECE));
        return CUDA_SUCCESS;
    }
    if (!strcmp(sc, "array")) {
        CUDA_ARRAY_DESCRIPTOR d = {0};
        d.Width = 8192;
        d.Height = 8192;
        d.Format = CU_AD_FORMAT_FLOAT;
        d.NumChannels = 1;
        return cuArrayCreate(&arrays[i], &d);
    }
    if (!strcmp(sc, "graph")) {
        CK(cuGraphCreate(&graphs[i], 0));
        CUDA_MEM_ALLOC_NODE_PARAMS np;
        memset(&np, 0, sizeof np);
        np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        np.poolProps.location.id = dev;
        np.bytesize = PIECE;
        CUgraphNode node;
        CK(cuGraphAddMemAllocNode(&node, graphs[i], NULL, 0, &np));
        CUresult r = cuGraphInstantiate(&execs[i], graphs[i], 0);
        if (r != CUDA_SUCCESS) return r;
        r = cuGraphLaunch(execs[i], stream);
        if (r != CUDA_SUCCESS) return r;
        return cuStreamSynchronize(stream);
    }
    if (!strcmp(sc, "heap")) return cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)(i + 1) * PIECE);
    fprintf(stderr, "gpu_fence: unknown scenario %s\n", sc);
    exit(2);
}

static void give_back(const char *sc, int n) {
    for (int i = 0; i < n; i++) {
        if (!strcmp(sc, "alloc")) CK(cuMemFree(ptrs[i]));
        if (!strcmp(sc, "vmm_release")) {
            CK(cuMemUnmap(ptrs[i], PIECE));
            CK(cuMemAddressFree(ptrs[i], PIECE));
        }
        if (!strcmp(sc, "array")) CK(cuArrayDestroy(arrays[i]));
        if (!strcmp(sc, "graph")) {
            CK(cuGraphExecDestroy(execs[i]));
            CK(cuGraphDestroy(graphs[i]));
        }
    }
    if (!strcmp(sc, "heap")) CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB));
    if (!strcmp(sc, "graph")) CK(cuDeviceGraphMemTrim(dev));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_fence alloc|vmm_release|array|graph|heap [PIECES [HOLD_S]]\n");
        return 2;
    }
    const char *sc = argv[1];
    int pieces = argc > 2 ? atoi(argv[2]) : 8, hold = argc > 3 ? atoi(argv[3]) : 0;
    if (pieces < 1 || pieces > MAXP) pieces = 8;
    const char *lim = getenv("VRAM_LIMIT");
    if (!lim) lim = getenv("VRAM_GROUP_LIMIT");
    unsigned long long limit = lim ? strtoull(lim, NULL, 10) : 0;

    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuCtxSynchronize());
    long base = smi_used_mib(), real = 0;
    int n = 0;
    CUresult refused = CUDA_SUCCESS;
    for (; n < pieces; n++) {
        CUresult r = take(sc, n);
        if (r != CUDA_SUCCESS) {
            refused = r;
            break;
        }
        CK(cuCtxSynchronize());
        long u = smi_used_mib() - base;
        if (u > real) real = u;
    }
    if (hold > 0) sleep((unsigned)hold);
    give_back(sc, n);
    CK(cuCtxSynchronize());
    long after = smi_used_mib() - base;
    printf("{\"scenario\": \"%s\", \"taken\": %d, \"taken_mib\": %llu, \"refused_by\": \"%s\", \"real_mib\": %ld, "
           "\"after_mib\": %ld, \"limit_mib\": %llu}\n",
           sc, n, (unsigned long long)n * (PIECE / MiB), refused == CUDA_SUCCESS ? "" : errname(refused), real, after,
           limit / MiB);
    int ok;
    if (limit)
        ok = (unsigned long long)n * PIECE <= limit && (unsigned long long)real * MiB <= limit + 64 * MiB &&
             (n == pieces || refused == CUDA_ERROR_OUT_OF_MEMORY);
    else
        ok = n == pieces;
    if (!ok) printf("gpu_fence %s: FAIL\n", sc);
    return ok ? 0 : 1;
}
