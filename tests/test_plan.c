/*
 * test_plan.c: the repeating step found from the allocation stream, and its offline placement
 * (src/pool/plan.c), on hand-made streams whose plans are worked out in the comments.
 *
 * A stream is written as a script: "a NAME SIZE [STREAM]" requests SIZE bytes as NAME (on stream
 * STREAM, default 0), "f NAME" frees it; requests are numbered from 0 in order. The script runner
 * feeds the detector and keeps every plan it makes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

static int name_index(feed *f, const char *name) {
    for (int i = 0; i < f->nnames; i++)
        if (strcmp(f->names[i], name) == 0) return i;
    CHECK(f->nnames < MAX_NAMES);
    snprintf(f->names[f->nnames], sizeof f->names[0], "%s", name);
    return f->nnames++;
}

static void feed_request(feed *f, const char *name, size_t size, uintptr_t stream) {
    int k = name_index(f, name);
    pool_plan p;
    int r = vram__plan_note_request(&f->d, size, stream, &f->ids[k], &p);
    CHECK(r == 0 || r == 1);
    f->sizes[k] = size;
    if (r == 1) {
        CHECK(f->nplans < MAX_PLANS);
        f->fired_at[f->nplans] = f->ids[k];
        f->plans[f->nplans++] = p;
    }
}

static void feed_free(feed *f, const char *name) {
    int k = name_index(f, name);
    vram__plan_note_free(&f->d, f->ids[k], f->sizes[k]);
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
    CHECK_INT(vram__plan_detector_init(&f->d), ==, 0);
}

static void feed_done(feed *f) {
    for (int i = 0; i < f->nplans; i++) vram__plan_free(&f->plans[i]);
    vram__plan_detector_free(&f->d);
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
    /* where following it looks: z's place starts where y ends (y alive when z is requested); x and
     * y have nothing planned alive below them */
    CHECK_INT(p->below[0], ==, -1);
    CHECK_INT(p->below[1], ==, -1);
    CHECK_INT(p->below[2], ==, 1);
    feed_done(&f);
}

/* The steps of plan_repeating_step with the requests numbered from base = 2^32 - 5 on: the 4-gram
 * buckets keep the low 32 bits of 1 + a request's number, which for x2 (request 2^32 - 1, the fourth
 * after W) is 0, as an empty bucket's. The same plan comes, at the same places: made at request
 * base + 7, the next step at base + 10. */
TEST(plan_found_across_2_32_requests) {
    feed f;
    feed_init(&f);
    uint64_t base = (1ull << 32) - 5;
    f.d.requests = base;
    feed_script(&f, "a W 1048576;" STEP STEP STEP STEP STEP STEP);
    CHECK_INT(f.nplans, ==, 1);
    pool_plan *p = &f.plans[0];
    CHECK_U64(f.fired_at[0], ==, base + 7);
    CHECK_U64(p->period, ==, 3);
    CHECK_U64(p->start_request, ==, base + 10);
    CHECK_U64(p->offset[0], ==, 8192);
    CHECK_U64(p->offset[1], ==, 0);
    CHECK_U64(p->offset[2], ==, 8192);
    CHECK_SIZE(p->top, ==, 12288);
    feed_done(&f);
}

/* The steps of plan_repeating_step with a gap after step 2 (requests 0-6 fed, then vram__plan_note_gap: the
 * owner stopped feeding for a while, plan_arena.h). Fed through, the period is confirmed at request 7;
 * after the gap no 4-gram may reach back before request 7: request n's period-3 match ends at n - 3,
 * whose 4-gram starts at n - 6, so the first is at request 13 (x5), and it is confirmed there (its
 * last four requests repeat). The step starts in [8, 10] where the fewest bytes were live: before
 * request 10 (x4), W alone; the next step in phase is at 16, the places those of plan_repeating_step. */
TEST(plan_not_found_across_a_gap) {
    feed f;
    feed_init(&f);
    feed_script(&f, "a W 1048576;" STEP STEP);
    vram__plan_note_gap(&f.d);
    feed_script(&f, STEP STEP STEP STEP);
    CHECK_INT(f.nplans, ==, 1);
    pool_plan *p = &f.plans[0];
    CHECK_U64(f.fired_at[0], ==, 13);
    CHECK_U64(p->period, ==, 3);
    CHECK_U64(p->start_request, ==, 16);
    CHECK_U64(p->planned, ==, 3);
    CHECK_U64(p->offset[0], ==, 8192);
    CHECK_U64(p->offset[1], ==, 0);
    CHECK_U64(p->offset[2], ==, 8192);
    CHECK_SIZE(p->top, ==, 12288);
    feed_done(&f);
}

/* The steps of plan_repeating_step with the owner's bar (min_live) at 16385 bytes: a step requests
 * 4096 + 8192 + 4096 = 16384 bytes in all, so its planned blocks (live peak 12288) cannot reach the
 * bar, and the detector sees that from the sizes alone: the period still counts as found (once, at
 * request 7, the next step at 10), but nothing is placed and nothing allocated for the plan. At
 * 16384 the sum reaches the bar and the plan is made (its live peak 12288 is still below it: the
 * period's requests, no places). */
TEST(plan_step_below_the_bar) {
    feed f;
    feed_init(&f);
    f.d.min_live = 16385;
    feed_script(&f, "a W 1048576;" STEP STEP STEP STEP STEP STEP);
    CHECK_INT(f.nplans, ==, 1);
    CHECK_U64(f.fired_at[0], ==, 7);
    CHECK_U64(f.plans[0].period, ==, 3);
    CHECK_U64(f.plans[0].start_request, ==, 10);
    CHECK_U64(f.plans[0].planned, ==, 0);
    CHECK(f.plans[0].size == NULL && f.plans[0].offset == NULL);
    feed_done(&f);
    feed_init(&f);
    f.d.min_live = 16384;
    feed_script(&f, "a W 1048576;" STEP STEP STEP STEP STEP STEP);
    CHECK_INT(f.nplans, ==, 1);
    CHECK_U64(f.plans[0].planned, ==, 0);
    CHECK(f.plans[0].size != NULL && f.plans[0].size[1] == 8192);
    CHECK_SIZE(f.plans[0].live_peak, ==, 12288);
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

/* The detector's history is resident once it starts: a request is an array write, not a page fault
 * (one every 128 requests over the first PLAN_HISTORY, microseconds each on a virtual machine).
 * mincore() says which pages of the history are in memory. */
static size_t pages_resident(const void *p, size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p / page * page, hi = ((uintptr_t)p + n + page - 1) / page * page;
    size_t count = (hi - lo) / page, in = 0;
    unsigned char *v = malloc(count);
    if (v == NULL || mincore((void *)lo, hi - lo, v) != 0) count = 0;
    for (size_t i = 0; i < count; i++) in += v[i] & 1;
    free(v);
    return in == count && count > 0 ? count : 0;
}

TEST(plan_history_is_resident_from_the_start) {
    plan_detector d;
    CHECK_INT(vram__plan_detector_init(&d), ==, 0);
    CHECK(pages_resident(d.req, PLAN_HISTORY * sizeof *d.req) > 0);
    CHECK(pages_resident(d.live_before, PLAN_HISTORY * sizeof *d.live_before) > 0);
    CHECK(pages_resident(d.gram_prev, PLAN_HISTORY * sizeof *d.gram_prev) > 0);
    vram__plan_detector_free(&d);
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

/* A block that lives into the next step (a gradient freed early in the step after): W (1 MiB,
 * kept), g (4 KiB), then steps "a x 8192; f g; a y 4096; f x; a g 4096; f y": each step's g is
 * freed after the next step's x is requested. Requests: W = 0, g0 = 1, step k (from 1) = 3k-1 ..
 * 3k+1 (x, y, g). Keys 1M, 4096, 8192, 4096, 4096, 8192, ...: the 4-gram ending at 7 (g1 x2 y2
 * g2: 4096 8192 4096 4096) was seen ending at 4, so the period 3 is confirmed at request 7. Live
 * before requests 2, 3, 4: W + g0, W + x1, W + y1; the fewest first, before 2: the step [2, 5) is
 * x1, y1, g1. Its events: 2 a x1, 3 f g0, 4 a y1, 5 f x1, 6 a g1, 7 f y1, then 8 a x2 (the step's
 * end, a cycle of 6 events), 9 f g1. Relative to event 2: x [0, 3), y [2, 5); g1 is freed at 9,
 * in the next step before its own request comes again: planned on the cycle, [4, 7), that is
 * [4, 6) and again [0, 1) of the next step. Without the cycle g would be unplanned. Largest first:
 * x at 0; y lives with x over [2, 3): 8192; g meets x over [0, 1) and y over [4, 5): 12288. Each
 * pair of the three meets, though no point has all three: top 16384 above the live peak of
 * 12288 (x and y at 2, x and g at 0). Settle: the step before's g is freed at 1, so the first
 * request after it is y (born 2), request 1 of the step. Below: y's place starts where x ends
 * (x alive at 2), g's where y ends (y alive at 4); x has nothing below. The next step in phase
 * with request 2 after request 7 starts at 8. */
TEST(plan_block_living_into_the_next_step) {
    feed f;
    feed_init(&f);
    feed_script(&f, "a W 1048576; a g 4096;");
    for (int i = 0; i < 5; i++) feed_script(&f, "a x 8192; f g; a y 4096; f x; a g 4096; f y;");
    CHECK_INT(f.nplans, ==, 1);
    pool_plan *p = &f.plans[0];
    CHECK_U64(f.fired_at[0], ==, 7);
    CHECK_U64(p->period, ==, 3);
    CHECK_U64(p->start_request, ==, 8);
    CHECK_U64(p->planned, ==, 3);
    CHECK_U64(p->offset[0], ==, 0);
    CHECK_U64(p->offset[1], ==, 8192);
    CHECK_U64(p->offset[2], ==, 12288);
    CHECK_INT(p->wraps[0], ==, 0);
    CHECK_INT(p->wraps[2], ==, 1);
    CHECK_SIZE(p->top, ==, 16384);
    CHECK_SIZE(p->live_peak, ==, 12288);
    CHECK_U64(p->settle, ==, 1);
    CHECK_INT(p->below[0], ==, -1);
    CHECK_INT(p->below[1], ==, 0);
    CHECK_INT(p->below[2], ==, 1);
    feed_done(&f);
}

/* The placement itself: random blocks and lifetimes; no two blocks alive at once overlap, and the
 * top is at least the live peak. A hand case: a (100, [0, 10)), b (60, [0, 5)), c (60, [5, 10)):
 * a at 0, b at 100, c (alive with a, not with b) at 100: top 160. */
TEST(plan_place_never_overlaps_blocks_alive_together) {
    size_t size3[3] = {100, 60, 60};
    uint64_t born3[3] = {0, 0, 5}, dies3[3] = {10, 5, 10}, off3[3];
    CHECK_SIZE(vram__plan_place(3, size3, born3, dies3, 0, off3), ==, 160);
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
    for (uint64_t cycle = 0; cycle <= 1000; cycle += 1000) {   /* (then some live into the next cycle) */
        size_t top = vram__plan_place(N, size, born, dies, cycle, off);
        for (int i = 0; i < N; i++) {
            CHECK(off[i] + size[i] <= top);
            for (int j = i + 1; j < N; j++) {
                int together = born[i] < dies[j] && born[j] < dies[i];
                if (cycle != 0) {   /* alive over [born, dies) and, past the cycle, [0, dies - cycle) */
                    together = together || (dies[i] > cycle && born[j] < dies[i] - cycle) ||
                               (dies[j] > cycle && born[i] < dies[j] - cycle);
                }
                int overlap = off[i] < off[j] + size[j] && off[j] < off[i] + size[i];
                CHECK(!(together && overlap));
            }
        }
    }
}

/* ---- the plan in force, in an arena ------------------------------------------------------------ */

#define PMiB ((size_t)1 << 20)

/* One step of the allocator tests: a and b (16 MiB each), a freed, c (32 MiB), b and c freed.
 * Best fit: W (8 MiB, kept) at [0, 8); a [8, 24), b [24, 40); c fits no hole, [40, 72); then
 * everything above W is free again, and each step lands the same: 72 MiB held for a live peak of
 * 56 (W, b, c). The plan (events 0 a, 1 b, 2 free a, 3 c, 4 free b, 5 free c): c largest at 0
 * over [3, 5); a over [0, 2) does not live with c: 0; b over [1, 4) lives with both: 32. Its top
 * is 48 MiB, the step's live peak; with W the pool holds 56 MiB once the memory best fit used is
 * given back. Requests: W = 0, step k = 3k-2 .. 3k; the plan is made at request 7 (plan_repeating_
 * step) and followed from request 10, the fourth step. */
static void alloc_step(void **a, void **b, void **c, int check) {
    CHECK_OK(vram_malloc(a, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(b, 16 * PMiB, 0));
    fill(*b, 64 * KiB, 0xb);
    CHECK_OK(vram_free(*a));
    CHECK_OK(vram_malloc(c, 32 * PMiB, 0));
    fill(*c, 64 * KiB, 0xc);
    if (check) CHECK(filled(*b, 64 * KiB, 0xb));   /* c is not over b */
    CHECK_OK(vram_free(*b));
    CHECK_OK(vram_free(*c));
}

TEST(plan_in_force_places_the_step_and_gives_back) {
    for (int plan = 0; plan <= 1; plan++) {
        use_sim_growth(1 * GiB, plan ? "plan:true,map_ahead_mb:0,small_pool_kb:0"
                                     : "plan:false,map_ahead_mb:0,small_pool_kb:0");
        void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
        for (int step = 1; step <= 3; step++) alloc_step(&a, &b, &c, 1);
        CHECK_SIZE(INFO(0).reserved, ==, 72 * PMiB);              /* best fit's, both ways */
        for (int step = 4; step <= 6; step++) alloc_step(&a, &b, &c, 1);
        CHECK_ALL();
        vram__backend_counters c6 = sim_counters();
        void *a7 = NULL, *b7 = NULL, *c7 = NULL;
        alloc_step(&a7, &b7, &c7, 1);
        for (int step = 8; step <= 10; step++) alloc_step(&a, &b, &c, 1);
        vram__backend_counters c10 = sim_counters();
        CHECK_ALL();
        if (plan) {
            CHECK_SIZE(INFO(0).reserved, ==, 56 * PMiB);          /* W + the plan's 48 MiB */
            CHECK((char *)b7 - (char *)c7 == (ptrdiff_t)(32 * PMiB));   /* the planned offsets */
            CHECK(a7 == c7);
            CHECK(a == a7 && b == b7 && c == c7);                 /* every step at the same places */
            CHECK_U64(c10.map, ==, c6.map);                       /* no driver call once in force */
            CHECK_U64(c10.phys_create, ==, c6.phys_create);
            vram_memory_info info = INFO(0);
            CHECK_SIZE(info.plan_bytes, ==, 48 * PMiB);           /* in force, and what it gave back: */
            CHECK_U64(info.plan_steps, ==, 7);                    /* steps 4 to 10 */
            CHECK_U64(info.plan_ends, ==, 0);
            CHECK_SIZE(info.plan_given_back, ==, (72 - 56) * PMiB);   /* 72 MiB held, 56 after */
        } else {
            CHECK_SIZE(INFO(0).reserved, ==, 72 * PMiB);
            CHECK_U64(INFO(0).plan_steps, ==, 0);
        }
        CHECK_OK(vram_free(w));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
}

/* The same steps with no plan key in the options: the plan is on by default, in force from the
 * fourth step, and the pool holds W + the plan's 48 MiB; VRAM_ALLOC_CONF=plan:false leaves best
 * fit's 72 MiB. */
TEST(plan_on_by_default) {
    for (int off = 0; off <= 1; off++) {
        if (off) setenv("VRAM_ALLOC_CONF", "plan:false", 1);
        use_sim_growth(1 * GiB, "map_ahead_mb:0,small_pool_kb:0");
        void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
        for (int step = 1; step <= 10; step++) alloc_step(&a, &b, &c, 1);
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.reserved, ==, off ? 72 * PMiB : 56 * PMiB);
        CHECK_U64(info.plan_steps, ==, off ? 0 : 7);
        CHECK_OK(vram_free(w));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
        unsetenv("VRAM_ALLOC_CONF");
    }
}

/* Under a limit that was set, a plan whose zone does not fit beside the memory the blocks from
 * before its step hold is not followed. Long-lived x0 and x2 (1 MiB each) sit in the first halves of
 * two 2 MiB granules (x1, x3 freed): 4 MiB mapped for 2 MiB live. A step: a (1 MiB - 32 KiB), b
 * (- 64 KiB), free a, c (- 128 KiB), free b, free c (sizes apart, so the step is the only period).
 * Best fit puts a and b in the holes beside x0 and x2, and c in a's: the pool never maps more than
 * its 4 MiB. The plan places b at 0 and a and c at 1 MiB: a zone of one granule that the holes cannot
 * hold, so 6 MiB under the plan. With a limit of 5 MiB the plan is refused (before: it came into force
 * and its first place, refused by the limit, ended it). With 1 GiB it comes into force at step 4, and
 * its zone's granule would take the pool past the 4 MiB it ever held: the plan gives way (it ends)
 * and best fit goes on in 4 MiB (before: the plan was followed from step 4 in 6 MiB). */
TEST(plan_dropped_when_its_zone_does_not_fit_the_limit) {
    for (int roomy = 0; roomy <= 1; roomy++) {
        use_sim_growth(roomy ? 1 * GiB : 5 * PMiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
        void *x[4];
        for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc(&x[i], 1 * PMiB, 0));
        for (int i = 1; i < 4; i += 2) CHECK_OK(vram_free(x[i]));
        for (int step = 1; step <= 12; step++) {
            void *a = NULL, *b = NULL, *c = NULL;
            CHECK_OK(vram_malloc(&a, 1 * PMiB - 32 * KiB, 0));
            CHECK_OK(vram_malloc(&b, 1 * PMiB - 64 * KiB, 0));
            fill(b, 64 * KiB, 0xb);
            CHECK_OK(vram_free(a));
            CHECK_OK(vram_malloc(&c, 1 * PMiB - 128 * KiB, 0));
            CHECK(filled(b, 64 * KiB, 0xb));
            CHECK_OK(vram_free(b));
            CHECK_OK(vram_free(c));
        }
        vram_memory_info info = INFO(0);
        CHECK_U64(info.plan_steps, ==, (roomy ? 1 : 0));     /* step 4, or none */
        CHECK_U64(info.plan_ends, ==, (roomy ? 1 : 0));
        CHECK_U64(info.plan_refused, ==, (roomy ? 0 : 1));
        CHECK_SIZE(info.plan_bytes, ==, 0);
        CHECK_SIZE(info.peak_reserved, ==, 4 * PMiB);
        for (int i = 0; i < 4; i += 2) CHECK_OK(vram_free(x[i]));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
}

/* A step whose gradient g (8 MiB) lives into the next one: a (16 MiB), the last step's g freed, b
 * (16), a freed, c (32), g, b and c freed. Events: 0 a, 1 free g', 2 b, 3 free a, 4 c, 5 g, 6 free
 * b, 7 free c; a cycle of 8. The step starts at a (before it only W and g' are live: 16 MiB,
 * against 24 before b or c). Lifetimes: a [0, 3), b [2, 6), c [4, 7), g [5, 9) on the cycle (g'
 * alive over [0, 1)). Largest first: c at 0; a not with c: 0; b with a and c: 32; g meets a over
 * [0, 1), c and b over [5, 6): 48. Top 56 MiB, the live peak (b, c, g over [5, 6)). The g of the
 * step before the first one followed is placed at its place already when the plan waits for its
 * first step, or else found outside the zone by the first step; once in force every block, g too,
 * lands at its planned place every step, and the pool holds W (6 MiB) + 56. A plan without the
 * cycle leaves g to best fit (a zone of 48 MiB). */
static void alloc_step_g(void **a, void **g, int check) {
    void *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(a, 16 * PMiB, 0));
    if (*g != NULL) {
        if (check) CHECK(filled(*g, 64 * KiB, 0x9));
        CHECK_OK(vram_free(*g));
    }
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
    fill(b, 64 * KiB, 0xb);
    CHECK_OK(vram_free(*a));
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
    fill(c, 64 * KiB, 0xc);
    CHECK_OK(vram_malloc(g, 8 * PMiB, 0));
    fill(*g, 64 * KiB, 0x9);
    if (check) CHECK(filled(b, 64 * KiB, 0xb) && filled(c, 64 * KiB, 0xc));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
}

TEST(plan_places_a_block_living_into_the_next_step) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *g = NULL, *a0 = NULL, *g0 = NULL;
    CHECK_OK(vram_malloc(&w, 6 * PMiB, 0));   /* (not g's size: W would look like a g) */
    for (int step = 1; step <= 6; step++) alloc_step_g(&a, &g, 1);
    CHECK_U64(INFO(0).plan_steps, >, 0);
    CHECK_U64(INFO(0).plan_ends, ==, 0);
    CHECK_SIZE(INFO(0).plan_bytes, ==, 56 * PMiB);
    for (int step = 7; step <= 12; step++) {
        alloc_step_g(&a, &g, 1);
        if (step == 7) {
            a0 = a;
            g0 = g;
        }
        CHECK((char *)g - (char *)a == (ptrdiff_t)(48 * PMiB));   /* g at its planned offset */
        CHECK(a == a0 && g == g0);
        CHECK_SIZE(INFO(0).reserved, ==, (6 + 56) * PMiB);
        CHECK_ALL();
    }
    CHECK_U64(INFO(0).plan_ends, ==, 0);
    CHECK_OK(vram_free(g));
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* While the program is off its plan, what it does is served from the memory the pool holds before
 * any more is mapped: the plan of plan_in_force_places_the_step_and_gives_back in force (W + 48
 * MiB held: the zone's 48 at the top of the range, best fit's memory given back; 72 MiB was the
 * most held, before the plan), then the program does something else: one 64 MiB block. The plan
 * bends (it is not ended: the program may come back to its step) and the block goes to best fit. It
 * fits no free chunk but the one below the zone, unmapped; mapping it all would hold 8 + 48 + 64 =
 * 120 MiB. The pool moves the zone's idle extents under it and maps the 16 MiB left: W + 64 = 72
 * MiB, its mark. */
TEST(plan_astray_serves_from_the_memory_held) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step(&a, &b, &c, 1);
    CHECK_SIZE(INFO(0).reserved, ==, 56 * PMiB);
    CHECK_SIZE(INFO(0).plan_bytes, ==, 48 * PMiB);
    CHECK_OK(vram_malloc(&d, 64 * PMiB, 0));                     /* not the plan's a: it bends */
    fill(d, 64 * PMiB, 0xd);
    CHECK_U64(INFO(0).plan_ends, ==, 0);
    CHECK_SIZE(INFO(0).plan_bytes, ==, 48 * PMiB);
    CHECK_SIZE(INFO(0).reserved, ==, 72 * PMiB);
    CHECK(filled(d, 64 * PMiB, 0xd));
    CHECK_ALL();
    CHECK_OK(vram_free(d));
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A load with the plan on (one-granule extents) maps as without it (backing.c): on a 16 GiB card, no
 * limit set, extents of about 16 GiB / 256 (58 MiB of the 14.5 GiB the simulated card lends). Sixteen
 * blocks of 128 MiB make the same creates either way (with one-granule extents, 1,024); a 16 MiB
 * block, below the load's 32 MiB, is 8 granules with the plan, one extent without. Two blocks freed
 * (256 MiB, over 1/16 of the 2,064 MiB held) end the load: a block of 256 MiB then maps 128 granules
 * with the plan (a few extents without), a block of 128 MiB fits one freed place, and one of 4 MiB
 * lies at the start of the other, in the first of its three extents. The statistics, counted from the
 * chunks with the plan and from the extents' counts without, agree: that extent is busy (free bytes
 * in it are inactive split), the other two idle; trim gives back just those two. */
TEST(plan_load_maps_blocks_in_large_extents) {
    uint64_t load[2], small[2], big[2];
    int64_t split[2];
    size_t trimmed[2];
    for (int plan = 0; plan <= 1; plan++) {
        use_sim_growth(0, plan ? "plan:true,map_ahead_mb:0,small_pool_kb:0"       /* (0: no limit set) */
                               : "plan:false,map_ahead_mb:0,small_pool_kb:0");
        void *w[16] = {NULL}, *s = NULL, *b = NULL, *again = NULL, *bit = NULL;
        vram__backend_counters c0 = sim_counters();
        for (int i = 0; i < 16; i++) CHECK_OK(vram_malloc(&w[i], 128 * PMiB, 0));
        vram__backend_counters c1 = sim_counters();
        CHECK_OK(vram_malloc(&s, 16 * PMiB, 0));
        vram__backend_counters c2 = sim_counters();
        fill(w[15], 64 * KiB, 0xf);
        CHECK_OK(vram_free(w[3]));
        CHECK_OK(vram_free(w[9]));
        CHECK_OK(vram_malloc(&b, 256 * PMiB, 0));
        vram__backend_counters c3 = sim_counters();
        load[plan] = c1.phys_create - c0.phys_create;
        small[plan] = c2.phys_create - c1.phys_create;
        big[plan] = c3.phys_create - c2.phys_create;
        CHECK_OK(vram_malloc(&again, 128 * PMiB, 0));
        CHECK_OK(vram_malloc(&bit, 4 * PMiB, 0));
        CHECK_U64(sim_counters().phys_create, ==, c3.phys_create);
        CHECK((again == w[3] && bit == w[9]) || (again == w[9] && bit == w[3]));
        CHECK(filled(w[15], 64 * KiB, 0xf));
        CHECK_ALL();
        vram_allocator_stats st;
        CHECK_OK(vram_get_allocator_stats(0, &st));
        split[plan] = st.inactive_split_bytes[VRAM_STAT_ALL].current;
        size_t before = INFO(0).reserved;
        CHECK_SIZE(before, ==, (16 * 128 + 16 + 256) * PMiB);
        CHECK_OK(vram_trim(0, 0));
        trimmed[plan] = before - INFO(0).reserved;
        CHECK_OK(vram_get_allocator_stats(0, &st));
        CHECK_U64((uint64_t)st.inactive_split_bytes[VRAM_STAT_ALL].current, ==, (uint64_t)split[plan]);
        for (int i = 0; i < 16; i++) {
            if (i != 3 && i != 9) CHECK_OK(vram_free(w[i]));
        }
        CHECK_OK(vram_free(s));
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(again));
        CHECK_OK(vram_free(bit));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
    CHECK_U64(load[1], ==, load[0]);
    CHECK_U64(load[0], ==, 48);                          /* 58 + 58 + 12 MiB a block */
    CHECK_U64(small[0], ==, 1);
    CHECK_U64(small[1], ==, 8);
    CHECK_U64(big[0], <=, 5);
    CHECK_U64(big[1], ==, 128);
    CHECK_U64((uint64_t)split[1], ==, (uint64_t)split[0]);
    CHECK_U64((uint64_t)split[0], ==, (58 - 4) * PMiB);    /* the busy extent's free bytes */
    CHECK_SIZE(trimmed[1], ==, trimmed[0]);
    CHECK_SIZE(trimmed[0], ==, (128 - 58) * PMiB);
}

/* Requests that repeat nothing, each freed at once, sizes 64 KiB to 1 MiB: `n` of them, in memory
 * already held after the first few (reserved memory does not grow). */
static void noise(int n) {
    test_rng rng = rng_make(40);
    for (int i = 0; i < n; i++) {
        void *x = NULL;
        CHECK_OK(vram_malloc(&x, rng_size_log(&rng, 64 * KiB, 1 * PMiB), 0));
        CHECK_OK(vram_free(x));
    }
}

/* The detector rests after 16,384 requests with no growth of reserved memory (plan_arena.h): 20,000
 * requests of noise() put it to rest (plan_found_at_a_look_without_growth). Then alloc_step's step
 * maps 64 MiB more: the growth wakes it from the next request on (step 1's b, its history starting
 * there), and it makes the plan where it does without the rest (step 3's b, plan_repeating_step),
 * followed from step 4 (steps 4 to 10). */
TEST(plan_found_when_growth_wakes_the_resting_detector) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    noise(20000);
    for (int step = 1; step <= 10; step++) alloc_step(&a, &b, &c, 1);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_steps, ==, 7);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_SIZE(info.plan_bytes, ==, 48 * PMiB);
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* The detector at rest is fed nothing: a step that forms with no growth (its memory held already: a
 * 64 MiB block freed before) after noise() put the detector to rest (at request 16,386: W, the 64
 * MiB block, then 16,384 without growth) is found only at the detector's next look, PLAN_NAP requests
 * later (3,145,728; plan_arena.c), and then within a few steps: after more than (3,145,728 - 20,000)
 * / 3 steps and fewer than (3,145,728 + 98,304) / 3 (counted by 64), a plan in force and never ended.
 * Fed every request, the detector finds it in the third step. */
TEST(plan_found_at_a_look_without_growth) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    CHECK_OK(vram_malloc(&d, 64 * PMiB, 0));
    CHECK_OK(vram_free(d));
    noise(20000);
    size_t reserved = INFO(0).reserved;
    long steps = 0;
    while (steps < (3145728 + 98304) / 3 + 64 && (steps % 64 != 0 || INFO(0).plan_steps == 0)) {
        CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));             /* alloc_step's requests, nothing written */
        CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
        CHECK_OK(vram_free(a));
        CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(c));
        steps++;
    }
    CHECK_U64(INFO(0).plan_steps, >, 0);
    CHECK_U64(INFO(0).plan_ends, ==, 0);
    CHECK_U64((uint64_t)steps, >, (3145728 - 20000) / 3);     /* not before the look */
    CHECK_SIZE(INFO(0).peak_reserved, ==, reserved);        /* (nothing grew) */
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* Under a limit, a plan in force gives way before a request fails: W (8 MiB), then steps of a (16 MiB,
 * freed at once) and k (2 MiB, kept: a cache that grows, unplanned) under a limit of 40 MiB. Without
 * a plan, best fit serves 9 steps: step 10's a finds no 16 MiB free under the limit (k's fill the
 * holes a left). With the plan (period 2, in force from step 3: a at the zone's start, 16 MiB), step
 * 9's k found no free chunk outside the zone and the limit refused more, with a's 16 MiB idle in the
 * zone: it failed ("no free block is large enough"), a step earlier than without the plan. Now the
 * plan gives way sooner still: the first k after its first step would take the pool past the most it
 * ever held, with a's 16 MiB idle in the zone, so the plan ends there (plan_ends 1 after 1 step in
 * force) and best fit places k in the zone's memory: 9 steps both ways, and step 10's a fails at the
 * limit both ways. */
TEST(plan_gives_way_to_the_limit) {
    for (int plan = 0; plan <= 1; plan++) {
        use_sim_growth(40 * PMiB, plan ? "plan:true,map_ahead_mb:0,small_pool_kb:0"
                                       : "plan:false,map_ahead_mb:0,small_pool_kb:0");
        void *w = NULL, *k[16] = {0};
        CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
        int step = 1;
        for (; step <= 16; step++) {
            void *a = NULL;
            vram_status s = vram_malloc(&a, 16 * PMiB, 0);
            if (s != VRAM_OK) {
                CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
                CHECK(strstr(vram_last_error(), "the memory limit of 41943040 bytes is reached") != NULL);
                break;
            }
            CHECK_OK(vram_free(a));
            CHECK_OK(vram_malloc(&k[step - 1], 2 * PMiB, 0));
            fill(k[step - 1], 64 * KiB, (unsigned)step);
        }
        CHECK_INT(step, ==, 10);
        for (int i = 0; i < 9; i++) CHECK(filled(k[i], 64 * KiB, (unsigned)i + 1));
        vram_memory_info info = INFO(0);
        CHECK_U64(info.plan_steps, ==, (plan ? 1 : 0));
        CHECK_U64(info.plan_ends, ==, (plan ? 1 : 0));
        CHECK_SIZE(info.plan_bytes, ==, 0);
        for (int i = 0; i < 16; i++) if (k[i] != NULL) CHECK_OK(vram_free(k[i]));
        CHECK_OK(vram_free(w));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
}

/* A program that makes requests of its own in its step (an optimizer's state made once, an
 * evaluation's batch) keeps its plan: alloc_step's plan in force, then step 7 makes x (4 MiB, kept)
 * between a and b. x is not the plan's next request: it goes to best fit, outside the zone, and so do
 * the requests after it until PLAN_RESYNC (8) in a row are the plan's from its next one on (step 7's b
 * and c, steps 8 and 9); from step 10 the plan places again, at the same places as before. The plan is
 * never ended, every block keeps its bytes, and from step 11 on no step makes a driver call. */
TEST(plan_bends_around_requests_of_its_own) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL, *x = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step(&a, &b, &c, 1);
    void *a6 = a, *b6 = b;
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(&x, 4 * PMiB, 0));                       /* not the plan's b */
    fill(x, 64 * KiB, 0x7);
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
    fill(b, 64 * KiB, 0xb);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
    fill(c, 64 * KiB, 0xc);
    CHECK(filled(b, 64 * KiB, 0xb));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    for (int step = 8; step <= 9; step++) alloc_step(&a, &b, &c, 1);
    CHECK(a != a6);                                               /* (best fit's while found again) */
    CHECK_ALL();
    alloc_step(&a, &b, &c, 1);                                    /* step 10: placed again */
    CHECK(a == a6 && c == a6 && b == b6);
    vram__backend_counters c10 = sim_counters();
    for (int step = 11; step <= 13; step++) {
        alloc_step(&a, &b, &c, 1);
        CHECK(a == a6 && c == a6 && b == b6);
    }
    vram__backend_counters c13 = sim_counters();
    CHECK_U64(c13.map, ==, c10.map);
    CHECK_U64(c13.unmap, ==, c10.unmap);
    CHECK_U64(c13.phys_create, ==, c10.phys_create);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_SIZE(info.plan_bytes, ==, 48 * PMiB);
    CHECK_U64(info.plan_steps, ==, 8);                            /* 4 to 7, 10 to 13 */
    CHECK(filled(x, 64 * KiB, 0x7));
    CHECK_ALL();
    CHECK_OK(vram_free(x));
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A step of a (16 MiB), s (2), b (16), a and s freed, c (32), b and c freed: the plan places c and a
 * at 0, s at 16 MiB and b at 32 (a zone of 48). In step 7 the program keeps its s (as an optimizer
 * keeps the state it makes in its first step, of a size the later steps' requests have): c's place
 * is still s's. s is late: its request goes to best fit from then on (evicted: 2 MiB, within 1/16 of
 * the zone), and c, this time, too. In step 8 s is best fit's, and c's place is still taken by the
 * kept s: c goes to best fit again. Once the kept s is freed, step 9 places c at 0 again, s outside
 * the zone. The plan is never ended; every block keeps its bytes. */
static void alloc_step_s(void **a, void **s, void **b, void **c, int keep_s) {
    CHECK_OK(vram_malloc(a, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(s, 2 * PMiB, 0));
    fill(*s, 64 * KiB, 0x5);
    CHECK_OK(vram_malloc(b, 16 * PMiB, 0));
    fill(*b, 64 * KiB, 0xb);
    CHECK_OK(vram_free(*a));
    if (!keep_s) CHECK_OK(vram_free(*s));
    CHECK_OK(vram_malloc(c, 32 * PMiB, 0));
    fill(*c, 64 * KiB, 0xc);
    CHECK(filled(*b, 64 * KiB, 0xb));
    if (keep_s) CHECK(filled(*s, 64 * KiB, 0x5));
    CHECK_OK(vram_free(*b));
    CHECK_OK(vram_free(*c));
}

TEST(plan_evicts_a_block_kept_past_its_place) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *s = NULL, *b = NULL, *c = NULL, *kept = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step_s(&a, &s, &b, &c, 0);
    void *zone = c;
    CHECK(a == zone && (char *)s - (char *)zone == (ptrdiff_t)(16 * PMiB) &&
          (char *)b - (char *)zone == (ptrdiff_t)(32 * PMiB));
    alloc_step_s(&a, &kept, &b, &c, 1);                          /* step 7: s kept */
    CHECK(c != zone);
    alloc_step_s(&a, &s, &b, &c, 0);                             /* step 8 */
    CHECK(a == zone && c != zone);
    CHECK((char *)s < (char *)zone || (char *)s >= (char *)zone + 48 * PMiB);
    CHECK(filled(kept, 64 * KiB, 0x5));
    CHECK_OK(vram_free(kept));
    alloc_step_s(&a, &s, &b, &c, 0);                             /* step 9 */
    CHECK(a == zone && c == zone && (char *)b - (char *)zone == (ptrdiff_t)(32 * PMiB));
    CHECK((char *)s < (char *)zone || (char *)s >= (char *)zone + 48 * PMiB);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_SIZE(info.plan_bytes, ==, 48 * PMiB);
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* The plan in force, then a step whose a is freed only after c was requested: c's planned place
 * (offset 0) is still a's, the free chunk after b is not free there: a is late, and its request would
 * go to best fit from then on (evicted), but a's 16 MiB are more than 1/16 of the zone's 48, so the
 * plan ends and best fit places c, not over a (a's bytes are checked after c is filled). Best fit serves on; vram_check holds throughout and
 * the later steps still run (the zone went back to the large zone). */
TEST(plan_ends_when_a_free_comes_late) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 5; step++) alloc_step(&a, &b, &c, 1);
    CHECK_SIZE(INFO(0).reserved, ==, 56 * PMiB);                  /* the plan in force */
    CHECK_SIZE(INFO(0).plan_bytes, ==, 48 * PMiB);
    CHECK_U64(INFO(0).plan_slot_steps, ==, 1);                    /* step 5: c's slot is a's place */
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));
    fill(a, 16 * PMiB, 0xa);
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));                     /* a still live: not its place */
    fill(c, 32 * PMiB, 0xc);
    CHECK(filled(a, 16 * PMiB, 0xa));
    CHECK((char *)c >= (char *)a + 16 * PMiB || (char *)c + 32 * PMiB <= (char *)a);
    CHECK_SIZE(INFO(0).plan_bytes, ==, 0);                        /* ended, */
    CHECK_U64(INFO(0).plan_ends, ==, 1);                          /* by the late free */
    CHECK_ALL();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
    for (int step = 1; step <= 4; step++) alloc_step(&a, &b, &c, 1);
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* Slot mode (plan_slots.c) on alloc_step's plan: the plan's first step (4) places by the zone's
 * chunks, each step from the fifth by a lookup, at the same places (a and c at the zone's start, b
 * 32 MiB above it). In step 8, with a and b live, the segments show them as two blocks of 16 MiB
 * (not the zone as one block), and vram_check holds: both rebuild the zone's chunks, so step 8
 * ends by them; step 9 is a lookup again. The pool holds W + 48 MiB throughout. */
TEST(plan_slots_serve_the_settled_step) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 4; step++) alloc_step(&a, &b, &c, 1);
    void *a4 = a, *b4 = b;
    CHECK_U64(INFO(0).plan_steps, ==, 1);
    CHECK_U64(INFO(0).plan_slot_steps, ==, 0);
    for (int step = 5; step <= 7; step++) {
        alloc_step(&a, &b, &c, 1);
        CHECK(a == a4 && b == b4 && c == a4);
        CHECK_U64(INFO(0).plan_slot_steps, ==, (uint64_t)step - 4);
    }
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));                      /* step 8 */
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
    fill(b, 64 * KiB, 0xb);
    vram_segment_info segs[8];
    vram_block_info blocks[16];
    size_t nsegs = 0, nblocks = 0, live = 0;
    CHECK_OK(vram_get_segments(0, segs, 8, &nsegs, blocks, 16, &nblocks));
    CHECK_SIZE(nblocks, <=, 16);
    for (size_t i = 0; i < nblocks && i < 16; i++) {
        if (!blocks[i].allocated) continue;
        live++;
        uint64_t at = blocks[i].address;
        CHECK(at == (uint64_t)(uintptr_t)w || at == (uint64_t)(uintptr_t)a || at == (uint64_t)(uintptr_t)b);
        CHECK_SIZE(blocks[i].size, ==, at == (uint64_t)(uintptr_t)w ? 8 * PMiB : 16 * PMiB);
    }
    CHECK_SIZE(live, ==, 3);
    CHECK_ALL();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
    CHECK(c == a4 && filled(b, 64 * KiB, 0xb));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_U64(INFO(0).plan_slot_steps, ==, 4);                    /* step 8 began in slot mode */
    alloc_step(&a, &b, &c, 1);                                    /* step 9 */
    CHECK(a == a4 && b == b4);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_slot_steps, ==, 5);
    CHECK_U64(info.plan_steps, ==, 6);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_SIZE(info.reserved, ==, 56 * PMiB);
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* alloc_step_g's plan in slot mode, then a step whose g' (the step before's gradient, due free at
 * b's request) is freed after b's request, before a's free: slot mode is left at b (a free later
 * than planned), but g''s place (48 MiB up) is not needed before g, so the zone's chunks place b,
 * c and g as planned and the plan goes on; the next step is a lookup again. */
TEST(plan_slots_left_for_a_late_free_the_plan_goes_on) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *g = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 6 * PMiB, 0));
    for (int step = 1; step <= 8; step++) alloc_step_g(&a, &g, 1);
    void *a8 = a, *g8 = g;
    uint64_t slots = INFO(0).plan_slot_steps;
    CHECK_U64(slots, >, 0);
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));                      /* g' still live: late */
    fill(b, 64 * KiB, 0xb);
    CHECK(filled(g, 64 * KiB, 0x9));
    CHECK_OK(vram_free(g));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
    CHECK_OK(vram_malloc(&g, 8 * PMiB, 0));
    fill(g, 64 * KiB, 0x9);
    CHECK(a == a8 && c == a8 && g == g8 && (char *)b - (char *)a == (ptrdiff_t)(32 * PMiB));
    CHECK(filled(b, 64 * KiB, 0xb));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_U64(INFO(0).plan_slot_steps, ==, slots + 1);            /* (it began in slot mode) */
    for (int step = 1; step <= 2; step++) alloc_step_g(&a, &g, 1);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_slot_steps, ==, slots + 3);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK(a == a8 && g == g8);
    CHECK_SIZE(info.reserved, ==, (6 + 56) * PMiB);
    CHECK_OK(vram_free(g));
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A step of a (15 MiB), b (17), a freed, c (31), b and c freed: the plan places c and a at the zone's
 * start and b at 31 MiB (a zone of 48). The statistics in slot mode read the zone through its live
 * slots (the query does not leave slot mode: tests/plan_cost_test.sh counts what it costs) and give
 * what its chunks give once slot mode is left (vram_get_segments leaves it), at a point of each of four
 * steps: a alone, the gap [15, 48) above it: one free chunk split off a block, 1 MiB of it in the
 * granule a ends in; a and b, the gap [15, 31) beside both: one, 2 MiB (a's last granule, b's first);
 * b alone, the gap [0, 31) below it: one, 1 MiB; b and c: none. W (8 MiB, whole granules, outside)
 * adds nothing. */
static void odd_step_ops(void **a, void **b, void **c, int from, int to) {
    for (int op = from; op < to; op++) {
        switch (op) {
        case 0: CHECK_OK(vram_malloc(a, 15 * PMiB, 0)); break;
        case 1: CHECK_OK(vram_malloc(b, 17 * PMiB, 0)); break;
        case 2: CHECK_OK(vram_free(*a)); break;
        case 3: CHECK_OK(vram_malloc(c, 31 * PMiB, 0)); break;
        case 4: CHECK_OK(vram_free(*b)); break;
        default: CHECK_OK(vram_free(*c)); break;
        }
    }
}

TEST(plan_slots_stats_read_the_live_slots) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) odd_step_ops(&a, &b, &c, 0, 6);
    void *zone = c;
    CHECK((char *)b - (char *)zone == (ptrdiff_t)(31 * PMiB));
    uint64_t slots = INFO(0).plan_slot_steps;
    CHECK_U64(slots, ==, 2);
    const int64_t split_n[4] = {1, 1, 1, 0};
    const int64_t split_mib[4] = {1, 2, 1, 0};
    const int64_t live_mib[4] = {8 + 15, 8 + 32, 8 + 17, 8 + 48};
    for (int point = 0; point < 4; point++) {
        odd_step_ops(&a, &b, &c, 0, point + 1);
        vram_allocator_stats slot, chunks;
        CHECK_OK(vram_get_allocator_stats(0, &slot));
        CHECK_INT(slot.inactive_split[0].current, ==, split_n[point]);
        CHECK_INT(slot.inactive_split_bytes[0].current, ==, split_mib[point] * (int64_t)PMiB);
        CHECK_INT(slot.allocated_bytes[0].current, ==, live_mib[point] * (int64_t)PMiB);
        CHECK_INT(slot.reserved_bytes[0].current, ==, 56 * (int64_t)PMiB);
        vram_segment_info segs[8];
        vram_block_info blocks[16];
        size_t nsegs = 0, nblocks = 0;
        CHECK_OK(vram_get_segments(0, segs, 8, &nsegs, blocks, 16, &nblocks));   /* (slot mode left) */
        CHECK_OK(vram_get_allocator_stats(0, &chunks));
        CHECK(memcmp(&slot, &chunks, sizeof slot) == 0);
        odd_step_ops(&a, &b, &c, point + 1, 6);
        CHECK(a == zone && c == zone && (char *)b - (char *)zone == (ptrdiff_t)(31 * PMiB));
        CHECK_U64(INFO(0).plan_slot_steps, ==, slots + 1 + (uint64_t)point);
    }
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_SIZE(info.reserved, ==, 56 * PMiB);
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* vram_trim in slot mode gives the zone's free memory back (the zone is one record in use while in
 * slot mode: trimming leaves it first): W alone is held. The next step maps its blocks again by
 * the zone's chunks, the one after is a lookup. */
TEST(plan_slots_trim_gives_back_the_zone) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step(&a, &b, &c, 1);
    CHECK_U64(INFO(0).plan_slot_steps, ==, 2);
    CHECK_SIZE(INFO(0).reserved, ==, 56 * PMiB);
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 8 * PMiB);
    CHECK_ALL();
    alloc_step(&a, &b, &c, 1);
    CHECK_SIZE(INFO(0).reserved, ==, 56 * PMiB);
    alloc_step(&a, &b, &c, 1);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_slot_steps, ==, 3);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* Slot mode, then a second thread allocates (thread caches park from then on): its request is
 * not the plan's, so the plan ends there and the zone's chunks are rebuilt with the slots live
 * (a, b). A free goes to the pool, not a cache: a slot is never parked (vram__tc_park refuses it), and
 * vram_trim finds every block where it is; every block keeps its bytes and the pool stays sound. */
TEST(plan_slots_end_when_a_second_thread_allocates) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0,thread_cache_mb:256,arenas:1");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step(&a, &b, &c, 1);
    CHECK_U64(INFO(0).plan_slot_steps, ==, 2);
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
    fill(b, 64 * KiB, 0xb);
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, malloc_free_once, NULL), ==, 0);   /* caches park from now on */
    CHECK_INT(pthread_join(t, NULL), ==, 0);
    CHECK_U64(INFO(0).plan_ends, ==, 1);
    CHECK_ALL();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
    fill(c, 64 * KiB, 0xc);
    CHECK(filled(b, 64 * KiB, 0xb));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A slot used on another stream (vram_record_stream) and freed: its free waits for that stream,
 * which no plan foresees: the plan ends, the block is deferred as any, and it is free once the
 * stream has passed. */
TEST(plan_slots_block_used_on_another_stream) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL, *s = (void *)(uintptr_t)0x2;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step(&a, &b, &c, 1);
    CHECK_U64(INFO(0).plan_slot_steps, ==, 2);
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));
    CHECK_OK(vram_record_stream(a, s));
    CHECK_OK(vram_free(a));
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_ends, ==, 1);
    CHECK_SIZE(info.current, ==, 8 * PMiB);
    CHECK_ALL();
    vram__sim_stream_complete(s);
    for (int step = 1; step <= 2; step++) alloc_step(&a, &b, &c, 1);
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A slot shared with vram_ipc_export / vram_ipc_open (here, in this process): the handle names
 * the extents under its place in the zone, the other mapping sees its bytes, and after the close
 * and the free the plan goes on in slot mode. */
TEST(plan_slots_block_shared_by_ipc) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL, *there = NULL;
    CHECK_OK(vram_malloc(&w, 8 * PMiB, 0));
    for (int step = 1; step <= 6; step++) alloc_step(&a, &b, &c, 1);
    void *b6 = b;
    CHECK_U64(INFO(0).plan_slot_steps, ==, 2);
    CHECK_OK(vram_malloc(&a, 16 * PMiB, 0));
    CHECK_OK(vram_malloc(&b, 16 * PMiB, 0));
    CHECK(b == b6);                                               /* its slot */
    fill(b, 16 * PMiB, 0xb);
    unsigned char handle[512];
    size_t length = 0, offset = 0;
    CHECK_OK(vram_ipc_export(b, handle, sizeof handle, &length, &offset));
    CHECK_OK(vram_ipc_open(0, handle, length, &there));
    CHECK((unsigned char *)there + offset != (unsigned char *)b);
    CHECK(filled((unsigned char *)there + offset, 16 * PMiB, 0xb));
    CHECK_OK(vram_ipc_close(there));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&c, 32 * PMiB, 0));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    alloc_step(&a, &b, &c, 1);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_slot_steps, ==, 4);
    CHECK_U64(info.plan_ends, ==, 0);
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A random step (40 requests of 256 bytes to 8 MiB, each freed a random number of requests later
 * within the step, one in eight kept for the next step's same place in it), repeated 40 times
 * under plan:true, with one step in five changed at random: a size, a free moved later, an extra
 * request. Every block carries its own bytes (checked at its free and after every step) and
 * vram_check holds after every step: whatever the plan did, and wherever it ended, no two live
 * blocks share a byte. The steps after a plan's first are served in slot mode (a check after each
 * step rebuilds the zone's chunks, the next step enters again), and a free moved later is caught
 * by the due lists there. */
TEST(plan_random_steps_keep_every_block) {
    use_sim_growth(2 * GiB, "plan:true,map_ahead_mb:0");
    test_rng rng = rng_make(harness_seed());
    enum { N = 40, STEPS = 40 };
    size_t size[N];
    int dies[N], keep[N];
    for (int i = 0; i < N; i++) {
        size[i] = rng_size_log(&rng, 256, 8 * PMiB);
        dies[i] = i + 1 + (int)rng_below(&rng, (uint64_t)(N - i));   /* freed before request dies[i] */
        keep[i] = rng_below(&rng, 8) == 0;                             /* (or N: at the step's end) */
    }
    void *kept[N] = {0};
    for (int step = 0; step < STEPS; step++) {
        int changed = step > 8 && rng_below(&rng, 5) == 0;
        int what = changed ? (int)rng_below(&rng, 3) : -1, which = (int)rng_below(&rng, N);
        void *p[N] = {0};
        size_t got[N];                             /* what each block of this step asked for */
        for (int i = 0; i <= N; i++) {
            for (int j = 0; j < i; j++) {          /* the frees due before request i */
                int due = (what == 1 && j == which) ? N : dies[j];
                if (due == i && p[j] != NULL && !keep[j]) {
                    CHECK(filled(p[j], got[j] < 64 * KiB ? got[j] : 64 * KiB, (unsigned)(step * N + j)));
                    CHECK_OK(vram_free(p[j]));
                    p[j] = NULL;
                }
            }
            if (i == N) break;
            if (keep[i] && kept[i] != NULL) {      /* last step's block of this place goes now */
                CHECK(filled(kept[i], size[i] < 64 * KiB ? size[i] : 64 * KiB, 0xee + (unsigned)i));
                CHECK_OK(vram_free(kept[i]));
                kept[i] = NULL;
            }
            size_t sz = what == 0 && i == which && !keep[i] ? size[i] + 4096 : size[i];
            got[i] = sz;
            CHECK_OK(vram_malloc(&p[i], sz, 0));
            fill(p[i], sz < 64 * KiB ? sz : 64 * KiB, keep[i] ? 0xee + (unsigned)i : (unsigned)(step * N + i));
            if (keep[i]) {
                kept[i] = p[i];
                p[i] = NULL;
            }
            if (what == 2 && i == which) {         /* an extra request, freed at once */
                void *x = NULL;
                CHECK_OK(vram_malloc(&x, 1 * PMiB, 0));
                CHECK_OK(vram_free(x));
            }
        }
        for (int j = 0; j < N; j++) {              /* frees moved to the step's end */
            if (p[j] != NULL) {
                CHECK(filled(p[j], got[j] < 64 * KiB ? got[j] : 64 * KiB, (unsigned)(step * N + j)));
                CHECK_OK(vram_free(p[j]));
            }
        }
        for (int j = 0; j < N; j++) {
            if (kept[j] != NULL) CHECK(filled(kept[j], size[j] < 64 * KiB ? size[j] : 64 * KiB, 0xee + (unsigned)j));
        }
        CHECK_ALL();
    }
    CHECK_U64(INFO(0).plan_steps, >, 0);            /* a plan was in force for some steps */
    CHECK_U64(INFO(0).plan_slot_steps, >, 0);       /* and served by slots in some (7-22 of 40) */
    for (int j = 0; j < N; j++) if (kept[j] != NULL) CHECK_OK(vram_free(kept[j]));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* PyTorch's way: every request and free on one stream through the plugin entry points (the arena
 * goes solo: an owned-stream free on that stream is free at once). The step of
 * plan_in_force_places_the_step_and_gives_back, on stream 0x7: the plan comes into force as there
 * (steps 4 to 10) and the pool holds W + 48 MiB. */
TEST(plan_on_one_stream_as_pytorch_allocates) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *s = (void *)(uintptr_t)0x7;
    void *w = vram_plugin_alloc(8 * PMiB, 0, s);
    CHECK(w != NULL);
    for (int step = 1; step <= 10; step++) {
        void *a = vram_plugin_alloc(16 * PMiB, 0, s), *b = vram_plugin_alloc(16 * PMiB, 0, s);
        CHECK(a != NULL && b != NULL);
        vram_plugin_free(a, 16 * PMiB, 0, s);
        void *c = vram_plugin_alloc(32 * PMiB, 0, s);
        CHECK(c != NULL);
        vram_plugin_free(b, 16 * PMiB, 0, s);
        vram_plugin_free(c, 32 * PMiB, 0, s);
        CHECK_ALL();
    }
    vram_memory_info info = INFO(0);
    CHECK_U64(info.plan_steps, ==, 7);
    CHECK_SIZE(info.plan_bytes, ==, 48 * PMiB);
    CHECK_SIZE(info.reserved, ==, 56 * PMiB);
    vram_plugin_free(w, 8 * PMiB, 0, s);
    vram__sim_stream_complete(s);
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}
