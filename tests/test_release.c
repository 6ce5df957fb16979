/*
 * test_release.c: giving memory back and the allocator options: vram_trim, growth that maps
 * physical extents lazily into a reserved range (and unmaps idle ones under the limit), the
 * idle-release thread (idle_release_ms), vram_set_alloc_conf and VRAM_ALLOC_CONF.
 *
 * The simulated backend's call counters (vram__backend_sim.counters, zeroed when the runtime
 * opens the backend) show what the pool asks of the driver. Blocks are written with a pattern
 * and read back after memory was given back: on the simulated GPU an unmapped range is
 * PROT_NONE and a remapped one reads zeros, so a live block that lost its memory is caught.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "harness.h"

#define GRAN (2 * MiB)
#define STREAM_A ((void *)0x1)
#define STREAM_B ((void *)0x2)

static const char MSG_ALLOC_CONF[] = "Allocator options cannot be modified after being initialized";

/* ---- helpers ----------------------------------------------------------------------------------- */

static size_t round_gran(size_t n) {
    return (n + GRAN - 1) & ~(GRAN - 1);
}

/* A growing pool on one simulated 16 GiB card with `limit` as its cap; starts the runtime. */
static void start_growth(size_t limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, limit));
    CHECK_OK(vram_init());
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Polls (every 5 ms, at most timeout_ms) until reserved <= bytes; returns the last info. */
static vram_memory_info wait_reserved_at_most(int dev, size_t bytes, unsigned timeout_ms) {
    double until = now_ms() + timeout_ms;
    vram_memory_info info = INFO(dev);
    while (info.reserved > bytes && now_ms() < until) {
        sleep_ms(5);
        info = INFO(dev);
    }
    return info;
}

/* ---- vram_trim ----------------------------------------------------------------------------------- */

TEST(trim_growth_returns_free_extents) {
    CHECK_OK(vram_set_alloc_conf("extent_mb:256,map_ahead_mb:0"));   /* one extent per 32 MiB block */
    start_growth(1 * GiB);
    enum { N = 8 };
    const size_t sz = 32 * MiB;
    void *b[N];
    for (int i = 0; i < N; i++) {
        CHECK_OK(vram_malloc(&b[i], sz, 0));
        fill(b[i], sz, (unsigned)i);
    }
    for (int i = 1; i < N; i += 2) CHECK_OK(vram_free(b[i]));
    CHECK_ALL();
    vram_memory_info before = INFO(0);
    vram__backend_counters cb = sim_counters();
    CHECK_SIZE(before.current, ==, 4 * sz);
    CHECK_SIZE(before.reserved, ==, 8 * sz);   /* freeing alone gives nothing back */

    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    vram_memory_info after = INFO(0);
    vram__backend_counters ca = sim_counters();
    CHECK_INFO_SANE(after);
    CHECK_SIZE(after.current, ==, before.current);
    CHECK_SIZE(after.reserved, ==, after.current);          /* every free extent went back */
    CHECK_U64(after.num_driver_frees, >, before.num_driver_frees);
    CHECK_U64(after.num_driver_frees - before.num_driver_frees, ==, ca.phys_release - cb.phys_release);
    CHECK_U64(ca.unmap - cb.unmap, ==, 4);
    CHECK_U64(after.num_allocs, ==, before.num_allocs);
    CHECK_U64(after.num_frees, ==, before.num_frees);
    CHECK_SIZE(after.peak_reserved, ==, before.peak_reserved);
    CHECK_SIZE(after.largest_free_block, ==, 0);            /* nothing free is mapped any more */
    for (int i = 0; i < N; i += 2) CHECK(filled(b[i], sz, (unsigned)i));  /* live blocks untouched */

    /* later allocations map memory again */
    void *x = NULL, *y = NULL;
    CHECK_OK(vram_malloc(&x, 64 * MiB, 0));
    fill(x, 64 * MiB, 100);
    CHECK_OK(vram_malloc(&y, 1 * MiB, 0));
    fill(y, 1 * MiB, 101);
    CHECK_ALL();
    vram_memory_info again = INFO(0);
    CHECK_SIZE(again.current, ==, 4 * sz + 64 * MiB + 1 * MiB);
    CHECK_SIZE(again.reserved, >=, again.current);
    CHECK_SIZE(again.reserved, <=, again.current + 2 * GRAN);
    CHECK(filled(x, 64 * MiB, 100));
    CHECK(filled(y, 1 * MiB, 101));
    for (int i = 0; i < N; i += 2) CHECK(filled(b[i], sz, (unsigned)i));

    CHECK_OK(vram_free(x));
    CHECK_OK(vram_free(y));
    for (int i = 0; i < N; i += 2) CHECK_OK(vram_free(b[i]));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    vram__backend_counters cz = sim_counters();
    CHECK_U64(cz.phys_create, ==, cz.phys_release);
    CHECK_U64(cz.map, ==, cz.unmap);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

TEST(trim_large_keep_releases_nothing) {
    start_growth(1 * GiB);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 16 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 48 * MiB, 0));
    CHECK_OK(vram_free(b));
    vram_memory_info before = INFO(0);
    vram__backend_counters cb = sim_counters();
    CHECK_OK(vram_trim(0, 48 * MiB));            /* exactly what is cached */
    CHECK_OK(vram_trim(0, 1 * GiB));
    CHECK_OK(vram_trim(0, SIZE_MAX));
    vram_memory_info after = INFO(0);
    vram__backend_counters ca = sim_counters();
    CHECK_INFO_EQ(before, after);
    CHECK_U64(ca.phys_release, ==, cb.phys_release);
    CHECK_U64(ca.unmap, ==, cb.unmap);
    CHECK_ALL();
    CHECK_OK(vram_free(a));
}

/* keep_bytes between nothing and everything: at most keep_bytes stay cached, whole extents go. */
TEST(trim_partial_keep) {
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));   /* only what blocks need is mapped */
    start_growth(1 * GiB);
    void *b[4];
    for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc(&b[i], 32 * MiB, 0));
    void *live = NULL;
    CHECK_OK(vram_malloc(&live, 8 * MiB, 0));
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(b[i]));
    vram_memory_info before = INFO(0);
    CHECK_SIZE(before.reserved - before.current, ==, 128 * MiB);
    CHECK_OK(vram_trim(0, 80 * MiB));
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.reserved - after.current, <=, 80 * MiB);
    CHECK_SIZE(after.reserved - after.current, >, 80 * MiB - 16 * MiB);  /* no more than needed (16 MiB
                                                                           * extents: limit / 64) */
    CHECK_SIZE(after.current, ==, 8 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);
    CHECK_OK(vram_free(live));
    CHECK_ALL();
}

TEST(trim_unknown_logical_device) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_trim(2, 0));
    CHECK_ERROR_CONTAINS("Unrecognized device: 2");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_trim(-1, 0));
    CHECK_ERROR_CONTAINS("Unrecognized device: -1");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_trim(1000, 0));
    CHECK_OK(vram_trim(1, 0));
    CHECK_ALL();
}

TEST(trim_starts_the_runtime) {
    use_sim("16GiB");
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_OK(vram_trim(0, 0));
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_ALL();
}

TEST(trim_prealloc_empty_gives_everything_back) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    CHECK_OK(vram_init());
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 10 * MiB, 0));
    CHECK_OK(vram_free(p));
    vram_memory_info before = INFO(0);
    CHECK_SIZE(before.reserved, ==, 256 * MiB);
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    vram_memory_info after = INFO(0);
    CHECK_INFO_SANE(after);
    CHECK_SIZE(after.reserved, ==, 0);
    CHECK_SIZE(after.limit, ==, 256 * MiB);
    CHECK_U64(after.num_driver_frees, ==, before.num_driver_frees + 1);
    vram__backend_counters c = sim_counters();
    CHECK_U64(c.mem_free, ==, 1);
    CHECK_U64(c.mem_alloc, ==, 1);

    /* the next allocation takes the whole preallocation again */
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    fill(p, 1 * MiB, 7);
    vram_memory_info again = INFO(0);
    CHECK_SIZE(again.reserved, ==, 256 * MiB);
    CHECK_SIZE(again.current, ==, 1 * MiB);
    CHECK_U64(again.num_driver_allocs, ==, before.num_driver_allocs + 1);
    CHECK_U64(sim_counters().mem_alloc, ==, 2);
    CHECK_ALL();
    /* and the whole limit is usable again in one block */
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_malloc(&p, 256 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A trimmed preallocated pool, then a request the re-taken preallocation cannot hold. */
TEST(trim_prealloc_then_oversized_request) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 65 * MiB, 0));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, <=, 64 * MiB);
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(trim_prealloc_with_live_blocks_keeps) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 10 * MiB, 0));
    CHECK_OK(vram_malloc(&q, 100 * MiB, 0));
    CHECK_OK(vram_free(q));
    fill(p, 10 * MiB, 3);
    vram_memory_info before = INFO(0);
    CHECK_OK(vram_trim(0, 0));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_SIZE(after.reserved, ==, 256 * MiB);
    CHECK(filled(p, 10 * MiB, 3));
    CHECK_U64(sim_counters().mem_free, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_free(p));
}

/* Growth without VMM (plain regions): a region with no live block goes back, others stay. */
TEST(trim_growth_plain_returns_free_regions) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 10 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 20 * MiB, 0));
    fill(b, 20 * MiB, 9);
    vram__backend_counters c0 = sim_counters();
    CHECK_U64(c0.phys_create, ==, 0);
    CHECK_U64(c0.va_reserve, ==, 0);
    CHECK_U64(c0.mem_alloc, ==, 2);
    CHECK_SIZE(INFO(0).reserved, ==, 30 * MiB);
    CHECK_OK(vram_free(a));
    vram_memory_info before = INFO(0);
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.reserved, ==, 20 * MiB);
    CHECK_U64(after.num_driver_frees, ==, before.num_driver_frees + 1);
    CHECK_U64(sim_counters().mem_free, ==, 1);
    CHECK(filled(b, 20 * MiB, 9));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_U64(sim_counters().mem_free, ==, 2);
    CHECK_ALL();
    /* and it grows again */
    CHECK_OK(vram_malloc(&a, 5 * MiB, 0));
    CHECK_SIZE(INFO(0).reserved, >=, 5 * MiB);
    CHECK_OK(vram_free(a));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* A limit that is not a whole number of granules: its last piece is a plain region, which a
 * trim gives back too. */
TEST(trim_growth_odd_limit) {
    const size_t limit = 64 * MiB + 512 * KiB;
    start_growth(limit);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, limit, 0));          /* the whole limit in one block */
    fill(p, limit, 1);
    CHECK_SIZE(INFO(0).reserved, ==, limit);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* Memory under a stream-ordered free is in use until the stream passes the free. */
TEST(trim_waits_for_pending_frees) {
    start_growth(1 * GiB);
    void *p = NULL;
    CHECK_OK(vram_malloc_async(&p, 32 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 32 * MiB);   /* the GPU may still use it */
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 0);
}

/* ---- the limit under pressure: idle memory is reused ----------------------------------------------- */

TEST(pressure_reserved_within_limit_reuses_idle) {
    const size_t limit = 64 * MiB, sz = 4 * MiB;
    start_growth(limit);
    enum { N = 15 };  /* 60 of 64 MiB */
    void *b[N];
    for (int i = 0; i < N; i++) {
        CHECK_OK(vram_malloc(&b[i], sz, 0));
        fill(b[i], sz, (unsigned)i);
        CHECK_ALL();
        CHECK_SIZE(INFO(0).reserved, <=, limit);
    }
    for (int i = 0; i < N; i += 2) {
        CHECK_OK(vram_free(b[i]));
        CHECK_ALL();
    }
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 7 * sz);
    CHECK_SIZE(info.reserved, ==, 15 * sz);
    /* larger than any hole (4 MiB), smaller than limit - current (36 MiB) */
    void *big = NULL;
    vram_status s = vram_malloc(&big, 32 * MiB, 0);
    if (s != VRAM_OK) {
        printf("  32 MiB with 36 MiB of the limit unused failed: %s\n", vram_last_error());
    }
    CHECK_OK(s);
    fill(big, 32 * MiB, 77);
    CHECK_ALL();
    info = INFO(0);
    CHECK_INFO_SANE(info);
    CHECK_SIZE(info.reserved, <=, limit);
    CHECK_SIZE(info.current, ==, 7 * sz + 32 * MiB);
    /* the last 4 MiB of the limit */
    void *last = NULL;
    CHECK_OK(vram_malloc(&last, 4 * MiB, 0));
    fill(last, 4 * MiB, 78);
    CHECK_ALL();
    info = INFO(0);
    CHECK_SIZE(info.current, ==, limit);
    CHECK_SIZE(info.reserved, ==, limit);
    void *none = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&none, 256, 0));
    CHECK_ALL();
    for (int i = 1; i < N; i += 2) CHECK(filled(b[i], sz, (unsigned)i));
    CHECK(filled(big, 32 * MiB, 77));
    CHECK(filled(last, 4 * MiB, 78));
    /* everything freed: the whole limit in one block */
    for (int i = 1; i < N; i += 2) CHECK_OK(vram_free(b[i]));
    CHECK_OK(vram_free(big));
    CHECK_OK(vram_free(last));
    CHECK_ALL();
    void *all = NULL;
    CHECK_OK(vram_malloc(&all, limit, 0));
    fill(all, limit, 79);
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, limit);
    CHECK_OK(vram_free(all));
    CHECK_ALL();
}

/* Where best fit would map new memory, memory already mapped serves first: here the exact fit is a
 * hole a trim unmapped, and a larger free chunk is still mapped. */
TEST(growth_prefers_mapped_memory_to_mapping_more) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:2"));
    start_growth(256 * MiB);
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    CHECK_OK(vram_malloc(&a, 4 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&c, 8 * MiB, 0));
    CHECK_OK(vram_malloc(&d, 2 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_trim(0, 0));                       /* a's memory goes back */
    CHECK_OK(vram_free(c));                          /* c's stays mapped */
    vram_memory_info before = INFO(0);
    CHECK_SIZE(before.reserved, ==, 12 * MiB);
    CHECK_OK(vram_malloc(&e, 4 * MiB, 0));           /* fits a's hole exactly, but that is unmapped */
    CHECK_PTR(e, ==, c);
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.reserved, ==, before.reserved);
    CHECK_U64(after.num_driver_allocs, ==, before.num_driver_allocs);
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(d));
    CHECK_OK(vram_free(e));
    CHECK_ALL();
}

/* hold_large_mb: a large block that fits no idle hole takes the holes' memory (unmapped there,
 * mapped under it) rather than raise the high-water mark; smaller blocks, or the option at 0, map
 * more. */
TEST(growth_hold_large_moves_idle_memory_under_a_large_block) {
    for (int mode = 0; mode < 3; mode++) {
        static const char *const conf[] = {"map_ahead_mb:0,extent_mb:2,hold_large_mb:8",
                                           "map_ahead_mb:0,extent_mb:2,hold_large_mb:0",
                                           "map_ahead_mb:0,extent_mb:2,hold_large_mb:12"};
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf(conf[mode]));
        start_growth(256 * MiB);
        void *a = NULL, *b = NULL, *big = NULL;
        CHECK_OK(vram_malloc(&a, 6 * MiB, 0));
        CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
        CHECK_OK(vram_free(a));                          /* a 6 MiB idle hole, still mapped */
        CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);
        CHECK_OK(vram_malloc(&big, 10 * MiB, 0));        /* does not fit the hole */
        vram_memory_info info = INFO(0);
        printf("  %s: reserved %zu MiB, peak %zu MiB\n", conf[mode], info.reserved / MiB, info.peak_reserved / MiB);
        CHECK_SIZE(info.reserved, ==, mode == 0 ? 12 * MiB : 18 * MiB);
        CHECK_SIZE(info.peak_reserved, ==, info.reserved);
        CHECK_ALL();
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(big));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
    }
}

/* Where an idle extent would be given back for a block to be mapped (hold_large_mb, or the limit
 * near), it is moved under the block instead: an unmap and a map of its handle, no physical memory
 * released and created anew (on the H200 releasing a large extent costs 0.3-1.1 ms, moving it
 * 0.07-0.15: bench/vmm_costs.c). Mode 0 by hold_large_mb, mode 1 by the limit; modes 2 and 3 make
 * the move's map, then its unmap, fail: the block is served all the same, nothing is lost. */
TEST(growth_moves_idle_extents_under_a_block) {
    for (int mode = 0; mode < 4; mode++) {
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf(mode == 1 ? "map_ahead_mb:0,extent_mb:64"
                                               : "map_ahead_mb:0,extent_mb:64,hold_large_mb:8"));
        start_growth(mode == 1 ? 100 * MiB : 1 * GiB);
        void *a = NULL, *b = NULL, *big = NULL;
        CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
        CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
        CHECK_OK(vram_free(a));                          /* an idle 64 MiB extent */
        vram_memory_info before = INFO(0);
        vram__backend_counters cb = sim_counters();
        CHECK_SIZE(before.reserved, ==, 66 * MiB);
        if (mode == 2) vram__sim_fail_maps(1, 0);
        if (mode == 3) vram__sim_fail_maps(0, 1);
        CHECK_OK(vram_malloc(&big, 96 * MiB, 0));        /* fits no hole */
        vram__sim_fail_maps(0, 0);
        fill(big, 96 * MiB, 5);
        vram_memory_info after = INFO(0);
        vram__backend_counters ca = sim_counters();
        printf("  mode %d: reserved %zu MiB, creates %" PRIu64 ", releases %" PRIu64 ", moves %" PRIu64 "\n", mode,
               after.reserved / MiB, ca.phys_create - cb.phys_create, ca.phys_release - cb.phys_release,
               after.num_driver_moves - before.num_driver_moves);
        CHECK_SIZE(after.reserved, ==, 98 * MiB);
        CHECK_SIZE(after.peak_reserved, ==, 98 * MiB);
        CHECK_U64(after.num_driver_moves - before.num_driver_moves, ==, mode < 2 ? 1 : 0);
        CHECK_U64(ca.phys_release - cb.phys_release, ==, mode < 2 ? 0 : 1);
        CHECK_U64(ca.phys_create - cb.phys_create, ==, mode < 2 ? 1 : 2);   /* 32 MiB, or 64 + 32 */
        CHECK_U64(after.num_driver_frees - before.num_driver_frees, ==, ca.phys_release - cb.phys_release);
        CHECK_U64(after.num_driver_allocs - before.num_driver_allocs, ==, ca.phys_create - cb.phys_create);
        CHECK_ALL();
        void *again = NULL;                              /* a's hole, unmapped now: mapped anew */
        size_t size = mode == 1 ? 2 * MiB : 64 * MiB;    /* (the limit's last 2 MiB) */
        CHECK_OK(vram_malloc(&again, size, 0));
        if (mode != 1) CHECK_PTR(again, ==, a);       /* (a small block has a zone of its own) */
        fill(again, size, 6);
        CHECK(filled(big, 96 * MiB, 5));
        CHECK_ALL();
        CHECK_OK(vram_free(again));
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(big));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
    }
}

/* An idle extent larger than the unmapped part of a block may still go under it when the block ends
 * the mapped memory: what reaches past the block is mapped idle memory there, as memory mapped ahead.
 * Here a 96 MiB block starts over 40 MiB still mapped (a freed block's extent) and takes a 64 MiB
 * idle extent for its last 56 MiB: no memory created, none released. */
TEST(growth_moved_extent_may_reach_past_the_block) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:64,hold_large_mb:8"));
    start_growth(1 * GiB);
    void *a = NULL, *b = NULL, *c = NULL, *big = NULL, *next = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&c, 40 * MiB, 0));
    CHECK_OK(vram_free(a));                          /* a 64 MiB idle extent in a hole */
    CHECK_OK(vram_free(c));                          /* 40 MiB idle at the end of the mapped memory */
    vram_memory_info before = INFO(0);
    vram__backend_counters cb = sim_counters();
    CHECK_SIZE(before.reserved, ==, 106 * MiB);
    CHECK_OK(vram_malloc(&big, 96 * MiB, 0));
    CHECK_PTR(big, ==, c);
    fill(big, 96 * MiB, 7);
    vram_memory_info after = INFO(0);
    vram__backend_counters ca = sim_counters();
    CHECK_SIZE(after.reserved, ==, 106 * MiB);
    CHECK_U64(after.num_driver_moves - before.num_driver_moves, ==, 1);
    CHECK_U64(ca.phys_create - cb.phys_create, ==, 0);
    CHECK_U64(ca.phys_release - cb.phys_release, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_malloc(&next, 8 * MiB, 0));       /* the 8 MiB past big: mapped already */
    CHECK_PTR(next, ==, (char *)big + 96 * MiB);
    CHECK_U64(sim_counters().phys_create, ==, ca.phys_create);
    fill(next, 8 * MiB, 8);
    CHECK(filled(big, 96 * MiB, 7));
    CHECK_ALL();
    CHECK_OK(vram_free(next));
    CHECK_OK(vram_free(big));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

/* small_pool_kb (default 256): small requests have an address range of their own, so that a small
 * block made while a large one's hole is free does not settle in that hole and keep the next
 * large block of that size out of it (KV caches grown by torch.cat between small tensors). With
 * the option at 0 the same calls map more. */
TEST(growth_small_blocks_keep_out_of_large_holes) {
    for (int zone = 1; zone >= 0; zone--) {
        printf("  small zone %s\n", zone ? "on" : "off (small_pool_kb:0)");   /* which mode failed */
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf(zone ? "map_ahead_mb:0,extent_mb:2"
                                          : "map_ahead_mb:0,extent_mb:2,small_pool_kb:0"));
        start_growth(1 * GiB);
        void *a = NULL, *s = NULL, *b = NULL, *t = NULL, *c = NULL;
        CHECK_OK(vram_malloc(&a, 4 * MiB, 0));
        CHECK_OK(vram_malloc(&s, 4 * KiB, 0));
        CHECK_OK(vram_malloc(&b, 4 * MiB, 0));
        CHECK_SIZE(INFO(0).reserved, ==, 10 * MiB);       /* 8 MiB + a granule for the small block */
        CHECK_OK(vram_free(a));
        CHECK_OK(vram_malloc(&t, 4 * KiB, 0));            /* a small block while a's hole is free */
        CHECK_OK(vram_malloc(&c, 4 * MiB, 0));
        uintptr_t ua = (uintptr_t)a, ut = (uintptr_t)t;
        if (zone) {
            CHECK(ut < ua || ut >= ua + 4 * MiB);         /* not in the hole: in the small zone */
            CHECK_PTR(c, ==, a);                          /* the hole whole, for a block its size */
            CHECK_SIZE(INFO(0).reserved, ==, 10 * MiB);
        } else {
            CHECK_PTR(t, ==, a);                          /* best fit: the hole was the smallest chunk */
            CHECK_PTR(c, !=, a);
            CHECK_SIZE(INFO(0).reserved, ==, 14 * MiB);
        }
        CHECK_ALL();
        CHECK_OK(vram_free(s));
        CHECK_OK(vram_free(t));
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(c));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
    }
}

/* The small zone spans limit / 8 of address space: once full, small requests go on in the rest of
 * the range, up to the limit; the zones' free chunks never merge across their edge, and a trim
 * gives both back. */
TEST(growth_small_zone_full_spills_into_the_rest) {
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:2"));
    start_growth(64 * MiB);                                /* an 8 MiB small zone */
    enum { N = 48 };
    void *p[N];
    for (int order = 0; order < 2; order++) {              /* frees upward, then downward */
        for (int i = 0; i < N; i++) {                      /* 12 MiB of 256 KiB blocks */
            CHECK_OK(vram_malloc(&p[i], 256 * KiB, 0));
            uintptr_t at = (uintptr_t)p[i], zone = (uintptr_t)p[0];
            if (i < 32) CHECK_SIZE(at - zone, ==, (size_t)i * 256 * KiB);   /* packed in the zone */
            else CHECK(at >= zone + 8 * MiB);                                /* beyond it */
        }
        CHECK_SIZE(INFO(0).reserved, ==, 12 * MiB);
        CHECK_ALL();
        for (int i = 0; i < N; i++) CHECK_OK(vram_free(p[order ? N - 1 - i : i]));
        CHECK_ALL();                                       /* both zones free, unmerged, sound */
    }
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    void *big = NULL;
    CHECK_OK(vram_malloc(&big, 60 * MiB, 0));              /* the rest of the range holds the limit */
    CHECK_SIZE(INFO(0).reserved, ==, 60 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(big));
}

/* At a limit of one granule the zones cannot both map: whichever comes second is served from the
 * memory the other zone mapped (the limit's fallback looks in both), so a small and a large block
 * that fit the limit together never fail for being apart. */
TEST(growth_small_zone_shares_a_one_granule_limit) {
    for (int order = 0; order < 2; order++) {
        printf("  the %s block first\n", order ? "large" : "small");           /* which order failed */
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
        start_growth(GRAN);
        void *small = NULL, *large = NULL;
        if (order == 0) CHECK_OK(vram_malloc(&small, 256 * KiB, 0));
        CHECK_OK(vram_malloc(&large, 1536 * KiB, 0));
        if (order == 1) CHECK_OK(vram_malloc(&small, 256 * KiB, 0));
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.reserved, ==, GRAN);
        CHECK_SIZE(info.current, ==, 1792 * KiB);
        CHECK_ALL();
        CHECK_OK(vram_free(small));
        CHECK_OK(vram_free(large));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
    }
}

/* Small blocks placed in the memory of a freed large block keep part of it busy; a large request
 * afterwards must still fit when the limit leaves room for it. */
TEST(pressure_small_blocks_in_freed_large_extent) {
    const size_t limit = 64 * MiB;
    start_growth(limit);
    void *big = NULL, *small[4], *next = NULL;
    CHECK_OK(vram_malloc(&big, 48 * MiB, 0));
    CHECK_OK(vram_free(big));
    for (int i = 0; i < 4; i++) {
        CHECK_OK(vram_malloc(&small[i], 1 * MiB, 0));
        fill(small[i], 1 * MiB, (unsigned)i);
    }
    CHECK_ALL();
    /* 4 MiB live: 60 MiB must be allocatable in one block */
    vram_status s = vram_malloc(&next, 60 * MiB, 0);
    if (s != VRAM_OK) printf("  60 MiB with 4 MiB live in a 64 MiB limit: %s\n", vram_last_error());
    CHECK_OK(s);
    fill(next, 60 * MiB, 9);
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, <=, limit);
    for (int i = 0; i < 4; i++) CHECK(filled(small[i], 1 * MiB, (unsigned)i));
    CHECK_OK(vram_free(next));
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(small[i]));
    CHECK_ALL();
}

/* Under a chosen limit every granule can be moved or given back on its own, so a large request
 * fits wherever the bytes exist. Limit 1 GiB (whose extents were limit / 256 = 4 MiB before). 128
 * blocks of 4 MiB side by side, freed: 512 MiB mapped, idle. 256 blocks of 2 MiB take the same
 * place; every other one freed: 256 MiB live, 256 MiB free in 128 holes of one granule each. A
 * request of 700 MiB fits under the limit (956 MiB live), and only by taking the 128 idle
 * granules: 512 MiB is all the limit leaves to map. With extents of 4 MiB (extent_mb:4) each
 * extent holds one live block, nothing is idle, and the request fails although the bytes exist. */
TEST(pressure_chosen_limit_moves_every_idle_granule) {
    for (int coarse = 0; coarse <= 1; coarse++) {
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf(coarse ? "extent_mb:4,map_ahead_mb:0,small_pool_kb:0"
                                            : "map_ahead_mb:0,small_pool_kb:0"));
        start_growth(1 * GiB);
        void *b[256], *big = NULL;
        for (int i = 0; i < 128; i++) CHECK_OK(vram_malloc(&b[i], 4 * MiB, 0));
        for (int i = 0; i < 128; i++) CHECK_OK(vram_free(b[i]));
        CHECK_U64(sim_counters().phys_create, ==, coarse ? 128 : 256);
        for (int i = 0; i < 256; i++) {
            CHECK_OK(vram_malloc(&b[i], 2 * MiB, 0));
            fill(b[i], 64 * KiB, (unsigned)i);   /* (the start of each: time) */
        }
        CHECK_SIZE(INFO(0).reserved, ==, 512 * MiB);
        for (int i = 0; i < 256; i += 2) CHECK_OK(vram_free(b[i]));
        vram_status s = vram_malloc(&big, 700 * MiB, 0);
        if (coarse) {
            CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
            CHECK_SIZE(INFO(0).reserved, ==, 512 * MiB);
        } else {
            CHECK_OK(s);
            fill((char *)big + 699 * MiB, 1 * MiB, 7);   /* its last granule is mapped */
            CHECK_SIZE(INFO(0).reserved, <=, 1 * GiB);
            /* at least 700 - 512 MiB of it came from idle granules moved under it */
            CHECK_U64(INFO(0).num_driver_moves, >=, (700 - 512) / 2);
            CHECK(filled((char *)big + 699 * MiB, 1 * MiB, 7));
            CHECK_OK(vram_free(big));
        }
        CHECK_ALL();
        for (int i = 1; i < 256; i += 2) CHECK(filled(b[i], 64 * KiB, (unsigned)i));
        for (int i = 1; i < 256; i += 2) CHECK_OK(vram_free(b[i]));
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
}

/* Two growing logical devices share a card cap: idle memory of one is not given back for the
 * other by itself (the request fails, naming the shared limit); vram_trim on the first makes room. */
TEST(pressure_shared_card_budget_and_trim) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    vram_logical_device_configuration two[2] = {{64}, {64}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 48 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 48 * MiB, 1));
    CHECK_ERROR_CONTAINS("shared by its logical devices");
    CHECK_ALL();
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_malloc(&b, 48 * MiB, 1));
    CHECK_ALL();
    CHECK_OK(vram_free(b));
}

/* ---- tight-limit replay ---------------------------------------------------------------------------- */

enum { RP_HELD = 768, RP_OPS = 24000 };

typedef struct rp_op {
    uint32_t at;      /* which of the RP_HELD pointers */
    uint32_t alloc;   /* 1: allocate size into it, 0: free it */
    size_t   size;
} rp_op;

static size_t rp_size(test_rng *r, size_t limit) {
    uint64_t k = rng_below(r, 20);
    if (k < 12) return rng_size_log(r, 1, 256 * KiB);             /* small */
    if (k < 18) return rng_size_log(r, 256 * KiB, 8 * MiB);       /* medium */
    return rng_size_log(r, 8 * MiB, limit / 8);                   /* large */
}

/* A deterministic workload whose live bytes (rounded to 256) never pass 95% of the limit and
 * reach it over and over. Returns the number of operations; *peak the highest live bytes. */
static size_t rp_build(rp_op *ops, uint64_t seed, size_t limit, size_t *peak) {
    test_rng r = rng_make(seed);
    size_t target = limit / 100 * 95, live = 0, n = 0;
    size_t size[RP_HELD] = {0};
    uint32_t live_at[RP_HELD], nlive = 0;  /* the live ones */
    uint32_t spare[RP_HELD], nspare = RP_HELD;
    for (uint32_t i = 0; i < RP_HELD; i++) spare[i] = RP_HELD - 1 - i;
    *peak = 0;
    while (n < RP_OPS - RP_HELD - 1) {
        int do_free = nlive > 0 && (nspare == 0 || rng_below(&r, 100) < 45);
        size_t want = do_free ? 0 : round256(rp_size(&r, limit));
        while (nlive > 0 && (do_free || live + want > target)) {
            uint32_t k = (uint32_t)rng_below(&r, nlive), s = live_at[k];
            ops[n++] = (rp_op){s, 0, size[s]};
            live -= size[s];
            live_at[k] = live_at[--nlive];
            spare[nspare++] = s;
            do_free = 0;
        }
        if (want == 0) continue;
        uint32_t s = spare[--nspare];
        size[s] = want;
        live_at[nlive++] = s;
        live += want;
        if (live > *peak) *peak = live;
        ops[n++] = (rp_op){s, 1, want};
    }
    while (nlive > 0) {
        uint32_t s = live_at[--nlive];
        ops[n++] = (rp_op){s, 0, size[s]};
    }
    return n;
}

typedef struct rp_result {
    size_t ooms, first_oom_op, ops;
    char   first_oom[1024];
    vram_memory_info at_first_oom;
    size_t unforced;      /* failures the limit did not force (rp_forced), when checked */
} rp_result;

static int rp_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether the limit itself forces a request of `size` bytes to fail, with the blocks of ptr[] live
 * (sizes from `size_of`): memory is mapped in 2 MiB granules, and a granule under a byte of a live block
 * cannot move or go back, while every other granule can (moved under the request or given back); the
 * request needs ceil(size / 2 MiB) granules of its own at least. So it is forced only when the granules
 * under live blocks and the request's own come to more than the limit. */
static int rp_forced(void *const *ptr, const size_t *size_of, size_t size, size_t limit) {
    size_t cap = limit / GRAN + 2 * RP_HELD, k = 0;   /* live bytes are below the limit: their granules, */
    uint64_t *g = malloc(cap * sizeof *g);             /* plus at most 2 partial ones a block */
    CHECK(g != NULL);
    if (g == NULL) return 1;
    for (size_t s = 0; s < RP_HELD; s++) {
        if (ptr[s] == NULL) continue;
        uint64_t lo = (uint64_t)(uintptr_t)ptr[s] / GRAN, hi = ((uint64_t)(uintptr_t)ptr[s] + size_of[s] - 1) / GRAN;
        for (uint64_t x = lo; x <= hi && k < cap; x++) g[k++] = x;
    }
    CHECK_SIZE(k, <, cap);
    qsort(g, k, sizeof *g, rp_cmp_u64);
    size_t held = 0;
    for (size_t i = 0; i < k; i++) held += i == 0 || g[i] != g[i - 1];
    free(g);
    return (held + round_gran(size) / GRAN) * GRAN > limit;
}

/* Replays the workload on logical device 0; with `strict`, checks the pool after every step, and
 * counts the failures the limit did not force (rp_forced) in unforced. */
static rp_result rp_replay(const rp_op *ops, size_t n, size_t limit, int strict) {
    rp_result res = {0};
    res.ops = n;
    void **ptr = calloc(RP_HELD, sizeof *ptr);
    size_t *size_of = calloc(RP_HELD, sizeof *size_of);
    CHECK(ptr != NULL && size_of != NULL);
    for (size_t i = 0; i < n; i++) {
        const rp_op *op = &ops[i];
        if (op->alloc) {
            vram_status s = vram_malloc(&ptr[op->at], op->size, 0);
            size_of[op->at] = op->size;
            if (s != VRAM_OK) {
                CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
                ptr[op->at] = NULL;
                if (strict && !rp_forced(ptr, size_of, op->size, limit)) {
                    if (res.unforced++ == 0) printf("  not forced by the limit: %s\n", vram_last_error());
                }
                if (res.ooms++ == 0) {
                    res.first_oom_op = i;
                    snprintf(res.first_oom, sizeof res.first_oom, "%s", vram_last_error());
                    res.at_first_oom = INFO(0);
                }
            }
        } else if (ptr[op->at] != NULL) {
            CHECK_OK(vram_free(ptr[op->at]));
            ptr[op->at] = NULL;
        }
        if (strict) {
            CHECK_OK(vram_check(0));
            CHECK_SIZE(INFO(0).reserved, <=, limit);
        }
    }
    free(ptr);
    free(size_of);
    CHECK_ALL();
    CHECK_SIZE(INFO(0).current, ==, 0);
    return res;
}

static void rp_print(const char *what, const rp_result *r) {
    if (r->ooms == 0) {
        printf("  %s: %zu operations, no out-of-memory\n", what, r->ops);
    } else {
        printf("  %s: %zu of %zu operations failed; first at operation %zu (current %zu, reserved %zu, "
               "limit %zu): %s\n", what, r->ooms, r->ops, r->first_oom_op, r->at_first_oom.current,
               r->at_first_oom.reserved, r->at_first_oom.limit, r->first_oom);
    }
}

/* One workload for every replay test (so that their results compare), unless VRAM_TEST_SEED. */
#define RP_SEED ((uint64_t)0x5eed95)

static rp_op *rp_workload(size_t limit, size_t *n) {
    rp_op *ops = malloc((RP_OPS + 2 * RP_HELD) * sizeof *ops);  /* a last round and the final frees */
    CHECK(ops != NULL);
    size_t peak = 0;
    uint64_t seed = getenv("VRAM_TEST_SEED") != NULL ? harness_seed() : RP_SEED;
    printf("  workload seed %" PRIu64 "\n", seed);
    *n = rp_build(ops, seed, limit, &peak);
    CHECK_SIZE(peak, <=, limit / 100 * 95);
    CHECK_SIZE(peak, >=, limit / 100 * 93);   /* the workload does come close to 95% */
    return ops;
}

/* A random workload at 95% of a small limit defeats any allocator that does not move blocks:
 * live blocks end up scattered over every granule. The replay reports how many requests failed
 * (the real traces must not fail at 95%: tests/cli_test.sh checks that), checks the pool's
 * invariants at every step and that reserved stays within the limit, and that every failure was
 * forced by the limit (rp_forced: the granules under live blocks, which cannot move, and the
 * request's own whole granules come to more than the limit): growth moves or gives back every other
 * granule rather than fail. */
TEST(replay_tight_limit_vmm_report) {
    const size_t limit = 256 * MiB;
    size_t n = 0;
    rp_op *ops = rp_workload(limit, &n);
    start_growth(limit);
    rp_result r = rp_replay(ops, n, limit, 1);
    rp_print("growth (vmm)", &r);
    vram_memory_info info = INFO(0);
    printf("  peak %zu, peak_reserved %zu, driver allocs %" PRIu64 ", driver frees %" PRIu64 "\n", info.peak,
           info.peak_reserved, info.num_driver_allocs, info.num_driver_frees);
    free(ops);
    CHECK_SIZE(info.peak_reserved, <=, limit);
    CHECK_SIZE(r.unforced, ==, 0);
}

/* The same workload with growth by plain regions and with preallocation: they fail more requests. */
TEST(replay_tight_limit_plain_and_prealloc_fail_more) {
    const size_t limit = 256 * MiB;
    size_t n = 0;
    rp_op *ops = rp_workload(limit, &n);

    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, limit));
    CHECK_OK(vram_init());
    rp_result plain = rp_replay(ops, n, limit, 0);
    rp_print("growth, vmm:false", &plain);
    CHECK_OK(vram_shutdown());

    CHECK_OK(vram_set_alloc_conf("extent_mb:2"));
    CHECK_OK(vram_init());
    rp_result fine = rp_replay(ops, n, limit, 0);
    rp_print("growth, extent_mb:2", &fine);
    CHECK_OK(vram_shutdown());

    CHECK_OK(vram_set_alloc_conf(NULL));
    CHECK_OK(vram_set_memory_growth(0, 0));
    CHECK_OK(vram_init());
    rp_result pre = rp_replay(ops, n, limit, 0);
    rp_print("preallocated", &pre);
    CHECK_OK(vram_shutdown());
    free(ops);
    /* Mapping memory where blocks go (fine extents) fails fewer requests than fixed regions do
     * (67 against 204 and 190 with the default seed). */
    CHECK_SIZE(fine.ooms, <, plain.ooms);
    CHECK_SIZE(fine.ooms, <, pre.ooms);
}

/* ---- vram_set_alloc_conf --------------------------------------------------------------------------- */

/* Growth on a fresh runtime, one 8 MiB block: which way the pool took memory. */
static vram__backend_counters grow_once(void) {
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 8 * MiB, 0));
    vram__backend_counters c = sim_counters();
    CHECK_OK(vram_free(p));
    CHECK_ALL();
    return c;
}

#define CHECK_USED_VMM(c)                 \
    do {                                  \
        CHECK_U64((c).phys_create, >=, 1); \
        CHECK_U64((c).va_reserve, ==, 1);  \
        CHECK_U64((c).mem_alloc, ==, 0);   \
    } while (0)

#define CHECK_USED_PLAIN(c)               \
    do {                                  \
        CHECK_U64((c).phys_create, ==, 0); \
        CHECK_U64((c).va_reserve, ==, 0);  \
        CHECK_U64((c).mem_alloc, >=, 1);   \
    } while (0)

TEST(alloc_conf_good_strings) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:50"));
    CHECK_OK(vram_set_alloc_conf(" vmm : true , idle_release_ms:0 "));
    CHECK_OK(vram_set_alloc_conf("vmm:TRUE"));
    CHECK_OK(vram_set_alloc_conf("vmm:off,idle_release_ms:1"));
    CHECK_OK(vram_set_alloc_conf("hold_large_mb:0"));
    CHECK_OK(vram_set_alloc_conf("hold_large_mb:1024,hold_peak:false"));
    CHECK_OK(vram_set_alloc_conf("vmm:false,"));
    CHECK_OK(vram_set_alloc_conf(""));
    CHECK_OK(vram_set_alloc_conf(NULL));
    CHECK_INT(vram_is_initialized(), ==, 0);   /* configuration does not start the runtime */
}

/* Each call replaces the whole option set; "" and NULL reset the defaults (vmm where supported). */
TEST(alloc_conf_last_call_wins_and_reset) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    vram__backend_counters c = grow_once();
    CHECK_USED_PLAIN(c);
    CHECK_OK(vram_shutdown());

    CHECK_OK(vram_set_alloc_conf(""));
    c = grow_once();
    CHECK_USED_VMM(c);
    CHECK_OK(vram_shutdown());

    CHECK_OK(vram_set_alloc_conf(" vmm : false "));
    c = grow_once();
    CHECK_USED_PLAIN(c);
    CHECK_OK(vram_shutdown());

    CHECK_OK(vram_set_alloc_conf(NULL));
    c = grow_once();
    CHECK_USED_VMM(c);
    CHECK_OK(vram_shutdown());

    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:0"));    /* vmm back to its default */
    c = grow_once();
    CHECK_USED_VMM(c);
}

TEST(alloc_conf_bad_strings_name_the_key) {
    use_sim("16GiB");
    static const struct {
        const char *conf, *names;
    } bad[] = {
        {"vmm:maybe", "vmm"},
        {"idle_release_ms:-1", "idle_release_ms"},
        {"hold_large_mb:-1", "hold_large_mb"},
        {"hold_large_mb:big", "hold_large_mb"},
        {"small_pool_kb:-1", "small_pool_kb"},
        {"small_pool_kb:1048577", "small_pool_kb"},
        {"idle_release_ms:abc", "idle_release_ms"},
        {"idle_release_ms:", "idle_release_ms"},
        {"idle_release_ms:12ms", "idle_release_ms"},
        {"idle_release_ms:99999999999999999999999", "idle_release_ms"},
        {"bogus:1", "bogus"},
        {"vmm", "vmm"},
        {"vmm:true,idle_release_ms:x", "idle_release_ms"},
        {"vmm:", "vmm"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf(bad[i].conf));
        CHECK_ERROR_CONTAINS(bad[i].names);
        CHECK_ERROR_CONTAINS("vram_set_alloc_conf");
    }
    CHECK_INT(vram_is_initialized(), ==, 0);
}

/* A rejected string changes nothing: what was set before stays in force. */
TEST(alloc_conf_bad_string_changes_nothing) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("vmm:true,bogus:1"));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("vmm:maybe"));
    vram__backend_counters c = grow_once();
    CHECK_USED_PLAIN(c);
}

/* Fills the stack below the caller's frame, where the next call's locals will live. */
static void __attribute__((noinline)) dirty_stack(unsigned char byte) {
    volatile unsigned char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = byte;
}

TEST(alloc_conf_after_start) {
    use_sim("16GiB");
    dirty_stack(0x00);
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:50"));
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:50"));          /* the same: fine */
    CHECK_OK(vram_set_alloc_conf(" idle_release_ms : 50 "));
    dirty_stack(0xff);
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:50"));           /* whatever the stack held */
    dirty_stack(0xa5);
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:50"));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf("idle_release_ms:60"));
    CHECK_ERROR_IS(MSG_ALLOC_CONF);
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf("vmm:false,idle_release_ms:50"));
    CHECK_ERROR_IS(MSG_ALLOC_CONF);
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf(""));
    CHECK_ERROR_IS(MSG_ALLOC_CONF);
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf(NULL));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("vmm:maybe"));  /* checked first */
    CHECK_ERROR_CONTAINS("vmm");
    CHECK_OK(vram_shutdown());
    CHECK_OK(vram_set_alloc_conf("vmm:false"));                    /* allowed again */
    CHECK_ALL();
}

/* Default options in force: the defaults set again are fine. Setting vmm:true when the default
 * (vmm where supported) put VMM in force is recorded, not asserted. */
TEST(alloc_conf_after_default_start) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_alloc_conf(""));
    CHECK_OK(vram_set_alloc_conf(NULL));
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:0"));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf("vmm:false"));
    CHECK_ERROR_IS(MSG_ALLOC_CONF);
    vram_status s = vram_set_alloc_conf("vmm:true");
    printf("  vmm:true after a start with the default (VMM in force on the sim): %s\n", vram_status_name(s));
}

TEST(alloc_conf_env_overrides_api_vmm_false) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:true"));
    set_env("VRAM_ALLOC_CONF", "vmm:false");
    vram__backend_counters c = grow_once();
    CHECK_USED_PLAIN(c);
    /* after the start: what is in force is unchanged; what the program set (overridden) is a change,
     * as for every setting */
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf("vmm:true"));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf("idle_release_ms:5"));
    CHECK_ERROR_IS(MSG_ALLOC_CONF);
}

TEST(alloc_conf_env_overrides_api_vmm_true) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    set_env("VRAM_ALLOC_CONF", "vmm:true");
    vram__backend_counters c = grow_once();
    CHECK_USED_VMM(c);
}

/* VRAM_ALLOC_CONF overrides only the keys it names: an env string without vmm keeps the program's
 * vmm:false. */
TEST(alloc_conf_env_overrides_only_its_keys) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:100000");
    vram__backend_counters c = grow_once();
    CHECK_USED_PLAIN(c);
}

TEST(alloc_conf_env_malformed_fails_init) {
    use_sim("16GiB");
    static const char *const bad[] = {"vmm:maybe", "bogus:1", "idle_release_ms:-5", "vmm"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_env("VRAM_ALLOC_CONF", bad[i]);
        CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
        CHECK_ERROR_CONTAINS("VRAM_ALLOC_CONF");
        CHECK_INT(vram_is_initialized(), ==, 0);
        void *p = NULL;
        CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_malloc(&p, 1, 0));
        CHECK_ERROR_CONTAINS("VRAM_ALLOC_CONF");
    }
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("'vmm'");
    set_env("VRAM_ALLOC_CONF", "vmm:maybe");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("vmm:maybe");
    set_env("VRAM_ALLOC_CONF", "");              /* empty: the defaults, fine */
    CHECK_OK(vram_init());
    CHECK_ALL();
}

/* The API's options survive a shutdown; the environment is read again at each start. */
TEST(alloc_conf_kept_across_shutdown) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    vram__backend_counters c = grow_once();
    CHECK_USED_PLAIN(c);
    CHECK_OK(vram_shutdown());
    c = grow_once();
    CHECK_USED_PLAIN(c);
    CHECK_OK(vram_shutdown());
    set_env("VRAM_ALLOC_CONF", "vmm:true");
    c = grow_once();
    CHECK_USED_VMM(c);
}

/* vmm:false changes nothing for a preallocated pool (one plain region of the limit). */
TEST(alloc_conf_vmm_false_prealloc_unchanged) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    CHECK_OK(vram_set_memory_limit(0, 128 * MiB));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, ==, 128 * MiB);
    vram__backend_counters c = sim_counters();
    CHECK_U64(c.mem_alloc, ==, 1);
    CHECK_U64(c.phys_create, ==, 0);
    CHECK_ALL();
}

/* extent_mb and hold_peak (added with the growth options): accepted values and rejected ones. */
TEST(alloc_conf_extent_and_hold_peak_strings) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("extent_mb:2"));
    CHECK_OK(vram_set_alloc_conf("extent_mb:64,hold_peak:true"));
    CHECK_OK(vram_set_alloc_conf(" hold_peak : off , extent_mb : 1024 "));
    static const struct {
        const char *conf, *names;
    } bad[] = {
        {"extent_mb:0", "extent_mb"},
        {"extent_mb:-2", "extent_mb"},
        {"extent_mb:2MiB", "extent_mb"},
        {"extent_mb:", "extent_mb"},
        {"extent_mb:99999999999", "extent_mb"},
        {"hold_peak:maybe", "hold_peak"},
        {"hold_peak:", "hold_peak"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf(bad[i].conf));
        CHECK_ERROR_CONTAINS(bad[i].names);
    }
    vram_status s = vram_set_alloc_conf("extent_mb:1");
    printf("  extent_mb:1 -> %s%s%s\n", vram_status_name(s), s ? ": " : "", s ? vram_last_error() : "");
}

/* A chosen limit maps one granule per extent by default with plan:false too (not the limit / 256
 * of a pool without one). */
TEST(alloc_conf_extent_default_with_a_limit_and_no_plan) {
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,plan:false"));
    start_growth(1 * GiB);
    void *big = NULL;
    CHECK_OK(vram_malloc(&big, 64 * MiB, 0));
    CHECK_U64(sim_counters().phys_create, ==, 32);     /* not 16 extents of 1 GiB / 256 */
    CHECK_OK(vram_free(big));
    CHECK_ALL();
}

/* Extents under a chosen limit are one granule each, so a trim can give back everything around a
 * small live block; extent_mb:4 (or the default of a pool without a chosen limit, limit / 256) maps
 * larger extents, and the freed block's extent stays while any byte of it is in use. */
TEST(alloc_conf_extent_mb_gives_back_finely) {
    use_sim("16GiB");
    start_growth(1 * GiB);                          /* a chosen limit: one granule per extent */
    void *big = NULL, *small = NULL;
    CHECK_OK(vram_malloc(&big, 64 * MiB, 0));
    CHECK_U64(sim_counters().phys_create, ==, 32);     /* one extent per 2 MiB granule */
    CHECK_OK(vram_free(big));
    CHECK_OK(vram_malloc(&small, 1 * MiB, 0));     /* placed inside the freed block's memory */
    fill(small, 1 * MiB, 2);
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, GRAN);
    CHECK(filled(small, 1 * MiB, 2));
    CHECK_OK(vram_free(small));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();

    CHECK_OK(vram_set_alloc_conf("extent_mb:4"));   /* extents of 4 MiB */
    CHECK_OK(vram_init());
    CHECK_OK(vram_malloc(&big, 64 * MiB, 0));
    CHECK_U64(sim_counters().phys_create, ==, 16);
    CHECK_OK(vram_free(big));
    CHECK_OK(vram_malloc(&small, 1 * MiB, 0));
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, ==, 4 * MiB);         /* the one extent under the live block */
    CHECK_OK(vram_free(small));
    CHECK_OK(vram_shutdown());
    check_counters_balanced();

    /* no chosen limit: the default limit (free memory less what is left to the system, 14.5 GiB
     * on this 16 GiB card) maps extents of limit / 256 rounded up to granules, 58 MiB, so 64 MiB
     * takes two with plan:false; with plan:true (the default) too, as the program's first block is
     * a load (backing.c; after the load, one granule each: test_plan.c's
     * plan_load_maps_blocks_in_large_extents) */
    for (int plan = 0; plan <= 1; plan++) {
        CHECK_OK(vram_set_alloc_conf(plan ? "map_ahead_mb:0,plan:true" : "map_ahead_mb:0,plan:false"));
        CHECK_OK(vram_set_memory_limit(0, 0));
        CHECK_OK(vram_init());
        size_t limit = INFO(0).limit;
        CHECK_OK(vram_malloc(&big, 64 * MiB, 0));
        size_t extent = (limit / 256 + GRAN - 1) & ~(GRAN - 1);
        CHECK_SIZE(extent, ==, 58 * MiB);
        CHECK_U64(sim_counters().phys_create, ==, (64 * MiB + extent - 1) / extent);
        CHECK_OK(vram_free(big));
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
}

/* hold_peak:true gives idle extents back instead of raising the high-water mark of reserved. */
TEST(alloc_conf_hold_peak) {
    for (int hold = 0; hold <= 1; hold++) {
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf(hold ? "hold_peak:true,map_ahead_mb:0" : "map_ahead_mb:0"));
        start_growth(1 * GiB);
        void *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(vram_malloc(&a, 32 * MiB, 0));
        CHECK_OK(vram_malloc(&b, 1 * MiB, 0));
        CHECK_OK(vram_free(a));
        CHECK_OK(vram_malloc(&c, 48 * MiB, 0));     /* does not fit a's 32 MiB hole */
        CHECK_ALL();
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.peak_reserved, ==, hold ? 50 * MiB : 82 * MiB);
        CHECK_SIZE(info.reserved, ==, hold ? 50 * MiB : 82 * MiB);
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(c));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
    }
}

/* ---- idle release ---------------------------------------------------------------------------------- */

TEST(idle_release_returns_unused_memory) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:50");
    start_growth(1 * GiB);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_OK(vram_free(p));
    vram_memory_info before = INFO(0);
    CHECK_SIZE(before.reserved, ==, 64 * MiB);
    sleep_ms(300);
    vram_memory_info after = wait_reserved_at_most(0, 0, 3000);
    CHECK_SIZE(after.reserved, ==, 0);
    CHECK_U64(after.num_driver_frees, >, before.num_driver_frees);
    CHECK_SIZE(after.peak_reserved, ==, 64 * MiB);
    CHECK_ALL();
    vram__backend_counters c = sim_counters();
    CHECK_U64(c.phys_create, ==, c.phys_release);
    /* and the pool grows again */
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    fill(p, 64 * MiB, 5);
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);
    CHECK(filled(p, 64 * MiB, 5));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* Memory is not given back before it stayed unused for a whole period. */
TEST(idle_release_not_before_a_period) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:400");
    start_growth(1 * GiB);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    double freed_at = now_ms();                 /* before the free: a stall after it cannot fool the bound */
    CHECK_OK(vram_free(p));
    while (now_ms() - freed_at < 300) {
        vram_memory_info info = INFO(0);
        if (now_ms() - freed_at < 390) CHECK_SIZE(info.reserved, ==, 64 * MiB);
        sleep_ms(10);
    }
    vram_memory_info after = wait_reserved_at_most(0, 0, 4000);
    CHECK_SIZE(after.reserved, ==, 0);
    CHECK_OK(vram_shutdown());
}

TEST(idle_release_keeps_live_blocks) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:20");
    start_growth(1 * GiB);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 8 * MiB, 0));
    fill(a, 8 * MiB, 1);
    CHECK_OK(vram_malloc(&b, 64 * MiB, 0));
    CHECK_OK(vram_free(b));
    double until = now_ms() + 400;
    while (now_ms() < until) {
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.reserved, >=, info.current);
        CHECK_SIZE(info.current, ==, 8 * MiB);
        sleep_ms(5);
    }
    vram_memory_info after = wait_reserved_at_most(0, 8 * MiB, 3000);
    CHECK_SIZE(after.reserved, ==, 8 * MiB);
    CHECK(filled(a, 8 * MiB, 1));
    CHECK_ALL();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());
}

/* A block allocated and freed over and over: the lowest unused amount of every period is 0, so
 * nothing is given back while it is in use; once it stops, everything goes back. */
TEST(idle_release_keeps_memory_in_continuous_use) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:300");   /* periods long against a stalled CI thread */
    start_growth(1 * GiB);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_OK(vram_free(p));
    vram__backend_counters c0 = sim_counters();
    uint64_t frees0 = INFO(0).num_driver_frees;
    double until = now_ms() + 1000;
    long rounds = 0;
    while (now_ms() < until) {
        CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
        CHECK_OK(vram_free(p));
        rounds++;
    }
    vram__backend_counters c1 = sim_counters();
    vram_memory_info info = INFO(0);
    printf("  %ld rounds in 1000 ms\n", rounds);
    CHECK_U64(c1.phys_create, ==, c0.phys_create);
    CHECK_U64(c1.phys_release, ==, c0.phys_release);
    CHECK_U64(info.num_driver_frees, ==, frees0);
    CHECK_SIZE(info.reserved, ==, 64 * MiB);
    info = wait_reserved_at_most(0, 0, 3000);
    CHECK_SIZE(info.reserved, ==, 0);
    CHECK_OK(vram_shutdown());
}

/* One block in constant use next to memory that is never used again: the idle memory is what
 * goes back, not the memory in use. */
TEST(idle_release_prefers_memory_that_stayed_unused) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:200");   /* periods long against a stalled CI thread */
    start_growth(1 * GiB);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));   /* the block in use, mapped first */
    CHECK_OK(vram_malloc(&b, 32 * MiB, 0));   /* used once */
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(a));
    vram__backend_counters c0 = sim_counters();
    double until = now_ms() + 1000;
    while (now_ms() < until) {
        CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
        CHECK_OK(vram_free(a));
        sleep_ms(1);
    }
    vram__backend_counters c1 = sim_counters();
    vram_memory_info info = INFO(0);
    printf("  during 1000 ms of use: %" PRIu64 " extents created, %" PRIu64 " released; reserved %zu\n",
           c1.phys_create - c0.phys_create, c1.phys_release - c0.phys_release, info.reserved);
    CHECK_U64(c1.phys_create, ==, c0.phys_create);      /* the block in use was never unmapped */
    CHECK_SIZE(info.reserved, ==, 64 * MiB);            /* the 32 MiB that stayed unused went back */
    CHECK_OK(vram_shutdown());
}

TEST(idle_release_off_keeps_memory) {
    use_sim("16GiB");
    start_growth(1 * GiB);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_OK(vram_free(p));
    vram_memory_info before = INFO(0);
    sleep_ms(300);
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_SIZE(after.reserved, ==, 64 * MiB);
    CHECK_U64(sim_counters().phys_release, ==, 0);
    /* idle_release_ms:0 is the same as none */
    CHECK_OK(vram_shutdown());
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:0");
    CHECK_OK(vram_init());
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_OK(vram_free(p));
    sleep_ms(200);
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);
    CHECK_U64(sim_counters().phys_release, ==, 0);
}

/* Idle release is for growth: a preallocated pool keeps its memory. */
TEST(idle_release_prealloc_untouched) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:10");
    CHECK_OK(vram_set_memory_limit(0, 128 * MiB));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 64 * MiB, 0));
    CHECK_OK(vram_free(p));
    sleep_ms(200);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, ==, 128 * MiB);
    CHECK_U64(info.num_driver_frees, ==, 0);
    CHECK_OK(vram_shutdown());
}

/* Growth by plain regions: a region with no live block goes back after a period. */
TEST(idle_release_plain_growth) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "vmm:false,idle_release_ms:30");
    start_growth(1 * GiB);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 10 * MiB, 0));
    fill(a, 10 * MiB, 4);
    CHECK_OK(vram_malloc(&b, 64 * MiB, 0));
    CHECK_OK(vram_free(b));
    CHECK_U64(sim_counters().phys_create, ==, 0);
    vram_memory_info info = wait_reserved_at_most(0, 10 * MiB, 3000);
    CHECK_SIZE(info.reserved, ==, 10 * MiB);
    CHECK(filled(a, 10 * MiB, 4));
    CHECK_OK(vram_free(a));
    info = wait_reserved_at_most(0, 0, 3000);
    CHECK_SIZE(info.reserved, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* vram_shutdown stops the idle thread at once, even with a long period. */
TEST(idle_release_shutdown_is_prompt) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:10000");
    start_growth(1 * GiB);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 8 * MiB, 0));
    CHECK_OK(vram_free(p));
    sleep_ms(20);
    double t0 = now_ms();
    CHECK_OK(vram_shutdown());
    double took = now_ms() - t0;
    CHECK_CMP(double, "%.1f", took, <, 1000.0);
    CHECK_INT(vram_is_initialized(), ==, 0);
    check_counters_balanced();
}

TEST(idle_release_restart_many_times) {
    use_sim("2x16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:2");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    for (int round = 0; round < 25; round++) {
        CHECK_OK(vram_init());
        void *p = NULL, *q = NULL;
        CHECK_OK(vram_malloc(&p, 4 * MiB, 0));
        CHECK_OK(vram_malloc(&q, 4 * MiB, 1));
        CHECK_OK(vram_free(p));
        if (round % 3 == 0) sleep_ms(10);
        CHECK_OK(vram_free(q));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
}

/* The idle thread ticking every millisecond while threads allocate, write, verify and free. */
enum { IDLE_THREADS = 4 };

static void *idle_worker(void *arg) {
    unsigned id = (unsigned)(uintptr_t)arg;
    test_rng rng = rng_make(0x1d1e + id);
    double until = now_ms() + 400;
    while (now_ms() < until) {
        size_t sz = rng_size_log(&rng, 4 * KiB, 16 * MiB);
        void *p = NULL;
        vram_status s = vram_malloc(&p, sz, 0);
        if (s == VRAM_ERR_OUT_OF_MEMORY) continue;
        CHECK_OK(s);
        fill(p, sz, id);
        if (rng_below(&rng, 4) == 0) sleep_ms(1);
        CHECK(filled(p, sz, id));
        CHECK_OK(vram_free(p));
    }
    return NULL;
}

TEST(idle_release_races_with_allocations) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:1");
    start_growth(256 * MiB);
    pthread_t t[IDLE_THREADS];
    for (int i = 0; i < IDLE_THREADS; i++) {
        CHECK(pthread_create(&t[i], NULL, idle_worker, (void *)(uintptr_t)(i + 1)) == 0);
    }
    for (int k = 0; k < 40; k++) {
        CHECK_ALL();
        vram_memory_info info = INFO(0);
        CHECK_INFO_SANE(info);
        sleep_ms(10);
    }
    for (int i = 0; i < IDLE_THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    CHECK_ALL();
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* PyTorch's one stream: its frees are free at once, so the idle tick must know the stream got past
 * them before it gives their memory back; it waits for an event recorded at the previous tick, and
 * waits without the arena lock: while the stream is busy (the simulated event_sync held), allocations
 * go on, and the memory goes back only once the stream got there. */
#define SOLO_STREAM ((void *)0x5)

static atomic_int solo_alloc_done;

static void *solo_alloc_main(void *arg) {
    void **out = arg;
    *out = vram_plugin_alloc(1 * MiB, 0, SOLO_STREAM);
    atomic_store(&solo_alloc_done, 1);
    return NULL;
}

TEST(idle_release_solo_stream_waits_without_the_lock) {
    use_sim("16GiB");
    set_env("VRAM_ALLOC_CONF", "idle_release_ms:20");
    start_growth(1 * GiB);
    void *p = vram_plugin_alloc(64 * MiB, 0, SOLO_STREAM);
    CHECK(p != NULL);
    vram_plugin_free(p, 64 * MiB, 0, SOLO_STREAM);       /* free at once: the stream may still use it */
    vram__sim_hold_event_syncs(1);
    int waiting = 0;
    for (int i = 0; i < 300 && !(waiting = vram__sim_syncs_waiting()); i++) sleep_ms(10);
    CHECK_INT(waiting, ==, 1);                            /* the idle tick waits for the stream */
    atomic_store(&solo_alloc_done, 0);
    void *q = NULL;
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, solo_alloc_main, &q), ==, 0);
    for (int i = 0; i < 200 && !atomic_load(&solo_alloc_done); i++) sleep_ms(10);
    CHECK_INT(atomic_load(&solo_alloc_done), ==, 1);      /* not behind the idle tick's wait */
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);           /* and nothing went back meanwhile */
    vram__sim_stream_complete(SOLO_STREAM);               /* the stream gets there */
    vram__sim_hold_event_syncs(0);
    CHECK_INT(pthread_join(t, NULL), ==, 0);
    CHECK(q != NULL);
    vram_memory_info after = wait_reserved_at_most(0, GRAN, 3000);
    CHECK_SIZE(after.reserved, ==, GRAN);                /* the idle extents went back (one-granule
                                                            extents under a chosen limit: q's stays) */
    CHECK_ALL();                                          /* (q's stays mapped: vram_check) */
    vram_plugin_free(q, 1 * MiB, 0, SOLO_STREAM);
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
}

/* ---- driver calls ---------------------------------------------------------------------------------- */

TEST(vmm_maps_only_what_blocks_need) {
    start_growth(1 * GiB);
    vram__backend_counters c0 = sim_counters();
    CHECK_U64(c0.va_reserve, ==, 1);
    CHECK_U64(c0.phys_create, ==, 0);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    vram_memory_info info = INFO(0);
    vram__backend_counters c = sim_counters();
    CHECK_SIZE(info.reserved, ==, GRAN);
    CHECK_U64(c.phys_create, ==, 1);
    CHECK_U64(c.map, ==, 1);
    CHECK_U64(c.mem_alloc, ==, 0);
    CHECK_U64(info.num_driver_allocs, ==, 1);
    /* a second block in the same granule maps nothing */
    void *q = NULL;
    CHECK_OK(vram_malloc(&q, 512 * KiB, 0));
    CHECK_U64(sim_counters().phys_create, ==, 1);
    CHECK_SIZE(INFO(0).reserved, ==, GRAN);
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_free(p));
    CHECK_U64(sim_counters().phys_release, ==, 0);   /* a free alone calls no driver */
    CHECK_ALL();
}

/* Map-ahead only in a burst of growth: right after a growth the next one maps 1/16 of what is held
 * beyond its block; a growth after more than 256 allocations without one (a new peak, most often)
 * maps exactly what its block needs. */
TEST(vmm_maps_ahead_only_in_a_burst) {
    CHECK_OK(vram_set_alloc_conf("extent_mb:16"));   /* mapping ahead goes no further than an extent */
    start_growth(1 * GiB);
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 32 * MiB, 0));          /* 32 MiB held: nothing to map ahead of yet */
    CHECK_SIZE(INFO(0).reserved, ==, 32 * MiB);
    CHECK_OK(vram_malloc(&b, 4 * MiB, 0));           /* a burst: 4 MiB + 32 / 16 = 2 MiB ahead */
    CHECK_SIZE(INFO(0).reserved, ==, 38 * MiB);
    for (int i = 0; i < 300; i++) {                  /* a quiet stretch inside what is mapped */
        void *s = NULL;
        CHECK_OK(vram_malloc(&s, 1 * MiB, 0));
        CHECK_OK(vram_free(s));
    }
    CHECK_SIZE(INFO(0).reserved, ==, 38 * MiB);
    CHECK_OK(vram_malloc(&c, 8 * MiB, 0));           /* 2 MiB mapped ahead serve, 6 MiB new, no more */
    CHECK_SIZE(INFO(0).reserved, ==, 44 * MiB);
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

/* Map-ahead: growing maps up to 1/16 of what is held (at most map_ahead_mb) beyond the block, so a
 * run of small allocations takes few driver calls; with map_ahead_mb:0 every granule is one call. */
TEST(vmm_map_ahead_saves_driver_calls) {
    uint64_t creates[2];
    for (int ahead = 0; ahead <= 1; ahead++) {
        use_sim("16GiB");
        CHECK_OK(vram_set_alloc_conf(ahead ? "map_ahead_mb:64,extent_mb:64" : "map_ahead_mb:0,extent_mb:64"));
        start_growth(4 * GiB);
        void *big = NULL, *small[64];
        CHECK_OK(vram_malloc(&big, 512 * MiB, 0));          /* reserved / 16 is now 32 MiB */
        vram__backend_counters before = sim_counters();
        for (int i = 0; i < 64; i++) CHECK_OK(vram_malloc(&small[i], 2 * MiB, 0));
        creates[ahead] = sim_counters().phys_create - before.phys_create;
        vram_memory_info info = INFO(0);
        CHECK_INFO_SANE(info);
        CHECK_SIZE(info.reserved - info.current, <=, ahead ? 32 * MiB : 0);
        CHECK_ALL();
        for (int i = 0; i < 64; i++) CHECK_OK(vram_free(small[i]));
        CHECK_OK(vram_free(big));
        CHECK_OK(vram_shutdown());
    }
    CHECK_U64(creates[0], ==, 64);
    CHECK_U64(creates[1], <=, 5);
}

/* map_ahead_mb's default is 64: with 1536 MiB held, a growth in a burst maps 64 MiB beyond its
 * block (1536 / 16 = 96 MiB, capped at 64), in one extent large enough for both. */
TEST(vmm_map_ahead_default_is_64_mib) {
    CHECK_OK(vram_set_alloc_conf("extent_mb:2048"));
    start_growth(8 * GiB);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 1536 * MiB, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 1536 * MiB);
    CHECK_OK(vram_malloc(&b, 4 * MiB, 0));           /* a burst: 4 MiB + 64 MiB ahead */
    CHECK_SIZE(INFO(0).reserved, ==, 1604 * MiB);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

/* small_pool_kb's default is 256: a request of at most 256 KiB lies in the small zone's segment, a
 * larger one in the rest. */
TEST(vmm_small_pool_default_is_256_kib) {
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    start_growth(1 * GiB);
    void *in = NULL, *out = NULL;
    CHECK_OK(vram_malloc(&in, 200 * KiB, 0));
    CHECK_OK(vram_malloc(&out, 300 * KiB, 0));
    vram_segment_info segs[4];
    vram_block_info blocks[8];
    size_t ns = 0, nb = 0;
    CHECK_OK(vram_get_segments(0, segs, 4, &ns, blocks, 8, &nb));
    CHECK_SIZE(ns, ==, 2);
    CHECK_SIZE(nb, <=, 8);
    int found = 0;
    for (size_t i = 0; i < ns && i < 4; i++) {
        uintptr_t lo = (uintptr_t)segs[i].address, hi = lo + segs[i].size;
        if ((uintptr_t)in >= lo && (uintptr_t)in < hi) {
            CHECK_INT(segs[i].small, ==, 1);
            found |= 1;
        }
        if ((uintptr_t)out >= lo && (uintptr_t)out < hi) {
            CHECK_INT(segs[i].small, ==, 0);
            found |= 2;
        }
    }
    CHECK_INT(found, ==, 3);
    CHECK_OK(vram_free(in));
    CHECK_OK(vram_free(out));
    CHECK_ALL();
}

TEST(vmm_second_pass_reuses_memory) {
    /* only what blocks need is mapped; best fit's reuse (the plan of a repeating step moves memory
     * once into a zone of its own: the plan_* tests) */
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,plan:false"));
    start_growth(1 * GiB);
    static const size_t sizes[] = {1 * MiB, 3 * MiB, 10 * MiB + 5, 256 * KiB, 40 * MiB, 7 * MiB, 300, 64 * MiB,
                                   2 * MiB, 123456};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    size_t current = 0, small = 0;                      /* small: the blocks of 256 KiB or less */
    for (int i = 0; i < N; i++) {
        CHECK_OK(vram_malloc(&p[i], sizes[i], 0));
        current += round256(sizes[i]);
        if (sizes[i] <= 256 * KiB) small += round256(sizes[i]);
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.current, ==, current);
        /* each zone packed from its start: the small blocks' and the others' */
        CHECK_SIZE(info.reserved, ==, round_gran(small) + round_gran(current - small));
        CHECK_ALL();
    }
    for (int i = 0; i < N; i++) CHECK_OK(vram_free(p[i]));
    vram__backend_counters c1 = sim_counters();
    vram_memory_info i1 = INFO(0);
    for (int pass = 0; pass < 3; pass++) {
        for (int i = 0; i < N; i++) CHECK_OK(vram_malloc(&p[i], sizes[i], 0));
        CHECK_ALL();
        for (int i = N - 1; i >= 0; i--) CHECK_OK(vram_free(p[i]));
        CHECK_ALL();
    }
    vram__backend_counters c2 = sim_counters();
    vram_memory_info i2 = INFO(0);
    CHECK_U64(c2.phys_create, ==, c1.phys_create);
    CHECK_U64(c2.map, ==, c1.map);
    CHECK_U64(c2.phys_release, ==, c1.phys_release);
    CHECK_SIZE(i2.reserved, ==, i1.reserved);
    CHECK_U64(i2.num_driver_allocs, ==, i1.num_driver_allocs);
}

/* ---- stream-ordered frees with growth by mapping --------------------------------------------------- */

TEST(vmm_async_same_stream_reuse) {
    start_growth(256 * MiB);
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc_async(&p, 16 * MiB, 0, STREAM_A));
    fill(p, 16 * MiB, 1);
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_ALL();
    CHECK_OK(vram_malloc_async(&q, 16 * MiB, 0, STREAM_A));
    CHECK_PTR(q, ==, p);                                  /* same stream: reused at once */
    CHECK(filled(q, 16 * MiB, 1));                        /* the same memory */
    CHECK_ALL();
    CHECK_OK(vram_free_async(q, STREAM_A));
    CHECK_OK(vram_malloc_async(&r, 16 * MiB, 0, STREAM_B));
    CHECK_PTR(r, !=, q);                                  /* other stream: not before completion */
    CHECK_ALL();
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 16 * MiB);
    CHECK_SIZE(info.reserved, ==, 32 * MiB);
    CHECK_OK(vram_free_async(r, STREAM_B));
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    void *s = NULL;
    CHECK_OK(vram_malloc(&s, 32 * MiB, 0));               /* both settled and merged */
    CHECK_SIZE(INFO(0).reserved, ==, 32 * MiB);
    CHECK_OK(vram_free(s));
    CHECK_ALL();
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_ALL();
}

/* The same with vram_malloc: a stream-ordered free holds the memory the request needs. */
TEST(vmm_malloc_waits_for_pending_free_at_limit) {
    const size_t limit = 32 * MiB;
    start_growth(limit);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 24 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    vram_status s = vram_malloc(&q, 32 * MiB, 0);
    if (s != VRAM_OK) printf("  vram_malloc(32 MiB) with A's 24 MiB free pending: %s\n", vram_last_error());
    CHECK_OK(s);
    CHECK_ALL();
    CHECK_OK(vram_free(q));
    CHECK_ALL();
}

/* At the limit, a pending free on another stream is waited for instead of failing, and idle
 * extents are given back to map the request. */
TEST(vmm_async_tight_limit_waits_and_remaps) {
    const size_t limit = 32 * MiB;
    start_growth(limit);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 24 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_OK(vram_malloc_async(&q, 32 * MiB, 0, STREAM_B));   /* needs A's memory */
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, <=, limit);
    CHECK_SIZE(INFO(0).current, ==, 32 * MiB);
    CHECK_OK(vram_free_async(q, STREAM_B));
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* The card's budget, shared by two logical devices, is what refuses new memory here (each device's
 * own limit has room): device 0 moves its idle extent under the new block before it would give any
 * back, as under its own limit. */
TEST(growth_moves_idle_extents_over_the_card_budget) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 100 * MiB));
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:16"));
    void *a = NULL, *b = NULL, *big = NULL, *other = NULL;
    CHECK_OK(vram_malloc(&a, 16 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&other, 70 * MiB, 1));
    CHECK_OK(vram_free(a));
    vram_memory_info before = INFO(0);
    vram__backend_counters cb = sim_counters();
    CHECK_OK(vram_malloc(&big, 24 * MiB, 0));
    vram__backend_counters ca = sim_counters();
    CHECK_U64(INFO(0).num_driver_moves - before.num_driver_moves, ==, 1);
    CHECK_U64(ca.phys_release - cb.phys_release, ==, 0);
    CHECK_SIZE(INFO(0).reserved, ==, 26 * MiB);
    CHECK_OK(vram_free(big));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(other));
    CHECK_ALL();
}

/* Idle extents of 8, 8, 8, 8 and 32 MiB: a 34 MiB block takes the 32 MiB one first, then one of
 * 8 MiB reaching past it (two moves, nothing created), not the small ones one by one. */
TEST(growth_moves_the_largest_idle_extent_first) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:64,hold_large_mb:8"));
    start_growth(1 * GiB);
    void *a[5], *s[5], *big = NULL;
    for (int i = 0; i < 5; i++) {
        CHECK_OK(vram_malloc(&a[i], i < 4 ? 8 * MiB : 32 * MiB, 0));
        CHECK_OK(vram_malloc(&s[i], 2 * MiB, 0));
    }
    for (int i = 0; i < 5; i++) CHECK_OK(vram_free(a[i]));
    vram_memory_info before = INFO(0);
    vram__backend_counters cb = sim_counters();
    CHECK_OK(vram_malloc(&big, 34 * MiB, 0));
    vram__backend_counters ca = sim_counters();
    CHECK_U64(INFO(0).num_driver_moves - before.num_driver_moves, ==, 2);
    CHECK_U64(ca.phys_create - cb.phys_create, ==, 0);
    CHECK_OK(vram_free(big));
    for (int i = 0; i < 5; i++) CHECK_OK(vram_free(s[i]));
    CHECK_ALL();
}
