/*
 * nvml.c: NVML (nvidia-smi-style queries). Owns the exported nvmlDeviceGetMemoryInfo / _v2 (their
 * names in SHIM_NVML_HOOKS, shim.h; handed out by dlsym, interpose.c), the real NVML functions, and
 * which NVML device is which of the program's.
 *
 * nvmlDeviceGetMemoryInfo / _v2 of one of the program's devices under a limit or a group limit report
 * the program's view, the numbers cuMemGetInfo gives (shim_view): total = the limit (the card when
 * smaller), free = what cuMemGetInfo calls free (the limit less this process's use, at most the
 * card's free plus the balloon, at most what the group has left on the card), and used = total - free
 * (for _v2, total - reserved - free), as NVML's used is on a card: this process's use when nothing
 * else narrows free. _v2's reserved is 0 under a limit (driver-reserved memory is not the program's)
 * and the card's under a group limit alone. A device that is not the program's, or has neither
 * limit, passes through unchanged.
 * Which NVML device is which of the program's: NVML enumerates every GPU whatever
 * CUDA_VISIBLE_DEVICES says.
 *   - Once the program has initialised CUDA: by UUID (the real nvmlDeviceGetUUID against
 *     cuDeviceGetUuid of every visible CUDA device, looked up once).
 *   - Before that, and in programs that never load CUDA (nvidia-smi, NVML monitors): from
 *     CUDA_VISIBLE_DEVICES, read at each query as the driver will read it, without loading or
 *     initialising CUDA (cuInit before a fork would break the child's CUDA). A UUID (or a unique
 *     prefix of one) names its card; an index names the card of that index in NVML's order (PCI bus
 *     order), which is CUDA's when CUDA_DEVICE_ORDER=PCI_BUS_ID or when every card has the same name
 *     (CUDA's default order puts the fastest first and breaks ties by PCI bus id); unset, every card
 *     in that order. The list ends at an entry that names no card, as the driver's does. When the
 *     order cannot be told (cards of different names, and indices given or limits that differ by
 *     device) or a card is in MIG mode, every device passes through. Nothing is in use then, and
 *     the group's numbers come from the ledger by the card's NVML UUID (no slot is claimed).
 * The real functions come from dlopen("libnvidia-ml.so.1") (the loaded library, by soname).
 *
 * Invariants: shim_nvml is written once (shim_nvml_init under its pthread_once), the card list once
 * (shim_nvml_cards_read), the CUDA devices' UUIDs once, published under g.mu with a release store of
 * shim_nvml_cuda_ready. A query takes g.mu briefly and, with a group limit, ledger_mu and the
 * ledger lock (shim_group_free_uuid); it never loads or initialises CUDA itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/visible.h"
#include "shim.h"

typedef struct shim_nvml_real_t {
    void *fn[SHIM_NUM_NVML_HOOKS];
    pfn_nvmlDeviceGetUUID uuid;
    pfn_nvmlDeviceGetCount_v2 count;                   /* these five: the mapping before CUDA */
    pfn_nvmlDeviceGetHandleByIndex_v2 handle;
    pfn_nvmlDeviceGetIndex index;
    pfn_nvmlDeviceGetName name;
    pfn_nvmlDeviceGetMigMode mig_mode;                 /* NULL on drivers without MIG */
} shim_nvml_real_t;

static pthread_once_t shim_nvml_once = PTHREAD_ONCE_INIT;
static shim_nvml_real_t shim_nvml;
/* the visible CUDA devices' UUIDs, looked up once (published under g.mu; ready read atomically) */
static int shim_nvml_cuda_ready, shim_nvml_cuda_count;
static char shim_nvml_cuda_uuid[SHIM_MAX_DEVICES][LEDGER_UUID_LEN];

static void shim_nvml_init(void) {
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib || !real_dlsym) return;
    for (int i = 0; i < SHIM_NUM_NVML_HOOKS; i++) shim_nvml.fn[i] = real_dlsym(lib, shim_nvml_hooks[i].symbol);
    shim_nvml.uuid = (pfn_nvmlDeviceGetUUID)real_dlsym(lib, "nvmlDeviceGetUUID");
    shim_nvml.count = (pfn_nvmlDeviceGetCount_v2)real_dlsym(lib, "nvmlDeviceGetCount_v2");
    shim_nvml.handle = (pfn_nvmlDeviceGetHandleByIndex_v2)real_dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    shim_nvml.index = (pfn_nvmlDeviceGetIndex)real_dlsym(lib, "nvmlDeviceGetIndex");
    shim_nvml.name = (pfn_nvmlDeviceGetName)real_dlsym(lib, "nvmlDeviceGetName");
    shim_nvml.mig_mode = (pfn_nvmlDeviceGetMigMode)real_dlsym(lib, "nvmlDeviceGetMigMode");
}

static void *shim_nvml_real_fn(int i) {
    pthread_once(&shim_nvml_once, shim_nvml_init);
    return shim_nvml.fn[i];
}

/* Looks up the UUIDs of the program's CUDA devices once CUDA is loaded and initialised; 0 when known. */
static int shim_nvml_cuda_uuids(void) {
    if (__atomic_load_n(&shim_nvml_cuda_ready, __ATOMIC_ACQUIRE)) return 0;
    void *loaded = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!loaded) return -1;   /* the program does not use CUDA (yet): no CUDA devices */
    dlclose(loaded);
    shim_cuda_load();
    shim_dlsym_fn real_dlsym = shim_real_dlsym();
    if (!g.real.lib || !real_dlsym) return -1;
    pfn_cuDeviceGetCount get_count = (pfn_cuDeviceGetCount)real_dlsym(g.real.lib, "cuDeviceGetCount");
    int n = 0;
    if (!get_count || get_count(&n) != CUDA_SUCCESS) return -1;   /* not initialised: try again later */
    if (n < 0) n = 0;
    if (n > SHIM_MAX_DEVICES) n = SHIM_MAX_DEVICES;
    char (*uuid)[LEDGER_UUID_LEN] = calloc((size_t)(n ? n : 1), LEDGER_UUID_LEN);
    if (!uuid) return -1;
    for (int d = 0; d < n; d++) shim_device_uuid(d, uuid[d], LEDGER_UUID_LEN);
    pthread_mutex_lock(&g.mu);
    if (!shim_nvml_cuda_ready) {
        memcpy(shim_nvml_cuda_uuid, uuid, (size_t)n * LEDGER_UUID_LEN);
        shim_nvml_cuda_count = n;
        __atomic_store_n(&shim_nvml_cuda_ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g.mu);
    free(uuid);
    return 0;
}

/* The UUID of an NVML device as the ledger keeps them ("GPU-" and lower-case hex); 0 on success. */
static int shim_nvml_uuid(nvmlDevice_t device, char *uuid, size_t len) {
    if (!shim_nvml.uuid || shim_nvml.uuid(device, uuid, (unsigned int)len) != NVML_SUCCESS) return -1;
    uuid[len - 1] = '\0';
    char *dash = strchr(uuid, '-');
    for (char *c = dash ? dash : uuid; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    return 0;
}

/* NVML's cards as the guess below needs them, read once (cards do not come and go under a
 * process): count, UUIDs, whether all have one name; unusable when a read failed or a card is in
 * MIG mode (CUDA shows MIG instances, not cards). */
static struct {
    pthread_once_t once;
    int            usable;
    unsigned int   n;
    int            same_names;
    char           uuid[SHIM_MAX_DEVICES][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
} shim_nvml_cards = {.once = PTHREAD_ONCE_INIT};

static void shim_nvml_cards_read(void) {
    unsigned int n = 0;
    if (!shim_nvml.count || !shim_nvml.handle || !shim_nvml.name || shim_nvml.count(&n) != NVML_SUCCESS) return;
    if (n > SHIM_MAX_DEVICES) n = SHIM_MAX_DEVICES;
    char first[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    shim_nvml_cards.same_names = 1;
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t h;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        unsigned int mig = 0, pending = 0;
        if (shim_nvml.handle(i, &h) != NVML_SUCCESS ||
            shim_nvml_uuid(h, shim_nvml_cards.uuid[i], sizeof shim_nvml_cards.uuid[i]) != 0 ||
            shim_nvml.name(h, name, sizeof name) != NVML_SUCCESS)
            return;
        if (shim_nvml.mig_mode && shim_nvml.mig_mode(h, &mig, &pending) == NVML_SUCCESS && mig == NVML_DEVICE_MIG_ENABLE)
            return;
        name[sizeof name - 1] = '\0';
        if (i == 0) snprintf(first, sizeof first, "%s", name);
        else if (strcmp(first, name) != 0) shim_nvml_cards.same_names = 0;
    }
    shim_nvml_cards.n = n;
    shim_nvml_cards.usable = 1;
}

/* The NVML card one CUDA_VISIBLE_DEVICES entry names, -1 when none (the list ends there), -2 when
 * that cannot be told (an index while CUDA's order is unknown, a number that is not one). */
static int shim_nvml_entry_card(const vram_visible_entry *e, int pci_order) {
    unsigned int n = shim_nvml_cards.n;
    if (e->len == 0 || e->len >= NVML_DEVICE_UUID_V2_BUFFER_SIZE) return -1;
    if (e->text[0] >= '0' && e->text[0] <= '9') {
        if (e->kind != VRAM_VISIBLE_INDEX || !pci_order) return -2;
        return e->index < n ? (int)e->index : -1;
    }
    if (e->kind != VRAM_VISIBLE_GPU) return -1;   /* MIG-... or anything else names no card here */
    int card = -1;
    for (unsigned int i = 0; i < n; i++) {
        if (strncasecmp(shim_nvml_cards.uuid[i], e->text, e->len) != 0) continue;
        if (card >= 0) return -1;   /* an ambiguous prefix names no card */
        card = (int)i;
    }
    return card;
}

/* Before CUDA is initialised: the program's device that NVML device `index` will be, from
 * CUDA_VISIBLE_DEVICES (see above; split by vram__visible_next of src/common); -1 when it is none
 * of them or that cannot be told. */
static int shim_nvml_guess_device(unsigned int index) {
    pthread_once(&shim_nvml_cards.once, shim_nvml_cards_read);
    unsigned int n = shim_nvml_cards.n;
    if (!shim_nvml_cards.usable || index >= n) return -1;
    const char *order = getenv("CUDA_DEVICE_ORDER");
    int pci_order = shim_nvml_cards.same_names || (order && strcmp(order, "PCI_BUS_ID") == 0);
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        if (pci_order) return (int)index;
        /* CUDA's order is unknown; it does not matter when every card has the same limit */
        for (unsigned int d = 1; d < n; d++)
            if (g.limit[d] != g.limit[0]) return -1;
        return (int)index;
    }
    /* the list: each entry's NVML index in turn; the program's device d is the d-th entry */
    int d = 0, used[SHIM_MAX_DEVICES] = { 0 };
    vram_visible_entry e;
    while (d < SHIM_MAX_DEVICES && vram__visible_next(&v, &e)) {
        int card = shim_nvml_entry_card(&e, pci_order);
        if (card == -2) return -1;
        if (card < 0 || used[card]) break;   /* an unknown or repeated card: the list ends */
        used[card] = 1;
        if ((unsigned int)card == index) return d;
        d++;
    }
    return -1;
}

/* The program's device that NVML device `device` is, with the card's UUID, when a limit or a group
 * limit applies to it; -1 otherwise. */
static int shim_nvml_device(nvmlDevice_t device, char *uuid, size_t len) {
    pthread_once(&shim_nvml_once, shim_nvml_init);
    if (shim_nvml_uuid(device, uuid, len) != 0) return -1;
    int d = -1;
    if (shim_nvml_cuda_uuids() == 0) {
        for (int i = 0; i < shim_nvml_cuda_count && d < 0; i++)
            if (strncmp(shim_nvml_cuda_uuid[i], "unknown-", 8) != 0 && strcasecmp(shim_nvml_cuda_uuid[i], uuid) == 0)
                d = i;
    } else {   /* CUDA is not in use (yet) */
        unsigned int index = 0;
        shim_env();
        if (shim_nvml.index && shim_nvml.index(device, &index) == NVML_SUCCESS) d = shim_nvml_guess_device(index);
    }
    if (d < 0) return -1;
    pthread_mutex_lock(&g.mu);
    size_t limit = g.limit[d];
    pthread_mutex_unlock(&g.mu);
    return limit || g.group_limit ? d : -1;
}

/* The program's view of NVML device `device` whose real numbers are in *total, *free_bytes: 0 when it
 * passes through unchanged, else the SHIM_VIEW_* that applied. The group's numbers come from the
 * ledger by the card's UUID (no slot is claimed for a query). */
static int shim_nvml_view(nvmlDevice_t device, unsigned long long *total, unsigned long long *free_bytes) {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    int dev = shim_nvml_device(device, uuid, sizeof uuid);
    if (dev < 0) return 0;
    size_t t = *total > SIZE_MAX ? SIZE_MAX : (size_t)*total;
    size_t f = *free_bytes > SIZE_MAX ? SIZE_MAX : (size_t)*free_bytes;
    shim_held_refresh(dev);   /* pools and graph memory re-read (only once CUDA follows some) */
    int applied = shim_view(dev, shim_group_free_uuid(uuid), &t, &f);
    *total = t;
    *free_bytes = f;
    return applied;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    pfn_nvmlDeviceGetMemoryInfo real =
        (pfn_nvmlDeviceGetMemoryInfo)shim_nvml_real_fn(SHIM_NVML_HOOK_nvmlDeviceGetMemoryInfo);
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = real(device, memory);
    if (r != NVML_SUCCESS || !memory || !shim_nvml_view(device, &memory->total, &memory->free)) return r;
    memory->used = memory->total - memory->free;
    return r;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    pfn_nvmlDeviceGetMemoryInfo_v2 real =
        (pfn_nvmlDeviceGetMemoryInfo_v2)shim_nvml_real_fn(SHIM_NVML_HOOK_nvmlDeviceGetMemoryInfo_v2);
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = real(device, memory);
    int applied;
    if (r != NVML_SUCCESS || !memory || !(applied = shim_nvml_view(device, &memory->total, &memory->free))) return r;
    if (applied & SHIM_VIEW_LIMIT) memory->reserved = 0;
    unsigned long long taken = memory->reserved + memory->free;
    memory->used = taken >= memory->total ? 0 : memory->total - taken;
    return r;
}
