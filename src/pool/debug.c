/*
 * debug.c: the per-thread record of the locks a thread holds, for the assertions of debug.h (compiled
 * into debug builds only: VRAM_DEBUG; empty otherwise). A thread holds at most POOL_DEBUG_HELD locks at
 * once (every arena of a device, every thread cache and every shard of one arena, for vram_check and
 * the statistics): more is a failure of its own. No lock: each thread's record is its own.
 */
#include "pool/debug.h"

#ifdef VRAM_DEBUG
#include "pool/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_DEBUG_HELD 1024

typedef struct held_lock {
    const void *lock;
    int         rank;
} held_lock;

static _Thread_local held_lock held[POOL_DEBUG_HELD];
static _Thread_local int nheld;

void vram__pool_debug_fail(const char *file, int line, const char *rule) {
    fprintf(stderr, "vram: debug assertion failed at %s:%d: %s\n", file, line, rule);
    abort();
}

void vram__pool_debug_take(const void *l, int rank) {
    for (int i = 0; i < nheld; i++) {
        if (held[i].rank > rank) {
            vram__pool_debug_fail(__FILE__, __LINE__, "the lock order: a lock of a lower rank taken while one of a "
                                                "higher is held (arena, then a thread cache, then a shard)");
        }
        if (held[i].lock == l) vram__pool_debug_fail(__FILE__, __LINE__, "a lock taken twice by one thread");
    }
    if (nheld == POOL_DEBUG_HELD) vram__pool_debug_fail(__FILE__, __LINE__, "more locks held at once than recorded");
    held[nheld++] = (held_lock){l, rank};
}

void vram__pool_debug_give(const void *l) {
    for (int i = nheld - 1; i >= 0; i--) {
        if (held[i].lock == l) {
            held[i] = held[--nheld];
            return;
        }
    }
    vram__pool_debug_fail(__FILE__, __LINE__, "a lock given back by a thread that does not hold it");
}

int vram__pool_debug_holds(const void *l) {
    for (int i = 0; i < nheld; i++) {
        if (held[i].lock == l) return 1;
    }
    return 0;
}

void vram__pool_debug_fill(const pool_arena *p, const pool_chunk *c, int byte) {
    size_t n = c->size < POOL_FILL_BYTES ? c->size : POOL_FILL_BYTES;
    const vram__backend *be = p->cfg.backend;
    if (be == NULL || strcmp(be->name, "sim") != 0 || c->asleep) return;   /* (the host's addresses: sim's) */
    if (c->region->kind == REGION_VMM && pool_vmm_unmapped(&c->region->vmm, c->addr, n) != 0) return;
    memset((void *)(uintptr_t)c->addr, byte, n);
}
#endif
