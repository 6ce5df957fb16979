/*
 * sim.c: the simulated GPU backend ("sim"), so that libvram and all its tests run without a GPU.
 *
 * The model
 *   - Cards exist only in this process. VRAM_SIM_DEVICES lists them: "2x16GiB", "80GiB,24GiB",
 *     "1x16GiB,2x8G", "2x24GiB@8.6,16GiB@7.5" (count x size, then a compute capability after '@',
 *     comma separated; default 1x16GiB; at most 64 cards). CUDA_VISIBLE_DEVICES then selects and
 *     renumbers them as the CUDA driver does. Card i is "vram simulated GPU", its compute capability
 *     (9.0 unless given), PCI bus 0000:<i>:00.0 and a UUID derived from i alone, so that it is the
 *     same in every run whatever is visible.
 *   - Device memory is host address space: cuMemAlloc is an anonymous MAP_NORESERVE read/write
 *     mapping, so an untouched 16 GiB card costs no RAM. Each card counts its used bytes (plain
 *     allocations plus physical handles) against its size; mem_info reports size - used.
 *   - Virtual memory management: a reservation is a PROT_NONE MAP_NORESERVE mapping aligned to
 *     the 2 MiB granularity; a physical handle is a heap record that only counts bytes; map makes
 *     its range of the reservation read/write, unmap makes it PROT_NONE again and gives the pages
 *     back (MADV_DONTNEED). The bytes therefore live in the address range, not in the handle: a
 *     handle unmapped and mapped elsewhere does not bring its data along (the pool moves only idle
 *     memory, which holds no block).
 *   - Pinned host memory (host_alloc) is heap memory the sim keeps a record of; a copy between it
 *     and device memory is a memcpy, made only when the device range is mapped (or a plain
 *     allocation's) and the host range lies in one host block (sim_host.c).
 *   - VRAM_SIM_SHARED=FILE makes the cards one machine's, shared with every process that names FILE
 *     (as the fake driver's FAKE_CUDA_SHARED): each process's bytes per card in an entry of the file,
 *     the entry of a process that is gone counting nothing; allocations and mem_info go by the sum, so one
 *     process sees the memory another takes and gives back.
 *   - Sharing with other processes (IPC): a handle's first export gives it a memfd holding the
 *     bytes of its mapping (copied in, then the mapping is of the memfd: MAP_SHARED), and from then
 *     on it maps and unmaps that memfd, so its bytes follow it; phys_export hands out a dup of the
 *     memfd, phys_import makes a handle of another process's (not counted against this card: the
 *     memory is the exporter's). Plain allocations cannot be shared (VRAM_ERR_UNSUPPORTED).
 *   - Events: every stream (any void *, NULL included; the device plays no part) has a recorded
 *     and a completed sequence number. An event takes the next recorded number and is done once
 *     the completed number reaches it: vram__sim_stream_complete() raises it to the last recorded
 *     number, event_sync to the event's own (the wait is instantaneous; after
 *     vram__sim_hold_event_syncs(1) it waits for vram__sim_stream_complete, as the driver waits for
 *     the stream). Tests make the next n event records fail with vram__sim_fail_event_records(n)
 *     (CUDA_ERROR_LAUNCH_FAILED); the next maps and unmaps with vram__sim_fail_maps(maps, unmaps); the
 *     next copies and host allocations with vram__sim_fail_copies(copies, host_allocs).
 *
 * The rules (the driver's, and stricter where the pool never needs the freedom, to catch bugs)
 *   - VRAM_SIM_DEVICES, VRAM_SIM_FAIL_ALLOC_AFTER, VRAM_SIM_SHARED and CUDA_VISIBLE_DEVICES are read by open();
 *     a malformed value is VRAM_ERR_INVALID_ARGUMENT naming the variable, no visible card is
 *     VRAM_ERR_NO_DEVICE. open() on an open backend is VRAM_OK and changes nothing; after close()
 *     the next open() reads the environment again and sets the counters to zero (as cuda.c does).
 *   - A card running out, or any allocation (mem_alloc, phys_create) after the first N that
 *     succeeded with VRAM_SIM_FAIL_ALLOC_AFTER=N: VRAM_ERR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY.
 *   - VRAM_ERR_DRIVER with CUDA_ERROR_INVALID_VALUE: size 0; VMM sizes or addresses that are not
 *     multiples of the granularity; addresses or handles the device did not hand out; map unless
 *     the size is the handle's, the range lies in one reservation, overlaps no mapping and the
 *     handle is not mapped yet (one mapping per handle); unmap unless the range is exactly whole,
 *     contiguous mappings; va_free unless it is exactly one reservation with nothing mapped;
 *     phys_release of a mapped handle (the driver would defer the free). Unknown events:
 *     CUDA_ERROR_INVALID_HANDLE.
 *   - As in cuda.c, a call before open() is VRAM_ERR_INTERNAL and a device ordinal out of range
 *     VRAM_ERR_INVALID_ARGUMENT.
 *   - Every failure sets the message through vram__fail ("<call> on device <d>: <CUDA error>
 *     [<why>]") and changes no output and no state; counters count successful calls only.
 *
 * One mutex guards all bookkeeping (no hot path comes here often); counters are atomics.
 * close() unmaps and frees whatever is left.
 *
 * The files: this one holds the state, open and close, devices, the accounting of a card's bytes,
 * plain memory and the backend table; sim_env.c the environment, sim_table.c the hash table,
 * sim_vmm.c reservations, handles, map and unmap and IPC, sim_events.c streams and events, sim_host.c
 * host memory, copies and the shared cards, sim_overflow.c host memory for overflow (what they share:
 * sim_internal.h). The test hooks named above are not part of the driver contract:
 * sim_hooks.c, declared in sim_hooks.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/sim_internal.h"

/* ---- the state ------------------------------------------------------------------------------ */

sim_state       vram__sim_st;
pthread_mutex_t vram__sim_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t  vram__sim_stream_done = PTHREAD_COND_INITIALIZER;
int             vram__sim_hold_syncs, vram__sim_syncs_blocked;
vram__backend_counts vram__sim_count;

/* ---- messages ------------------------------------------------------------------------------- */

/* Sets "<call> on device <dev>: <error> [<why>]" and returns s. */
vram_status vram__sim_fail(vram_status s, const char *call, int dev, const char *error, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return vram__fail(s, "%s on device %d: %s [%s]", call, dev, error, why);
}

vram_status vram__sim_host_oom(const char *call, int dev) {
    return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: out of host memory");
}

static vram_status sim_check_open(void) {
    if (vram__sim_st.open) return VRAM_OK;
    return vram__fail(VRAM_ERR_INTERNAL, "the simulated GPU backend is not open");
}

vram_status vram__sim_check_dev(int dev) {
    vram_status s = sim_check_open();
    if (s != VRAM_OK) return s;
    if (dev >= 0 && dev < vram__sim_st.cfg.ndev) return VRAM_OK;
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "simulated device %d out of range [0, %d)", dev,
                      vram__sim_st.cfg.ndev);
}

/* ---- open and close ------------------------------------------------------------------------- */

static void sim_drop_mem(uint64_t addr, void *val) {
    sim_mem *m = val;
    munmap((void *)(uintptr_t)addr, m->size);
    free(m);
}

static void sim_drop_record(uint64_t key, void *val) {
    (void)key;
    free(val);
}

void vram__sim_drop_phys(uint64_t key, void *val) {
    sim_phys *h = val;
    if (h->fd >= 0) close(h->fd);
    sim_drop_record(key, val);
}

static void sim_drop_host(uint64_t addr, void *val) {
    free((void *)(uintptr_t)addr);
    free(val);
}

static void sim_reset_counters(void) {
    vram__backend_counts_reset(&vram__sim_count);
}

/* Frees everything and forgets the configuration. */
static void sim_reset(void) {
    vram__sim_overflow_reset_locked();
    vram__sim_tab_clear(&vram__sim_st.mems, sim_drop_mem);
    vram__sim_tab_clear(&vram__sim_st.phys, vram__sim_drop_phys);
    vram__sim_tab_clear(&vram__sim_st.events, sim_drop_record);
    vram__sim_tab_clear(&vram__sim_st.hosts, sim_drop_host);
    vram__sim_share_close();
    while (vram__sim_st.resvs != NULL) {
        sim_resv *r = vram__sim_st.resvs;
        vram__sim_st.resvs = r->next;
        munmap((void *)(uintptr_t)r->base, r->size);
        free(r->pieces);
        free(r);
    }
    while (vram__sim_st.streams != NULL) {
        sim_stream *s = vram__sim_st.streams;
        vram__sim_st.streams = s->next;
        free(s);
    }
    memset(&vram__sim_st, 0, sizeof vram__sim_st);
    vram__sim_st.share_fd = -1;
}

static vram_status sim_open_locked(void) {
    sim_config cfg;
    if (vram__sim_st.open) return VRAM_OK;
    memset(&cfg, 0, sizeof cfg);
    vram_status s = vram__sim_parse_devices(getenv("VRAM_SIM_DEVICES"), &cfg);
    if (s == VRAM_OK) s = vram__sim_parse_fail_after(getenv("VRAM_SIM_FAIL_ALLOC_AFTER"), &cfg);
    if (s == VRAM_OK) s = vram__sim_parse_visible(getenv("CUDA_VISIBLE_DEVICES"), &cfg);
    if (s != VRAM_OK) return s;
    sim_reset();
    if ((s = vram__sim_share_open()) != VRAM_OK) return s;
    vram__sim_st.cfg = cfg;
    for (int d = 0; d < cfg.ndev; d++) {
        vram__sim_st.dev[d].card = cfg.dev_card[d];
        vram__sim_st.dev[d].capacity = cfg.card_size[cfg.dev_card[d]];
    }
    vram__sim_st.open = 1;
    sim_reset_counters();
    return VRAM_OK;
}

static vram_status sim_open(void) {
    SIM_LOCKED(sim_open_locked());
}

static void sim_close(void) {
    pthread_mutex_lock(&vram__sim_lock);
    sim_reset();
    pthread_mutex_unlock(&vram__sim_lock);
}

/* ---- devices -------------------------------------------------------------------------------- */

static vram_status sim_device_count_locked(int *count) {
    vram_status s = sim_check_open();
    if (s != VRAM_OK) return s;
    if (count == NULL)
        return vram__fail(VRAM_ERR_DRIVER, "cuDeviceGetCount: " SIM_EINVAL " [NULL count]");
    *count = vram__sim_st.cfg.ndev;
    return VRAM_OK;
}

static vram_status sim_device_count(int *count) {
    SIM_LOCKED(sim_device_count_locked(count));
}

static vram_status sim_device_props_locked(int dev, vram_physical_device *out,
                                           vram__device_caps *caps) {
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    int card = vram__sim_st.dev[dev].card;
    if (out != NULL) {
        snprintf(out->product, sizeof out->product, "%s", "vram simulated GPU");
        vram__sim_uuid(card, out->uuid, sizeof out->uuid);
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "0000:%02x:00.0", (unsigned)card);
        out->total_bytes = vram__sim_st.dev[dev].capacity;
        out->compute_major = vram__sim_st.cfg.card_major[card];
        out->compute_minor = vram__sim_st.cfg.card_minor[card];
    }
    if (caps != NULL) {
        caps->vmm_supported = 1;
        caps->granularity = SIM_GRANULARITY;
    }
    return VRAM_OK;
}

static vram_status sim_device_props(int dev, vram_physical_device *out, vram__device_caps *caps) {
    SIM_LOCKED(sim_device_props_locked(dev, out, caps));
}

static vram_status sim_mem_info_locked(int dev, size_t *free_bytes, size_t *total_bytes) {
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    const sim_device *d = &vram__sim_st.dev[dev];
    vram__sim_share_lock();
    size_t held = vram__sim_card_held(dev);
    vram__sim_share_unlock();
    if (free_bytes != NULL) *free_bytes = held < d->capacity ? d->capacity - held : 0;
    if (total_bytes != NULL) *total_bytes = d->capacity;
    return VRAM_OK;
}

static vram_status sim_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
    SIM_LOCKED(sim_mem_info_locked(dev, free_bytes, total_bytes));
}

/* ---- allocation accounting ------------------------------------------------------------------ */

/* May `size` more bytes be taken on dev? Fault injection first, then the card's capacity (less what
 * other processes hold on it, with VRAM_SIM_SHARED); taken at once when they may. */
vram_status vram__sim_take(const char *call, int dev, size_t size) {
    sim_device *d = &vram__sim_st.dev[dev];
    size_t total = 0;
    if (vram__sim_st.cfg.fail_set && vram__sim_st.alloc_ok >= vram__sim_st.cfg.fail_after)
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM,
                        "simulated: VRAM_SIM_FAIL_ALLOC_AFTER=%llu", vram__sim_st.cfg.fail_after);
    vram__sim_share_lock();                          /* (the check and the take at once for every process) */
    size_t held = vram__sim_card_held(dev), others = held > d->used ? held - d->used : 0;
    int room = vram__add_ok(held, size, &total) && total <= d->capacity;
    if (room) {
        d->used += size;
        vram__sim_share_write(dev);
    }
    vram__sim_share_unlock();
    if (room) return VRAM_OK;
    char used[32], cap[32], other[96] = "";
    vram__format_bytes(used, sizeof used, d->used);
    vram__format_bytes(cap, sizeof cap, d->capacity);
    if (others > 0) {
        char o[32];
        vram__format_bytes(o, sizeof o, others);
        snprintf(other, sizeof other, ", %s by other processes (VRAM_SIM_SHARED)", o);
    }
    return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM,
                    "simulated card of %s: %s in use%s, %zu bytes free", cap, used, other,
                    held < d->capacity ? d->capacity - held : 0);
}

void vram__sim_untake(int dev, size_t size) {
    vram__sim_share_lock();
    vram__sim_st.dev[dev].used -= size;
    vram__sim_share_write(dev);
    vram__sim_share_unlock();
}

void vram__sim_took(void) {
    vram__sim_st.alloc_ok++;
}

/* ---- plain memory --------------------------------------------------------------------------- */

static vram_status sim_mem_alloc_locked(int dev, size_t size, uint64_t *dptr) {
    char call[64];
    snprintf(call, sizeof call, "cuMemAlloc(%zu bytes)", size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (size == 0 || dptr == NULL)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, size ? "NULL dptr" : "size 0");
    if ((s = vram__sim_take(call, dev, size)) != VRAM_OK) return s;
    sim_mem *m = malloc(sizeof *m);
    if (m == NULL || vram__sim_tab_reserve(&vram__sim_st.mems) != 0) {
        free(m);
        vram__sim_untake(dev, size);
        return vram__sim_host_oom(call, dev);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(m);
        vram__sim_untake(dev, size);
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: host mmap: %s",
                        strerror(errno));
    }
    m->dev = dev;
    m->size = size;
    vram__sim_tab_put(&vram__sim_st.mems, (uint64_t)(uintptr_t)p, m);
    vram__sim_took();
    SIM_COUNT(mem_alloc);
    *dptr = (uint64_t)(uintptr_t)p;
    return VRAM_OK;
}

static vram_status sim_mem_alloc(int dev, size_t size, uint64_t *dptr) {
    SIM_LOCKED(sim_mem_alloc_locked(dev, size, dptr));
}

static vram_status sim_mem_free_locked(int dev, uint64_t dptr) {
    char call[64];
    snprintf(call, sizeof call, "cuMemFree(0x%llx)", (unsigned long long)dptr);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_mem *m = vram__sim_tab_get(&vram__sim_st.mems, dptr);
    if (m == NULL || m->dev != dev)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "not an address cuMemAlloc returned on this device");
    if (munmap((void *)(uintptr_t)dptr, m->size) != 0)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: host munmap: %s",
                        strerror(errno));
    vram__sim_untake(dev, m->size);
    vram__sim_tab_del(&vram__sim_st.mems, dptr);
    free(m);
    SIM_COUNT(mem_free);
    return VRAM_OK;
}

static vram_status sim_mem_free(int dev, uint64_t dptr) {
    SIM_LOCKED(sim_mem_free_locked(dev, dptr));
}

/* ---- counters and the backend --------------------------------------------------------------- */

static void sim_counters(vram__backend_counters *out) {
    if (out == NULL) return;
    vram__backend_counts_read(&vram__sim_count, out);
}

const vram__backend vram__backend_sim = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .device_count = sim_device_count,
    .device_props = sim_device_props,
    .mem_info = sim_mem_info,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .va_reserve = vram__sim_va_reserve,
    .va_free = vram__sim_va_free,
    .phys_create = vram__sim_phys_create,
    .phys_release = vram__sim_phys_release,
    .map = vram__sim_map,
    .unmap = vram__sim_unmap,
    .phys_export = vram__sim_phys_export,
    .phys_import = vram__sim_phys_import,
    .ipc_get = vram__sim_ipc_get,
    .ipc_open = vram__sim_ipc_open,
    .ipc_close = vram__sim_ipc_close,
    .overflow_alloc = vram__sim_overflow_alloc,
    .overflow_free = vram__sim_overflow_free,
    .event_record = vram__sim_event_record,
    .event_query = vram__sim_event_query,
    .event_sync = vram__sim_event_sync,
    .event_destroy = vram__sim_event_destroy,
    .host_alloc = vram__sim_host_alloc,
    .host_free = vram__sim_host_free,
    .copy_to_host = vram__sim_copy_to_host,
    .copy_to_device = vram__sim_copy_to_device,
    .counters = sim_counters,
};
