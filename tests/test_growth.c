/*
 * test_growth.c: preallocation (TensorFlow's default) against memory growth, with and without
 * limits, per card and per logical device, and the card's shared budget.
 */
#include "harness.h"

/* ---- preallocation -------------------------------------------------------------------------- */

TEST(prealloc_takes_tf_default) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.limit, ==, 16 * GiB - 1800 * MiB);
    CHECK_SIZE(info.reserved, ==, 16 * GiB - 1800 * MiB);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_SIZE(info.largest_free_block, ==, info.reserved);
    CHECK_INFO_SANE(info);
    CHECK_ALL();
}

TEST(prealloc_default_on_small_card) {
    use_sim("1GiB,3GiB");  /* under 2 GiB free: 225 MiB stay for the system */
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 1 * GiB - 225 * MiB);
    CHECK_SIZE(INFO(0).reserved, ==, 1 * GiB - 225 * MiB);
    CHECK_SIZE(INFO(1).limit, ==, 3 * GiB - 1800 * MiB);
    CHECK_SIZE(INFO(1).reserved, ==, 3 * GiB - 1800 * MiB);
    CHECK_ALL();
}

TEST(prealloc_takes_the_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_init());
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.limit, ==, 4 * GiB);
    CHECK_SIZE(info.reserved, ==, 4 * GiB);
    CHECK_SIZE(info.peak_reserved, ==, 4 * GiB);
    CHECK_ALL();
}

TEST(prealloc_limit_may_be_the_whole_card) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 16 * GiB));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, ==, 16 * GiB);
    CHECK_ALL();
}

TEST(prealloc_logical_devices_take_their_limits) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {3072}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, ==, 1024 * MiB);
    CHECK_SIZE(INFO(0).limit, ==, 1024 * MiB);
    CHECK_SIZE(INFO(1).reserved, ==, 3072 * MiB);
    CHECK_SIZE(INFO(1).limit, ==, 3072 * MiB);
    CHECK_ALL();
}

TEST(prealloc_allocations_do_not_grow) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    vram_memory_info before = INFO(0);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 300 * MiB, 0));
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.reserved, ==, before.reserved);
    CHECK_U64(after.num_driver_allocs, ==, before.num_driver_allocs);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(prealloc_logical_sum_above_card_limit_is_conflict) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 6 * GiB));
    vram_logical_device_configuration two[2] = {{4096}, {4096}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));  /* fits the 16 GiB card */
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_init());
    CHECK_INT(vram_is_initialized(), ==, 0);
    /* with growth the same configuration may overcommit: the shared budget decides */
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());
    CHECK_ALL();
}

/* ---- growth --------------------------------------------------------------------------------- */

TEST(growth_starts_near_zero) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, <=, NEAR_ZERO);
    CHECK_SIZE(info.limit, ==, tf_default_limit(16 * GiB));  /* the cap growth may reach */
    CHECK_INFO_SANE(info);
    CHECK_ALL();
}

TEST(growth_grows_with_allocations) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *blocks[8];
    size_t last_reserved = 0;
    for (int i = 0; i < 8; i++) {
        CHECK_OK(vram_malloc(&blocks[i], 100 * MiB, 0));
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.current, ==, (size_t)(i + 1) * 100 * MiB);
        CHECK_SIZE(info.reserved, >=, info.current);
        CHECK_SIZE(info.reserved, >=, last_reserved);
        CHECK_SIZE(info.reserved, <=, info.limit);
        CHECK_INFO_SANE(info);
        last_reserved = info.reserved;
        CHECK_ALL();
    }
    CHECK_SIZE(last_reserved, <, 4 * GiB);  /* grew on demand, did not take the card */
    for (int i = 0; i < 8; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(growth_with_limit_stops_at_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *blocks[64];
    int n = 0;
    vram_status s = VRAM_OK;
    while (n < 64) {
        s = vram_malloc(&blocks[n], 64 * MiB, 0);
        vram_memory_info info = INFO(0);
        CHECK_SIZE(info.reserved, <=, 1 * GiB);
        CHECK_SIZE(info.limit, ==, 1 * GiB);
        if (s != VRAM_OK) break;
        n++;
    }
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    CHECK_INT(n, >=, 15);  /* nearly the whole limit was usable */
    CHECK_INT(n, <=, 16);
    CHECK_ALL();
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

/* Growth without virtual memory management (vmm:false: a cuMemAlloc region per growth) gives an idle
 * region back when the limit would be crossed, as growth with it moves or unmaps idle memory:
 * 2 MiB taken and freed leaves a free 2 MiB region; a 4 MiB request under a 4 MiB limit then fits
 * only once that region goes back (one driver free), and never fails while nothing is in use. */
TEST(growth_plain_gives_an_idle_region_back_at_the_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 4 * MiB));
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 2 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).reserved, ==, 2 * MiB);   /* kept for reuse */
    CHECK_OK(vram_malloc(&b, 4 * MiB, 0));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, ==, 4 * MiB);
    CHECK_SIZE(info.current, ==, 4 * MiB);
    vram_allocator_stats st;
    CHECK_OK(vram_get_allocator_stats(0, &st));
    CHECK_INT(st.num_device_free, ==, 1);
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(growth_differs_between_cards) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(1, 1));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, ==, tf_default_limit(16 * GiB));
    CHECK_SIZE(INFO(1).reserved, <=, NEAR_ZERO);
    int enabled = 0;
    CHECK_OK(vram_get_memory_growth(0, &enabled));
    CHECK_INT(enabled, ==, -1);
    CHECK_OK(vram_get_memory_growth(1, &enabled));
    CHECK_INT(enabled, ==, 1);
    CHECK_ALL();
}

TEST(growth_logical_device_limit_inside_card_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 6 * GiB));
    vram_logical_device_configuration two[2] = {{4096}, {4096}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_SIZE(INFO(0).limit, ==, 4 * GiB);
    CHECK_SIZE(INFO(1).limit, ==, 4 * GiB);

    /* one device alone stops at its own 4 GiB */
    void *a[32];
    int na = 0;
    while (na < 32 && vram_malloc(&a[na], 256 * MiB, 0) == VRAM_OK) na++;
    CHECK_INT(na, >=, 15);
    CHECK_INT(na, <=, 16);
    CHECK_SIZE(INFO(0).reserved, <=, 4 * GiB);

    /* the other gets what is left of the card's 6 GiB */
    void *b[32];
    int nb = 0;
    while (nb < 32 && vram_malloc(&b[nb], 256 * MiB, 1) == VRAM_OK) nb++;
    size_t together = INFO(0).reserved + INFO(1).reserved;
    CHECK_SIZE(together, <=, 6 * GiB);
    CHECK_SIZE(INFO(1).reserved, <=, 4 * GiB);
    CHECK_INT(na + nb, >=, 22);  /* nearly 6 GiB in 256 MiB blocks */
    CHECK_INT(na + nb, <=, 24);
    CHECK_ALL();
    for (int i = 0; i < na; i++) CHECK_OK(vram_free(a[i]));
    for (int i = 0; i < nb; i++) CHECK_OK(vram_free(b[i]));
    CHECK_ALL();
}

TEST(growth_logical_devices_share_card_budget_alternating) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 6 * GiB));
    vram_logical_device_configuration two[2] = {{4096}, {4096}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *blocks[64];
    int n = 0, failures = 0;
    for (int round = 0; round < 64 && failures < 2; round++) {
        int dev = round % 2;
        vram_status s = vram_malloc(&blocks[n], 128 * MiB, dev);
        if (s == VRAM_OK) {
            n++;
            failures = 0;
        } else {
            CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
            failures++;
        }
        CHECK_SIZE(INFO(0).reserved + INFO(1).reserved, <=, 6 * GiB);
        CHECK_ALL();
    }
    CHECK_INT(n, >=, 44);  /* nearly 6 GiB in 128 MiB blocks */
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

TEST(growth_with_logical_limit_above_card_cap) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 2 * GiB));
    vram_logical_device_configuration big = {4096};
    CHECK_OK(vram_set_logical_device_configuration(0, &big, 1));
    CHECK_SIZE(INFO(0).limit, ==, 2 * GiB);
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 3 * GiB, 0));
    CHECK_OK(vram_malloc(&p, 1 * GiB, 0));
    CHECK_SIZE(INFO(0).reserved, <=, 2 * GiB);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(growth_reuses_memory_it_holds) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 512 * MiB, 0));
    CHECK_OK(vram_free(p));
    vram_memory_info before = INFO(0);
    CHECK_OK(vram_malloc(&p, 512 * MiB, 0));
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.reserved, ==, before.reserved);
    CHECK_U64(after.num_driver_allocs, ==, before.num_driver_allocs);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

/* A limit that is not a multiple of the 2 MiB mapping granularity is still usable up to the
 * limit itself: growth must not strand its last partial granule. */
TEST(growth_limit_not_multiple_of_granularity) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 5 * MiB));
    void *blocks[8];
    int n = 0;
    vram_status s = VRAM_OK;
    while (n < 8 && (s = vram_malloc(&blocks[n], 1 * MiB, 0)) == VRAM_OK) {
        CHECK_SIZE(INFO(0).reserved, <=, 5 * MiB);
        n++;
    }
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    CHECK_INT(n, ==, 5);
    CHECK_ALL();
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

TEST(growth_tiny_logical_device_is_usable) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    vram_logical_device_configuration cfg[2] = {{1}, {3}};  /* 1 MiB and 3 MiB */
    CHECK_OK(vram_set_logical_device_configuration(0, cfg, 2));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 256, 0));
    CHECK_OK(vram_malloc(&q, 3 * MiB, 1));
    CHECK_SIZE(INFO(0).reserved, <=, 1 * MiB);
    CHECK_SIZE(INFO(1).reserved, <=, 3 * MiB);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(q));
    CHECK_ALL();
}

TEST(growth_shared_budget_oom_names_card_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 768 * MiB, 0));
    /* device 1 is far below its own 1 GiB, but the card's 1 GiB is nearly used up */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 512 * MiB, 1));
    CHECK_CONTAINS(vram_last_error(), "vram_set_memory_limit");
    CHECK_CONTAINS_NOCASE(vram_last_error(), "requested");
    CHECK_CONTAINS_NOCASE(vram_last_error(), "largest free block");
    CHECK_U64(INFO(1).num_ooms, ==, 1);
    CHECK_OK(vram_malloc(&q, 128 * MiB, 1));  /* what is left of the card's budget */
    CHECK_SIZE(INFO(0).reserved + INFO(1).reserved, <=, 1 * GiB);
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(growth_fraction_limit_is_reachable) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_FRACTION", "0.3");  /* 5153960755 bytes: not a multiple of anything */
    CHECK_OK(vram_set_memory_growth(0, 1));
    size_t limit = INFO(0).limit;
    CHECK_SIZE(limit, ==, (size_t)(0.3 * (double)(16 * GiB)));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, limit - 4 * MiB, 0));
    CHECK_SIZE(INFO(0).reserved, <=, limit);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(prealloc_fraction_limit_is_reachable) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_FRACTION", "0.3");
    size_t limit = INFO(0).limit;
    CHECK_SIZE(INFO(0).reserved, ==, limit);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, limit & ~(size_t)255, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(growth_odd_limit_in_one_block) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 5 * MiB + 256));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 5 * MiB + 256, 0));
    CHECK_SIZE(INFO(0).reserved, <=, 5 * MiB + 256);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 1, 0));
    CHECK_CONTAINS(vram_last_error(), "vram_set_memory_limit");
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_malloc(&p, 5 * MiB + 256, 0));  /* reused, nothing new taken */
    CHECK_SIZE(INFO(0).reserved, <=, 5 * MiB + 256);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}
