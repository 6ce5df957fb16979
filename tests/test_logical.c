/*
 * test_logical.c: logical devices: enumeration over the visible cards, their limits, and the
 * checks of logical device configurations.
 */
#include "harness.h"

TEST(logical_enumerates_visible_cards_in_order) {
    use_sim("2x16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {2048}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    vram_logical_device devs[4];
    int n = 0;
    CHECK_OK(vram_list_logical_devices(devs, 4, &n));
    CHECK_INT(n, ==, 3);
    const char *names[3] = {"/device:GPU:0", "/device:GPU:1", "/device:GPU:2"};
    const int physical[3] = {0, 0, 1};
    const size_t limits[3] = {1024 * MiB, 2048 * MiB, tf_default_limit(16 * GiB)};
    for (int i = 0; i < 3; i++) {
        CHECK_INT(devs[i].index, ==, i);
        CHECK_STR_EQ(devs[i].name, names[i]);
        CHECK_INT(devs[i].physical_index, ==, physical[i]);
        CHECK_SIZE(devs[i].memory_limit_bytes, ==, limits[i]);
        CHECK_SIZE(INFO(i).limit, ==, limits[i]);
    }
    CHECK_ALL();
}

TEST(logical_split_on_second_card) {
    use_sim("2x16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));
    vram_logical_device devs[3];
    int n = 0;
    CHECK_OK(vram_list_logical_devices(devs, 3, &n));
    CHECK_INT(n, ==, 3);
    CHECK_INT(devs[0].physical_index, ==, 0);
    CHECK_INT(devs[1].physical_index, ==, 1);
    CHECK_INT(devs[2].physical_index, ==, 1);
    CHECK_SIZE(devs[2].memory_limit_bytes, ==, 1024 * MiB);
}

TEST(logical_hidden_cards_give_none) {
    use_sim("3x16GiB");
    int visible[2] = {0, 2};
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));  /* on a hidden card */
    CHECK_OK(vram_set_visible_devices(visible, 2));
    vram_logical_device devs[3];
    int n = 0;
    CHECK_OK(vram_list_logical_devices(devs, 3, &n));
    CHECK_INT(n, ==, 2);
    CHECK_INT(devs[0].physical_index, ==, 0);
    CHECK_INT(devs[1].physical_index, ==, 2);
    CHECK_STR_EQ(devs[1].name, "/device:GPU:1");
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_malloc(&p, 256, 2));
}

TEST(logical_list_capacity_smaller_than_count) {
    use_sim("16GiB");
    vram_logical_device_configuration three[3] = {{512}, {512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(0, three, 3));
    vram_logical_device devs[3];
    memset(devs, 0, sizeof devs);
    devs[1].index = -77;
    int n = 0;
    CHECK_OK(vram_list_logical_devices(devs, 1, &n));
    CHECK_INT(n, ==, 3);
    CHECK_STR_EQ(devs[0].name, "/device:GPU:0");
    CHECK_INT(devs[1].index, ==, -77);
}

TEST(logical_zero_limit_is_invalid) {
    use_sim("16GiB");
    vram_logical_device_configuration bad[2] = {{1024}, {0}};
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_logical_device_configuration(0, bad, 2));
    int n = 99;
    CHECK_OK(vram_get_logical_device_configuration(0, NULL, 0, &n));
    CHECK_INT(n, ==, 0);  /* nothing changed */
}

TEST(logical_bad_arguments) {
    use_sim("16GiB");
    vram_logical_device_configuration one = {1024};
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_logical_device_configuration(0, &one, -1));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_logical_device_configuration(0, NULL, 1));
}

TEST(logical_sum_above_card_is_conflict) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{10240}, {10240}};
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_logical_device_configuration(0, two, 2));
    vram_logical_device_configuration huge = {(size_t)1 << 40};  /* 1 EiB in MiB: no overflow */
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_logical_device_configuration(0, &huge, 1));
    vram_logical_device_configuration wrap[2] = {{SIZE_MAX / 2}, {SIZE_MAX / 2}};
    vram_status s = vram_set_logical_device_configuration(0, wrap, 2);
    CHECK(s == VRAM_ERR_CONFLICT || s == VRAM_ERR_INVALID_ARGUMENT);
    int n = 99;
    CHECK_OK(vram_get_logical_device_configuration(0, NULL, 0, &n));
    CHECK_INT(n, ==, 0);
}

TEST(logical_sum_equal_to_card_is_accepted) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{8192}, {8192}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
}

TEST(logical_memory_limit_above_card_is_conflict) {
    use_sim("16GiB");
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_memory_limit(0, 17 * GiB));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_memory_limit(0, SIZE_MAX));
    CHECK_OK(vram_set_memory_limit(0, 16 * GiB));
    size_t limit = 0;
    CHECK_OK(vram_get_memory_limit(0, &limit));
    CHECK_SIZE(limit, ==, 16 * GiB);
}

TEST(logical_zero_configs_remove_the_split) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_OK(vram_set_logical_device_configuration(0, NULL, 0));
    int n = 99;
    CHECK_OK(vram_get_logical_device_configuration(0, NULL, 0, &n));
    CHECK_INT(n, ==, 0);
    CHECK_OK(vram_list_logical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 1);
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(16 * GiB));
}

TEST(logical_get_returns_what_was_set) {
    use_sim("2x16GiB");
    vram_logical_device_configuration set[3] = {{1024}, {2048}, {3000}};
    CHECK_OK(vram_set_logical_device_configuration(0, set, 3));
    vram_logical_device_configuration got[3] = {{0}, {0}, {0}};
    int n = 0;
    CHECK_OK(vram_get_logical_device_configuration(0, got, 3, &n));
    CHECK_INT(n, ==, 3);
    for (int i = 0; i < 3; i++) CHECK_SIZE(got[i].memory_limit_mb, ==, set[i].memory_limit_mb);

    vram_logical_device_configuration first[3] = {{0}, {0}, {77}};
    CHECK_OK(vram_get_logical_device_configuration(0, first, 2, &n));
    CHECK_INT(n, ==, 3);
    CHECK_SIZE(first[1].memory_limit_mb, ==, 2048);
    CHECK_SIZE(first[2].memory_limit_mb, ==, 77);  /* beyond capacity: untouched */

    CHECK_OK(vram_get_logical_device_configuration(1, got, 3, &n));
    CHECK_INT(n, ==, 0);
}

TEST(logical_limit_capped_by_card_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 6 * GiB));
    vram_logical_device_configuration cfg[3] = {{4096}, {4096}, {8192}};
    CHECK_OK(vram_set_logical_device_configuration(0, cfg, 3));
    vram_logical_device devs[3];
    int n = 0;
    CHECK_OK(vram_list_logical_devices(devs, 3, &n));
    CHECK_INT(n, ==, 3);
    CHECK_SIZE(devs[0].memory_limit_bytes, ==, 4 * GiB);
    CHECK_SIZE(devs[1].memory_limit_bytes, ==, 4 * GiB);
    CHECK_SIZE(devs[2].memory_limit_bytes, ==, 6 * GiB);  /* min(8 GiB, the card's 6 GiB) */
    CHECK_SIZE(INFO(2).limit, ==, 6 * GiB);
    CHECK_ALL();
}

TEST(logical_devices_are_independent_pools) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 100 * MiB, 0));
    CHECK_OK(vram_malloc(&q, 200 * MiB, 1));
    CHECK_SIZE(INFO(0).current, ==, 100 * MiB);
    CHECK_SIZE(INFO(1).current, ==, 200 * MiB);
    CHECK_OK(vram_free(q));  /* freed through its own pool, whichever index it came from */
    CHECK_SIZE(INFO(0).current, ==, 100 * MiB);
    CHECK_SIZE(INFO(1).current, ==, 0);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

/* A free names no device: vram asks only the pools whose addresses may hold the block (each pool's
 * span of addresses; that it asks no other is a matter of speed, which bench/warm_pair shows), so
 * blocks of every logical device, growing or preallocated, go back to their own pool in any order,
 * vram_record_stream finds them alike, and what is no block is refused by all. */
TEST(frees_find_their_pool_among_many) {
    use_sim("2x16GiB");
    vram_logical_device_configuration three[3] = {{1024}, {1024}, {2048}};
    CHECK_OK(vram_set_logical_device_configuration(0, three, 3));
    CHECK_OK(vram_set_memory_growth(0, 1));          /* card 0 grows, card 1 is preallocated */
    enum { N = 400, DEVS = 4 };
    void *p[N] = {0};
    int dev[N];
    uint64_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        dev[i] = (int)((seed >> 33) % DEVS);
        CHECK_OK(vram_malloc(&p[i], (size_t)(1 + (seed >> 40) % 4096) * KiB, dev[i]));
    }
    for (int k = 0; k < DEVS; k++) CHECK_SIZE(INFO(k).current, >, 0);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free((char *)p[0] + 256));   /* inside a pool, no block */
    CHECK_ERROR_CONTAINS("vram_free(");
    int local = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(&local));               /* no pool's */
    CHECK_ERROR_CONTAINS("not allocated by vram");
    for (int i = 0; i < N; i += 7) CHECK_OK(vram_record_stream(p[i], (void *)0x5));   /* found alike */
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_record_stream(&local, (void *)0x5));
    for (int i = N - 1; i >= 0; i -= 2) CHECK_OK(vram_free(p[i]));
    for (int i = 0; i < N; i += 2) CHECK_OK(vram_free(p[i]));
    for (int k = 0; k < DEVS; k++) CHECK_SIZE(INFO(k).current, ==, 0);
    vram__sim_stream_complete((void *)0x5);
    for (int k = 0; k < DEVS; k++) CHECK_OK(vram_trim(k, 0));   /* the recorded blocks' waits end */
    for (int k = 0; k < DEVS; k++) CHECK_SIZE(INFO(k).reserved, ==, 0);
    CHECK_ALL();
}

/* What serves a framework's "cuda:N": the first logical device on physical card N. */
TEST(logical_device_of_physical_card) {
    use_sim("3x16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {2048}};
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));
    int hide0[2] = {1, 2};
    CHECK_OK(vram_set_visible_devices(hide0, 2));
    int logical = -1;
    CHECK_OK(vram_logical_device_of(1, &logical));
    CHECK_INT(logical, ==, 0);
    CHECK_OK(vram_logical_device_of(2, &logical));
    CHECK_INT(logical, ==, 2);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_logical_device_of(0, &logical));   /* hidden */
    CHECK(strstr(vram_last_error(), "Unrecognized device: 0") != NULL);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_logical_device_of(7, &logical));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_logical_device_of(1, NULL));
    CHECK_OK(vram_logical_device_of(2, &logical));   /* a success leaves the last failure's message */
    CHECK(strstr(vram_last_error(), "vram_logical_device_of: logical_device is NULL") != NULL);
}

/* PyTorch's pluggable-allocator entry points: stream-ordered, on the card's first logical device. */
TEST(logical_plugin_alloc_and_free) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(1, 1));
    void *stream = (void *)0x10;
    void *p = vram_plugin_alloc(3 * MiB, 1, stream);
    CHECK(p != NULL);
    CHECK_SIZE(INFO(1).current, ==, 3 * MiB);
    CHECK_SIZE(INFO(0).current, ==, 0);
    vram_plugin_free(p, 3 * MiB, 1, stream);
    CHECK_SIZE(INFO(1).current, ==, 0);
    void *q = vram_plugin_alloc(3 * MiB, 1, stream);      /* same stream: reused at once */
    CHECK(q == p);
    vram_plugin_free(q, 3 * MiB, 1, stream);
    CHECK(vram_plugin_alloc(1 * MiB, 5, stream) == NULL);  /* no such card: NULL, and why */
    CHECK(strstr(vram_last_error(), "Unrecognized device: 5") != NULL);
    CHECK(vram_plugin_alloc(64 * GiB, 0, stream) == NULL); /* too large: NULL, and why */
    CHECK(strstr(vram_last_error(), "out of memory") != NULL);
    CHECK(vram_plugin_alloc(-1, 0, stream) == NULL);
    CHECK(strstr(vram_last_error(), "negative size -1") != NULL);
    CHECK(vram_plugin_alloc(0, 0, stream) == NULL);         /* nothing asked, nothing given */
    void *r = vram_plugin_alloc(1 * MiB, 0, stream);        /* a success after failures */
    CHECK(r != NULL);
    CHECK_SIZE(INFO(0).current, ==, 1 * MiB);
    vram_plugin_free(r, 1 * MiB, 0, stream);
    CHECK_ALL();
}
