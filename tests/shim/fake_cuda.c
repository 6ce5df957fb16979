/*
 * fake_cuda.c: a libcuda.so.1 double for the preload library's tests, and its core. The fake models,
 * after the CUDA 13 driver's documented semantics, every way a program makes the driver hold device
 * memory, over simulated cards: FAKE_CUDA_DEVICES devices (default 2) of 16 GiB each, nothing backed
 * by host memory. Per device it keeps held[dev], the bytes the driver holds:
 *
 *   plain allocations  cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged and the CUDA < 3.2 entry
 *                      points (cuMemAlloc, cuMemAllocPitch: 32-bit addresses below 4 GiB), freed by
 *                      cuMemFree_v2 / cuMemFree / cuMemFreeAsync                       (fake_mem.c)
 *   memory pools       each device's default pool and cuMemPoolCreate's: what they reserve (blocks
 *                      of cuMemAllocAsync / cuMemAllocFromPoolAsync in 2 MiB granules, kept up to the
 *                      release threshold after a free, cuMemPoolTrimTo)                (fake_mem.c)
 *   VMM                cuMemCreate allocations, alive while a handle reference, a mapping
 *                      (cuMemAddressReserve + cuMemMap), a tile of a sparse array (cuMemMapArrayAsync)
 *                      or a multicast binding (cuMulticastBindMem / BindAddr) holds them (fake_vmm.c)
 *   arrays             cuArrayCreate(_v2), cuArray3DCreate(_v2), cuMipmappedArrayCreate: the texels
 *                      of every level, rounded up to 512 bytes; sparse ones hold nothing (fake_vmm.c)
 *   graph memory       what graphs with memory nodes reserve per device (uploaded or launched
 *                      executable graphs), kept cached after cuGraphExecDestroy until
 *                      cuDeviceGraphMemTrim                                           (fake_graph.c)
 *   context limits     cuCtxSetLimit of the malloc heap, the printf FIFO and the stack (the stack for
 *                      every thread of the device's 132 SMs x 2048 threads) above their defaults, per
 *                      context, given back when the context ends                       (this file)
 *
 * Every allocating call fails with CUDA_ERROR_OUT_OF_MEMORY, changing nothing, when held + growth
 * would pass the card; fake_cuda_held(dev) (fake_cuda.h) tells a test what this process holds.
 * Besides memory, what libvram's CUDA backend (src/backend/cuda*.c) calls: cuDriverGetVersion,
 * cuDeviceGetName, cuDeviceGetPCIBusId, the thread's context stack (cuCtxPushCurrent_v2 /
 * cuCtxPopCurrent_v2; cuCtxSetCurrent replaces its top), cuGetErrorName / cuGetErrorString and
 * failures on demand (fake_fault.c), streams and events (fake_events.c), IPC of plain allocations
 * (cuIpcGetMemHandle / OpenMemHandle / CloseMemHandle, fake_mem.c) and exported descriptors of
 * cuMemCreate memory (cuMemExportToShareableHandle / ImportFromShareableHandle, fake_vmm.c). Card
 * sizes: FAKE_CUDA_MEM (default 16 GiB each). fake_cuda.h lists every variable and backdoor.
 * Device pointers, handles and VA ranges come from counters (no value is reused while in use), and
 * frees of unknown pointers or handles fail as the real driver's do. The current context is per
 * thread, as in CUDA: a primary context is the device ordinal + 1 disguised as a pointer, with a
 * reference count (retain, release, reset); cuCtxCreate makes distinct ones. cuGetProcAddress (v1
 * and _v2, fake_procs.c) returns this library's exported functions by base name, CUDA version and
 * per-thread-stream flag, or with FAKE_CUDA_PROC=internal the same functions at other addresses (as
 * a driver may hand out internal entry points that no exported symbol names). FAKE_CUDA_VMM=off
 * makes cuMemCreate, cuMemAddressReserve and cuMulticastCreate fail with CUDA_ERROR_NOT_SUPPORTED
 * and the device attribute say so. FAKE_CUDA_SHARED=FILE makes the devices one machine's cards that
 * all processes naming FILE share: each process's held bytes per device are kept in FILE (an entry per
 * pid, under flock; entries of dead processes count nothing, as the driver frees a process's memory
 * when it ends), and each allocation and cuMemGetInfo go by the sum. After the entries the file keeps,
 * per device, the highest sum any allocation reached (FAKE_SHARE_PEAK_AT: 8-byte counters), which
 * tests/shim/fault_test.py reads to check that a group never held more than its limit.
 *
 * Not modelled: the memory a context itself takes; the allocations and arrays a destroyed or reset
 * context would take with it (only its limits' memory goes back); graph nodes other than memory and
 * child graph nodes; mapping a multicast object; the bytes of device memory (there are none: a
 * program that dereferences a device pointer crashes, as on a GPU); memory another process imported
 * outliving its exporter (the importer holds nothing of it); a context stack deeper than 64. Memory
 * on the host (cuMemCreate, pools) holds nothing of a card.
 *
 * This file: the lock, held[] and its sharing, the devices (sizes, names, bus ids) and their
 * attributes, contexts (the thread's stack) and their limits, the list of device pointers, the
 * address and handle counters, fake_cuda_held.
 * fake_internal.h says how the files call each other. Invariants: held[dev] is the sum of the
 * figures above (each file adds and subtracts its own through fake_hold_unsafe /
 * fake_unhold_unsafe) and never passes 16 GiB; with FAKE_CUDA_SHARED the process's entry always
 * equals held[]. Locks: fake_mu guards every bit of state of every file (fake_lock, which also takes
 * the shared file's flock); the thread's context stack is thread-local and needs no lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_internal.h"

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t fake_used[FAKE_MAX_DEVICES];   /* held[dev] of this process */
static int fake_initialized;
/* This thread's context stack (cuCtxPushCurrent / cuCtxPopCurrent; cuCtxSetCurrent replaces the top):
 * the current context is the top, none when it is empty. */
#define FAKE_CTX_STACK 64
static _Thread_local uintptr_t fake_ctx_stack[FAKE_CTX_STACK];
static _Thread_local int fake_ctx_depth;
#define fake_ctx_current (fake_ctx_depth ? fake_ctx_stack[fake_ctx_depth - 1] : (uintptr_t)0)

/* ---- FAKE_CUDA_SHARED: the cards' usage shared between processes ---------------------------- */

#define FAKE_SHARE_ENTRIES 128

typedef struct fake_share_entry {
    int pid;    /* 0: free */
    int pad;
    unsigned long long used[FAKE_MAX_DEVICES];
} fake_share_entry;

/* after the entries: unsigned long long peak[FAKE_MAX_DEVICES], the highest sum of live processes' bytes
 * per card; after the peaks, a fake_ckpt_entry per entry (the same index): the checkpoint API's state */
#define FAKE_SHARE_PEAK_AT (FAKE_SHARE_ENTRIES * sizeof(fake_share_entry))
#define FAKE_SHARE_CKPT_AT (FAKE_SHARE_PEAK_AT + FAKE_MAX_DEVICES * sizeof(unsigned long long))
#define FAKE_SHARE_BYTES (FAKE_SHARE_CKPT_AT + FAKE_SHARE_ENTRIES * sizeof(fake_ckpt_entry))

static fake_share_entry *fake_share;   /* the mapping, or NULL when not shared */
static int fake_share_fd = -1, fake_share_tried, fake_share_me = -1;

static int fake_pid_alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH); }

static fake_ckpt_entry *fake_ckpt_entries(void) { return (fake_ckpt_entry *)((char *)fake_share + FAKE_SHARE_CKPT_AT); }

/* The card the process of entry i uses for its ordinal o: o itself, unless a restore moved it. */
static int fake_entry_card(int i, int o) {
    int c = fake_ckpt_entries()[i].card[o];
    return c > 0 ? c - 1 : o;
}

static void fake_share_open_once_unsafe(void);

/* Opens the shared file once and claims this process's entry (caller holds fake_mu); fake_share_tried
 * is set last, so that a reader that sees it (the gate, without the lock) sees fake_share too. */
static void fake_share_open_unsafe(void) {
    if (fake_share_tried) return;
    fake_share_open_once_unsafe();
    __atomic_store_n(&fake_share_tried, 1, __ATOMIC_RELEASE);
}

static void fake_share_open_once_unsafe(void) {
    const char *path = getenv("FAKE_CUDA_SHARED");
    if (!path || !*path) return;
    size_t len = FAKE_SHARE_BYTES;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    flock(fd, LOCK_EX);
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < (off_t)len && ftruncate(fd, (off_t)len) != 0) { flock(fd, LOCK_UN); close(fd); return; }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { flock(fd, LOCK_UN); close(fd); return; }
    fake_share_entry *t = m;
    int me = -1;
    for (int i = 0; i < FAKE_SHARE_ENTRIES && me < 0; i++)
        if (t[i].pid == 0 || t[i].pid == (int)getpid() || !fake_pid_alive(t[i].pid)) me = i;
    if (me >= 0) {
        memset(&t[me], 0, sizeof t[me]);
        memset((char *)m + FAKE_SHARE_CKPT_AT + (size_t)me * sizeof(fake_ckpt_entry), 0, sizeof(fake_ckpt_entry));
        t[me].pid = (int)getpid();
        fake_share = t;
        fake_share_fd = fd;
        fake_share_me = me;
    }
    flock(fd, LOCK_UN);
    if (me < 0) { munmap(m, len); close(fd); }
}

/* Bytes held on card `card` by every live process (caller holds fake_mu and the flock; shared). */
static size_t fake_card_used_unsafe(int card) {
    size_t sum = 0;
    for (int i = 0; i < FAKE_SHARE_ENTRIES; i++) {
        if (!fake_share[i].pid || (i != fake_share_me && !fake_pid_alive(fake_share[i].pid))) continue;
        for (int o = 0; o < FAKE_MAX_DEVICES; o++)
            if (fake_share[i].used[o] && fake_entry_card(i, o) == card) sum += fake_share[i].used[o];
    }
    return sum;
}

/* Bytes held on dev's card: this process's alone, or every live process's (caller holds fake_mu and,
 * when shared, the flock). */
static size_t fake_used_unsafe(int dev) {
    if (!fake_share) return fake_used[dev];
    return fake_card_used_unsafe(fake_entry_card(fake_share_me, dev));
}

void fake_lock(void) {
    pthread_mutex_lock(&fake_mu);
    fake_share_open_unsafe();
    if (fake_share) flock(fake_share_fd, LOCK_EX);
}

void fake_unlock(void) {
    if (fake_share) flock(fake_share_fd, LOCK_UN);
    pthread_mutex_unlock(&fake_mu);
}

/* ---- held[dev] ----------------------------------------------------------------------------------- */

static void fake_publish_unsafe(int dev) {
    if (!fake_share) return;
    fake_share[fake_share_me].used[dev] = fake_used[dev];
    unsigned long long *peak = (unsigned long long *)((char *)fake_share + FAKE_SHARE_PEAK_AT);
    int card = fake_entry_card(fake_share_me, dev);
    size_t sum = fake_card_used_unsafe(card);
    if (sum > peak[card]) peak[card] = sum;
}

static int fake_fits_unsafe(int dev, size_t bytes) {
    size_t in_use = fake_used_unsafe(dev), card = fake_card_bytes(dev);
    return in_use <= card && bytes <= card - in_use;
}

size_t fake_room_unsafe(int dev) {
    if (dev < 0 || dev >= FAKE_MAX_DEVICES) return 0;
    size_t in_use = fake_used_unsafe(dev), card = fake_card_bytes(dev);
    return in_use >= card ? 0 : card - in_use;
}

CUresult fake_hold_unsafe(int dev, size_t bytes) {
    if (dev == FAKE_HOST || bytes == 0) return CUDA_SUCCESS;
    if (dev < 0 || dev >= FAKE_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    if (!fake_fits_unsafe(dev, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    fake_used[dev] += bytes;
    fake_publish_unsafe(dev);
    return CUDA_SUCCESS;
}

CUresult fake_hold_each_unsafe(const size_t bytes[FAKE_MAX_DEVICES]) {
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        if (bytes[d] && !fake_fits_unsafe(d, bytes[d])) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        if (bytes[d]) fake_hold_unsafe(d, bytes[d]);
    return CUDA_SUCCESS;
}

void fake_unhold_unsafe(int dev, size_t bytes) {
    if (dev < 0 || dev >= FAKE_MAX_DEVICES || bytes == 0) return;
    fake_used[dev] = bytes > fake_used[dev] ? 0 : fake_used[dev] - bytes;
    fake_publish_unsafe(dev);
}

/* ---- the checkpoint API's side of the shared file (fake_ckpt.c has the calls) -------------------- */

/* The calling process's entry of the shared file, opened at its first call (the gate needs it). */
static fake_ckpt_entry *fake_ckpt_mine(void) {
    if (!__atomic_load_n(&fake_share_tried, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&fake_mu);
        fake_share_open_unsafe();
        pthread_mutex_unlock(&fake_mu);
    }
    return fake_share ? &fake_ckpt_entries()[fake_share_me] : NULL;
}

void fake_gate_enter(void) {
    fake_ckpt_entry *me = fake_ckpt_mine();
    if (!me) return;
    for (;;) {
        __atomic_add_fetch(&me->inflight, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&me->state, __ATOMIC_SEQ_CST) == CU_PROCESS_STATE_RUNNING) return;
        __atomic_sub_fetch(&me->inflight, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&me->state, __ATOMIC_SEQ_CST) != CU_PROCESS_STATE_RUNNING) usleep(1000);
    }
}

int fake_checkpointed_self(void) {
    fake_ckpt_entry *me = fake_ckpt_mine();
    return me && __atomic_load_n(&me->state, __ATOMIC_SEQ_CST) == CU_PROCESS_STATE_CHECKPOINTED;
}

void fake_gate_leave(void) {
    fake_ckpt_entry *me = fake_share ? &fake_ckpt_entries()[fake_share_me] : NULL;
    if (me) __atomic_sub_fetch(&me->inflight, 1, __ATOMIC_SEQ_CST);
}

int fake_ckpt_find_unsafe(int pid, fake_ckpt_entry **ck, unsigned long long **used) {
    fake_share_open_unsafe();
    if (!fake_share || pid <= 0) return -1;
    for (int i = 0; i < FAKE_SHARE_ENTRIES; i++) {
        if (fake_share[i].pid != pid || !fake_pid_alive(pid)) continue;
        *ck = &fake_ckpt_entries()[i];
        *used = fake_share[i].used;
        return i;
    }
    return -1;
}

size_t fake_ckpt_card_room_unsafe(int card) {
    size_t used = fake_card_used_unsafe(card), bytes = fake_card_bytes(card);
    return used >= bytes ? 0 : bytes - used;
}

int fake_ckpt_entry_card(int entry, int ordinal) { return fake_entry_card(entry, ordinal); }

/* The contents word of this process's device memory (fake_ckpt.c says what a checkpoint does to it);
 * reading or writing device memory waits while the process is locked, as any driver call does. */
SHIM_EXPORT int fake_cuda_poke(unsigned long long value) {
    fake_ckpt_entry *me = fake_ckpt_mine();
    if (!me) return -1;
    fake_gate_enter();
    __atomic_store_n(&me->data, value, __ATOMIC_SEQ_CST);
    fake_gate_leave();
    return 0;
}

SHIM_EXPORT unsigned long long fake_cuda_peek(void) {
    fake_ckpt_entry *me = fake_ckpt_mine();
    if (!me) return 0;
    fake_gate_enter();
    unsigned long long v = __atomic_load_n(&me->data, __ATOMIC_SEQ_CST);
    fake_gate_leave();
    return v;
}

SHIM_EXPORT size_t fake_cuda_held(int dev) {
    if (dev < 0 || dev >= FAKE_MAX_DEVICES) return 0;
    pthread_mutex_lock(&fake_mu);
    size_t held = fake_used[dev];
    pthread_mutex_unlock(&fake_mu);
    return held;
}

/* ---- growable arrays, counters, the list of device pointers ------------------------------------ */

int fake_reserve(void **items, size_t *cap, size_t count, size_t more, size_t elem) {
    if (count + more <= *cap) return 0;
    size_t n = *cap ? *cap : 16;
    while (n < count + more) n *= 2;
    void *p = realloc(*items, n * elem);
    if (!p) return -1;
    *items = p;
    *cap = n;
    return 0;
}

uintptr_t fake_opaque_unsafe(int kind) {
    static unsigned long long next = 1;
    return (uintptr_t)(0xfa4e000000000000ull | (unsigned long long)kind << 40 | next++);
}

/* 0x7f0000000000 and up: plain allocations 1 MiB apart (as the fake always gave them), pool blocks,
 * graph allocations and reserved VA ranges alike. */
static unsigned long long fake_next_addr = 0x7f0000000000ull;

unsigned long long fake_address_unsafe(size_t size, size_t align, unsigned long long hint) {
    const unsigned long long end = 1ull << 56;   /* the simulated address space ends here */
    size_t step = fake_round_up(size, 1u << 20);
    unsigned long long from = hint && hint % align == 0 && hint >= fake_next_addr ? hint : fake_next_addr;
    unsigned long long at = (from + align - 1) & ~(unsigned long long)(align - 1);
    if (at >= end || step > end - at) return 0;
    fake_next_addr = at + step;
    return at;
}

static fake_block *fake_blocks;
static size_t fake_nblocks, fake_blocks_cap;

int fake_blocks_reserve_unsafe(size_t more) {
    return fake_reserve((void **)&fake_blocks, &fake_blocks_cap, fake_nblocks, more, sizeof *fake_blocks);
}

void fake_block_add_unsafe(const fake_block *b) { fake_blocks[fake_nblocks++] = *b; }

fake_block *fake_block_find_unsafe(unsigned long long key) {
    for (size_t i = fake_nblocks; i-- > 0;)
        if (fake_blocks[i].key == key) return &fake_blocks[i];
    return NULL;
}

fake_block *fake_block_containing_unsafe(unsigned long long addr) {
    for (size_t i = fake_nblocks; i-- > 0;)
        if (addr >= fake_blocks[i].key && addr - fake_blocks[i].key < fake_blocks[i].size) return &fake_blocks[i];
    return NULL;
}

void fake_block_remove_unsafe(fake_block *b) { *b = fake_blocks[--fake_nblocks]; }

/* ---- devices ------------------------------------------------------------------------------------ */

int fake_is_initialized(void) { return __atomic_load_n(&fake_initialized, __ATOMIC_ACQUIRE); }

int fake_vmm_off(void) {
    const char *vmm = getenv("FAKE_CUDA_VMM");
    return vmm && strcmp(vmm, "off") == 0;
}

int fake_shareable_off(void) {
    const char *v = getenv("FAKE_CUDA_SHAREABLE");
    return v && strcmp(v, "off") == 0;
}

/* CUDA_VISIBLE_DEVICES as a list of card indices ("1,0"): the card of ordinal i in phys[i]; the
 * number of entries, or -1 when it is unset (every card visible, in order). Only the device count
 * and the UUIDs follow it (the simulated memory stays by ordinal). */
static int fake_visible(int phys[FAKE_MAX_DEVICES]) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) return -1;
    int n = 0;
    while (*v && n < FAKE_MAX_DEVICES) {
        char *end;
        long c = strtol(v, &end, 10);
        if (end == v || c < 0) break;   /* like the driver: the list ends at an invalid entry */
        phys[n++] = (int)c;
        v = *end == ',' ? end + 1 : end;
        if (*end != ',') break;
    }
    return n;
}

static int fake_mem_cards(size_t bytes[FAKE_MAX_DEVICES]);

int fake_device_count(void) {
    const char *v = getenv("FAKE_CUDA_DEVICES");
    size_t bytes[FAKE_MAX_DEVICES];
    int cards = fake_mem_cards(bytes);
    int n = v ? atoi(v) : cards > 0 ? cards : 2;
    if (cards > 0 && n > cards) n = cards;   /* FAKE_CUDA_MEM names every card there is */
    n = n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
    int phys[FAKE_MAX_DEVICES], visible = fake_visible(phys);
    if (visible >= 0) {
        int k = 0;
        while (k < visible && phys[k] < n) k++;
        n = k;
    }
    return n;
}

/* One size of FAKE_CUDA_MEM: digits, then B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024); 0 when
 * malformed. */
static size_t fake_parse_size(const char *s, const char **end) {
    char *e = NULL;
    unsigned long long v = strtoull(s, &e, 10);
    int shift = 0;
    if (e == s || *s == '-') return 0;
    switch (*e) {
    case 'B': shift = 0; e++; break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        e++;
        if (e[0] == 'i' && e[1] == 'B') e += 2;
    }
    *end = e;
    return v > (SIZE_MAX >> shift) ? 0 : (size_t)v << shift;
}

/* FAKE_CUDA_MEM ("16GiB", "2x16GiB", "80GiB,24GiB@8.6", as VRAM_SIM_DEVICES): each card's bytes and
 * compute capability (major * 10 + minor; 90 without "@MAJOR.MINOR"), in card order (cc may be NULL);
 * the number of cards it names (0 when unset or malformed: then every card has 16 GiB and 9.0). */
static int fake_mem_cards_cc(size_t bytes[FAKE_MAX_DEVICES], int *cc) {
    const char *v = getenv("FAKE_CUDA_MEM");
    int n = 0;
    if (!v || !*v) return 0;
    while (*v) {
        const char *e = v;
        char *x = NULL;
        unsigned long count = 1;
        unsigned long c = strtoul(v, &x, 10);
        if (x != v && *x == 'x') {
            count = c;
            v = x + 1;
        }
        size_t size = fake_parse_size(v, &e);
        long major = 9, minor = 0;
        if (*e == '@') {
            char *m = NULL;
            major = strtol(e + 1, &m, 10);
            if (m == e + 1 || *m != '.') return 0;
            minor = strtol(m + 1, &x, 10);
            if (x == m + 1 || major < 1 || minor < 0 || minor > 9) return 0;
            e = x;
        }
        if (size == 0 || count == 0 || (*e != ',' && *e != '\0')) return 0;
        for (unsigned long i = 0; i < count; i++) {
            if (n == FAKE_MAX_DEVICES) return 0;
            if (cc) cc[n] = (int)(major * 10 + minor);
            bytes[n++] = size;
        }
        v = *e == ',' ? e + 1 : e;
    }
    return n;
}

static int fake_mem_cards(size_t bytes[FAKE_MAX_DEVICES]) { return fake_mem_cards_cc(bytes, NULL); }

/* The card of ordinal dev (CUDA_VISIBLE_DEVICES renumbers them; a restore may have moved this
 * process's ordinal to another card); -1 for none. */
static int fake_card_of(CUdevice dev) {
    int phys[FAKE_MAX_DEVICES], visible = fake_visible(phys);
    if (dev < 0 || dev >= FAKE_MAX_DEVICES) return -1;
    if (fake_share && fake_ckpt_entries()[fake_share_me].card[dev] > 0) return fake_ckpt_entries()[fake_share_me].card[dev] - 1;
    return visible >= 0 ? (dev < visible ? phys[dev] : -1) : dev;
}

/* The compute capability of the card of ordinal dev, major * 10 + minor (FAKE_CUDA_MEM; else 9.0). */
static int fake_card_cc(int dev) {
    size_t bytes[FAKE_MAX_DEVICES];
    int cc[FAKE_MAX_DEVICES];
    int n = fake_mem_cards_cc(bytes, cc), card = fake_card_of(dev);
    return card >= 0 && card < n ? cc[card] : 90;
}

size_t fake_card_bytes(int dev) {
    size_t bytes[FAKE_MAX_DEVICES];
    int n = fake_mem_cards(bytes), card = fake_card_of(dev);
    if (card < 0) return 0;
    return card < n ? bytes[card] : n > 0 ? 0 : FAKE_TOTAL;
}

static CUresult fake_check_device(CUdevice dev) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult impl_cuInit(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n(&fake_initialized, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

CUresult impl_cuDeviceGetCount(int *count) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = fake_device_count();
    return CUDA_SUCCESS;
}

CUresult impl_cuDeviceGet(CUdevice *dev, int ordinal) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

/* Device d's UUID: fa4ec0da-0000-4000-8000-0000000000<d>, printed GPU-fa4ec0da-0000-4000-8000-0000000000dd
 * (FAKE_CUDA_UUID_BASE=N adds N to the last byte, for a second "machine" of distinct cards); d is the
 * card's index, ordinal <d> of CUDA_VISIBLE_DEVICES when it is set. */
CUresult impl_cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    static const unsigned char base[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    const char *add = getenv("FAKE_CUDA_UUID_BASE");
    int card = fake_card_of(dev);
    memcpy(uuid->bytes, base, 16);
    uuid->bytes[15] = (char)(unsigned char)(card + (add ? atoi(add) : 0));
    return CUDA_SUCCESS;
}

CUresult impl_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return impl_cuDeviceGetUuid_v2(uuid, dev); }

/* The attributes the preload library and libvram ask about: an H100's (compute capability 9.0,
 * unless FAKE_CUDA_MEM gives the card another). */
CUresult impl_cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = FAKE_SMS; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = FAKE_THREADS_PER_SM; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = fake_card_cc(dev) / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = fake_card_cc(dev) % 10; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = !fake_vmm_off(); break;
    default: return CUDA_ERROR_INVALID_VALUE;   /* an attribute the fake does not model */
    }
    return CUDA_SUCCESS;
}

/* "NVIDIA Fake GPU 16GB" (the card's size in whole GiB), cut to len - 1 characters as the driver does. */
CUresult impl_cuDeviceGetName(char *name, int len, CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "NVIDIA Fake GPU %zuGB", fake_card_bytes(dev) >> 30);
    return CUDA_SUCCESS;
}

/* "0000:<card + 1>:00.0" (domain:bus:device.function, hexadecimal), as long as it fits in len. */
CUresult impl_cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!bus_id || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(bus_id, (size_t)len, "0000:%02x:00.0", fake_card_of(dev) + 1);
    return CUDA_SUCCESS;
}

/* CUDA 13.0; needs no cuInit, as in the driver. */
CUresult impl_cuDriverGetVersion(int *version) {
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

/* ---- contexts and their limits ------------------------------------------------------------------ */

#define FAKE_LIMITS 5   /* CU_LIMIT_STACK_SIZE .. CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT */

static const size_t fake_limit_default[FAKE_LIMITS] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1u << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8u << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
};

typedef struct fake_ctx {
    uintptr_t id;
    int dev;
    int alive;              /* a created context: not destroyed; a primary one: retained (refs > 0) */
    unsigned refs, stale;   /* primary: retains, and retains a reset ended (each may still be released) */
    size_t limit[FAKE_LIMITS];
    size_t held;            /* the bytes its limits hold on dev (in held[dev]) */
} fake_ctx;

static fake_ctx fake_primary[FAKE_MAX_DEVICES];   /* id dev + 1 */
static int fake_ctx_push(uintptr_t id);
static fake_ctx *fake_ctxs;                       /* created ones, destroyed ones kept (alive 0) */
static size_t fake_nctxs, fake_ctxs_cap;

static int fake_is_primary_id(uintptr_t id) { return id >= 1 && id <= FAKE_MAX_DEVICES; }

/* The bytes a context's limits hold: what the heap, the printf FIFO and every thread's stack take
 * beyond their defaults. */
static size_t fake_limits_bytes(const size_t *limit) {
    size_t b = 0;
    if (limit[CU_LIMIT_STACK_SIZE] > fake_limit_default[CU_LIMIT_STACK_SIZE])
        b = fake_mul_sat(limit[CU_LIMIT_STACK_SIZE] - fake_limit_default[CU_LIMIT_STACK_SIZE],
                         (size_t)FAKE_SMS * FAKE_THREADS_PER_SM);
    for (int l = CU_LIMIT_PRINTF_FIFO_SIZE; l <= CU_LIMIT_MALLOC_HEAP_SIZE; l++)
        if (limit[l] > fake_limit_default[l]) b = fake_add_sat(b, limit[l] - fake_limit_default[l]);
    return b;
}

static void fake_ctx_start(fake_ctx *c, uintptr_t id, int dev) {
    c->id = id;
    c->dev = dev;
    c->alive = 1;
    c->held = 0;
    memcpy(c->limit, fake_limit_default, sizeof c->limit);
}

/* A context ends: what its limits hold goes back, the limits return to their defaults. */
static void fake_ctx_end_unsafe(fake_ctx *c) {
    fake_unhold_unsafe(c->dev, c->held);
    c->held = 0;
    c->alive = 0;
    memcpy(c->limit, fake_limit_default, sizeof c->limit);
}

static fake_ctx *fake_primary_unsafe(int dev) {
    fake_ctx *c = &fake_primary[dev];
    if (!c->id) {
        fake_ctx_start(c, (uintptr_t)dev + 1, dev);
        c->alive = 0;
    }
    return c;
}

static fake_ctx *fake_ctx_find_unsafe(uintptr_t id) {
    if (fake_is_primary_id(id)) return (int)id - 1 < fake_device_count() ? fake_primary_unsafe((int)id - 1) : NULL;
    for (size_t i = 0; i < fake_nctxs; i++)
        if (fake_ctxs[i].id == id) return &fake_ctxs[i];
    return NULL;
}

CUresult fake_current_device(int *dev) {
    uintptr_t id = fake_ctx_current;
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!id) return CUDA_ERROR_INVALID_CONTEXT;
    if (fake_is_primary_id(id)) {   /* a primary context's handle is always usable for memory */
        *dev = (int)id - 1;
        return CUDA_SUCCESS;
    }
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_ctx *c = fake_ctx_find_unsafe(id);
    if (!c) r = CUDA_ERROR_INVALID_CONTEXT;
    else if (!c->alive) r = FAKE_ERROR_CONTEXT_IS_DESTROYED;
    else *dev = c->dev;
    fake_unlock();
    return r;
}

CUresult impl_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    fake_ctx *c = fake_primary_unsafe(dev);
    if (c->refs++ == 0) fake_ctx_start(c, c->id, dev);
    *ctx = (CUcontext)c->id;
    fake_unlock();
    return CUDA_SUCCESS;
}

/* The last release ends the primary context; a release of a retain that a reset already ended
 * succeeds (the driver documents it as safe); one more is CUDA_ERROR_INVALID_CONTEXT. */
static CUresult fake_primary_release(CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    fake_lock();
    fake_ctx *c = fake_primary_unsafe(dev);
    if (c->refs > 0) {
        if (--c->refs == 0) fake_ctx_end_unsafe(c);
    } else if (c->stale > 0) {
        c->stale--;
    } else {
        r = CUDA_ERROR_INVALID_CONTEXT;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuDevicePrimaryCtxRelease(CUdevice dev) { return fake_primary_release(dev); }
CUresult impl_cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return fake_primary_release(dev); }

/* Reset ends the primary context (its retains are not released: each may still be). */
static CUresult fake_primary_reset(CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    fake_lock();
    fake_ctx *c = fake_primary_unsafe(dev);
    c->stale += c->refs;
    c->refs = 0;
    fake_ctx_end_unsafe(c);
    fake_unlock();
    return CUDA_SUCCESS;
}

CUresult impl_cuDevicePrimaryCtxReset(CUdevice dev) { return fake_primary_reset(dev); }
CUresult impl_cuDevicePrimaryCtxReset_v2(CUdevice dev) { return fake_primary_reset(dev); }

CUresult impl_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    *flags = 0;
    *active = fake_primary_unsafe(dev)->refs > 0;
    fake_unlock();
    return CUDA_SUCCESS;
}

/* A new context on dev, current to the calling thread from now on. */
static CUresult fake_ctx_create(CUcontext *ctx, CUdevice dev) {
    CUresult r = fake_check_device(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    if (fake_reserve((void **)&fake_ctxs, &fake_ctxs_cap, fake_nctxs, 1, sizeof *fake_ctxs) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake_ctx *c = &fake_ctxs[fake_nctxs++];
        memset(c, 0, sizeof *c);
        fake_ctx_start(c, fake_opaque_unsafe(FAKE_OBJ_CONTEXT), dev);
        *ctx = (CUcontext)c->id;
    }
    fake_unlock();
    if (r == CUDA_SUCCESS && fake_ctx_push((uintptr_t)*ctx) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;   /* (after 64) */
    return r;
}

CUresult impl_cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev) {
    (void)flags;
    return fake_ctx_create(ctx, dev);
}

/* CUDA 11.4 and 12.5 versions: their execution-affinity and creation parameters change nothing here. */
CUresult impl_cuCtxCreate_v3(CUcontext *ctx, void *affinity_params, int num_params, unsigned int flags, CUdevice dev) {
    (void)flags;
    if (num_params < 0 || (num_params > 0 && !affinity_params)) return CUDA_ERROR_INVALID_VALUE;
    return fake_ctx_create(ctx, dev);
}

CUresult impl_cuCtxCreate_v4(CUcontext *ctx, void *create_params, unsigned int flags, CUdevice dev) {
    (void)create_params;
    (void)flags;
    return fake_ctx_create(ctx, dev);
}

/* Destroys a created context (a primary one is released or reset, not destroyed); a thread that
 * still has it current gets FAKE_ERROR_CONTEXT_IS_DESTROYED; the calling thread has none after. */
static CUresult fake_ctx_destroy(CUcontext ctx) {
    uintptr_t id = (uintptr_t)ctx;
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    if (fake_is_primary_id(id)) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_ctx *c = fake_ctx_find_unsafe(id);
    if (!c || !c->alive) r = CUDA_ERROR_INVALID_CONTEXT;
    else fake_ctx_end_unsafe(c);
    fake_unlock();
    if (r == CUDA_SUCCESS && fake_ctx_current == id) fake_ctx_depth--;   /* popped from this thread's stack */
    return r;
}

CUresult impl_cuCtxDestroy(CUcontext ctx) { return fake_ctx_destroy(ctx); }
CUresult impl_cuCtxDestroy_v2(CUcontext ctx) { return fake_ctx_destroy(ctx); }

/* Whether a context handle may be made current: a created one alive, or a device's primary one. */
static int fake_ctx_usable(uintptr_t id) {
    if (fake_is_primary_id(id)) return (int)id - 1 < fake_device_count();
    fake_lock();
    fake_ctx *c = fake_ctx_find_unsafe(id);
    int ok = c && c->alive;
    fake_unlock();
    return ok;
}

/* Puts a context on top of this thread's stack: 0, or -1 when the stack is full (the fake's limit). */
static int fake_ctx_push(uintptr_t id) {
    if (fake_ctx_depth == FAKE_CTX_STACK) return -1;
    fake_ctx_stack[fake_ctx_depth++] = id;
    return 0;
}

/* Replaces the top of this thread's stack (pushes onto an empty one); NULL pops it. */
CUresult impl_cuCtxSetCurrent(CUcontext ctx) {
    uintptr_t id = (uintptr_t)ctx;
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (id && !fake_ctx_usable(id)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!id) {
        if (fake_ctx_depth > 0) fake_ctx_depth--;
    } else if (fake_ctx_depth == 0) {
        fake_ctx_push(id);
    } else {
        fake_ctx_stack[fake_ctx_depth - 1] = id;
    }
    return CUDA_SUCCESS;
}

CUresult impl_cuCtxPushCurrent_v2(CUcontext ctx) {
    uintptr_t id = (uintptr_t)ctx;
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_ctx_usable(id)) return CUDA_ERROR_INVALID_CONTEXT;
    return fake_ctx_push(id) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult impl_cuCtxPopCurrent_v2(CUcontext *ctx) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (fake_ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    uintptr_t id = fake_ctx_stack[--fake_ctx_depth];
    if (ctx) *ctx = (CUcontext)id;
    return CUDA_SUCCESS;
}

CUresult impl_cuCtxGetCurrent(CUcontext *ctx) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = (CUcontext)fake_ctx_current;
    return CUDA_SUCCESS;
}

CUresult impl_cuCtxGetDevice(CUdevice *dev) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    int d = -1;
    CUresult r = fake_current_device(&d);
    if (r == CUDA_SUCCESS) *dev = d;
    return r;
}

/* The calling thread's context, for its limits: it must be alive (a primary one retained). */
static CUresult fake_limit_ctx_unsafe(fake_ctx **out) {
    uintptr_t id = fake_ctx_current;
    if (!id) return CUDA_ERROR_INVALID_CONTEXT;
    fake_ctx *c = fake_ctx_find_unsafe(id);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (!c->alive) return fake_is_primary_id(id) ? CUDA_ERROR_INVALID_CONTEXT : FAKE_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

/* Limits of a compute capability 9.0 device: the stack, the printf FIFO, the malloc heap and the
 * pending launch count; the sync depth (below 9.0 only) and the rest are not supported. */
static int fake_limit_known(CUlimit limit) {
    return limit == CU_LIMIT_STACK_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE || limit == CU_LIMIT_MALLOC_HEAP_SIZE ||
           limit == CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT;
}

CUresult impl_cuCtxSetLimit(CUlimit limit, size_t value) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!fake_limit_known(limit)) return FAKE_ERROR_UNSUPPORTED_LIMIT;
    fake_lock();
    fake_ctx *c = NULL;
    CUresult r = fake_limit_ctx_unsafe(&c);
    if (r == CUDA_SUCCESS) {
        size_t want[FAKE_LIMITS];
        memcpy(want, c->limit, sizeof want);
        want[limit] = value;
        size_t bytes = fake_limits_bytes(want);
        if (bytes > c->held) r = fake_hold_unsafe(c->dev, bytes - c->held);
        else fake_unhold_unsafe(c->dev, c->held - bytes);
        if (r == CUDA_SUCCESS) {
            c->limit[limit] = value;
            c->held = bytes;
        }
    }
    fake_unlock();
    return r;
}

CUresult impl_cuCtxGetLimit(size_t *value, CUlimit limit) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_limit_known(limit)) return FAKE_ERROR_UNSUPPORTED_LIMIT;
    fake_lock();
    fake_ctx *c = NULL;
    CUresult r = fake_limit_ctx_unsafe(&c);
    if (r == CUDA_SUCCESS) *value = c->limit[limit];
    fake_unlock();
    return r;
}

/* ---- the exported functions ---------------------------------------------------------------------- */

FAKE_EXPORT(cuInit, (unsigned int flags), (flags))
FAKE_EXPORT(cuDeviceGetCount, (int *count), (count))
FAKE_EXPORT(cuDeviceGet, (CUdevice *dev, int ordinal), (dev, ordinal))
FAKE_EXPORT(cuDeviceGetUuid, (CUuuid *uuid, CUdevice dev), (uuid, dev))
FAKE_EXPORT(cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice dev), (uuid, dev))
FAKE_EXPORT(cuDeviceGetAttribute, (int *value, CUdevice_attribute attrib, CUdevice dev), (value, attrib, dev))
FAKE_EXPORT(cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev), (ctx, dev))
FAKE_EXPORT(cuDevicePrimaryCtxRelease, (CUdevice dev), (dev))
FAKE_EXPORT(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), (dev))
FAKE_EXPORT(cuDevicePrimaryCtxReset, (CUdevice dev), (dev))
FAKE_EXPORT(cuDevicePrimaryCtxReset_v2, (CUdevice dev), (dev))
FAKE_EXPORT(cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active), (dev, flags, active))
FAKE_EXPORT(cuCtxCreate_v2, (CUcontext *ctx, unsigned int flags, CUdevice dev), (ctx, flags, dev))
FAKE_EXPORT(cuCtxCreate_v3, (CUcontext *ctx, void *affinity_params, int num_params, unsigned int flags, CUdevice dev),
            (ctx, affinity_params, num_params, flags, dev))
FAKE_EXPORT(cuCtxCreate_v4, (CUcontext *ctx, void *create_params, unsigned int flags, CUdevice dev),
            (ctx, create_params, flags, dev))
FAKE_EXPORT(cuCtxDestroy, (CUcontext ctx), (ctx))
FAKE_EXPORT(cuCtxDestroy_v2, (CUcontext ctx), (ctx))
FAKE_EXPORT(cuCtxSetCurrent, (CUcontext ctx), (ctx))
FAKE_EXPORT(cuCtxGetCurrent, (CUcontext *ctx), (ctx))
FAKE_EXPORT(cuCtxGetDevice, (CUdevice *dev), (dev))
FAKE_EXPORT(cuCtxSetLimit, (CUlimit limit, size_t value), (limit, value))
FAKE_EXPORT(cuCtxGetLimit, (size_t *value, CUlimit limit), (value, limit))
FAKE_EXPORT(cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))
FAKE_EXPORT(cuCtxPopCurrent_v2, (CUcontext *ctx), (ctx))
FAKE_EXPORT(cuDriverGetVersion, (int *version), (version))
FAKE_EXPORT(cuDeviceGetName, (char *name, int len, CUdevice dev), (name, len, dev))
FAKE_EXPORT(cuDeviceGetPCIBusId, (char *bus_id, int len, CUdevice dev), (bus_id, len, dev))
