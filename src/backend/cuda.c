/*
 * cuda.c: the CUDA driver backend's calls, the contract of backend.h on the real driver (loaded and
 * resolved by cuda_load.c, through cuda_internal.h). Every call that needs a context runs with the
 * device's primary context pushed on the calling thread and popped afterwards (vram__cuda_enter /
 * vram__cuda_leave), so that memory works with kernels launched by the CUDA runtime.
 *
 * Driver failures become VRAM_ERR_OUT_OF_MEMORY (CUDA_ERROR_OUT_OF_MEMORY) or VRAM_ERR_DRIVER, with
 * the call, the driver's error name and its description in the message. The virtual memory
 * management functions (cuMemCreate, ...) are optional: without them, or on a device without VMM,
 * caps.vmm_supported is 0 and va_*, phys_*, map and unmap return VRAM_ERR_UNSUPPORTED. So are pinned host
 * memory and the copies (cuMemHostAlloc, cuMemFreeHost, cuMemcpyDtoH_v2, cuMemcpyHtoD_v2: vram_sleep's
 * offload): without them those calls return VRAM_ERR_UNSUPPORTED naming the function missing.
 *
 * Invariants: a device keeps at most CUDA_EVENT_SPARES destroyed events, all created in its primary
 * context, for reuse; they are destroyed at close. Lock: a device's ev_lock guards its spare events
 * and is held only around taking or putting one. The counters are relaxed atomics.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_internal.h"

vram__backend_counts vram__cuda_count;   /* (cuda_overflow.c counts too) */

#define CUDA_COUNT(field) vram__backend_count(&vram__cuda_count, field)

/* ---- open and close ------------------------------------------------------------------------- */

static void cuda_reset_counters(void) {
    vram__backend_counts_reset(&vram__cuda_count);
}

static vram_status cuda_open(void) {
    if (vram__cuda_st.lib != NULL) return VRAM_OK;
    vram_status s = vram__cuda_load();
    if (s == VRAM_OK) cuda_reset_counters();
    return s;
}

static void cuda_close(void) {
    if (vram__cuda_st.lib == NULL) return;
    for (int i = 0; i < vram__cuda_st.count; i++) {
        cuda_device *d = &vram__cuda_st.devs[i];
        CUcontext c = atomic_load(&d->ctx), popped = NULL;
        if (c != NULL && d->ev_spares > 0 && vram__cuda_st.api.CtxPushCurrent(c) == CUDA_SUCCESS) {
            while (d->ev_spares > 0) vram__cuda_st.api.EventDestroy(d->ev_spare[--d->ev_spares]);
            vram__cuda_st.api.CtxPopCurrent(&popped);
        }
        pthread_mutex_destroy(&d->ev_lock);
        if (c != NULL) vram__cuda_st.api.PrimaryCtxRelease(d->handle);
    }
    vram__cuda_unload();
}

/* ---- devices -------------------------------------------------------------------------------- */

static vram_status cuda_device_count(int *count) {
    if (vram__cuda_st.devs == NULL) return vram__fail(VRAM_ERR_INTERNAL, "the CUDA backend is not open");
    *count = vram__cuda_st.count;
    return VRAM_OK;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it; "" without the call. */
static vram_status cuda_uuid(int dev, CUdevice h, char *buf, size_t len) {
    CUuuid u;
    const unsigned char *b = (const unsigned char *)u.bytes;
    buf[0] = '\0';
    if (vram__cuda_st.api.DeviceGetUuid == NULL) return VRAM_OK;
    CUDA_TRY(vram__cuda_st.api.DeviceGetUuid(&u, h), "cuDeviceGetUuid on device %d", dev);
    snprintf(buf, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
    return VRAM_OK;
}

static vram_status cuda_props_fill(int dev, CUdevice h, vram_physical_device *p) {
    const cuda_api *a = &vram__cuda_st.api;
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
    vram_status s = vram__cuda_device_at(dev, &d);
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
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemGetInfo(&f, &t);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemGetInfo on device %d", dev);
    *free_bytes = f;
    *total_bytes = t;
    return VRAM_OK;
}

static vram_status cuda_mem_alloc(int dev, size_t size, uint64_t *dptr) {
    CUdeviceptr p = 0;
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemAlloc(&p, size);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemAlloc(%zu bytes) on device %d", size, dev);
    CUDA_COUNT(mem_alloc);
    *dptr = p;
    return VRAM_OK;
}

static vram_status cuda_mem_free(int dev, uint64_t dptr) {
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemFree((CUdeviceptr)dptr);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemFree(0x%llx) on device %d",
                                            (unsigned long long)dptr, dev);
    CUDA_COUNT(mem_free);
    return VRAM_OK;
}

/* ---- virtual memory management -------------------------------------------------------------- */

static vram_status cuda_va_reserve(int dev, size_t size, uint64_t *va) {
    cuda_device *d = NULL;
    CUdeviceptr p = 0;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemAddressReserve(&p, size, d->granularity, 0, 0);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS)
        return vram__cuda_fail(r, "cuMemAddressReserve(%zu bytes) on device %d", size, dev);
    CUDA_COUNT(va_reserve);
    *va = p;
    return VRAM_OK;
}

static vram_status cuda_va_free(int dev, uint64_t va, size_t size) {
    cuda_device *d = NULL;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemAddressFree((CUdeviceptr)va, size);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS)
        return vram__cuda_fail(r, "cuMemAddressFree(0x%llx, %zu bytes) on device %d",
                         (unsigned long long)va, size, dev);
    CUDA_COUNT(va_free);
    return VRAM_OK;
}

static vram_status cuda_phys_create(int dev, size_t size, uint64_t *handle) {
    cuda_device *d = NULL;
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h = 0;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    /* exportable to other processes (IPC) where the driver can; else plain */
    int shareable = vram__cuda_st.api.MemExportToShareableHandle != NULL && atomic_load(&d->shareable) != 0;
    prop.requestedHandleTypes = shareable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d->handle;
    CUresult r = vram__cuda_st.api.MemCreate(&h, size, &prop, 0);
    if (shareable && (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)) {
        atomic_store(&d->shareable, 0);          /* this driver or device cannot share: never again */
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        r = vram__cuda_st.api.MemCreate(&h, size, &prop, 0);
    }
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemCreate(%zu bytes) on device %d", size, dev);
    CUDA_COUNT(phys_create);
    *handle = h;
    return VRAM_OK;
}

static vram_status cuda_phys_release(int dev, uint64_t handle) {
    cuda_device *d = NULL;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemRelease((CUmemGenericAllocationHandle)handle);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemRelease on device %d", dev);
    CUDA_COUNT(phys_release);
    return VRAM_OK;
}

static vram_status cuda_phys_export(int dev, uint64_t handle, int *fd) {
    cuda_device *d = NULL;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    if (vram__cuda_st.api.MemExportToShareableHandle == NULL || !atomic_load(&d->shareable)) {
        vram__cuda_leave();
        return vram__fail(VRAM_ERR_UNSUPPORTED, "device %d: this driver cannot export memory to other processes "
                          "(cuMemExportToShareableHandle with a file descriptor)", dev);
    }
    int out = -1;
    CUresult r = vram__cuda_st.api.MemExportToShareableHandle(&out, (CUmemGenericAllocationHandle)handle,
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemExportToShareableHandle on device %d", dev);
    *fd = out;
    return VRAM_OK;
}

static vram_status cuda_phys_import(int dev, int fd, size_t size, uint64_t *handle) {
    cuda_device *d = NULL;
    (void)size;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = vram__cuda_st.api.MemImportFromShareableHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : vram__cuda_st.api.MemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemImportFromShareableHandle on device %d", dev);
    *handle = h;
    return VRAM_OK;
}

static vram_status cuda_ipc_get(int dev, uint64_t dptr, unsigned char handle[64]) {
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUipcMemHandle h;
    CUresult r = vram__cuda_st.api.IpcGetMemHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : vram__cuda_st.api.IpcGetMemHandle(&h, (CUdeviceptr)dptr);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuIpcGetMemHandle(0x%llx) on device %d", (unsigned long long)dptr, dev);
    memcpy(handle, h.reserved, CU_IPC_HANDLE_SIZE);
    return VRAM_OK;
}

static vram_status cuda_ipc_open(int dev, const unsigned char handle[64], uint64_t *dptr) {
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUipcMemHandle h;
    memcpy(h.reserved, handle, CU_IPC_HANDLE_SIZE);
    CUdeviceptr p = 0;
    CUresult r = vram__cuda_st.api.IpcOpenMemHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : vram__cuda_st.api.IpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuIpcOpenMemHandle on device %d", dev);
    *dptr = p;
    return VRAM_OK;
}

static vram_status cuda_ipc_close(int dev, uint64_t dptr) {
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.IpcCloseMemHandle == NULL ? CUDA_ERROR_NOT_SUPPORTED
               : vram__cuda_st.api.IpcCloseMemHandle((CUdeviceptr)dptr);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuIpcCloseMemHandle(0x%llx) on device %d", (unsigned long long)dptr, dev);
    return VRAM_OK;
}

/* cuMemMap then read/write access for the device; a failed cuMemSetAccess unmaps again. */
static CUresult cuda_map_access(cuda_device *d, uint64_t va, size_t size, uint64_t handle,
                                const char **call) {
    CUmemAccessDesc acc;
    *call = "cuMemMap";
    CUresult r = vram__cuda_st.api.MemMap((CUdeviceptr)va, size, 0, (CUmemGenericAllocationHandle)handle, 0);
    if (r != CUDA_SUCCESS) return r;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = d->handle;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *call = "cuMemSetAccess";
    r = vram__cuda_st.api.MemSetAccess((CUdeviceptr)va, size, &acc, 1);
    if (r != CUDA_SUCCESS) vram__cuda_st.api.MemUnmap((CUdeviceptr)va, size);
    return r;
}

static vram_status cuda_map(int dev, uint64_t va, size_t size, uint64_t handle) {
    cuda_device *d = NULL;
    const char *call = "";
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_map_access(d, va, size, handle, &call);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS)
        return vram__cuda_fail(r, "%s(0x%llx, %zu bytes) on device %d", call, (unsigned long long)va, size,
                         dev);
    CUDA_COUNT(map);
    return VRAM_OK;
}

static vram_status cuda_unmap(int dev, uint64_t va, size_t size) {
    cuda_device *d = NULL;
    vram_status s = vram__cuda_enter_vmm(dev, &d);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemUnmap((CUdeviceptr)va, size);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS)
        return vram__cuda_fail(r, "cuMemUnmap(0x%llx, %zu bytes) on device %d", (unsigned long long)va,
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
    CUresult r = spare ? CUDA_SUCCESS : vram__cuda_st.api.EventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) return r;
    *call = "cuEventRecord";
    r = vram__cuda_st.api.EventRecord(e, stream);
    if (r == CUDA_SUCCESS) {
        *out = e;
    } else if (spare) {
        pthread_mutex_lock(&d->ev_lock);
        d->ev_spare[d->ev_spares++] = e;
        pthread_mutex_unlock(&d->ev_lock);
    } else {
        vram__cuda_st.api.EventDestroy(e);
    }
    return r;
}

static vram_status cuda_event_record(int dev, void *stream, void **event) {
    CUevent e = NULL;
    const char *call = "";
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = cuda_record(&vram__cuda_st.devs[dev], (CUstream)stream, &e, &call);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS)
        return vram__cuda_fail(r, "%s on stream %p of device %d", call, stream, dev);
    CUDA_COUNT(event_record);
    *event = e;
    return VRAM_OK;
}

static vram_status cuda_event_query(int dev, void *event, int *done) {
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.EventQuery((CUevent)event);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        return vram__cuda_fail(r, "cuEventQuery on device %d", dev);
    *done = r == CUDA_SUCCESS;
    CUDA_COUNT(event_query);
    return VRAM_OK;
}

static vram_status cuda_event_sync(int dev, void *event) {
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.EventSynchronize((CUevent)event);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuEventSynchronize on device %d", dev);
    CUDA_COUNT(event_sync);
    return VRAM_OK;
}

/* Never fails and never touches this thread's last error: the event's context is already
 * retained (it was created in it), so only a push is needed. */
static void cuda_event_destroy(int dev, void *event) {
    CUcontext c = NULL;
    if (event == NULL || vram__cuda_st.devs == NULL) return;
    if (dev >= 0 && dev < vram__cuda_st.count) {
        cuda_device *d = &vram__cuda_st.devs[dev];
        pthread_mutex_lock(&d->ev_lock);
        int kept = d->ev_spares < CUDA_EVENT_SPARES;
        if (kept) d->ev_spare[d->ev_spares++] = (CUevent)event;   /* recorded again later */
        pthread_mutex_unlock(&d->ev_lock);
        if (kept) return;
        c = atomic_load(&d->ctx);
    }
    int pushed = c != NULL && vram__cuda_st.api.CtxPushCurrent(c) == CUDA_SUCCESS;
    vram__cuda_st.api.EventDestroy((CUevent)event);
    if (pushed) vram__cuda_leave();
}

/* ---- pinned host memory and copies ---------------------------------------------------------- */

/* An optional driver function the call needs is missing (an old driver, or a sandbox that hides it). */
static vram_status cuda_lacks(const char *symbol, int dev) {
    return vram__fail(VRAM_ERR_UNSUPPORTED, "the NVIDIA driver has no %s (CUDA device %d): it is older than the "
                      "call, or hides it", symbol, dev);
}

static vram_status cuda_host_alloc(int dev, size_t size, void **host) {
    if (vram__cuda_st.api.MemHostAlloc == NULL) return cuda_lacks("cuMemHostAlloc", dev);
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    void *p = NULL;
    CUresult r = vram__cuda_st.api.MemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemHostAlloc(%zu bytes) for device %d", size, dev);
    CUDA_COUNT(host_alloc);
    *host = p;
    return VRAM_OK;
}

static vram_status cuda_host_free(int dev, void *host) {
    if (vram__cuda_st.api.MemFreeHost == NULL) return cuda_lacks("cuMemFreeHost", dev);
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemFreeHost(host);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemFreeHost(%p) for device %d", host, dev);
    CUDA_COUNT(host_free);
    return VRAM_OK;
}

/* Synchronous copies (the legacy default stream's: the call returns once the bytes are there). */
static vram_status cuda_copy_to_host(int dev, void *dst, uint64_t src, size_t size) {
    if (vram__cuda_st.api.MemcpyDtoH == NULL) return cuda_lacks("cuMemcpyDtoH_v2", dev);
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemcpyDtoH(dst, (CUdeviceptr)src, size);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) {
        return vram__cuda_fail(r, "cuMemcpyDtoH(0x%llx, %zu bytes) on device %d", (unsigned long long)src, size, dev);
    }
    CUDA_COUNT(copy_to_host);
    vram__backend_count_n(&vram__cuda_count, bytes_to_host, size);
    return VRAM_OK;
}

static vram_status cuda_copy_to_device(int dev, uint64_t dst, const void *src, size_t size) {
    if (vram__cuda_st.api.MemcpyHtoD == NULL) return cuda_lacks("cuMemcpyHtoD_v2", dev);
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = vram__cuda_st.api.MemcpyHtoD((CUdeviceptr)dst, src, size);
    vram__cuda_leave();
    if (r != CUDA_SUCCESS) {
        return vram__cuda_fail(r, "cuMemcpyHtoD(0x%llx, %zu bytes) on device %d", (unsigned long long)dst, size, dev);
    }
    CUDA_COUNT(copy_to_device);
    vram__backend_count_n(&vram__cuda_count, bytes_to_device, size);
    return VRAM_OK;
}

static void cuda_counters(vram__backend_counters *out) {
    vram__backend_counts_read(&vram__cuda_count, out);
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
    .overflow_alloc = vram__cuda_overflow_alloc,
    .overflow_free = vram__cuda_overflow_free,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_destroy = cuda_event_destroy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .copy_to_host = cuda_copy_to_host,
    .copy_to_device = cuda_copy_to_device,
    .counters = cuda_counters,
};
