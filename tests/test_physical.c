/*
 * test_physical.c: enumerating physical devices, which loads the backend but does not start the
 * runtime; CUDA_VISIBLE_DEVICES; the choice of backend.
 */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

TEST(physical_list_does_not_start_runtime) {
    use_sim("2x16GiB");
    vram_physical_device devs[2];
    int n = -1;
    CHECK_OK(vram_list_physical_devices(NULL, 0, &n));
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_OK(vram_list_physical_devices(devs, 2, &n));
    CHECK_INT(n, ==, 2);
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(physical_count_with_null_output) {
    use_sim("3x16GiB");
    int n = -1;
    CHECK_OK(vram_list_physical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 3);
}

TEST(physical_capacity_smaller_than_count) {
    use_sim("3x16GiB");
    vram_physical_device devs[3];
    memset(devs, 0, sizeof devs);
    devs[1].index = -77;
    devs[2].index = -77;
    int n = -1;
    CHECK_OK(vram_list_physical_devices(devs, 1, &n));
    CHECK_INT(n, ==, 3);
    CHECK_INT(devs[0].index, ==, 0);
    CHECK_STR_EQ(devs[0].name, "/physical_device:GPU:0");
    CHECK_INT(devs[1].index, ==, -77);  /* beyond capacity: untouched */
    CHECK_INT(devs[2].index, ==, -77);
}

TEST(physical_names_and_properties) {
    use_sim("80GiB,24GiB");
    vram_physical_device devs[2];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(devs, 2, &n));
    CHECK_INT(n, ==, 2);
    const size_t totals[2] = {80 * GiB, 24 * GiB};
    const char *names[2] = {"/physical_device:GPU:0", "/physical_device:GPU:1"};
    for (int i = 0; i < 2; i++) {
        CHECK_INT(devs[i].index, ==, i);
        CHECK_STR_EQ(devs[i].name, names[i]);
        CHECK_STR_EQ(devs[i].product, "vram simulated GPU");
        CHECK_INT(devs[i].compute_major, ==, 9);
        CHECK_INT(devs[i].compute_minor, ==, 0);
        CHECK_SIZE(devs[i].total_bytes, ==, totals[i]);
        CHECK(strncmp(devs[i].uuid, "GPU-", 4) == 0);
    }
    CHECK(strcmp(devs[0].uuid, devs[1].uuid) != 0);
}

TEST(physical_null_count_is_invalid) {
    use_sim("16GiB");
    vram_physical_device dev;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_list_physical_devices(&dev, 1, NULL));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_list_physical_devices(NULL, 0, NULL));
}

TEST(physical_cuda_visible_devices_selects_card) {
    use_sim("80GiB,24GiB");
    set_env("CUDA_VISIBLE_DEVICES", "1");
    vram_physical_device devs[2];
    int n = -1;
    CHECK_OK(vram_list_physical_devices(devs, 2, &n));
    CHECK_INT(n, ==, 1);
    CHECK_INT(devs[0].index, ==, 0);
    CHECK_STR_EQ(devs[0].name, "/physical_device:GPU:0");
    CHECK_SIZE(devs[0].total_bytes, ==, 24 * GiB);
}

/* CUDA_VISIBLE_DEVICES as the driver reads it: a card's "GPU-" UUID names it, and the list ends at
 * the first entry that names no card or one already listed. */
TEST(physical_cuda_visible_devices_uuid_and_end_of_list) {
    use_sim("80GiB,24GiB,16GiB");
    vram_physical_device devs[3];
    int n = -1;
    CHECK_OK(vram_list_physical_devices(devs, 3, &n));
    CHECK_INT(n, ==, 3);
    char uuid[sizeof devs[1].uuid];
    snprintf(uuid, sizeof uuid, "%s", devs[1].uuid);
    CHECK(strncmp(uuid, "GPU-", 4) == 0);
    static const struct {
        const char *visible;
        int n;
        size_t first;
    } cases[] = {{NULL, 1, 24 * GiB}, {"2,x,0", 1, 16 * GiB}, {"2,2,0", 1, 16 * GiB}, {"1,0,7,2", 2, 24 * GiB}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(vram_shutdown());
        set_env("CUDA_VISIBLE_DEVICES", cases[i].visible ? cases[i].visible : uuid);
        n = -1;
        CHECK_OK(vram_list_physical_devices(devs, 3, &n));
        CHECK_INT(n, ==, cases[i].n);
        CHECK_SIZE(devs[0].total_bytes, ==, cases[i].first);
    }
}

TEST(physical_cuda_visible_devices_empty_is_no_device) {
    use_sim("2x16GiB");
    set_env("CUDA_VISIBLE_DEVICES", "");
    int n = 99;
    CHECK_STATUS(VRAM_ERR_NO_DEVICE, vram_list_physical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 0);
    CHECK_ERROR_CONTAINS("CUDA_VISIBLE_DEVICES");
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(physical_bogus_backend_is_invalid) {
    set_env("VRAM_BACKEND", "bogus");
    int n = 99;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_list_physical_devices(NULL, 0, &n));
    CHECK_ERROR_CONTAINS("VRAM_BACKEND");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("VRAM_BACKEND");
    CHECK_INT(vram_is_initialized(), ==, 0);
}

/* On a machine without a GPU the CUDA backend reports NO_DEVICE with a reason; on a GPU machine
 * it lists at least one card. */
static void check_cuda_listing(void) {
    int n = 99;
    vram_status s = vram_list_physical_devices(NULL, 0, &n);
    if (s == VRAM_OK) {
        CHECK_INT(n, >=, 1);
    } else {
        CHECK_STATUS(VRAM_ERR_NO_DEVICE, s);
        CHECK_INT(n, ==, 0);
        CHECK(vram_last_error()[0] != '\0');
    }
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(physical_cuda_backend) {
    set_env("VRAM_BACKEND", "cuda");
    check_cuda_listing();
}

TEST(physical_default_backend_is_cuda) {
    check_cuda_listing();
}

TEST(physical_failed_discovery_is_not_cached) {
    set_env("VRAM_BACKEND", "bogus");
    int n = 99;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_list_physical_devices(NULL, 0, &n));
    use_sim("2x16GiB");
    CHECK_OK(vram_list_physical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 2);
}

TEST(physical_sim_after_failed_cuda_look) {
    set_env("VRAM_BACKEND", "cuda");
    int n = 99;
    if (vram_list_physical_devices(NULL, 0, &n) == VRAM_OK) return;  /* a real GPU: nothing to do */
    use_sim("2x16GiB");
    CHECK_OK(vram_list_physical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 2);
    CHECK_OK(vram_init());
}

TEST(physical_list_after_init) {
    use_sim("80GiB,24GiB");
    CHECK_OK(vram_init());
    vram_physical_device devs[2];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(devs, 2, &n));
    CHECK_INT(n, ==, 2);
    CHECK_SIZE(devs[1].total_bytes, ==, 24 * GiB);
}
