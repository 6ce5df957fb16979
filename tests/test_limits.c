/*
 * test_limits.c: limits that move while the program runs (issue 38, the library's part): the live
 * limit a program sets on itself (vram_set_live_limit), within what the configuration allowed; a
 * limit set on the process from outside (the runtime's hook vram__limit_post, applied at the next
 * call); shrinking under live blocks without touching them; and overflow to host memory
 * (overflow:host, overflow_max_mb) when the limit or the card cannot serve a request.
 */
#include <stdint.h>

#include "fake_cuda.h"
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

/* ---- overflow to host memory ---------------------------------------------------------------- */

/* The bytes the card's driver holds now (for all of this process): what overflow must not grow. */
static size_t card_used(void) {
    size_t free_bytes = 0, total = 0;
    CHECK_OK((harness_on_cuda() ? &vram__backend_cuda : &vram__backend_sim)->mem_info(0, &free_bytes, &total));
    return total - free_bytes;
}

TEST(overflow_serves_what_the_limit_cannot) {
    use_sim_growth(256 * MiB, "overflow:host");
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 200 * MiB, 0));
    size_t card = card_used();
    vram__backend_counters before = sim_counters();
    CHECK_OK(vram_malloc(&b, 100 * MiB, 0));              /* 56 MiB left under the limit: host memory */
    CHECK(b != NULL);
    fill(b, 100 * MiB, 3);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.overflow_bytes, ==, 100 * MiB);
    CHECK_SIZE(info.overflow_peak, ==, 100 * MiB);
    CHECK_U64(info.overflow_blocks, ==, 1);
    CHECK_U64(info.num_overflows, ==, 1);
    CHECK_SIZE(info.overflow_max, ==, 256 * MiB);         /* the default cap: the device's limit */
    CHECK_SIZE(info.current, ==, 200 * MiB);              /* the device's figures do not count it */
    CHECK_U64(info.num_allocs, ==, 1);
    CHECK_U64(info.num_ooms, ==, 0);
    CHECK_SIZE(card_used(), ==, card);                    /* the card's memory did not grow */
    if (!harness_on_cuda()) CHECK_SIZE(vram__sim_overflow_bytes(0), ==, 100 * MiB);
    CHECK_U64(sim_counters().overflow_alloc, ==, before.overflow_alloc + 1);
    CHECK(filled(b, 100 * MiB, 3));
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    info = INFO(0);
    CHECK_SIZE(info.overflow_bytes, ==, 0);
    CHECK_SIZE(info.overflow_peak, ==, 100 * MiB);
    CHECK_U64(info.overflow_blocks, ==, 0);
    if (!harness_on_cuda()) CHECK_SIZE(vram__sim_overflow_bytes(0), ==, 0);
    CHECK_U64(sim_counters().overflow_free, ==, before.overflow_free + 1);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(b));   /* freed already */
    CHECK_ALL();
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(overflow_in_allocator_stats) {
    use_sim_growth(256 * MiB, "overflow:host");
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 200 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 100 * MiB, 0));              /* host memory */
    CHECK_OK(vram_malloc(&c, 60 * MiB, 0));               /* host memory (56 MiB left on the device) */
    vram_allocator_stats s;
    CHECK_OK(vram_get_allocator_stats(0, &s));
    CHECK_INT(s.overflow_bytes.current, ==, 160 * (int64_t)MiB);
    CHECK_INT(s.overflow_bytes.peak, ==, 160 * (int64_t)MiB);
    CHECK_INT(s.overflow_bytes.allocated, ==, 160 * (int64_t)MiB);
    CHECK_INT(s.overflow_blocks.current, ==, 2);
    CHECK_INT(s.allocated_bytes[VRAM_STAT_ALL].current, ==, 200 * (int64_t)MiB);   /* the device's apart */
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_get_allocator_stats(0, &s));
    CHECK_INT(s.overflow_bytes.current, ==, 60 * (int64_t)MiB);
    CHECK_INT(s.overflow_bytes.freed, ==, 100 * (int64_t)MiB);
    CHECK_INT(s.overflow_blocks.peak, ==, 2);
    CHECK_OK(vram_reset_memory_stats(0));                 /* peaks to the current values */
    CHECK_OK(vram_reset_accumulated_stats(0));            /* allocated and freed to 0 */
    CHECK_OK(vram_get_allocator_stats(0, &s));
    CHECK_INT(s.overflow_bytes.peak, ==, 60 * (int64_t)MiB);
    CHECK_INT(s.overflow_blocks.peak, ==, 1);
    CHECK_INT(s.overflow_bytes.allocated, ==, 0);
    CHECK_INT(s.overflow_bytes.freed, ==, 0);
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_get_allocator_stats(0, &s));
    CHECK_INT(s.overflow_bytes.current, ==, 0);
    CHECK_INT(s.overflow_blocks.current, ==, 0);
    CHECK_ALL();
}

TEST(overflow_is_off_by_default) {
    use_sim_growth(256 * MiB, NULL);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 200 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 100 * MiB, 0));
    CHECK_ERROR_CONTAINS("the memory limit of 268435456 bytes");
    CHECK_NOT_CONTAINS(vram_last_error(), "host memory");
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.overflow_bytes, ==, 0);
    CHECK_SIZE(info.overflow_max, ==, 0);
    CHECK_U64(sim_counters().overflow_alloc, ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(overflow_prefers_the_device_once_it_has_room) {
    use_sim_growth(256 * MiB, "overflow:host");
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 200 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 100 * MiB, 0));              /* host */
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&c, 100 * MiB, 0));              /* the device has room again */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 100 * MiB);
    CHECK_SIZE(info.overflow_bytes, ==, 100 * MiB);       /* b, never freed, stays in host memory */
    CHECK_U64(info.num_overflows, ==, 1);
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 0);
    CHECK_ALL();
}

TEST(overflow_cap_refuses_naming_it) {
    use_sim_growth(256 * MiB, "overflow:host,overflow_max_mb:64");
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 220 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 48 * MiB, 0));               /* 36 MiB left on the device: host */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&c, 40 * MiB, 0));
    CHECK_ERROR_CONTAINS("out of memory on /device:GPU:0: cannot allocate 41943040 bytes: the memory limit of "
                         "268435456 bytes");
    CHECK_ERROR_CONTAINS("; host memory (overflow:host) cannot serve it either: its cap overflow_max_mb of "
                         "67108864 bytes is reached (50331648 bytes in host memory now, 41943040 more needed)");
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.overflow_bytes, ==, 48 * MiB);        /* the refusal took nothing */
    CHECK_U64(info.overflow_blocks, ==, 1);
    CHECK_U64(info.num_ooms, ==, 1);
    CHECK_SIZE(info.overflow_max, ==, 64 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_malloc(&c, 40 * MiB, 0));               /* under the cap again */
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 40 * MiB);
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(overflow_serves_a_request_above_the_limit) {
    use_sim_growth(256 * MiB, "overflow:host,overflow_max_mb:512");
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 300 * MiB, 0));
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 300 * MiB);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(overflow_serves_requests_over_a_lowered_limit) {
    use_sim_growth(256 * MiB, "overflow:host");
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 128 * MiB, 0));
    CHECK_OK(vram_set_live_limit(0, 64 * MiB));           /* shrunk under the live 128 MiB */
    CHECK_OK(vram_malloc(&b, 32 * MiB, 0));               /* goes on, in host memory */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.overflow_bytes, ==, 32 * MiB);
    CHECK_SIZE(info.over_limit, ==, 64 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(a));                               /* under it: the device serves again */
    CHECK_OK(vram_malloc(&c, 32 * MiB, 0));
    info = INFO(0);
    CHECK_SIZE(info.current, ==, 32 * MiB);
    CHECK_SIZE(info.reserved, <=, 64 * MiB);
    CHECK_SIZE(info.overflow_bytes, ==, 32 * MiB);
    CHECK_U64(info.num_overflows, ==, 1);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
}

TEST(overflow_stream_ordered_free_waits_for_its_stream) {
    use_sim_growth(256 * MiB, "overflow:host");
    void *a = NULL, *b = NULL, *c = NULL;
    void *stream = (void *)(uintptr_t)0x5100, *other = (void *)(uintptr_t)0x5200;
    CHECK_OK(vram_malloc(&a, 240 * MiB, 0));
    CHECK_OK(vram_malloc_async(&b, 64 * MiB, 0, stream));
    CHECK_OK(vram_malloc_async(&c, 64 * MiB, 0, stream));
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 128 * MiB);
    CHECK_OK(vram_record_stream(c, other));
    vram__backend_counters before = sim_counters();
    CHECK_OK(vram_free_async(b, stream));                 /* its host memory goes once the stream got there */
    vram__backend_counters after = sim_counters();
    CHECK_U64(after.event_sync, ==, before.event_sync + 1);
    CHECK_U64(after.overflow_free, ==, before.overflow_free + 1);
    vram__free_on_alloc_stream(c);                        /* PyTorch's release: its stream and `other` */
    CHECK_U64(sim_counters().event_sync, ==, after.event_sync + 2);
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 0);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_record_stream(b, other));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(overflow_host_refusal_keeps_the_driver_error) {
    use_sim_growth(256 * MiB, "overflow:host");
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 200 * MiB, 0));
    if (harness_on_cuda()) {                              /* the fake driver's next cuMemCreate: the host's */
        fake_cuda_fail_next_fn *fail_next = (fake_cuda_fail_next_fn *)harness_fake("fake_cuda_fail_next");
        CHECK_INT(fail_next("cuMemCreate", 1, 2), ==, 0);
    } else {
        vram__sim_fail_overflow(1);
    }
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 100 * MiB, 0));
    CHECK_ERROR_CONTAINS("the memory limit of 268435456 bytes");
    CHECK_ERROR_CONTAINS("host memory (overflow:host) cannot serve it either: cuMemCreate(104857600 bytes");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 0);
    CHECK_OK(vram_malloc(&b, 100 * MiB, 0));              /* the host has memory again */
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(overflow_blocks_keep_the_runtime_running) {
    use_sim_growth(256 * MiB, "overflow:host,overflow_max_mb:512");
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 300 * MiB, 0));
    unsigned char handle[256];
    size_t length = 0, offset = 0;
    CHECK_STATUS(VRAM_ERR_UNSUPPORTED, vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    CHECK_ERROR_CONTAINS("lives in host memory (overflow:host)");
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_shutdown());     /* a live block, in host memory */
    CHECK_ERROR_CONTAINS("/device:GPU:0 still holds 314572800 bytes of live allocations");
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());
    CHECK_U64(sim_counters().overflow_alloc, ==, sim_counters().overflow_free);
}

TEST(overflow_private_pools_stay_on_the_card) {
    use_sim_growth(256 * MiB, "overflow:host");
    int pool = -1;
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_private_pool_create(0, &pool));
    CHECK_OK(vram_private_malloc_async(&a, 200 * MiB, 0, pool, NULL));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_private_malloc_async(&b, 100 * MiB, 0, pool, NULL));
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_ALL();
}

TEST(overflow_options_bad_values) {
    use_sim("16GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("overflow:disk"));
    CHECK_ERROR_CONTAINS("use host (overflow to host memory) or none");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("overflow:true"));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("overflow_max_mb:-1"));
    CHECK_ERROR_CONTAINS("overflow_max_mb");
    CHECK_OK(vram_set_alloc_conf("overflow:none,overflow_max_mb:0"));
    set_env("VRAM_ALLOC_CONF", "overflow:Host");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("VRAM_ALLOC_CONF");
}

TEST(overflow_cap_zero_serves_nothing) {
    use_sim_growth(256 * MiB, "overflow:host,overflow_max_mb:0");
    void *a = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&a, 300 * MiB, 0));
    CHECK_ERROR_CONTAINS("its cap overflow_max_mb of 0 bytes is reached");
    CHECK_ALL();
}
