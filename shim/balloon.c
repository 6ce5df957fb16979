/*
 * balloon.c: preallocation (VRAM_GROWTH=0, the default of `vram run` without --growth). A device
 * with a limit keeps the limit reserved on the card: at the first accounted call on it the shim
 * takes physical memory up to limit - in use with the real cuMemCreate (pinned device memory,
 * never mapped) in pieces of 64 MiB rounded up to the device's allocation granularity
 * (cuMemGetAllocationGranularity; 2 MiB when the driver has none), the "balloon", holding the
 * handles per device. Before an allocation of the program is forwarded to the driver, balloon
 * pieces are released (real cuMemRelease) until the balloon is at most limit - in use (the
 * request's reservation included), so the program's memory comes out of its own reservation and
 * a second process cannot take it away. After a free (and after a refused allocation gave its
 * reservation back) the balloon is filled again up to limit - in use, in pieces; when another
 * process took that memory meanwhile this is no error (VRAM_LOG=1 says so). The balloon is not
 * the program's usage: cuMemGetInfo, cuDeviceTotalMem and the ledger show what they show with
 * growth (cuMemGetInfo counts the balloon as free to the program). When cuMemCreate is missing
 * or its first piece fails, that device falls back to memory on demand, said once on stderr.
 * VRAM_GROWTH unset or true: memory on demand, nothing taken up front (every call here returns at
 * once).
 *
 * A limit that moves (limits.c) moves the balloon with it (shim_balloon_fit): a lowered limit
 * releases the pieces above limit - in use at once (the difference goes back to the card), a raised
 * one takes more as far as the card has room.
 *
 * Invariants: balloon_bytes[d] is the sum of balloon_sz[d][0..balloon_n[d]), at most
 * limit - in use after each change but while a fill stopped short; balloon_state[d] goes from 0 to
 * 1 or -1 once (read atomically on the fast path). Locks: balloon_mu (taken before g.mu, never
 * together with ledger_mu) serialises every change, each against the current in-use count read
 * under g.mu, so threads cannot together hold more than the limit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define SHIM_BALLOON_PIECE (64ull << 20)
#define SHIM_BALLOON_GRAN_DEFAULT (2ull << 20)

/* What the balloon may hold on `dev`: limit - in use, 0 when in use reached the limit. */
static size_t shim_balloon_target(int dev) {
    pthread_mutex_lock(&g.mu);
    size_t used = g.used[dev], limit = g.limit[dev];
    pthread_mutex_unlock(&g.mu);
    return used >= limit ? 0 : limit - used;
}

static CUmemAllocationProp shim_balloon_prop(int dev) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

/* Appends a piece to dev's list (caller holds balloon_mu); -1 when the list cannot grow. */
static int shim_balloon_push_locked(int dev, CUmemGenericAllocationHandle h, size_t size) {
    if (g.balloon_n[dev] == g.balloon_cap[dev]) {
        size_t cap = g.balloon_cap[dev] ? g.balloon_cap[dev] * 2 : 64;
        CUmemGenericAllocationHandle *hs = realloc(g.balloon_h[dev], cap * sizeof *hs);
        if (!hs) return -1;
        g.balloon_h[dev] = hs;
        size_t *sz = realloc(g.balloon_sz[dev], cap * sizeof *sz);
        if (!sz) return -1;
        g.balloon_sz[dev] = sz;
        g.balloon_cap[dev] = cap;
    }
    g.balloon_h[dev][g.balloon_n[dev]] = h;
    g.balloon_sz[dev][g.balloon_n[dev]] = size;
    g.balloon_n[dev]++;
    __atomic_store_n(&g.balloon_bytes[dev], g.balloon_bytes[dev] + size, __ATOMIC_RELAXED);
    return 0;
}

/* Fills dev's balloon up to limit - in use, in pieces (caller holds balloon_mu). Returns the
 * driver's error of the piece that failed, CUDA_SUCCESS when the balloon reached its target. */
static CUresult shim_balloon_fill_locked(int dev) {
    pfn_cuMemCreate create = SHIM_REAL(cuMemCreate);
    pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
    CUmemAllocationProp prop = shim_balloon_prop(dev);
    size_t gran = g.balloon_gran[dev], target = shim_balloon_target(dev);
    while (g.balloon_bytes[dev] < target && target - g.balloon_bytes[dev] >= gran) {
        size_t want = target - g.balloon_bytes[dev];
        want -= want % gran;
        if (want > g.balloon_piece[dev]) want = g.balloon_piece[dev];
        CUmemGenericAllocationHandle h = 0;
        CUresult r = create(&h, want, &prop, 0);
        if (r == CUDA_SUCCESS && shim_balloon_push_locked(dev, h, want) != 0) {
            release(h);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != CUDA_SUCCESS) {
            g.balloon_short[dev] = 1;
            return r;
        }
    }
    g.balloon_short[dev] = 0;
    g.balloon_slack[dev] = 0;
    return CUDA_SUCCESS;
}

/* Releases pieces, newest first, until the balloon is at most `target` bytes (caller holds
 * balloon_mu); returns the bytes released. */
static size_t shim_balloon_shrink_locked(int dev, size_t target) {
    pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
    size_t before = g.balloon_bytes[dev];
    while (g.balloon_bytes[dev] > target && g.balloon_n[dev] > 0) {
        size_t i = --g.balloon_n[dev];
        CUresult r = release(g.balloon_h[dev][i]);
        __atomic_store_n(&g.balloon_bytes[dev], g.balloon_bytes[dev] - g.balloon_sz[dev][i], __ATOMIC_RELAXED);
        if (r != CUDA_SUCCESS && g.log) {
            char err[160];
            shim_error_text(r, err, sizeof err);
            fprintf(stderr, "vram: cuMemRelease of a preallocated piece on device %d failed: %s\n", dev, err);
        }
    }
    return before - g.balloon_bytes[dev];
}

static void shim_balloon_fallback_locked(int dev, const char *why) {
    __atomic_store_n(&g.balloon_state[dev], -1, __ATOMIC_RELEASE);
    if (g.fallback_said && !g.log) return;
    g.fallback_said = 1;
    fprintf(stderr, "vram: preallocation is not available on device %d (%s); memory is taken on demand\n", dev, why);
}

/* At the first accounted call on `dev` with VRAM_GROWTH=0 and a limit: the balloon is filled up
 * to the limit (less what is in use), or the device falls back to memory on demand. */
void shim_balloon_start(int dev) {
    if (!g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g.balloon_mu);
    if (!g.balloon_state[dev]) {
        pfn_cuMemCreate create = SHIM_REAL(cuMemCreate);
        pfn_cuMemRelease release = SHIM_REAL(cuMemRelease);
        if (!g.limit[dev]) {
            __atomic_store_n(&g.balloon_state[dev], -1, __ATOMIC_RELEASE);   /* nothing to reserve */
        } else if (!create || !release) {
            shim_balloon_fallback_locked(dev, "the driver has no cuMemCreate/cuMemRelease");
        } else {
            CUmemAllocationProp prop = shim_balloon_prop(dev);
            size_t gran = 0;
            if (!g.real.cuMemGetAllocationGranularity ||
                g.real.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || gran == 0)
                gran = SHIM_BALLOON_GRAN_DEFAULT;
            g.balloon_gran[dev] = gran;
            g.balloon_piece[dev] = (SHIM_BALLOON_PIECE + gran - 1) / gran * gran;
            CUresult r = shim_balloon_fill_locked(dev);
            char err[160] = "";
            if (r != CUDA_SUCCESS) shim_error_text(r, err, sizeof err);
            if (r != CUDA_SUCCESS && g.balloon_n[dev] == 0) {
                char why[200];
                snprintf(why, sizeof why, "cuMemCreate failed: %s", err);
                shim_balloon_fallback_locked(dev, why);
            } else {
                __atomic_store_n(&g.balloon_state[dev], 1, __ATOMIC_RELEASE);
                if (r != CUDA_SUCCESS && g.log) {
                    char held[32];
                    vram__format_bytes(held, sizeof held, g.balloon_bytes[dev]);
                    fprintf(stderr, "vram: preallocation on device %d reserved only %s (cuMemCreate: %s%s); the "
                            "rest is taken on demand\n", dev, held, err,
                            r == CUDA_ERROR_OUT_OF_MEMORY ? "; the card has less free memory" : "");
                }
            }
        }
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

/* Before an allocation of `size` bytes, just reserved, goes to the driver: room out of the balloon.
 * The balloon shrinks to limit - in use (the reservation included). While it is short (the card
 * had less free memory than the limit) that may not free anything, so `size` more is released
 * then (less what earlier releases left unused, the slack). */
void shim_balloon_make_room(int dev, size_t size) {
    if (!g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE) != 1) return;
    pthread_mutex_lock(&g.balloon_mu);
    size_t released = shim_balloon_shrink_locked(dev, shim_balloon_target(dev));
    if (g.balloon_short[dev]) {
        size_t slack = g.balloon_slack[dev] + released;
        if (slack >= size) {
            slack -= size;
        } else {
            size_t need = size - slack, have = g.balloon_bytes[dev];
            size_t got = shim_balloon_shrink_locked(dev, have > need ? have - need : 0);
            slack = got > need ? got - need : 0;
        }
        g.balloon_slack[dev] = slack;
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

/* After bytes of `dev` were given back: the balloon is filled again up to limit - in use; memory
 * another process took meanwhile is no error (said with VRAM_LOG=1). */
void shim_balloon_refill(int dev) {
    if (dev < 0 || !g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE) != 1) return;
    pthread_mutex_lock(&g.balloon_mu);
    int was_short = g.balloon_short[dev];
    CUresult r = shim_balloon_fill_locked(dev);
    if (r != CUDA_SUCCESS && !was_short && g.log) {   /* said when it starts falling short */
        char held[32], err[160];
        vram__format_bytes(held, sizeof held, g.balloon_bytes[dev]);
        shim_error_text(r, err, sizeof err);
        fprintf(stderr, "vram: preallocation on device %d could not take freed memory back (cuMemCreate: %s; "
                "another process may hold it): %s of the limit stay reserved, the rest is taken on demand\n",
                dev, err, held);
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

void shim_balloon_fit(int dev) {
    if (dev < 0 || !g.prealloc || __atomic_load_n(&g.balloon_state[dev], __ATOMIC_ACQUIRE) != 1) return;
    pthread_mutex_lock(&g.balloon_mu);
    size_t target = shim_balloon_target(dev);
    size_t released = shim_balloon_shrink_locked(dev, target);
    (void)shim_balloon_fill_locked(dev);   /* a raised limit: taken back as far as the card has room */
    if (released && g.log) {
        char freed[32];
        vram__format_bytes(freed, sizeof freed, released);
        fprintf(stderr, "vram: the limit of device %d moved: the preallocation gave %s back to the card\n", dev, freed);
    }
    pthread_mutex_unlock(&g.balloon_mu);
}

/* The bytes the balloon holds on `dev` (free to the program). */
size_t shim_balloon_bytes(int dev) {
    return __atomic_load_n(&g.balloon_bytes[dev], __ATOMIC_RELAXED);
}

