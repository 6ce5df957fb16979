/*
 * test_config.c: which calls start the runtime, the freeze of the configuration at the start
 * (TensorFlow's sentences), visibility, unknown physical indices, and configuring again after
 * vram_shutdown.
 */
#include <pthread.h>
#include <stdio.h>

#include "harness.h"

#define VISIBLE_FROZEN  "Visible devices cannot be modified after being initialized"
#define PHYSICAL_FROZEN "Physical devices cannot be modified after being initialized"
#define VIRTUAL_FROZEN  "Virtual devices cannot be modified after being initialized"

/* ---- what starts the runtime ---------------------------------------------------------------- */

TEST(start_by_list_logical_devices) {
    use_sim("16GiB");
    CHECK_INT(vram_is_initialized(), ==, 0);
    int n = 0;
    CHECK_OK(vram_list_logical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 1);
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_ALL();
}

TEST(start_by_get_memory_info) {
    use_sim("16GiB");
    CHECK_INT(vram_is_initialized(), ==, 0);
    vram_memory_info info;
    CHECK_OK(vram_get_memory_info(0, &info));
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_ALL();
}

TEST(start_by_malloc) {
    use_sim("16GiB");
    CHECK_INT(vram_is_initialized(), ==, 0);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1024, 0));
    CHECK(p != NULL);
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(start_by_init) {
    use_sim("16GiB");
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_OK(vram_init());
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_ALL();
}

TEST(start_not_by_configuration_calls) {
    use_sim("2x16GiB");
    int visible[2] = {1, 0}, n = 0, enabled = 0;
    size_t limit = 0;
    vram_logical_device_configuration cfg = {1024};
    CHECK_OK(vram_set_visible_devices(visible, 2));
    CHECK_OK(vram_get_visible_devices(visible, 2, &n));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_get_memory_growth(0, &enabled));
    CHECK_OK(vram_set_memory_limit(1, 4 * GiB));
    CHECK_OK(vram_get_memory_limit(1, &limit));
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    CHECK_OK(vram_get_logical_device_configuration(0, &cfg, 1, &n));
    CHECK_INT(vram_is_initialized(), ==, 0);
}

/* ---- the freeze ----------------------------------------------------------------------------- */

TEST(frozen_visible_devices_change_fails) {
    use_sim("2x16GiB");
    CHECK_OK(vram_init());
    int one[1] = {0};
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_visible_devices(one, 1));
    CHECK_ERROR_IS(VISIBLE_FROZEN);
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_visible_devices(NULL, 0));
    CHECK_ERROR_IS(VISIBLE_FROZEN);
    int n = 0, got[2];
    CHECK_OK(vram_get_visible_devices(got, 2, &n));
    CHECK_INT(n, ==, 2);
}

TEST(frozen_visible_devices_same_set_ok) {
    use_sim("3x16GiB");
    int set[2] = {2, 0};
    CHECK_OK(vram_set_visible_devices(set, 2));
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_visible_devices(set, 2));
    int ascending[2] = {0, 2};
    CHECK_OK(vram_set_visible_devices(ascending, 2));  /* the same set */
    int other[2] = {0, 1};
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_visible_devices(other, 2));
    CHECK_ERROR_IS(VISIBLE_FROZEN);
}

TEST(frozen_visible_devices_default_set_ok) {
    use_sim("2x16GiB");
    CHECK_OK(vram_init());
    int all[2] = {0, 1};
    CHECK_OK(vram_set_visible_devices(all, 2));
}

TEST(frozen_growth_change_fails) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_growth(0, 1));
    CHECK_ERROR_IS(PHYSICAL_FROZEN);
    CHECK_OK(vram_set_memory_growth(0, 0));  /* growth off is what is in force */
}

TEST(frozen_growth_same_value_ok) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_growth(0, 0));
    CHECK_ERROR_IS(PHYSICAL_FROZEN);
    int enabled = -1;
    CHECK_OK(vram_get_memory_growth(0, &enabled));
    CHECK_INT(enabled, ==, 1);
}

TEST(frozen_growth_compares_with_forced_growth) {
    use_sim("16GiB");
    set_env("VRAM_FORCE_ALLOW_GROWTH", "true");
    CHECK_OK(vram_set_memory_growth(0, 0));
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_memory_growth(0, 1));  /* growth on is what is in force */
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_growth(0, 0));
    CHECK_ERROR_IS(PHYSICAL_FROZEN);
}

TEST(frozen_limit_change_fails) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_init());
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_limit(0, 2 * GiB));
    CHECK_ERROR_IS(PHYSICAL_FROZEN);
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_limit(0, 0));
    CHECK_ERROR_IS(PHYSICAL_FROZEN);
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    size_t limit = 0;
    CHECK_OK(vram_get_memory_limit(0, &limit));
    CHECK_SIZE(limit, ==, 4 * GiB);
    CHECK_SIZE(INFO(0).limit, ==, 4 * GiB);
}

TEST(frozen_limit_none_set_ok) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_memory_limit(0, 0));  /* no limit is what is in force */
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_limit(0, 1 * GiB));
    CHECK_ERROR_IS(PHYSICAL_FROZEN);
}

TEST(frozen_logical_configuration_change_fails) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_OK(vram_init());
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_logical_device_configuration(0, two, 1));
    CHECK_ERROR_IS(VIRTUAL_FROZEN);
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_logical_device_configuration(0, NULL, 0));
    CHECK_ERROR_IS(VIRTUAL_FROZEN);
    vram_logical_device_configuration bigger[2] = {{1024}, {2048}};
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_logical_device_configuration(0, bigger, 2));
    CHECK_ERROR_IS(VIRTUAL_FROZEN);
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
}

TEST(frozen_logical_configuration_none_set_ok) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_OK(vram_set_logical_device_configuration(0, NULL, 0));
    vram_logical_device_configuration one = {1024};
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_logical_device_configuration(0, &one, 1));
    CHECK_ERROR_IS(VIRTUAL_FROZEN);
}

TEST(config_allowed_again_after_shutdown) {
    use_sim("2x16GiB");
    CHECK_OK(vram_init());
    CHECK_OK(vram_shutdown());
    int one[1] = {1};
    vram_logical_device_configuration two[2] = {{1024}, {2048}};
    CHECK_OK(vram_set_visible_devices(one, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    CHECK_OK(vram_set_memory_limit(1, 8 * GiB));
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));
    CHECK_OK(vram_init());
    vram_logical_device devs[4];
    int n = 0;
    CHECK_OK(vram_list_logical_devices(devs, 4, &n));
    CHECK_INT(n, ==, 2);
    CHECK_INT(devs[0].physical_index, ==, 1);
    CHECK_SIZE(devs[0].memory_limit_bytes, ==, 1024 * MiB);
    CHECK_SIZE(devs[1].memory_limit_bytes, ==, 2048 * MiB);
    CHECK_SIZE(INFO(0).reserved, <=, NEAR_ZERO);  /* growth is in force */
    CHECK_ALL();
}

/* Configuration racing with the start: each call lands before it (VRAM_OK) or fails with
 * VRAM_ERR_ALREADY_INITIALIZED; what is in force afterwards is the last call that landed. */
enum { RACERS = 8 };
static pthread_barrier_t race_barrier;
static vram_status race_status[RACERS];

static void *race_set_limit(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&race_barrier);
    if (i == 0) {
        race_status[i] = vram_init();
    } else {
        race_status[i] = vram_set_memory_limit(0, (size_t)i * GiB);
    }
    return NULL;
}

TEST(config_racing_with_start_is_serialised) {
    use_sim("16GiB");
    pthread_t threads[RACERS];
    pthread_barrier_init(&race_barrier, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        CHECK_INT(pthread_create(&threads[i], NULL, race_set_limit, (void *)(intptr_t)i), ==, 0);
    }
    for (int i = 0; i < RACERS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&race_barrier);
    CHECK_STATUS(VRAM_OK, race_status[0]);
    for (int i = 1; i < RACERS; i++) {
        CHECK(race_status[i] == VRAM_OK || race_status[i] == VRAM_ERR_ALREADY_INITIALIZED);
    }
    size_t limit = 0;
    CHECK_OK(vram_get_memory_limit(0, &limit));
    vram_memory_info info = INFO(0);
    if (limit == 0) {
        CHECK_SIZE(info.limit, ==, tf_default_limit(16 * GiB));
    } else {
        CHECK_SIZE(info.limit, ==, limit);
        CHECK_SIZE(info.reserved, ==, limit);
    }
    CHECK_ALL();
}

/* ---- visibility ----------------------------------------------------------------------------- */

TEST(visible_devices_default_is_all) {
    use_sim("3x16GiB");
    int got[3] = {-1, -1, -1}, n = 0;
    CHECK_OK(vram_get_visible_devices(got, 3, &n));
    CHECK_INT(n, ==, 3);
    for (int i = 0; i < 3; i++) CHECK_INT(got[i], ==, i);
}

TEST(visible_devices_get_is_ascending) {
    use_sim("3x16GiB");
    int set[2] = {2, 0};
    CHECK_OK(vram_set_visible_devices(set, 2));
    int got[3] = {-1, -1, -1}, n = 0;
    CHECK_OK(vram_get_visible_devices(got, 3, &n));
    CHECK_INT(n, ==, 2);
    CHECK_INT(got[0], ==, 0);
    CHECK_INT(got[1], ==, 2);
    CHECK_INT(got[2], ==, -1);
    CHECK_OK(vram_get_visible_devices(got, 1, &n));  /* capacity below the count */
    CHECK_INT(n, ==, 2);
    CHECK_OK(vram_get_visible_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 2);
}

TEST(visible_devices_duplicates_are_invalid) {
    use_sim("2x16GiB");
    int dup[2] = {0, 0};
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_visible_devices(dup, 2));
    int n = 0;
    CHECK_OK(vram_get_visible_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 2);  /* nothing changed */
}

TEST(visible_devices_bad_arguments) {
    use_sim("2x16GiB");
    int one[1] = {0};
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_visible_devices(one, -1));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_visible_devices(NULL, 1));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_visible_devices(NULL, 0, NULL));
}

TEST(visible_devices_none_hides_all) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_visible_devices(NULL, 0));
    int n = 99;
    CHECK_OK(vram_get_visible_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 0);
    CHECK_OK(vram_list_logical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 0);
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_malloc(&p, 256, 0));
}

/* ---- unknown physical indices --------------------------------------------------------------- */

static void check_unrecognized(int index) {
    char expected[64];
    snprintf(expected, sizeof expected, "Unrecognized device: %d", index);
    int enabled = 0, n = 0;
    size_t limit = 0;
    vram_logical_device_configuration cfg = {1024};

    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_visible_devices(&index, 1));
    CHECK_ERROR_CONTAINS(expected);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_memory_growth(index, 1));
    CHECK_ERROR_CONTAINS(expected);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_memory_growth(index, &enabled));
    CHECK_ERROR_CONTAINS(expected);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_memory_limit(index, GiB));
    CHECK_ERROR_CONTAINS(expected);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_memory_limit(index, &limit));
    CHECK_ERROR_CONTAINS(expected);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_logical_device_configuration(index, &cfg, 1));
    CHECK_ERROR_CONTAINS(expected);
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE,
                 vram_get_logical_device_configuration(index, &cfg, 1, &n));
    CHECK_ERROR_CONTAINS(expected);
}

TEST(unrecognized_physical_index_7) {
    use_sim("2x16GiB");
    check_unrecognized(7);
    int both[2] = {0, 7};
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_visible_devices(both, 2));
    CHECK_ERROR_CONTAINS("Unrecognized device: 7");
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(unrecognized_physical_index_negative) {
    use_sim("2x16GiB");
    check_unrecognized(-1);
}

TEST(unrecognized_physical_index_after_start) {
    use_sim("2x16GiB");
    CHECK_OK(vram_init());
    int enabled = 0, n = 0;
    size_t limit = 0;
    vram_logical_device_configuration cfg;
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_memory_growth(7, &enabled));
    CHECK_ERROR_CONTAINS("Unrecognized device: 7");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_memory_limit(7, &limit));
    CHECK_ERROR_CONTAINS("Unrecognized device: 7");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE,
                 vram_get_logical_device_configuration(7, &cfg, 1, &n));
    CHECK_ERROR_CONTAINS("Unrecognized device: 7");
}

TEST(config_getters_null_outputs_are_invalid) {
    use_sim("16GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_memory_growth(0, NULL));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_memory_limit(0, NULL));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_logical_device_configuration(0, NULL, 0, NULL));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_list_logical_devices(NULL, 0, NULL));
}

TEST(growth_unset_reads_minus_one) {
    use_sim("2x16GiB");
    int enabled = 0;
    CHECK_OK(vram_get_memory_growth(0, &enabled));
    CHECK_INT(enabled, ==, -1);
    CHECK_OK(vram_set_memory_growth(1, 0));
    CHECK_OK(vram_get_memory_growth(1, &enabled));
    CHECK_INT(enabled, ==, 0);
    size_t limit = 1;
    CHECK_OK(vram_get_memory_limit(0, &limit));
    CHECK_SIZE(limit, ==, 0);
}

TEST(config_limit_zero_removes_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_set_memory_limit(0, 0));
    size_t limit = 1;
    CHECK_OK(vram_get_memory_limit(0, &limit));
    CHECK_SIZE(limit, ==, 0);
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(16 * GiB));
}
