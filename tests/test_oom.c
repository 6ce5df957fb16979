/*
 * test_oom.c: out-of-memory failures name their cause (the limit and where it came from, the card
 * being full, fragmentation) with the numbers, and are counted in num_ooms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Every out-of-memory message carries these figures. */
static void check_oom_figures(void) {
    CHECK_CONTAINS_NOCASE(vram_last_error(), "requested");
    CHECK_CONTAINS_NOCASE(vram_last_error(), "in use");
    CHECK_CONTAINS_NOCASE(vram_last_error(), "reserved");
    CHECK_CONTAINS_NOCASE(vram_last_error(), "limit");
    CHECK_CONTAINS_NOCASE(vram_last_error(), "largest free block");
}

TEST(oom_limit_from_api_is_named) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    vram_memory_info before = INFO(0);
    void *p = (void *)0x1;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 2 * GiB, 0));
    CHECK_CONTAINS(vram_last_error(), "vram_set_memory_limit");
    check_oom_figures();
    vram_memory_info after = INFO(0);
    CHECK_U64(after.num_ooms, ==, before.num_ooms + 1);
    CHECK_SIZE(after.current, ==, before.current);
    CHECK_ALL();
}

TEST(oom_limit_from_api_with_growth_is_named) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 768 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 512 * MiB, 0));
    CHECK_CONTAINS(vram_last_error(), "vram_set_memory_limit");
    check_oom_figures();
    CHECK_SIZE(INFO(0).reserved, <=, 1 * GiB);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(oom_limit_from_env_is_named) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "1GiB");
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 2 * GiB, 0));
    CHECK_CONTAINS(vram_last_error(), "VRAM_MEMORY_LIMIT");
    check_oom_figures();
    CHECK_U64(INFO(0).num_ooms, ==, 1);
    CHECK_ALL();
}

TEST(oom_limit_from_device_env_is_named) {
    use_sim("2x16GiB");
    set_env("VRAM_MEMORY_LIMIT_1", "1GiB");
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 2 * GiB, 1));
    CHECK_CONTAINS(vram_last_error(), "VRAM_MEMORY_LIMIT_1");
    check_oom_figures();
    CHECK_ALL();
}

TEST(oom_limit_from_logical_configuration_is_named) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {1024};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 2 * GiB, 0));
    CHECK_CONTAINS(vram_last_error(), "logical device configuration");
    check_oom_figures();
    CHECK_U64(INFO(0).num_ooms, ==, 1);
    CHECK_ALL();
}

TEST(oom_card_full_names_driver_error) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "2");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *blocks[64];
    int n = 0;
    vram_status s = VRAM_OK;
    while (n < 64 && (s = vram_malloc(&blocks[n], 64 * MiB, 0)) == VRAM_OK) n++;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
    check_oom_figures();
    CHECK_U64(INFO(0).num_ooms, ==, 1);
    CHECK_ALL();
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

/* The card full with only this process on it: the message's figures are the simulated card's. The
 * driver gives two 64 MiB regions (VRAM_SIM_FAIL_ALLOC_AFTER=2), vram holds all the card's used bytes,
 * so the card has 16 GiB less what vram reserved free, and other processes hold 0 bytes (counting
 * vram's own regions as another's would make a crowded card out of an empty one). */
TEST(oom_card_full_counts_no_other_process) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "2");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    void *blocks[64];
    int n = 0;
    vram_status s = VRAM_OK;
    while (n < 64 && (s = vram_malloc(&blocks[n], 64 * MiB, 0)) == VRAM_OK) n++;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    size_t reserved = INFO(0).reserved;
    CHECK_SIZE(reserved, >=, 128 * MiB);
    char want[160];
    snprintf(want, sizeof want, "the card has %zu of %zu bytes free and other processes (or other allocators "
             "in this one) hold about 0 bytes", 16 * GiB - reserved, 16 * GiB);
    CHECK_ERROR_CONTAINS(want);
    CHECK_ALL();
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

TEST(oom_card_full_shared_by_two_logical_devices) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "4");
    CHECK_OK(vram_set_memory_growth(0, 1));
    vram_logical_device_configuration two[2] = {{4096}, {4096}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *blocks[128];
    int n = 0;
    vram_status s = VRAM_OK;
    for (int i = 0; i < 128; i++) {
        s = vram_malloc(&blocks[n], 64 * MiB, i % 2);
        if (s != VRAM_OK) break;
        n++;
    }
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    CHECK_CONTAINS(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
    /* what both logical devices hold is vram's, not another process's */
    CHECK_ERROR_CONTAINS("hold about 0 bytes");
    CHECK_ALL();
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

/* A request larger than what the limit leaves beside the bytes in use (but not than the limit) is
 * refused because of the limit, in those words. Limit 64 MiB, no growth (the pool is the limit's
 * region), 48 MiB in use: 32 MiB fits in the limit, not in the 16 MiB it leaves. The limit is the
 * cause; the free bytes are not fragmented (they are one block of 16 MiB), and no granule rounding is
 * involved (48 + 32 MiB is above 64 MiB in bytes already). With vmm:false the same. */
static void check_limit_left_by_the_bytes_in_use(const char *conf) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    CHECK_OK(vram_set_alloc_conf(conf));
    void *a = NULL, *p = NULL;
    CHECK_OK(vram_malloc(&a, 48 * MiB, 0));
    CHECK_SIZE(INFO(0).largest_free_block, ==, 16 * MiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 32 * MiB, 0));
    CHECK_ERROR_CONTAINS("cannot allocate 33554432 bytes: the memory limit of 67108864 bytes is reached "
                         "(limit from vram_set_memory_limit(0, 67108864)). requested");
    CHECK(strstr(vram_last_error(), "fragmentation") == NULL);
    check_oom_figures();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&p, 32 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(oom_limit_left_by_the_bytes_in_use_is_named) {
    check_limit_left_by_the_bytes_in_use("vmm:true");
}

TEST(oom_limit_left_by_the_bytes_in_use_is_named_without_vmm) {
    check_limit_left_by_the_bytes_in_use("vmm:false");
}

static int compare_ptrs(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

TEST(oom_fragmentation_is_named) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {64};  /* a preallocated 64 MiB pool */
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *blocks[80];
    int n = 0;
    while (n < 80 && vram_malloc(&blocks[n], 1 * MiB, 0) == VRAM_OK) n++;
    CHECK_INT(n, ==, 64);
    qsort(blocks, (size_t)n, sizeof blocks[0], compare_ptrs);
    for (int i = 0; i < n; i += 2) {
        CHECK_OK(vram_free(blocks[i]));
        CHECK_ALL();
    }
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.largest_free_block, <, 4 * MiB);
    CHECK_SIZE(info.reserved - info.current, >, 4 * MiB);
    uint64_t ooms = info.num_ooms;

    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 4 * MiB, 0));
    CHECK_CONTAINS_NOCASE(vram_last_error(), "fragmentation");
    check_oom_figures();
    CHECK_U64(INFO(0).num_ooms, ==, ooms + 1);
    CHECK_ALL();

    /* freeing the neighbours merges the holes: now it fits */
    for (int i = 1; i < 8; i += 2) CHECK_OK(vram_free(blocks[i]));
    CHECK_OK(vram_malloc(&p, 4 * MiB, 0));
    CHECK_ALL();
    CHECK_OK(vram_free(p));
    for (int i = 9; i < n; i += 2) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_SIZE(INFO(0).largest_free_block, ==, 64 * MiB);
    CHECK_ALL();
}

/* Growth under a limit, the case of `vram replay traces/bert_varlen.trace.gz --limit 1GiB --growth`:
 * neither the free bytes held in the pool nor the room the limit leaves to grow is large enough on
 * its own, only both together, and the free bytes are scattered in blocks that share their granules
 * with live ones (none idle, nothing to move). Without the limit growth would map more and succeed,
 * so the message names the limit, and not fragmentation (it said "fragmentation: 7 MiB are free in
 * the pool (counting room to grow)" before). */
TEST(oom_growth_near_limit_names_the_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 16 * MiB));
    void *blocks[8];
    for (int i = 0; i < 8; i++) CHECK_OK(vram_malloc(&blocks[i], 3 * MiB / 2, 0));
    qsort(blocks, 8, sizeof blocks[0], compare_ptrs);
    CHECK_OK(vram_free(blocks[0]));
    CHECK_OK(vram_free(blocks[2]));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 9 * MiB);
    CHECK_SIZE(info.reserved - info.current, <, 5 * MiB);       /* free in the pool: not enough alone */
    CHECK_SIZE(info.limit - info.reserved, <, 5 * MiB);         /* room to grow: not enough alone */
    CHECK_SIZE(info.limit - info.current, >=, 5 * MiB);         /* both together would be */
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 5 * MiB, 0));
    CHECK_CONTAINS(vram_last_error(), "memory limit of 16777216 bytes");
    CHECK_CONTAINS(vram_last_error(), "vram_set_memory_limit");
    CHECK(strstr(vram_last_error(), "fragmentation") == NULL);
    check_oom_figures();
    for (int i = 1; i < 8; i++)
        if (i != 2) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

/* A request that the bytes in use leave room for fails when the free memory lies in granules
 * shared with live blocks, and the message says how much. Limit 10 MiB, 2 MiB granules, blocks of
 * 2.5, 3 and 2.5 MiB side by side over [0, 8 MiB) (four granules mapped); the first freed: 5.5 MiB
 * in use, the hole [0, 2.5 MiB) holds granule 0 (idle) and half a megabyte of granule 1 (shared
 * with the second block). A request of 4.5 MiB (= the limit less what is in use) does not fit the
 * hole; in fresh addresses it needs three granules, 6 MiB, where the idle granule and the 2 MiB the
 * limit leaves give 4. So 524288 bytes are stuck, and 5.5 + 0.5 + 6 MiB exceed the limit. */
TEST(oom_names_the_bytes_stuck_in_shared_granules) {
    use_sim_growth(10 * MiB, "small_pool_kb:0,map_ahead_mb:0");
    void *a = NULL, *b = NULL, *c = NULL, *p = NULL;
    CHECK_OK(vram_malloc(&a, 5 * MiB / 2, 0));
    CHECK_OK(vram_malloc(&b, 3 * MiB, 0));
    CHECK_OK(vram_malloc(&c, 5 * MiB / 2, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);
    CHECK_OK(vram_free(a));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 9 * MiB / 2, 0));
    CHECK_ERROR_CONTAINS("524288 of the free bytes lie in granules shared with blocks in use");
    CHECK_ERROR_CONTAINS("granules of 2097152 bytes");
    CHECK_ERROR_CONTAINS("together exceed the limit");
    check_oom_figures();
    CHECK_OK(vram_malloc(&p, 4 * MiB, 0));     /* two granules: the idle one moved, and the room */
    CHECK_SIZE(INFO(0).reserved, ==, 10 * MiB);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_ALL();
}

/* Fragmentation with growth: the free bytes held and the room the limit leaves to grow are counted
 * together. Limit 16 MiB, 2 MiB granules, fourteen 1 MiB blocks side by side over [0, 14 MiB) (seven
 * granules mapped, two blocks each); freeing every other one leaves 7 MiB in use and seven 1 MiB
 * holes, each in a granule that keeps a live block (none idle, none can move or go back). A request
 * of 3 MiB fits the limit in bytes (7 + 3 <= 16 MiB, in granules too), but no hole holds it, and in
 * fresh addresses it needs two granules where the limit leaves one (16 - 14 MiB): fragmentation, with
 * 7 MiB free in the pool + 2 MiB of room to grow = 9437184 bytes, all 7340032 free bytes stuck; the
 * bytes in use, the stuck ones and the request's two granules (18 MiB) exceed the limit. */
TEST(oom_fragmentation_with_growth_counts_the_room_to_grow) {
    use_sim_growth(16 * MiB, "small_pool_kb:0,map_ahead_mb:0,plan:false");
    void *blocks[14], *p = NULL;
    for (int i = 0; i < 14; i++) CHECK_OK(vram_malloc(&blocks[i], 1 * MiB, 0));
    qsort(blocks, 14, sizeof blocks[0], compare_ptrs);
    CHECK_SIZE(INFO(0).reserved, ==, 14 * MiB);
    for (int i = 0; i < 14; i += 2) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current, ==, 7 * MiB);
    CHECK_SIZE(INFO(0).largest_free_block, ==, 1 * MiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 3 * MiB, 0));
    CHECK_ERROR_CONTAINS("fragmentation: 9437184 bytes are free in the pool (counting room to grow) but no free "
                         "block is large enough; 7340032 of the free bytes lie in granules shared with blocks in use");
    CHECK_ERROR_CONTAINS("together exceed the limit");   /* 7 + 7 + 4 > 16 MiB, where 7 + 4 alone fit */
    check_oom_figures();
    for (int i = 1; i < 14; i += 2) CHECK_OK(vram_free(blocks[i]));
    CHECK_OK(vram_malloc(&p, 3 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

/* A request that the limit leaves room for in bytes but not in granules: no placement could serve
 * it, and the message says so rather than blame fragmentation. Limit 5 MiB + 1 KiB, 2 MiB granules:
 * a block of 3 MiB (two granules mapped), then 2 MiB: 5 MiB in use would need three granules, 6 MiB,
 * 1 MiB - 1 KiB above the limit. Once the first block is freed the same request fits. */
TEST(oom_names_the_granules_the_bytes_in_use_need) {
    use_sim_growth(5 * MiB + 1 * KiB, "small_pool_kb:0,map_ahead_mb:0");
    void *a = NULL, *p = NULL;
    CHECK_OK(vram_malloc(&a, 3 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 2 * MiB, 0));
    CHECK_ERROR_CONTAINS("the 3145728 bytes in use and the request need 3 granules of 2097152 bytes (6291456 bytes) "
                         "even with no gap between blocks, 1047552 bytes more than the limit");
    CHECK_ERROR_CONTAINS("vram_set_memory_limit");
    CHECK(strstr(vram_last_error(), "fragmentation") == NULL);
    check_oom_figures();
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_malloc(&p, 2 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(oom_count_per_device) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{256}, {256}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *p = NULL;
    for (int i = 0; i < 3; i++) CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 512 * MiB, 1));
    CHECK_U64(INFO(0).num_ooms, ==, 0);
    CHECK_U64(INFO(1).num_ooms, ==, 3);
    CHECK_U64(INFO(1).num_allocs, ==, 0);
    CHECK_OK(vram_reset_memory_stats(1));
    CHECK_ALL();
}

TEST(oom_request_larger_than_card) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 32 * GiB, 0));
    check_oom_figures();
    CHECK_SIZE(INFO(0).reserved, <=, NEAR_ZERO);  /* nothing was taken for it */
    CHECK_ALL();
}
