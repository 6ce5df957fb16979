/*
 * test_plan.c: the repeating step found from the allocation stream, and its offline placement
 * (src/pool/plan.c), on hand-made streams whose plans are worked out in the comments.
 *
 * A stream is written as a script: "a NAME SIZE [STREAM]" requests SIZE bytes as NAME (on stream
 * STREAM, default 0), "f NAME" frees it; requests are numbered from 0 in order. The script runner
 * feeds the detector and keeps every plan it makes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pool/plan.h"

#define MAX_NAMES 64
#define MAX_PLANS 8

typedef struct feed {
    plan_detector d;
    char          names[MAX_NAMES][8];
    uint64_t      ids[MAX_NAMES];
    size_t        sizes[MAX_NAMES];
    int           nnames;
    pool_plan     plans[MAX_PLANS];
    uint64_t      fired_at[MAX_PLANS];   /* the request that made each plan */
    int           nplans;
} feed;

static int name_slot(feed *f, const char *name) {
    for (int i = 0; i < f->nnames; i++)
        if (strcmp(f->names[i], name) == 0) return i;
    CHECK(f->nnames < MAX_NAMES);
    snprintf(f->names[f->nnames], sizeof f->names[0], "%s", name);
    return f->nnames++;
}

static void feed_request(feed *f, const char *name, size_t size, uintptr_t stream) {
    int k = name_slot(f, name);
    pool_plan p;
    int r = plan_note_request(&f->d, size, stream, &f->ids[k], &p);
    CHECK(r == 0 || r == 1);
    f->sizes[k] = size;
    if (r == 1) {
        CHECK(f->nplans < MAX_PLANS);
        f->fired_at[f->nplans] = f->ids[k];
        f->plans[f->nplans++] = p;
    }
}

static void feed_free(feed *f, const char *name) {
    int k = name_slot(f, name);
    plan_note_free(&f->d, f->ids[k], f->sizes[k]);
}

/* Runs a script of lines "a NAME SIZE [STREAM]" / "f NAME" separated by ';'. */
static void feed_script(feed *f, const char *script) {
    char *copy = strdup(script), *save = NULL;
    for (char *op = strtok_r(copy, ";", &save); op != NULL; op = strtok_r(NULL, ";", &save)) {
        char kind = 0, name[8] = "";
        unsigned long long size = 0, stream = 0;
        int n = sscanf(op, " %c %7s %llu %llu", &kind, name, &size, &stream);
        if (kind == 'a') {
            CHECK(n >= 3);
            feed_request(f, name, (size_t)size, (uintptr_t)stream);
        } else {
            CHECK(kind == 'f' && n == 2);
            feed_free(f, name);
        }
    }
    free(copy);
}

static void feed_init(feed *f) {
    memset(f, 0, sizeof *f);
    CHECK_INT(plan_detector_init(&f->d), ==, 0);
}

static void feed_done(feed *f) {
    for (int i = 0; i < f->nplans; i++) plan_free(&f->plans[i]);
    plan_detector_free(&f->d);
}

/* One step: x (4 KiB) and y (8 KiB) requested, x freed, z (4 KiB) requested, y and z freed. */
#define STEP "a x 4096; a y 8192; f x; a z 4096; f y; f z;"

/* W (1 MiB, never freed), then steps. Requests: W = 0, step k (from 1) = 3k-2, 3k-1, 3k (x, y, z).
 * Sizes: W, 4096, 8192, 4096, 4096, 8192, 4096, ... The 4-gram ending at request 7 (4096, 8192,
 * 4096, 4096: z1's 4096 ... x3's) was seen ending at request 4, so the period 3 is a candidate at
 * request 7 whose last four requests already repeat: more than a period, so it is confirmed there.
 * The step starts where the fewest bytes were live in [7 - 6 + 1, 7 - 3] = [2, 4]: before request
 * 4 (x2) only W is live (before 2: W + x1; before 3: W + y1). The step [4, 7) is x2, y2, z2, all
 * freed before request 7: planned. Their lifetimes in the step's events (0 a x2, 1 a y2, 2 f x2,
 * 3 a z2, 4 f y2, 5 f z2): x [0, 2), y [1, 4), z [3, 5). Largest first: y at 0; x lives with y, at
 * 8192; z lives with y but not with x: 8192 too. Top 12288 = the live peak (x and y, event 1). The
 * next step in phase with request 4 after request 7 starts at request 10. */
TEST(plan_repeating_step) {
    feed f;
    feed_init(&f);
    feed_script(&f, "a W 1048576;" STEP STEP STEP STEP STEP STEP);
    CHECK_INT(f.nplans, ==, 1);                  /* once: the period never breaks */
    pool_plan *p = &f.plans[0];
    CHECK_U64(f.fired_at[0], ==, 7);
    CHECK_U64(p->period, ==, 3);
    CHECK_U64(p->start_request, ==, 10);
    CHECK_U64(p->planned, ==, 3);
    CHECK_SIZE(p->size[0], ==, 4096);
    CHECK_SIZE(p->size[1], ==, 8192);
    CHECK_SIZE(p->size[2], ==, 4096);
    CHECK_U64(p->offset[0], ==, 8192);
    CHECK_U64(p->offset[1], ==, 0);
    CHECK_U64(p->offset[2], ==, 8192);
    CHECK_SIZE(p->top, ==, 12288);
    CHECK_SIZE(p->live_peak, ==, 12288);
    feed_done(&f);
}

/* The same steps, but the fifth step's y is 16 KiB: requests 13-15 are x5, y5 (16384), z5, and step
 * k is 3k-2 .. 3k. The first plan is made at request 7 as above. At request 14 the period breaks
 * (16384 against y4's 8192): for the next 2 x 3 requests only longer periods count. At request 18
 * (z6) the 4-gram (z5 x6 y6 z6) was last seen ending at 12 (z3 x4 y4 z4): period 6, which breaks at
 * request 20 (y7 against y5). At 20 the 4-gram (y6 z6 x7 y7) was last seen ending at 11 (its
 * occurrence ending at 17 holds y5): period 9, which breaks at 23 (y8 against y5). At 23 the 4-gram
 * (y7 z7 x8 y8) was seen ending at 20: period 3 again, its last four requests already repeat, so the
 * second plan is made at request 23. Its step starts where the fewest bytes were live in [18, 20]:
 * before 19 (x7; before 18: W + y6, before 20: W + x7). Steps 6 on are as before, so the plan is
 * the first one, for requests from 19 + 6 = 25 on. With a detector that never gave the period
 * back after the change, there would be one plan. */
TEST(plan_step_that_changes_once) {
    feed f;
    feed_init(&f);
    feed_script(&f, "a W 1048576;" STEP STEP STEP STEP "a x 4096; a y 16384; f x; a z 4096; f y; f z;" STEP STEP
                    STEP STEP);
    CHECK_INT(f.nplans, ==, 2);
    CHECK_U64(f.fired_at[0], ==, 7);
    CHECK_U64(f.fired_at[1], ==, 23);
    pool_plan *p = &f.plans[1];
    CHECK_U64(p->period, ==, 3);
    CHECK_U64(p->start_request, ==, 25);
    CHECK_U64(p->offset[0], ==, 8192);
    CHECK_U64(p->offset[1], ==, 0);
    CHECK_U64(p->offset[2], ==, 8192);
    CHECK_SIZE(p->top, ==, 12288);
    feed_done(&f);
}

/* Sizes that never repeat in order (each request a different size, freed after the next one):
 * no 4-gram is seen twice, so there is no candidate and no plan. */
TEST(plan_step_that_never_repeats) {
    feed f;
    feed_init(&f);
    char prev[8] = "";
    for (int i = 0; i < 5000; i++) {
        char name[8];
        snprintf(name, sizeof name, "b%d", i % 2);
        feed_request(&f, name, 256 * (1 + (size_t)i), 0);
        if (prev[0] != '\0') feed_free(&f, prev);
        snprintf(prev, sizeof prev, "%s", name);
    }
    CHECK_INT(f.nplans, ==, 0);
    feed_done(&f);
}

/* Two streams, one size: a step is u (4 KiB on stream 1), v (4 KiB on stream 1), w (4 KiB on
 * stream 2), each freed before the next step. Keys are (size, stream), so the period is 3 (with
 * streams left out every request would look alike and the period would be 1). Requests: u1 = 0,
 * v1 = 1, w1 = 2, u2 = 3, ... The 4-gram ending at 6 (u2 v2 w2 u3) repeats 3 back (u1 v1 w1 u2),
 * so the plan is made at request 6. The step starts in [1, 3] where the
 * fewest bytes were live: before u2 (3) nothing is (v1 before 1 has u1 live, w1 before 2 has u1
 * and v1). The step [3, 6): u2, v2, w2 all freed before request 6; lifetimes u [0, 5), v [1, 5),
 * w [2, 5) (the frees come after the last request): all alive together, so 0, 4096, 8192 in
 * order of birth (equal sizes: the earlier born first). */
TEST(plan_two_streams) {
    feed f;
    feed_init(&f);
    for (int i = 0; i < 5; i++) feed_script(&f, "a u 4096 1; a v 4096 1; a w 4096 2; f u; f v; f w;");
    CHECK_INT(f.nplans, ==, 1);
    pool_plan *p = &f.plans[0];
    CHECK_U64(f.fired_at[0], ==, 6);
    CHECK_U64(p->period, ==, 3);
    CHECK_U64(p->start_request, ==, 9);
    CHECK_U64(p->stream[0], ==, 1);
    CHECK_U64(p->stream[1], ==, 1);
    CHECK_U64(p->stream[2], ==, 2);
    CHECK_U64(p->offset[0], ==, 0);
    CHECK_U64(p->offset[1], ==, 4096);
    CHECK_U64(p->offset[2], ==, 8192);
    CHECK_SIZE(p->top, ==, 3 * 4096);
    CHECK_SIZE(p->live_peak, ==, 3 * 4096);
    feed_done(&f);
}

/* The placement itself: random blocks and lifetimes; no two blocks alive at once overlap, and the
 * top is at least the live peak. A hand case: a (100, [0, 10)), b (60, [0, 5)), c (60, [5, 10)):
 * a at 0, b at 100, c (alive with a, not with b) at 100: top 160. */
TEST(plan_place_never_overlaps_blocks_alive_together) {
    size_t size3[3] = {100, 60, 60};
    uint64_t born3[3] = {0, 0, 5}, dies3[3] = {10, 5, 10}, off3[3];
    CHECK_SIZE(plan_place(3, size3, born3, dies3, off3), ==, 160);
    CHECK_U64(off3[0], ==, 0);
    CHECK_U64(off3[1], ==, 100);
    CHECK_U64(off3[2], ==, 100);
    test_rng rng = rng_make(harness_seed());
    enum { N = 300 };
    size_t size[N];
    uint64_t born[N], dies[N], off[N];
    for (int i = 0; i < N; i++) {
        size[i] = 256 * (1 + (size_t)rng_below(&rng, 64));
        born[i] = rng_below(&rng, 1000);
        dies[i] = born[i] + 1 + rng_below(&rng, 200);
    }
    size_t top = plan_place(N, size, born, dies, off);
    for (int i = 0; i < N; i++) {
        CHECK(off[i] + size[i] <= top);
        for (int j = i + 1; j < N; j++) {
            int together = born[i] < dies[j] && born[j] < dies[i];
            int overlap = off[i] < off[j] + size[j] && off[j] < off[i] + size[i];
            CHECK(!(together && overlap));
        }
    }
}
