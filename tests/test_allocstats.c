/*
 * test_allocstats.c: PyTorch's allocator statistics (vram_get_allocator_stats), with exact figures
 * worked out from the pool's rules: requests rounded to 256 bytes, blocks of at most 1 MiB small,
 * growth's extents of whole 2 MiB granules on the simulated card, the small zone for requests of at
 * most 256 KiB (small_pool_kb's default).
 */
#include <pthread.h>

#include "backend/backend.h"
#include "harness.h"

#define STREAM_A ((void *)0x1)
#define STREAM_B ((void *)0x2)

static vram_allocator_stats stats_of(int dev) {
    vram_allocator_stats st;
    CHECK_OK(vram_get_allocator_stats(dev, &st));
    return st;
}

#define STAT_EQ(stat, cur, pk, added, taken)            \
    do {                                                \
        vram_stat s_ = (stat);                          \
        CHECK_INT(s_.current, ==, (long long)(cur));    \
        CHECK_INT(s_.peak, ==, (long long)(pk));        \
        CHECK_INT(s_.allocated, ==, (long long)(added)); \
        CHECK_INT(s_.freed, ==, (long long)(taken));    \
    } while (0)

/* A growing 1 GiB pool mapping only what blocks need, in extents of up to 64 MiB. */
static void growth_1gib(void) {
    use_sim_growth(1 * GiB, "map_ahead_mb:0,extent_mb:64");
}

TEST(allocstats_blocks_by_kind) {
    growth_1gib();
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 1000, 0));               /* small: 1024 bytes */
    CHECK_OK(vram_malloc(&b, 1 * MiB, 0));            /* small: exactly 1 MiB */
    CHECK_OK(vram_malloc(&c, 3 * MiB + 1, 0));        /* large: 3 MiB + 256 */
    vram_allocator_stats st = stats_of(0);
    STAT_EQ(st.allocation[VRAM_STAT_ALL], 3, 3, 3, 0);
    STAT_EQ(st.allocation[VRAM_STAT_SMALL], 2, 2, 2, 0);
    STAT_EQ(st.allocation[VRAM_STAT_LARGE], 1, 1, 1, 0);
    size_t all = 1024 + 1 * MiB + 3 * MiB + 256;
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], all, all, all, 0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_SMALL], 1024 + 1 * MiB, 1024 + 1 * MiB, 1024 + 1 * MiB, 0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_LARGE], 3 * MiB + 256, 3 * MiB + 256, 3 * MiB + 256, 0);
    size_t asked = 1000 + 1 * MiB + 3 * MiB + 1;
    STAT_EQ(st.requested_bytes[VRAM_STAT_ALL], asked, asked, asked, 0);
    STAT_EQ(st.requested_bytes[VRAM_STAT_LARGE], 3 * MiB + 1, 3 * MiB + 1, 3 * MiB + 1, 0);
    STAT_EQ(st.active_bytes[VRAM_STAT_ALL], all, all, all, 0);
    STAT_EQ(st.active[VRAM_STAT_SMALL], 2, 2, 2, 0);
    CHECK_INT(st.max_split_size, ==, -1);
    CHECK_SIZE((size_t)st.allocated_bytes[VRAM_STAT_ALL].current, ==, INFO(0).current);

    CHECK_OK(vram_free(b));                           /* the 1 MiB block: small goes down, peaks stay */
    st = stats_of(0);
    STAT_EQ(st.allocation[VRAM_STAT_ALL], 2, 3, 3, 1);
    STAT_EQ(st.allocation[VRAM_STAT_SMALL], 1, 2, 2, 1);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_SMALL], 1024, 1024 + 1 * MiB, 1024 + 1 * MiB, 1 * MiB);
    STAT_EQ(st.requested_bytes[VRAM_STAT_SMALL], 1000, 1000 + 1 * MiB, 1000 + 1 * MiB, 1 * MiB);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_LARGE], 3 * MiB + 256, 3 * MiB + 256, 3 * MiB + 256, 0);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(c));
    st = stats_of(0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], 0, all, all, all);
    STAT_EQ(st.requested_bytes[VRAM_STAT_ALL], 0, asked, asked, asked);
    STAT_EQ(st.allocation[VRAM_STAT_ALL], 0, 3, 3, 3);
    CHECK_ALL();
}

TEST(allocstats_reserved_and_segments_by_zone) {
    growth_1gib();
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 1000, 0));               /* the small zone: one granule mapped */
    CHECK_OK(vram_malloc(&b, 1 * MiB, 0));            /* the large zone's first granule */
    CHECK_OK(vram_malloc(&c, 3 * MiB + 1, 0));        /* from 1 MiB to 4 MiB + 256: two more granules */
    vram_allocator_stats st = stats_of(0);
    STAT_EQ(st.reserved_bytes[VRAM_STAT_SMALL], 2 * MiB, 2 * MiB, 2 * MiB, 0);
    STAT_EQ(st.reserved_bytes[VRAM_STAT_LARGE], 6 * MiB, 6 * MiB, 6 * MiB, 0);
    STAT_EQ(st.reserved_bytes[VRAM_STAT_ALL], 8 * MiB, 8 * MiB, 8 * MiB, 0);
    STAT_EQ(st.segment[VRAM_STAT_SMALL], 1, 1, 1, 0);
    STAT_EQ(st.segment[VRAM_STAT_LARGE], 2, 2, 2, 0);
    CHECK_SIZE((size_t)st.reserved_bytes[VRAM_STAT_ALL].current, ==, INFO(0).reserved);
    CHECK_INT(st.num_device_alloc, ==, 3);
    CHECK_INT(st.num_device_free, ==, 0);
    /* the free rest of each mapped extent shares it with a block: inactive split */
    size_t split_small = 2 * MiB - 1024, split_large = 6 * MiB - (1 * MiB + 3 * MiB + 256);
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_SMALL].current, ==, (long long)split_small);
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_LARGE].current, ==, (long long)split_large);
    CHECK_INT(st.inactive_split[VRAM_STAT_ALL].current, ==, 2);

    CHECK_OK(vram_free(a));                           /* the small extent is idle: releasable, not split */
    st = stats_of(0);
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_SMALL].current, ==, 0);
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_SMALL].peak, ==, (long long)split_small);
    CHECK_INT(st.inactive_split[VRAM_STAT_SMALL].current, ==, 0);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_trim(0, 0));                        /* every extent goes back */
    st = stats_of(0);
    STAT_EQ(st.reserved_bytes[VRAM_STAT_ALL], 0, 8 * MiB, 8 * MiB, 8 * MiB);
    STAT_EQ(st.segment[VRAM_STAT_LARGE], 0, 2, 2, 2);
    STAT_EQ(st.segment[VRAM_STAT_SMALL], 0, 1, 1, 1);
    CHECK_INT(st.num_device_free, ==, 3);
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_ALL].current, ==, 0);
    CHECK_ALL();
}

TEST(allocstats_preallocated_pool) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {64};   /* 64 MiB taken at start, one plain region */
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 4 * MiB, 0));
    vram_allocator_stats st = stats_of(0);
    STAT_EQ(st.reserved_bytes[VRAM_STAT_LARGE], 64 * MiB, 64 * MiB, 64 * MiB, 0);
    STAT_EQ(st.reserved_bytes[VRAM_STAT_SMALL], 0, 0, 0, 0);
    STAT_EQ(st.segment[VRAM_STAT_ALL], 1, 1, 1, 0);
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_ALL].current, ==, (long long)(60 * MiB));
    CHECK_INT(st.inactive_split[VRAM_STAT_ALL].current, ==, 1);
    CHECK_OK(vram_free(a));
    st = stats_of(0);                                 /* a region with no block: releasable */
    CHECK_INT(st.inactive_split_bytes[VRAM_STAT_ALL].current, ==, 0);
    CHECK_INT(st.inactive_split[VRAM_STAT_ALL].current, ==, 0);
    CHECK_ALL();
}

TEST(allocstats_resets) {
    growth_1gib();
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 8 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 16 * MiB, 0));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_reset_memory_stats(0));             /* every peak comes down to now */
    vram_allocator_stats st = stats_of(0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], 8 * MiB, 8 * MiB, 24 * MiB, 16 * MiB);
    STAT_EQ(st.allocation[VRAM_STAT_LARGE], 1, 1, 2, 1);
    CHECK_INT(st.active_bytes[VRAM_STAT_ALL].peak, ==, (long long)(8 * MiB));
    CHECK_INT(st.reserved_bytes[VRAM_STAT_ALL].peak, ==, st.reserved_bytes[VRAM_STAT_ALL].current);
    CHECK_SIZE(INFO(0).peak, ==, 8 * MiB);
    CHECK_OK(vram_reset_accumulated_stats(0));        /* added and taken start again from 0 */
    st = stats_of(0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], 8 * MiB, 8 * MiB, 0, 0);
    STAT_EQ(st.requested_bytes[VRAM_STAT_ALL], 8 * MiB, 8 * MiB, 0, 0);
    STAT_EQ(st.allocation[VRAM_STAT_ALL], 1, 1, 0, 0);
    CHECK_INT(st.reserved_bytes[VRAM_STAT_ALL].allocated, ==, 0);
    CHECK_INT(st.num_device_alloc, ==, 0);
    CHECK_U64(INFO(0).num_allocs, ==, 2);             /* vram's own counters are not touched */
    CHECK_OK(vram_malloc(&b, 1 * MiB, 0));
    CHECK_OK(vram_free(a));
    st = stats_of(0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], 1 * MiB, 9 * MiB, 1 * MiB, 8 * MiB);
    STAT_EQ(st.active_bytes[VRAM_STAT_ALL], 1 * MiB, 9 * MiB, 1 * MiB, 8 * MiB);
    STAT_EQ(st.allocation[VRAM_STAT_ALL], 1, 2, 1, 1);
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(allocstats_active_includes_blocks_waiting_for_streams) {
    growth_1gib();
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc_async(&a, 2 * MiB, 0, STREAM_A));
    CHECK_OK(vram_record_stream(a, STREAM_B));        /* also used on B */
    CHECK_OK(vram_free_async(a, STREAM_A));           /* freed: no longer allocated, still active */
    vram_allocator_stats st = stats_of(0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], 0, 2 * MiB, 2 * MiB, 2 * MiB);
    STAT_EQ(st.active_bytes[VRAM_STAT_ALL], 2 * MiB, 2 * MiB, 2 * MiB, 0);
    STAT_EQ(st.active[VRAM_STAT_LARGE], 1, 1, 1, 0);
    CHECK_OK(vram_malloc_async(&b, 4 * MiB, 0, STREAM_A));   /* active rises above allocated's peak */
    st = stats_of(0);
    STAT_EQ(st.allocated_bytes[VRAM_STAT_ALL], 4 * MiB, 4 * MiB, 6 * MiB, 2 * MiB);
    STAT_EQ(st.active_bytes[VRAM_STAT_ALL], 6 * MiB, 6 * MiB, 6 * MiB, 0);
    STAT_EQ(st.active[VRAM_STAT_ALL], 2, 2, 2, 0);
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    void *c = NULL;
    CHECK_OK(vram_malloc_async(&c, 256, 0, STREAM_A));      /* the next search settles the block */
    st = stats_of(0);
    STAT_EQ(st.active_bytes[VRAM_STAT_LARGE], 4 * MiB, 6 * MiB, 6 * MiB, 2 * MiB);
    STAT_EQ(st.active_bytes[VRAM_STAT_SMALL], 256, 256, 256, 0);
    STAT_EQ(st.active[VRAM_STAT_ALL], 2, 2, 3, 1);
    CHECK_OK(vram_free_async(b, STREAM_A));
    CHECK_OK(vram_free_async(c, STREAM_A));
    CHECK_ALL();
}

TEST(allocstats_retries_and_ooms) {
    use_sim_growth(64 * MiB, "map_ahead_mb:0,small_pool_kb:0");
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 40 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 8 * MiB, 0));
    CHECK_OK(vram_free(a));                           /* 40 MiB stay mapped, idle */
    CHECK_INT(stats_of(0).num_alloc_retries, ==, 0);
    CHECK_OK(vram_malloc(&a, 50 * MiB, 0));           /* beyond b: the idle memory must go first */
    vram_allocator_stats st = stats_of(0);
    CHECK_INT(st.num_alloc_retries, ==, 1);
    CHECK_INT(st.num_ooms, ==, 0);
    void *c = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&c, 32 * MiB, 0));
    st = stats_of(0);
    CHECK_INT(st.num_ooms, ==, 1);
    CHECK_INT(st.allocation[VRAM_STAT_ALL].current, ==, 2);
    CHECK_OK(vram_reset_accumulated_stats(0));
    st = stats_of(0);
    CHECK_INT(st.num_ooms, ==, 0);
    CHECK_INT(st.num_alloc_retries, ==, 0);
    CHECK_U64(INFO(0).num_ooms, ==, 1);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

static void *malloc_64k(void *out) {
    if (vram_malloc((void **)out, 64 * KiB, 0) != VRAM_OK) *(void **)out = NULL;
    return NULL;
}

TEST(allocstats_thread_caches_do_not_count) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_set_alloc_conf("arenas:1"));        /* one arena: both threads' blocks in it */
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 64 * KiB, 0));
    /* a second thread's request turns parking on */
    pthread_t t;
    void *other = NULL;
    CHECK(pthread_create(&t, NULL, malloc_64k, &other) == 0);
    pthread_join(t, NULL);
    CHECK(other != NULL);
    CHECK_OK(vram_free(a));                           /* parked in this thread's cache */
    vram_allocator_stats st = stats_of(0);
    CHECK_INT(st.allocation[VRAM_STAT_ALL].current, ==, 1);
    CHECK_INT(st.allocated_bytes[VRAM_STAT_ALL].current, ==, (long long)(64 * KiB));
    CHECK_SIZE(INFO(0).current, ==, 64 * KiB);
    CHECK_OK(vram_free(other));
    CHECK_ALL();
}

TEST(allocstats_bad_arguments) {
    growth_1gib();
    vram_allocator_stats st;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_allocator_stats(0, NULL));
    CHECK_ERROR_CONTAINS("stats is NULL");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_allocator_stats(5, &st));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_reset_accumulated_stats(-1));
}

TEST(fraction_caps_a_running_pool) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 1 * GiB, 0));
    double f = 0;
    CHECK_OK(vram_get_memory_fraction(0, &f));
    CHECK(f == 1.0);
    CHECK_OK(vram_set_memory_fraction(0, 0.125));     /* 2 GiB of the 16 GiB card, after the start */
    CHECK_OK(vram_get_memory_fraction(0, &f));
    CHECK(f == 0.125);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 1536 * MiB, 0));
    CHECK_ERROR_CONTAINS("the memory fraction 0.125 of the card (2147483648 bytes");
    CHECK_ERROR_CONTAINS("limit 2147483648");
    CHECK_OK(vram_malloc(&b, 512 * MiB, 0));          /* what the fraction leaves */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&c, 600 * MiB, 0));   /* 512 MiB are left */
    CHECK_U64(INFO(0).num_ooms, ==, 2);
    CHECK_ALL();
    CHECK_OK(vram_set_memory_fraction(0, 1.0));       /* the whole card again */
    CHECK_OK(vram_malloc(&c, 4 * GiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
}

TEST(fraction_gives_idle_memory_back) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 3 * GiB, 0));
    CHECK_OK(vram_free(a));                           /* 3 GiB idle, kept */
    CHECK_SIZE(INFO(0).reserved, >=, 3 * GiB);
    CHECK_OK(vram_set_memory_fraction(0, 0.125));
    CHECK_SIZE(INFO(0).reserved, <=, 2 * GiB);
    CHECK_OK(vram_set_memory_fraction(0, 0));         /* nothing at all: not "no limit" */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&a, 256, 0));
    CHECK_ERROR_CONTAINS("memory fraction 0 ");
    CHECK_ALL();
}

TEST(fraction_caps_a_preallocated_pool) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {1024};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    CHECK_OK(vram_set_memory_fraction(0, 1.0 / 64));  /* 256 MiB of the card, below the 1 GiB held */
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 192 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 128 * MiB, 0));
    CHECK_ERROR_CONTAINS("memory fraction");
    CHECK_OK(vram_malloc(&b, 64 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(fraction_bad_arguments) {
    use_sim("16GiB");
    double f = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_memory_fraction(0, -0.1));
    CHECK_ERROR_CONTAINS("Allowed range: 0~1");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_memory_fraction(0, 1.5));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_memory_fraction(0, 0.0 / 0.0));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_memory_fraction(3, 0.5));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_memory_fraction(0, NULL));
    CHECK_OK(vram_get_memory_fraction(0, &f));
    CHECK(f == 1.0);
}
