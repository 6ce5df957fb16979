/*
 * app_cover.c: the preload library's coverage test program. For every entry point of shim.h's
 * coverage table (SHIM_HOOKS) of role TAKES, HOLDS or GIVES it has a scenario cover_<symbol>: this
 * file does not build when one is missing, so no entry point can be interposed without its test.
 * Each scenario takes device memory through its entry point (or keeps it held, or gives it back
 * through it) over the fake driver (tests/shim/fake_cuda.c), and checks, after every step:
 *
 *   - the fence: the memory the driver really holds (the fake's fake_cuda_held) never passes the
 *     limit (with preallocation, VRAM_GROWTH=0: the balloon and the program together);
 *   - the count: what the program sees free (cuMemGetInfo) is the limit minus what it holds;
 *   - the refusal: taking past the limit fails with CUDA_ERROR_OUT_OF_MEMORY, at the expected step;
 *   - the way back: once given back, the memory is free again (for the driver and for vram).
 *
 * Without the preload library (cuMemGetInfo reports the fake's 16 GiB card) the same scenarios run
 * as a control: the driver serves them up to the card, so a refusal under the limit is vram's.
 *
 *   app_cover list        the entry points with a scenario: "SYMBOL ROLE", one a line
 *   app_cover hooks       every entry of SHIM_HOOKS: "SYMBOL ROLE"
 *   app_cover uncovered   shim.h's SHIM_UNCOVERED: "SYMBOL", one a line
 *   app_cover activity ROUTE  every entry of role ACTIVITY, found by ROUTE, reaches the driver's
 *                         function of its own name and is counted (run_activity)
 *   app_cover ROUTE SYMBOL   runs cover_<SYMBOL>, the entry point found by ROUTE: dlsym (the exported
 *                         symbol) or proc (cuGetProcAddress_v2 with the table's base name, version and
 *                         per-thread-stream flag); prints what it saw and "cover SYMBOL ok", or
 *                         "cover SYMBOL FAIL: why" and exits 1
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"   /* fake_cuda_fail_next */
#include "shim.h"        /* the coverage table; nothing of the shim is linked */

#define MiB (1ull << 20)
#define CHUNK (256 * MiB)
#define CARD (16ull << 30)   /* the fake's cards */
#define MAX_TAKES 80

typedef struct cover_ctx {
    const char *symbol;
    void *fn;               /* the entry point under test, found by the route */
    size_t limit;           /* the limit in force (cuMemGetInfo's total below the card), 0 none */
    int prealloc;           /* VRAM_GROWTH=0: a balloon fills the limit */
    int dev;
} cover_ctx;

/* ---- the driver, through dlsym (the preload library's versions where it interposes) ------------ */

static void *lib;
static size_t (*fake_held)(int dev);
static int failed;

static void fail(const cover_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("cover %s FAIL: ", c->symbol);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failed = 1;
}

static void *need(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "app_cover: dlsym found no %s\n", name);
        exit(3);
    }
    return p;
}

#define D(sym) ((pfn_##sym)need(#sym))

/* What the program sees free on c->dev (the current device). */
static size_t view_free(void) {
    size_t f = 0, t = 0;
    if (D(cuMemGetInfo_v2)(&f, &t) != CUDA_SUCCESS) return (size_t)-1;
    return f;
}

static CUmemAllocationProp device_prop(int dev) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

/* ---- the checks ------------------------------------------------------------------------------------ */

/* The fence: the driver holds at most the limit (plus what was held before the scenario). */
static int fence(const cover_ctx *c, size_t base, const char *when) {
    size_t held = fake_held(c->dev);
    if (c->limit && held > c->limit + base) {
        fail(c, "%s: the driver holds %zu bytes, past the limit of %zu", when, held, c->limit);
        return -1;
    }
    return 0;
}

/* The count: what the program sees free is the limit minus `holding` (no check without a limit). */
static int counted(const cover_ctx *c, size_t holding, const char *when) {
    if (!c->limit) return 0;
    size_t want = holding >= c->limit ? 0 : c->limit - holding, got = view_free();
    if (got != want) {
        fail(c, "%s: cuMemGetInfo free %zu, expected the limit minus %zu held = %zu", when, got, holding, want);
        return -1;
    }
    return 0;
}

/* Back to where it started: the driver holds what it held before (the balloon aside) and the
 * program sees the whole limit free. */
static int back(const cover_ctx *c, size_t base, const char *when) {
    if (!c->prealloc && fake_held(c->dev) != base) {
        fail(c, "%s: the driver still holds %zu bytes (held %zu before)", when, fake_held(c->dev), base);
        return -1;
    }
    return counted(c, 0, when);
}

/* ---- the generic scenario: take chunks until refused, then give them back ------------------------ */

typedef struct cover_obj {
    unsigned long long a, b, c, d;
} cover_obj;

typedef CUresult (*take_fn)(const cover_ctx *c, size_t bytes, cover_obj *o, int i);
typedef CUresult (*give_fn)(const cover_ctx *c, cover_obj *o, int i);

/* Takes `bytes` (a take really holds `holds` bytes) until refused: under a limit the refusal comes
 * at limit / holds (CUDA_ERROR_OUT_OF_MEMORY), without one at the card. Gives back in reverse. */
static void fill(const cover_ctx *c, take_fn take, give_fn give, size_t bytes, size_t holds) {
    static cover_obj objs[MAX_TAKES];
    size_t base = c->prealloc ? 0 : fake_held(c->dev);
    size_t room = c->limit ? c->limit : CARD - base;
    int expect = (int)(room / holds), n = 0;
    if (expect > MAX_TAKES - 1) expect = MAX_TAKES - 1;
    CUresult r = CUDA_SUCCESS;
    while (n < MAX_TAKES && (r = take(c, bytes, &objs[n], n)) == CUDA_SUCCESS) {
        n++;
        if (fence(c, base, "after a take") || counted(c, (size_t)n * holds, "after a take")) break;
    }
    printf("takes=%d err=%d expected=%d\n", n, (int)r, expect);
    if (!failed && (n != expect || (n < MAX_TAKES && r != CUDA_ERROR_OUT_OF_MEMORY)))
        fail(c, "%d takes of %zu bytes then error %d; expected %d, then CUDA_ERROR_OUT_OF_MEMORY (2)", n, holds,
             (int)r, expect);
    (void)fence(c, base, "after the refusal");
    for (int i = n - 1; i >= 0; i--) {
        CUresult gr = give(c, &objs[i], i);
        if (gr != CUDA_SUCCESS) {
            fail(c, "giving back take %d: error %d", i, (int)gr);
            return;
        }
        if (!failed) (void)counted(c, (size_t)i * holds, "after a give");
    }
    if (!failed) (void)back(c, base, "after giving everything back");
}

/* ---- plain allocations ----------------------------------------------------------------------------- */

static CUresult take_alloc(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr p = 0;
    CUresult r = (c->fn && !strcmp(c->symbol, "cuMemAlloc_v2") ? (pfn_cuMemAlloc_v2)c->fn : D(cuMemAlloc_v2))(&p, bytes);
    o->a = p;
    return r;
}

static CUresult give_free(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    return (!strcmp(c->symbol, "cuMemFree_v2") ? (pfn_cuMemFree_v2)c->fn : D(cuMemFree_v2))(o->a);
}

static CUresult take_alloc_v1(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr_v1 p = 0;
    CUresult r = (!strcmp(c->symbol, "cuMemAlloc") ? (pfn_cuMemAlloc)c->fn : D(cuMemAlloc))(&p, (unsigned int)bytes);
    o->a = p;
    return r;
}

static CUresult give_free_v1(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    return (!strcmp(c->symbol, "cuMemFree") ? (pfn_cuMemFree)c->fn : D(cuMemFree))((CUdeviceptr_v1)o->a);
}

static CUresult take_pitch(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr p = 0;
    size_t pitch = 0;   /* rows of 1 MiB: the pitch is the width */
    CUresult r = ((pfn_cuMemAllocPitch_v2)c->fn)(&p, &pitch, MiB, bytes / MiB, 4);
    o->a = p;
    return r;
}

static CUresult take_pitch_v1(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr_v1 p = 0;
    unsigned int pitch = 0;
    CUresult r = ((pfn_cuMemAllocPitch)c->fn)(&p, &pitch, (unsigned int)MiB, (unsigned int)(bytes / MiB), 4);
    o->a = p;
    return r;
}

static CUresult take_managed(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr p = 0;
    CUresult r = ((pfn_cuMemAllocManaged)c->fn)(&p, bytes, 1);
    o->a = p;
    return r;
}

static void cover_cuMemAlloc_v2(const cover_ctx *c) { fill(c, take_alloc, give_free, CHUNK, CHUNK); }
static void cover_cuMemFree_v2(const cover_ctx *c) { fill(c, take_alloc, give_free, CHUNK, CHUNK); }
static void cover_cuMemAlloc(const cover_ctx *c) { fill(c, take_alloc_v1, give_free_v1, CHUNK, CHUNK); }
static void cover_cuMemFree(const cover_ctx *c) { fill(c, take_alloc_v1, give_free_v1, CHUNK, CHUNK); }
static void cover_cuMemAllocPitch_v2(const cover_ctx *c) { fill(c, take_pitch, give_free, CHUNK, CHUNK); }
static void cover_cuMemAllocPitch(const cover_ctx *c) { fill(c, take_pitch_v1, give_free_v1, CHUNK, CHUNK); }
static void cover_cuMemAllocManaged(const cover_ctx *c) { fill(c, take_managed, give_free, CHUNK, CHUNK); }

/* ---- VMM: a handle, and what keeps its memory after its release ----------------------------------- */

static CUresult vmm_create(const cover_ctx *c, size_t bytes, CUmemGenericAllocationHandle *h) {
    CUmemAllocationProp prop = device_prop(c->dev);
    return (!strcmp(c->symbol, "cuMemCreate") ? (pfn_cuMemCreate)c->fn : D(cuMemCreate))(h, bytes, &prop, 0);
}

static CUresult vmm_release(const cover_ctx *c, CUmemGenericAllocationHandle h) {
    return (!strcmp(c->symbol, "cuMemRelease") ? (pfn_cuMemRelease)c->fn : D(cuMemRelease))(h);
}

static CUresult vmm_unmap(const cover_ctx *c, CUdeviceptr p, size_t bytes) {
    return (!strcmp(c->symbol, "cuMemUnmap") ? (pfn_cuMemUnmap)c->fn : D(cuMemUnmap))(p, bytes);
}

static void unmap_two(const cover_ctx *c);

static CUresult take_create(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = vmm_create(c, bytes, &h);
    o->a = h;
    return r;
}

static CUresult give_release(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    return vmm_release(c, o->a);
}

/* Maps a new handle's memory at a new address range (o->b, o->c = the range). */
static CUresult vmm_map_new(const cover_ctx *c, size_t bytes, cover_obj *o, CUmemGenericAllocationHandle *h) {
    CUresult r = vmm_create(c, bytes, h);
    if (r != CUDA_SUCCESS) return r;
    CUdeviceptr va = 0;
    if ((r = D(cuMemAddressReserve)(&va, bytes, 0, 0, 0)) != CUDA_SUCCESS) return r;
    pfn_cuMemMap map = !strcmp(c->symbol, "cuMemMap") ? (pfn_cuMemMap)c->fn : D(cuMemMap);
    if ((r = map(va, bytes, 0, *h, 0)) != CUDA_SUCCESS) return r;
    CUmemAccessDesc access = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, c->dev }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    if ((r = D(cuMemSetAccess)(va, bytes, &access, 1)) != CUDA_SUCCESS) return r;
    o->b = va;
    o->c = bytes;
    return CUDA_SUCCESS;
}

/* The release idiom (llama.cpp's VMM pool, NVIDIA's vectorAddMMAP): create, map, release at once;
 * the mapping holds the memory until it is unmapped. */
static CUresult take_map_released(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = vmm_map_new(c, bytes, o, &h);
    if (r != CUDA_SUCCESS) return r;
    return vmm_release(c, h);
}

static CUresult give_unmap(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    CUresult r = vmm_unmap(c, o->b, o->c);
    return r != CUDA_SUCCESS ? r : D(cuMemAddressFree)(o->b, o->c);
}

/* A retained handle outlives the create's handle and the mapping. */
static CUresult take_retained(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUmemGenericAllocationHandle h = 0, h2 = 0;
    CUresult r = vmm_map_new(c, bytes, o, &h);
    if (r != CUDA_SUCCESS) return r;
    if ((r = ((pfn_cuMemRetainAllocationHandle)c->fn)(&h2, (void *)(uintptr_t)(o->b + MiB))) != CUDA_SUCCESS) return r;
    if (h2 != h) return CUDA_ERROR_UNKNOWN;   /* the driver returns the same value */
    if ((r = vmm_release(c, h)) != CUDA_SUCCESS || (r = vmm_unmap(c, o->b, o->c)) != CUDA_SUCCESS ||
        (r = D(cuMemAddressFree)(o->b, o->c)) != CUDA_SUCCESS)
        return r;
    o->a = h2;
    return CUDA_SUCCESS;
}

static void cover_cuMemCreate(const cover_ctx *c) { fill(c, take_create, give_release, CHUNK, CHUNK); }
static void cover_cuMemRelease(const cover_ctx *c) { fill(c, take_create, give_release, CHUNK, CHUNK); }
static void cover_cuMemMap(const cover_ctx *c) { fill(c, take_map_released, give_unmap, CHUNK, CHUNK); }
static void cover_cuMemUnmap(const cover_ctx *c) {
    fill(c, take_map_released, give_unmap, CHUNK, CHUNK);
    if (!failed) unmap_two(c);
}
static void cover_cuMemRetainAllocationHandle(const cover_ctx *c) { fill(c, take_retained, give_release, CHUNK, CHUNK); }

/* Unmapping two adjacent mappings with one call frees both once their handles are released. */
static void unmap_two(const cover_ctx *c) {
    size_t base = fake_held(c->dev);
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h[2];
    if (D(cuMemAddressReserve)(&va, 2 * CHUNK, 0, 0, 0) != CUDA_SUCCESS) { fail(c, "cuMemAddressReserve"); return; }
    for (int k = 0; k < 2; k++) {
        if (vmm_create(c, CHUNK, &h[k]) != CUDA_SUCCESS || D(cuMemMap)(va + k * CHUNK, CHUNK, 0, h[k], 0) != CUDA_SUCCESS ||
            vmm_release(c, h[k]) != CUDA_SUCCESS) {
            fail(c, "create, map and release of two adjacent pieces");
            return;
        }
    }
    if (counted(c, 2 * CHUNK, "two released pieces still mapped")) return;
    if (vmm_unmap(c, va, 2 * CHUNK) != CUDA_SUCCESS) { fail(c, "one cuMemUnmap of both"); return; }
    (void)D(cuMemAddressFree)(va, 2 * CHUNK);
    (void)back(c, c->prealloc ? 0 : base, "after one unmap of two mappings");
}

/* ---- sparse arrays and multicast objects -------------------------------------------------------------- */

static CUresult sparse_array(CUarray *a) {
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 16384, .Height = 16384, .Depth = 0, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 1, .Flags = CUDA_ARRAY3D_SPARSE };
    return D(cuArray3DCreate_v2)(a, &d);
}

/* A tile of a sparse array holds its memory after the handle's release, until the array goes. */
static CUresult take_tile(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUarray a = NULL;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = sparse_array(&a);
    if (r != CUDA_SUCCESS) return r;
    o->a = (unsigned long long)(uintptr_t)a;
    if ((r = vmm_create(c, bytes, &h)) != CUDA_SUCCESS) {
        (void)D(cuArrayDestroy)(a);
        return r;
    }
    CUarrayMapInfo m;
    memset(&m, 0, sizeof m);
    m.resourceType = CU_RESOURCE_TYPE_ARRAY;
    m.resource.array = a;
    m.subresource.sparseLevel.extentWidth = 16384;
    m.subresource.sparseLevel.extentHeight = (unsigned int)(bytes / (16384 * 4));
    m.subresource.sparseLevel.extentDepth = 1;
    m.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
    m.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    m.memHandle.memHandle = h;
    m.deviceBitMask = 1u << c->dev;
    if ((r = ((pfn_cuMemMapArrayAsync)c->fn)(&m, 1, NULL)) != CUDA_SUCCESS) return r;
    return vmm_release(c, h);
}

static CUresult give_array(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    return (!strcmp(c->symbol, "cuArrayDestroy") ? (pfn_cuArrayDestroy)c->fn : D(cuArrayDestroy))((CUarray)(uintptr_t)o->a);
}

static void cover_cuMemMapArrayAsync(const cover_ctx *c) { fill(c, take_tile, give_array, CHUNK, CHUNK); }
static void cover_cuMemMapArrayAsync_ptsz(const cover_ctx *c) { fill(c, take_tile, give_array, CHUNK, CHUNK); }

static CUresult mc_create(const cover_ctx *c, CUmemGenericAllocationHandle *mc) {
    CUmulticastObjectProp p = { .numDevices = 1, .size = 4 * CHUNK };
    return (!strcmp(c->symbol, "cuMulticastCreate") ? (pfn_cuMulticastCreate)c->fn : D(cuMulticastCreate))(mc, &p);
}

/* A multicast binding holds its memory after the handle's release. o->a the multicast object. */
static CUresult take_bound(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUmemGenericAllocationHandle mc = 0, h = 0;
    CUresult r = mc_create(c, &mc);
    if (r != CUDA_SUCCESS) return r;
    o->a = mc;
    if ((r = vmm_create(c, bytes, &h)) != CUDA_SUCCESS) {
        (void)D(cuMemRelease)(mc);
        return r;
    }
    pfn_cuMulticastBindMem bind = !strcmp(c->symbol, "cuMulticastBindMem") ? (pfn_cuMulticastBindMem)c->fn
                                                                           : D(cuMulticastBindMem);
    if ((r = bind(mc, 0, h, 0, bytes, 0)) != CUDA_SUCCESS) return r;
    return vmm_release(c, h);
}

/* The same, bound by address: create, map, bind the address, unmap, release. */
static CUresult take_bound_addr(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUmemGenericAllocationHandle mc = 0, h = 0;
    CUresult r = mc_create(c, &mc);
    if (r != CUDA_SUCCESS) return r;
    o->a = mc;
    if ((r = vmm_map_new(c, bytes, o, &h)) != CUDA_SUCCESS) {
        (void)D(cuMemRelease)(mc);
        return r;
    }
    if ((r = ((pfn_cuMulticastBindAddr)c->fn)(mc, 0, o->b, bytes, 0)) != CUDA_SUCCESS) return r;
    if ((r = vmm_unmap(c, o->b, o->c)) != CUDA_SUCCESS || (r = D(cuMemAddressFree)(o->b, o->c)) != CUDA_SUCCESS)
        return r;
    return vmm_release(c, h);
}

static CUresult give_mc(const cover_ctx *c, cover_obj *o, int i) {
    (void)c;
    (void)i;
    return D(cuMemRelease)(o->a);
}

static CUresult give_unbind(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    pfn_cuMulticastUnbind unbind = !strcmp(c->symbol, "cuMulticastUnbind") ? (pfn_cuMulticastUnbind)c->fn
                                                                           : D(cuMulticastUnbind);
    CUresult r = unbind(o->a, c->dev, 0, CHUNK);
    if (r != CUDA_SUCCESS) return r;
    if (counted(c, (size_t)i * CHUNK, "after an unbind")) return CUDA_ERROR_UNKNOWN;
    return D(cuMemRelease)(o->a);
}

static void cover_cuMulticastCreate(const cover_ctx *c) { fill(c, take_bound, give_mc, CHUNK, CHUNK); }
static void cover_cuMulticastBindMem(const cover_ctx *c) { fill(c, take_bound, give_mc, CHUNK, CHUNK); }
static void cover_cuMulticastBindAddr(const cover_ctx *c) { fill(c, take_bound_addr, give_unbind, CHUNK, CHUNK); }
static void cover_cuMulticastUnbind(const cover_ctx *c) { fill(c, take_bound, give_unbind, CHUNK, CHUNK); }

/* ---- arrays ------------------------------------------------------------------------------------------ */

/* 256 MiB of float texels a take: 16384 wide, bytes / 64 KiB high (or 1024 high and 4 deep). */
static CUresult take_array2d(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 16384, .Height = bytes / (16384 * 4), .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUresult r = ((pfn_cuArrayCreate_v2)c->fn)(&a, &d);
    o->a = (unsigned long long)(uintptr_t)a;
    return r;
}

static CUresult take_array2d_v1(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR_v1 d = { .Width = 16384, .Height = (unsigned int)(bytes / (16384 * 4)),
                                   .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUresult r = ((pfn_cuArrayCreate)c->fn)(&a, &d);
    o->a = (unsigned long long)(uintptr_t)a;
    return r;
}

static CUresult take_array3d(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUarray a = NULL;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 16384, .Height = 1024, .Depth = bytes / (16384 * 1024 * 2),
                                  .Format = CU_AD_FORMAT_HALF, .NumChannels = 1 };
    CUresult r = ((pfn_cuArray3DCreate_v2)c->fn)(&a, &d);
    o->a = (unsigned long long)(uintptr_t)a;
    return r;
}

static CUresult take_array3d_v1(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUarray a = NULL;
    CUDA_ARRAY3D_DESCRIPTOR_v1 d = { .Width = 8192, .Height = 1024, .Depth = (unsigned int)(bytes / (8192 * 1024 * 16)),
                                     .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 4 };
    CUresult r = ((pfn_cuArray3DCreate)c->fn)(&a, &d);
    o->a = (unsigned long long)(uintptr_t)a;
    return r;
}

/* Mipmapped: 8192 x 8192 floats, two levels: 256 + 64 MiB. */
#define MIPMAP_BYTES (320 * MiB)
static CUresult take_mipmap(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    (void)bytes;
    CUmipmappedArray a = NULL;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 8192, .Height = 8192, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    pfn_cuMipmappedArrayCreate create = !strcmp(c->symbol, "cuMipmappedArrayCreate") ? (pfn_cuMipmappedArrayCreate)c->fn
                                                                                     : D(cuMipmappedArrayCreate);
    CUresult r = create(&a, &d, 2);
    o->a = (unsigned long long)(uintptr_t)a;
    return r;
}

static CUresult give_mipmap(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    return (!strcmp(c->symbol, "cuMipmappedArrayDestroy") ? (pfn_cuMipmappedArrayDestroy)c->fn
                                                          : D(cuMipmappedArrayDestroy))((CUmipmappedArray)(uintptr_t)o->a);
}

static CUresult take_array_plain(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)c;
    (void)i;
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 16384, .Height = bytes / (16384 * 4), .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUresult r = D(cuArrayCreate_v2)(&a, &d);
    o->a = (unsigned long long)(uintptr_t)a;
    return r;
}

static void cover_cuArrayCreate_v2(const cover_ctx *c) { fill(c, take_array2d, give_array, CHUNK, CHUNK); }
static void cover_cuArrayCreate(const cover_ctx *c) { fill(c, take_array2d_v1, give_array, CHUNK, CHUNK); }
static void cover_cuArray3DCreate_v2(const cover_ctx *c) { fill(c, take_array3d, give_array, CHUNK, CHUNK); }
static void cover_cuArray3DCreate(const cover_ctx *c) { fill(c, take_array3d_v1, give_array, CHUNK, CHUNK); }
static void cover_cuArrayDestroy(const cover_ctx *c) { fill(c, take_array_plain, give_array, CHUNK, CHUNK); }
static void cover_cuMipmappedArrayCreate(const cover_ctx *c) { fill(c, take_mipmap, give_mipmap, MIPMAP_BYTES, MIPMAP_BYTES); }
static void cover_cuMipmappedArrayDestroy(const cover_ctx *c) { fill(c, take_mipmap, give_mipmap, MIPMAP_BYTES, MIPMAP_BYTES); }

/* ---- stream-ordered allocation and pools ---------------------------------------------------------- */

static CUresult take_async(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr p = 0;
    pfn_cuMemAllocAsync a = (!strcmp(c->symbol, "cuMemAllocAsync") || !strcmp(c->symbol, "cuMemAllocAsync_ptsz"))
                                ? (pfn_cuMemAllocAsync)c->fn : D(cuMemAllocAsync);
    CUresult r = a(&p, bytes, NULL);
    o->a = p;
    return r;
}

static CUresult give_async(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    pfn_cuMemFreeAsync f = (!strcmp(c->symbol, "cuMemFreeAsync") || !strcmp(c->symbol, "cuMemFreeAsync_ptsz"))
                               ? (pfn_cuMemFreeAsync)c->fn : D(cuMemFreeAsync);
    return f(o->a, NULL);
}

static CUmemoryPool made_pool;

static CUresult take_from_pool(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)i;
    CUdeviceptr p = 0;
    CUresult r = ((pfn_cuMemAllocFromPoolAsync)c->fn)(&p, bytes, made_pool, NULL);
    o->a = p;
    return r;
}

static CUresult new_pool(const cover_ctx *c, CUmemoryPool *pool) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = c->dev;
    return (!strcmp(c->symbol, "cuMemPoolCreate") ? (pfn_cuMemPoolCreate)c->fn : D(cuMemPoolCreate))(pool, &props);
}

static void cover_cuMemAllocAsync(const cover_ctx *c) { fill(c, take_async, give_async, CHUNK, CHUNK); }
static void cover_cuMemAllocAsync_ptsz(const cover_ctx *c) { fill(c, take_async, give_async, CHUNK, CHUNK); }
static void cover_cuMemFreeAsync(const cover_ctx *c) { fill(c, take_async, give_async, CHUNK, CHUNK); }
static void cover_cuMemFreeAsync_ptsz(const cover_ctx *c) { fill(c, take_async, give_async, CHUNK, CHUNK); }

static void from_pool(const cover_ctx *c) {
    if (new_pool(c, &made_pool) != CUDA_SUCCESS) { fail(c, "cuMemPoolCreate"); return; }
    fill(c, take_from_pool, give_async, CHUNK, CHUNK);
    if (D(cuMemPoolDestroy)(made_pool) != CUDA_SUCCESS) fail(c, "cuMemPoolDestroy");
}

static void cover_cuMemAllocFromPoolAsync(const cover_ctx *c) { from_pool(c); }
static void cover_cuMemAllocFromPoolAsync_ptsz(const cover_ctx *c) { from_pool(c); }

/* A pool keeps what is freed under its release threshold: the driver holds it, vram counts it, and an
 * allocation that does not fit beside it takes it back (the pool is trimmed) rather than failing.
 * Then `release` gives the rest back: 't' trims, 'd' destroys the pool, 's' sets the threshold to 0
 * and frees. */
static void pool_cache(const cover_ctx *c, CUmemoryPool pool, char release) {
    size_t base = c->prealloc ? 0 : fake_held(c->dev);
    cuuint64_t keep_all = ~0ull;
    pfn_cuMemPoolSetAttribute set = !strcmp(c->symbol, "cuMemPoolSetAttribute") ? (pfn_cuMemPoolSetAttribute)c->fn
                                                                               : D(cuMemPoolSetAttribute);
    if (set(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all) != CUDA_SUCCESS) { fail(c, "set the threshold"); return; }
    CUdeviceptr p = 0, q = 0;
    if (D(cuMemAllocFromPoolAsync)(&p, 3 * CHUNK, pool, NULL) != CUDA_SUCCESS) { fail(c, "768 MiB from the pool"); return; }
    if (D(cuMemFreeAsync)(p, NULL) != CUDA_SUCCESS) { fail(c, "cuMemFreeAsync"); return; }
    if (!c->prealloc && fake_held(c->dev) != base + 3 * CHUNK) {
        fail(c, "the pool should keep its 768 MiB (threshold at the maximum): the driver holds %zu", fake_held(c->dev) - base);
        return;
    }
    if (counted(c, 3 * CHUNK, "the pool's kept memory")) return;
    /* 512 MiB more: fits only once the pool's unused memory is given back */
    CUresult r = D(cuMemAlloc_v2)(&q, 2 * CHUNK);
    if (r != CUDA_SUCCESS) { fail(c, "512 MiB beside the pool's cache: error %d (the cache should go first)", (int)r); return; }
    if (fence(c, base, "512 MiB beside the pool's cache") || counted(c, 2 * CHUNK, "512 MiB after the pool was trimmed"))
        return;
    (void)D(cuMemFree_v2)(q);
    /* the pool keeps memory again, then gives it back by `release` */
    if (D(cuMemAllocFromPoolAsync)(&p, CHUNK, pool, NULL) != CUDA_SUCCESS || D(cuMemFreeAsync)(p, NULL) != CUDA_SUCCESS) {
        fail(c, "256 MiB from the pool");
        return;
    }
    if (counted(c, CHUNK, "the pool's kept 256 MiB")) return;
    CUresult gr = CUDA_SUCCESS;
    if (release == 't') {
        gr = ((pfn_cuMemPoolTrimTo)c->fn)(pool, 0);
    } else if (release == 'd') {
        gr = (!strcmp(c->symbol, "cuMemPoolDestroy") ? (pfn_cuMemPoolDestroy)c->fn : D(cuMemPoolDestroy))(pool);
    } else {
        cuuint64_t none = 0;
        gr = set(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none);
        if (gr == CUDA_SUCCESS) gr = D(cuMemAllocFromPoolAsync)(&p, MiB, pool, NULL);
        if (gr == CUDA_SUCCESS) gr = D(cuMemFreeAsync)(p, NULL);   /* a free releases down to the threshold */
    }
    if (gr != CUDA_SUCCESS) { fail(c, "giving the pool's memory back: error %d", (int)gr); return; }
    (void)back(c, base, "after the pool gave its memory back");
}

static void with_pool(const cover_ctx *c, char release) {
    CUmemoryPool pool = NULL;
    if (new_pool(c, &pool) != CUDA_SUCCESS) { fail(c, "cuMemPoolCreate"); return; }
    pool_cache(c, pool, release);
    if (release != 'd') (void)D(cuMemPoolDestroy)(pool);
}

static void cover_cuMemPoolCreate(const cover_ctx *c) { with_pool(c, 'd'); }
static void cover_cuMemPoolDestroy(const cover_ctx *c) { with_pool(c, 'd'); }
static void cover_cuMemPoolTrimTo(const cover_ctx *c) { with_pool(c, 't'); }

/* The device's default pool, whose threshold the program raises (PyTorch's cudaMallocAsync backend). */
static void cover_cuMemPoolSetAttribute(const cover_ctx *c) {
    CUmemoryPool pool = NULL;
    if (D(cuDeviceGetDefaultMemPool)(&pool, c->dev) != CUDA_SUCCESS) { fail(c, "cuDeviceGetDefaultMemPool"); return; }
    pool_cache(c, pool, 's');
}

/* ---- graphs with memory nodes ------------------------------------------------------------------------- */

/* A graph with one memory node of `bytes` whose allocation the graph does not free (it lives on after
 * the launch, as a graph's output does). */
static CUresult graph_with_node(const cover_ctx *c, size_t bytes, CUgraph *graph, CUdeviceptr *dptr, int child) {
    CUgraph outer = NULL, inner = NULL;
    CUgraphNode node;
    CUresult r = D(cuGraphCreate)(&outer, 0);
    if (r != CUDA_SUCCESS) return r;
    if (child && (r = D(cuGraphCreate)(&inner, 0)) != CUDA_SUCCESS) return r;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = c->dev;
    p.bytesize = bytes;
    if ((r = D(cuGraphAddMemAllocNode)(&node, child ? inner : outer, NULL, 0, &p)) != CUDA_SUCCESS) return r;
    if (child && (r = D(cuGraphAddChildGraphNode)(&node, outer, NULL, 0, inner)) != CUDA_SUCCESS) return r;
    if (child) (void)D(cuGraphDestroy)(inner);
    *graph = outer;
    *dptr = p.dptr;
    return CUDA_SUCCESS;
}

enum { GRAPH_LAUNCH, GRAPH_UPLOAD, GRAPH_UPLOAD_AT_INSTANTIATE };

/* Instantiates `graph` with the entry point under test when it is an instantiation (else
 * cuGraphInstantiateWithFlags), then maps its memory: a launch or an upload (the entry point under
 * test when it is one), or the instantiation itself with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD. */
static CUresult graph_run(const cover_ctx *c, CUgraph graph, CUgraphExec *exec, int how) {
    CUresult r;
    const char *s = c->symbol;
    if (!strcmp(s, "cuGraphInstantiate") || !strcmp(s, "cuGraphInstantiate_v2")) {
        r = ((pfn_cuGraphInstantiate)c->fn)(exec, graph, NULL, NULL, 0);
    } else if (!strcmp(s, "cuGraphInstantiateWithParams") || !strcmp(s, "cuGraphInstantiateWithParams_ptsz")) {
        CUDA_GRAPH_INSTANTIATE_PARAMS p = { .flags = how == GRAPH_UPLOAD_AT_INSTANTIATE ? CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD : 0 };
        r = ((pfn_cuGraphInstantiateWithParams)c->fn)(exec, graph, &p);
        if (how == GRAPH_UPLOAD_AT_INSTANTIATE) return r;
    } else if (!strcmp(s, "cuGraphInstantiateWithFlags")) {
        r = ((pfn_cuGraphInstantiateWithFlags)c->fn)(exec, graph, 0);
    } else {
        r = D(cuGraphInstantiateWithFlags)(exec, graph, 0);
    }
    if (r != CUDA_SUCCESS) return r;
    int tested = !strcmp(s, "cuGraphLaunch") || !strcmp(s, "cuGraphLaunch_ptsz") || !strcmp(s, "cuGraphUpload") ||
                 !strcmp(s, "cuGraphUpload_ptsz");
    pfn_cuGraphLaunch run = tested ? (pfn_cuGraphLaunch)c->fn : how == GRAPH_UPLOAD ? D(cuGraphUpload) : D(cuGraphLaunch);
    r = run(*exec, NULL);
    if (r != CUDA_SUCCESS) (void)D(cuGraphExecDestroy)(*exec);
    return r;
}

static int graph_how(const cover_ctx *c) {
    if (strstr(c->symbol, "WithParams")) return GRAPH_UPLOAD_AT_INSTANTIATE;
    return strstr(c->symbol, "Upload") ? GRAPH_UPLOAD : GRAPH_LAUNCH;
}

/* o->a the exec, o->b the graph, o->c the allocation the graph left live. Every other take nests
 * the memory node in a child graph. */
static CUresult take_graph(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUdeviceptr dptr = 0;
    CUresult r = graph_with_node(c, bytes, &graph, &dptr, i & 1);
    if (r != CUDA_SUCCESS) return r;
    o->b = (unsigned long long)(uintptr_t)graph;
    r = graph_run(c, graph, &exec, graph_how(c));
    if (r != CUDA_SUCCESS) {
        (void)D(cuGraphDestroy)(graph);
        return r;
    }
    o->a = (unsigned long long)(uintptr_t)exec;
    o->c = dptr;
    return CUDA_SUCCESS;
}

/* Frees the graph's allocation, destroys the exec and the graph, and gives graph memory back. */
static CUresult give_graph(const cover_ctx *c, cover_obj *o, int i) {
    (void)i;
    /* an allocation of a graph only uploaded never started: there is nothing to free */
    CUresult r = graph_how(c) == GRAPH_LAUNCH ? D(cuMemFreeAsync)(o->c, NULL) : CUDA_SUCCESS;
    pfn_cuGraphExecDestroy destroy = !strcmp(c->symbol, "cuGraphExecDestroy") ? (pfn_cuGraphExecDestroy)c->fn
                                                                             : D(cuGraphExecDestroy);
    if (r == CUDA_SUCCESS) r = destroy((CUgraphExec)(uintptr_t)o->a);
    if (r == CUDA_SUCCESS) r = D(cuGraphDestroy)((CUgraph)(uintptr_t)o->b);
    pfn_cuDeviceGraphMemTrim trim = !strcmp(c->symbol, "cuDeviceGraphMemTrim") ? (pfn_cuDeviceGraphMemTrim)c->fn
                                                                               : D(cuDeviceGraphMemTrim);
    if (r == CUDA_SUCCESS) r = trim(c->dev);
    return r;
}

static void graphs(const cover_ctx *c) { fill(c, take_graph, give_graph, CHUNK, CHUNK); }

/* A launched graph keeps its memory for its next launches: launching it again takes nothing. The
 * graph frees its allocation itself (a graph whose allocation is still live may not be launched
 * again). */
static void graph_relaunch(const cover_ctx *c) {
    size_t base = c->prealloc ? 0 : fake_held(c->dev);
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUgraphNode alloc_node, free_node;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = c->dev;
    p.bytesize = 3 * CHUNK;
    if (D(cuGraphCreate)(&graph, 0) != CUDA_SUCCESS || D(cuGraphAddMemAllocNode)(&alloc_node, graph, NULL, 0, &p) != CUDA_SUCCESS ||
        D(cuGraphAddMemFreeNode)(&free_node, graph, &alloc_node, 1, p.dptr) != CUDA_SUCCESS ||
        D(cuGraphInstantiateWithFlags)(&exec, graph, 0) != CUDA_SUCCESS) {
        fail(c, "a graph that allocates and frees 768 MiB");
        return;
    }
    for (int k = 0; k < 4; k++) {
        CUresult r = ((pfn_cuGraphLaunch)c->fn)(exec, NULL);
        if (r != CUDA_SUCCESS) { fail(c, "launch %d of a graph that holds its memory: error %d", k + 1, (int)r); return; }
        if (fence(c, base, "a graph launched again") || counted(c, 3 * CHUNK, "a graph launched again")) return;
    }
    if (D(cuGraphExecDestroy)(exec) != CUDA_SUCCESS || D(cuGraphDestroy)(graph) != CUDA_SUCCESS ||
        D(cuDeviceGraphMemTrim)(c->dev) != CUDA_SUCCESS) {
        fail(c, "giving the graph back");
        return;
    }
    (void)back(c, base, "after the graph was destroyed and graph memory trimmed");
}

static void cover_cuGraphInstantiate(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphInstantiate_v2(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphInstantiateWithFlags(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphInstantiateWithParams(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphInstantiateWithParams_ptsz(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphUpload(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphUpload_ptsz(const cover_ctx *c) { graphs(c); }
static void cover_cuGraphLaunch(const cover_ctx *c) {
    graphs(c);
    if (!failed) graph_relaunch(c);
}
static void cover_cuGraphLaunch_ptsz(const cover_ctx *c) {
    graphs(c);
    if (!failed) graph_relaunch(c);
}
static void cover_cuGraphExecDestroy(const cover_ctx *c) { graphs(c); }
static void cover_cuDeviceGraphMemTrim(const cover_ctx *c) { graphs(c); }

/* ---- context limits ---------------------------------------------------------------------------------- */

static size_t heap_base;

/* Each take raises the malloc heap by `bytes`; each give lowers it again. */
static CUresult take_heap(const cover_ctx *c, size_t bytes, cover_obj *o, int i) {
    (void)o;
    pfn_cuCtxSetLimit set = !strcmp(c->symbol, "cuCtxSetLimit") ? (pfn_cuCtxSetLimit)c->fn : D(cuCtxSetLimit);
    return set(CU_LIMIT_MALLOC_HEAP_SIZE, heap_base + (size_t)(i + 1) * bytes);
}

static CUresult give_heap(const cover_ctx *c, cover_obj *o, int i) {
    (void)o;
    pfn_cuCtxSetLimit set = !strcmp(c->symbol, "cuCtxSetLimit") ? (pfn_cuCtxSetLimit)c->fn : D(cuCtxSetLimit);
    return set(CU_LIMIT_MALLOC_HEAP_SIZE, heap_base + (size_t)i * CHUNK);
}

static void cover_cuCtxSetLimit(const cover_ctx *c) {
    if (D(cuCtxGetLimit)(&heap_base, CU_LIMIT_MALLOC_HEAP_SIZE) != CUDA_SUCCESS) { fail(c, "cuCtxGetLimit"); return; }
    fill(c, take_heap, give_heap, CHUNK, CHUNK);
    /* the stack: 1 KiB more a thread, for every thread the device holds */
    size_t stack = 0, base = c->prealloc ? 0 : fake_held(c->dev);
    int sms = 0, threads = 0;
    if (D(cuCtxGetLimit)(&stack, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS ||
        D(cuDeviceGetAttribute)(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev) != CUDA_SUCCESS ||
        D(cuDeviceGetAttribute)(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, c->dev) != CUDA_SUCCESS) {
        fail(c, "the stack size and the device's threads");
        return;
    }
    size_t per_kib = (size_t)sms * (size_t)threads * 1024;
    CUresult r = ((pfn_cuCtxSetLimit)c->fn)(CU_LIMIT_STACK_SIZE, stack + 1024);
    if (r != CUDA_SUCCESS) { fail(c, "1 KiB more stack a thread: error %d", (int)r); return; }
    if (fence(c, base, "a larger stack") || counted(c, per_kib, "a larger stack")) return;
    size_t kib = c->limit ? c->limit / per_kib + 1 : 0;   /* a stack that does not fit the limit */
    if (kib && ((pfn_cuCtxSetLimit)c->fn)(CU_LIMIT_STACK_SIZE, stack + kib * 1024) != CUDA_ERROR_OUT_OF_MEMORY) {
        fail(c, "a stack past the limit was not refused");
        return;
    }
    if (((pfn_cuCtxSetLimit)c->fn)(CU_LIMIT_STACK_SIZE, stack) != CUDA_SUCCESS) { fail(c, "the stack set back"); return; }
    if (back(c, base, "after the stack was set back")) return;
    /* printf's FIFO: 256 MiB more, counted; one past the limit refused */
    size_t fifo = 0;
    if (D(cuCtxGetLimit)(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE) != CUDA_SUCCESS) { fail(c, "the printf FIFO's size"); return; }
    r = ((pfn_cuCtxSetLimit)c->fn)(CU_LIMIT_PRINTF_FIFO_SIZE, fifo + CHUNK);
    if (r != CUDA_SUCCESS) { fail(c, "a printf FIFO of 256 MiB more: error %d", (int)r); return; }
    if (fence(c, base, "a larger printf FIFO") || counted(c, CHUNK, "a larger printf FIFO")) return;
    if (c->limit && ((pfn_cuCtxSetLimit)c->fn)(CU_LIMIT_PRINTF_FIFO_SIZE, fifo + c->limit + 1) != CUDA_ERROR_OUT_OF_MEMORY) {
        fail(c, "a printf FIFO past the limit was not refused");
        return;
    }
    if (((pfn_cuCtxSetLimit)c->fn)(CU_LIMIT_PRINTF_FIFO_SIZE, fifo) != CUDA_SUCCESS) { fail(c, "the FIFO set back"); return; }
    (void)back(c, base, "after the printf FIFO was set back");
}

/* A context's limits go with the context: `end` ends it ('d' destroy a created context, 'r' reset the
 * primary context, 'l' its last release). */
static void context_ends(const cover_ctx *c, char end) {
    size_t base = c->prealloc ? 0 : fake_held(c->dev), heap = 0;
    CUcontext ctx = NULL;
    if (end == 'd') {
        if (D(cuCtxCreate_v2)(&ctx, 0, c->dev) != CUDA_SUCCESS || D(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
            fail(c, "cuCtxCreate_v2");
            return;
        }
    } else if (end == 'l') {   /* one more reference of the primary context, then every one released */
        CUcontext primary = NULL;
        if (D(cuDevicePrimaryCtxRetain)(&primary, c->dev) != CUDA_SUCCESS) { fail(c, "cuDevicePrimaryCtxRetain"); return; }
    }
    if (D(cuCtxGetLimit)(&heap, CU_LIMIT_MALLOC_HEAP_SIZE) != CUDA_SUCCESS ||
        D(cuCtxSetLimit)(CU_LIMIT_MALLOC_HEAP_SIZE, heap + 3 * CHUNK) != CUDA_SUCCESS) {
        fail(c, "a heap of 768 MiB more");
        return;
    }
    if (fence(c, base, "a larger heap") || counted(c, 3 * CHUNK, "a larger heap")) return;
    CUresult r = CUDA_SUCCESS;
    if (end == 'd') {
        r = ((pfn_cuCtxDestroy_v2)c->fn)(ctx);
    } else if (end == 'r') {
        r = ((pfn_cuDevicePrimaryCtxReset_v2)c->fn)(c->dev);
    } else {
        unsigned int flags = 0;
        int active = 1;
        for (int k = 0; k < 8 && r == CUDA_SUCCESS && active; k++) {
            r = ((pfn_cuDevicePrimaryCtxRelease)c->fn)(c->dev);
            if (r == CUDA_SUCCESS) r = D(cuDevicePrimaryCtxGetState)(c->dev, &flags, &active);
        }
        if (r == CUDA_SUCCESS && active) r = CUDA_ERROR_UNKNOWN;
    }
    if (r != CUDA_SUCCESS) { fail(c, "ending the context: error %d", (int)r); return; }
    /* a context again, for the view */
    CUcontext primary = NULL;
    if (D(cuDevicePrimaryCtxRetain)(&primary, c->dev) != CUDA_SUCCESS || D(cuCtxSetCurrent)(primary) != CUDA_SUCCESS) {
        fail(c, "the primary context again");
        return;
    }
    (void)back(c, base, "after the context ended");
}

static void cover_cuCtxDestroy_v2(const cover_ctx *c) { context_ends(c, 'd'); }
static void cover_cuCtxDestroy(const cover_ctx *c) { context_ends(c, 'd'); }
static void cover_cuDevicePrimaryCtxReset_v2(const cover_ctx *c) { context_ends(c, 'r'); }
static void cover_cuDevicePrimaryCtxReset(const cover_ctx *c) { context_ends(c, 'r'); }
static void cover_cuDevicePrimaryCtxRelease_v2(const cover_ctx *c) { context_ends(c, 'l'); }
static void cover_cuDevicePrimaryCtxRelease(const cover_ctx *c) { context_ends(c, 'l'); }

/* ---- the table of scenarios, from shim.h's coverage table ----------------------------------------- */

typedef void (*cover_fn)(const cover_ctx *c);

typedef struct cover_entry {
    const char *symbol, *base, *role;
    int version, ptsz;
    cover_fn run;
} cover_entry;

#define COVER_TAKES(sym, base, ver, ptsz) { #sym, base, "TAKES", ver, ptsz, cover_##sym },
#define COVER_HOLDS(sym, base, ver, ptsz) { #sym, base, "HOLDS", ver, ptsz, cover_##sym },
#define COVER_GIVES(sym, base, ver, ptsz) { #sym, base, "GIVES", ver, ptsz, cover_##sym },
#define COVER_VIEW(sym, base, ver, ptsz)  /* tests/shim/shim_test.sh's info and NVML checks */
#define COVER_ROUTE(sym, base, ver, ptsz) /* every scenario's proc route */
#define COVER_ACTIVITY(sym, base, ver, ptsz) /* `app_cover activity ROUTE` (below) */

static const cover_entry entries[] = {
#define X(sym, base, ver, ptsz, role) COVER_##role(sym, base, ver, ptsz)
    SHIM_HOOKS(X)
#undef X
};

#define NUM_ENTRIES (sizeof entries / sizeof entries[0])

static const char *const uncovered[] = {
#define X(sym, why) #sym,
    SHIM_UNCOVERED(X)
#undef X
};

/* ---- the entries of role ACTIVITY: each reaches the driver's function of its own name, counted ---- */

/* A call of each with harmless arguments (the fake runs nothing): a dummy function handle, a block of
 * device memory and a host buffer of 16 bytes, the default stream, an event, the current context. */
static CUdeviceptr act_dev;
static unsigned char act_host[16];
static CUevent act_event;
static CUcontext act_ctx;
static unsigned char act_config[64];   /* a CUlaunchConfig's place (the fake does not read it) */
#define ACT_F ((CUfunction)(uintptr_t)0x1000)
#define ACT_CFG ((const CUlaunchConfig *)(const void *)act_config)
#define ACT_CALLS(X)                                                                        \
    X(cuLaunchKernel, (ACT_F, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))                      \
    X(cuLaunchKernel_ptsz, (ACT_F, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))                 \
    X(cuLaunchKernelEx, (ACT_CFG, ACT_F, NULL, NULL))                                      \
    X(cuLaunchKernelEx_ptsz, (ACT_CFG, ACT_F, NULL, NULL))                                 \
    X(cuLaunchCooperativeKernel, (ACT_F, 1, 1, 1, 1, 1, 1, 0, NULL, NULL))                 \
    X(cuLaunchCooperativeKernel_ptsz, (ACT_F, 1, 1, 1, 1, 1, 1, 0, NULL, NULL))            \
    X(cuMemcpy, (act_dev, act_dev + 16, 16))                                               \
    X(cuMemcpy_ptds, (act_dev, act_dev + 16, 16))                                          \
    X(cuMemcpyAsync, (act_dev, act_dev + 16, 16, NULL))                                    \
    X(cuMemcpyAsync_ptsz, (act_dev, act_dev + 16, 16, NULL))                               \
    X(cuMemcpyHtoD_v2, (act_dev, act_host, 16))                                            \
    X(cuMemcpyHtoD_v2_ptds, (act_dev, act_host, 16))                                       \
    X(cuMemcpyDtoH_v2, (act_host, act_dev, 16))                                            \
    X(cuMemcpyDtoH_v2_ptds, (act_host, act_dev, 16))                                       \
    X(cuMemcpyDtoD_v2, (act_dev, act_dev + 16, 16))                                        \
    X(cuMemcpyDtoD_v2_ptds, (act_dev, act_dev + 16, 16))                                   \
    X(cuMemcpyHtoDAsync_v2, (act_dev, act_host, 16, NULL))                                 \
    X(cuMemcpyHtoDAsync_v2_ptsz, (act_dev, act_host, 16, NULL))                            \
    X(cuMemcpyDtoHAsync_v2, (act_host, act_dev, 16, NULL))                                 \
    X(cuMemcpyDtoHAsync_v2_ptsz, (act_host, act_dev, 16, NULL))                            \
    X(cuMemcpyDtoDAsync_v2, (act_dev, act_dev + 16, 16, NULL))                             \
    X(cuMemcpyDtoDAsync_v2_ptsz, (act_dev, act_dev + 16, 16, NULL))                        \
    X(cuMemsetD8Async, (act_dev, 7, 16, NULL))                                             \
    X(cuMemsetD8Async_ptsz, (act_dev, 7, 16, NULL))                                        \
    X(cuMemsetD32Async, (act_dev, 7, 4, NULL))                                             \
    X(cuMemsetD32Async_ptsz, (act_dev, 7, 4, NULL))                                        \
    X(cuStreamSynchronize, (NULL))                                                         \
    X(cuStreamSynchronize_ptsz, (NULL))                                                    \
    X(cuEventSynchronize, (act_event))                                                     \
    X(cuCtxSynchronize, ())                                                                \
    X(cuCtxSynchronize_v2, (act_ctx))

#define ACT_DEFINE(sym, args) \
    static CUresult act_##sym(void *fn) { return ((pfn_##sym)fn) args; }
ACT_CALLS(ACT_DEFINE)
#undef ACT_DEFINE

typedef struct act_entry {
    const char *symbol, *base;
    int version, ptsz;
    CUresult (*call)(void *fn);
} act_entry;

/* From the coverage table: an entry of role ACTIVITY without a call above does not build. */
#define ACT_TAKES(sym, base, ver, ptsz)
#define ACT_HOLDS(sym, base, ver, ptsz)
#define ACT_GIVES(sym, base, ver, ptsz)
#define ACT_VIEW(sym, base, ver, ptsz)
#define ACT_ROUTE(sym, base, ver, ptsz)
#define ACT_ACTIVITY(sym, base, ver, ptsz) { #sym, base, ver, ptsz, act_##sym },
static const act_entry act_entries[] = {
#define X(sym, base, ver, ptsz, role) ACT_##role(sym, base, ver, ptsz)
    SHIM_HOOKS(X)
#undef X
};

/* The preload library's activity page in this process (/proc/self/maps: the mapping of the memfd
 * "vram-activity"), or NULL (not under vram run, or no idle watcher named). */
static const ledger_activity *act_page(void) {
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    const ledger_activity *a = NULL;
    while (f && !a && fgets(line, sizeof line, f)) {
        unsigned long lo = 0;
        if (strstr(line, "/memfd:" LEDGER_ACTIVITY_NAME) && sscanf(line, "%lx-", &lo) == 1)
            a = (const ledger_activity *)(uintptr_t)lo;
    }
    if (f) fclose(f);
    return a;
}

static void *resolve_route(const char *symbol, const char *base, int version, int ptsz, const char *route);

/* `app_cover activity ROUTE`: every ACTIVITY entry, found by ROUTE, is called twice: the first call is
 * planned to fail (fake_cuda_fail_next on its own exported name, CUDA_ERROR_LAUNCH_FAILED = 719),
 * which shows it reached that very function of the driver, the second succeeds; under vram run with
 * an idle watcher named (VRAM_IDLE_WATCHER) both are counted on the activity page, and no wait is left
 * counted after a synchronising call. Prints "activity SYMBOL ok" or "... FAIL: why", then
 * "activity_page=0|1"; exits 1 when one failed. */
static int run_activity(const char *route) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "app_cover: cannot load libcuda.so.1: %s\n", dlerror());
        return 3;
    }
    fake_cuda_fail_next_fn *fail_next = (fake_cuda_fail_next_fn *)need("fake_cuda_fail_next");
    CUdevice dev;
    if (D(cuInit)(0) != CUDA_SUCCESS || D(cuDeviceGet)(&dev, 0) != CUDA_SUCCESS ||
        D(cuDevicePrimaryCtxRetain)(&act_ctx, dev) != CUDA_SUCCESS || D(cuCtxSetCurrent)(act_ctx) != CUDA_SUCCESS ||
        D(cuMemAlloc_v2)(&act_dev, 1u << 20) != CUDA_SUCCESS ||   /* (the first slot: the page is made) */
        D(cuEventCreate)(&act_event, 0) != CUDA_SUCCESS || D(cuEventRecord)(act_event, NULL) != CUDA_SUCCESS) {
        fputs("app_cover: no device 0\n", stderr);
        return 3;
    }
    const ledger_activity *page = act_page();
    int bad = 0;
    for (size_t i = 0; i < sizeof act_entries / sizeof act_entries[0]; i++) {
        const act_entry *e = &act_entries[i];
        void *fn = resolve_route(e->symbol, e->base, e->version, e->ptsz, route);
        char why[160] = "";
        if (!fn) {
            snprintf(why, sizeof why, "%s does not give it (base %s, version %d)", route, e->base, e->version);
        } else {
            unsigned long long before = page ? __atomic_load_n(&page->calls, __ATOMIC_RELAXED) : 0;
            if (fail_next(e->symbol, 1, 719) != 0) snprintf(why, sizeof why, "the fake has no %s", e->symbol);
            CUresult r1 = e->call(fn), r2 = e->call(fn);
            unsigned long long after = page ? __atomic_load_n(&page->calls, __ATOMIC_RELAXED) : 0;
            if (why[0]) {
            } else if (r1 != 719) {
                snprintf(why, sizeof why, "the planned failure of %s did not come back (%d): another function was called",
                         e->symbol, (int)r1);
            } else if (r2 != CUDA_SUCCESS) {
                snprintf(why, sizeof why, "the second call failed (%d)", (int)r2);
            } else if (page && after < before + 2) {
                snprintf(why, sizeof why, "not counted: calls went from %llu to %llu", before, after);
            } else if (page && __atomic_load_n(&page->waits, __ATOMIC_RELAXED) != 0) {
                snprintf(why, sizeof why, "waits left at %llu", (unsigned long long)page->waits);
            }
        }
        if (why[0]) printf("activity %s FAIL: %s\n", e->symbol, why), bad = 1;
        else printf("activity %s ok\n", e->symbol);
    }
    printf("activity_page=%d\n", page != NULL);
    return bad;
}

/* The entry point by the route: the exported symbol, or cuGetProcAddress_v2 (itself asked for by
 * cuGetProcAddress_v2, as the CUDA runtime does) with the table's base name, version and flag. */
static void *resolve_route(const char *symbol, const char *base, int version, int ptsz, const char *route) {
    if (!strcmp(route, "dlsym")) return need(symbol);
    pfn_cuGetProcAddress_v2 gpa = D(cuGetProcAddress_v2);
    void *self = NULL, *fn = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || !self) return NULL;
    gpa = (pfn_cuGetProcAddress_v2)self;
    cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    if (gpa(base, &fn, version, flags, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS) return NULL;
    return fn;
}

static void *resolve(const cover_entry *e, const char *route) {
    return resolve_route(e->symbol, e->base, e->version, e->ptsz, route);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "list")) {
        for (size_t i = 0; i < NUM_ENTRIES; i++) printf("%s %s\n", entries[i].symbol, entries[i].role);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "hooks")) {
        static const char *const hooks[] = {
#define X(sym, base, ver, ptsz, role) #sym " " #role,
            SHIM_HOOKS(X)
#undef X
        };
        for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) printf("%s\n", hooks[i]);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "activity") && (!strcmp(argv[2], "dlsym") || !strcmp(argv[2], "proc")))
        return run_activity(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "uncovered")) {
        for (size_t i = 0; i < sizeof uncovered / sizeof uncovered[0]; i++) printf("%s\n", uncovered[i]);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[1], "dlsym") && strcmp(argv[1], "proc"))) {
        fputs("usage: app_cover list | hooks | uncovered | dlsym|proc SYMBOL | activity dlsym|proc\n", stderr);
        return 2;
    }
    const cover_entry *e = NULL;
    for (size_t i = 0; i < NUM_ENTRIES; i++)
        if (!strcmp(entries[i].symbol, argv[2])) e = &entries[i];
    if (!e) {
        fprintf(stderr, "app_cover: no scenario for %s\n", argv[2]);
        return 2;
    }
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "app_cover: cannot load libcuda.so.1: %s\n", dlerror());
        return 3;
    }
    fake_held = (size_t (*)(int))need("fake_cuda_held");
    cover_ctx c = { .symbol = e->symbol, .dev = 0 };
    const char *growth = getenv("VRAM_GROWTH");
    c.prealloc = growth && !strcmp(growth, "0");
    CUdevice dev;
    CUcontext ctx;
    if (D(cuInit)(0) != CUDA_SUCCESS || D(cuDeviceGet)(&dev, c.dev) != CUDA_SUCCESS ||
        D(cuDevicePrimaryCtxRetain)(&ctx, dev) != CUDA_SUCCESS || D(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
        fputs("app_cover: no device 0\n", stderr);
        return 3;
    }
    size_t f = 0, t = 0;
    if (D(cuMemGetInfo_v2)(&f, &t) != CUDA_SUCCESS) return 3;
    c.limit = t < CARD ? t : 0;
    c.fn = resolve(e, argv[1]);
    if (!c.fn) {
        printf("cover %s FAIL: %s does not give it (base %s, version %d%s)\n", e->symbol, argv[1], e->base, e->version,
               e->ptsz ? ", per-thread stream" : "");
        return 1;
    }
    printf("limit=%zu prealloc=%d\n", c.limit, c.prealloc);
    e->run(&c);
    if (!failed) printf("cover %s ok\n", e->symbol);
    return failed;
}
