/*
 * vmm.c: the interposed calls of CUDA's virtual memory management: cuMemCreate (counted on the
 * device its properties name; memory on the host is not device memory), and every call that adds
 * or drops a hold on such an allocation: cuMemRelease, cuMemMap, cuMemUnmap,
 * cuMemRetainAllocationHandle, cuMemMapArrayAsync (and _ptsz: tiles of sparse arrays),
 * cuMulticastCreate, cuMulticastBindMem, cuMulticastBindAddr and cuMulticastUnbind. allocs.c keeps
 * the holds; the bytes count until the driver frees the allocation, whatever the order of calls.
 *
 * Invariants: every wrapper returns the driver's result, or CUDA_ERROR_OUT_OF_MEMORY for a refusal
 * (then the driver was not called), or CUDA_ERROR_NOT_FOUND when the driver lacks the function; a
 * hold is added only after the driver's success, and a record that a freeing call takes out is put
 * back when the driver refused it. No lock is taken here.
 */
#include <stdint.h>

#include "shim.h"

SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
    pfn_cuMemCreate real = SHIM_REAL(cuMemCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int dev = -1;
    if (handle && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        prop->location.id >= 0 && prop->location.id < SHIM_MAX_DEVICES)
        dev = prop->location.id;
    if (shim_take("cuMemCreate", dev, size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(handle, size, prop, flags);
    if (r != CUDA_SUCCESS || dev < 0) {
        shim_unreserve(dev, size);
        return r;
    }
    if (shim_allocs_created(*handle, size, dev) != 0) {
        pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
        if (release) release(*handle);
        *handle = 0;
        shim_unreserve(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* The handle's bytes stay counted while a mapping, a tile or a binding still holds them. */
SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    pfn_cuMemRelease real = SHIM_REAL(cuMemRelease);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_entry saved;
    int counted = shim_allocs_release_begin(handle, &saved);
    CUresult r = real(handle);
    if (counted) shim_allocs_release_end(r, &saved);
    return r;
}

SHIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long flags) {
    pfn_cuMemMap real = SHIM_REAL(cuMemMap);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS) shim_allocs_mapped(ptr, size, handle);
    return r;
}

SHIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    pfn_cuMemUnmap real = SHIM_REAL(cuMemUnmap);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    shim_unmapping u;
    shim_allocs_unmap_begin(ptr, size, &u);
    CUresult r = real(ptr, size);
    shim_allocs_unmap_end(r, &u);
    return r;
}

SHIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    pfn_cuMemRetainAllocationHandle real = SHIM_REAL(cuMemRetainAllocationHandle);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(handle, addr);
    if (r == CUDA_SUCCESS && handle) shim_allocs_retained(*handle, (unsigned long long)(uintptr_t)addr);
    return r;
}

/* Tiles mapped into sparse arrays hold their allocations until the array is destroyed (arrays.c). */
static CUresult shim_map_array(pfn_cuMemMapArrayAsync real, CUarrayMapInfo *infos, unsigned int count,
                               CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(infos, count, stream);
    if (r != CUDA_SUCCESS || !infos) return r;
    for (unsigned int i = 0; i < count; i++) {
        const CUarrayMapInfo *m = &infos[i];
        if (m->memOperationType != CU_MEM_OPERATION_TYPE_MAP || m->memHandleType != CU_MEM_HANDLE_TYPE_GENERIC)
            continue;
        unsigned long long owner = m->resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY
                                       ? (unsigned long long)(uintptr_t)m->resource.mipmap
                                       : (unsigned long long)(uintptr_t)m->resource.array;
        shim_allocs_pin(owner, m->memHandle.memHandle, 0, 0, 0);
    }
    return r;
}

SHIM_EXPORT CUresult cuMemMapArrayAsync(CUarrayMapInfo *infos, unsigned int count, CUstream stream) {
    return shim_map_array(SHIM_REAL(cuMemMapArrayAsync), infos, count, stream);
}

SHIM_EXPORT CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *infos, unsigned int count, CUstream stream) {
    return shim_map_array(SHIM_REAL(cuMemMapArrayAsync_ptsz), infos, count, stream);
}

/* A multicast object holds no memory of its own; what is bound to it is held until the unbind or
 * the object's cuMemRelease. */
SHIM_EXPORT CUresult cuMulticastCreate(CUmemGenericAllocationHandle *mc, const CUmulticastObjectProp *prop) {
    pfn_cuMulticastCreate real = SHIM_REAL(cuMulticastCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(mc, prop);
    if (r == CUDA_SUCCESS && mc) shim_allocs_multicast(*mc);
    return r;
}

SHIM_EXPORT CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mc, size_t mc_offset,
                                        CUmemGenericAllocationHandle mem, size_t mem_offset, size_t size,
                                        unsigned long long flags) {
    pfn_cuMulticastBindMem real = SHIM_REAL(cuMulticastBindMem);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(mc, mc_offset, mem, mem_offset, size, flags);
    if (r == CUDA_SUCCESS) shim_allocs_pin(mc, mem, 0, mc_offset, size ? size : 1);
    return r;
}

SHIM_EXPORT CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr ptr,
                                         size_t size, unsigned long long flags) {
    pfn_cuMulticastBindAddr real = SHIM_REAL(cuMulticastBindAddr);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(mc, mc_offset, ptr, size, flags);
    if (r == CUDA_SUCCESS) shim_allocs_pin(mc, 0, ptr, mc_offset, size ? size : 1);
    return r;
}

SHIM_EXPORT CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset, size_t size) {
    pfn_cuMulticastUnbind real = SHIM_REAL(cuMulticastUnbind);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(mc, dev, mc_offset, size);
    if (r == CUDA_SUCCESS) shim_allocs_unpin(mc, dev, mc_offset, size ? size : 1);
    return r;
}
