/*
 * overflow.c: a logical device's overflow to host memory (overflow.h). With the allocator option
 * overflow:host, a request that no arena can serve (the limit, a live limit, a limit set from
 * outside, or the card itself refused) gets host memory mapped into the device's address space from
 * the backend (overflow_alloc: VMM with a host location, else pinned mapped memory), so that the
 * program's kernels still run, reading it over the bus, instead of the program failing. Each block
 * is one backend allocation of its own, given back at its free: host memory is held only while a
 * block lives in it. Nothing moves a live block: a block that is never freed stays in host memory
 * for good; a program that frees and allocates again (a training step) gets device memory again
 * as soon as the device has room, since every request tries the arenas first.
 *
 * Invariants: bytes == the host bytes of the live blocks and of those whose free waits for a
 * capture to end (`late`), never above cap; blocks == the live blocks (the table's count). Lock:
 * `lock` (a mutex: the backend's calls are slow anyway) guards everything; no arena lock is held
 * when it is taken, and the backend is called under it (an event sync included: frees of host
 * memory wait for the GPU). A process in the ledger publishes the card's overflow bytes under it
 * (the member's mutex, then the ledger's lock: common/ledger_member.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ledger_member.h"
#include "pool/overflow.h"
#include "pool/ptr_map.h"

typedef struct ovf_block {
    pool_chunk       c;          /* addr; size: the host bytes held; req: the bytes asked for; stream: the
                                    stream-ordered request's (NULL: a plain one). First: the table's entry */
    void           **uses;       /* other streams it is used on (vram_record_stream) */
    int              nuses, capuses;
    void            *free_stream;   /* late: the stream its free was ordered on (or NULL) */
    int              free_ordered;  /* late: 1 when that free was stream-ordered */
    struct ovf_block *next_late;
} ovf_block;

struct pool_overflow {
    pthread_mutex_t      lock;
    const vram__backend *backend;
    int                  dev;
    size_t               cap;
    char                 name[64];
    pool_shared         *shared;
    vram__card_budget   *budget;     /* the card's (its overflow bytes published to the ledger), or NULL */
    ptr_map              table;      /* live blocks by address */
    ovf_block           *late;       /* freed during a capture: released after it */
    size_t               bytes, peak;
    uint64_t             served;
    vram_stat            st_bytes, st_blocks;   /* vram_get_allocator_stats' figures (their own peaks and
                                                   accumulations: reset by the stats' resets, not `peak`) */
};

vram_status vram__overflow_create(const vram__pool_config *cfg, pool_shared *shared, pool_overflow **out) {
    pool_overflow *o = calloc(1, sizeof *o);
    if (o == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for the overflow's record");
    pthread_mutex_init(&o->lock, NULL);
    o->backend = cfg->backend;
    o->dev = cfg->dev;
    o->cap = cfg->overflow_max;
    o->shared = shared;
    o->budget = cfg->budget;
    snprintf(o->name, sizeof o->name, "%s", cfg->name);
    *out = o;
    return VRAM_OK;
}

/* Waits until the streams a freed block may still be used on are done: the free's own (when it was
 * stream-ordered) and its other uses; VRAM_OK or the driver's refusal (then nothing changed). */
static vram_status wait_streams(pool_overflow *o, ovf_block *b, int ordered, void *stream) {
    for (int i = -1; i < b->nuses; i++) {
        if (i < 0 && !ordered) continue;
        void *s = i < 0 ? stream : b->uses[i], *ev = NULL;
        vram_status st = o->backend->event_record(o->dev, s, &ev);
        if (st == VRAM_OK) {
            st = o->backend->event_sync(o->dev, ev);
            o->backend->event_destroy(o->dev, ev);
        }
        if (st != VRAM_OK) return st;
    }
    return VRAM_OK;
}

/* The card's overflow bytes moved by `delta` (lock held): a process in the ledger publishes them, so
 * that vram top shows them (the card's pools together: several logical devices may share it). */
static void publish_bytes(pool_overflow *o, long long delta) {
    vram__card_budget *b = o->budget;
    if (b == NULL || b->member == NULL) return;
    size_t now = delta >= 0 ? atomic_fetch_add(&b->overflow, (size_t)delta) + (size_t)delta
                            : atomic_fetch_sub(&b->overflow, (size_t)-delta) - (size_t)-delta;
    vram__ledger_member_overflow(b->member, b->member_card, now);
}

/* The allocator statistics' figures after a block of `bytes` came (+1) or went (-1) (lock held). */
static void stat_moved(pool_overflow *o, int dir, size_t bytes) {
    vram_stat *s[2] = { &o->st_bytes, &o->st_blocks };
    int64_t by[2] = { (int64_t)bytes, 1 };
    for (int i = 0; i < 2; i++) {
        s[i]->current += dir * by[i];
        if (dir > 0) s[i]->allocated += by[i];
        else s[i]->freed += by[i];
        if (s[i]->current > s[i]->peak) s[i]->peak = s[i]->current;
    }
}

/* Gives block b's host memory back (lock held; b out of the table already): VRAM_OK, or the
 * driver's refusal, b unchanged. */
static vram_status release_block(pool_overflow *o, ovf_block *b) {
    vram_status s = o->backend->overflow_free(o->dev, b->c.addr, b->c.size);
    if (s != VRAM_OK) return s;
    o->bytes -= b->c.size;
    publish_bytes(o, -(long long)b->c.size);
    stat_moved(o, -1, b->c.size);
    free(b->uses);
    free(b);
    return VRAM_OK;
}

/* The frees that waited for a capture, now that none is underway (lock held): each as its free
 * asked; one the driver refuses stays waiting, counted. */
static void release_late(pool_overflow *o) {
    if (o->late == NULL || atomic_load(&o->shared->captures) > 0) return;
    for (ovf_block **link = &o->late; *link != NULL;) {
        ovf_block *b = *link;
        *link = b->next_late;
        if (wait_streams(o, b, b->free_ordered, b->free_stream) != VRAM_OK || release_block(o, b) != VRAM_OK) {
            b->next_late = *link;                /* kept: tried again at the next call */
            *link = b;
            link = &b->next_late;
        }
    }
}

vram_status vram__overflow_destroy(pool_overflow *o) {
    if (o == NULL) return VRAM_OK;
    vram_status refusal = VRAM_OK;
    pthread_mutex_lock(&o->lock);
    for (ovf_block *b = o->late; b != NULL;) {   /* (at shutdown no capture is underway) */
        ovf_block *next = b->next_late;
        (void)wait_streams(o, b, b->free_ordered, b->free_stream);
        vram_status s = o->backend->overflow_free(o->dev, b->c.addr, b->c.size);
        if (refusal == VRAM_OK) refusal = s;
        free(b->uses);
        free(b);
        b = next;
    }
    pthread_mutex_unlock(&o->lock);
    vram__ptr_map_destroy(&o->table);
    pthread_mutex_destroy(&o->lock);
    free(o);
    return refusal;
}

size_t vram__overflow_live(pool_overflow *o, size_t *bytes) {
    pthread_mutex_lock(&o->lock);
    size_t n = o->table.count, late = 0;
    for (const ovf_block *b = o->late; b != NULL; b = b->next_late) late += b->c.size;
    *bytes = o->bytes - late;
    pthread_mutex_unlock(&o->lock);
    return n;
}

/* The pool's span takes [lo, hi) in (relaxed, as backing.c's regions: a free of the block comes
 * through the program's own synchronization after this). */
static void span_widen(pool_shared *s, uint64_t lo, uint64_t hi) {
    uint64_t cur = atomic_load_explicit(&s->span_lo, memory_order_relaxed);
    while (lo < cur && !atomic_compare_exchange_weak_explicit(&s->span_lo, &cur, lo, memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
    cur = atomic_load_explicit(&s->span_hi, memory_order_relaxed);
    while (hi > cur && !atomic_compare_exchange_weak_explicit(&s->span_hi, &cur, hi, memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
}

static vram_status cap_refusal(pool_overflow *o, size_t held) {
    return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory (overflow:host) cannot serve it either: its cap "
                      "overflow_max_mb of %zu bytes is reached (%zu bytes in host memory now, %zu more needed)",
                      o->cap, o->bytes, held);
}

vram_status vram__overflow_alloc(pool_overflow *o, size_t size, void *stream, void **ptr) {
    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);
    pthread_mutex_lock(&o->lock);
    release_late(o);
    vram_status s = VRAM_OK;
    uint64_t addr = 0;
    size_t held = 0;
    ovf_block *b = NULL;
    if (rounded < size || rounded > o->cap || o->bytes > o->cap - rounded) {
        s = cap_refusal(o, rounded);
    } else if ((b = calloc(1, sizeof *b)) == NULL) {
        s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an overflow block's record");
    } else if ((s = o->backend->overflow_alloc(o->dev, rounded, &addr, &held)) != VRAM_OK) {
        s = vram__fail_wrap(VRAM_ERR_OUT_OF_MEMORY, "host memory (overflow:host) cannot serve it either");
    } else if (held > o->cap || o->bytes > o->cap - held) {   /* the driver's unit took it over the cap */
        (void)o->backend->overflow_free(o->dev, addr, held);
        s = cap_refusal(o, held);
    } else {
        b->c.addr = addr;
        b->c.size = held;
        b->c.req = size;
        b->c.stream = stream;
        b->c.state = CHUNK_USED;
        if (vram__ptr_map_insert(&o->table, addr, &b->c) != 0) {
            (void)o->backend->overflow_free(o->dev, addr, held);
            s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for the overflow's table");
        } else {
            span_widen(o->shared, addr, addr + held);
            o->bytes += held;
            publish_bytes(o, (long long)held);
            stat_moved(o, 1, held);
            if (o->bytes > o->peak) o->peak = o->bytes;
            o->served++;
            *ptr = (void *)(uintptr_t)addr;
            b = NULL;                            /* (kept) */
        }
    }
    free(b);
    pthread_mutex_unlock(&o->lock);
    return s;
}

vram_status vram__overflow_free(pool_overflow *o, void *ptr, vram__free_req *req) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    pthread_mutex_lock(&o->lock);
    release_late(o);
    ovf_block *b = (ovf_block *)vram__ptr_map_get(&o->table, addr);
    if (b == NULL) {
        req->owned = 0;
        pthread_mutex_unlock(&o->lock);
        return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): not a live block of %s", vram__pool_free_name(req->how),
                          ptr, o->name);
    }
    req->owned = 1;
    int ordered = req->how != VRAM_POOL_FREE_NOW;
    void *stream = req->how == VRAM_POOL_FREE_ALLOC_STREAM ? b->c.stream : req->stream;
    vram_status s = VRAM_OK;
    if ((ordered || b->nuses > 0) && atomic_load(&o->shared->captures) > 0) {
        vram__ptr_map_take(&o->table, addr);           /* the GPU may still use it: released after the capture */
        b->free_ordered = ordered;
        b->free_stream = stream;
        b->next_late = o->late;
        o->late = b;
    } else if ((s = wait_streams(o, b, ordered, stream)) != VRAM_OK) {
        s = vram__fail_wrap(s, "%s(%p): waiting for the streams of a block in host memory",
                            vram__pool_free_name(req->how), ptr);
    } else {
        vram__ptr_map_take(&o->table, addr);
        s = release_block(o, b);
        if (s != VRAM_OK) {                      /* the driver still holds it: live, counted, as it was */
            vram__ptr_map_insert(&o->table, addr, &b->c);   /* (its bucket was just freed: no allocation) */
            s = vram__fail_wrap(s, "%s(%p)", vram__pool_free_name(req->how), ptr);
        }
    }
    pthread_mutex_unlock(&o->lock);
    return s;
}

vram_status vram__overflow_record_stream(pool_overflow *o, void *ptr, void *stream, int *owned) {
    pthread_mutex_lock(&o->lock);
    ovf_block *b = (ovf_block *)vram__ptr_map_get(&o->table, (uint64_t)(uintptr_t)ptr);
    vram_status s = VRAM_OK;
    *owned = b != NULL;
    if (b == NULL) {
        s = vram__fail(VRAM_ERR_INVALID_POINTER, "vram_record_stream(%p): not a live block of %s", ptr, o->name);
    } else {
        int known = 0;
        for (int i = 0; i < b->nuses; i++) known |= b->uses[i] == stream;
        if (!known && b->nuses == b->capuses) {
            int cap = b->capuses ? 2 * b->capuses : 4;
            void **g = realloc(b->uses, (size_t)cap * sizeof *g);
            if (g == NULL) s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a block's streams");
            else b->uses = g, b->capuses = cap;
        }
        if (!known && s == VRAM_OK) b->uses[b->nuses++] = stream;
    }
    pthread_mutex_unlock(&o->lock);
    return s;
}

int vram__overflow_owns(pool_overflow *o, const void *ptr) {
    pthread_mutex_lock(&o->lock);
    int owns = vram__ptr_map_get(&o->table, (uint64_t)(uintptr_t)ptr) != NULL;
    pthread_mutex_unlock(&o->lock);
    return owns;
}

void vram__overflow_info(pool_overflow *o, vram_memory_info *info) {
    pthread_mutex_lock(&o->lock);
    release_late(o);
    info->overflow_bytes = o->bytes;
    info->overflow_peak = o->peak;
    info->overflow_blocks = o->table.count;
    info->num_overflows = o->served;
    info->overflow_max = o->cap;
    pthread_mutex_unlock(&o->lock);
}

void vram__overflow_stats(pool_overflow *o, vram_allocator_stats *stats) {
    pthread_mutex_lock(&o->lock);
    stats->overflow_bytes = o->st_bytes;
    stats->overflow_blocks = o->st_blocks;
    pthread_mutex_unlock(&o->lock);
}

void vram__overflow_reset_stats(pool_overflow *o, int peaks) {
    pthread_mutex_lock(&o->lock);
    vram_stat *s[2] = { &o->st_bytes, &o->st_blocks };
    for (int i = 0; i < 2; i++) {
        if (peaks) s[i]->peak = s[i]->current;
        else s[i]->allocated = s[i]->freed = 0;
    }
    pthread_mutex_unlock(&o->lock);
}

vram_status vram__overflow_check(pool_overflow *o) {
    pthread_mutex_lock(&o->lock);
    size_t bytes = 0, n = 0;
    for (size_t i = 0; o->table.buckets != NULL && i <= o->table.mask; i++) {
        const pool_chunk *c = o->table.buckets[i].chunk;
        if (o->table.buckets[i].addr == 0) continue;
        n++;
        bytes += c->size;
        if (c->addr != o->table.buckets[i].addr || c->size < c->req || c->state != CHUNK_USED) {
            pthread_mutex_unlock(&o->lock);
            return vram__fail(VRAM_ERR_INTERNAL, "vram_check(%s): the overflow block at 0x%llx is broken", o->name,
                              (unsigned long long)o->table.buckets[i].addr);
        }
    }
    for (const ovf_block *b = o->late; b != NULL; b = b->next_late) bytes += b->c.size;
    vram_status s = VRAM_OK;
    if (n != o->table.count || bytes != o->bytes || o->bytes > o->cap || o->peak < o->bytes) {
        s = vram__fail(VRAM_ERR_INTERNAL, "vram_check(%s): the overflow counts %zu blocks and %zu bytes (cap %zu, "
                       "peak %zu), its blocks are %zu with %zu bytes", o->name, o->table.count, o->bytes, o->cap,
                       o->peak, n, bytes);
    }
    pthread_mutex_unlock(&o->lock);
    return s;
}
