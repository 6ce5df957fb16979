/*
 * cuda_overflow.c: host memory mapped for a device, for the allocator option overflow:host
 * (backend.h's overflow_alloc and overflow_free) on the CUDA driver.
 *
 * Where the driver can, with virtual memory management: physical memory created on the host
 * (cuMemCreate with CU_MEM_LOCATION_TYPE_HOST, else CU_MEM_LOCATION_TYPE_HOST_NUMA node 0), mapped
 * into an address range of its own and given read/write access for the device; its handle is
 * released once mapped (the mapping keeps it), so that the free finds it again by address
 * (cuMemRetainAllocationHandle) and nothing is kept here. Where it cannot (no VMM, or no host
 * location: CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_INVALID_VALUE), pinned mapped host memory
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), whose device
 * address is its host address under unified addressing (cuMemHostGetDevicePointer says so; memory
 * whose device address differs is given back and refused). The free tells the two apart by
 * cuMemRetainAllocationHandle. No state of its own, no lock: every failure says the driver's call
 * and error name, and undoes what the call had done.
 */
#include <string.h>

#include "backend/cuda_internal.h"

#define OVERFLOW_PAGE ((size_t)4096)

/* With VMM, `size` bytes placed on the host at location `type`: *dptr, *held; CUDA_SUCCESS or the
 * driver's error (and *call names the call that failed), nothing left behind. */
static CUresult vmm_host(cuda_device *d, CUmemLocationType type, size_t size, uint64_t *dptr, size_t *held,
                         const char **call) {
    const cuda_api *a = &vram__cuda_st.api;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = type;
    prop.location.id = 0;                        /* (HOST_NUMA: node 0) */
    size_t gran = 0;
    *call = "cuMemGetAllocationGranularity";
    CUresult r = a->MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) return r;
    if (gran == 0 || (gran & (gran - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = vram__round_up(size, gran);
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    *call = "cuMemAddressReserve";
    if ((r = a->MemAddressReserve(&va, bytes, gran, 0, 0)) != CUDA_SUCCESS) return r;
    *call = "cuMemCreate";
    if ((r = a->MemCreate(&h, bytes, &prop, 0)) != CUDA_SUCCESS) {
        a->MemAddressFree(va, bytes);
        return r;
    }
    *call = "cuMemMap";
    if ((r = a->MemMap(va, bytes, 0, h, 0)) != CUDA_SUCCESS) {
        a->MemRelease(h);
        a->MemAddressFree(va, bytes);
        return r;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = d->handle;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *call = "cuMemSetAccess";
    if ((r = a->MemSetAccess(va, bytes, &acc, 1)) != CUDA_SUCCESS) {
        a->MemUnmap(va, bytes);
        a->MemRelease(h);
        a->MemAddressFree(va, bytes);
        return r;
    }
    a->MemRelease(h);                            /* the mapping keeps the memory until the unmap */
    *dptr = va;
    *held = bytes;
    return CUDA_SUCCESS;
}

/* Pinned mapped host memory (no VMM, or no host location for it). */
static vram_status pinned_host(int dev, size_t size, uint64_t *dptr, size_t *held) {
    const cuda_api *a = &vram__cuda_st.api;
    if (a->MemHostAlloc == NULL || a->MemFreeHost == NULL || a->HostGetDevicePointer == NULL) {
        return vram__fail(VRAM_ERR_UNSUPPORTED, "host memory for device %d: the driver places no virtual memory on "
                          "the host and has no cuMemHostAlloc / cuMemHostGetDevicePointer", dev);
    }
    size_t bytes = vram__round_up(size, OVERFLOW_PAGE);
    void *host = NULL;
    CUDA_TRY(a->MemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
             "cuMemHostAlloc(%zu bytes, DEVICEMAP) for device %d", bytes, dev);
    CUdeviceptr p = 0;
    CUresult r = a->HostGetDevicePointer(&p, host, 0);
    if (r != CUDA_SUCCESS || p != (CUdeviceptr)(uintptr_t)host) {
        a->MemFreeHost(host);
        if (r != CUDA_SUCCESS) return vram__cuda_fail(r, "cuMemHostGetDevicePointer for device %d", dev);
        return vram__fail(VRAM_ERR_UNSUPPORTED, "host memory for device %d: its device address differs from its "
                          "host address (no unified addressing)", dev);
    }
    *dptr = p;
    *held = bytes;
    return VRAM_OK;
}

vram_status vram__cuda_overflow_alloc(int dev, size_t size, uint64_t *dptr, size_t *held) {
    cuda_device *d = NULL;
    vram_status s = vram__cuda_device_at(dev, &d);
    if (s == VRAM_OK) s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    const char *call = "cuMemCreate";
    if (d->vmm) {
        r = vmm_host(d, CU_MEM_LOCATION_TYPE_HOST, size, dptr, held, &call);
        if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)
            r = vmm_host(d, CU_MEM_LOCATION_TYPE_HOST_NUMA, size, dptr, held, &call);
    }
    if (r == CUDA_SUCCESS) {
        s = VRAM_OK;
    } else if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE) {
        s = pinned_host(dev, size, dptr, held);  /* no host location: pinned mapped memory */
    } else {
        s = vram__cuda_fail(r, "%s(%zu bytes on the host) for device %d", call, size, dev);
    }
    vram__cuda_leave();
    if (s == VRAM_OK) vram__backend_count(&vram__cuda_count, overflow_alloc);
    return s;
}

vram_status vram__cuda_overflow_free(int dev, uint64_t dptr, size_t held) {
    const cuda_api *a = &vram__cuda_st.api;
    vram_status s = vram__cuda_enter(dev);
    if (s != VRAM_OK) return s;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    const char *call = "cuMemFreeHost";
    if (a->MemRetainAllocationHandle != NULL &&
        a->MemRetainAllocationHandle(&h, (void *)(uintptr_t)dptr) == CUDA_SUCCESS) {
        call = "cuMemUnmap";                     /* placed with VMM: unmap, release, free the range */
        if ((r = a->MemUnmap((CUdeviceptr)dptr, held)) != CUDA_SUCCESS) {
            a->MemRelease(h);                    /* (the retained reference: the mapping stays) */
        } else {
            call = "cuMemRelease";
            r = a->MemRelease(h);
            if (r == CUDA_SUCCESS) {
                call = "cuMemAddressFree";
                r = a->MemAddressFree((CUdeviceptr)dptr, held);
            }
        }
    } else if (a->MemFreeHost != NULL) {
        r = a->MemFreeHost((void *)(uintptr_t)dptr);
    }
    vram__cuda_leave();
    if (r != CUDA_SUCCESS)
        return vram__cuda_fail(r, "%s(host memory 0x%llx, %zu bytes) for device %d", call, (unsigned long long)dptr, held,
                         dev);
    vram__backend_count(&vram__cuda_count, overflow_free);
    return VRAM_OK;
}
