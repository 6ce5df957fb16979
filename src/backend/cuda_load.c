/*
 * cuda_load.c: the CUDA driver library under the backend. libcuda.so.1 is loaded with dlopen at
 * open() (no CUDA toolkit is needed to build), its functions are resolved with dlsym (the versioned
 * names the driver's cuda.h maps to) into vram__cuda_st.api, cuInit runs and the devices are found, each
 * with its VMM support and granularity. A device's primary context is retained lazily, on its first
 * call that needs one; vram__cuda_enter pushes it on the calling thread and vram__cuda_leave pops it, so the
 * caller's own current context is left as it was. Driver failures become VRAM_ERR_OUT_OF_MEMORY
 * (CUDA_ERROR_OUT_OF_MEMORY) or VRAM_ERR_DRIVER with the call, the driver's error name and its
 * description (vram__cuda_fail); a missing driver, a stub library, a driver too old or no device are
 * VRAM_ERR_NO_DEVICE with what to do.
 *
 * Invariants: vram__cuda_st is all zero, or the library is loaded with every essential function resolved
 * and count >= 1 devices recorded; vmm_api is 1 only when every VMM function was found.
 * Lock: cuda_retain_lock serialises retaining a primary context (a device's ctx is set once).
 * Shared with cuda.c through cuda_internal.h.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_internal.h"

/* ---- the driver's functions ----------------------------------------------------------------- */

typedef struct cuda_sym {
    const char *name;   /* the name cuda.h maps the call to */
    const char *alt;    /* an older name with the same ABI, or NULL */
    size_t      offset; /* of the pointer in cuda_api */
    cuda_need   need;
} cuda_sym;

#define CUDA_SYM(field, type, name, alt, need) { name, alt, offsetof(cuda_api, field), need },

static const cuda_sym cuda_syms[] = {
    CUDA_BACKEND_FUNCTIONS(CUDA_SYM)
};

cuda_state vram__cuda_st;

static pthread_mutex_t cuda_retain_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- errors --------------------------------------------------------------------------------- */

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
static void cuda_error_text(CUresult r, char *buf, size_t len) {
    cuda_abi_error_text(r, vram__cuda_st.api.GetErrorName, vram__cuda_st.api.GetErrorString, buf, len);
}

static vram_status cuda_status(CUresult r) {
    return r == CUDA_ERROR_OUT_OF_MEMORY ? VRAM_ERR_OUT_OF_MEMORY : VRAM_ERR_DRIVER;
}

vram_status vram__cuda_fail(CUresult r, const char *fmt, ...) {
    char what[512], err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cuda_error_text(r, err, sizeof err);
    return vram__fail(cuda_status(r), "%s: %s", what, err);
}

/* ' CUDA_VISIBLE_DEVICES="..." may hide every device.' when it is set, else "". */
static void cuda_visible_hint(char *buf, size_t len) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL) snprintf(buf, len, "%s", "");
    else snprintf(buf, len, " CUDA_VISIBLE_DEVICES=\"%.64s\" is set and may hide every device.", v);
}

/* The file the driver library was loaded from, or `fallback`. */
static const char *cuda_lib_path(const char *fallback) {
    Dl_info info;
    void *sym = dlsym(vram__cuda_st.lib, "cuInit");
    if (sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL) return info.dli_fname;
    return fallback;
}

/* ---- loading -------------------------------------------------------------------------------- */

void vram__cuda_unload(void) {
    free(vram__cuda_st.devs);
    if (vram__cuda_st.lib != NULL) dlclose(vram__cuda_st.lib);
    memset(&vram__cuda_st, 0, sizeof vram__cuda_st);
}

/* RTLD_NODELETE: the driver keeps threads and process-wide state that must outlive dlclose;
 * a later open() finds the same library again. */
static vram_status cuda_dlopen(void) {
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
    char first[512];
    vram__cuda_st.lib = dlopen("libcuda.so.1", flags);
    if (vram__cuda_st.lib != NULL) return VRAM_OK;
    const char *e = dlerror();
    snprintf(first, sizeof first, "%s", e ? e : "unknown dlopen error");
    vram__cuda_st.lib = dlopen("libcuda.so", flags);
    if (vram__cuda_st.lib != NULL) return VRAM_OK;
    return vram__fail(VRAM_ERR_NO_DEVICE,
                      "no NVIDIA driver: libcuda.so.1 not found (%s). Is this a machine with an "
                      "NVIDIA GPU and driver? In a container, start it with GPU access "
                      "(docker --gpus all). " CUDA_SIM_HINT, first);
}

static void *cuda_dlsym(const cuda_sym *s) {
    void *p = dlsym(vram__cuda_st.lib, s->name);
    if (p == NULL && s->alt != NULL) p = dlsym(vram__cuda_st.lib, s->alt);
    return p;
}

static vram_status cuda_missing(const char *name) {
    int v = 0;
    if (vram__cuda_st.api.DriverGetVersion == NULL || vram__cuda_st.api.DriverGetVersion(&v) != CUDA_SUCCESS)
        v = 0;
    return vram__fail(VRAM_ERR_NO_DEVICE,
                      "the NVIDIA driver library %s (CUDA %d.%d) has no %s: the driver is too old "
                      "for vram; update the NVIDIA driver. " CUDA_SIM_HINT,
                      cuda_lib_path("libcuda.so.1"), v / 1000, (v % 1000) / 10, name);
}

static vram_status cuda_resolve(void) {
    const char *missing = NULL;
    vram__cuda_st.vmm_api = 1;
    for (size_t i = 0; i < sizeof cuda_syms / sizeof cuda_syms[0]; i++) {
        const cuda_sym *s = &cuda_syms[i];
        void *p = cuda_dlsym(s);
        memcpy((char *)&vram__cuda_st.api + s->offset, &p, sizeof p);
        if (p != NULL) continue;
        if (s->need == CUDA_VMM) vram__cuda_st.vmm_api = 0;
        if (s->need == CUDA_ESSENTIAL && missing == NULL) missing = s->name;
    }
    return missing != NULL ? cuda_missing(missing) : VRAM_OK;
}

static vram_status cuda_init_failed(CUresult r) {
    char err[256], hint[160], stub[512] = "";
    cuda_error_text(r, err, sizeof err);
    cuda_visible_hint(hint, sizeof hint);
    if (r == CUDA_ERROR_STUB_LIBRARY)
        snprintf(stub, sizeof stub, " %s is the CUDA toolkit's stub library, not the NVIDIA "
                 "driver: take its directory out of LD_LIBRARY_PATH and run on a machine with an "
                 "NVIDIA GPU and driver.", cuda_lib_path("libcuda.so"));
    return vram__fail(VRAM_ERR_NO_DEVICE, "cuInit failed: %s.%s%s " CUDA_SIM_HINT, err, stub, hint);
}

static vram_status cuda_init_driver(void) {
    CUresult r = vram__cuda_st.api.Init(0);
    if (r != CUDA_SUCCESS) return cuda_init_failed(r);
    int n = 0;
    CUDA_TRY(vram__cuda_st.api.DeviceGetCount(&n), "cuDeviceGetCount");
    if (n > 0) {
        vram__cuda_st.count = n;
        return VRAM_OK;
    }
    char hint[160];
    cuda_visible_hint(hint, sizeof hint);
    return vram__fail(VRAM_ERR_NO_DEVICE, "the NVIDIA driver reports no CUDA device.%s " CUDA_SIM_HINT,
                      hint);
}

/* VMM support and the minimum granularity of a pinned allocation on the device. */
static void cuda_probe_vmm(cuda_device *d) {
    int attr = 0;
    size_t g = 0;
    CUmemAllocationProp prop;
    d->vmm = 0;
    d->granularity = CUDA_DEFAULT_GRANULARITY;
    atomic_store(&d->shareable, 1);
    if (!vram__cuda_st.vmm_api) return;
    if (vram__cuda_st.api.DeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                       d->handle) != CUDA_SUCCESS || !attr)
        return;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d->handle;
    if (vram__cuda_st.api.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS || g == 0 || (g & (g - 1)) != 0)
        return;
    d->vmm = 1;
    d->granularity = g;
}

static vram_status cuda_discover(void) {
    vram__cuda_st.devs = calloc((size_t)vram__cuda_st.count, sizeof *vram__cuda_st.devs);
    if (vram__cuda_st.devs == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < vram__cuda_st.count; i++) pthread_mutex_init(&vram__cuda_st.devs[i].ev_lock, NULL);
    for (int i = 0; i < vram__cuda_st.count; i++) {
        cuda_device *d = &vram__cuda_st.devs[i];
        CUDA_TRY(vram__cuda_st.api.DeviceGet(&d->handle, i), "cuDeviceGet(%d)", i);
        atomic_init(&d->ctx, NULL);
        cuda_probe_vmm(d);
    }
    return VRAM_OK;
}

vram_status vram__cuda_load(void) {
    vram_status s = cuda_dlopen();
    if (s == VRAM_OK) s = cuda_resolve();
    if (s == VRAM_OK) s = cuda_init_driver();
    if (s == VRAM_OK) s = cuda_discover();
    if (s != VRAM_OK) vram__cuda_unload();
    return s;
}

/* ---- devices and contexts ------------------------------------------------------------------- */

vram_status vram__cuda_device_at(int dev, cuda_device **out) {
    if (vram__cuda_st.devs == NULL) return vram__fail(VRAM_ERR_INTERNAL, "the CUDA backend is not open");
    if (dev < 0 || dev >= vram__cuda_st.count)
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "CUDA device %d out of range [0, %d)", dev,
                          vram__cuda_st.count);
    *out = &vram__cuda_st.devs[dev];
    return VRAM_OK;
}

/* The device's primary context, retained on first use. */
static vram_status cuda_context(int dev, cuda_device *d, CUcontext *out) {
    CUcontext c = atomic_load_explicit(&d->ctx, memory_order_acquire);
    CUresult r = CUDA_SUCCESS;
    if (c == NULL) {
        pthread_mutex_lock(&cuda_retain_lock);
        c = atomic_load_explicit(&d->ctx, memory_order_acquire);
        if (c == NULL) r = vram__cuda_st.api.PrimaryCtxRetain(&c, d->handle);
        if (r == CUDA_SUCCESS) atomic_store_explicit(&d->ctx, c, memory_order_release);
        pthread_mutex_unlock(&cuda_retain_lock);
    }
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuDevicePrimaryCtxRetain on device %d", dev);
    *out = c;
    return VRAM_OK;
}

/* Makes the device's primary context current on this thread until vram__cuda_leave(). */
vram_status vram__cuda_enter(int dev) {
    cuda_device *d = NULL;
    CUcontext c = NULL;
    vram_status s = vram__cuda_device_at(dev, &d);
    if (s == VRAM_OK) s = cuda_context(dev, d, &c);
    if (s != VRAM_OK) return s;
    CUDA_TRY(vram__cuda_st.api.CtxPushCurrent(c), "cuCtxPushCurrent on device %d", dev);
    return VRAM_OK;
}

void vram__cuda_leave(void) {
    CUcontext c = NULL;
    vram__cuda_st.api.CtxPopCurrent(&c);
}

/* As vram__cuda_enter, for the virtual memory management calls. */
vram_status vram__cuda_enter_vmm(int dev, cuda_device **out) {
    cuda_device *d = NULL;
    vram_status s = vram__cuda_device_at(dev, &d);
    if (s != VRAM_OK) return s;
    if (!d->vmm)
        return vram__fail(VRAM_ERR_UNSUPPORTED,
                          "virtual memory management (cuMemCreate/cuMemMap) is not supported on "
                          "CUDA device %d%s", dev,
                          vram__cuda_st.vmm_api ? "" : ": the NVIDIA driver is too old to have it");
    *out = d;
    return vram__cuda_enter(dev);
}
