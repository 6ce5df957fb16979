/*
 * test_alloc.c: the pointers vram_malloc hands out, bad pointers and bad arguments.
 */
#include <stdlib.h>

#include "harness.h"

TEST(alloc_pointers_are_aligned_to_256) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    test_rng rng = rng_make(harness_seed());
    void *blocks[500];
    for (int i = 0; i < 500; i++) {
        size_t size = 1 + (size_t)rng_below(&rng, 100000);
        CHECK_OK(vram_malloc(&blocks[i], size, 0));
        CHECK((uintptr_t)blocks[i] % 256 == 0);
    }
    for (int i = 0; i < 500; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
}

typedef struct live_block {
    uintptr_t addr;
    size_t    size;
} live_block;

static int compare_blocks(const void *a, const void *b) {
    uintptr_t x = ((const live_block *)a)->addr, y = ((const live_block *)b)->addr;
    return x < y ? -1 : x > y;
}

static void check_no_overlap(live_block *blocks, int n) {
    live_block *sorted = malloc((size_t)n * sizeof *sorted);
    CHECK(sorted != NULL);
    memcpy(sorted, blocks, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_blocks);
    for (int i = 0; i + 1 < n; i++) {
        CHECK(sorted[i].addr + round256(sorted[i].size) <= sorted[i + 1].addr);
    }
    free(sorted);
}

static void live_blocks_never_overlap(int growth) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, growth));
    CHECK_OK(vram_set_memory_limit(0, 2 * GiB));
    test_rng rng = rng_make(harness_seed());
    enum { N = 2000 };
    live_block *blocks = calloc(N, sizeof *blocks);
    CHECK(blocks != NULL);
    for (int i = 0; i < N; i++) {
        void *p = NULL;
        blocks[i].size = rng_size_log(&rng, 1, 256 * KiB);
        CHECK_OK(vram_malloc(&p, blocks[i].size, 0));
        blocks[i].addr = (uintptr_t)p;
    }
    check_no_overlap(blocks, N);
    /* free a random half, allocate again into the holes, check again */
    for (int i = 0; i < N; i++) {
        if (rng_below(&rng, 2) == 0) continue;
        CHECK_OK(vram_free((void *)blocks[i].addr));
        void *p = NULL;
        blocks[i].size = rng_size_log(&rng, 1, 256 * KiB);
        CHECK_OK(vram_malloc(&p, blocks[i].size, 0));
        blocks[i].addr = (uintptr_t)p;
    }
    check_no_overlap(blocks, N);
    CHECK_ALL();
    for (int i = 0; i < N; i++) CHECK_OK(vram_free((void *)blocks[i].addr));
    CHECK_SIZE(INFO(0).current, ==, 0);
    free(blocks);
    CHECK_ALL();
}

TEST(alloc_live_blocks_never_overlap_prealloc) {
    live_blocks_never_overlap(0);
}

TEST(alloc_live_blocks_never_overlap_growth) {
    live_blocks_never_overlap(1);
}

TEST(alloc_blocks_are_usable_memory) {
    /* On the simulated GPU device memory is host memory: write every block's first and last
     * byte and read them back after all were written (overlaps would clobber them). */
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    enum { N = 300 };
    unsigned char *blocks[N];
    size_t sizes[N];
    test_rng rng = rng_make(harness_seed());
    for (int i = 0; i < N; i++) {
        sizes[i] = rng_size_log(&rng, 2, 1 * MiB);  /* two distinct bytes to tag */
        CHECK_OK(vram_malloc((void **)&blocks[i], sizes[i], 0));
        blocks[i][0] = (unsigned char)i;
        blocks[i][sizes[i] - 1] = (unsigned char)(i ^ 0x5A);
    }
    for (int i = 0; i < N; i++) {
        CHECK_INT(blocks[i][0], ==, (unsigned char)i);
        CHECK_INT(blocks[i][sizes[i] - 1], ==, (unsigned char)(i ^ 0x5A));
        CHECK_OK(vram_free(blocks[i]));
    }
    CHECK_ALL();
}

TEST(alloc_size_zero_gives_null) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    vram_memory_info before = INFO(0);
    void *p = (void *)0x1;
    CHECK_OK(vram_malloc(&p, 0, 0));
    CHECK_PTR(p, ==, NULL);
    CHECK_SIZE(INFO(0).current, ==, before.current);
    CHECK_ALL();
}

TEST(alloc_free_null_is_ok) {
    use_sim("16GiB");
    CHECK_OK(vram_free(NULL));
    CHECK_OK(vram_init());
    vram_memory_info before = INFO(0);
    CHECK_OK(vram_free(NULL));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
}

TEST(alloc_free_host_pointer_is_invalid) {
    use_sim("16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 4096, 0));
    vram_memory_info before = INFO(0);
    int local = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(&local));
    void *heap = malloc(64);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(heap));
    free(heap);
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_ALL();
    CHECK_OK(vram_free(p));
}

TEST(alloc_free_interior_pointer_is_invalid) {
    use_sim("16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 4096, 0));
    vram_memory_info before = INFO(0);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free((char *)p + 8));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free((char *)p + 256));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_ALL();
    CHECK_OK(vram_free(p));  /* the block itself is still live */
    CHECK_SIZE(INFO(0).current, ==, 0);
}

TEST(alloc_free_of_free_space_is_invalid) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    vram_memory_info before = INFO(0);
    /* inside the pool's memory, but in its free space: never handed out */
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free((char *)p + 64 * MiB));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(alloc_double_free_is_invalid) {
    use_sim("16GiB");
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 4096, 0));
    CHECK_OK(vram_malloc(&q, 4096, 0));
    CHECK_OK(vram_free(p));
    vram_memory_info before = INFO(0);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(p));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_ALL();
    CHECK_OK(vram_free(q));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(q));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(alloc_free_before_start_is_invalid) {
    use_sim("16GiB");
    int local = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(&local));
}

TEST(alloc_null_out_pointer_is_invalid) {
    use_sim("16GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_malloc(NULL, 16, 0));
    CHECK_ERROR_CONTAINS("vram_malloc: ptr is NULL");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_malloc_async(NULL, 16, 0, (void *)0x1));
    CHECK_ERROR_CONTAINS("vram_malloc_async: ptr is NULL");   /* the call the caller made */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_memory_info(0, NULL));
    CHECK_ALL();
}

static void huge_requests(int growth) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, growth));
    CHECK_OK(vram_init());
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 255, SIZE_MAX / 2 + 1, (size_t)1 << 62};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = (void *)0x1;
        vram_status s = vram_malloc(&p, sizes[i], 0);
        if (s != VRAM_ERR_OUT_OF_MEMORY) CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, s);
        CHECK_SIZE(INFO(0).current, ==, 0);
        CHECK_ALL();
    }
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));  /* still works */
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(alloc_huge_request_prealloc) {
    huge_requests(0);
}

TEST(alloc_huge_request_growth) {
    huge_requests(1);
}

TEST(alloc_logical_index_out_of_range) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{1024}, {1024}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    void *p = NULL;
    vram_memory_info info;
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_malloc(&p, 256, 2));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_malloc(&p, 256, -1));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_malloc_async(&p, 256, 2, (void *)0x1));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_memory_info(2, &info));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_get_memory_info(-1, &info));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_reset_memory_stats(2));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_check(2));
    CHECK_ALL();
}

TEST(alloc_pointer_from_other_logical_device_frees) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 1 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 1 * MiB, 1));
    CHECK(a != b);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_SIZE(INFO(1).current, ==, 0);
    CHECK_ALL();
}

TEST(alloc_status_names) {
    CHECK_STR_EQ(vram_status_name(VRAM_OK), "VRAM_OK");
    CHECK_STR_EQ(vram_status_name(VRAM_ERR_OUT_OF_MEMORY), "VRAM_ERR_OUT_OF_MEMORY");
    CHECK_STR_EQ(vram_status_name(VRAM_ERR_INTERNAL), "VRAM_ERR_INTERNAL");
    CHECK_STR_EQ(vram_version_string(), "0.1.0");
}

TEST(alloc_whole_preallocated_pool) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 1 * GiB, 0));
    CHECK_SIZE(INFO(0).largest_free_block, ==, 0);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 1, 0));
    CHECK_OK(vram_free(p));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 1 * GiB + 1, 0));
    CHECK_ALL();
}

TEST(alloc_whole_growing_pool) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 1 * GiB, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 1 * GiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 1, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(alloc_old_pointer_after_shutdown_is_invalid) {
    /* pointers from before a shutdown are not valid in the next runtime */
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_shutdown());
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(p));
    CHECK_OK(vram_init());
    vram_memory_info before = INFO(0);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(p));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_ALL();
}

/* Best fit within a size class (free_bins.h): a class's list is unsorted, newest free first, and
 * the search takes the smallest chunk of the request's class that holds it (lowest address among
 * equals), not the first on the list. Five blocks with live 1 MiB blocks between them, so that
 * nothing merges: A and C of 1 MiB + 16 KiB, B of 1 MiB + 24 KiB, all in the class from 1 MiB to
 * 1 MiB + 32 KiB (32 classes per power of two), as is a request of 1 MiB + 256 bytes.
 *   - A freed, then B: the list is B, A. The request fits both; best fit is A (8 KiB smaller), first
 *     fit would take B.
 *   - A's place freed again, then C: the list is C, A, B. A request of exactly A's size: A and C
 *     are equal and smallest, the lower address is A's; first fit would take C.
 * (Larger free memory, the rest of the pool, lies in a larger class and is not reached.) */
static void best_fit_within_a_class(int growth) {
    use_sim("16GiB");
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    CHECK_OK(vram_set_memory_growth(0, growth));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    const size_t small = 1 * MiB + 16 * KiB, large = 1 * MiB + 24 * KiB;
    void *a = NULL, *b = NULL, *c = NULL, *sep[3] = {0}, *got = NULL, *again = NULL;
    CHECK_OK(vram_malloc(&a, small, 0));
    CHECK_OK(vram_malloc(&sep[0], 1 * MiB, 0));
    CHECK_OK(vram_malloc(&b, large, 0));
    CHECK_OK(vram_malloc(&sep[1], 1 * MiB, 0));
    CHECK_OK(vram_malloc(&c, small, 0));
    CHECK_OK(vram_malloc(&sep[2], 1 * MiB, 0));
    CHECK_PTR(a, <, b);                                  /* laid out in order, from the pool's front */
    CHECK_PTR(b, <, c);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));                              /* newest: the head of the class's list */
    CHECK_OK(vram_malloc(&got, 1 * MiB + 256, 0));
    CHECK_PTR(got, ==, a);                               /* the smaller chunk, not the head */
    CHECK_OK(vram_free(got));                            /* A whole again (its rest merges back) */
    CHECK_OK(vram_free(c));                              /* newest: C, then A, then B */
    CHECK_OK(vram_malloc(&again, small, 0));
    CHECK_PTR(again, ==, a);                             /* of two equal, the lower address */
    CHECK_ALL();
    CHECK_OK(vram_free(again));
    for (int i = 0; i < 3; i++) CHECK_OK(vram_free(sep[i]));
    CHECK_ALL();
}

TEST(alloc_best_fit_within_a_class_prealloc) {
    best_fit_within_a_class(0);
}

TEST(alloc_best_fit_within_a_class_growth) {
    best_fit_within_a_class(1);
}
