/*
 * test_private.c: private pools (vram_private_pool_*), PyTorch's CUDA-graph pools: memory only
 * requests into the pool get, kept in place while the pool is in use, on the logical device's limit.
 */
#include "backend/backend.h"
#include "harness.h"

#define STREAM_A ((void *)0x1)

/* A growing 1 GiB pool mapping only what blocks need. */
static void growth_1gib(void) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
}

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

TEST(private_memory_is_not_given_to_eager_requests) {
    growth_1gib();
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL, *e = NULL, *b = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 4 * MiB, 0, pool, STREAM_A));   /* "captured" */
    CHECK_OK(vram_free(a));                           /* freed inside the capture */
    CHECK_OK(vram_malloc_async(&e, 4 * MiB, 0, STREAM_A));   /* an eager tensor afterwards */
    CHECK(!overlaps(a, 4 * MiB, e, 4 * MiB));
    CHECK_OK(vram_private_malloc_async(&b, 4 * MiB, 0, pool, STREAM_A));   /* the pool reuses its own */
    CHECK_PTR(b, ==, a);
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(e));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_ALL();
}

TEST(private_memory_stays_while_in_use) {
    growth_1gib();
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 8 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_free(a));
    uint64_t released = sim_counters().phys_release, unmapped = sim_counters().unmap;
    CHECK_OK(vram_trim(0, 0));                        /* a graph still uses those addresses */
    CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);
    CHECK_U64(sim_counters().phys_release, ==, released);
    CHECK_U64(sim_counters().unmap, ==, unmapped);
    CHECK_OK(vram_private_pool_release(0, pool));     /* released: its idle memory goes back now */
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_U64(sim_counters().phys_release, >, released);
    CHECK_ALL();
}

TEST(private_release_keeps_live_blocks_and_recycles_the_slot) {
    growth_1gib();
    int pool = -1, again = -1, other = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 2 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_async(&b, 256, 0, pool, STREAM_A));
    CHECK_ERROR_CONTAINS("is no private pool in use");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_pool_release(0, pool));
    CHECK_OK(vram_private_pool_create(0, &other));    /* the released slot still holds a block */
    CHECK_INT(other, !=, pool);
    CHECK_SIZE(INFO(0).current, ==, 2 * MiB);
    CHECK_OK(vram_free(a));                           /* still valid after the release */
    CHECK_OK(vram_private_pool_create(0, &again));    /* now the slot serves again */
    CHECK_INT(again, ==, pool);
    CHECK_OK(vram_private_malloc_async(&c, 2 * MiB, 0, again, STREAM_A));
    CHECK_PTR(c, ==, a);                              /* the same arena and address range */
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_private_pool_release(0, again));
    CHECK_OK(vram_private_pool_release(0, other));
    CHECK_ALL();
}

TEST(private_pools_share_the_limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 48 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_private_malloc_async(&b, 32 * MiB, 0, pool, STREAM_A));
    CHECK_ERROR_CONTAINS("the memory limit of 67108864 bytes is reached");
    CHECK_OK(vram_private_malloc_async(&b, 16 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_free(b));                           /* kept by the pool in use: */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 16 * MiB + 1, 0));   /* eager requests cannot have it */
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_OK(vram_malloc(&b, 16 * MiB, 0));           /* released: the limit's room is back */
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(private_blocks_and_statistics) {
    growth_1gib();
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *p[3] = {NULL, NULL, NULL}, *e = NULL, *out[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) CHECK_OK(vram_private_malloc_async(&p[i], (size_t)(i + 1) * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_malloc_async(&e, 1 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free(p[1]));
    size_t n = 0;
    CHECK_OK(vram_private_pool_blocks(0, pool, out, 4, &n));
    CHECK_SIZE(n, ==, 2);
    CHECK((out[0] == p[0] && out[1] == p[2]) || (out[0] == p[2] && out[1] == p[0]));
    CHECK_OK(vram_private_pool_blocks(0, pool, NULL, 0, &n));
    CHECK_SIZE(n, ==, 2);
    vram_allocator_stats st;
    CHECK_OK(vram_get_allocator_stats(0, &st));       /* the device's figures count its private pools */
    CHECK_INT(st.allocated_bytes[VRAM_STAT_ALL].current, ==, (long long)(1 * MiB + 3 * MiB + 1 * MiB));
    CHECK_INT(st.allocation[VRAM_STAT_ALL].current, ==, 3);
    CHECK_SIZE(INFO(0).current, ==, 5 * MiB);
    CHECK_OK(vram_free(p[0]));
    CHECK_OK(vram_free(p[2]));
    CHECK_OK(vram_free(e));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_ALL();
}

TEST(private_pools_and_shutdown) {
    growth_1gib();
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 1 * MiB, 0, pool, STREAM_A));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_shutdown());  /* a live block in a private pool */
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());                        /* its memory goes back with the rest */
    CHECK_U64(sim_counters().phys_create, ==, sim_counters().phys_release);
}

TEST(private_pools_on_a_preallocated_device) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {256};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL, *e = NULL;
    CHECK_OK(vram_malloc(&e, 1 * MiB, 0));   /* the device's preallocation, with a block in it, */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_private_malloc_async(&a, 1 * MiB, 0, pool, STREAM_A));
    CHECK_ERROR_CONTAINS("the memory limit of 268435456 bytes is reached");   /* leaves nothing */
    CHECK_OK(vram_free(e));                  /* with none, it goes back and the private pool grows */
    CHECK_OK(vram_private_malloc_async(&a, 1 * MiB, 0, pool, STREAM_A));
    CHECK_SIZE(INFO(0).reserved, ==, 2 * MiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&e, 1 * MiB, 0));   /* the whole limit no longer fits */
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_OK(vram_malloc(&e, 1 * MiB, 0));   /* released: the preallocation comes back */
    CHECK_SIZE(INFO(0).reserved, ==, 256 * MiB);
    CHECK_OK(vram_free(e));
    CHECK_ALL();
}

TEST(private_bad_arguments) {
    growth_1gib();
    int pool = -1;
    void *a = NULL;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_pool_create(0, NULL));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_private_pool_create(4, &pool));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_async(&a, 256, 0, 0, STREAM_A));   /* none yet */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_async(&a, 256, 0, -1, STREAM_A));
    CHECK_OK(vram_private_pool_create(0, &pool));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_async(NULL, 256, 0, pool, STREAM_A));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_pool_release(0, pool + 1));
    size_t n = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_pool_blocks(0, pool, NULL, 1, &n));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_pool_blocks(0, pool, NULL, 0, NULL));
    CHECK_OK(vram_private_malloc_async(&a, 0, 0, pool, STREAM_A));
    CHECK_PTR(a, ==, NULL);
    CHECK_OK(vram_private_pool_release(0, pool));
}
