/*
 * sim_overflow.c: the simulated card's host memory for overflow (backend.h's overflow_alloc and
 * overflow_free; the allocator option overflow:host). Simulated device memory is host memory
 * already, so what matters here is the accounting: overflow memory is an anonymous mapping of its
 * own, counted per device in host bytes apart from the card's used bytes, which it never touches,
 * so that a test sees the card's memory did not grow (mem_info) while the host's did
 * (vram__sim_overflow_bytes). It holds exactly the size asked for (the pool asks in 256-byte units).
 *
 * State: the table of live overflow allocations (address -> record) and the bytes per device, under
 * vram__sim_lock like the rest of the simulated driver; freed at close (vram__sim_overflow_reset_locked).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/sim_hooks.h"
#include "backend/sim_internal.h"

typedef struct sim_host_block {
    int    dev;
    size_t size;
} sim_host_block;

static sim_table ovf_blocks;                    /* address -> sim_host_block */
static size_t    ovf_bytes[SIM_MAX_CARDS];      /* host bytes each device's overflow holds */
static int       ovf_failures;                  /* overflow allocations still to fail (the hook) */

static void drop_block(uint64_t key, void *val) {
    sim_host_block *b = val;
    munmap((void *)(uintptr_t)key, b->size);
    free(b);
}

void vram__sim_overflow_reset_locked(void) {
    vram__sim_tab_clear(&ovf_blocks, drop_block);
    memset(ovf_bytes, 0, sizeof ovf_bytes);
    ovf_failures = 0;
}

static vram_status overflow_alloc_locked(int dev, size_t size, uint64_t *dptr, size_t *held) {
    char call[80];
    snprintf(call, sizeof call, "cuMemCreate(%zu bytes, host location)", size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (size == 0 || dptr == NULL || held == NULL)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, size ? "NULL output" : "size 0");
    if (ovf_failures > 0) {
        ovf_failures--;
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: the host has no more pinned memory");
    }
    sim_host_block *b = malloc(sizeof *b);
    if (b == NULL || vram__sim_tab_reserve(&ovf_blocks) != 0) {
        free(b);
        return vram__sim_host_oom(call, dev);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(b);
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "simulated: host mmap: %s", strerror(errno));
    }
    b->dev = dev;
    b->size = size;
    vram__sim_tab_put(&ovf_blocks, (uint64_t)(uintptr_t)p, b);
    ovf_bytes[dev] += size;
    SIM_COUNT(overflow_alloc);
    *dptr = (uint64_t)(uintptr_t)p;
    *held = size;
    return VRAM_OK;
}

vram_status vram__sim_overflow_alloc(int dev, size_t size, uint64_t *dptr, size_t *held) {
    SIM_LOCKED(overflow_alloc_locked(dev, size, dptr, held));
}

static vram_status overflow_free_locked(int dev, uint64_t dptr, size_t held) {
    char call[80];
    snprintf(call, sizeof call, "cuMemRelease(host location 0x%llx)", (unsigned long long)dptr);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_host_block *b = vram__sim_tab_get(&ovf_blocks, dptr);
    if (b == NULL || b->dev != dev || b->size != held)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "not an address overflow_alloc returned on this "
                        "device, or not its size");
    if (munmap((void *)(uintptr_t)dptr, b->size) != 0)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EUNKNOWN, "simulated: host munmap: %s", strerror(errno));
    ovf_bytes[dev] -= b->size;
    vram__sim_tab_del(&ovf_blocks, dptr);
    free(b);
    SIM_COUNT(overflow_free);
    return VRAM_OK;
}

vram_status vram__sim_overflow_free(int dev, uint64_t dptr, size_t held) {
    SIM_LOCKED(overflow_free_locked(dev, dptr, held));
}

size_t vram__sim_overflow_bytes(int dev) {
    pthread_mutex_lock(&vram__sim_lock);
    size_t n = dev >= 0 && dev < SIM_MAX_CARDS ? ovf_bytes[dev] : 0;
    pthread_mutex_unlock(&vram__sim_lock);
    return n;
}

void vram__sim_fail_overflow(int n) {
    pthread_mutex_lock(&vram__sim_lock);
    ovf_failures = n > 0 ? n : 0;   /* (until the backend closes) */
    pthread_mutex_unlock(&vram__sim_lock);
}
