/*
 * bench/plan_detect.c: what the repeating step's detector (src/pool/plan.c) costs per call, alone:
 * a trace's requests and frees fed to it as an arena feeds them, without the allocator around it.
 *
 *   plan_detect TRACE [PASSES] [ROUNDS]     (TRACE a .trace or .trace.gz; PASSES default 3, ROUNDS 7)
 *
 * Each round starts a detector and feeds it the trace PASSES times over (sizes rounded up to 512
 * bytes, as the pool rounds them; a free of a block the trace never requested is skipped), with the
 * owner's bar as an arena sets it: a quarter of the most bytes live so far (a step whose blocks peak
 * below it is found but not placed). The trace is parsed once, before any round, and the history's
 * pages are touched before the clock starts (the first touch is paid once a process). Prints one JSON
 * line: the trace (its path as tools/json.c writes strings: valid UTF-8 whatever its bytes), its
 * events, the median and the lowest over rounds of ns per event (request or free), and the periods
 * found (plans returned) and placed (plans with planned blocks) per round.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "pool/plan.h"

#define MAX_ROUNDS 101

typedef struct event {
    uint64_t  id;      /* the trace's block id */
    size_t    size;    /* a request's bytes, rounded; 0 for a free */
    uintptr_t stream;
} event;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Reads the trace's "a ID BYTES STREAM ..." and "f ID ..." lines; the events in *out, their count
 * returned, the highest id in *max_id; (size_t)-1 when the file cannot be read. */
static size_t read_trace(const char *path, event **out, uint64_t *max_id) {
    size_t len = strlen(path), n = 0, cap = 1 << 16;
    char cmd[4200], line[512];
    if (len > 4000 || strchr(path, '\'') != NULL) return (size_t)-1;
    snprintf(cmd, sizeof cmd, len > 3 && strcmp(path + len - 3, ".gz") == 0 ? "gzip -dc '%s'" : "cat '%s'", path);
    FILE *f = popen(cmd, "r");
    event *ev = malloc(cap * sizeof *ev);
    if (f == NULL || ev == NULL) {
        if (f != NULL) pclose(f);
        free(ev);
        return (size_t)-1;
    }
    *max_id = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long id, bytes, stream;
        event e;
        if (line[0] == 'a' && sscanf(line, "a %llu %llu %llu", &id, &bytes, &stream) == 3 && bytes > 0) {
            e = (event){id, (size_t)((bytes + 511) & ~511ull), (uintptr_t)stream};
        } else if (line[0] == 'f' && sscanf(line, "f %llu", &id) == 1) {
            e = (event){id, 0, 0};
        } else {
            continue;
        }
        if (n == cap) {
            event *grown = realloc(ev, 2 * cap * sizeof *ev);
            if (grown == NULL) break;
            ev = grown;
            cap *= 2;
        }
        if (e.id > *max_id) *max_id = e.id;
        ev[n++] = e;
    }
    if (pclose(f) != 0 || n == 0) {
        free(ev);
        return (size_t)-1;
    }
    *out = ev;
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: plan_detect TRACE [PASSES] [ROUNDS]\n");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 3, rounds = argc > 3 ? atoi(argv[3]) : 7;
    if (passes < 1 || passes > 1000 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "plan_detect: PASSES in 1..1000, ROUNDS in 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    event *ev = NULL;
    uint64_t max_id = 0;
    size_t n = read_trace(argv[1], &ev, &max_id);
    if (n == (size_t)-1) {
        fprintf(stderr, "plan_detect: cannot read the trace %s\n", argv[1]);
        return 1;
    }
    uint64_t *num = calloc(max_id + 1, sizeof *num);   /* 1 + the detector's number of a live block */
    size_t *size = calloc(max_id + 1, sizeof *size);
    plan_detector *d = malloc(sizeof *d);
    if (num == NULL || size == NULL || d == NULL) {
        fprintf(stderr, "plan_detect: out of host memory for tables of block ids up to %llu\n",
                (unsigned long long)max_id);
        free(ev), free(num), free(size), free(d);
        return 1;
    }
    double ns[MAX_ROUNDS];
    unsigned found = 0, placed = 0;
    for (int r = 0; r < rounds; r++) {
        if (vram__plan_detector_init(d) != 0) return 1;   /* (its history's pages written: before the clock) */
        memset(num, 0, (max_id + 1) * sizeof *num);
        size_t live_high = 0;
        found = placed = 0;
        uint64_t t0 = now_ns();
        for (int pass = 0; pass < passes; pass++) {
            for (size_t i = 0; i < n; i++) {
                const event *e = &ev[i];
                if (e->size == 0) {
                    if (num[e->id] == 0) continue;
                    vram__plan_note_free(d, num[e->id] - 1, size[e->id]);
                    num[e->id] = 0;
                    continue;
                }
                if (num[e->id] != 0) vram__plan_note_free(d, num[e->id] - 1, size[e->id]);   /* (a reused id) */
                if (d->live + e->size > live_high) {
                    live_high = d->live + e->size;
                    d->min_live = live_high / 4;
                }
                pool_plan p;
                uint64_t id;
                if (vram__plan_note_request(d, e->size, e->stream, &id, &p) == 1) {
                    found++;
                    placed += p.planned > 0;
                    vram__plan_free(&p);
                }
                num[e->id] = id + 1;
                size[e->id] = e->size;
            }
        }
        ns[r] = (double)(now_ns() - t0) / ((double)passes * (double)n);
        vram__plan_detector_free(d);
    }
    double lowest = ns[0];
    for (int r = 1; r < rounds; r++) lowest = ns[r] < lowest ? ns[r] : lowest;
    qsort(ns, (size_t)rounds, sizeof *ns, cmp_double);
    printf("{\"trace\": ");
    json_string(stdout, argv[1]);                   /* valid UTF-8 whatever the path's bytes */
    printf(", \"events\": %zu, \"passes\": %d, \"rounds\": %d, \"ns_per_event_median\": %.2f, "
           "\"ns_per_event_lowest\": %.2f, \"periods_found\": %u, \"plans_placed\": %u}\n",
           n, passes, rounds, ns[rounds / 2], lowest, found, placed);
    free(ev);
    free(num);
    free(size);
    free(d);
    return 0;
}
