/*
 * bench/plan_ns.c: what a warm request costs when the repeating step's plan serves it, against best
 * fit serving the same request (plan:false), in one process.
 *
 *   plan_ns [STEPS] [ROUNDS]     (STEPS default 400 timed steps a round, ROUNDS default 7)
 *
 * A training step is made up from a fixed seed: 256 requests of 4 KiB to 32 MiB (sizes log-uniform),
 * each freed a random number of requests later within the step (a block in 16 lives into the next
 * step and is freed there, as gradients are), 64 MiB of weights kept throughout. Each round starts
 * the runtime twice on a simulated card with memory growth (plan:false, then plan:true, the order
 * swapped every round), runs 20 steps untimed (the plan is found and comes into force), then STEPS
 * steps timed as a whole: ns per call = the loop's time / (allocations + frees). A warm step calls no
 * driver function in either mode, so a simulated card times the host-side work a real one does.
 *
 * Prints one JSON line: the median over rounds of each mode's ns per call, their ratio, every
 * round's figures, and plan_steps / plan_slot_steps / plan_ends of the last plan:true round (the
 * plan was in force: plan_steps = 20 + STEPS less the steps before it came into force, all but its
 * first in slot mode, a lookup a request; plan_ends 0). Exits 1 when a call fails or the plan was
 * not in force, by slots, over the timed steps: then it prints no JSON, only the reason on stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vram.h"

#define REQ 256
#define WARM_STEPS 20
#define MAX_ROUNDS 101

static size_t size_of[REQ];
static int dies_before[REQ];   /* freed before this request of the step (REQ: at its end; > REQ:
                                  in the next step, before request dies_before - REQ) */
static void *live[REQ], *carried[REQ];
static struct { int free, j; } ev[3 * REQ];   /* one step's calls in order (made once: the loop
                                                 times the library, not its own bookkeeping) */
static int nev;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fail(const char *what, vram_status s) {
    fprintf(stderr, "plan_ns: %s: %s (%s)\n", what, vram_status_name(s), vram_last_error());
    exit(1);
}

static void make_step(void) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < REQ; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_of[i] = (size_t)4096 << (x % 14);                 /* 4 KiB .. 32 MiB */
        size_of[i] += (size_t)((x >> 8) % 4096) * 256;
        int span = 1 + (int)((x >> 20) % 32);
        dies_before[i] = (x >> 40) % 16 == 0 ? REQ + (i < span ? 0 : i - span) : (i + span < REQ ? i + span : REQ);
    }
}

/* The step's calls in order: before request i, the frees of last step's blocks due then, then
 * this step's. */
static void make_events(void) {
    for (int i = 0; i <= REQ; i++) {
        for (int j = 0; j < REQ; j++) {
            if (dies_before[j] > REQ && dies_before[j] - REQ == i) ev[nev].free = 2, ev[nev++].j = j;
        }
        for (int j = 0; j < i; j++) {
            if (dies_before[j] == i) ev[nev].free = 1, ev[nev++].j = j;
        }
        if (i < REQ) ev[nev].free = 0, ev[nev++].j = i;
    }
}

/* One step; returns the calls it made. */
static uint64_t step(void) {
    vram_status s;
    for (int e = 0; e < nev; e++) {
        int j = ev[e].j;
        if (ev[e].free == 0) {
            void **at = dies_before[j] > REQ ? &carried[j] : &live[j];
            if ((s = vram_malloc(at, size_of[j], 0)) != VRAM_OK) fail("vram_malloc", s);
            continue;
        }
        void **at = ev[e].free == 2 ? &carried[j] : &live[j];
        if (*at == NULL) continue;                      /* (the first step: nothing carried yet) */
        if ((s = vram_free(*at)) != VRAM_OK) fail("vram_free", s);
        *at = NULL;
    }
    return (uint64_t)nev;
}

static double run(int plan, int steps, vram_memory_info *info) {
    vram_status s;
    if ((s = vram_set_memory_growth(0, 1)) != VRAM_OK) fail("vram_set_memory_growth", s);
    if ((s = vram_set_alloc_conf(plan ? "plan:true" : "plan:false")) != VRAM_OK) fail("vram_set_alloc_conf", s);
    if ((s = vram_init()) != VRAM_OK) fail("vram_init", s);
    void *weights = NULL;
    if ((s = vram_malloc(&weights, (size_t)64 << 20, 0)) != VRAM_OK) fail("vram_malloc", s);
    for (int k = 0; k < WARM_STEPS; k++) step();
    uint64_t calls = 0, t0 = now_ns();
    for (int k = 0; k < steps; k++) calls += step();
    double ns = (double)(now_ns() - t0) / (double)calls;
    if ((s = vram_get_memory_info(0, info)) != VRAM_OK) fail("vram_get_memory_info", s);
    for (int j = 0; j < REQ; j++) {
        if (carried[j] != NULL && (s = vram_free(carried[j])) != VRAM_OK) fail("vram_free", s);
        carried[j] = NULL;
    }
    if ((s = vram_free(weights)) != VRAM_OK) fail("vram_free", s);
    if ((s = vram_shutdown()) != VRAM_OK) fail("vram_shutdown", s);
    return ns;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 400, rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (steps < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: plan_ns [STEPS >= 1] [ROUNDS 1..%d]\n", MAX_ROUNDS);
        return 2;
    }
    if (setenv("VRAM_BACKEND", "sim", 1) != 0 || setenv("VRAM_SIM_DEVICES", "16GiB", 1) != 0) {
        perror("plan_ns: setenv");
        return 1;
    }
    make_step();
    make_events();
    double ns[2][MAX_ROUNDS], sorted[2][MAX_ROUNDS];
    vram_memory_info info = {0};
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int plan = (r + k) % 2;                          /* the order swapped every round */
            vram_memory_info one;
            ns[plan][r] = run(plan, steps, &one);
            if (plan) info = one;
        }
    }
    for (int m = 0; m < 2; m++) {
        memcpy(sorted[m], ns[m], (size_t)rounds * sizeof **ns);
        qsort(sorted[m], (size_t)rounds, sizeof **ns, by_value);
    }
    if (info.plan_steps < (uint64_t)steps || info.plan_slot_steps < (uint64_t)steps || info.plan_ends != 0) {
        fprintf(stderr, "plan_ns: the plan was not in force over the timed steps (%llu steps, %llu by slots, %llu "
                "ends)\n", (unsigned long long)info.plan_steps, (unsigned long long)info.plan_slot_steps,
                (unsigned long long)info.plan_ends);
        return 1;                                    /* no figures: they would not be the plan's */
    }
    double off = sorted[0][rounds / 2], on = sorted[1][rounds / 2];
    printf("{\"requests_per_step\": %d, \"steps\": %d, \"rounds\": %d, \"plan_false_ns_per_call\": %.2f, "
           "\"plan_true_ns_per_call\": %.2f, \"ratio\": %.3f, \"plan_steps\": %llu, \"plan_slot_steps\": %llu, "
           "\"plan_ends\": %llu, "
           "\"plan_bytes\": %zu, \"rounds_false\": [", REQ, steps, rounds, off, on, on / off,
           (unsigned long long)info.plan_steps, (unsigned long long)info.plan_slot_steps,
           (unsigned long long)info.plan_ends, info.plan_bytes);
    for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", ns[0][r]);
    printf("], \"rounds_true\": [");
    for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", ns[1][r]);
    printf("]}\n");
    return 0;
}
