/*
 * sim.c: the simulated GPU backend ("sim"), so that libvram and all its tests run without a GPU.
 *
 * The model
 *   - Cards exist only in this process. VRAM_SIM_DEVICES lists them: "2x16GiB", "80GiB,24GiB",
 *     "1x16GiB,2x8G" (count x size, comma separated; default 1x16GiB; at most 64 cards).
 *     CUDA_VISIBLE_DEVICES then selects and renumbers them as the CUDA driver does. Card i is
 *     "vram simulated GPU", compute capability 9.0, PCI bus 0000:<i>:00.0 and a UUID derived from
 *     i alone, so that it is the same in every run whatever is visible.
 *   - Device memory is host address space: cuMemAlloc is an anonymous MAP_NORESERVE read/write
 *     mapping, so an untouched 16 GiB card costs no RAM. Each card counts its used bytes (plain
 *     allocations plus physical handles) against its size; mem_info reports size - used.
 *   - Virtual memory management: a reservation is a PROT_NONE MAP_NORESERVE mapping aligned to
 *     the 2 MiB granularity; a physical handle is a heap record that only counts bytes; map makes
 *     its range of the reservation read/write, unmap makes it PROT_NONE again and gives the pages
 *     back (MADV_DONTNEED). The bytes therefore live in the address range, not in the handle: a
 *     handle unmapped and mapped elsewhere does not bring its data along (the pool moves only idle
 *     memory, which holds no block).
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
 *     (CUDA_ERROR_LAUNCH_FAILED); the next maps and unmaps with vram__sim_fail_maps(maps, unmaps).
 *
 * The rules (the driver's, and stricter where the pool never needs the freedom, to catch bugs)
 *   - VRAM_SIM_DEVICES, VRAM_SIM_FAIL_ALLOC_AFTER and CUDA_VISIBLE_DEVICES are read by open();
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

#include "backend/backend.h"

#define SIM_MAX_CARDS    64
#define SIM_GRANULARITY  (2 * VRAM_MIB)
#define SIM_DEFAULT_CARD (16 * VRAM_GIB)
#define SIM_DEVICES_HINT "expected e.g. 2x16GiB or 80GiB,24GiB"

#define SIM_EINVAL  "CUDA_ERROR_INVALID_VALUE (invalid argument)"
#define SIM_EOOM    "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
#define SIM_EHANDLE "CUDA_ERROR_INVALID_HANDLE (invalid resource handle)"
#define SIM_EUNKNOWN "CUDA_ERROR_UNKNOWN (unknown error)"
#define SIM_ELAUNCH "CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)"
#define SIM_ENOTSUP "CUDA_ERROR_NOT_SUPPORTED (operation not supported)"

/* ---- bookkeeping types ---------------------------------------------------------------------- */

/* An open-addressing hash table from non-zero 64-bit keys (addresses, handles) to records. */
typedef struct sim_slot {
    uint64_t key;   /* 0: empty */
    void    *val;
} sim_slot;

typedef struct sim_table {
    sim_slot *slots;
    size_t    cap, count;   /* cap: 0 or a power of two */
} sim_table;

typedef struct sim_mem {        /* a cuMemAlloc block; its address is the key */
    int    dev;
    size_t size;
} sim_mem;

typedef struct sim_phys {       /* a cuMemCreate handle: the record's address */
    int      dev;
    size_t   size;
    uint64_t mapped_va;         /* 0 while unmapped */
    int      fd;                /* exported or imported: the memfd its bytes live in; else -1 */
    int      imported;          /* phys_import's: not counted against the card */
} sim_phys;

typedef struct sim_piece {      /* one mapping inside a reservation */
    uint64_t  va;
    size_t    size;
    sim_phys *phys;
} sim_piece;

typedef struct sim_resv {       /* a cuMemAddressReserve range; pieces sorted by address */
    struct sim_resv *next;
    int              dev;
    uint64_t         base;
    size_t           size;
    sim_piece       *pieces;
    size_t           npieces, cap;
} sim_resv;

typedef struct sim_stream {
    struct sim_stream *next;
    void              *stream;
    uint64_t           recorded, completed;
} sim_stream;

typedef struct sim_event {
    int         dev;
    sim_stream *stream;
    uint64_t    seq;
} sim_event;

typedef struct sim_config {     /* what open() reads from the environment */
    int                ncards;
    size_t             card_size[SIM_MAX_CARDS];
    int                ndev;
    int                dev_card[SIM_MAX_CARDS];   /* visible ordinal -> card index */
    int                fail_set;
    unsigned long long fail_after;
} sim_config;

typedef struct sim_device {
    int    card;
    size_t capacity, used;
} sim_device;

static struct {
    int                open;
    sim_config         cfg;
    sim_device         dev[SIM_MAX_CARDS];
    unsigned long long alloc_ok;   /* successful allocations, for VRAM_SIM_FAIL_ALLOC_AFTER */
    int                event_failures;   /* event records still to fail (vram__sim_fail_event_records) */
    int                map_failures, unmap_failures;   /* maps / unmaps still to fail (vram__sim_fail_maps) */
    sim_table          mems, phys, events;
    sim_resv          *resvs;
    sim_stream        *streams;
} sim_st;

static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
/* vram__sim_hold_event_syncs: event_sync waits on it for the stream to get there (under sim_lock) */
static pthread_cond_t  sim_stream_done = PTHREAD_COND_INITIALIZER;
static int             sim_hold_syncs, sim_syncs_waiting;   /* under sim_lock; kept across close */

static vram__backend_counts sim_count;

#define SIM_COUNT(field) vram__backend_count(&sim_count, field)

/* Runs `expr` (a vram_status expression) under the lock and returns its value. */
#define SIM_LOCKED(expr)                      \
    do {                                      \
        pthread_mutex_lock(&sim_lock);        \
        vram_status sim_s_ = (expr);          \
        pthread_mutex_unlock(&sim_lock);      \
        return sim_s_;                        \
    } while (0)

/* ---- messages ------------------------------------------------------------------------------- */

/* Sets "<call> on device <dev>: <error> [<why>]" and returns s. */
static vram_status sim_fail(vram_status s, const char *call, int dev, const char *error,
                            const char *fmt, ...) VRAM_PRINTF(5, 6);
static vram_status sim_fail(vram_status s, const char *call, int dev, const char *error,
                            const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return vram__fail(s, "%s on device %d: %s [%s]", call, dev, error, why);
}

static vram_status sim_host_oom(const char *call, int dev) {
    return sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: out of host memory");
}

static vram_status sim_check_open(void) {
    if (sim_st.open) return VRAM_OK;
    return vram__fail(VRAM_ERR_INTERNAL, "the simulated GPU backend is not open");
}

static vram_status sim_check_dev(int dev) {
    vram_status s = sim_check_open();
    if (s != VRAM_OK) return s;
    if (dev >= 0 && dev < sim_st.cfg.ndev) return VRAM_OK;
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "simulated device %d out of range [0, %d)", dev,
                      sim_st.cfg.ndev);
}

/* ---- hash table ----------------------------------------------------------------------------- */

static uint64_t sim_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    return k ^ (k >> 33);
}

/* The slot holding `key`, or the empty slot where it would go (cap > 0, never full). */
static size_t sim_tab_slot(const sim_table *t, uint64_t key) {
    size_t mask = t->cap - 1, i = (size_t)sim_hash(key) & mask;
    while (t->slots[i].key != 0 && t->slots[i].key != key) i = (i + 1) & mask;
    return i;
}

static void *sim_tab_get(const sim_table *t, uint64_t key) {
    if (t->cap == 0 || key == 0) return NULL;
    return t->slots[sim_tab_slot(t, key)].val;
}

/* Makes room for one more entry, so that sim_tab_put after the side effects cannot fail. */
static int sim_tab_reserve(sim_table *t) {
    if ((t->count + 1) * 4 <= t->cap * 3) return 0;
    size_t cap = t->cap ? t->cap * 2 : 64, old_cap = t->cap;
    sim_slot *old = t->slots, *slots = calloc(cap, sizeof *slots);
    if (slots == NULL) return -1;
    t->slots = slots;
    t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != 0) t->slots[sim_tab_slot(t, old[i].key)] = old[i];
    free(old);
    return 0;
}

static void sim_tab_put(sim_table *t, uint64_t key, void *val) {
    size_t i = sim_tab_slot(t, key);
    t->slots[i].key = key;
    t->slots[i].val = val;
    t->count++;
}

/* Linear probing deletion by backward shift: no tombstones. */
static void sim_tab_del(sim_table *t, uint64_t key) {
    size_t mask = t->cap - 1, i = sim_tab_slot(t, key), j = i;
    if (t->slots[i].key == 0) return;
    for (;;) {
        j = (j + 1) & mask;
        if (t->slots[j].key == 0) break;
        size_t home = (size_t)sim_hash(t->slots[j].key) & mask;
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        t->slots[i] = t->slots[j];
        i = j;
    }
    t->slots[i].key = 0;
    t->slots[i].val = NULL;
    t->count--;
}

static void sim_tab_clear(sim_table *t, void (*drop)(uint64_t key, void *val)) {
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].key != 0) drop(t->slots[i].key, t->slots[i].val);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ---- the environment ------------------------------------------------------------------------ */

static void sim_trim(const char **b, const char **e) {
    while (*b < *e && (**b == ' ' || **b == '\t')) (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
}

/* [b, e) is 1 to 18 decimal digits. */
static int sim_digits(const char *b, const char *e, unsigned long long *value) {
    unsigned long long v = 0;
    if (e <= b || e - b > 18) return -1;
    for (const char *p = b; p < e; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    *value = v;
    return 0;
}

static vram_status sim_devices_malformed(const char *text, const char *why) {
    if (why == NULL)
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_DEVICES='%s' is malformed: "
                          SIM_DEVICES_HINT, text);
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_DEVICES='%s' is malformed: "
                      SIM_DEVICES_HINT " (%s)", text, why);
}

/* "[<count>x]<size>" in [b, e); on failure *why may name the reason. */
static int sim_parse_entry(const char *b, const char *e, int *count, size_t *size,
                           const char **why) {
    char buf[64];
    const char *x = b;
    unsigned long long n = 1;
    sim_trim(&b, &e);
    while (x < e && *x != 'x' && *x != 'X') x++;
    if (x < e) {
        const char *cb = b, *ce = x;
        sim_trim(&cb, &ce);
        if (sim_digits(cb, ce, &n) != 0) return -1;
        if (n == 0) *why = "0 cards";
        if (n > SIM_MAX_CARDS) *why = "at most 64 cards";
        if (n == 0 || n > SIM_MAX_CARDS) return -1;
        b = x + 1;
    }
    if (e <= b || (size_t)(e - b) >= sizeof buf) return -1;
    memcpy(buf, b, (size_t)(e - b));
    buf[e - b] = '\0';
    if (vram_parse_size(buf, size) != VRAM_OK) return -1;
    if (*size == 0) *why = "a card of 0 bytes";
    *count = (int)n;
    return *size == 0 ? -1 : 0;
}

static vram_status sim_parse_devices(const char *text, sim_config *cfg) {
    cfg->ncards = 0;
    if (text == NULL) {
        cfg->ncards = 1;
        cfg->card_size[0] = SIM_DEFAULT_CARD;
        return VRAM_OK;
    }
    for (const char *p = text;;) {
        const char *e = p + strcspn(p, ","), *why = NULL;
        int count = 0;
        size_t size = 0;
        if (sim_parse_entry(p, e, &count, &size, &why) != 0)
            return sim_devices_malformed(text, why);
        if (cfg->ncards + count > SIM_MAX_CARDS)
            return sim_devices_malformed(text, "at most 64 cards");
        for (int i = 0; i < count; i++) cfg->card_size[cfg->ncards++] = size;
        if (*e == '\0') return VRAM_OK;
        p = e + 1;
    }
}

static vram_status sim_parse_fail_after(const char *text, sim_config *cfg) {
    cfg->fail_set = 0;
    if (text == NULL) return VRAM_OK;
    const char *b = text, *e = text + strlen(text);
    sim_trim(&b, &e);
    if (sim_digits(b, e, &cfg->fail_after) != 0)
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_FAIL_ALLOC_AFTER='%s' is malformed: "
                          "expected how many allocations succeed before every later one fails, "
                          "e.g. 3", text);
    cfg->fail_set = 1;
    return VRAM_OK;
}

static uint64_t sim_splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", a function of the card's original index alone. */
static void sim_uuid(int card, char *buf, size_t len) {
    uint64_t hi = sim_splitmix(0x7672616d2d73696dULL + (uint64_t)card);   /* "vram-sim" */
    uint64_t lo = sim_splitmix(hi);
    snprintf(buf, len, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32),
             (unsigned)(hi >> 16) & 0xffffu, (unsigned)hi & 0xffffu, (unsigned)(lo >> 48),
             (unsigned long long)(lo & 0xffffffffffffULL));
}

/* The card a "GPU-" UUID prefix names, or -1 when none or several match. */
static int sim_uuid_card(const char *b, size_t len, int ncards) {
    int found = -1;
    for (int c = 0; c < ncards; c++) {
        char uuid[48];
        sim_uuid(c, uuid, sizeof uuid);
        if (len > strlen(uuid) || strncasecmp(uuid, b, len) != 0) continue;
        if (found >= 0) return -1;
        found = c;
    }
    return found;
}

/* The card one CUDA_VISIBLE_DEVICES entry [b, e) names, or -1 (which ends the list). */
static int sim_visible_entry(const char *b, const char *e, int ncards) {
    unsigned long long n;
    sim_trim(&b, &e);
    if (sim_digits(b, e, &n) == 0) return n < (unsigned long long)ncards ? (int)n : -1;
    if (e - b < 4 || strncmp(b, "GPU-", 4) != 0) return -1;
    return sim_uuid_card(b, (size_t)(e - b), ncards);
}

static int sim_listed(const sim_config *cfg, int card) {
    for (int i = 0; i < cfg->ndev; i++)
        if (cfg->dev_card[i] == card) return 1;
    return 0;
}

/* As the driver: unset shows all; else the listed cards in order, up to the first invalid or
 * repeated entry; "" or a leading -1 shows none. */
static vram_status sim_parse_visible(const char *text, sim_config *cfg) {
    cfg->ndev = 0;
    for (int i = 0; text == NULL && i < cfg->ncards; i++) cfg->dev_card[cfg->ndev++] = i;
    for (const char *p = text; p != NULL;) {
        const char *e = p + strcspn(p, ",");
        int card = sim_visible_entry(p, e, cfg->ncards);
        if (card < 0 || sim_listed(cfg, card)) break;
        cfg->dev_card[cfg->ndev++] = card;
        p = *e == '\0' ? NULL : e + 1;
    }
    if (cfg->ndev > 0) return VRAM_OK;
    const char *devices = getenv("VRAM_SIM_DEVICES");
    return vram__fail(VRAM_ERR_NO_DEVICE, "no simulated GPU is visible: "
                      "CUDA_VISIBLE_DEVICES=\"%s\" hides every simulated card (there %s %d: "
                      "VRAM_SIM_DEVICES=%s); unset it or list card indices from 0 to %d or "
                      "GPU- UUIDs", text, cfg->ncards == 1 ? "is" : "are", cfg->ncards,
                      devices ? devices : "1x16GiB, the default", cfg->ncards - 1);
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

static void sim_drop_phys(uint64_t key, void *val) {
    sim_phys *h = val;
    if (h->fd >= 0) close(h->fd);
    sim_drop_record(key, val);
}

static void sim_reset_counters(void) {
    vram__backend_counts_reset(&sim_count);
}

/* Frees everything and forgets the configuration. */
static void sim_reset(void) {
    sim_tab_clear(&sim_st.mems, sim_drop_mem);
    sim_tab_clear(&sim_st.phys, sim_drop_phys);
    sim_tab_clear(&sim_st.events, sim_drop_record);
    while (sim_st.resvs != NULL) {
        sim_resv *r = sim_st.resvs;
        sim_st.resvs = r->next;
        munmap((void *)(uintptr_t)r->base, r->size);
        free(r->pieces);
        free(r);
    }
    while (sim_st.streams != NULL) {
        sim_stream *s = sim_st.streams;
        sim_st.streams = s->next;
        free(s);
    }
    memset(&sim_st, 0, sizeof sim_st);
}

static vram_status sim_open_locked(void) {
    sim_config cfg;
    if (sim_st.open) return VRAM_OK;
    memset(&cfg, 0, sizeof cfg);
    vram_status s = sim_parse_devices(getenv("VRAM_SIM_DEVICES"), &cfg);
    if (s == VRAM_OK) s = sim_parse_fail_after(getenv("VRAM_SIM_FAIL_ALLOC_AFTER"), &cfg);
    if (s == VRAM_OK) s = sim_parse_visible(getenv("CUDA_VISIBLE_DEVICES"), &cfg);
    if (s != VRAM_OK) return s;
    sim_reset();
    sim_st.cfg = cfg;
    for (int d = 0; d < cfg.ndev; d++) {
        sim_st.dev[d].card = cfg.dev_card[d];
        sim_st.dev[d].capacity = cfg.card_size[cfg.dev_card[d]];
    }
    sim_st.open = 1;
    sim_reset_counters();
    return VRAM_OK;
}

static vram_status sim_open(void) {
    SIM_LOCKED(sim_open_locked());
}

static void sim_close(void) {
    pthread_mutex_lock(&sim_lock);
    sim_reset();
    pthread_mutex_unlock(&sim_lock);
}

/* ---- devices -------------------------------------------------------------------------------- */

static vram_status sim_device_count_locked(int *count) {
    vram_status s = sim_check_open();
    if (s != VRAM_OK) return s;
    if (count == NULL)
        return vram__fail(VRAM_ERR_DRIVER, "cuDeviceGetCount: " SIM_EINVAL " [NULL count]");
    *count = sim_st.cfg.ndev;
    return VRAM_OK;
}

static vram_status sim_device_count(int *count) {
    SIM_LOCKED(sim_device_count_locked(count));
}

static vram_status sim_device_props_locked(int dev, vram_physical_device *out,
                                           vram__device_caps *caps) {
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    int card = sim_st.dev[dev].card;
    if (out != NULL) {
        snprintf(out->product, sizeof out->product, "%s", "vram simulated GPU");
        sim_uuid(card, out->uuid, sizeof out->uuid);
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "0000:%02x:00.0", (unsigned)card);
        out->total_bytes = sim_st.dev[dev].capacity;
        out->compute_major = 9;
        out->compute_minor = 0;
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
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    const sim_device *d = &sim_st.dev[dev];
    if (free_bytes != NULL) *free_bytes = d->capacity - d->used;
    if (total_bytes != NULL) *total_bytes = d->capacity;
    return VRAM_OK;
}

static vram_status sim_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
    SIM_LOCKED(sim_mem_info_locked(dev, free_bytes, total_bytes));
}

/* ---- allocation accounting ------------------------------------------------------------------ */

/* May `size` more bytes be taken on dev? Fault injection first, then the card's capacity. */
static vram_status sim_take(const char *call, int dev, size_t size) {
    const sim_device *d = &sim_st.dev[dev];
    size_t total = 0;
    if (sim_st.cfg.fail_set && sim_st.alloc_ok >= sim_st.cfg.fail_after)
        return sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM,
                        "simulated: VRAM_SIM_FAIL_ALLOC_AFTER=%llu", sim_st.cfg.fail_after);
    if (vram__add_ok(d->used, size, &total) && total <= d->capacity) return VRAM_OK;
    char used[32], cap[32];
    vram__format_bytes(used, sizeof used, d->used);
    vram__format_bytes(cap, sizeof cap, d->capacity);
    return sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM,
                    "simulated card of %s: %s in use, %zu bytes free", cap, used,
                    d->capacity - d->used);
}

static void sim_took(int dev, size_t size) {
    sim_st.dev[dev].used += size;
    sim_st.alloc_ok++;
}

/* ---- plain memory --------------------------------------------------------------------------- */

static vram_status sim_mem_alloc_locked(int dev, size_t size, uint64_t *dptr) {
    char call[64];
    snprintf(call, sizeof call, "cuMemAlloc(%zu bytes)", size);
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (size == 0 || dptr == NULL)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, size ? "NULL dptr" : "size 0");
    if ((s = sim_take(call, dev, size)) != VRAM_OK) return s;
    sim_mem *m = malloc(sizeof *m);
    if (m == NULL || sim_tab_reserve(&sim_st.mems) != 0) {
        free(m);
        return sim_host_oom(call, dev);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(m);
        return sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: host mmap: %s",
                        strerror(errno));
    }
    m->dev = dev;
    m->size = size;
    sim_tab_put(&sim_st.mems, (uint64_t)(uintptr_t)p, m);
    sim_took(dev, size);
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
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_mem *m = sim_tab_get(&sim_st.mems, dptr);
    if (m == NULL || m->dev != dev)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "not an address cuMemAlloc returned on this device");
    if (munmap((void *)(uintptr_t)dptr, m->size) != 0)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: host munmap: %s",
                        strerror(errno));
    sim_st.dev[dev].used -= m->size;
    sim_tab_del(&sim_st.mems, dptr);
    free(m);
    SIM_COUNT(mem_free);
    return VRAM_OK;
}

static vram_status sim_mem_free(int dev, uint64_t dptr) {
    SIM_LOCKED(sim_mem_free_locked(dev, dptr));
}

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
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (va == NULL) return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "NULL va");
    if (size == 0 || !sim_granular(size))
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the size must be a positive multiple of the granularity (2 MiB)");
    sim_resv *r = calloc(1, sizeof *r);
    if (r == NULL) return sim_host_oom(call, dev);
    void *p = sim_map_aligned(size);
    if (p == NULL) {
        free(r);
        return sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM,
                        "simulated: no host address space: %s", strerror(errno));
    }
    r->dev = dev;
    r->base = (uint64_t)(uintptr_t)p;
    r->size = size;
    r->next = sim_st.resvs;
    sim_st.resvs = r;
    SIM_COUNT(va_reserve);
    *va = r->base;
    return VRAM_OK;
}

static vram_status sim_va_reserve(int dev, size_t size, uint64_t *va) {
    SIM_LOCKED(sim_va_reserve_locked(dev, size, va));
}

/* The link to the reservation of dev that starts at va and has exactly `size` bytes, or NULL. */
static sim_resv **sim_resv_exact(int dev, uint64_t va, size_t size) {
    for (sim_resv **link = &sim_st.resvs; *link != NULL; link = &(*link)->next)
        if ((*link)->dev == dev && (*link)->base == va && (*link)->size == size) return link;
    return NULL;
}

/* The reservation of dev that holds all of [va, va + size), or NULL. */
static sim_resv *sim_resv_holding(int dev, uint64_t va, size_t size) {
    for (sim_resv *r = sim_st.resvs; r != NULL; r = r->next) {
        if (r->dev != dev || va < r->base || size > r->size) continue;
        if (va - r->base <= r->size - size) return r;
    }
    return NULL;
}

static vram_status sim_va_free_locked(int dev, uint64_t va, size_t size) {
    char call[96];
    snprintf(call, sizeof call, "cuMemAddressFree(0x%llx, %zu bytes)", (unsigned long long)va,
             size);
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_resv **link = sim_resv_exact(dev, va, size);
    if (link == NULL)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "no reservation of this device has exactly this address and size");
    sim_resv *r = *link;
    if (r->npieces > 0)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "%zu mapping(s) still inside; unmap them first", r->npieces);
    munmap((void *)(uintptr_t)r->base, r->size);
    *link = r->next;
    free(r->pieces);
    free(r);
    SIM_COUNT(va_free);
    return VRAM_OK;
}

static vram_status sim_va_free(int dev, uint64_t va, size_t size) {
    SIM_LOCKED(sim_va_free_locked(dev, va, size));
}

/* ---- physical handles ----------------------------------------------------------------------- */

static vram_status sim_phys_create_locked(int dev, size_t size, uint64_t *handle) {
    char call[64];
    snprintf(call, sizeof call, "cuMemCreate(%zu bytes)", size);
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (handle == NULL) return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "NULL handle");
    if (size == 0 || !sim_granular(size))
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the size must be a positive multiple of the granularity (2 MiB)");
    if ((s = sim_take(call, dev, size)) != VRAM_OK) return s;
    sim_phys *h = malloc(sizeof *h);
    if (h == NULL || sim_tab_reserve(&sim_st.phys) != 0) {
        free(h);
        return sim_host_oom(call, dev);
    }
    h->dev = dev;
    h->size = size;
    h->mapped_va = 0;
    h->fd = -1;
    h->imported = 0;
    sim_tab_put(&sim_st.phys, (uint64_t)(uintptr_t)h, h);
    sim_took(dev, size);
    SIM_COUNT(phys_create);
    *handle = (uint64_t)(uintptr_t)h;
    return VRAM_OK;
}

static vram_status sim_phys_create(int dev, size_t size, uint64_t *handle) {
    SIM_LOCKED(sim_phys_create_locked(dev, size, handle));
}

static vram_status sim_phys_release_locked(int dev, uint64_t handle) {
    char call[64];
    snprintf(call, sizeof call, "cuMemRelease(handle 0x%llx)", (unsigned long long)handle);
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_phys *h = sim_tab_get(&sim_st.phys, handle);
    if (h == NULL || h->dev != dev)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "not a handle cuMemCreate returned on this device");
    if (h->mapped_va != 0)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "simulated: the handle is still mapped at 0x%llx; unmap it first",
                        (unsigned long long)h->mapped_va);
    if (!h->imported) sim_st.dev[dev].used -= h->size;
    sim_tab_del(&sim_st.phys, handle);
    sim_drop_phys(handle, h);
    SIM_COUNT(phys_release);
    return VRAM_OK;
}

static vram_status sim_phys_release(int dev, uint64_t handle) {
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
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (sim_st.map_failures > 0) {
        sim_st.map_failures--;
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EOOM, "injected by vram__sim_fail_maps");
    }
    sim_phys *h = sim_tab_get(&sim_st.phys, handle);
    const char *why = sim_map_refusal(dev, va, size, h, &r, &i);
    if (why != NULL) return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "%s", why);
    if (sim_pieces_reserve(r) != 0) return sim_host_oom(call, dev);
    int mapped = h->fd >= 0 ? mmap((void *)(uintptr_t)va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                   h->fd, 0) != MAP_FAILED
                            : mprotect((void *)(uintptr_t)va, size, PROT_READ | PROT_WRITE) == 0;
    if (!mapped)
        return sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: host mapping: %s",
                        strerror(errno));
    memmove(&r->pieces[i + 1], &r->pieces[i], (r->npieces - i) * sizeof *r->pieces);
    r->pieces[i] = (sim_piece){ .va = va, .size = size, .phys = h };
    r->npieces++;
    h->mapped_va = va;
    SIM_COUNT(map);
    return VRAM_OK;
}

static vram_status sim_map(int dev, uint64_t va, size_t size, uint64_t handle) {
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
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (sim_st.unmap_failures > 0) {
        sim_st.unmap_failures--;
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_ELAUNCH, "injected by vram__sim_fail_maps");
    }
    sim_resv *r = sim_resv_holding(dev, va, size);
    if (r == NULL)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the range does not lie within one reservation of this device");
    size_t i = sim_piece_at(r, va);
    if (!sim_covers(r, i, va, size, &end))
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the range must be exactly whole, contiguous mappings");
    /* back to a PROT_NONE range (a memfd mapping is replaced; anonymous RAM goes back) */
    if (mmap((void *)(uintptr_t)va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
             0) == MAP_FAILED)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: host mmap: %s", strerror(errno));
    for (size_t k = i; k < end; k++) r->pieces[k].phys->mapped_va = 0;
    memmove(&r->pieces[i], &r->pieces[end], (r->npieces - end) * sizeof *r->pieces);
    r->npieces -= end - i;
    SIM_COUNT(unmap);
    return VRAM_OK;
}

static vram_status sim_unmap(int dev, uint64_t va, size_t size) {
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
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_phys *h = sim_tab_get(&sim_st.phys, handle);
    if (h == NULL || h->dev != dev)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "not a handle cuMemCreate returned on this device");
    const char *why = sim_share(h);
    int out = why == NULL ? fcntl(h->fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (out < 0)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: %s: %s", why ? why : "dup", strerror(errno));
    *fd = out;
    return VRAM_OK;
}

static vram_status sim_phys_export(int dev, uint64_t handle, int *fd) {
    SIM_LOCKED(sim_phys_export_locked(dev, handle, fd));
}

static vram_status sim_phys_import_locked(int dev, int fd, size_t size, uint64_t *handle) {
    char call[96];
    snprintf(call, sizeof call, "cuMemImportFromShareableHandle(fd %d)", fd);
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != size || !sim_granular(size) || size == 0)
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "not an exported handle of %zu bytes", size);
    sim_phys *h = malloc(sizeof *h);
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (h == NULL || own < 0 || sim_tab_reserve(&sim_st.phys) != 0) {
        free(h);
        if (own >= 0) close(own);
        return sim_host_oom(call, dev);
    }
    *h = (sim_phys){.dev = dev, .size = size, .mapped_va = 0, .fd = own, .imported = 1};
    sim_tab_put(&sim_st.phys, (uint64_t)(uintptr_t)h, h);
    SIM_COUNT(phys_create);
    *handle = (uint64_t)(uintptr_t)h;
    return VRAM_OK;
}

static vram_status sim_phys_import(int dev, int fd, size_t size, uint64_t *handle) {
    SIM_LOCKED(sim_phys_import_locked(dev, fd, size, handle));
}

static vram_status sim_ipc_get(int dev, uint64_t dptr, unsigned char handle[64]) {
    (void)dptr;
    (void)handle;
    return sim_fail(VRAM_ERR_UNSUPPORTED, "cuIpcGetMemHandle", dev, "CUDA_ERROR_NOT_SUPPORTED",
                    "simulated: plain allocations are not shared with other processes (growth's are)");
}

static vram_status sim_ipc_open(int dev, const unsigned char handle[64], uint64_t *dptr) {
    (void)handle;
    (void)dptr;
    return sim_fail(VRAM_ERR_UNSUPPORTED, "cuIpcOpenMemHandle", dev, "CUDA_ERROR_NOT_SUPPORTED",
                    "simulated: plain allocations are not shared with other processes");
}

static vram_status sim_ipc_close(int dev, uint64_t dptr) {
    (void)dptr;
    return sim_fail(VRAM_ERR_UNSUPPORTED, "cuIpcCloseMemHandle", dev, "CUDA_ERROR_NOT_SUPPORTED",
                    "simulated: plain allocations are not shared with other processes");
}

/* ---- streams and events --------------------------------------------------------------------- */

static sim_stream *sim_stream_find(void *stream) {
    for (sim_stream *s = sim_st.streams; s != NULL; s = s->next)
        if (s->stream == stream) return s;
    return NULL;
}

static sim_stream *sim_stream_get(void *stream) {
    sim_stream *s = sim_stream_find(stream);
    if (s != NULL) return s;
    if ((s = calloc(1, sizeof *s)) == NULL) return NULL;
    s->stream = stream;
    s->next = sim_st.streams;
    sim_st.streams = s;
    return s;
}

static vram_status sim_event_record_locked(int dev, void *stream, void **event) {
    char call[64];
    snprintf(call, sizeof call, "cuEventRecord(stream %p)", stream);
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (event == NULL) return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "NULL event");
    if (sim_st.event_failures > 0) {
        sim_st.event_failures--;
        return sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_ELAUNCH, "injected by vram__sim_fail_event_records");
    }
    sim_event *ev = malloc(sizeof *ev);
    sim_stream *st = ev != NULL ? sim_stream_get(stream) : NULL;
    if (st == NULL || sim_tab_reserve(&sim_st.events) != 0) {
        free(ev);
        return sim_host_oom(call, dev);
    }
    ev->dev = dev;
    ev->stream = st;
    ev->seq = ++st->recorded;
    sim_tab_put(&sim_st.events, (uint64_t)(uintptr_t)ev, ev);
    SIM_COUNT(event_record);
    *event = ev;
    return VRAM_OK;
}

static vram_status sim_event_record(int dev, void *stream, void **event) {
    SIM_LOCKED(sim_event_record_locked(dev, stream, event));
}

/* The live event of dev, or NULL with the message set. */
static sim_event *sim_event_of(const char *call, int dev, void *event) {
    sim_event *ev = sim_tab_get(&sim_st.events, (uint64_t)(uintptr_t)event);
    if (ev != NULL && ev->dev == dev) return ev;
    sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EHANDLE, "%p is not an event recorded on this device",
             event);
    return NULL;
}

static vram_status sim_event_query_locked(int dev, void *event, int *done) {
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_event *ev = sim_event_of("cuEventQuery", dev, event);
    if (ev == NULL) return VRAM_ERR_DRIVER;
    if (done == NULL)
        return sim_fail(VRAM_ERR_DRIVER, "cuEventQuery", dev, SIM_EINVAL, "NULL done");
    *done = ev->seq <= ev->stream->completed;
    SIM_COUNT(event_query);
    return VRAM_OK;
}

static vram_status sim_event_query(int dev, void *event, int *done) {
    SIM_LOCKED(sim_event_query_locked(dev, event, done));
}

static vram_status sim_event_sync_locked(int dev, void *event) {
    vram_status s = sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_event *ev = sim_event_of("cuEventSynchronize", dev, event);
    if (ev == NULL) return VRAM_ERR_DRIVER;
    if (ev->stream->completed < ev->seq) ev->stream->completed = ev->seq;
    SIM_COUNT(event_sync);
    return VRAM_OK;
}

static vram_status sim_event_sync(int dev, void *event) {
    pthread_mutex_lock(&sim_lock);
    sim_event *ev = sim_check_dev(dev) == VRAM_OK ? sim_tab_get(&sim_st.events, (uint64_t)(uintptr_t)event)
                                                  : NULL;
    if (ev != NULL && sim_hold_syncs && ev->stream->completed < ev->seq) {
        sim_syncs_waiting++;            /* as the driver does: until the stream got there */
        while (sim_hold_syncs && ev->stream->completed < ev->seq) {
            pthread_cond_wait(&sim_stream_done, &sim_lock);
        }
        sim_syncs_waiting--;
    }
    vram_status s = sim_event_sync_locked(dev, event);
    pthread_mutex_unlock(&sim_lock);
    return s;
}

/* Never fails and never touches the thread's last error; an unknown event is ignored. */
static void sim_event_destroy(int dev, void *event) {
    (void)dev;
    pthread_mutex_lock(&sim_lock);
    sim_event *ev = sim_tab_get(&sim_st.events, (uint64_t)(uintptr_t)event);
    if (ev != NULL) {
        sim_tab_del(&sim_st.events, (uint64_t)(uintptr_t)event);
        free(ev);
    }
    pthread_mutex_unlock(&sim_lock);
}

void vram__sim_fail_maps(int maps, int unmaps) {
    pthread_mutex_lock(&sim_lock);
    sim_st.map_failures = maps > 0 ? maps : 0;   /* (until the backend closes) */
    sim_st.unmap_failures = unmaps > 0 ? unmaps : 0;
    pthread_mutex_unlock(&sim_lock);
}

void vram__sim_fail_event_records(int n) {
    pthread_mutex_lock(&sim_lock);
    sim_st.event_failures = n > 0 ? n : 0;   /* (until the backend closes) */
    pthread_mutex_unlock(&sim_lock);
}

void vram__sim_stream_complete(void *stream) {
    pthread_mutex_lock(&sim_lock);
    sim_stream *s = sim_stream_find(stream);
    if (s != NULL) s->completed = s->recorded;
    pthread_cond_broadcast(&sim_stream_done);
    pthread_mutex_unlock(&sim_lock);
}

void vram__sim_hold_event_syncs(int on) {
    pthread_mutex_lock(&sim_lock);
    sim_hold_syncs = on;
    pthread_cond_broadcast(&sim_stream_done);
    pthread_mutex_unlock(&sim_lock);
}

int vram__sim_syncs_waiting(void) {
    pthread_mutex_lock(&sim_lock);
    int n = sim_syncs_waiting;
    pthread_mutex_unlock(&sim_lock);
    return n;
}

/* ---- counters and the backend --------------------------------------------------------------- */

static void sim_counters(vram__backend_counters *out) {
    if (out == NULL) return;
    vram__backend_counts_read(&sim_count, out);
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
    .va_reserve = sim_va_reserve,
    .va_free = sim_va_free,
    .phys_create = sim_phys_create,
    .phys_release = sim_phys_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .phys_export = sim_phys_export,
    .phys_import = sim_phys_import,
    .ipc_get = sim_ipc_get,
    .ipc_open = sim_ipc_open,
    .ipc_close = sim_ipc_close,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .event_destroy = sim_event_destroy,
    .counters = sim_counters,
};
