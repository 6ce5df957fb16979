/*
 * backend.h: the contract between the pool/runtime and a device memory source.
 *
 * Two implementations: the CUDA driver (backend/cuda.c, on libcuda.so.1 loaded with dlopen by backend/cuda_load.c) and the
 * simulated GPU (backend/sim*.c; its test hooks are in backend/sim_hooks.h, outside this contract).
 * The layers above never learn which one they talk to.
 *
 * Rules for every function:
 *   - returns VRAM_OK, or a status with this thread's message set through vram__fail(); driver
 *     failures keep the driver's error name in the message ("cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY");
 *   - the card running out of memory is VRAM_ERR_OUT_OF_MEMORY, every other driver failure
 *     VRAM_ERR_DRIVER;
 *   - on failure nothing was taken and every output is left untouched;
 *   - `dev` is an ordinal in [0, count) as returned by device_count (the driver's order after
 *     CUDA_VISIBLE_DEVICES);
 *   - device addresses are uint64_t (CUdeviceptr); physical handles and events are opaque.
 *   - callable from any thread; the backend serialises what it must.
 *
 * open() is called once before any other function and may be called again after close().
 */
#ifndef VRAM_BACKEND_H
#define VRAM_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

typedef struct vram__device_caps {
    int    vmm_supported;     /* address reserve / physical create / map are available */
    size_t granularity;       /* the granule: the physical mapping unit (2 MiB on an H200), a power of two */
} vram__device_caps;

/* Counters of driver calls, for tests and benchmarks (the sim counts exactly; CUDA counts too):
 * one X(name) a call the backends count, successful calls only, and (bytes_*) the bytes the copies
 * moved. The snapshot the counters() entry fills, the backends' running counters and their reset and
 * read come from it. */
#define VRAM_BACKEND_COUNTERS(X)                                                                    \
    X(mem_alloc) X(mem_free)                                                                        \
    X(overflow_alloc) X(overflow_free)                                                              \
    X(va_reserve) X(va_free)                                                                        \
    X(phys_create) X(phys_release)                                                                  \
    X(map) X(unmap)                                                                                 \
    X(event_record) X(event_sync) X(event_query)                                                    \
    X(host_alloc) X(host_free)                                                                      \
    X(copy_to_host) X(copy_to_device) X(bytes_to_host) X(bytes_to_device)

typedef struct vram__backend_counters {
#define VRAM_COUNTER_FIELD_(name) uint64_t name;
    VRAM_BACKEND_COUNTERS(VRAM_COUNTER_FIELD_)
#undef VRAM_COUNTER_FIELD_
} vram__backend_counters;

/* A backend's running counters (atomics: any thread counts): vram__backend_count(&c, map) after a
 * successful call, vram__backend_counts_reset at open(), vram__backend_counts_read for counters(). */
typedef struct vram__backend_counts {
#define VRAM_COUNTER_ATOMIC_(name) _Atomic uint64_t name;
    VRAM_BACKEND_COUNTERS(VRAM_COUNTER_ATOMIC_)
#undef VRAM_COUNTER_ATOMIC_
} vram__backend_counts;

#define vram__backend_count(counts, name) atomic_fetch_add_explicit(&(counts)->name, 1, memory_order_relaxed)
#define vram__backend_count_n(counts, name, n) atomic_fetch_add_explicit(&(counts)->name, (n), memory_order_relaxed)

static inline void vram__backend_counts_reset(vram__backend_counts *c) {
#define VRAM_COUNTER_RESET_(name) atomic_store(&c->name, 0);
    VRAM_BACKEND_COUNTERS(VRAM_COUNTER_RESET_)
#undef VRAM_COUNTER_RESET_
}

static inline void vram__backend_counts_read(vram__backend_counts *c, vram__backend_counters *out) {
#define VRAM_COUNTER_READ_(name) out->name = atomic_load(&c->name);
    VRAM_BACKEND_COUNTERS(VRAM_COUNTER_READ_)
#undef VRAM_COUNTER_READ_
}

typedef struct vram__backend {
    const char *name;   /* "cuda" or "sim" */

    /* Loads and initialises the driver. VRAM_ERR_NO_DEVICE with the reason (library not found,
     * cuInit's error name, zero devices, CUDA_VISIBLE_DEVICES hiding every card) and what to try;
     * VRAM_ERR_INVALID_ARGUMENT for a malformed backend variable (VRAM_SIM_DEVICES, ...). */
    vram_status (*open)(void);
    void        (*close)(void);   /* releases the driver; every resource must already be freed */

    vram_status (*device_count)(int *count);
    /* Fills everything but name/index (the runtime names devices). */
    vram_status (*device_props)(int dev, vram_physical_device *out, vram__device_caps *caps);
    vram_status (*mem_info)(int dev, size_t *free_bytes, size_t *total_bytes);

    /* Plain allocation (cuMemAlloc): at least 256-byte aligned. */
    vram_status (*mem_alloc)(int dev, size_t size, uint64_t *dptr);
    vram_status (*mem_free)(int dev, uint64_t dptr);

    /* Virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap + cuMemSetAccess).
     * Sizes and addresses are multiples of caps.granularity. */
    vram_status (*va_reserve)(int dev, size_t size, uint64_t *va);
    vram_status (*va_free)(int dev, uint64_t va, size_t size);
    vram_status (*phys_create)(int dev, size_t size, uint64_t *handle);
    vram_status (*phys_release)(int dev, uint64_t handle);
    /* Maps the whole of `handle` (created with `size`) at va and grants read/write to `dev`. */
    vram_status (*map)(int dev, uint64_t va, size_t size, uint64_t handle);
    vram_status (*unmap)(int dev, uint64_t va, size_t size);

    /* Sharing memory with another process (IPC). phys_export gives a new file descriptor (the
     * caller's to close) for a handle of phys_create; phys_import a handle of this process for a
     * descriptor of another's export (of `size` bytes; the descriptor stays the caller's), released
     * with phys_release. For plain allocations: ipc_get gives the VRAM_IPC_PLAIN_BYTES handle of
     * the allocation starting at dptr, ipc_open maps another process's into this one, ipc_close
     * unmaps it. VRAM_ERR_UNSUPPORTED where the device or driver cannot. */
    vram_status (*phys_export)(int dev, uint64_t handle, int *fd);
    vram_status (*phys_import)(int dev, int fd, size_t size, uint64_t *handle);
    vram_status (*ipc_get)(int dev, uint64_t dptr, unsigned char handle[64]);
    vram_status (*ipc_open)(int dev, const unsigned char handle[64], uint64_t *dptr);
    vram_status (*ipc_close)(int dev, uint64_t dptr);

    /* Host memory for what the device's memory cannot hold (the allocator option overflow:host):
     * at least `size` bytes of host memory at *dptr, an address in the device's address space that
     * its kernels read and write (over the bus); *held: the bytes the host holds for it (`size`
     * rounded up to the driver's unit). Never counted against the card. The CUDA driver gives it
     * with virtual memory management and a host location (cuMemCreate with
     * CU_MEM_LOCATION_TYPE_HOST_NUMA, mapped and given to the device) where it can, else as pinned
     * mapped host memory (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP, cuMemHostGetDevicePointer).
     * overflow_free gives back what overflow_alloc gave at dptr (`held`: its *held). */
    vram_status (*overflow_alloc)(int dev, size_t size, uint64_t *dptr, size_t *held);
    vram_status (*overflow_free)(int dev, uint64_t dptr, size_t held);

    /* Stream ordering: record an event on `stream` (a CUstream; NULL is the default stream), ask
     * whether it completed, wait for it, give it back (event_destroy: a backend may keep it and
     * record it again later, as the CUDA one keeps up to 256 per device). */
    vram_status (*event_record)(int dev, void *stream, void **event);
    vram_status (*event_query)(int dev, void *event, int *done);
    vram_status (*event_sync)(int dev, void *event);
    void        (*event_destroy)(int dev, void *event);

    /* Page-locked (pinned) host memory of `size` bytes (cuMemHostAlloc), which the device copies
     * to and from at the bus's full rate, and its free (cuMemFreeHost); VRAM_ERR_UNSUPPORTED where
     * the driver has no such call. Copies between device memory (mapped: a plain allocation or
     * mapped granules) and host memory (cuMemcpyDtoH / cuMemcpyHtoD): synchronous, the bytes are
     * there when the call returns; each copy is one call and counts its bytes (bytes_to_host,
     * bytes_to_device). */
    vram_status (*host_alloc)(int dev, size_t size, void **host);
    vram_status (*host_free)(int dev, void *host);
    vram_status (*copy_to_host)(int dev, void *dst, uint64_t src, size_t size);
    vram_status (*copy_to_device)(int dev, uint64_t dst, const void *src, size_t size);

    void        (*counters)(vram__backend_counters *out);
} vram__backend;

extern const vram__backend vram__backend_cuda;
extern const vram__backend vram__backend_sim;

/* (the simulated backend's test hooks are in backend/sim_hooks.h, not in this contract) */

#endif /* VRAM_BACKEND_H */
