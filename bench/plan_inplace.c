/*
 * bench/plan_inplace.c: what the repeating step's plan would hold on coarse extents if its zone were
 * placed in place, around the long-lived blocks where best fit left them, instead of beside them.
 *
 *   plan_inplace TRACE [CONF] [--check]     (CONF: allocator options, as VRAM_ALLOC_CONF; default none.
 *                                            The addresses best fit gives do not depend on extent_mb)
 *
 * Replays the trace through libvram on a simulated card (VRAM_BACKEND=sim; VRAM_SIM_DEVICES as set, else
 * 141GiB) with growth and CONF, reading vram_get_memory_info's plan_steps after every request. At the
 * request that begins the plan's first step (plan_steps 0 -> 1) it takes the memory map
 * (vram_get_segments): the blocks alive then that the trace frees only after the step's end (or never)
 * are the long-lived ones (weights, the optimizer's state), at the addresses best fit gave them; those in
 * growth's small zone (its own range, which a zone never takes) count as the small zone's mapped bytes.
 * The step is the trace's requests from there to the one that begins the second (plan_steps 1 -> 2: a
 * trace that ends before is refused); its blocks freed before their own request comes again are the
 * plan's (on the step's cycle, as src/pool/plan.c places them; sizes rounded to 512 bytes), the others
 * are counted apart.
 *
 * The plan's blocks are placed offline, largest first, each at the lowest address where no block
 * alive at the same time on the cycle lies, twice: beside the long-lived blocks (from zero, as the
 * library's zone is: its own range) and in place (no long-lived block under it either, addresses
 * from the lowest mapped address outside the small zone). For extents of 2, 16 and 64 MiB, prints one
 * JSON line each: the memory under them (an extent under any block, or under the beside-zone, stays
 * mapped; the small zone's mapped bytes added to both) over the step's most bytes live (the plan's
 * blocks at their peak plus the long-lived ones). An offline bound
 * for a design not built (docs/DESIGN.md, The repeating step): not what vram holds. --check verifies
 * that no two blocks alive together, nor a block and a long-lived one, overlap (O(blocks^2)).
 * Exits 1 when the trace cannot be read or replayed, or no plan reaches its second step.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "trace.h"
#include "vram.h"

typedef struct range {
    uint64_t lo, hi;
} range;

typedef struct cyc {            /* a planned block: alive over [b, e) on the cycle (e > cycle: wraps) */
    uint64_t size, off, b, e;
} cyc;

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "plan_inplace: out of host memory\n");
        exit(1);
    }
    return p;
}

static void fail(const char *what, vram_status s) {
    fprintf(stderr, "plan_inplace: %s: %s (%s)\n", what, vram_last_error(), vram_status_name(s));
    exit(1);
}

static int by_lo(const void *a, const void *b) {
    uint64_t x = ((const range *)a)->lo, y = ((const range *)b)->lo;
    return (x > y) - (x < y);
}

static int larger_first(const void *a, const void *b) {
    const cyc *x = *(cyc *const *)a, *y = *(cyc *const *)b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return (x->b > y->b) - (x->b < y->b);
}

/* Whether two planned blocks are alive together on the cycle. */
static int together(const cyc *x, const cyc *y, uint64_t cycle) {
    uint64_t xs[2][2] = {{x->b, x->e > cycle ? cycle : x->e}, {0, x->e > cycle ? x->e - cycle : 0}};
    uint64_t ys[2][2] = {{y->b, y->e > cycle ? cycle : y->e}, {0, y->e > cycle ? y->e - cycle : 0}};
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            if (xs[i][0] < xs[i][1] && ys[j][0] < ys[j][1] && xs[i][0] < ys[j][1] && ys[j][0] < xs[i][1]) return 1;
        }
    }
    return 0;
}

/* Places blk[0..n) largest first, each at the lowest address clear of the blocks alive with it and of
 * the long-lived ranges ob[0..nob); returns the top. */
static uint64_t place(cyc *blk, size_t n, uint64_t cycle, const range *ob, size_t nob) {
    cyc **order = xcalloc(n, sizeof *order);
    range *busy = xcalloc(n + nob, sizeof *busy);
    for (size_t i = 0; i < n; i++) order[i] = &blk[i];
    qsort(order, n, sizeof *order, larger_first);
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        cyc *x = order[i];
        size_t m = nob;
        if (nob > 0) memcpy(busy, ob, nob * sizeof *busy);
        for (size_t k = 0; k < i; k++) {
            if (together(order[k], x, cycle)) busy[m++] = (range){order[k]->off, order[k]->off + order[k]->size};
        }
        qsort(busy, m, sizeof *busy, by_lo);
        uint64_t off = 0;
        for (size_t k = 0; k < m && busy[k].lo < off + x->size; k++) {
            if (busy[k].hi > off) off = busy[k].hi;
        }
        x->off = off;
        if (off + x->size > top) top = off + x->size;
    }
    free(busy);
    free(order);
    return top;
}

static void check(const cyc *blk, size_t n, uint64_t cycle, const range *ob, size_t nob) {
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < nob; k++) {
            if (blk[i].off < ob[k].hi && ob[k].lo < blk[i].off + blk[i].size) {
                fprintf(stderr, "plan_inplace: block %zu placed over a long-lived block\n", i);
                exit(1);
            }
        }
        for (size_t j = i + 1; j < n; j++) {
            if (together(&blk[i], &blk[j], cycle) && blk[i].off < blk[j].off + blk[j].size &&
                blk[j].off < blk[i].off + blk[i].size) {
                fprintf(stderr, "plan_inplace: blocks %zu and %zu placed over each other\n", i, j);
                exit(1);
            }
        }
    }
}

/* Extents of `ext` bytes under the ranges r[0..n) (sorted by lo). */
static uint64_t extents_under(const range *r, size_t n, uint64_t ext) {
    uint64_t count = 0, next = 0;            /* the first extent not counted yet */
    for (size_t k = 0; k < n; k++) {
        if (r[k].hi <= r[k].lo) continue;
        uint64_t first = r[k].lo / ext, last = (r[k].hi - 1) / ext;
        if (first < next) first = next;
        if (last >= first) {
            count += last - first + 1;
            next = last + 1;
        }
    }
    return count;
}

static uint64_t plan_steps(void) {
    vram_memory_info info;
    vram_status s = vram_get_memory_info(0, &info);
    if (s != VRAM_OK) fail("vram_get_memory_info", s);
    return info.plan_steps;
}

/* The live blocks at the first step's start: their address by allocation number (0: not live or not
 * found), UINT64_MAX for one in growth's small zone (its own range at the region's start, which the
 * plan's zone never takes); the lowest mapped address outside the small zone in *origin, the small
 * zone's mapped bytes in *small. */
static void take_map(const trace *t, void *const *ptrs, const uint8_t *live, uint64_t *addr, uint64_t *origin,
                     uint64_t *small) {
    size_t nseg = 0, nblk = 0;
    vram_status s = vram_get_segments(0, NULL, 0, &nseg, NULL, 0, &nblk);
    if (s != VRAM_OK) fail("vram_get_segments", s);
    vram_segment_info *seg = xcalloc(nseg + 16, sizeof *seg);
    vram_block_info *blk = xcalloc(nblk + 256, sizeof *blk);
    if ((s = vram_get_segments(0, seg, nseg + 16, &nseg, blk, nblk + 256, &nblk)) != VRAM_OK) fail("vram_get_segments", s);
    *origin = UINT64_MAX;
    *small = 0;
    for (size_t k = 0; k < nseg; k++) {
        if (seg[k].expandable && seg[k].small) *small += seg[k].size;
        else if (seg[k].expandable && seg[k].address < *origin) *origin = seg[k].address;
    }
    range *by = xcalloc(nblk, sizeof *by);     /* allocated blocks by address: lo = address, hi = 1 when small */
    size_t m = 0;
    for (size_t k = 0; k < nseg; k++) {
        for (size_t j = seg[k].first_block; j < seg[k].first_block + seg[k].nblocks && j < nblk; j++) {
            if (blk[j].allocated) by[m++] = (range){blk[j].address, (uint64_t)(seg[k].expandable && seg[k].small)};
        }
    }
    qsort(by, m, sizeof *by, by_lo);
    for (size_t a = 0; a < t->num_allocs; a++) {
        if (!live[a]) continue;
        uint64_t p = (uint64_t)(uintptr_t)ptrs[a];
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (by[mid].lo < p) lo = mid + 1; else hi = mid;
        }
        if (lo < m && by[lo].lo == p) addr[a] = by[lo].hi ? UINT64_MAX : p;
    }
    free(by);
    free(blk);
    free(seg);
}

int main(int argc, char **argv) {
    const char *path = NULL, *conf = NULL;
    int do_check = 0, nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0) do_check = 1;
        else if (argv[i][0] != '-' && nargs == 0) path = argv[i], nargs++;
        else if (argv[i][0] != '-' && nargs == 1) conf = argv[i], nargs++;
        else nargs = 3;
    }
    if (path == NULL || nargs > 2) {
        fprintf(stderr, "usage: plan_inplace TRACE [CONF] [--check]\n");
        return 2;
    }
    trace t;
    char err[512];
    if (trace_load(path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "plan_inplace: %s\n", err);
        return 1;
    }
    if (setenv("VRAM_BACKEND", "sim", 1) != 0 || (getenv("VRAM_SIM_DEVICES") == NULL &&
        setenv("VRAM_SIM_DEVICES", "141GiB", 1) != 0) || unsetenv("CUDA_VISIBLE_DEVICES") != 0) {
        perror("plan_inplace: setenv");
        return 1;
    }
    vram_status s;
    if ((s = vram_set_memory_growth(0, 1)) != VRAM_OK) fail("vram_set_memory_growth", s);
    if (conf != NULL && (s = vram_set_alloc_conf(conf)) != VRAM_OK) fail("vram_set_alloc_conf", s);
    if ((s = vram_init()) != VRAM_OK) fail("vram_init", s);

    void **ptrs = xcalloc(t.num_allocs, sizeof *ptrs);
    uint8_t *live = xcalloc(t.num_allocs, 1);
    size_t *born = xcalloc(t.num_allocs, sizeof *born), *dies = xcalloc(t.num_allocs, sizeof *dies);
    uint64_t *addr = xcalloc(t.num_allocs, sizeof *addr), origin = 0, small = 0;
    size_t t0 = SIZE_MAX, t1 = SIZE_MAX;        /* the events that begin the first and the second step */
    for (size_t a = 0; a < t.num_allocs; a++) dies[a] = t.num_events;
    for (size_t i = 0; i < t.num_events; i++) {
        const trace_event *e = &t.events[i];
        if (e->kind == TRACE_FREE) {
            dies[e->alloc] = i;
            if (t1 != SIZE_MAX) continue;       /* (freed below, with the other blocks still live) */
            if ((s = vram_free(ptrs[e->alloc])) != VRAM_OK) fail("vram_free", s);
            live[e->alloc] = 0;
            continue;
        }
        born[e->alloc] = i;
        if (t1 != SIZE_MAX) continue;           /* (the rest of the trace only for its frees' events) */
        if ((s = vram_malloc(&ptrs[e->alloc], (size_t)e->bytes, 0)) != VRAM_OK) fail("vram_malloc", s);
        uint64_t steps = plan_steps();
        if (steps >= 1 && t0 == SIZE_MAX) {
            t0 = i;
            take_map(&t, ptrs, live, addr, &origin, &small);   /* (before this request's block counts as live) */
        }
        if (steps >= 2 && t1 == SIZE_MAX) t1 = i;
        live[e->alloc] = 1;
    }
    for (size_t a = 0; a < t.num_allocs; a++) {
        if (live[a] && (s = vram_free(ptrs[a])) != VRAM_OK) fail("vram_free", s);
    }
    if ((s = vram_shutdown()) != VRAM_OK) fail("vram_shutdown", s);
    if (t1 == SIZE_MAX) {
        fprintf(stderr, "plan_inplace: %s: no plan reached its second step%s%s\n", path, conf ? " under " : "",
                conf ? conf : "");
        free(addr), free(dies), free(born), free(live), free(ptrs);
        trace_release(&t);
        return 1;
    }
    uint64_t cycle = t1 - t0, ob_bytes = 0, small_bytes = 0, unplanned_bytes = 0;
    range *ob = xcalloc(t.num_allocs, sizeof *ob);
    cyc *blk = xcalloc(t.num_allocs, sizeof *blk);
    size_t nob = 0, n = 0, unplanned = 0, lost = 0;
    for (size_t a = 0; a < t.num_allocs; a++) {
        size_t b = born[a], e = dies[a];
        uint64_t size = (t.events[b].bytes + 511) / 512 * 512;
        if (b < t0 && e > t0 && e >= t1) {                /* alive at the step's start, outliving it */
            if (addr[a] == UINT64_MAX) {                  /* in the small zone: under its mapped bytes */
                small_bytes += size;
                continue;
            }
            if (addr[a] == 0 || addr[a] < origin) {
                lost++;                                   /* (not in the VMM region's map) */
                continue;
            }
            ob[nob++] = (range){addr[a] - origin, addr[a] - origin + size};
            ob_bytes += size;
        } else if (b >= t0 && b < t1 && e < b + cycle) {  /* the step's own, planned on the cycle */
            blk[n++] = (cyc){size, 0, b - t0, e - t0};
        } else if (b >= t0 && b < t1) {
            unplanned++;
            unplanned_bytes += size;
        }
    }
    qsort(ob, nob, sizeof *ob, by_lo);
    uint64_t peak = 0;                                    /* the plan's blocks at their peak, on the cycle */
    for (size_t i = 0; i < n; i++) {
        uint64_t at = blk[i].b, live_bytes = 0;           /* (the live bytes change at a birth) */
        cyc probe = {0, 0, at, at + 1};
        for (size_t j = 0; j < n; j++) live_bytes += together(&blk[j], &probe, cycle) ? blk[j].size : 0;
        if (live_bytes > peak) peak = live_bytes;
    }
    peak += ob_bytes + small_bytes;
    uint64_t top_beside = place(blk, n, cycle, NULL, 0);
    if (do_check) check(blk, n, cycle, NULL, 0);
    uint64_t top_in = place(blk, n, cycle, ob, nob);
    if (do_check) check(blk, n, cycle, ob, nob);
    range *all = xcalloc(nob + n, sizeof *all);
    memcpy(all, ob, nob * sizeof *all);
    for (size_t k = 0; k < n; k++) all[nob + k] = (range){blk[k].off, blk[k].off + blk[k].size};
    qsort(all, nob + n, sizeof *all, by_lo);
    static const unsigned mib[] = {2, 16, 64};
    for (size_t k = 0; k < sizeof mib / sizeof *mib; k++) {
        uint64_t ext = (uint64_t)mib[k] << 20;
        uint64_t beside = (extents_under(ob, nob, ext) + (top_beside + ext - 1) / ext) * ext + small;
        uint64_t in = extents_under(all, nob + n, ext) * ext + small;
        printf("{\"trace\": ");
        json_string(stdout, path);                        /* valid UTF-8 whatever the path's bytes */
        printf(", \"conf\": ");
        if (conf != NULL) json_string(stdout, conf);
        else printf("null");
        printf(", \"extent_mib\": %u, \"step_requests\": %zu, \"planned_blocks\": %zu, \"unplanned_blocks\": %zu, "
               "\"unplanned_bytes\": %llu, \"long_lived_blocks\": %zu, \"long_lived_bytes\": %llu, "
               "\"small_zone_bytes\": %llu, \"long_lived_unmapped\": %zu, \"step_peak_bytes\": %llu, \"zone_top_bytes\": %llu, "
               "\"in_place_top_bytes\": %llu, \"beside_bytes\": %llu, \"beside_to_peak\": %.4f, "
               "\"in_place_bytes\": %llu, \"in_place_to_peak\": %.4f}\n",
               mib[k], n + unplanned, n, unplanned, (unsigned long long)unplanned_bytes, nob,
               (unsigned long long)ob_bytes, (unsigned long long)small, lost, (unsigned long long)peak, (unsigned long long)top_beside,
               (unsigned long long)top_in, (unsigned long long)beside, peak ? (double)beside / (double)peak : 0.0,
               (unsigned long long)in, peak ? (double)in / (double)peak : 0.0);
    }
    free(all), free(ob), free(blk), free(addr), free(dies), free(born), free(live), free(ptrs);
    trace_release(&t);
    return 0;
}
