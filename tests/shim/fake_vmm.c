/*
 * fake_vmm.c: the fake driver's virtual memory management, multicast objects and CUDA arrays,
 * including the tiles of sparse arrays (fake_cuda.c says what the fake models).
 *
 * VMM, as the driver documents it: cuMemCreate makes physical memory (held from then on) and a
 * handle with one reference; cuMemRelease drops a reference; cuMemAddressReserve hands out a VA
 * range (from the fake's address counter) and cuMemAddressFree gives it back (exactly as reserved,
 * with nothing mapped in it); cuMemMap maps whole 2 MiB granules of a handle's memory at a VA inside
 * one reserved range, overlapping no other mapping; cuMemUnmap must cover whole mappings, one or
 * several adjacent ones with no gap (a range that starts or ends inside a mapping, or covers a hole,
 * is CUDA_ERROR_INVALID_VALUE); cuMemRetainAllocationHandle of an address inside a mapping returns
 * the handle that was mapped there and adds a reference; cuMemSetAccess accepts a fully mapped
 * range. A handle after its last release is CUDA_ERROR_INVALID_VALUE (it comes back, the same
 * value, through cuMemRetainAllocationHandle while mapped). The physical memory is freed, held
 * dropping, only when no reference, mapping, sparse-array tile or multicast binding is left.
 * Handle values come from a counter and are never reused. cuMemCreate on the host (HOST, or
 * HOST_NUMA node 0) holds no device memory. cuMemGetAllocationGranularity: 2 MiB.
 *
 * Sharing: memory created with requestedHandleTypes POSIX_FILE_DESCRIPTOR (FAKE_CUDA_SHAREABLE=off:
 * CUDA_ERROR_NOT_SUPPORTED, as a device that cannot share) can be exported
 * (cuMemExportToShareableHandle: a new memfd naming the process, handle, device and size; anything
 * else is CUDA_ERROR_INVALID_VALUE); cuMemImportFromShareableHandle of such a descriptor in the
 * exporting process returns the same handle with one more reference, in another a handle of its own
 * that holds nothing of the card (the exporter holds the memory). fake_cuda_backed (fake_cuda.h)
 * tells whether an address range is device memory of the process (mapped, or a device pointer's).
 *
 * Multicast: cuMulticastCreate returns a handle from a value space of its own (released with
 * cuMemRelease), holding no memory itself; cuMulticastBindMem and cuMulticastBindAddr (an address
 * inside a mapping: that mapping's allocation) make the object hold a reference to device memory
 * until cuMulticastUnbind(mc, dev, offset, size) (every binding of dev's memory that starts in
 * [offset, offset + size)) or the object's release. Offsets and sizes are whole 2 MiB granules;
 * bindings of one device may not overlap in the object. Multicast objects are not mapped (cuMemMap
 * of one is CUDA_ERROR_NOT_SUPPORTED).
 *
 * Arrays: cuArrayCreate(_v2), cuArray3DCreate(_v2) and cuMipmappedArrayCreate hold width x
 * max(height, 1) x max(depth, 1) x element size (8-, 16- and 32-bit integers, half and float, 1, 2
 * or 4 channels; other formats are CUDA_ERROR_INVALID_VALUE), summed over the mip levels (each
 * halving width, height and, unless layered or a cubemap, depth; at least 1; the count clamped as
 * the driver does), rounded up to 512 bytes, on the current context's device. Sparse and
 * deferred-mapping arrays hold nothing themselves: cuMemMapArrayAsync (and _ptsz) maps tiles of them
 * onto cuMemCreate memory; a tile, identified by (array, subresource type, level, layer, offsets or
 * mip tail offset; the whole array for deferred mapping), holds a reference to its allocation until
 * an UNMAP of the same tile, a MAP of another handle onto it, or the array's destruction. A batch
 * of operations is validated as a whole before any is applied. Destroying an unknown array is
 * CUDA_ERROR_INVALID_HANDLE.
 *
 * Invariants: every allocation in fake_mems is alive (refs + maps + tiles + binds > 0, counted by
 * the lists below) and its bytes are in held[] (fake_cuda.c); mappings lie inside reserved ranges
 * and do not overlap. Locks: fake_mu (fake_lock) around every access to these lists.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_internal.h"

/* ---- physical allocations -------------------------------------------------------------------------- */

typedef struct fake_mem {
    unsigned long long handle;
    int dev;                     /* FAKE_HOST: memory on the host */
    size_t size;
    unsigned refs, maps, tiles, binds;
    unsigned handle_types;       /* CUmemAllocationHandleType bits it may be exported as */
    int imported;                /* another process's (cuMemImportFromShareableHandle): held there */
} fake_mem;

typedef struct fake_va {
    CUdeviceptr base;
    size_t size;
} fake_va;

typedef struct fake_map {
    CUdeviceptr va;
    size_t size, offset;
    unsigned long long mem;      /* the allocation's handle */
} fake_map;

typedef struct fake_mc {
    unsigned long long handle;
    size_t size;
    unsigned num_devices;
} fake_mc;

typedef struct fake_bind {
    unsigned long long mc, mem;
    int dev;
    size_t mc_offset, size;
} fake_bind;

#define FAKE_MC_HANDLES 0x4d43000000000000ull   /* multicast handles: "MC" and a count */

static fake_mem *fake_mems;
static fake_va *fake_vas;
static fake_map *fake_maps;
static fake_mc *fake_mcs;
static fake_bind *fake_binds;
static size_t fake_nmems, fake_mems_cap, fake_nvas, fake_vas_cap, fake_nmaps, fake_maps_cap;
static size_t fake_nmcs, fake_mcs_cap, fake_nbinds, fake_binds_cap;
static unsigned long long fake_next_handle = 1, fake_next_mc = 1;

static int fake_aligned(size_t v) { return v % FAKE_GRANULE == 0; }

/* The allocation behind a handle value, alive whether or not the handle still has references. */
static fake_mem *fake_mem_find_unsafe(unsigned long long handle) {
    for (size_t i = 0; i < fake_nmems; i++)
        if (fake_mems[i].handle == handle) return &fake_mems[i];
    return NULL;
}

/* A handle the program may use: it has a reference left. */
static fake_mem *fake_mem_handle_unsafe(unsigned long long handle) {
    fake_mem *m = fake_mem_find_unsafe(handle);
    return m && m->refs ? m : NULL;
}

/* Frees the allocation when nothing holds it any more (invalidates fake_mem pointers). */
static void fake_mem_settle_unsafe(unsigned long long handle) {
    fake_mem *m = fake_mem_find_unsafe(handle);
    if (!m || m->refs || m->maps || m->tiles || m->binds) return;
    if (!m->imported) fake_unhold_unsafe(m->dev, m->size);
    *m = fake_mems[--fake_nmems];
}

static fake_mc *fake_mc_find_unsafe(unsigned long long handle) {
    for (size_t i = 0; i < fake_nmcs; i++)
        if (fake_mcs[i].handle == handle) return &fake_mcs[i];
    return NULL;
}

/* The mapping that holds address a, or NULL. */
static fake_map *fake_map_at_unsafe(CUdeviceptr a) {
    for (size_t i = 0; i < fake_nmaps; i++)
        if (a >= fake_maps[i].va && a - fake_maps[i].va < fake_maps[i].size) return &fake_maps[i];
    return NULL;
}

/* How many bytes of [ptr, ptr + size) mappings cover; *inside: whether every mapping that meets the
 * range lies wholly inside it. */
static size_t fake_mapped_in_unsafe(CUdeviceptr ptr, size_t size, int *inside) {
    size_t covered = 0;
    *inside = 1;
    for (size_t i = 0; i < fake_nmaps; i++) {
        const fake_map *m = &fake_maps[i];
        CUdeviceptr lo = m->va > ptr ? m->va : ptr;
        CUdeviceptr hi = m->va + m->size < ptr + size ? m->va + m->size : ptr + size;
        if (lo >= hi) continue;
        covered += hi - lo;
        if (m->va < ptr || m->va + m->size > ptr + size) *inside = 0;
    }
    return covered;
}

CUresult impl_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                          unsigned long long flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    int dev;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (prop->location.id < 0 || prop->location.id >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
        dev = prop->location.id;
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:   /* one NUMA node, 0 */
        if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ? prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE
                                                             : prop->location.id != 0)
            return CUDA_ERROR_INVALID_VALUE;
        dev = FAKE_HOST;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (size == 0 || !fake_aligned(size)) return CUDA_ERROR_INVALID_VALUE;   /* whole 2 MiB granules */
    if (fake_vmm_off()) return CUDA_ERROR_NOT_SUPPORTED;                     /* a driver without VMM */
    if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;   /* (the fake shares memory through descriptors only) */
    if (prop->requestedHandleTypes && fake_shareable_off())
        return CUDA_ERROR_NOT_SUPPORTED;   /* a device or driver that cannot share memory */
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    if (fake_reserve((void **)&fake_mems, &fake_mems_cap, fake_nmems, 1, sizeof *fake_mems) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        r = fake_hold_unsafe(dev, size);
    if (r == CUDA_SUCCESS) {
        fake_mems[fake_nmems++] = (fake_mem){ .handle = fake_next_handle++, .dev = dev, .size = size, .refs = 1,
                                              .handle_types = (unsigned)prop->requestedHandleTypes };
        *handle = fake_mems[fake_nmems - 1].handle;
    }
    fake_unlock();
    return r;
}

/* Drops the bindings of mc that hold memory of dev starting in [lo, hi) (every binding of mc when
 * lo == hi), and what they held. */
static void fake_unbind_unsafe(unsigned long long mc, int dev, size_t lo, size_t hi) {
    for (size_t i = fake_nbinds; i-- > 0;) {
        fake_bind b = fake_binds[i];
        if (b.mc != mc || (lo < hi && (b.dev != dev || b.mc_offset < lo || b.mc_offset >= hi))) continue;
        fake_binds[i] = fake_binds[--fake_nbinds];
        fake_mem *m = fake_mem_find_unsafe(b.mem);
        if (m) m->binds--;
        fake_mem_settle_unsafe(b.mem);
    }
}

CUresult impl_cuMemRelease(CUmemGenericAllocationHandle handle) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_mc *mc = fake_mc_find_unsafe(handle);
    fake_mem *m = mc ? NULL : fake_mem_handle_unsafe(handle);
    if (mc) {
        fake_unbind_unsafe(handle, 0, 0, 0);
        mc = fake_mc_find_unsafe(handle);
        fake_nmcs--;
        *mc = fake_mcs[fake_nmcs];
    } else if (m) {
        m->refs--;
        fake_mem_settle_unsafe(handle);
    } else {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    fake_unlock();
    return r;
}

/* cuMemGetAllocationGranularity: 2 MiB, minimum and recommended alike (cuMemCreate wants whole
 * granules). */
CUresult impl_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags option) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || !prop || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                  option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (prop->location.id < 0 || prop->location.id >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    } else if (prop->location.type != CU_MEM_LOCATION_TYPE_HOST &&
               prop->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *granularity = FAKE_GRANULE;
    return CUDA_SUCCESS;
}

/* ---- address ranges and mappings ----------------------------------------------------------------- */

CUresult impl_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                  unsigned long long flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ptr || size == 0 || size % 4096 || flags != 0 || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;   /* whole host pages; a power of two or 0 (the granule) */
    if (fake_vmm_off()) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    if (fake_reserve((void **)&fake_vas, &fake_vas_cap, fake_nvas, 1, sizeof *fake_vas) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        CUdeviceptr at = fake_address_unsafe(size, alignment > FAKE_GRANULE ? alignment : FAKE_GRANULE, addr);
        if (!at) r = CUDA_ERROR_OUT_OF_MEMORY;
        else fake_vas[fake_nvas++] = (fake_va){ at, size };
        *ptr = at;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    for (size_t i = 0; i < fake_nvas; i++) {
        int inside;
        if (fake_vas[i].base != ptr || fake_vas[i].size != size) continue;
        if (fake_mapped_in_unsafe(ptr, size, &inside) == 0) {   /* nothing mapped in it any more */
            fake_vas[i] = fake_vas[--fake_nvas];
            r = CUDA_SUCCESS;
        }
        break;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                       unsigned long long flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags != 0 || size == 0 || !fake_aligned(ptr) || !fake_aligned(size) || !fake_aligned(offset) ||
        ptr + size < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_mem *m = fake_mem_handle_unsafe(handle);
    int in_range = 0, inside;
    for (size_t i = 0; i < fake_nvas && !in_range; i++)
        in_range = ptr >= fake_vas[i].base && size <= fake_vas[i].size &&
                   ptr - fake_vas[i].base <= fake_vas[i].size - size;
    if (fake_mc_find_unsafe(handle))
        r = CUDA_ERROR_NOT_SUPPORTED;   /* the fake does not map multicast objects */
    else if (!m || offset > m->size || size > m->size - offset || !in_range ||
             fake_mapped_in_unsafe(ptr, size, &inside))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (fake_reserve((void **)&fake_maps, &fake_maps_cap, fake_nmaps, 1, sizeof *fake_maps) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        fake_maps[fake_nmaps++] = (fake_map){ .va = ptr, .size = size, .offset = offset, .mem = handle };
        m->maps++;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemUnmap(CUdeviceptr ptr, size_t size) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (size == 0 || ptr + size < ptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    int inside;
    if (fake_mapped_in_unsafe(ptr, size, &inside) != size || !inside) {
        r = CUDA_ERROR_INVALID_VALUE;   /* a piece of a mapping, or a hole */
    } else {
        for (size_t i = fake_nmaps; i-- > 0;) {
            fake_map mp = fake_maps[i];
            if (mp.va < ptr || mp.va - ptr >= size) continue;
            fake_maps[i] = fake_maps[--fake_nmaps];
            fake_mem *m = fake_mem_find_unsafe(mp.mem);
            if (m) m->maps--;
            fake_mem_settle_unsafe(mp.mem);
        }
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!desc || count == 0 || size == 0 || ptr + size < ptr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        const CUmemAccessDesc *d = &desc[i];
        if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        if (d->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
            if (d->location.id < 0 || d->location.id >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
        } else if (d->location.type != CU_MEM_LOCATION_TYPE_HOST &&
                   d->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA) {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    fake_lock();
    int inside;
    CUresult r = fake_mapped_in_unsafe(ptr, size, &inside) == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    fake_unlock();
    return r;
}

CUresult impl_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_map *mp = fake_map_at_unsafe((CUdeviceptr)(uintptr_t)addr);
    fake_mem *m = mp ? fake_mem_find_unsafe(mp->mem) : NULL;
    if (!m) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        m->refs++;
        *handle = m->handle;
    }
    fake_unlock();
    return r;
}

/* Whether every byte of [addr, addr + size) is device memory of this process: in a mapping, or in a
 * device pointer's allocation (plain, pool block, graph allocation or opened IPC memory). */
SHIM_EXPORT int fake_cuda_backed(unsigned long long addr, size_t size) {
    unsigned long long at = addr, end = addr + size;
    if (size == 0 || end < addr) return 0;
    fake_lock();
    while (at < end) {
        const fake_map *mp = fake_map_at_unsafe(at);
        const fake_block *b = mp ? NULL : fake_block_containing_unsafe(at);
        if (mp) at = mp->va + mp->size;
        else if (b) at = b->key + b->size;
        else break;
    }
    fake_unlock();
    return at >= end;
}

/* ---- sharing with other processes: file descriptors ---------------------------------------------- */

/* What an exported descriptor holds: a memfd with this record at offset 0. */
typedef struct fake_export {
    char magic[8];                 /* "fakeFD1" */
    int pid, dev;
    unsigned long long handle, size;
    unsigned handle_types, pad;
} fake_export;

static const char fake_export_magic[8] = "fakeFD1";

/* A new descriptor (the caller's to close) for an allocation created exportable as one. */
CUresult impl_cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                           CUmemAllocationHandleType type, unsigned long long flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!shareable || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    fake_export x;
    memset(&x, 0, sizeof x);
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    const fake_mem *m = fake_mem_handle_unsafe(handle);
    if (!m || !(m->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        r = CUDA_ERROR_INVALID_VALUE;   /* unknown, or not created with requestedHandleTypes asking for it */
    } else {
        memcpy(x.magic, fake_export_magic, sizeof x.magic);
        x.pid = (int)getpid();
        x.dev = m->dev;
        x.handle = m->handle;
        x.size = m->size;
        x.handle_types = m->handle_types;
    }
    fake_unlock();
    if (r != CUDA_SUCCESS) return r;
    int fd = memfd_create("fake-cuda-export", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (pwrite(fd, &x, sizeof x, 0) != (ssize_t)sizeof x) {
        close(fd);
        return FAKE_ERROR_OPERATING_SYSTEM;
    }
    *(int *)shareable = fd;
    return CUDA_SUCCESS;
}

/* A handle for an exported descriptor (which stays the caller's): in the exporting process the same
 * handle with one more reference, as cuMemRetainAllocationHandle; in another, a handle of this process
 * to memory that process holds (nothing more is held here). */
CUresult impl_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                             CUmemAllocationHandleType type) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    int fd = (int)(intptr_t)os_handle;
    fake_export x;
    if (fd < 0 || pread(fd, &x, sizeof x, 0) != (ssize_t)sizeof x ||
        memcmp(x.magic, fake_export_magic, sizeof x.magic) != 0 || x.size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    if (x.pid == (int)getpid()) {
        fake_mem *m = fake_mem_find_unsafe(x.handle);
        if (!m) {
            r = CUDA_ERROR_INVALID_VALUE;   /* freed since */
        } else {
            m->refs++;
            *handle = m->handle;
        }
    } else if (fake_reserve((void **)&fake_mems, &fake_mems_cap, fake_nmems, 1, sizeof *fake_mems) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake_mems[fake_nmems++] = (fake_mem){ .handle = fake_next_handle++, .dev = x.dev, .size = x.size, .refs = 1,
                                              .handle_types = x.handle_types, .imported = 1 };
        *handle = fake_mems[fake_nmems - 1].handle;
    }
    fake_unlock();
    return r;
}

/* ---- multicast ------------------------------------------------------------------------------------ */

CUresult impl_cuMulticastCreate(CUmemGenericAllocationHandle *mc, const CUmulticastObjectProp *prop) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!mc || !prop || prop->numDevices == 0 || prop->numDevices > (unsigned)fake_device_count() ||
        prop->size == 0 || !fake_aligned(prop->size) || prop->flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_vmm_off()) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    if (fake_reserve((void **)&fake_mcs, &fake_mcs_cap, fake_nmcs, 1, sizeof *fake_mcs) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake_mcs[fake_nmcs++] = (fake_mc){ FAKE_MC_HANDLES | fake_next_mc++, prop->size, prop->numDevices };
        *mc = fake_mcs[fake_nmcs - 1].handle;
    }
    fake_unlock();
    return r;
}

/* Binds [mem_offset, + size) of the allocation behind `mem` at mc_offset of mc. */
static CUresult fake_bind_unsafe(unsigned long long mc, size_t mc_offset, unsigned long long mem, size_t mem_offset,
                                 size_t size) {
    const fake_mc *o = fake_mc_find_unsafe(mc);
    fake_mem *m = fake_mem_find_unsafe(mem);
    if (!o || !m || m->dev == FAKE_HOST || size == 0 || !fake_aligned(mc_offset) || !fake_aligned(mem_offset) ||
        !fake_aligned(size) || mc_offset > o->size || size > o->size - mc_offset || mem_offset > m->size ||
        size > m->size - mem_offset)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < fake_nbinds; i++) {   /* one device's memory at a place of the object */
        const fake_bind *b = &fake_binds[i];
        if (b->mc == mc && b->dev == m->dev && b->mc_offset < mc_offset + size && mc_offset < b->mc_offset + b->size)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (fake_reserve((void **)&fake_binds, &fake_binds_cap, fake_nbinds, 1, sizeof *fake_binds) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_binds[fake_nbinds++] =
        (fake_bind){ .mc = mc, .mem = mem, .dev = m->dev, .mc_offset = mc_offset, .size = size };
    m->binds++;
    return CUDA_SUCCESS;
}

CUresult impl_cuMulticastBindMem(CUmemGenericAllocationHandle mc, size_t mc_offset, CUmemGenericAllocationHandle mem,
                                 size_t mem_offset, size_t size, unsigned long long flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    CUresult r = fake_mem_handle_unsafe(mem) ? fake_bind_unsafe(mc, mc_offset, mem, mem_offset, size)
                                             : CUDA_ERROR_INVALID_VALUE;
    fake_unlock();
    return r;
}

CUresult impl_cuMulticastBindAddr(CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr ptr, size_t size,
                                  unsigned long long flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    const fake_map *mp = fake_map_at_unsafe(ptr);
    if (mp && size <= mp->size - (ptr - mp->va))   /* within the one mapping */
        r = fake_bind_unsafe(mc, mc_offset, mp->mem, mp->offset + (ptr - mp->va), size);
    fake_unlock();
    return r;
}

CUresult impl_cuMulticastUnbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset, size_t size) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    const fake_mc *o = fake_mc_find_unsafe(mc);
    if (!o || size == 0 || !fake_aligned(mc_offset) || !fake_aligned(size) || mc_offset > o->size ||
        size > o->size - mc_offset)
        r = CUDA_ERROR_INVALID_VALUE;
    else
        fake_unbind_unsafe(mc, dev, mc_offset, mc_offset + size);
    fake_unlock();
    return r;
}

/* ---- arrays and their tiles ------------------------------------------------------------------------ */

typedef struct fake_array {
    uintptr_t id;
    int kind;                /* FAKE_OBJ_ARRAY or FAKE_OBJ_MIPMAP */
    int dev;
    unsigned flags, levels;
    size_t bytes;            /* held; 0 for sparse and deferred-mapping arrays */
} fake_array;

typedef struct fake_tile {
    uintptr_t resource;
    int subresource;         /* CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_*, or -1: a deferred-mapping array whole */
    unsigned level, layer, x, y, z;
    unsigned long long miptail_offset;
    unsigned long long mem;  /* the allocation's handle */
} fake_tile;

#define FAKE_SUBRESOURCE_LEVEL 0     /* CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL */
#define FAKE_SUBRESOURCE_MIPTAIL 1   /* CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_MIPTAIL */
#define FAKE_TILE_BYTES (64u << 10)  /* a sparse tile */

static fake_array *fake_arrays;
static fake_tile *fake_tiles;
static size_t fake_narrays, fake_arrays_cap, fake_ntiles, fake_tiles_cap;

static size_t fake_format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;   /* formats the fake does not model */
    }
}

/* Checks a descriptor as the driver does and computes what the array holds over `*levels` mip levels
 * (clamped to those the extents have). */
static CUresult fake_array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned *levels, size_t *bytes) {
    size_t elem = fake_format_bytes(d->Format);
    unsigned f = d->Flags;
    int layered = (f & CUDA_ARRAY3D_LAYERED) != 0, cubemap = (f & CUDA_ARRAY3D_CUBEMAP) != 0;
    if (elem == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) || d->Width == 0 ||
        (d->Height == 0 && d->Depth != 0 && !layered))
        return CUDA_ERROR_INVALID_VALUE;
    if (cubemap && (d->Width != d->Height || d->Depth == 0 || (layered ? d->Depth % 6 : d->Depth != 6)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((f & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) && d->Height == 0)
        return CUDA_ERROR_INVALID_VALUE;   /* sparse arrays are 2D, 2D layered or 3D */
    size_t largest = d->Width > d->Height ? d->Width : d->Height;
    if (!layered && !cubemap && d->Depth > largest) largest = d->Depth;
    unsigned most = 1;
    while (largest >>= 1) most++;
    if (*levels > most) *levels = most;   /* clamped to [1, 1 + floor(log2(largest extent))] */
    if (*levels == 0) *levels = 1;
    size_t total = 0;
    for (unsigned l = 0; l < *levels; l++) {
        size_t w = d->Width >> l, h = d->Height >> l, z = layered || cubemap ? d->Depth : d->Depth >> l;
        size_t texels = fake_mul_sat(fake_mul_sat(w ? w : 1, h ? h : 1), z ? z : 1);
        total = fake_add_sat(total, fake_mul_sat(texels, elem * d->NumChannels));
    }
    *bytes = fake_round_up(total, 512);
    return CUDA_SUCCESS;
}

static CUresult fake_array_create(int kind, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uintptr_t *id) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    size_t bytes = 0;
    if (!id || !d) return CUDA_ERROR_INVALID_VALUE;
    r = fake_array_bytes(d, &levels, &bytes);
    if (r != CUDA_SUCCESS) return r;
    if (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) bytes = 0;   /* tiles hold the memory */
    fake_lock();
    if (fake_reserve((void **)&fake_arrays, &fake_arrays_cap, fake_narrays, 1, sizeof *fake_arrays) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        r = fake_hold_unsafe(dev, bytes);
    if (r == CUDA_SUCCESS) {
        fake_array *a = &fake_arrays[fake_narrays++];
        *a = (fake_array){ .id = fake_opaque_unsafe(kind), .kind = kind, .dev = dev, .flags = d->Flags,
                           .levels = levels, .bytes = bytes };
        *id = a->id;
    }
    fake_unlock();
    return r;
}

static CUresult fake_array_create_3d(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    uintptr_t id = 0;
    CUresult r = fake_array_create(FAKE_OBJ_ARRAY, d, 1, array ? &id : NULL);
    if (r == CUDA_SUCCESS) *array = (CUarray)id;
    return r;
}

CUresult impl_cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
    return fake_array_create_3d(array, desc);
}

CUresult impl_cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc) {
    if (!desc) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = desc->Width, .Height = desc->Height, .Format = desc->Format,
                                  .NumChannels = desc->NumChannels };
    return fake_array_create_3d(array, &d);
}

CUresult impl_cuArrayCreate(CUarray *array, const CUDA_ARRAY_DESCRIPTOR_v1 *desc) {
    if (!desc) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = desc->Width, .Height = desc->Height, .Format = desc->Format,
                                  .NumChannels = desc->NumChannels };
    return fake_array_create_3d(array, &d);
}

CUresult impl_cuArray3DCreate(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc) {
    if (!desc) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = desc->Width, .Height = desc->Height, .Depth = desc->Depth,
                                  .Format = desc->Format, .NumChannels = desc->NumChannels, .Flags = desc->Flags };
    return fake_array_create_3d(array, &d);
}

CUresult impl_cuMipmappedArrayCreate(CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                     unsigned int levels) {
    uintptr_t id = 0;
    CUresult r = fake_array_create(FAKE_OBJ_MIPMAP, desc, levels, array ? &id : NULL);
    if (r == CUDA_SUCCESS) *array = (CUmipmappedArray)id;
    return r;
}

static fake_array *fake_array_find_unsafe(int kind, uintptr_t id) {
    for (size_t i = 0; i < fake_narrays; i++)
        if (fake_arrays[i].id == id && fake_arrays[i].kind == kind) return &fake_arrays[i];
    return NULL;
}

static void fake_tile_drop_unsafe(size_t i) {
    unsigned long long mem = fake_tiles[i].mem;
    fake_tiles[i] = fake_tiles[--fake_ntiles];
    fake_mem *m = fake_mem_find_unsafe(mem);
    if (m) m->tiles--;
    fake_mem_settle_unsafe(mem);
}

/* Destroys an array: its tiles let go of their memory, its own bytes go back. */
static CUresult fake_array_destroy(int kind, uintptr_t id) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_array *a = id ? fake_array_find_unsafe(kind, id) : NULL;
    if (!a) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        fake_unhold_unsafe(a->dev, a->bytes);
        *a = fake_arrays[--fake_narrays];
        for (size_t i = fake_ntiles; i-- > 0;)
            if (fake_tiles[i].resource == id) fake_tile_drop_unsafe(i);
    }
    fake_unlock();
    return r;
}

CUresult impl_cuArrayDestroy(CUarray array) { return fake_array_destroy(FAKE_OBJ_ARRAY, (uintptr_t)array); }

CUresult impl_cuMipmappedArrayDestroy(CUmipmappedArray array) {
    return fake_array_destroy(FAKE_OBJ_MIPMAP, (uintptr_t)array);
}

/* The tile an operation names (its memory left out). */
static fake_tile fake_tile_of(const CUarrayMapInfo *info, const fake_array *a) {
    fake_tile t = { .resource = a->id, .subresource = -1 };
    if (a->flags & CUDA_ARRAY3D_DEFERRED_MAPPING) return t;   /* the subresource is ignored */
    t.subresource = info->subresourceType;
    if (t.subresource == FAKE_SUBRESOURCE_MIPTAIL) {
        t.layer = info->subresource.miptail.layer;
        t.miptail_offset = info->subresource.miptail.offset;
    } else {
        t.level = info->subresource.sparseLevel.level;
        t.layer = info->subresource.sparseLevel.layer;
        t.x = info->subresource.sparseLevel.offsetX;
        t.y = info->subresource.sparseLevel.offsetY;
        t.z = info->subresource.sparseLevel.offsetZ;
    }
    return t;
}

static fake_tile *fake_tile_find_unsafe(const fake_tile *t) {
    for (size_t i = 0; i < fake_ntiles; i++) {
        const fake_tile *o = &fake_tiles[i];
        if (o->resource == t->resource && o->subresource == t->subresource && o->level == t->level &&
            o->layer == t->layer && o->x == t->x && o->y == t->y && o->z == t->z &&
            o->miptail_offset == t->miptail_offset)
            return &fake_tiles[i];
    }
    return NULL;
}

/* Whether one operation is valid (nothing applied yet). */
static CUresult fake_map_info_check_unsafe(const CUarrayMapInfo *info) {
    int kind = info->resourceType == CU_RESOURCE_TYPE_ARRAY ? FAKE_OBJ_ARRAY
             : info->resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY ? FAKE_OBJ_MIPMAP : 0;
    if (!kind) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t id = kind == FAKE_OBJ_ARRAY ? (uintptr_t)info->resource.array : (uintptr_t)info->resource.mipmap;
    const fake_array *a = fake_array_find_unsafe(kind, id);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    if (!(a->flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) || info->flags != 0 ||
        info->deviceBitMask != 1u << a->dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(a->flags & CUDA_ARRAY3D_DEFERRED_MAPPING)) {
        if (info->subresourceType != FAKE_SUBRESOURCE_LEVEL && info->subresourceType != FAKE_SUBRESOURCE_MIPTAIL)
            return CUDA_ERROR_INVALID_VALUE;
        if (info->subresourceType == FAKE_SUBRESOURCE_LEVEL && info->subresource.sparseLevel.level >= a->levels)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (info->memOperationType == CU_MEM_OPERATION_TYPE_UNMAP)
        return info->memHandle.memHandle == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (info->memOperationType != CU_MEM_OPERATION_TYPE_MAP || info->memHandleType != CU_MEM_HANDLE_TYPE_GENERIC)
        return CUDA_ERROR_INVALID_VALUE;
    const fake_mem *m = fake_mem_handle_unsafe(info->memHandle.memHandle);
    if (!m || m->dev != a->dev || info->offset % FAKE_TILE_BYTES || info->offset >= m->size)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult fake_map_array(CUarrayMapInfo *infos, unsigned int count) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (count == 0) return CUDA_SUCCESS;
    if (!infos) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    for (unsigned int i = 0; i < count && r == CUDA_SUCCESS; i++) r = fake_map_info_check_unsafe(&infos[i]);
    if (r == CUDA_SUCCESS &&
        fake_reserve((void **)&fake_tiles, &fake_tiles_cap, fake_ntiles, count, sizeof *fake_tiles) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned int i = 0; i < count && r == CUDA_SUCCESS; i++) {
        const CUarrayMapInfo *info = &infos[i];
        int kind = info->resourceType == CU_RESOURCE_TYPE_ARRAY ? FAKE_OBJ_ARRAY : FAKE_OBJ_MIPMAP;
        uintptr_t id = kind == FAKE_OBJ_ARRAY ? (uintptr_t)info->resource.array : (uintptr_t)info->resource.mipmap;
        fake_tile t = fake_tile_of(info, fake_array_find_unsafe(kind, id));
        fake_tile *old = fake_tile_find_unsafe(&t);
        if (info->memOperationType == CU_MEM_OPERATION_TYPE_MAP) {
            t.mem = info->memHandle.memHandle;
            fake_mem_find_unsafe(t.mem)->tiles++;   /* the handle was checked to be live */
            fake_tiles[fake_ntiles++] = t;
        }
        if (old) fake_tile_drop_unsafe((size_t)(old - fake_tiles));   /* unmapped, or mapped anew */
    }
    fake_unlock();
    return r;
}

CUresult impl_cuMemMapArrayAsync(CUarrayMapInfo *infos, unsigned int count, CUstream stream) {
    (void)stream;
    return fake_map_array(infos, count);
}

CUresult impl_cuMemMapArrayAsync_ptsz(CUarrayMapInfo *infos, unsigned int count, CUstream stream) {
    (void)stream;
    return fake_map_array(infos, count);
}

/* ---- the exported functions ---------------------------------------------------------------------- */

FAKE_EXPORT(cuMemGetAllocationGranularity, (size_t *granularity, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags option), (granularity, prop, option))
FAKE_EXPORT(cuMemCreate, (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                          unsigned long long flags), (handle, size, prop, flags))
FAKE_EXPORT(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))
FAKE_EXPORT(cuMemAddressReserve, (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                  unsigned long long flags), (ptr, size, alignment, addr, flags))
FAKE_EXPORT(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))
FAKE_EXPORT(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                       unsigned long long flags), (ptr, size, offset, handle, flags))
FAKE_EXPORT(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))
FAKE_EXPORT(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count),
            (ptr, size, desc, count))
FAKE_EXPORT(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *handle, void *addr), (handle, addr))
FAKE_EXPORT(cuMemExportToShareableHandle, (void *shareable, CUmemGenericAllocationHandle handle,
                                           CUmemAllocationHandleType type, unsigned long long flags),
            (shareable, handle, type, flags))
FAKE_EXPORT(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle *handle, void *os_handle,
                                             CUmemAllocationHandleType type), (handle, os_handle, type))
FAKE_EXPORT(cuMulticastCreate, (CUmemGenericAllocationHandle *mc, const CUmulticastObjectProp *prop), (mc, prop))
FAKE_EXPORT(cuMulticastBindMem, (CUmemGenericAllocationHandle mc, size_t mc_offset, CUmemGenericAllocationHandle mem,
                                 size_t mem_offset, size_t size, unsigned long long flags),
            (mc, mc_offset, mem, mem_offset, size, flags))
FAKE_EXPORT(cuMulticastBindAddr, (CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr ptr, size_t size,
                                  unsigned long long flags), (mc, mc_offset, ptr, size, flags))
FAKE_EXPORT(cuMulticastUnbind, (CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset, size_t size),
            (mc, dev, mc_offset, size))
FAKE_EXPORT(cuArrayCreate, (CUarray *array, const CUDA_ARRAY_DESCRIPTOR_v1 *desc), (array, desc))
FAKE_EXPORT(cuArray3DCreate, (CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc), (array, desc))
FAKE_EXPORT(cuArrayCreate_v2, (CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc), (array, desc))
FAKE_EXPORT(cuArray3DCreate_v2, (CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc), (array, desc))
FAKE_EXPORT(cuMipmappedArrayCreate, (CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                     unsigned int levels), (array, desc, levels))
FAKE_EXPORT(cuArrayDestroy, (CUarray array), (array))
FAKE_EXPORT(cuMipmappedArrayDestroy, (CUmipmappedArray array), (array))
FAKE_EXPORT(cuMemMapArrayAsync, (CUarrayMapInfo *infos, unsigned int count, CUstream stream), (infos, count, stream))
FAKE_EXPORT(cuMemMapArrayAsync_ptsz, (CUarrayMapInfo *infos, unsigned int count, CUstream stream),
            (infos, count, stream))
