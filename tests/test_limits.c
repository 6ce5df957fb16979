/*
 * test_limits.c: limits that move while the program runs (issue 38, the library's part): the live
 * limit a program sets on itself (vram_set_live_limit), within what the configuration allowed; a
 * limit set on the process from outside (the runtime's hook vram__limit_post, applied at the next
 * call); shrinking under live blocks without touching them; and overflow to host memory
 * (overflow:host, overflow_max_mb) when the limit or the card cannot serve a request.
 */
#include <stdint.h>

#include "harness.h"
#include "runtime/runtime.h"

/* ---- the live limit ------------------------------------------------------------------------- */

TEST(live_limit_shrinks_under_live_blocks_without_touching_them) {
    use_sim_growth(256 * MiB, NULL);
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 64 * MiB, 0));
    CHECK_OK(vram_malloc(&c, 32 * MiB, 0));
    fill(a, 64 * MiB, 1);
    fill(b, 64 * MiB, 2);
    CHECK_OK(vram_free(c));                               /* 32 MiB cached */
    CHECK_SIZE(INFO(0).reserved, ==, 160 * MiB);
    size_t live = 0, configured = 0;
    CHECK_OK(vram_get_live_limit(0, &live, &configured));
    CHECK_SIZE(live, ==, 256 * MiB);                      /* the configured limit until set */
    CHECK_SIZE(configured, ==, 256 * MiB);

    CHECK_OK(vram_set_live_limit(0, 96 * MiB));           /* under the 128 MiB in use */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 128 * MiB);              /* nothing live was touched */
    CHECK_SIZE(info.reserved, ==, 128 * MiB);             /* the cached 32 MiB went back at once */
    CHECK_SIZE(info.limit, ==, 256 * MiB);
    CHECK_SIZE(info.live_limit, ==, 96 * MiB);
    CHECK_SIZE(info.over_limit, ==, 32 * MiB);
    CHECK(filled(a, 64 * MiB, 1));
    CHECK(filled(b, 64 * MiB, 2));
    CHECK_OK(vram_get_live_limit(0, &live, NULL));
    CHECK_SIZE(live, ==, 96 * MiB);
    CHECK_ALL();

    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&c, 4 * MiB, 0));   /* refused while over */
    CHECK_ERROR_CONTAINS("the live limit of 100663296 bytes (vram_set_live_limit; the limit configured is "
                         "268435456 bytes");
    CHECK_ERROR_CONTAINS("the device holds 134217728 bytes, 33554432 above it, until blocks are freed");
    CHECK_ALL();

    CHECK_OK(vram_free(b));                               /* under it: its memory goes back at the next call */
    info = INFO(0);
    CHECK_SIZE(info.current, ==, 64 * MiB);
    CHECK_SIZE(info.reserved, ==, 96 * MiB);
    CHECK_SIZE(info.over_limit, ==, 0);
    CHECK(filled(a, 64 * MiB, 1));
    CHECK_ALL();
    CHECK_OK(vram_malloc(&c, 32 * MiB, 0));               /* accepted again, up to the live limit */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&d, 2 * MiB, 0));
    CHECK_ALL();

    /* raised back, but never above what the configuration allowed */
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_live_limit(0, 256 * MiB + 1));
    CHECK_ERROR_CONTAINS("vram_set_live_limit(0, 268435457): more than the 268435456 bytes the configuration "
                         "allowed /device:GPU:0");
    CHECK_SIZE(INFO(0).live_limit, ==, 96 * MiB);         /* the refusal changed nothing */
    CHECK_OK(vram_set_live_limit(0, 256 * MiB));
    CHECK_SIZE(INFO(0).live_limit, ==, 256 * MiB);
    CHECK_OK(vram_malloc(&d, 128 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 64 * MiB, 0));   /* the configured limit holds */
    CHECK_ERROR_CONTAINS("the memory limit of 268435456 bytes");
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_free(d));
    CHECK_ALL();
}

TEST(live_limit_zero_takes_no_more_device_memory) {
    use_sim_growth(1 * GiB, NULL);
    void *a = NULL;
    CHECK_OK(vram_set_live_limit(0, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&a, 256, 0));
    CHECK_ERROR_CONTAINS("the live limit of 0 bytes");
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_SIZE(INFO(0).live_limit, ==, 0);
    CHECK_ALL();
}

TEST(live_limit_caps_a_preallocated_pool) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {1024};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 192 * MiB, 0));
    CHECK_OK(vram_set_live_limit(0, 128 * MiB));          /* below the 192 MiB in use */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, ==, 1 * GiB);               /* the preallocation stays */
    CHECK_SIZE(info.live_limit, ==, 128 * MiB);
    CHECK_SIZE(info.over_limit, ==, 64 * MiB);            /* its blocks are what count */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 1 * MiB, 0));
    CHECK_ERROR_CONTAINS("the live limit of 134217728 bytes");
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).over_limit, ==, 0);
    CHECK_OK(vram_malloc(&b, 128 * MiB, 0));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(live_limit_bad_arguments) {
    use_sim_growth(1 * GiB, NULL);
    size_t live = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_live_limit(0, NULL, NULL));
    CHECK_ERROR_IS("vram_get_live_limit: bytes is NULL");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_set_live_limit(1, 1 * MiB));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_live_limit(-1, &live, NULL));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_live_limit(0, SIZE_MAX));
    CHECK_OK(vram_get_live_limit(0, &live, NULL));
    CHECK_SIZE(live, ==, 1 * GiB);
    CHECK_ALL();
}

/* ---- a limit set from outside the process (the runtime's hook) ------------------------------ */

TEST(external_limit_applies_at_the_next_call) {
    use_sim_growth(4 * GiB, NULL);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 1 * GiB, 0));
    CHECK_OK(vram_malloc(&b, 1 * GiB, 0));
    CHECK_OK(vram_free(b));                               /* 1 GiB cached */
    vram__limit_post(0, 1536 * MiB);
    CHECK_SIZE(vram__limit_posted(0), ==, 1536 * MiB);
    vram_memory_info info = INFO(0);                      /* the next call applies it */
    CHECK_SIZE(info.live_limit, ==, 1536 * MiB);
    CHECK_SIZE(info.reserved, ==, 1536 * MiB);            /* cached memory above it went back */
    CHECK_SIZE(info.current, ==, 1 * GiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 1 * GiB, 0));
    CHECK_ERROR_CONTAINS("set on this process from outside it");
    CHECK_ALL();
    /* the program cannot lift it: its own live limit is at most what the configuration allowed, and
     * the limit from outside stays in force below it */
    CHECK_OK(vram_set_live_limit(0, 4 * GiB));
    CHECK_SIZE(INFO(0).live_limit, ==, 1536 * MiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 1 * GiB, 0));
    vram__limit_post(0, SIZE_MAX);                        /* lifted from outside */
    CHECK_OK(vram_malloc(&b, 1 * GiB, 0));
    CHECK_SIZE(INFO(0).live_limit, ==, 4 * GiB);
    vram__limit_post(0, 8 * GiB);                         /* above the configured limit: it stays */
    CHECK_SIZE(INFO(0).live_limit, ==, 4 * GiB);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(external_limit_shrinks_under_live_blocks_until_frees) {
    use_sim_growth(256 * MiB, NULL);
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 64 * MiB, 0));
    fill(a, 64 * MiB, 7);
    vram__limit_post(0, 64 * MiB);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.over_limit, ==, 64 * MiB);
    CHECK_SIZE(info.current, ==, 128 * MiB);
    CHECK(filled(a, 64 * MiB, 7));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&c, 2 * MiB, 0));
    CHECK_OK(vram_free(b));
    info = INFO(0);                                       /* b's memory went back: under it again */
    CHECK_SIZE(info.reserved, ==, 64 * MiB);
    CHECK_SIZE(info.over_limit, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&c, 64 * MiB, 0));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
}

TEST(external_limit_posted_before_the_start) {
    use_sim_growth(4 * GiB, NULL);
    vram__limit_post(0, 512 * MiB);
    void *a = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&a, 1 * GiB, 0));
    CHECK_ERROR_CONTAINS("set on this process from outside it");
    CHECK_OK(vram_malloc(&a, 256 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(external_limit_bounds_a_card_shared_by_logical_devices) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    vram_logical_device_configuration cfg[2] = {{2048}, {2048}};
    CHECK_OK(vram_set_logical_device_configuration(0, cfg, 2));
    void *a = NULL, *b = NULL, *c = NULL;
    vram__limit_post(0, 3 * GiB);
    CHECK_OK(vram_malloc(&a, 2 * GiB, 0));
    CHECK_OK(vram_malloc(&b, 1 * GiB, 1));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&c, 2 * MiB, 1));   /* the card's 3 GiB are held */
    CHECK_ERROR_CONTAINS("set on this process's card from outside it");
    CHECK_SIZE(INFO(1).live_limit, ==, 1 * GiB);          /* what the card leaves it */
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_trim(0, 0));                            /* (the card's budget: what device 0 caches counts) */
    CHECK_OK(vram_malloc(&c, 2 * MiB, 1));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
}
