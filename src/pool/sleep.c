/*
 * sleep.c: one arena's sleep and wake (vram_sleep, vram_wake; arenas.c picks the arenas of a tag and
 * runs these over them: vram__arena_sleep_* and vram__arena_wake_* are the arena's entries for them,
 * declared in arena.h with the front door's, defined here since they settle nothing).
 *
 * An arena sleeps whole: a tag's arena holds only that tag's blocks in its own reserved range, so
 * every granule of it can go back without touching another tag's memory. Sleeping: the plan ends, the
 * thread caches go back, the frees in flight on streams and every stream a live block was allocated or
 * used on (vram_record_stream; the legacy default stream for vram_malloc's blocks) are waited for;
 * the live blocks are marked asleep; with offload their bytes are copied to one pinned host block, one
 * copy per run of blocks that touch each other (in address order: the copies are as few and as large
 * as the blocks allow, so they move bytes at a plain pinned copy's rate); then every extent is
 * unmapped and released (in use or not: the blocks' bytes are on the host or not needed, the cached
 * free memory goes too) and the budgets get their bytes back. The reserved range stays: the blocks keep
 * their addresses. A private pool in use (a captured CUDA graph uses the addresses of its free blocks
 * too) also keeps which granules were mapped, to map them all again.
 *
 * While asleep the arena serves no request (vram__arena_alloc refuses: its memory is off the card), frees
 * of its blocks are at once (no stream can use memory that is not there), a block asleep is never
 * parked in a thread cache nor taken from one, and vram_trim and idle release find nothing.
 *
 * Waking is in steps so that several arenas wake all or nothing (arenas.c): plan (the granules under
 * the live blocks, and for a private pool in use those mapped at the sleep, less what is mapped),
 * budget (the limit and the card's budget take them at once), map (new extents, given back if the
 * driver refuses one), copy (each run's blocks still live, from the host block), done (marks cleared,
 * the host block kept for the next sleep: pinning memory costs more than copying it, so an RL loop's
 * sleeps after the first copy at the bus's rate; vram_trim and the arena's end give it back). Any
 * failure undoes what the steps took: the arena stays asleep as it was.
 *
 * Invariants: asleep != 0 exactly while `sleep.state` holds the record of a sleep; then every USED chunk is
 * marked asleep, none is parked, and record->bytes is their size; a chunk marked asleep is USED. A
 * block's bytes are at host + its run's host_off + its offset in the run. sleep.host_kept is set only while
 * the arena is awake (a sleep takes it or frees it). Everything here runs under
 * the arena lock; the marks are written under the shards' locks too (thread_cache.c reads them
 * under those).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pointer_table.h"
#include "pool/backing.h"
#include "pool/plan_arena.h"
#include "pool/split_merge.h"
#include "pool/stream_order.h"

typedef struct sleep_run {
    uint64_t addr;        /* blocks that touch each other: [addr, addr + size) */
    size_t   size;
    size_t   host_off;    /* their bytes in the host block (offload) */
} sleep_run;

typedef struct pool_sleep {
    int        offload;
    void      *host;        /* the pinned host block holding the blocks' bytes (offload, some blocks) */
    size_t     host_bytes;
    sleep_run *runs;
    size_t     nruns;
    size_t     bytes;       /* bytes of the blocks asleep (live) */
    uint64_t  *keep;        /* a private pool in use: the granules mapped at the sleep; else NULL */
    uint64_t  *want;        /* during a wake: the granules to map, and their bytes */
    size_t     need;
    int        taken;       /* the budgets hold `need` for this wake */
} pool_sleep;

/* ---- marks ------------------------------------------------------------------------------------ */

/* Sets (1) or clears (0) the mark of every USED chunk, under its shard's lock when the shards are
 * shared (a cache's take or park reads it there). */
static void mark_all_locked(pool_arena *p, uint8_t asleep) {
    POOL_ASSERT_LOCKED(p);
    int shared = shards_shared(p);
    for (pool_region *r = p->regions; r != NULL; r = r->next) {
        for (pool_chunk *c = r->first; c != NULL; c = c->next) {
            if (c->state != CHUNK_USED || c->asleep == asleep) continue;
            pool_shard *sh = shard_hold(p, c->addr, shared);
            c->asleep = asleep;
            shard_open(sh, shared);
        }
    }
}

/* Clears the marks of chunks that are not USED (blocks parked when the marks were set, freed since). */
static void unmark_free_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    for (pool_region *r = p->regions; r != NULL; r = r->next) {
        for (pool_chunk *c = r->first; c != NULL; c = c->next) {
            if (c->state != CHUNK_USED) c->asleep = 0;
        }
    }
}

/* ---- going to sleep --------------------------------------------------------------------------- */

vram_status vram__arena_sleep_check_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (p->asleep) return VRAM_OK;                       /* (it stays as it is) */
    if (!p->cfg.growth) {
        return vram__fail(VRAM_ERR_UNSUPPORTED, "%s preallocates its memory (memory growth is off): its blocks lie in "
                          "one region of cuMemAlloc, whose addresses cannot be kept without its memory; turn memory "
                          "growth on (vram_set_memory_growth, VRAM_FORCE_ALLOW_GROWTH=true) to let it sleep",
                          p->cfg.name);
    }
    if (p->vmm == NULL) {
        return vram__fail(VRAM_ERR_UNSUPPORTED, "%s grows without virtual memory management (allocator option "
                          "vmm:false, or a driver or card without it): its blocks lie in regions of cuMemAlloc, whose "
                          "addresses cannot be kept without their memory", p->cfg.name);
    }
    if (capture_underway(p)) {
        return vram__fail(VRAM_ERR_CONFLICT, "a CUDA-graph capture is underway on %s (vram_capture_begin): its "
                          "memory cannot go while the capture records; sleep once it has ended", p->cfg.name);
    }
    vram__pool_flush_caches_locked(p);                         /* (a block parked in a plain region is free) */
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        if (r->kind != REGION_PLAIN) continue;
        for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
            if (c->state == CHUNK_FREE && !p->pinned) continue;
            return vram__fail(VRAM_ERR_UNSUPPORTED, "%s holds a %s in a plain region at %p (cuMemAlloc: growth's "
                              "last piece below the limit, less than a granule), whose addresses cannot be kept "
                              "without its memory; free what lies there to let it sleep", p->cfg.name,
                              c->state == CHUNK_FREE ? "private pool's free block" : "block",
                              (void *)(uintptr_t)c->addr);
        }
    }
    int64_t shared_at = vram__pool_vmm_exported(&p->vmm->vmm);
    if (shared_at >= 0) {
        return vram__fail(VRAM_ERR_CONFLICT, "memory of %s at %p was shared with another process (vram_ipc_export): "
                          "the receivers map it, and it cannot leave the card under them; free the blocks shared "
                          "there and vram_trim before sleeping", p->cfg.name,
                          (void *)(uintptr_t)(p->vmm->base + (uint64_t)shared_at));
    }
    return VRAM_OK;
}

/* Adds `stream` to the set s[0 .. *n) (capacity *cap); -1 without host memory. */
static int stream_add(void ***s, size_t *n, size_t *cap, void *stream) {
    for (size_t i = 0; i < *n; i++) {
        if ((*s)[i] == stream) return 0;
    }
    if (*n == *cap) {
        size_t more = *cap ? 2 * *cap : 8;
        void **grown = realloc(*s, more * sizeof *grown);
        if (grown == NULL) return -1;
        *s = grown;
        *cap = more;
    }
    (*s)[(*n)++] = stream;
    return 0;
}

/* Waits for every stream a live block was allocated on (NULL: vram_malloc's, the legacy default
 * stream) or used on (vram_record_stream), and for the frees in flight. */
static vram_status wait_streams_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    if (p->order.unrecorded > 0) vram__pending_record_locked(p);
    if (p->order.pending != NULL) vram__pending_reap_locked(p, 1);
    if (p->order.deferred != NULL) vram__deferred_reap_locked(p, 1);
    if (p->order.pending != NULL || p->order.deferred != NULL || vram__solo_fence_locked(p) != 0) {
        return vram__fail_wrap(VRAM_ERR_DRIVER, "the frees in flight on streams of %s could not be waited for",
                               p->cfg.name);
    }
    void **streams = NULL;
    size_t n = 0, cap = 0;
    int full = 0;
    for (const pool_region *r = p->regions; r != NULL && !full; r = r->next) {
        for (const pool_chunk *c = r->first; c != NULL && !full; c = c->next) {
            if (c->state != CHUNK_USED) continue;
            full = stream_add(&streams, &n, &cap, c->stream) != 0;
            for (int i = 0; c->uses != NULL && i < c->uses->n && !full; i++) {
                full = stream_add(&streams, &n, &cap, c->uses->use[i].stream) != 0;
            }
        }
    }
    vram_status s = full ? vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for the streams to wait for") : VRAM_OK;
    for (size_t i = 0; i < n && s == VRAM_OK; i++) {
        void *ev = NULL;
        s = be->event_record(p->cfg.dev, streams[i], &ev);
        if (s == VRAM_OK) {
            s = be->event_sync(p->cfg.dev, ev);
            be->event_destroy(p->cfg.dev, ev);
        }
        if (s != VRAM_OK) s = vram__fail_wrap(s, "waiting for stream %p, which blocks of %s were used on", streams[i],
                                              p->cfg.name);
    }
    free(streams);
    return s;
}

/* The runs of live blocks that touch each other, in address order (the VMM region's: the check let
 * no block live in a plain region); *bytes their sum. NULL with *n 0 when there is no block; NULL with
 * *n 1 without host memory. */
static sleep_run *live_runs_locked(pool_arena *p, size_t *n, size_t *bytes) {
    POOL_ASSERT_LOCKED(p);
    sleep_run *runs = NULL;
    size_t cap = 0;
    *n = *bytes = 0;
    for (const pool_chunk *c = p->vmm->first; c != NULL; c = c->next) {
        if (c->state != CHUNK_USED) continue;
        *bytes += c->size;
        if (*n > 0 && runs[*n - 1].addr + runs[*n - 1].size == c->addr) {
            runs[*n - 1].size += c->size;
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            sleep_run *grown = realloc(runs, cap * sizeof *grown);
            if (grown == NULL) {
                free(runs);
                *n = 1;
                return NULL;
            }
            runs = grown;
        }
        runs[(*n)++] = (sleep_run){c->addr, c->size, *bytes - c->size};
    }
    return runs;
}

/* Copies every run's bytes into a pinned host block (rec->host): the one kept from the last wake when
 * it is large enough (pinning memory costs more than copying it: an RL loop's sleeps after the first
 * copy at the bus's rate), else a new one (the one kept, too small, goes first). */
static vram_status offload_locked(pool_arena *p, pool_sleep *rec) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    vram_status s = VRAM_OK;
    if (p->sleep.host_kept != NULL && p->sleep.host_kept_bytes >= rec->bytes) {
        rec->host = p->sleep.host_kept;
        rec->host_bytes = p->sleep.host_kept_bytes;
        p->sleep.host_kept = NULL;
        p->sleep.host_kept_bytes = 0;
    } else {
        if (p->sleep.host_kept != NULL) (void)be->host_free(p->cfg.dev, p->sleep.host_kept);   /* (a refusal: lost) */
        p->sleep.host_kept = NULL;
        p->sleep.host_kept_bytes = 0;
        s = be->host_alloc(p->cfg.dev, rec->bytes, &rec->host);
        if (s != VRAM_OK) {
            rec->host = NULL;
            return vram__fail_wrap(s, "pinned host memory for the %zu bytes of %s's blocks%s", rec->bytes,
                                   p->cfg.name, s == VRAM_ERR_UNSUPPORTED ? " (VRAM_SLEEP_DISCARD needs none)" : "");
        }
        rec->host_bytes = rec->bytes;
    }
    for (size_t i = 0; i < rec->nruns && s == VRAM_OK; i++) {
        const sleep_run *r = &rec->runs[i];
        s = be->copy_to_host(p->cfg.dev, (char *)rec->host + r->host_off, r->addr, r->size);
    }
    if (s != VRAM_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", vram_last_error());
        (void)be->host_free(p->cfg.dev, rec->host);
        rec->host = NULL;
        rec->host_bytes = 0;
        return vram__fail(s, "copying the blocks of %s to host memory: %s", p->cfg.name, why);
    }
    return VRAM_OK;
}

static void record_free(pool_arena *p, pool_sleep *rec) {
    if (rec == NULL) return;
    if (rec->host != NULL) (void)p->cfg.backend->host_free(p->cfg.dev, rec->host);   /* (a refusal: lost) */
    free(rec->runs);
    free(rec->keep);
    free(rec->want);
    free(rec);
}

vram_status vram__arena_sleep_locked(pool_arena *p, int offload) {
    POOL_ASSERT_LOCKED(p);
    if (p->asleep) return VRAM_OK;
    if (p->plan.planner != NULL) vram__plan_arena_end_locked(p);    /* (leaves slot mode: every block a chunk) */
    vram__pool_flush_caches_locked(p);
    vram_status s = wait_streams_locked(p);
    if (s != VRAM_OK) return s;
    mark_all_locked(p, 1);            /* from here no live block can be parked nor taken from a cache ... */
    vram__pool_flush_caches_locked(p);      /* ... and those parked meanwhile go back */
    unmark_free_locked(p);
    pool_sleep *rec = calloc(1, sizeof *rec);
    size_t nruns = 0;
    if (rec != NULL) rec->runs = live_runs_locked(p, &nruns, &rec->bytes);
    if (rec != NULL && p->pinned) rec->keep = vram__pool_vmm_bits_mapped(&p->vmm->vmm);
    if (rec == NULL || (rec->runs == NULL && nruns > 0) || (p->pinned && rec->keep == NULL)) {
        s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for the record of %s's sleep", p->cfg.name);
    }
    if (s == VRAM_OK) {
        rec->nruns = nruns;
        rec->offload = offload;
        if (offload && rec->bytes > 0) s = offload_locked(p, rec);
    }
    if (s != VRAM_OK) {                   /* nothing changed: the blocks are awake, their memory mapped */
        mark_all_locked(p, 0);
        record_free(p, rec);
        return s;
    }
    pool_vmm_change d;
    vram__pool_vmm_unmap_all(&p->vmm->vmm, &d);
    vram__vmm_note_locked(p, &d);
    vram_status refused = d.refused;
    vram_status plain = vram__arena_trim_plain_locked(p);        /* empty plain regions (none in a private pool in use) */
    if (refused == VRAM_OK) refused = plain;
    p->asleep = 1;
    p->sleep.state = rec;
    if (refused != VRAM_OK) {
        return vram__fail_wrap(refused, "%s sleeps, but the driver kept some of its memory (still counted)",
                               p->cfg.name);
    }
    return VRAM_OK;
}

/* ---- asleep ------------------------------------------------------------------------------------ */

vram_status vram__arena_asleep_refusal(const pool_arena *p, size_t size) {
    const char *tag = vram__tag_name(p->tag);
    char whose[128];
    if (tag != NULL) snprintf(whose, sizeof whose, "the memory of the tag '%s'", tag);
    else snprintf(whose, sizeof whose, "%s", "the memory of the blocks without a tag");
    return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "out of memory on %s: cannot allocate %zu bytes: %s is asleep "
                      "(vram_sleep), off the card until vram_wake brings it back", p->cfg.name, size, whose);
}

void vram__sleep_info_locked(const pool_arena *p, vram_memory_info *info) {
    POOL_ASSERT_LOCKED(p);
    info->asleep_bytes = p->asleep ? p->sleep.state->bytes : 0;
    info->asleep_host_bytes = p->asleep && p->sleep.state->host != NULL ? p->sleep.state->host_bytes : 0;
    info->host_kept_bytes = p->sleep.host_kept_bytes;
}

vram_status vram__arena_host_kept_free_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    void *host = p->sleep.host_kept;
    p->sleep.host_kept = NULL;
    p->sleep.host_kept_bytes = 0;
    vram_status s = host != NULL ? p->cfg.backend->host_free(p->cfg.dev, host) : VRAM_OK;
    return s != VRAM_OK ? vram__fail_wrap(s, "giving back the pinned host memory %s kept from a sleep", p->cfg.name)
                        : VRAM_OK;
}

void vram__sleep_free_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    pool_sleep *rec = p->sleep.state;
    if (p->plan.planner != NULL) (void)vram__plan_free_locked(p, c, 1);   /* (the detector's note; no plan is in force) */
    c->asleep = 0;
    free(c->uses);                     /* (no stream can use memory that is not there) */
    c->uses = NULL;
    rec->bytes -= c->size;
    vram__pool_release_used_locked(p, c);
    if (rec->bytes == 0 && rec->host != NULL) {   /* nothing left to bring back */
        (void)p->cfg.backend->host_free(p->cfg.dev, rec->host);
        rec->host = NULL;
        rec->host_bytes = 0;
    }
}

void vram__arena_sleep_drop(pool_arena *p) {
    record_free(p, p->sleep.state);
    p->sleep.state = NULL;
    p->asleep = 0;
}

const char *vram__sleep_check_marks_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if ((p->asleep != 0) != (p->sleep.state != NULL)) return "an arena asleep has no record of its sleep, or the reverse";
    size_t bytes = 0;
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        for (const pool_chunk *c = r->first; c != NULL; c = c->next) {
            if (c->asleep && (c->state != CHUNK_USED || !p->asleep)) return "a chunk marked asleep is no block asleep";
            if (c->state == CHUNK_USED && p->asleep && (!c->asleep || c->cached)) {
                return "a live block of an arena asleep is not marked asleep, or is parked";
            }
            if (c->asleep) bytes += c->size;
        }
    }
    if (p->asleep && bytes != p->sleep.state->bytes) return "the bytes asleep differ from the blocks marked asleep";
    if (p->asleep && p->sleep.state->host != NULL && p->sleep.state->host_bytes < p->sleep.state->bytes) {
        return "the host copy is smaller than the blocks asleep";
    }
    return NULL;
}

/* ---- waking ------------------------------------------------------------------------------------ */

vram_status vram__arena_wake_plan_locked(pool_arena *p, size_t *need) {
    POOL_ASSERT_LOCKED(p);
    pool_sleep *rec = p->sleep.state;
    pool_vmm *v = &p->vmm->vmm;
    size_t words = vram__pool_vmm_bit_words(v);
    *need = 0;
    rec->want = calloc(words, sizeof *rec->want);
    if (rec->want == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory to wake %s", p->cfg.name);
    for (const pool_chunk *c = p->vmm->first; c != NULL; c = c->next) {
        if (c->state == CHUNK_USED) vram__pool_vmm_bits_add(v, rec->want, c->addr, c->size);
    }
    if (rec->keep != NULL && p->pinned) {          /* a captured graph's addresses, free blocks' too */
        for (size_t w = 0; w < words; w++) rec->want[w] |= rec->keep[w];
    }
    rec->need = *need = vram__pool_vmm_bits_unmapped(v, rec->want);
    return VRAM_OK;
}

grow_result vram__arena_wake_budget_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    grow_result why = vram__arena_budget_take(p, p->sleep.state->need);
    p->sleep.state->taken = why == GROW_OK;
    return why;
}

/* With one-granule extents and block_extent (backing.c's load), a wake maps the whole granules of each
 * block of at least POOL_BLOCK_EXTENT_GRANULES granules in extents of block_extent bytes, its own: the
 * block keeps them busy while it lives and they go back whole, as a load's. Four blocks over 76
 * granules wake with 14 creates, not 76 (tests/test_sleep.c); what is left (the blocks' edge granules,
 * smaller blocks) goes granule by granule, as before. Everything it maps lies in rec->want (a block in
 * use): the undo gives it back with the rest. *d: what it changed. */
_Static_assert(POOL_BLOCK_EXTENT_GRANULES >= 2, "a block this large holds a whole granule");
static vram_status wake_map_blocks_locked(pool_arena *p, pool_vmm_change *d) {
    POOL_ASSERT_LOCKED(p);
    pool_vmm *v = &p->vmm->vmm;
    *d = (pool_vmm_change){0};
    if (p->block_extent == 0) return VRAM_OK;
    for (const pool_chunk *c = p->vmm->first; c != NULL; c = c->next) {
        if (c->state != CHUNK_USED || c->size < POOL_BLOCK_EXTENT_GRANULES * v->gran) continue;
        uint64_t lo = vram__round_up(c->addr, v->gran), hi = (c->addr + c->size) & ~(uint64_t)(v->gran - 1);
        pool_vmm_change one;                   /* (hi > lo: 2 granules or more hold a whole one) */
        vram_status s = vram__pool_vmm_acquire(v, lo, (size_t)(hi - lo), 0, p->block_extent, &one);
        pool_vmm_change_add(d, &one);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

vram_status vram__arena_wake_map_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_sleep *rec = p->sleep.state;
    pool_vmm_change d, rest = {0};
    vram_status s = wake_map_blocks_locked(p, &d);
    if (s == VRAM_OK) s = vram__pool_vmm_map_bits(&p->vmm->vmm, rec->want, &rest);
    pool_vmm_change_add(&d, &rest);
    if (d.mapped < rec->need) vram__arena_budget_give(p, rec->need - d.mapped);   /* (only after a refusal) */
    rec->need = d.mapped;
    vram__vmm_note_locked(p, &d);
    return s;
}

vram_status vram__arena_wake_copy_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    pool_sleep *rec = p->sleep.state;
    const vram__backend *be = p->cfg.backend;
    if (rec->host == NULL) return VRAM_OK;                   /* discarded, or no block left */
    const pool_chunk *c = p->vmm->first;
    for (size_t i = 0; i < rec->nruns; i++) {
        const sleep_run *r = &rec->runs[i];
        uint64_t end = r->addr + r->size;
        while (c != NULL && c->addr + c->size <= r->addr) c = c->next;
        while (c != NULL && c->addr < end) {                 /* the run's blocks still live, a copy each stretch */
            if (c->state != CHUNK_USED) {
                c = c->next;
                continue;
            }
            uint64_t lo = c->addr;
            while (c != NULL && c->addr < end && c->state == CHUNK_USED) c = c->next;
            uint64_t hi = c != NULL && c->addr < end ? c->addr : end;
            vram_status s = be->copy_to_device(p->cfg.dev, lo, (const char *)rec->host + r->host_off + (lo - r->addr),
                                               (size_t)(hi - lo));
            if (s != VRAM_OK) return vram__fail_wrap(s, "copying the blocks of %s back from host memory", p->cfg.name);
        }
    }
    return VRAM_OK;
}

void vram__arena_wake_undo_locked(pool_arena *p, int mapped) {
    POOL_ASSERT_LOCKED(p);
    pool_sleep *rec = p->sleep.state;
    if (mapped) {                       /* what the map made goes back (the budgets with it) */
        pool_vmm_change d;
        vram__pool_vmm_unmap_bits(&p->vmm->vmm, rec->want, &d);
        vram__vmm_note_locked(p, &d);
    } else if (rec->taken) {
        vram__arena_budget_give(p, rec->need);
    }
    rec->taken = 0;
    rec->need = 0;
    free(rec->want);
    rec->want = NULL;
}

void vram__arena_wake_done_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    mark_all_locked(p, 0);
    p->vmm->vmm.stale = 1;
    if (p->sleep.state->host != NULL && p->sleep.host_kept == NULL) {   /* kept for the next sleep (offload_locked) */
        p->sleep.host_kept = p->sleep.state->host;
        p->sleep.host_kept_bytes = p->sleep.state->host_bytes;
        p->sleep.state->host = NULL;
    }
    vram__arena_sleep_drop(p);
}
