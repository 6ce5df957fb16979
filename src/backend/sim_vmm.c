/*
 * sim_vmm.c: the simulated backend's virtual memory management: address reservations (PROT_NONE
 * mappings), physical handles (records that count bytes), map and unmap (the rules in sim.c's
 * header), and sharing handles with other processes through memfds (IPC). Entry points take
 * vram__sim_lock; the _locked parts and helpers run under it.
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

/* ---- address reservations ------------------------------------------------------------------- */

static int sim_granular(uint64_t x) {
    return x % SIM_GRANULARITY == 0;
}

/* A PROT_NONE range of `size` bytes at a granularity-aligned address (over-reserved, trimmed). */
static void *sim_map_aligned(size_t size) {
    size_t span = 0;
    if (!vram__add_ok(size, SIM_GRANULARITY, &span)) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *a = (char *)(uintptr_t)vram__round_up((uintptr_t)p, SIM_GRANULARITY);
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + span > a + size) munmap(a + size, (size_t)(p + span - (a + size)));
    return a;
}

static vram_status sim_va_reserve_locked(int dev, size_t size, uint64_t *va) {
    char call[64];
    snprintf(call, sizeof call, "cuMemAddressReserve(%zu bytes)", size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (va == NULL) return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "NULL va");
    if (size == 0 || !sim_granular(size))
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the size must be a positive multiple of the granularity (2 MiB)");
    sim_resv *r = calloc(1, sizeof *r);
    if (r == NULL) return vram__sim_host_oom(call, dev);
    void *p = sim_map_aligned(size);
    if (p == NULL) {
        free(r);
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM,
                        "simulated: no host address space: %s", strerror(errno));
    }
    r->dev = dev;
    r->base = (uint64_t)(uintptr_t)p;
    r->size = size;
    r->next = vram__sim_st.resvs;
    vram__sim_st.resvs = r;
    SIM_COUNT(va_reserve);
    *va = r->base;
    return VRAM_OK;
}

vram_status vram__sim_va_reserve(int dev, size_t size, uint64_t *va) {
    SIM_LOCKED(sim_va_reserve_locked(dev, size, va));
}

/* The link to the reservation of dev that starts at va and has exactly `size` bytes, or NULL. */
static sim_resv **sim_resv_exact(int dev, uint64_t va, size_t size) {
    for (sim_resv **link = &vram__sim_st.resvs; *link != NULL; link = &(*link)->next)
        if ((*link)->dev == dev && (*link)->base == va && (*link)->size == size) return link;
    return NULL;
}

/* The reservation of dev that holds all of [va, va + size), or NULL. */
static sim_resv *sim_resv_holding(int dev, uint64_t va, size_t size) {
    for (sim_resv *r = vram__sim_st.resvs; r != NULL; r = r->next) {
        if (r->dev != dev || va < r->base || size > r->size) continue;
        if (va - r->base <= r->size - size) return r;
    }
    return NULL;
}

static vram_status sim_va_free_locked(int dev, uint64_t va, size_t size) {
    char call[96];
    snprintf(call, sizeof call, "cuMemAddressFree(0x%llx, %zu bytes)", (unsigned long long)va,
             size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_resv **link = sim_resv_exact(dev, va, size);
    if (link == NULL)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "no reservation of this device has exactly this address and size");
    sim_resv *r = *link;
    if (r->npieces > 0)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "%zu mapping(s) still inside; unmap them first", r->npieces);
    munmap((void *)(uintptr_t)r->base, r->size);
    *link = r->next;
    free(r->pieces);
    free(r);
    SIM_COUNT(va_free);
    return VRAM_OK;
}

vram_status vram__sim_va_free(int dev, uint64_t va, size_t size) {
    SIM_LOCKED(sim_va_free_locked(dev, va, size));
}

/* ---- physical handles ----------------------------------------------------------------------- */

static vram_status sim_phys_create_locked(int dev, size_t size, uint64_t *handle) {
    char call[64];
    snprintf(call, sizeof call, "cuMemCreate(%zu bytes)", size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (handle == NULL) return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "NULL handle");
    if (size == 0 || !sim_granular(size))
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the size must be a positive multiple of the granularity (2 MiB)");
    if ((s = vram__sim_take(call, dev, size)) != VRAM_OK) return s;
    sim_phys *h = malloc(sizeof *h);
    if (h == NULL || vram__sim_tab_reserve(&vram__sim_st.phys) != 0) {
        free(h);
        vram__sim_untake(dev, size);
        return vram__sim_host_oom(call, dev);
    }
    h->dev = dev;
    h->size = size;
    h->mapped_va = 0;
    h->fd = -1;
    h->imported = 0;
    vram__sim_tab_put(&vram__sim_st.phys, (uint64_t)(uintptr_t)h, h);
    vram__sim_took();
    SIM_COUNT(phys_create);
    *handle = (uint64_t)(uintptr_t)h;
    return VRAM_OK;
}

vram_status vram__sim_phys_create(int dev, size_t size, uint64_t *handle) {
    SIM_LOCKED(sim_phys_create_locked(dev, size, handle));
}

static vram_status sim_phys_release_locked(int dev, uint64_t handle) {
    char call[64];
    snprintf(call, sizeof call, "cuMemRelease(handle 0x%llx)", (unsigned long long)handle);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_phys *h = vram__sim_tab_get(&vram__sim_st.phys, handle);
    if (h == NULL || h->dev != dev)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "not a handle cuMemCreate returned on this device");
    if (h->mapped_va != 0)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "simulated: the handle is still mapped at 0x%llx; unmap it first",
                        (unsigned long long)h->mapped_va);
    if (!h->imported) vram__sim_untake(dev, h->size);
    vram__sim_tab_del(&vram__sim_st.phys, handle);
    vram__sim_drop_phys(handle, h);
    SIM_COUNT(phys_release);
    return VRAM_OK;
}

vram_status vram__sim_phys_release(int dev, uint64_t handle) {
    SIM_LOCKED(sim_phys_release_locked(dev, handle));
}

/* ---- map and unmap -------------------------------------------------------------------------- */

/* The index of the first piece at or above va. */
static size_t sim_piece_at(const sim_resv *r, uint64_t va) {
    size_t lo = 0, hi = r->npieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->pieces[mid].va < va) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Does [va, va + size) overlap a piece? i = sim_piece_at(r, va). */
static int sim_overlaps(const sim_resv *r, size_t i, uint64_t va, size_t size) {
    if (i > 0 && r->pieces[i - 1].va + r->pieces[i - 1].size > va) return 1;
    return i < r->npieces && r->pieces[i].va < va + size;
}

static int sim_pieces_reserve(sim_resv *r) {
    if (r->npieces < r->cap) return 0;
    size_t cap = r->cap ? r->cap * 2 : 16;
    sim_piece *p = realloc(r->pieces, cap * sizeof *p);
    if (p == NULL) return -1;
    r->pieces = p;
    r->cap = cap;
    return 0;
}

/* Why cuMemMap must refuse, or NULL; then *out and *at are the reservation and piece index. */
static const char *sim_map_refusal(int dev, uint64_t va, size_t size, const sim_phys *h,
                                   sim_resv **out, size_t *at) {
    if (h == NULL || h->dev != dev) return "not a handle cuMemCreate returned on this device";
    if (size != h->size) return "the size differs from the handle's size";
    if (!sim_granular(va)) return "the address is not a multiple of the granularity (2 MiB)";
    sim_resv *r = sim_resv_holding(dev, va, size);
    if (r == NULL) return "the range does not lie within one reservation of this device";
    size_t i = sim_piece_at(r, va);
    if (sim_overlaps(r, i, va, size)) return "the range overlaps a mapping";
    if (h->mapped_va != 0)
        return "simulated: the handle is already mapped (one mapping per handle)";
    *out = r;
    *at = i;
    return NULL;
}

static vram_status sim_map_locked(int dev, uint64_t va, size_t size, uint64_t handle) {
    char call[128];
    sim_resv *r = NULL;
    size_t i = 0;
    snprintf(call, sizeof call, "cuMemMap(0x%llx, %zu bytes, handle 0x%llx)",
             (unsigned long long)va, size, (unsigned long long)handle);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (vram__sim_st.map_failures > 0) {
        vram__sim_st.map_failures--;
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EOOM, "injected by vram__sim_fail_maps");
    }
    sim_phys *h = vram__sim_tab_get(&vram__sim_st.phys, handle);
    const char *why = sim_map_refusal(dev, va, size, h, &r, &i);
    if (why != NULL) return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "%s", why);
    if (sim_pieces_reserve(r) != 0) return vram__sim_host_oom(call, dev);
    int mapped = h->fd >= 0 ? mmap((void *)(uintptr_t)va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                   h->fd, 0) != MAP_FAILED
                            : mprotect((void *)(uintptr_t)va, size, PROT_READ | PROT_WRITE) == 0;
    if (!mapped)
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: host mapping: %s",
                        strerror(errno));
    memmove(&r->pieces[i + 1], &r->pieces[i], (r->npieces - i) * sizeof *r->pieces);
    r->pieces[i] = (sim_piece){ .va = va, .size = size, .phys = h };
    r->npieces++;
    h->mapped_va = va;
    SIM_COUNT(map);
    return VRAM_OK;
}

vram_status vram__sim_map(int dev, uint64_t va, size_t size, uint64_t handle) {
    SIM_LOCKED(sim_map_locked(dev, va, size, handle));
}

/* Do the pieces from index i on cover exactly [va, va + size), without gaps? *end: past them. */
static int sim_covers(const sim_resv *r, size_t i, uint64_t va, size_t size, size_t *end) {
    uint64_t at = va;
    while (at < va + size && i < r->npieces && r->pieces[i].va == at) at += r->pieces[i++].size;
    *end = i;
    return size > 0 && at == va + size;
}

static vram_status sim_unmap_locked(int dev, uint64_t va, size_t size) {
    char call[96];
    size_t end = 0;
    snprintf(call, sizeof call, "cuMemUnmap(0x%llx, %zu bytes)", (unsigned long long)va, size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (vram__sim_st.unmap_failures > 0) {
        vram__sim_st.unmap_failures--;
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_ELAUNCH, "injected by vram__sim_fail_maps");
    }
    sim_resv *r = sim_resv_holding(dev, va, size);
    if (r == NULL)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the range does not lie within one reservation of this device");
    size_t i = sim_piece_at(r, va);
    if (!sim_covers(r, i, va, size, &end))
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the range must be exactly whole, contiguous mappings");
    /* back to a PROT_NONE range (a memfd mapping is replaced; anonymous RAM goes back) */
    if (mmap((void *)(uintptr_t)va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
             0) == MAP_FAILED)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: host mmap: %s", strerror(errno));
    for (size_t k = i; k < end; k++) r->pieces[k].phys->mapped_va = 0;
    memmove(&r->pieces[i], &r->pieces[end], (r->npieces - end) * sizeof *r->pieces);
    r->npieces -= end - i;
    SIM_COUNT(unmap);
    return VRAM_OK;
}

vram_status vram__sim_unmap(int dev, uint64_t va, size_t size) {
    SIM_LOCKED(sim_unmap_locked(dev, va, size));
}

/* ---- sharing with other processes ------------------------------------------------------------ */

/* Gives handle h a memfd holding its bytes (those of its mapping, if mapped, which is then of the memfd). */
static const char *sim_share(sim_phys *h) {
    if (h->fd >= 0) return NULL;
    int fd = memfd_create("vram-sim", MFD_CLOEXEC);
    if (fd < 0) return "memfd_create failed";
    if (ftruncate(fd, (off_t)h->size) != 0) {
        close(fd);
        return "ftruncate of the memfd failed";
    }
    if (h->mapped_va != 0) {
        void *va = (void *)(uintptr_t)h->mapped_va;
        if (pwrite(fd, va, h->size, 0) != (ssize_t)h->size ||
            mmap(va, h->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
            close(fd);
            return "copying the mapping into the memfd failed";
        }
    }
    h->fd = fd;
    return NULL;
}

static vram_status sim_phys_export_locked(int dev, uint64_t handle, int *fd) {
    char call[96];
    snprintf(call, sizeof call, "cuMemExportToShareableHandle(handle 0x%llx)", (unsigned long long)handle);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_phys *h = vram__sim_tab_get(&vram__sim_st.phys, handle);
    if (h == NULL || h->dev != dev)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "not a handle cuMemCreate returned on this device");
    const char *why = sim_share(h);
    int out = why == NULL ? fcntl(h->fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (out < 0)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: %s: %s", why ? why : "dup", strerror(errno));
    *fd = out;
    return VRAM_OK;
}

vram_status vram__sim_phys_export(int dev, uint64_t handle, int *fd) {
    SIM_LOCKED(sim_phys_export_locked(dev, handle, fd));
}

static vram_status sim_phys_import_locked(int dev, int fd, size_t size, uint64_t *handle) {
    char call[96];
    snprintf(call, sizeof call, "cuMemImportFromShareableHandle(fd %d)", fd);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != size || !sim_granular(size) || size == 0)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "not an exported handle of %zu bytes", size);
    sim_phys *h = malloc(sizeof *h);
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (h == NULL || own < 0 || vram__sim_tab_reserve(&vram__sim_st.phys) != 0) {
        free(h);
        if (own >= 0) close(own);
        return vram__sim_host_oom(call, dev);
    }
    *h = (sim_phys){.dev = dev, .size = size, .mapped_va = 0, .fd = own, .imported = 1};
    vram__sim_tab_put(&vram__sim_st.phys, (uint64_t)(uintptr_t)h, h);
    SIM_COUNT(phys_create);
    *handle = (uint64_t)(uintptr_t)h;
    return VRAM_OK;
}

vram_status vram__sim_phys_import(int dev, int fd, size_t size, uint64_t *handle) {
    SIM_LOCKED(sim_phys_import_locked(dev, fd, size, handle));
}

vram_status vram__sim_ipc_get(int dev, uint64_t dptr, unsigned char handle[64]) {
    (void)dptr;
    (void)handle;
    return vram__sim_fail(VRAM_ERR_UNSUPPORTED, "cuIpcGetMemHandle", dev, "CUDA_ERROR_NOT_SUPPORTED",
                    "simulated: plain allocations are not shared with other processes (growth's are)");
}

vram_status vram__sim_ipc_open(int dev, const unsigned char handle[64], uint64_t *dptr) {
    (void)handle;
    (void)dptr;
    return vram__sim_fail(VRAM_ERR_UNSUPPORTED, "cuIpcOpenMemHandle", dev, "CUDA_ERROR_NOT_SUPPORTED",
                    "simulated: plain allocations are not shared with other processes");
}

vram_status vram__sim_ipc_close(int dev, uint64_t dptr) {
    (void)dptr;
    return vram__sim_fail(VRAM_ERR_UNSUPPORTED, "cuIpcCloseMemHandle", dev, "CUDA_ERROR_NOT_SUPPORTED",
                    "simulated: plain allocations are not shared with other processes");
}

/* ---- device ranges (for copies) ------------------------------------------------------------- */

int vram__sim_device_range(int dev, uint64_t addr, size_t size) {
    uint64_t end = 0;
    if (size == 0 || !vram__add_ok(addr, size, &end)) return 0;
    for (size_t i = 0; i < vram__sim_st.mems.cap; i++) {        /* a plain allocation holding it whole */
        const sim_mem *m = vram__sim_st.mems.buckets[i].val;
        uint64_t base = vram__sim_st.mems.buckets[i].key;
        if (m != NULL && m->dev == dev && addr >= base && end <= base + m->size) return 1;
    }
    sim_resv *r = sim_resv_holding(dev, addr, size);
    if (r == NULL) return 0;
    size_t i = sim_piece_at(r, addr);                       /* the first piece at or above addr ... */
    if (i > 0 && (i == r->npieces || r->pieces[i].va > addr)) i--;   /* ... or the one holding it */
    for (uint64_t at = addr; at < end; i++) {               /* mapped pieces, one after the other */
        if (i >= r->npieces || r->pieces[i].va > at || r->pieces[i].va + r->pieces[i].size <= at) return 0;
        at = r->pieces[i].va + r->pieces[i].size;
    }
    return 1;
}
