/*
 * app_driver.c: a test program that uses the CUDA driver as the CUDA runtime does: it dlopens
 * "libcuda.so.1" and gets its functions with dlsym or through cuGetProcAddress. Run it under
 * `vram run` (libvram_preload.so) or without, over the fake driver; it prints what it saw as
 * key=value lines that tests/shim/shim_test.sh checks.
 *
 *   app_driver PATH SCENARIO [ARGS]
 *   app_driver nvml_only        NVML alone, CUDA never loaded (as nvidia-smi): the "nvml" lines of
 *                               every NVML device, then cuda_loaded=0|1 (whether libcuda.so.1 got
 *                               loaded into the process all the same)
 *   PATH      dlsym     dlsym(handle, "cuMemAlloc_v2"), ...
 *             proc      cuGetProcAddress (v1, itself from dlsym), CUDA 12.0, default stream
 *             proc_v2   cuGetProcAddress_v2 obtained through cuGetProcAddress_v2("cuGetProcAddress")
 *             proc_ptsz as proc_v2, with the per-thread default stream flag
 *   SCENARIO  info [DEV]                  total=, free=, devtotal=
 *             fill KIND MIB [DEV]         chunks=N bytes=B err=E, refill=E, free_after= total=
 *                                         KIND: alloc pitch managed create async pool (pool:
 *                                         cuMemAllocFromPoolAsync from the device's default pool,
 *                                         cuDeviceGetDefaultMemPool)
 *             pitch WIDTH HEIGHT          one cuMemAllocPitch of HEIGHT rows of WIDTH bytes on device 0
 *                                         (the fake driver pads a row to 512 bytes):
 *                                         pitch_alloc=E pitch=P, held= total= (cuMemGetInfo
 *                                         while it is held), then its free: free_after= total=
 *             threads                     threads_bytes=B, free_after= total=
 *             mixed                       allocate by dlsym, free by cuGetProcAddress, free again:
 *                                         alloc= free= double_free= free_after= total=
 *             many                        20000 blocks of 16 KiB, freed in a scrambled order:
 *                                         many=N, free_after= total=
 *             hold KIND MIB [DEV [PEAK]]  one block of MIB (after a block of PEAK MiB taken and
 *                                         freed, when given): hold=E (flushed), then waits for EOF
 *                                         on stdin, frees it: free_after= total= (vram top tests)
 *             nvml MIB                    MIB with cuMemAlloc on device 0 (nvml_alloc=E), its
 *                                         cuMemGetInfo (cuinfo=F total=T), then
 *                                         for every NVML device i (libnvidia-ml.so.1 by dlopen +
 *                                         dlsym): "nvml i total= free= used=" (GetMemoryInfo) and
 *                                         "nvml_v2 i total= reserved= free= used=" (_v2)
 *             launches N                  1 MiB on device 0, then N cuLaunchKernel of a dummy
 *                                         function (dlsym): launches=N ns_per_launch=T (what a
 *                                         launch costs, with and without vram run: shim/activity.c)
 *             churn SEED MS MAXMIB [DEV]  for MS milliseconds, random steps 0-2 ms apart (seeded):
 *                                         a block of 16..MAXMIB MiB by cuMemAlloc, or a live one
 *                                         freed (16 live at most); then all freed: churn ok=N
 *                                         refused=R (every error other than out of memory dies, 3)
 *             script [DEV]                commands on stdin, one a line, each answered by one
 *                                         flushed line: "alloc MIB" -> alloc=E (cuMemAlloc),
 *                                         "pitch MIB" -> pitch=E (cuMemAllocPitch, rows of 1 MiB),
 *                                         "free" -> free=E (the newest live block), "info" ->
 *                                         free=F total=T (cuMemGetInfo), "launch" -> launch=E
 *                                         (cuLaunchKernel of a dummy function), "poke V" -> poke=0
 *                                         and "peek" -> peek=0xV (the fake's contents word,
 *                                         fake_cuda_poke / fake_cuda_peek), "held" -> held=B host=H
 *                                         (the fake's device bytes of this process and its pinned
 *                                         host bytes: fake_cuda_held, fake_cuda_host_held); exits at EOF
 *             refused KIND MIB [DEV]      a block of MIB (take=E), then its free, which the driver is
 *                                         to refuse (FAKE_CUDA_FAIL): before=F (cuMemGetInfo's free
 *                                         before the free), free=E, after=F, the same block again
 *                                         (again=E: past a limit, out of memory), the free again
 *                                         (free_again=E), free_after= total=. KIND: alloc pitch
 *                                         managed (cuMemFree_v2), create (cuMemRelease), map
 *                                         (cuMemCreate + cuMemAddressReserve + cuMemMap, the handle
 *                                         released at once: cuMemUnmap frees it), async pool
 *                                         (cuMemFreeAsync)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "fake_cuda.h"
#include "nvml_types.h"

#define MAX_CHUNKS 200

typedef struct driver {
    pfn_cuInit init;
    pfn_cuDeviceGet device_get;
    pfn_cuDevicePrimaryCtxRetain ctx_retain;
    pfn_cuCtxSetCurrent ctx_set;
    pfn_cuMemAlloc_v2 alloc;
    pfn_cuMemAllocPitch_v2 alloc_pitch;
    pfn_cuMemAllocManaged alloc_managed;
    pfn_cuMemFree_v2 free;
    pfn_cuMemGetInfo_v2 get_info;
    pfn_cuDeviceTotalMem_v2 total_mem;
    pfn_cuMemCreate create;
    pfn_cuMemRelease release;
    pfn_cuMemAllocAsync alloc_async;
    pfn_cuMemAllocFromPoolAsync alloc_pool;
    pfn_cuMemFreeAsync free_async;
    pfn_cuDeviceGetDefaultMemPool default_pool;
    pfn_cuMemAddressReserve addr_reserve;
    pfn_cuMemAddressFree addr_free;
    pfn_cuMemMap map;
    pfn_cuMemUnmap unmap;
} driver;

static void *lib;

static void die(const char *what, const char *name) {
    fprintf(stderr, "app_driver: %s %s\n", what, name);
    exit(3);
}

static void *need_dlsym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) die("dlsym found no", name);
    return p;
}

static void resolve_by_dlsym(driver *d) {
    d->alloc = (pfn_cuMemAlloc_v2)need_dlsym("cuMemAlloc_v2");
    d->alloc_pitch = (pfn_cuMemAllocPitch_v2)need_dlsym("cuMemAllocPitch_v2");
    d->alloc_managed = (pfn_cuMemAllocManaged)need_dlsym("cuMemAllocManaged");
    d->free = (pfn_cuMemFree_v2)need_dlsym("cuMemFree_v2");
    d->get_info = (pfn_cuMemGetInfo_v2)need_dlsym("cuMemGetInfo_v2");
    d->total_mem = (pfn_cuDeviceTotalMem_v2)need_dlsym("cuDeviceTotalMem_v2");
    d->create = (pfn_cuMemCreate)need_dlsym("cuMemCreate");
    d->release = (pfn_cuMemRelease)need_dlsym("cuMemRelease");
    d->alloc_async = (pfn_cuMemAllocAsync)need_dlsym("cuMemAllocAsync");
    d->alloc_pool = (pfn_cuMemAllocFromPoolAsync)need_dlsym("cuMemAllocFromPoolAsync");
    d->free_async = (pfn_cuMemFreeAsync)need_dlsym("cuMemFreeAsync");
    d->default_pool = (pfn_cuDeviceGetDefaultMemPool)need_dlsym("cuDeviceGetDefaultMemPool");
    d->addr_reserve = (pfn_cuMemAddressReserve)need_dlsym("cuMemAddressReserve");
    d->addr_free = (pfn_cuMemAddressFree)need_dlsym("cuMemAddressFree");
    d->map = (pfn_cuMemMap)need_dlsym("cuMemMap");
    d->unmap = (pfn_cuMemUnmap)need_dlsym("cuMemUnmap");
}

static pfn_cuGetProcAddress gpa1;
static pfn_cuGetProcAddress_v2 gpa2;
static cuuint64_t gpa_flags;

static void *need_proc(const char *name) {
    void *p = NULL;
    CUresult r;
    if (gpa2) {
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        r = gpa2(name, &p, 12000, gpa_flags, &st);
        if (r == CUDA_SUCCESS && st != CU_GET_PROC_ADDRESS_SUCCESS) die("bad symbol status for", name);
    } else {
        r = gpa1(name, &p, 12000, gpa_flags);
    }
    if (r != CUDA_SUCCESS || !p) die("cuGetProcAddress found no", name);
    return p;
}

static void resolve_by_proc(driver *d, const char *path) {
    if (strcmp(path, "proc") == 0) {
        gpa1 = (pfn_cuGetProcAddress)need_dlsym("cuGetProcAddress");
    } else {
        /* As the CUDA runtime does: the _v2 entry point, then cuGetProcAddress asked for itself. */
        gpa2 = (pfn_cuGetProcAddress_v2)need_dlsym("cuGetProcAddress_v2");
        gpa2 = (pfn_cuGetProcAddress_v2)need_proc("cuGetProcAddress");
        if (strcmp(path, "proc_ptsz") == 0) gpa_flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    }
    d->alloc = (pfn_cuMemAlloc_v2)need_proc("cuMemAlloc");
    d->alloc_pitch = (pfn_cuMemAllocPitch_v2)need_proc("cuMemAllocPitch");
    d->alloc_managed = (pfn_cuMemAllocManaged)need_proc("cuMemAllocManaged");
    d->free = (pfn_cuMemFree_v2)need_proc("cuMemFree");
    d->get_info = (pfn_cuMemGetInfo_v2)need_proc("cuMemGetInfo");
    d->total_mem = (pfn_cuDeviceTotalMem_v2)need_proc("cuDeviceTotalMem");
    d->create = (pfn_cuMemCreate)need_proc("cuMemCreate");
    d->release = (pfn_cuMemRelease)need_proc("cuMemRelease");
    d->alloc_async = (pfn_cuMemAllocAsync)need_proc("cuMemAllocAsync");
    d->alloc_pool = (pfn_cuMemAllocFromPoolAsync)need_proc("cuMemAllocFromPoolAsync");
    d->free_async = (pfn_cuMemFreeAsync)need_proc("cuMemFreeAsync");
    d->default_pool = (pfn_cuDeviceGetDefaultMemPool)need_proc("cuDeviceGetDefaultMemPool");
    d->addr_reserve = (pfn_cuMemAddressReserve)need_proc("cuMemAddressReserve");
    d->addr_free = (pfn_cuMemAddressFree)need_proc("cuMemAddressFree");
    d->map = (pfn_cuMemMap)need_proc("cuMemMap");
    d->unmap = (pfn_cuMemUnmap)need_proc("cuMemUnmap");
}

static void use_device(const driver *d, int ordinal) {
    CUdevice dev;
    CUcontext ctx;
    if (d->device_get(&dev, ordinal) != CUDA_SUCCESS) die("no device", "");
    if (d->ctx_retain(&ctx, dev) != CUDA_SUCCESS || d->ctx_set(ctx) != CUDA_SUCCESS) die("no context", "");
}

/* ---- one allocation of each kind ---------------------------------------------------------------- */

typedef struct chunk {
    unsigned long long key;
    int kind;
} chunk;

enum { K_ALLOC, K_PITCH, K_MANAGED, K_CREATE, K_ASYNC, K_POOL };
static const char *const kind_names[] = { "alloc", "pitch", "managed", "create", "async", "pool" };

static CUresult take(const driver *d, int kind, size_t bytes, int dev, chunk *c) {
    CUdeviceptr p = 0;
    CUresult r;
    c->kind = kind;
    switch (kind) {
    case K_ALLOC: r = d->alloc(&p, bytes); break;
    case K_PITCH: {
        size_t pitch = 0;   /* rows of 1 MiB: the pitch equals the width */
        r = d->alloc_pitch(&p, &pitch, 1u << 20, bytes >> 20, 4);
        break;
    }
    case K_MANAGED: r = d->alloc_managed(&p, bytes, 1); break;
    case K_CREATE: {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        CUmemGenericAllocationHandle h = 0;
        r = d->create(&h, bytes, &prop, 0);
        p = h;
        break;
    }
    case K_ASYNC: r = d->alloc_async(&p, bytes, NULL); break;
    default: {
        CUmemoryPool pool = NULL;
        r = d->default_pool(&pool, dev);
        if (r == CUDA_SUCCESS) r = d->alloc_pool(&p, bytes, pool, NULL);
        break;
    }
    }
    c->key = p;
    return r;
}

static CUresult give(const driver *d, const chunk *c) {
    switch (c->kind) {
    case K_CREATE: return d->release(c->key);
    case K_ASYNC:
    case K_POOL: return d->free_async(c->key, NULL);
    default: return d->free(c->key);
    }
}

static void print_info(const driver *d, int dev, const char *prefix) {
    size_t f = 0, t = 0, dt = 0;
    CUresult r1 = d->get_info(&f, &t), r2 = d->total_mem(&dt, dev);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS) die("cuMemGetInfo or cuDeviceTotalMem failed", "");
    if (strcmp(prefix, "info") == 0) printf("total=%zu free=%zu devtotal=%zu\n", t, f, dt);
    else printf("%s=%zu total=%zu\n", prefix, f, t);
}

static int scenario_fill(const driver *d, const char *kind_name, size_t mib, int dev) {
    int kind = -1;
    for (int k = 0; k < 6; k++)
        if (strcmp(kind_names[k], kind_name) == 0) kind = k;
    if (kind < 0) die("unknown kind", kind_name);
    static chunk chunks[MAX_CHUNKS];
    int n = 0;
    CUresult err = CUDA_SUCCESS;
    while (n < MAX_CHUNKS && (err = take(d, kind, mib << 20, dev, &chunks[n])) == CUDA_SUCCESS) n++;
    printf("chunks=%d bytes=%zu err=%d\n", n, (size_t)n * (mib << 20), (int)err);
    if (n > 0) {
        if (give(d, &chunks[n - 1]) != CUDA_SUCCESS) die("free failed", "");
        printf("refill=%d\n", (int)take(d, kind, mib << 20, dev, &chunks[n - 1]));
    }
    for (int i = 0; i < n; i++)
        if (give(d, &chunks[i]) != CUDA_SUCCESS) die("free failed", "");
    print_info(d, dev, "free_after");
    return 0;
}

/* ---- a free the driver refuses ----------------------------------------------------------------- */

/* A block of `bytes` that only its mapping holds: cuMemCreate, a reserved range, cuMemMap there,
 * cuMemRelease of the handle (the memory goes at the cuMemUnmap). */
static CUresult take_mapped(const driver *d, size_t bytes, int dev, CUdeviceptr *va) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = d->create(&h, bytes, &prop, 0);
    if (r != CUDA_SUCCESS) return r;
    if (d->addr_reserve(va, bytes, 0, 0, 0) != CUDA_SUCCESS || d->map(*va, bytes, 0, h, 0) != CUDA_SUCCESS)
        die("cuMemAddressReserve or cuMemMap failed", "");
    if (d->release(h) != CUDA_SUCCESS) die("cuMemRelease failed", "");
    return CUDA_SUCCESS;
}

static int scenario_refused(const driver *d, const char *kind_name, size_t mib, int dev) {
    size_t bytes = mib << 20;
    int mapped = strcmp(kind_name, "map") == 0, kind = mapped ? K_CREATE : -1;
    for (int k = 0; k < 6 && kind < 0; k++)
        if (strcmp(kind_names[k], kind_name) == 0) kind = k;
    if (kind < 0) die("unknown kind", kind_name);
    chunk c = { 0, kind };
    CUdeviceptr va = 0;
    CUresult r = mapped ? take_mapped(d, bytes, dev, &va) : take(d, kind, bytes, dev, &c);
    printf("take=%d\n", (int)r);
    if (r != CUDA_SUCCESS) return 0;
    print_info(d, dev, "before");
    printf("free=%d\n", (int)(mapped ? d->unmap(va, bytes) : give(d, &c)));
    print_info(d, dev, "after");
    chunk again = { 0, kind };
    CUdeviceptr va2 = 0;
    r = mapped ? take_mapped(d, bytes, dev, &va2) : take(d, kind, bytes, dev, &again);
    printf("again=%d\n", (int)r);
    if (r == CUDA_SUCCESS && (mapped ? d->unmap(va2, bytes) : give(d, &again)) != CUDA_SUCCESS) die("free failed", "");
    printf("free_again=%d\n", (int)(mapped ? d->unmap(va, bytes) : give(d, &c)));
    if (mapped && d->addr_free(va, bytes) != CUDA_SUCCESS) die("cuMemAddressFree failed", "");
    print_info(d, dev, "free_after");
    return 0;
}

/* ---- threads: together they never pass the limit, and every byte comes back -------------------- */

static const driver *thread_driver;

typedef struct filler {
    chunk c[64];
    int n;
} filler;

/* Allocates 64 MiB blocks until the first failure and keeps them (the main thread frees them). */
static void *fill_thread(void *arg) {
    filler *f = arg;
    use_device(thread_driver, 0);
    while (f->n < 64 && take(thread_driver, K_ALLOC, 64u << 20, 0, &f->c[f->n]) == CUDA_SUCCESS) f->n++;
    return NULL;
}

static void *churn_thread(void *arg) {
    (void)arg;
    use_device(thread_driver, 0);
    for (int i = 0; i < 2000; i++) {
        chunk c;
        if (take(thread_driver, (i & 1) ? K_ASYNC : K_ALLOC, 1u << 20, 0, &c) == CUDA_SUCCESS) give(thread_driver, &c);
    }
    return NULL;
}

static int scenario_threads(const driver *d) {
    enum { T = 8 };
    static filler fillers[T];
    pthread_t th[T];
    thread_driver = d;
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, fill_thread, &fillers[i]);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    size_t total = 0;
    for (int i = 0; i < T; i++) {
        total += (size_t)fillers[i].n << 26;
        for (int k = 0; k < fillers[i].n; k++) give(d, &fillers[i].c[k]);
    }
    printf("threads_bytes=%zu\n", total);
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, churn_thread, NULL);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    use_device(d, 0);
    print_info(d, 0, "free_after");
    return 0;
}

/* ---- NVML ------------------------------------------------------------------------------------------ */

/* "nvml i total= free= used=" and "nvml_v2 i ..." for every NVML device (libnvidia-ml.so.1 by dlopen + dlsym). */
static int print_nvml(void) {
    void *ml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!ml) die("cannot load", dlerror());
    pfn_nvmlInit_v2 init = (pfn_nvmlInit_v2)dlsym(ml, "nvmlInit_v2");
    pfn_nvmlDeviceGetCount_v2 count = (pfn_nvmlDeviceGetCount_v2)dlsym(ml, "nvmlDeviceGetCount_v2");
    pfn_nvmlDeviceGetHandleByIndex_v2 handle =
        (pfn_nvmlDeviceGetHandleByIndex_v2)dlsym(ml, "nvmlDeviceGetHandleByIndex_v2");
    pfn_nvmlDeviceGetMemoryInfo info = (pfn_nvmlDeviceGetMemoryInfo)dlsym(ml, "nvmlDeviceGetMemoryInfo");
    pfn_nvmlDeviceGetMemoryInfo_v2 info2 = (pfn_nvmlDeviceGetMemoryInfo_v2)dlsym(ml, "nvmlDeviceGetMemoryInfo_v2");
    if (!init || !count || !handle || !info || !info2) die("dlsym found no", "NVML function");
    unsigned int n = 0;
    if (init() != NVML_SUCCESS || count(&n) != NVML_SUCCESS) die("nvmlInit_v2 or nvmlDeviceGetCount_v2 failed", "");
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t h;
        nvmlMemory_t m;
        nvmlMemory_v2_t m2;
        memset(&m2, 0, sizeof m2);
        m2.version = nvmlMemory_v2;
        if (handle(i, &h) != NVML_SUCCESS || info(h, &m) != NVML_SUCCESS || info2(h, &m2) != NVML_SUCCESS)
            die("NVML memory query failed", "");
        printf("nvml %u total=%llu free=%llu used=%llu\n", i, m.total, m.free, m.used);
        printf("nvml_v2 %u total=%llu reserved=%llu free=%llu used=%llu\n", i, m2.total, m2.reserved, m2.free,
               m2.used);
    }
    return 0;
}

static int scenario_nvml(const driver *d, size_t mib) {
    CUdeviceptr p = 0;
    printf("nvml_alloc=%d\n", (int)d->alloc(&p, mib << 20));
    print_info(d, 0, "cuinfo");
    return print_nvml();
}

/* The fault test's member (tests/shim/fault_test.py): allocates and frees at random until MS ms have
 * passed; out of memory (a limit) is counted, any other failure ends it with status 3. */
static int scenario_churn(const driver *d, unsigned long long seed, long ms, size_t maxmib) {
    unsigned long long x = seed * 0x9e3779b97f4a7c15ull + 1;
    chunk live[16];
    int n = 0;
    long ok = 0, refused = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (maxmib < 16) maxmib = 16;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms) break;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (n < 16 && (n == 0 || x % 3 != 0)) {
            size_t mib = 16 + (size_t)((x >> 8) % (maxmib - 15));
            CUresult r = take(d, K_ALLOC, mib << 20, 0, &live[n]);
            if (r == CUDA_SUCCESS) n++, ok++;
            else if (r == CUDA_ERROR_OUT_OF_MEMORY) refused++;
            else { fprintf(stderr, "churn: cuMemAlloc: error %d\n", (int)r); return 3; }
        } else {
            int k = (int)((x >> 16) % (unsigned)n);
            if (give(d, &live[k]) != CUDA_SUCCESS) { fputs("churn: cuMemFree failed\n", stderr); return 3; }
            live[k] = live[--n];
        }
        usleep((useconds_t)((x >> 24) % 2000));
    }
    while (n > 0)
        if (give(d, &live[--n]) != CUDA_SUCCESS) { fputs("churn: cuMemFree failed\n", stderr); return 3; }
    printf("churn ok=%ld refused=%ld\n", ok, refused);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "nvml_only") == 0) {   /* NVML without CUDA, as nvidia-smi */
        int rc = print_nvml();
        printf("cuda_loaded=%d\n", dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) != NULL);
        return rc;
    }
    if (argc < 3) {
        fputs("usage: app_driver dlsym|proc|proc_v2|proc_ptsz info|fill|threads|mixed|many [ARGS] | app_driver nvml_only\n", stderr);
        return 2;
    }
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) die("cannot load", dlerror());
    driver d;
    memset(&d, 0, sizeof d);
    d.init = (pfn_cuInit)need_dlsym("cuInit");
    d.device_get = (pfn_cuDeviceGet)need_dlsym("cuDeviceGet");
    d.ctx_retain = (pfn_cuDevicePrimaryCtxRetain)need_dlsym("cuDevicePrimaryCtxRetain");
    d.ctx_set = (pfn_cuCtxSetCurrent)need_dlsym("cuCtxSetCurrent");
    if (strcmp(argv[1], "dlsym") == 0) resolve_by_dlsym(&d);
    else if (!strcmp(argv[1], "proc") || !strcmp(argv[1], "proc_v2") || !strcmp(argv[1], "proc_ptsz"))
        resolve_by_proc(&d, argv[1]);
    else die("unknown path", argv[1]);
    if (d.init(0) != CUDA_SUCCESS) die("cuInit failed", "");

    const char *sc = argv[2];
    if (strcmp(sc, "info") == 0) {
        int dev = argc > 3 ? atoi(argv[3]) : 0;
        use_device(&d, dev);
        print_info(&d, dev, "info");
        return 0;
    }
    if (strcmp(sc, "fill") == 0 && argc >= 5) {
        int dev = argc > 5 ? atoi(argv[5]) : 0;
        use_device(&d, dev);
        return scenario_fill(&d, argv[3], (size_t)strtoull(argv[4], NULL, 10), dev);
    }
    if (strcmp(sc, "pitch") == 0 && argc >= 5) {   /* counted as pitch x height, not width x height */
        use_device(&d, 0);
        CUdeviceptr p = 0;
        size_t pitch = 0;
        CUresult r = d.alloc_pitch(&p, &pitch, (size_t)strtoull(argv[3], NULL, 10), (size_t)strtoull(argv[4], NULL, 10), 4);
        printf("pitch_alloc=%d pitch=%zu\n", (int)r, r == CUDA_SUCCESS ? pitch : 0);
        print_info(&d, 0, "held");
        if (r == CUDA_SUCCESS && d.free(p) != CUDA_SUCCESS) die("free failed", "");
        print_info(&d, 0, "free_after");
        return 0;
    }
    if (strcmp(sc, "churn") == 0 && argc >= 6) {
        int dev = argc > 6 ? atoi(argv[6]) : 0;
        use_device(&d, dev);
        return scenario_churn(&d, strtoull(argv[3], NULL, 10), strtol(argv[4], NULL, 10),
                              (size_t)strtoull(argv[5], NULL, 10));
    }
    if (strcmp(sc, "hold") == 0 && argc >= 5) {
        int dev = argc > 5 ? atoi(argv[5]) : 0;
        int kind = -1;
        for (int k = 0; k < 6; k++)
            if (strcmp(kind_names[k], argv[3]) == 0) kind = k;
        if (kind < 0) die("unknown kind", argv[3]);
        use_device(&d, dev);
        chunk c;
        if (argc > 6) {
            if (take(&d, kind, (size_t)strtoull(argv[6], NULL, 10) << 20, dev, &c) != CUDA_SUCCESS) die("peak block", "");
            if (give(&d, &c) != CUDA_SUCCESS) die("free failed", "");
        }
        CUresult r = take(&d, kind, (size_t)strtoull(argv[4], NULL, 10) << 20, dev, &c);
        printf("hold=%d\n", (int)r);
        fflush(stdout);
        char buf[64];
        while (read(0, buf, sizeof buf) > 0) {
        }
        if (r == CUDA_SUCCESS && give(&d, &c) != CUDA_SUCCESS) die("free failed", "");
        print_info(&d, dev, "free_after");
        return 0;
    }
    if (strcmp(sc, "launches") == 0 && argc >= 4) {   /* the cost of a kernel launch (activity.c) */
        use_device(&d, 0);
        chunk c;
        if (take(&d, K_ALLOC, 1u << 20, 0, &c) != CUDA_SUCCESS) die("alloc failed", "");   /* the slot, the page */
        pfn_cuLaunchKernel launch = (pfn_cuLaunchKernel)need_dlsym("cuLaunchKernel");
        unsigned long long n = strtoull(argv[3], NULL, 10);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (unsigned long long i = 0; i < n; i++)
            if (launch((CUfunction)(uintptr_t)0x1000, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
                die("launch failed", "");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        printf("launches=%llu ns_per_launch=%.1f\n", n, n ? ns / (double)n : 0.0);
        return 0;
    }
    if (strcmp(sc, "script") == 0) {
        int dev = argc > 3 ? atoi(argv[3]) : 0;
        use_device(&d, dev);
        static chunk live[MAX_CHUNKS];
        int n = 0;
        char line[128];
        while (fgets(line, sizeof line, stdin)) {
            if (strncmp(line, "pitch ", 6) == 0) {
                CUresult r = n < MAX_CHUNKS ? take(&d, K_PITCH, (size_t)strtoull(line + 6, NULL, 10) << 20, dev, &live[n])
                                            : CUDA_ERROR_OUT_OF_MEMORY;
                if (r == CUDA_SUCCESS) n++;
                printf("pitch=%d\n", (int)r);
            } else if (strncmp(line, "alloc ", 6) == 0) {
                CUresult r = n < MAX_CHUNKS ? take(&d, K_ALLOC, (size_t)strtoull(line + 6, NULL, 10) << 20, dev, &live[n])
                                            : CUDA_ERROR_OUT_OF_MEMORY;
                if (r == CUDA_SUCCESS) n++;
                printf("alloc=%d\n", (int)r);
            } else if (strncmp(line, "free", 4) == 0) {
                printf("free=%d\n", n > 0 ? (int)give(&d, &live[--n]) : -1);
            } else if (strncmp(line, "held", 4) == 0) {
                void *fake = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
                fake_cuda_held_fn *held = fake ? (fake_cuda_held_fn *)dlsym(fake, "fake_cuda_held") : NULL;
                fake_cuda_host_held_fn *host = fake ? (fake_cuda_host_held_fn *)dlsym(fake, "fake_cuda_host_held") : NULL;
                printf("held=%zu host=%zu\n", held ? held(dev) : 0, host ? host() : 0);
            } else if (strncmp(line, "info", 4) == 0) {
                size_t f = 0, t = 0;
                CUresult r = d.get_info(&f, &t);
                printf("free=%zu total=%zu err=%d\n", f, t, (int)r);
            } else if (strncmp(line, "launch", 6) == 0) {
                pfn_cuLaunchKernel launch = (pfn_cuLaunchKernel)need_dlsym("cuLaunchKernel");
                printf("launch=%d\n", (int)launch((CUfunction)(uintptr_t)0x1000, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
            } else if (strncmp(line, "poke ", 5) == 0) {
                fake_cuda_poke_fn *poke = (fake_cuda_poke_fn *)need_dlsym("fake_cuda_poke");
                printf("poke=%d\n", poke(strtoull(line + 5, NULL, 0)));
            } else if (strncmp(line, "peek", 4) == 0) {
                fake_cuda_peek_fn *peek = (fake_cuda_peek_fn *)need_dlsym("fake_cuda_peek");
                printf("peek=0x%llx\n", peek());
            } else {
                printf("unknown=%s", line);
            }
            fflush(stdout);
        }
        return 0;
    }
    if (strcmp(sc, "nvml") == 0 && argc >= 4) {
        use_device(&d, 0);
        return scenario_nvml(&d, (size_t)strtoull(argv[3], NULL, 10));
    }
    if (strcmp(sc, "refused") == 0 && argc >= 5) {
        int dev = argc > 5 ? atoi(argv[5]) : 0;
        use_device(&d, dev);
        return scenario_refused(&d, argv[3], (size_t)strtoull(argv[4], NULL, 10), dev);
    }
    if (strcmp(sc, "threads") == 0) return scenario_threads(&d);
    if (strcmp(sc, "mixed") == 0) {
        driver by_proc = d;
        resolve_by_proc(&by_proc, "proc_v2");
        use_device(&d, 0);
        chunk c;
        CUresult r = take(&d, K_ALLOC, 768u << 20, 0, &c);
        printf("alloc=%d\n", (int)r);
        if (r == CUDA_SUCCESS) {
            printf("free=%d\n", (int)give(&by_proc, &c));
            printf("double_free=%d\n", (int)give(&d, &c));   /* the driver's error; nothing counted */
        }
        print_info(&d, 0, "free_after");
        return 0;
    }
    if (strcmp(sc, "many") == 0) {
        enum { N = 20000 };
        static chunk c[N];
        use_device(&d, 0);
        int n = 0;
        while (n < N && take(&d, K_ALLOC, 16u << 10, 0, &c[n]) == CUDA_SUCCESS) n++;
        printf("many=%d\n", n);
        for (int i = 0; i < n; i++) {   /* a fixed permutation: 7919 is prime, coprime with N */
            int k = (int)(((long)i * 7919) % n);
            if (give(&d, &c[k]) != CUDA_SUCCESS) die("free failed", "");
        }
        print_info(&d, 0, "free_after");
        return 0;
    }
    die("unknown scenario", sc);
    return 2;
}
