/*
 * test_stats.c: the memory statistics (TensorFlow's current and peak, reserved, counters).
 */
#include "harness.h"

TEST(stats_current_is_sum_of_rounded_sizes) {
    use_sim("16GiB");
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 1, 0));
    CHECK_SIZE(INFO(0).current, ==, 256);
    CHECK_OK(vram_malloc(&b, 256, 0));
    CHECK_SIZE(INFO(0).current, ==, 512);
    CHECK_OK(vram_malloc(&c, 257, 0));
    CHECK_SIZE(INFO(0).current, ==, 256 + 256 + 512);
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    CHECK_SIZE(INFO(0).current, ==, 256 + 512);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(c));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(stats_counts_allocs_and_frees) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    vram_memory_info start = INFO(0);
    CHECK_U64(start.num_allocs, ==, 0);
    CHECK_U64(start.num_frees, ==, 0);
    void *p[10];
    for (int i = 0; i < 10; i++) CHECK_OK(vram_malloc(&p[i], 1000, 0));
    CHECK_U64(INFO(0).num_allocs, ==, 10);
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(p[i]));
    vram_memory_info mid = INFO(0);
    CHECK_U64(mid.num_allocs, ==, 10);
    CHECK_U64(mid.num_frees, ==, 4);
    for (int i = 4; i < 10; i++) CHECK_OK(vram_free(p[i]));
    CHECK_U64(INFO(0).num_frees, ==, 10);
    CHECK_ALL();
}

TEST(stats_failures_do_not_count_as_allocs) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL;
    int local = 0;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 2 * GiB, 0));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(&local));
    vram_memory_info info = INFO(0);
    CHECK_U64(info.num_allocs, ==, 0);
    CHECK_U64(info.num_frees, ==, 0);
    CHECK_U64(info.num_ooms, ==, 1);
    CHECK_SIZE(info.peak, ==, 0);
}

TEST(stats_peak_is_high_water_mark) {
    use_sim("16GiB");
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 1 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
    CHECK_SIZE(INFO(0).peak, ==, 3 * MiB);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_malloc(&c, 512 * KiB, 0));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 1 * MiB + 512 * KiB);
    CHECK_SIZE(info.peak, ==, 3 * MiB);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(c));
    CHECK_SIZE(INFO(0).peak, ==, 3 * MiB);
    CHECK_ALL();
}

TEST(stats_reset_sets_peaks_to_now) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 512 * MiB, 0));
    CHECK_OK(vram_free(b));
    vram_memory_info before = INFO(0);
    CHECK_SIZE(before.peak, ==, 576 * MiB);
    CHECK_OK(vram_reset_memory_stats(0));
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.peak, ==, after.current);
    CHECK_SIZE(after.current, ==, 64 * MiB);
    CHECK_SIZE(after.peak_reserved, ==, after.reserved);
    CHECK_U64(after.num_allocs, ==, before.num_allocs);  /* counters stay */
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).peak, ==, 64 * MiB);
    CHECK_ALL();
}

TEST(stats_peak_reserved_follows_growth) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * GiB, 0));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, >=, 1 * GiB);
    CHECK_SIZE(info.peak_reserved, >=, info.reserved);
    CHECK_U64(info.num_driver_allocs, >=, 1);
    CHECK_OK(vram_free(p));
    CHECK_SIZE(INFO(0).peak_reserved, >=, 1 * GiB);
    CHECK_ALL();
}

TEST(stats_are_per_logical_device) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1000, 1));
    vram_memory_info d0 = INFO(0), d1 = INFO(1);
    CHECK_SIZE(d0.current, ==, 0);
    CHECK_U64(d0.num_allocs, ==, 0);
    CHECK_SIZE(d1.current, ==, 1024);
    CHECK_U64(d1.num_allocs, ==, 1);
    CHECK_OK(vram_free(p));
    CHECK_U64(INFO(0).num_frees, ==, 0);
    CHECK_U64(INFO(1).num_frees, ==, 1);
    CHECK_ALL();
}

TEST(stats_largest_free_block_tracks_allocations) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {256};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    CHECK_SIZE(INFO(0).largest_free_block, ==, 256 * MiB);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 100 * MiB, 0));
    CHECK_SIZE(INFO(0).largest_free_block, ==, 156 * MiB);
    CHECK_OK(vram_free(p));
    CHECK_SIZE(INFO(0).largest_free_block, ==, 256 * MiB);
    CHECK_ALL();
}

TEST(stats_check_every_device) {
    use_sim("2x16GiB");
    vram_logical_device_configuration two[2] = {{512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));
    CHECK_OK(vram_init());
    for (int d = 0; d < 3; d++) CHECK_OK(vram_check(d));
    CHECK_ALL();
}

TEST(stats_check_before_start) {
    use_sim("16GiB");
    vram_status s = vram_check(-1);  /* nothing to check yet; must not crash */
    CHECK(s == VRAM_OK || s == VRAM_ERR_UNRECOGNIZED_DEVICE);
}

TEST(stats_driver_calls_counted) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(1, 1));
    CHECK_OK(vram_set_memory_limit(1, 1 * GiB));
    CHECK_OK(vram_init());
    vram_memory_info pre = INFO(0), grow = INFO(1);
    CHECK_U64(pre.num_driver_allocs, ==, 1);  /* the whole amount in one region */
    CHECK_U64(pre.num_driver_frees, ==, 0);
    CHECK_U64(grow.num_driver_allocs, ==, 0);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK_U64(INFO(0).num_driver_allocs, ==, 1);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_malloc(&p, 100 * MiB, 1));
    CHECK_U64(INFO(1).num_driver_allocs, >=, 1);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

/* vram_memory_info_field reports the struct as the compiler lays it out: every field once, in
 * order, tiling the struct, with its C type; nothing below 0 or past the last field. */
TEST(stats_memory_info_fields_reported) {
    const char *name = NULL, *type = NULL;
    size_t offset = 0, size = 0, end = 0;
    int n = 0;
    for (; vram_memory_info_field(n, &name, &type, &offset, &size); n++) {
        CHECK_SIZE(offset, ==, end);
        CHECK(strcmp(type, "size_t") == 0 || strcmp(type, "uint64_t") == 0);
        CHECK_SIZE(size, ==, strcmp(type, "size_t") == 0 ? sizeof(size_t) : sizeof(uint64_t));
        end = offset + size;
    }
    CHECK_INT(n, ==, 28);
    CHECK_SIZE(end, ==, sizeof(vram_memory_info));
    CHECK_INT(vram_memory_info_field(-1, &name, NULL, NULL, NULL), ==, 0);
    CHECK_INT(vram_memory_info_field(n, &name, NULL, NULL, NULL), ==, 0);
    static const struct { const char *name; size_t offset; } known[] = {
        { "current", offsetof(vram_memory_info, current) },
        { "limit", offsetof(vram_memory_info, limit) },
        { "num_driver_moves", offsetof(vram_memory_info, num_driver_moves) },
        { "plan_given_back", offsetof(vram_memory_info, plan_given_back) },
        { "plan_refused", offsetof(vram_memory_info, plan_refused) },
        { "asleep_bytes", offsetof(vram_memory_info, asleep_bytes) },
        { "asleep_host_bytes", offsetof(vram_memory_info, asleep_host_bytes) },
        { "host_kept_bytes", offsetof(vram_memory_info, host_kept_bytes) },
        { "over_limit", offsetof(vram_memory_info, over_limit) },
        { "overflow_max", offsetof(vram_memory_info, overflow_max) },
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        int found = 0;
        for (int i = 0; vram_memory_info_field(i, &name, NULL, &offset, NULL); i++) {
            if (strcmp(name, known[k].name) != 0) continue;
            found++;
            CHECK_SIZE(offset, ==, known[k].offset);
        }
        CHECK_INT(found, ==, 1);
    }
    CHECK_INT(vram_is_initialized(), ==, 0);   /* asks nothing of the runtime */
}
