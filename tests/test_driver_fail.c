/*
 * test_driver_fail.c: the driver failing (VRAM_SIM_FAIL_ALLOC_AFTER) in the middle of growth and
 * at the start: clean failures carrying the driver's error name, nothing corrupted or kept.
 */
#include "backend/backend.h"
#include "harness.h"

TEST(driver_fail_mid_growth) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "3");
    CHECK_OK(vram_set_memory_growth(0, 1));
    enum { MAX = 256 };
    void *blocks[MAX];
    int n = 0;
    vram_status s = VRAM_OK;
    while (n < MAX) {
        s = vram_malloc(&blocks[n], 32 * MiB, 0);
        CHECK_ALL();
        if (s != VRAM_OK) break;
        n++;
    }
    /* the default cap (about 14 GiB) is far away: the driver stopped it */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_INT(n, <, MAX);
    vram_memory_info held = INFO(0);
    CHECK_INFO_SANE(held);
    CHECK_U64(held.num_ooms, ==, 1);
    CHECK_SIZE(held.current, ==, (size_t)n * 32 * MiB);

    /* a request that needs growth keeps failing the same way */
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * GiB, 0));
    CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_ALL();

    /* memory already held is still handed out */
    if (held.largest_free_block >= 256) {
        CHECK_OK(vram_malloc(&p, held.largest_free_block, 0));
        CHECK_OK(vram_free(p));
    }
    if (n > 0) {
        CHECK_OK(vram_free(blocks[n - 1]));
        CHECK_OK(vram_malloc(&blocks[n - 1], 32 * MiB, 0));
    }
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, held.reserved);

    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
}

TEST(driver_fail_mid_growth_several_logical_devices) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "5");
    CHECK_OK(vram_set_memory_growth(0, 1));
    vram_logical_device_configuration two[2] = {{4096}, {4096}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    enum { MAX = 256 };
    void *blocks[MAX];
    int n = 0, failures = 0;
    for (int i = 0; i < MAX && failures < 4; i++) {
        vram_status s = vram_malloc(&blocks[n], 16 * MiB, i % 2);
        CHECK_ALL();
        if (s == VRAM_OK) {
            n++;
        } else {
            CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
            CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
            failures++;
        }
    }
    CHECK_INT(failures, ==, 4);
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current + INFO(1).current, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
}

/* Nothing stays taken from the (simulated) driver: every allocation, reservation and physical
 * handle it handed out was given back. Uses the backend's call counters, kept for tests. */
static void check_driver_holds_nothing(void) {
    vram__backend_counters c;
    memset(&c, 0, sizeof c);
    vram__backend_sim.counters(&c);
    CHECK_U64(c.mem_alloc, ==, c.mem_free);
    CHECK_U64(c.va_reserve, ==, c.va_free);
    CHECK_U64(c.phys_create, ==, c.phys_release);
    CHECK_U64(c.map, ==, c.unmap);
}

TEST(driver_fail_at_start_without_growth) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "0");
    vram_status s = vram_init();
    if (s != VRAM_ERR_OUT_OF_MEMORY) CHECK_STATUS(VRAM_ERR_DRIVER, s);
    CHECK_CONTAINS(vram_last_error(), s == VRAM_ERR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR");
    CHECK_INT(vram_is_initialized(), ==, 0);
    check_driver_holds_nothing();
    /* trying again fails the same way (the backend read its variable when it opened) */
    s = vram_init();
    if (s != VRAM_ERR_OUT_OF_MEMORY) CHECK_STATUS(VRAM_ERR_DRIVER, s);
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(driver_fail_at_start_of_second_logical_device) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "1");
    vram_logical_device_configuration two[2] = {{8192}, {8192}};  /* the whole card */
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    vram_status s = vram_init();
    if (s != VRAM_ERR_OUT_OF_MEMORY) CHECK_STATUS(VRAM_ERR_DRIVER, s);
    CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR");
    CHECK_INT(vram_is_initialized(), ==, 0);
    /* the first logical device's 8 GiB went back */
    vram__backend_counters c;
    vram__backend_sim.counters(&c);
    CHECK_U64(c.mem_alloc + c.phys_create, >=, 1);
    check_driver_holds_nothing();
}

TEST(driver_fail_at_start_with_growth_is_fine) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "0");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());  /* growth takes nothing at start */
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * MiB, 0));
    CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
}
