/*
 * bench/warm_pair.c: growth's warm calls against preallocation's, in one process, pass by pass.
 *
 *   warm_pair TRACE [PASSES] [CONF]     (PASSES default 21: 1 cold and 20 warm on each card;
 *                                        CONF: allocator options for both, as VRAM_ALLOC_CONF)
 *
 * Issue 3 asks growth's warm passes to cost at most 5% more than preallocation's. bench/run.sh
 * replays each mode in processes of its own, and on the H200 host a whole process runs a warm call
 * at 55-80 ns or at 100-140 (2026-11-30: pairs of neighbouring processes gave ratios from 0.55 to
 * 1.89 over the nine traces), so pairs of processes do not settle a 5% question. Here both modes share
 * one process: simulated card 0 grows, simulated card 1 is preallocated, and the trace is replayed
 * on each in turn, pass after pass, the order swapped every pass, so that whatever the host does
 * falls on both alike; then the runtime restarts with the cards' roles swapped, and does it again. A warm pass calls no driver function in either mode (growth's warm passes
 * make no driver call: `vram replay --passes` shows it), so a simulated card times exactly the
 * host-side work a real one does; the cold pass does not compare (the simulated driver is free).
 *
 * Prints one JSON line: the trace (its path as tools/json.c writes strings: valid UTF-8 whatever its
 * bytes), the warm ns per call of each mode (the median of its warm
 * passes), `warm_ratio` (growth / preallocated: the geometric mean of the two phases' medians of
 * per-pass ratios), each phase's median, and every pass's ns per call.
 * Sets VRAM_BACKEND=sim and VRAM_SIM_DEVICES (two cards of 1.25 x the trace's peak + 4 GiB each)
 * itself; exits 1 when an allocation or a free fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "trace.h"
#include "vram.h"

#define MAX_PASSES 1000

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fail(const char *what, vram_status s) {
    fprintf(stderr, "warm_pair: %s: %s: %s\n", what, vram_status_name(s), vram_last_error());
    exit(1);
}

/* One timed pass of the whole trace on `device` (ptrs: one per allocation number); what the trace
 * leaves live is freed afterwards, untimed. Returns ns per call. */
static double pass(const trace *t, int device, void **ptrs) {
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < t->num_events; i++) {
        const trace_event *e = &t->events[i];
        vram_status s = e->kind == TRACE_ALLOC ? vram_malloc(&ptrs[e->alloc], (size_t)e->bytes, device)
                                               : vram_free(ptrs[e->alloc]);
        if (s != VRAM_OK) fail(e->kind == TRACE_ALLOC ? "vram_malloc" : "vram_free", s);
        if (e->kind != TRACE_ALLOC) ptrs[e->alloc] = NULL;
    }
    uint64_t t1 = now_ns();
    for (size_t k = 0; k < t->num_allocs; k++) {
        if (ptrs[k] != NULL) {
            vram_status s = vram_free(ptrs[k]);
            if (s != VRAM_OK) fail("vram_free", s);
            ptrs[k] = NULL;
        }
    }
    return (double)(t1 - t0) / (double)t->num_events;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: warm_pair TRACE [PASSES] [CONF]\n");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 21;
    if (passes < 2 || passes > MAX_PASSES) {
        fprintf(stderr, "warm_pair: PASSES must be 2 to %d\n", MAX_PASSES);
        return 2;
    }
    trace t;
    char err[512];
    if (trace_load(argv[1], &t, err, sizeof err) != 0) {
        fprintf(stderr, "warm_pair: %s\n", err);
        return 1;
    }
    char cards[64];
    uint64_t card = t.peak_live_bytes + t.peak_live_bytes / 4 + ((uint64_t)4 << 30);
    snprintf(cards, sizeof cards, "2x%lluMiB", (unsigned long long)((card + (1u << 20) - 1) >> 20));
    if (setenv("VRAM_BACKEND", "sim", 1) != 0 || setenv("VRAM_SIM_DEVICES", cards, 1) != 0 ||
        unsetenv("CUDA_VISIBLE_DEVICES") != 0) {
        perror("warm_pair: setenv");
        return 1;
    }
    void **ptrs = calloc(t.num_allocs ? t.num_allocs : 1, sizeof *ptrs);
    static double ns[2][2][MAX_PASSES];            /* [phase][0 growth, 1 preallocated][pass] */
    if (ptrs == NULL) return 1;
    size_t reserved = 0;
    for (int phase = 0; phase < 2; phase++) {      /* growth on card 0, then on card 1 */
        vram_status s;
        if ((s = vram_set_memory_growth(phase, 1)) != VRAM_OK) fail("vram_set_memory_growth", s);
        if ((s = vram_set_memory_growth(1 - phase, 0)) != VRAM_OK) fail("vram_set_memory_growth", s);
        if (argc > 3 && (s = vram_set_alloc_conf(argv[3])) != VRAM_OK) fail("vram_set_alloc_conf", s);
        if ((s = vram_init()) != VRAM_OK) fail("vram_init", s);
        for (int p = 0; p < passes; p++) {
            for (int k = 0; k < 2; k++) {
                int mode = (p + k) % 2;                /* growth first on even passes */
                ns[phase][mode][p] = pass(&t, mode == 0 ? phase : 1 - phase, ptrs);
            }
        }
        vram_memory_info g;
        if ((s = vram_get_memory_info(phase, &g)) != VRAM_OK) fail("vram_get_memory_info", s);
        reserved = g.peak_reserved;
        if ((s = vram_shutdown()) != VRAM_OK) fail("vram_shutdown", s);
    }
    /* A free names no device, so vram looks for its block in logical device 0's pool first: card 1's
     * calls cost more than card 0's. Each mode had each card for one phase, and the geometric mean of
     * the two phases' median ratios cancels what the card's place costs. */
    static double warm[2][2 * MAX_PASSES], ratio[2][MAX_PASSES];
    for (int phase = 0; phase < 2; phase++) {
        for (int p = 1; p < passes; p++) {
            warm[0][phase * (passes - 1) + p - 1] = ns[phase][0][p];
            warm[1][phase * (passes - 1) + p - 1] = ns[phase][1][p];
            ratio[phase][p - 1] = ns[phase][0][p] / ns[phase][1][p];
        }
    }
    double r0 = median(ratio[0], passes - 1), r1 = median(ratio[1], passes - 1);
    printf("{\"trace\": ");
    json_string(stdout, argv[1]);                   /* valid UTF-8 whatever the path's bytes */
    printf(", \"events\": %zu, \"passes\": %d, \"growth_warm_ns_per_op\": %.1f, "
           "\"prealloc_warm_ns_per_op\": %.1f, \"warm_ratio\": %.3f, \"warm_ratio_growth_on_card_0\": %.3f, "
           "\"warm_ratio_growth_on_card_1\": %.3f, \"growth_peak_reserved_bytes\": %zu, \"passes_ns\": [",
           t.num_events, passes, median(warm[0], 2 * (passes - 1)), median(warm[1], 2 * (passes - 1)),
           sqrt(r0 * r1), r0, r1, reserved);
    for (int phase = 0; phase < 2; phase++) {
        for (int p = 0; p < passes; p++) {
            printf("%s[%.1f, %.1f]", phase || p ? ", " : "", ns[phase][0][p], ns[phase][1][p]);
        }
    }
    printf("]}\n");
    free(ptrs);
    trace_release(&t);
    return 0;
}
