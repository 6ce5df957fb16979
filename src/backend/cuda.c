/*
 * cuda.c: the CUDA driver backend. libcuda.so.1 is loaded with dlopen at open() (no CUDA toolkit
 * is needed to build), its functions are resolved with dlsym (the versioned names the driver's
 * cuda.h maps to), and every call that needs a context runs with the device's primary context
 * pushed on the calling thread and popped afterwards, so that memory works with kernels launched by
 * the CUDA runtime and the caller's own current context is left as it was. Primary contexts are
 * retained lazily, on a device's first such call, and released in close().
 *
 * Driver failures become VRAM_ERR_OUT_OF_MEMORY (CUDA_ERROR_OUT_OF_MEMORY) or VRAM_ERR_DRIVER, with
 * the call, the driver's error name and its description in the message. The virtual memory
 * management functions (cuMemCreate, ...) are optional: without them, or on a device without VMM,
 * caps.vmm_supported is 0 and va_*, phys_*, map and unmap return VRAM_ERR_UNSUPPORTED.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda_api.h"

#define CUDA_DEFAULT_GRANULARITY (2 * VRAM_MIB)
#define CUDA_SIM_HINT "To run without a GPU set VRAM_BACKEND=sim."

/* ---- the driver's functions ----------------------------------------------------------------- */

typedef struct cuda_api {
    cuda_pfn_cuInit Init;
    cuda_pfn_cuDriverGetVersion DriverGetVersion;
    cuda_pfn_cuGetErrorName GetErrorName;
    cuda_pfn_cuGetErrorString GetErrorString;
    cuda_pfn_cuDeviceGetCount DeviceGetCount;
    cuda_pfn_cuDeviceGet DeviceGet;
    cuda_pfn_cuDeviceGetName DeviceGetName;
    cuda_pfn_cuDeviceGetUuid DeviceGetUuid;
    cuda_pfn_cuDeviceGetPCIBusId DeviceGetPCIBusId;
    cuda_pfn_cuDeviceTotalMem_v2 DeviceTotalMem;
    cuda_pfn_cuDeviceGetAttribute DeviceGetAttribute;
    cuda_pfn_cuDevicePrimaryCtxRetain PrimaryCtxRetain;
    cuda_pfn_cuDevicePrimaryCtxRelease PrimaryCtxRelease;
    cuda_pfn_cuCtxPushCurrent_v2 CtxPushCurrent;
    cuda_pfn_cuCtxPopCurrent_v2 CtxPopCurrent;
    cuda_pfn_cuMemGetInfo_v2 MemGetInfo;
    cuda_pfn_cuMemAlloc_v2 MemAlloc;
    cuda_pfn_cuMemFree_v2 MemFree;
    cuda_pfn_cuEventCreate EventCreate;
    cuda_pfn_cuEventRecord EventRecord;
    cuda_pfn_cuEventQuery EventQuery;
    cuda_pfn_cuEventSynchronize EventSynchronize;
    cuda_pfn_cuEventDestroy_v2 EventDestroy;
    /* optional: virtual memory management (CUDA 10.2 and later) */
    cuda_pfn_cuMemAddressReserve MemAddressReserve;
    cuda_pfn_cuMemAddressFree MemAddressFree;
    cuda_pfn_cuMemCreate MemCreate;
    cuda_pfn_cuMemRelease MemRelease;
    cuda_pfn_cuMemMap MemMap;
    cuda_pfn_cuMemUnmap MemUnmap;
    cuda_pfn_cuMemSetAccess MemSetAccess;
    cuda_pfn_cuMemGetAllocationGranularity MemGetAllocationGranularity;
    /* optional: IPC */
    cuda_pfn_cuMemExportToShareableHandle MemExportToShareableHandle;
    cuda_pfn_cuMemImportFromShareableHandle MemImportFromShareableHandle;
    cuda_pfn_cuIpcGetMemHandle IpcGetMemHandle;
    cuda_pfn_cuIpcOpenMemHandle_v2 IpcOpenMemHandle;
    cuda_pfn_cuIpcCloseMemHandle IpcCloseMemHandle;
} cuda_api;

typedef enum cuda_need { CUDA_ESSENTIAL, CUDA_OPTIONAL, CUDA_VMM } cuda_need;

typedef struct cuda_sym {
    const char *name;   /* the name cuda.h maps the call to */
    const char *alt;    /* an older name with the same ABI, or NULL */
    size_t      offset; /* of the pointer in cuda_api */
    cuda_need   need;
} cuda_sym;

#define CUDA_SYM(field, name, alt, need) { name, alt, offsetof(cuda_api, field), need }

static const cuda_sym cuda_syms[] = {
    CUDA_SYM(Init, "cuInit", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(DriverGetVersion, "cuDriverGetVersion", NULL, CUDA_OPTIONAL),
    CUDA_SYM(GetErrorName, "cuGetErrorName", NULL, CUDA_OPTIONAL),
    CUDA_SYM(GetErrorString, "cuGetErrorString", NULL, CUDA_OPTIONAL),
    CUDA_SYM(DeviceGetCount, "cuDeviceGetCount", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(DeviceGet, "cuDeviceGet", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(DeviceGetName, "cuDeviceGetName", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(DeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid", CUDA_OPTIONAL),
    CUDA_SYM(DeviceGetPCIBusId, "cuDeviceGetPCIBusId", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(DeviceTotalMem, "cuDeviceTotalMem_v2", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(DeviceGetAttribute, "cuDeviceGetAttribute", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",
             CUDA_ESSENTIAL),
    CUDA_SYM(CtxPushCurrent, "cuCtxPushCurrent_v2", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(CtxPopCurrent, "cuCtxPopCurrent_v2", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(MemGetInfo, "cuMemGetInfo_v2", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(MemAlloc, "cuMemAlloc_v2", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(MemFree, "cuMemFree_v2", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(EventCreate, "cuEventCreate", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(EventRecord, "cuEventRecord", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(EventQuery, "cuEventQuery", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(EventSynchronize, "cuEventSynchronize", NULL, CUDA_ESSENTIAL),
    CUDA_SYM(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy", CUDA_ESSENTIAL),
    CUDA_SYM(MemAddressReserve, "cuMemAddressReserve", NULL, CUDA_VMM),
    CUDA_SYM(MemAddressFree, "cuMemAddressFree", NULL, CUDA_VMM),
    CUDA_SYM(MemCreate, "cuMemCreate", NULL, CUDA_VMM),
    CUDA_SYM(MemRelease, "cuMemRelease", NULL, CUDA_VMM),
    CUDA_SYM(MemMap, "cuMemMap", NULL, CUDA_VMM),
    CUDA_SYM(MemUnmap, "cuMemUnmap", NULL, CUDA_VMM),
    CUDA_SYM(MemSetAccess, "cuMemSetAccess", NULL, CUDA_VMM),
    CUDA_SYM(MemGetAllocationGranularity, "cuMemGetAllocationGranularity", NULL, CUDA_VMM),
    CUDA_SYM(MemExportToShareableHandle, "cuMemExportToShareableHandle", NULL, CUDA_OPTIONAL),
    CUDA_SYM(MemImportFromShareableHandle, "cuMemImportFromShareableHandle", NULL, CUDA_OPTIONAL),
    CUDA_SYM(IpcGetMemHandle, "cuIpcGetMemHandle", NULL, CUDA_OPTIONAL),
    CUDA_SYM(IpcOpenMemHandle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", CUDA_OPTIONAL),
    CUDA_SYM(IpcCloseMemHandle, "cuIpcCloseMemHandle", NULL, CUDA_OPTIONAL),
};

/* ---- state ---------------------------------------------------------------------------------- */

/* Events the pool is done with are kept (up to this many per device) and recorded again, instead
 * of cuEventDestroy + cuEventCreate for every stream-ordered free. */
#define CUDA_EVENT_SPARES 256

typedef struct cuda_device {
    CUdevice            handle;
    int                 vmm;          /* VMM usable on this device */
    size_t              granularity;
    atomic_int          shareable;    /* physical memory is created exportable (1 until refused) */
    _Atomic(CUcontext)  ctx;          /* retained primary context, NULL until first needed */
    pthread_mutex_t     ev_lock;      /* guards the spare events */
    int                 ev_spares;
    CUevent             ev_spare[CUDA_EVENT_SPARES];   /* destroyed events kept for reuse */
} cuda_device;

/* Written only by open/close (the runtime serialises those with everything else). */
static struct {
    void        *lib;
    cuda_api     api;
    int          vmm_api;   /* every VMM symbol was found */
    int          count;
    cuda_device *devs;
} cuda_st;

static pthread_mutex_t cuda_retain_lock = PTHREAD_MUTEX_INITIALIZER;

static vram__backend_counts cuda_count;

#define CUDA_COUNT(field) vram__backend_count(&cuda_count, field)

/* ---- errors --------------------------------------------------------------------------------- */

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
static void cuda_error_text(CUresult r, char *buf, size_t len) {
    cuda_abi_error_text(r, cuda_st.api.GetErrorName, cuda_st.api.GetErrorString, buf, len);
}

static vram_status cuda_status(CUresult r) {
    return r == CUDA_ERROR_OUT_OF_MEMORY ? VRAM_ERR_OUT_OF_MEMORY : VRAM_ERR_DRIVER;
}

/* Sets "<what>: <NAME> (<description>)" and returns the mapped status. */
static vram_status cuda_fail(CUresult r, const char *fmt, ...) VRAM_PRINTF(2, 3);
static vram_status cuda_fail(CUresult r, const char *fmt, ...) {
    char what[512], err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cuda_error_text(r, err, sizeof err);
    return vram__fail(cuda_status(r), "%s: %s", what, err);
}

#define CUDA_TRY(call, ...)                                            \
    do {                                                               \
        CUresult cuda_r_ = (call);                                     \
        if (cuda_r_ != CUDA_SUCCESS) return cuda_fail(cuda_r_, __VA_ARGS__); \
    } while (0)

/* ' CUDA_VISIBLE_DEVICES="..." may hide every device.' when it is set, else "". */
static void cuda_visible_hint(char *buf, size_t len) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL) snprintf(buf, len, "%s", "");
    else snprintf(buf, len, " CUDA_VISIBLE_DEVICES=\"%.64s\" is set and may hide every device.", v);
}

/* The file the driver library was loaded from, or `fallback`. */
static const char *cuda_lib_path(const char *fallback) {
    Dl_info info;
    void *sym = dlsym(cuda_st.lib, "cuInit");
    if (sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL) return info.dli_fname;
    return fallback;
}

/* ---- loading -------------------------------------------------------------------------------- */

static void cuda_unload(void) {
    free(cuda_st.devs);
    if (cuda_st.lib != NULL) dlclose(cuda_st.lib);
    memset(&cuda_st, 0, sizeof cuda_st);
}

/* RTLD_NODELETE: the driver keeps threads and process-wide state that must outlive dlclose;
 * a later open() finds the same library again. */
static vram_status cuda_dlopen(void) {
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
    char first[512];
    cuda_st.lib = dlopen("libcuda.so.1", flags);
    if (cuda_st.lib != NULL) return VRAM_OK;
    const char *e = dlerror();
    snprintf(first, sizeof first, "%s", e ? e : "unknown dlopen error");
    cuda_st.lib = dlopen("libcuda.so", flags);
    if (cuda_st.lib != NULL) return VRAM_OK;
    return vram__fail(VRAM_ERR_NO_DEVICE,
                      "no NVIDIA driver: libcuda.so.1 not found (%s). Is this a machine with an "
                      "NVIDIA GPU and driver? In a container, start it with GPU access "
                      "(docker --gpus all). " CUDA_SIM_HINT, first);
}

static void *cuda_dlsym(const cuda_sym *s) {
    void *p = dlsym(cuda_st.lib, s->name);
    if (p == NULL && s->alt != NULL) p = dlsym(cuda_st.lib, s->alt);
    return p;
}

static vram_status cuda_missing(const char *name) {
    int v = 0;
    if (cuda_st.api.DriverGetVersion == NULL || cuda_st.api.DriverGetVersion(&v) != CUDA_SUCCESS)
        v = 0;
    return vram__fail(VRAM_ERR_NO_DEVICE,
                      "the NVIDIA driver library %s (CUDA %d.%d) has no %s: the driver is too old "
                      "for vram; update the NVIDIA driver. " CUDA_SIM_HINT,
                      cuda_lib_path("libcuda.so.1"), v / 1000, (v % 1000) / 10, name);
}

static vram_status cuda_resolve(void) {
    const char *missing = NULL;
    cuda_st.vmm_api = 1;
    for (size_t i = 0; i < sizeof cuda_syms / sizeof cuda_syms[0]; i++) {
        const cuda_sym *s = &cuda_syms[i];
        void *p = cuda_dlsym(s);
        memcpy((char *)&cuda_st.api + s->offset, &p, sizeof p);
        if (p != NULL) continue;
        if (s->need == CUDA_VMM) cuda_st.vmm_api = 0;
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
    CUresult r = cuda_st.api.Init(0);
    if (r != CUDA_SUCCESS) return cuda_init_failed(r);
    int n = 0;
    CUDA_TRY(cuda_st.api.DeviceGetCount(&n), "cuDeviceGetCount");
    if (n > 0) {
        cuda_st.count = n;
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
    if (!cuda_st.vmm_api) return;
    if (cuda_st.api.DeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                       d->handle) != CUDA_SUCCESS || !attr)
        return;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d->handle;
    if (cuda_st.api.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS || g == 0 || (g & (g - 1)) != 0)
        return;
    d->vmm = 1;
    d->granularity = g;
}

static vram_status cuda_discover(void) {
    cuda_st.devs = calloc((size_t)cuda_st.count, sizeof *cuda_st.devs);
    if (cuda_st.devs == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < cuda_st.count; i++) pthread_mutex_init(&cuda_st.devs[i].ev_lock, NULL);
    for (int i = 0; i < cuda_st.count; i++) {
        cuda_device *d = &cuda_st.devs[i];
        CUDA_TRY(cuda_st.api.DeviceGet(&d->handle, i), "cuDeviceGet(%d)", i);
        atomic_init(&d->ctx, NULL);
        cuda_probe_vmm(d);
    }
    return VRAM_OK;
}

static void cuda_reset_counters(void) {
    vram__backend_counts_reset(&cuda_count);
}

static vram_status cuda_open(void) {
    if (cuda_st.lib != NULL) return VRAM_OK;
    vram_status s = cuda_dlopen();
    if (s == VRAM_OK) s = cuda_resolve();
    if (s == VRAM_OK) s = cuda_init_driver();
    if (s == VRAM_OK) s = cuda_discover();
    if (s != VRAM_OK) cuda_unload();
    else cuda_reset_counters();
    return s;
}

static void cuda_close(void) {
    if (cuda_st.lib == NULL) return;
    for (int i = 0; i < cuda_st.count; i++) {
        cuda_device *d = &cuda_st.devs[i];
        CUcontext c = atomic_load(&d->ctx), popped = NULL;
        if (c != NULL && d->ev_spares > 0 && cuda_st.api.CtxPushCurrent(c) == CUDA_SUCCESS) {
            while (d->ev_spares > 0) cuda_st.api.EventDestroy(d->ev_spare[--d->ev_spares]);
            cuda_st.api.CtxPopCurrent(&popped);
        }
        pthread_mutex_destroy(&d->ev_lock);
        if (c != NULL) cuda_st.api.PrimaryCtxRelease(d->handle);
    }
    cuda_unload();
}

/* ---- devices and contexts ------------------------------------------------------------------- */

static vram_status cuda_device_at(int dev, cuda_device **out) {
    if (cuda_st.devs == NULL) return vram__fail(VRAM_ERR_INTERNAL, "the CUDA backend is not open");
    if (dev < 0 || dev >= cuda_st.count)
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "CUDA device %d out of range [0, %d)", dev,
                          cuda_st.count);
    *out = &cuda_st.devs[dev];
    return VRAM_OK;
}

/* The device's primary context, retained on first use. */
static vram_status cuda_context(int dev, cuda_device *d, CUcontext *out) {
    CUcontext c = atomic_load_explicit(&d->ctx, memory_order_acquire);
    CUresult r = CUDA_SUCCESS;
    if (c == NULL) {
        pthread_mutex_lock(&cuda_retain_lock);
        c = atomic_load_explicit(&d->ctx, memory_order_acquire);
        if (c == NULL) r = cuda_st.api.PrimaryCtxRetain(&c, d->handle);
        if (r == CUDA_SUCCESS) atomic_store_explicit(&d->ctx, c, memory_order_release);
        pthread_mutex_unlock(&cuda_retain_lock);
    }
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuDevicePrimaryCtxRetain on device %d", dev);
    *out = c;
    return VRAM_OK;
}

/* Makes the device's primary context current on this thread until cuda_leave(). */
static vram_status cuda_enter(int dev) {
    cuda_device *d = NULL;
    CUcontext c = NULL;
    vram_status s = cuda_device_at(dev, &d);
    if (s == VRAM_OK) s = cuda_context(dev, d, &c);
    if (s != VRAM_OK) return s;
    CUDA_TRY(cuda_st.api.CtxPushCurrent(c), "cuCtxPushCurrent on device %d", dev);
    return VRAM_OK;
}

static void cuda_leave(void) {
    CUcontext c = NULL;
    cuda_st.api.CtxPopCurrent(&c);
}

/* As cuda_enter, for the virtual memory management calls. */
static vram_status cuda_enter_vmm(int dev, cuda_device **out) {
    cuda_device *d = NULL;
    vram_status s = cuda_device_at(dev, &d);
    if (s != VRAM_OK) return s;
    if (!d->vmm)
        return vram__fail(VRAM_ERR_UNSUPPORTED,
                          "virtual memory management (cuMemCreate/cuMemMap) is not supported on "
                          "CUDA device %d%s", dev,
                          cuda_st.vmm_api ? "" : ": the NVIDIA driver is too old to have it");
    *out = d;
    return cuda_enter(dev);
}

static vram_status cuda_device_count(int *count) {
    if (cuda_st.devs == NULL) return vram__fail(VRAM_ERR_INTERNAL, "the CUDA backend is not open");
    *count = cuda_st.count;
    return VRAM_OK;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it; "" without the call. */
static vram_status cuda_uuid(int dev, CUdevice h, char *buf, size_t len) {
    CUuuid u;
    const unsigned char *b = (const unsigned char *)u.bytes;
    buf[0] = '\0';
    if (cuda_st.api.DeviceGetUuid == NULL) return VRAM_OK;
    CUDA_TRY(cuda_st.api.DeviceGetUuid(&u, h), "cuDeviceGetUuid on device %d", dev);
    snprintf(buf, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
    return VRAM_OK;
}

static vram_status cuda_props_fill(int dev, CUdevice h, vram_physical_device *p) {
    const cuda_api *a = &cuda_st.api;
    CUDA_TRY(a->DeviceGetName(p->product, (int)sizeof p->product, h), "cuDeviceGetName on device %d",
             dev);
    vram_status s = cuda_uuid(dev, h, p->uuid, sizeof p->uuid);
    if (s != VRAM_OK) return s;
    CUDA_TRY(a->DeviceGetPCIBusId(p->pci_bus_id, (int)sizeof p->pci_bus_id, h),
             "cuDeviceGetPCIBusId on device %d", dev);
    CUDA_TRY(a->DeviceTotalMem(&p->total_bytes, h), "cuDeviceTotalMem on device %d", dev);
    CUDA_TRY(a->DeviceGetAttribute(&p->compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, h),
             "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR) on device %d", dev);
    CUDA_TRY(a->DeviceGetAttribute(&p->compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, h),
             "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR) on device %d", dev);
    return VRAM_OK;
}

/* Needs no context: listing devices creates none. */
static vram_status cuda_device_props(int dev, vram_physical_device *out, vram__device_caps *caps) {
    cuda_device *d = NULL;
    vram_physical_device p;
    vram_status s = cuda_device_at(dev, &d);
    if (s != VRAM_OK) return s;
    memset(&p, 0, sizeof p);
    s = cuda_props_fill(dev, d->handle, &p);
    if (s != VRAM_OK) return s;
    if (out != NULL) {
        memcpy(out->product, p.product, sizeof p.product);
        memcpy(out->uuid, p.uuid, sizeof p.uuid);
        memcpy(out->pci_bus_id, p.pci_bus_id, sizeof p.pci_bus_id);
        out->total_bytes = p.total_bytes;
        out->compute_major = p.compute_major;
        out->compute_minor = p.compute_minor;
    }
    if (caps != NULL) {
        caps->vmm_supported = d->vmm;
        caps->granularity = d->granularity;
    }
    return VRAM_OK;
}

/* ---- memory --------------------------------------------------------------------------------- */

static vram_status cuda_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
    size_t f = 0, t = 0;
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemGetInfo(&f, &t);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemGetInfo on device %d", dev);
    *free_bytes = f;
    *total_bytes = t;
    return VRAM_OK;
}

static vram_status cuda_mem_alloc(int dev, size_t size, uint64_t *dptr) {
    CUdeviceptr p = 0;
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemAlloc(&p, size);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemAlloc(%zu bytes) on device %d", size, dev);
    CUDA_COUNT(mem_alloc);
    *dptr = p;
    return VRAM_OK;
}

static vram_status cuda_mem_free(int dev, uint64_t dptr) {
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemFree((CUdeviceptr)dptr);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemFree(0x%llx) on device %d",
                                            (unsigned long long)dptr, dev);
    CUDA_COUNT(mem_free);
    return VRAM_OK;
}

/* ---- virtual memory management -------------------------------------------------------------- */

static vram_status cuda_va_reserve(int dev, size_t size, uint64_t *va) {
    cuda_device *d = NULL;
    CUdeviceptr p = 0;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemAddressReserve(&p, size, d->granularity, 0, 0);
    cuda_leave();
    if (r != CUDA_SUCCESS)
        return cuda_fail(r, "cuMemAddressReserve(%zu bytes) on device %d", size, dev);
    CUDA_COUNT(va_reserve);
    *va = p;
    return VRAM_OK;
}

static vram_status cuda_va_free(int dev, uint64_t va, size_t size) {
    cuda_device *d = NULL;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemAddressFree((CUdeviceptr)va, size);
    cuda_leave();
    if (r != CUDA_SUCCESS)
        return cuda_fail(r, "cuMemAddressFree(0x%llx, %zu bytes) on device %d",
                         (unsigned long long)va, size, dev);
    CUDA_COUNT(va_free);
    return VRAM_OK;
}

static vram_status cuda_phys_create(int dev, size_t size, uint64_t *handle) {
    cuda_device *d = NULL;
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h = 0;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    /* exportable to other processes (IPC) where the driver can; else plain */
    int shareable = cuda_st.api.MemExportToShareableHandle != NULL && atomic_load(&d->shareable) != 0;
    prop.requestedHandleTypes = shareable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d->handle;
    CUresult r = cuda_st.api.MemCreate(&h, size, &prop, 0);
    if (shareable && (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)) {
        atomic_store(&d->shareable, 0);          /* this driver or device cannot share: never again */
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        r = cuda_st.api.MemCreate(&h, size, &prop, 0);
    }
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemCreate(%zu bytes) on device %d", size, dev);
    CUDA_COUNT(phys_create);
    *handle = h;
    return VRAM_OK;
}

static vram_status cuda_phys_release(int dev, uint64_t handle) {
    cuda_device *d = NULL;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemRelease((CUmemGenericAllocationHandle)handle);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemRelease on device %d", dev);
    CUDA_COUNT(phys_release);
    return VRAM_OK;
}

static vram_status cuda_phys_export(int dev, uint64_t handle, int *fd) {
    cuda_device *d = NULL;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    if (cuda_st.api.MemExportToShareableHandle == NULL || !atomic_load(&d->shareable)) {
        cuda_leave();
        return vram__fail(VRAM_ERR_UNSUPPORTED, "device %d: this driver cannot export memory to other processes "
                          "(cuMemExportToShareableHandle with a file descriptor)", dev);
    }
    int out = -1;
    CUresult r = cuda_st.api.MemExportToShareableHandle(&out, (CUmemGenericAllocationHandle)handle,
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemExportToShareableHandle on device %d", dev);
    *fd = out;
    return VRAM_OK;
}

static vram_status cuda_phys_import(int dev, int fd, size_t size, uint64_t *handle) {
    cuda_device *d = NULL;
    (void)size;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = cuda_st.api.MemImportFromShareableHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : cuda_st.api.MemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemImportFromShareableHandle on device %d", dev);
    *handle = h;
    return VRAM_OK;
}

static vram_status cuda_ipc_get(int dev, uint64_t dptr, unsigned char handle[64]) {
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUipcMemHandle h;
    CUresult r = cuda_st.api.IpcGetMemHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : cuda_st.api.IpcGetMemHandle(&h, (CUdeviceptr)dptr);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuIpcGetMemHandle(0x%llx) on device %d", (unsigned long long)dptr, dev);
    memcpy(handle, h.reserved, CU_IPC_HANDLE_SIZE);
    return VRAM_OK;
}

static vram_status cuda_ipc_open(int dev, const unsigned char handle[64], uint64_t *dptr) {
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUipcMemHandle h;
    memcpy(h.reserved, handle, CU_IPC_HANDLE_SIZE);
    CUdeviceptr p = 0;
    CUresult r = cuda_st.api.IpcOpenMemHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : cuda_st.api.IpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuIpcOpenMemHandle on device %d", dev);
    *dptr = p;
    return VRAM_OK;
}

static vram_status cuda_ipc_close(int dev, uint64_t dptr) {
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.IpcCloseMemHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : cuda_st.api.IpcCloseMemHandle((CUdeviceptr)dptr);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuIpcCloseMemHandle(0x%llx) on device %d", (unsigned long long)dptr, dev);
    return VRAM_OK;
}

/* cuMemMap then read/write access for the device; a failed cuMemSetAccess unmaps again. */
static CUresult cuda_map_access(cuda_device *d, uint64_t va, size_t size, uint64_t handle,
                                const char **call) {
    CUmemAccessDesc acc;
    *call = "cuMemMap";
    CUresult r = cuda_st.api.MemMap((CUdeviceptr)va, size, 0, (CUmemGenericAllocationHandle)handle, 0);
    if (r != CUDA_SUCCESS) return r;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = d->handle;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *call = "cuMemSetAccess";
    r = cuda_st.api.MemSetAccess((CUdeviceptr)va, size, &acc, 1);
    if (r != CUDA_SUCCESS) cuda_st.api.MemUnmap((CUdeviceptr)va, size);
    return r;
}

static vram_status cuda_map(int dev, uint64_t va, size_t size, uint64_t handle) {
    cuda_device *d = NULL;
    const char *call = "";
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_map_access(d, va, size, handle, &call);
    cuda_leave();
    if (r != CUDA_SUCCESS)
        return cuda_fail(r, "%s(0x%llx, %zu bytes) on device %d", call, (unsigned long long)va, size,
                         dev);
    CUDA_COUNT(map);
    return VRAM_OK;
}

static vram_status cuda_unmap(int dev, uint64_t va, size_t size) {
    cuda_device *d = NULL;
    vram_status s = cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.MemUnmap((CUdeviceptr)va, size);
    cuda_leave();
    if (r != CUDA_SUCCESS)
        return cuda_fail(r, "cuMemUnmap(0x%llx, %zu bytes) on device %d", (unsigned long long)va,
                         size, dev);
    CUDA_COUNT(unmap);
    return VRAM_OK;
}

/* ---- events --------------------------------------------------------------------------------- */

/* A timing-free event (a spare one of the device, else a new one) recorded on the stream; on
 * failure a new event is destroyed again and a spare one goes back. */
static CUresult cuda_record(cuda_device *d, CUstream stream, CUevent *out, const char **call) {
    CUevent e = NULL;
    pthread_mutex_lock(&d->ev_lock);
    if (d->ev_spares > 0) e = d->ev_spare[--d->ev_spares];
    pthread_mutex_unlock(&d->ev_lock);
    int spare = e != NULL;
    *call = "cuEventCreate";
    CUresult r = spare ? CUDA_SUCCESS : cuda_st.api.EventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) return r;
    *call = "cuEventRecord";
    r = cuda_st.api.EventRecord(e, stream);
    if (r == CUDA_SUCCESS) {
        *out = e;
    } else if (spare) {
        pthread_mutex_lock(&d->ev_lock);
        d->ev_spare[d->ev_spares++] = e;
        pthread_mutex_unlock(&d->ev_lock);
    } else {
        cuda_st.api.EventDestroy(e);
    }
    return r;
}

static vram_status cuda_event_record(int dev, void *stream, void **event) {
    CUevent e = NULL;
    const char *call = "";
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_record(&cuda_st.devs[dev], (CUstream)stream, &e, &call);
    cuda_leave();
    if (r != CUDA_SUCCESS)
        return cuda_fail(r, "%s on stream %p of device %d", call, stream, dev);
    CUDA_COUNT(event_record);
    *event = e;
    return VRAM_OK;
}

static vram_status cuda_event_query(int dev, void *event, int *done) {
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.EventQuery((CUevent)event);
    cuda_leave();
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        return cuda_fail(r, "cuEventQuery on device %d", dev);
    *done = r == CUDA_SUCCESS;
    CUDA_COUNT(event_query);
    return VRAM_OK;
}

static vram_status cuda_event_sync(int dev, void *event) {
    vram_status s = cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_st.api.EventSynchronize((CUevent)event);
    cuda_leave();
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuEventSynchronize on device %d", dev);
    CUDA_COUNT(event_sync);
    return VRAM_OK;
}

/* Never fails and never touches this thread's last error: the event's context is already
 * retained (it was created in it), so only a push is needed. */
static void cuda_event_destroy(int dev, void *event) {
    CUcontext c = NULL;
    if (event == NULL || cuda_st.devs == NULL) return;
    if (dev >= 0 && dev < cuda_st.count) {
        cuda_device *d = &cuda_st.devs[dev];
        pthread_mutex_lock(&d->ev_lock);
        int kept = d->ev_spares < CUDA_EVENT_SPARES;
        if (kept) d->ev_spare[d->ev_spares++] = (CUevent)event;   /* recorded again later */
        pthread_mutex_unlock(&d->ev_lock);
        if (kept) return;
        c = atomic_load(&d->ctx);
    }
    int pushed = c != NULL && cuda_st.api.CtxPushCurrent(c) == CUDA_SUCCESS;
    cuda_st.api.EventDestroy((CUevent)event);
    if (pushed) cuda_leave();
}

static void cuda_counters(vram__backend_counters *out) {
    vram__backend_counts_read(&cuda_count, out);
}

const vram__backend vram__backend_cuda = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .device_count = cuda_device_count,
    .device_props = cuda_device_props,
    .mem_info = cuda_mem_info,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .va_reserve = cuda_va_reserve,
    .va_free = cuda_va_free,
    .phys_create = cuda_phys_create,
    .phys_release = cuda_phys_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .phys_export = cuda_phys_export,
    .phys_import = cuda_phys_import,
    .ipc_get = cuda_ipc_get,
    .ipc_open = cuda_ipc_open,
    .ipc_close = cuda_ipc_close,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_destroy = cuda_event_destroy,
    .counters = cuda_counters,
};
