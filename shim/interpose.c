/*
 * interpose.c: how calls reach libvram_preload.so, and how it reaches the real driver. Owns the
 * table of interposed names (SHIM_HOOKS, SHIM_NVML_HOOKS in shim.h: every exported symbol but
 * dlsym), the real dlsym, loading libcuda.so.1, and the exported cuGetProcAddress (v1 and _v2) and
 * dlsym that hand out this library's versions.
 *
 *   - Programs linked against libcuda bind to the exported symbols (LD_PRELOAD puts this library
 *     first in the global lookup scope).
 *   - Programs that dlopen("libcuda.so.1") and dlsym the driver's symbols (the CUDA runtime, JAX,
 *     PyTorch's lazy loading) go through the exported dlsym: for an interposed name that resolves,
 *     it returns this library's version; everything else is forwarded to the real dlsym as a tail
 *     call, so that RTLD_NEXT keeps meaning "after the caller" (the build compiles the shim with
 *     -O2 -foptimize-sibling-calls for that; tests/shim checks it). Keep dlsym as it is.
 *   - Entry points obtained through cuGetProcAddress (v1 and _v2; the CUDA runtime of CUDA 12/13
 *     gets all its driver functions that way) are replaced by this library's versions for the
 *     interposed names, including cuGetProcAddress itself and the per-thread-stream (_ptsz)
 *     variants of the stream-ordered calls.
 *   - NVML's nvmlDeviceGetMemoryInfo and _v2 are exported and handed out by dlsym the same way
 *     (nvml.c).
 * The real functions come from dlopen("libcuda.so.1") (the already loaded driver, found by its
 * soname) and the real dlsym (dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), else "GLIBC_2.2.5").
 *
 * Every interposed call gets its driver function through shim_real_fn, which counts the call as the
 * process's activity (activity.c) before the driver is called (the hot ACTIVITY entries through
 * shim.h's shim_real_hot, which skips the pthread_once once g.real_ready is set).
 *
 * Invariants: g.real is written once, inside shim_cuda_init under its pthread_once, and read only
 * after it (shim_real_fn, shim_cuda_load, or shim_real_hot after its acquire load of g.real_ready,
 * stored with release as the init's last step); the hook tables are constant. No lock of the shim is
 * taken here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

typedef struct shim_hook {
    const char *symbol;   /* exported name, "cuMemAlloc_v2" */
    const char *base;     /* name given to cuGetProcAddress, "cuMemAlloc" */
    int         min_version;
    int         ptsz;
    void       *wrapper;  /* this library's function */
} shim_hook;

static const shim_hook shim_hooks[SHIM_NUM_HOOKS] = {
#define X(sym, base, ver, ptsz, role) { #sym, base, ver, ptsz, (void *)sym },
    SHIM_HOOKS(X)
#undef X
};

const shim_nvml_hook shim_nvml_hooks[SHIM_NUM_NVML_HOOKS] = {
#define X(sym) { #sym, (void *)sym },
    SHIM_NVML_HOOKS(X)
#undef X
};

static pthread_once_t shim_dl_once = PTHREAD_ONCE_INIT;
static pthread_once_t shim_cuda_once = PTHREAD_ONCE_INIT;
static shim_dlsym_fn shim_real_dlsym_fn;

/* ---- the real dlsym and the driver ------------------------------------------------------------- */

static void shim_dl_init(void) {
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    shim_real_dlsym_fn = (shim_dlsym_fn)f;
}

shim_dlsym_fn shim_real_dlsym(void) {
    pthread_once(&shim_dl_once, shim_dl_init);
    return shim_real_dlsym_fn;
}

void shim_error_text(CUresult r, char *buf, size_t len) {
    cuda_abi_error_text(r, g.real.cuGetErrorName, g.real.cuGetErrorString, buf, len);
}

static void shim_cuda_init(void) {
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    shim_env();
    g.real.lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (g.real.lib && real_dlsym) {
        for (int i = 0; i < SHIM_NUM_HOOKS; i++) g.real.fn[i] = real_dlsym(g.real.lib, shim_hooks[i].symbol);
#define X(sym) g.real.sym = (pfn_##sym)real_dlsym(g.real.lib, #sym);
        SHIM_DRIVER_EXTRAS(X)
#undef X
    }
    if (g.log) shim_env_say(g.real.lib != NULL);
    __atomic_store_n(&g.real_ready, 1, __ATOMIC_RELEASE);   /* shim_real_hot's fast path from now on */
}

void shim_cuda_load(void) { pthread_once(&shim_cuda_once, shim_cuda_init); }

static void *shim_real_fn_uncounted(int i) {
    pthread_once(&shim_cuda_once, shim_cuda_init);
    return g.real.fn[i];
}

/* Every interposed call asks for its driver function first: the call is seen here (activity.c). */
void *shim_real_fn(int i) {
    shim_activity();
    return shim_real_fn_uncounted(i);
}

int shim_current_device(void) {
    CUdevice dev = -1;
    pthread_once(&shim_cuda_once, shim_cuda_init);
    if (!g.real.cuCtxGetDevice || g.real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
    return dev >= 0 && dev < SHIM_MAX_DEVICES ? dev : -1;
}

/* cuDeviceGetUuid_v2 / cuDeviceGetUuid of the real driver; "unknown-<ordinal>" when there is none. */
void shim_device_uuid(int dev, char *out, size_t len) {
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    pfn_cuDeviceGetUuid get = NULL;
    pfn_cuDeviceGet device_get = NULL;
    if (g.real.lib && real_dlsym) {
        get = (pfn_cuDeviceGetUuid)real_dlsym(g.real.lib, "cuDeviceGetUuid_v2");
        if (!get) get = (pfn_cuDeviceGetUuid)real_dlsym(g.real.lib, "cuDeviceGetUuid");
        device_get = (pfn_cuDeviceGet)real_dlsym(g.real.lib, "cuDeviceGet");
    }
    CUdevice d = dev;
    CUuuid u;
    if (get && (!device_get || device_get(&d, dev) == CUDA_SUCCESS) && get(&u, d) == CUDA_SUCCESS) {
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    } else {
        snprintf(out, len, "unknown-%d", dev);   /* group totals then go by ordinal */
    }
}

/* ---- entry points handed out by cuGetProcAddress and dlsym ----------------------------------------- */

/* This library's version of what the driver returned for `symbol`, or NULL to keep the driver's.
 * The driver's pointer is matched against the exported versions of every interposed symbol first
 * (its identity says its parameters, whatever name it was asked for by); when it is none of them
 * (a driver may hand out internal entry points) the newest version of `symbol` at most cuda_version
 * is taken, with the per-thread-stream flag its _ptsz variant where there is one. Where a base name
 * came to mean another function (cuGraphInstantiate from CUDA 12.0, whose parameters may be those
 * of cuGraphInstantiateWithFlags), an unknown pointer is kept: launches still count (graphs.c). */
static void *shim_proc_replacement(const char *symbol, void *driver_fn, int cuda_version, cuuint64_t flags) {
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    for (int i = 0; i < SHIM_NUM_HOOKS; i++)
        if (driver_fn == shim_real_fn_uncounted(i) || driver_fn == shim_hooks[i].wrapper) return shim_hooks[i].wrapper;
    if (strcmp(symbol, "cuGraphInstantiate") == 0 && cuda_version >= 12000) return NULL;
    int best = -1;
    for (int i = 0; i < SHIM_NUM_HOOKS; i++) {
        const shim_hook *h = &shim_hooks[i];
        if (strcmp(h->base, symbol) != 0) continue;
        if ((h->ptsz && !ptsz) || h->min_version > cuda_version) continue;
        /* the newest version; with the per-thread flag its _ptsz variant where there is one */
        if (best < 0 || h->min_version > shim_hooks[best].min_version ||
            (h->min_version == shim_hooks[best].min_version && h->ptsz))
            best = i;
    }
    return best >= 0 ? shim_hooks[best].wrapper : NULL;
}

SHIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags) {
    pfn_cuGetProcAddress real = SHIM_REAL(cuGetProcAddress);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(symbol, pfn, cuda_version, flags);
    if (r == CUDA_SUCCESS && symbol && pfn && *pfn) {
        void *mine = shim_proc_replacement(symbol, *pfn, cuda_version, flags);
        if (mine) *pfn = mine;
    }
    return r;
}

SHIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    pfn_cuGetProcAddress_v2 real = SHIM_REAL(cuGetProcAddress_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(symbol, pfn, cuda_version, flags, status);
    if (r == CUDA_SUCCESS && symbol && pfn && *pfn) {
        void *mine = shim_proc_replacement(symbol, *pfn, cuda_version, flags);
        if (mine) *pfn = mine;
    }
    return r;
}

static int shim_hook_index(const char *symbol) {
    if (symbol[0] != 'c' || symbol[1] != 'u') return -1;
    for (int i = 0; i < SHIM_NUM_HOOKS; i++)
        if (strcmp(shim_hooks[i].symbol, symbol) == 0) return i;
    return -1;
}

static int shim_nvml_hook_index(const char *symbol) {
    if (strncmp(symbol, "nvml", 4) != 0) return -1;
    for (int i = 0; i < SHIM_NUM_NVML_HOOKS; i++)
        if (strcmp(shim_nvml_hooks[i].symbol, symbol) == 0) return i;
    return -1;
}

/* An interposed driver (or NVML) name that resolves gives this library's version; anything else goes to the
 * real dlsym as a tail call, so that the real dlsym sees the original caller (RTLD_NEXT). */
SHIM_EXPORT void *dlsym(void *handle, const char *symbol) {
    shim_dlsym_fn real = shim_real_dlsym();
    int i = shim_hook_index(symbol);   /* symbol is nonnull, as for the real dlsym */
    if (i >= 0) return real(handle, symbol) ? shim_hooks[i].wrapper : NULL;
    i = shim_nvml_hook_index(symbol);
    if (i >= 0) return real(handle, symbol) ? shim_nvml_hooks[i].wrapper : NULL;
    return real(handle, symbol);
}
