/*
 * test_private.c: private pools (vram_private_pool_*), PyTorch's CUDA-graph pools: memory only
 * requests into the pool get, kept in place while the pool is in use, on the logical device's limit.
 */
#include "backend/backend.h"
#include "harness.h"

#define STREAM_A ((void *)0x1)
#define STREAM_B ((void *)0x2)

/* A growing 1 GiB pool mapping only what blocks need. */
static void growth_1gib(void) {
    use_sim_growth(1 * GiB, "map_ahead_mb:0");
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

TEST(private_release_keeps_live_blocks_and_recycles_the_index) {
    growth_1gib();
    int pool = -1, again = -1, other = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 2 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_async(&b, 256, 0, pool, STREAM_A));
    CHECK_ERROR_CONTAINS("is no private pool in use");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_pool_release(0, pool));
    CHECK_OK(vram_private_pool_create(0, &other));    /* the released index still holds a block */
    CHECK_INT(other, !=, pool);
    CHECK_SIZE(INFO(0).current, ==, 2 * MiB);
    CHECK_OK(vram_free(a));                           /* still valid after the release */
    CHECK_OK(vram_private_pool_create(0, &again));    /* now the index serves again */
    CHECK_INT(again, ==, pool);
    CHECK_OK(vram_private_malloc_async(&c, 2 * MiB, 0, again, STREAM_A));
    CHECK_PTR(c, ==, a);                              /* the same arena and address range */
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_private_pool_release(0, again));
    CHECK_OK(vram_private_pool_release(0, other));
    CHECK_ALL();
}

TEST(private_pools_share_the_limit) {
    use_sim_growth(64 * MiB, NULL);
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

TEST(private_malloc_at_gives_a_block_back_where_it_was) {
    growth_1gib();
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 4 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_private_malloc_async(&b, 4 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_private_malloc_at(a, 4 * MiB, 0, pool, STREAM_A));      /* a again, at its address */
    CHECK_SIZE(INFO(0).current, ==, 8 * MiB);
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_at(b, 4 * MiB, 0, pool, STREAM_A));   /* live */
    CHECK_ERROR_CONTAINS("not a free range");
    CHECK_OK(vram_free(a));
    char *mid = (char *)a + 1 * MiB;                  /* inside a free block: its front stays free */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_at(mid + 1, 256, 0, pool, STREAM_A));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_at(mid, 4 * MiB, 0, pool, STREAM_A));  /* runs into b */
    CHECK_OK(vram_private_malloc_at(mid, 1 * MiB, 0, pool, STREAM_A));
    CHECK_ALL();
    CHECK_OK(vram_private_malloc_async(&c, 1 * MiB, 0, pool, STREAM_A));   /* the front, best fit */
    CHECK_PTR(c, ==, a);
    CHECK_OK(vram_free(mid));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_private_malloc_at(a, 1 * MiB, 0, pool + 1, STREAM_A));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_ALL();
}

/* The segments and blocks of logical device 0, checked to fit the arrays. */
static void segments_of(vram_segment_info *segs, size_t *nsegs, vram_block_info *blocks, size_t *nblocks) {
    size_t cap_s = *nsegs, cap_b = *nblocks;
    CHECK_OK(vram_get_segments(0, segs, cap_s, nsegs, blocks, cap_b, nblocks));
    CHECK_SIZE(*nsegs, <=, cap_s);
    CHECK_SIZE(*nblocks, <=, cap_b);
}

TEST(segments_map_mapped_runs_and_their_blocks) {
    growth_1gib();
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, 1000, 0));               /* the small zone: one granule */
    CHECK_OK(vram_malloc(&b, 1 * MiB, 0));            /* the large zone: granule 0 ... */
    CHECK_OK(vram_malloc(&c, 3 * MiB + 1, 0));        /* ... and 1-2 */
    CHECK_OK(vram_free(b));
    vram_segment_info segs[4];
    vram_block_info blocks[8];
    size_t ns = 4, nb = 8;
    segments_of(segs, &ns, blocks, &nb);
    CHECK_SIZE(ns, ==, 2);
    CHECK_SIZE(nb, ==, 5);
    CHECK_PTR((void *)(uintptr_t)segs[0].address, ==, a);
    CHECK_SIZE(segs[0].size, ==, 2 * MiB);
    CHECK_INT(segs[0].small, ==, 1);
    CHECK_INT(segs[0].expandable, ==, 1);
    CHECK_INT(segs[0].private_pool, ==, -1);
    CHECK_SIZE(segs[0].first_block, ==, 0);
    CHECK_SIZE(segs[0].nblocks, ==, 2);
    CHECK_SIZE(blocks[0].size, ==, 1024);
    CHECK_SIZE(blocks[0].requested, ==, 1000);
    CHECK_INT(blocks[0].allocated, ==, 1);
    CHECK_SIZE(blocks[1].size, ==, 2 * MiB - 1024);   /* the rest of the granule, free */
    CHECK_INT(blocks[1].allocated, ==, 0);
    CHECK_PTR((void *)(uintptr_t)segs[1].address, ==, b);
    CHECK_SIZE(segs[1].size, ==, 6 * MiB);
    CHECK_INT(segs[1].small, ==, 0);
    CHECK_SIZE(segs[1].first_block, ==, 2);
    CHECK_SIZE(segs[1].nblocks, ==, 3);
    CHECK_SIZE(blocks[2].size, ==, 1 * MiB);          /* b, freed */
    CHECK_INT(blocks[2].allocated, ==, 0);
    CHECK_PTR((void *)(uintptr_t)blocks[3].address, ==, c);
    CHECK_SIZE(blocks[3].size, ==, 3 * MiB + 256);
    CHECK_SIZE(blocks[3].requested, ==, 3 * MiB + 1);
    CHECK_INT(blocks[3].active, ==, 1);
    CHECK_SIZE(blocks[4].size, ==, 6 * MiB - 4 * MiB - 256);   /* the free chunk cut at the run's end */
    ns = 1;
    nb = 1;                                           /* too little room: the full counts */
    CHECK_OK(vram_get_segments(0, segs, ns, &ns, blocks, nb, &nb));
    CHECK_SIZE(ns, ==, 2);
    CHECK_SIZE(nb, ==, 5);
    CHECK_OK(vram_get_segments(0, NULL, 0, &ns, NULL, 0, &nb));
    CHECK_SIZE(nb, ==, 5);
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_segments(0, NULL, 1, &ns, NULL, 0, &nb));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_segments(0, segs, 1, NULL, blocks, 1, &nb));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(c));
}

TEST(segments_of_a_preallocated_pool_and_a_private_one) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {64};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 4 * MiB, 0));
    vram_segment_info segs[4];
    vram_block_info blocks[8];
    size_t ns = 4, nb = 8;
    segments_of(segs, &ns, blocks, &nb);
    CHECK_SIZE(ns, ==, 1);
    CHECK_SIZE(segs[0].size, ==, 64 * MiB);
    CHECK_INT(segs[0].expandable, ==, 0);
    CHECK_SIZE(nb, ==, 2);
    CHECK_OK(vram_free(a));
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));     /* the preallocation goes back for it */
    CHECK_OK(vram_private_malloc_async(&a, 1 * MiB, 0, pool, STREAM_A));
    ns = 4;
    nb = 8;
    segments_of(segs, &ns, blocks, &nb);
    CHECK_SIZE(ns, ==, 1);
    CHECK_INT(segs[0].private_pool, ==, pool);
    CHECK_INT(segs[0].expandable, ==, 1);
    CHECK_SIZE(segs[0].size, ==, 2 * MiB);
    CHECK_INT(blocks[0].allocated, ==, 1);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_private_pool_release(0, pool));
}

/* The event calls of the simulated driver so far: during a CUDA-graph capture none may be made on a
 * captured stream (recording there captures the event; querying or waiting for it invalidates the
 * capture), so none is made at all. */
static uint64_t event_calls(void) {
    vram__backend_counters c = sim_counters();
    return c.event_record + c.event_sync + c.event_query;
}

/* PyTorch's capture with a forked stream: the capture stream B forks A, A allocates and frees,
 * B takes memory, a block used on both is freed. Nothing waits on an event while the capture is
 * underway: a stream reuses its own frees at once, other streams only after the capture. */
TEST(capture_makes_no_event_call_until_it_ends) {
    growth_1gib();
    int pool = -1;
    CHECK_OK(vram_private_pool_create(0, &pool));
    CHECK_OK(vram_capture_begin(0));
    uint64_t before = event_calls();
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    CHECK_OK(vram_private_malloc_async(&a, 4 * MiB, 0, pool, STREAM_A));   /* on the forked stream */
    CHECK_OK(vram_private_malloc_async(&b, 4 * MiB, 0, pool, STREAM_A));
    vram_plugin_release(a);                                                 /* freed on A */
    CHECK_OK(vram_private_malloc_async(&c, 4 * MiB, 0, pool, STREAM_B));   /* B: nothing orders it after A */
    CHECK(!overlaps(a, 4 * MiB, c, 4 * MiB));
    CHECK_OK(vram_record_stream(b, STREAM_B));
    vram_plugin_release(b);                                                 /* used on A and B: waits */
    CHECK_OK(vram_private_malloc_async(&d, 4 * MiB, 0, pool, STREAM_A));   /* A's own free, at once */
    CHECK_PTR(d, ==, a);
    for (int i = 0; i < 40; i++) {                  /* past the batch that records pending frees' events */
        void *t = NULL;
        CHECK_OK(vram_private_malloc_async(&t, 1 * MiB, 0, pool, i % 2 ? STREAM_A : STREAM_B));
        vram_plugin_release(t);
    }
    CHECK_OK(vram_malloc_async(&e, 1 * MiB, 0, STREAM_B));                 /* eager, outside the pool */
    vram_plugin_release(e);
    CHECK_OK(vram_trim(0, 0));
    CHECK_U64(event_calls(), ==, before);
    vram_allocator_stats st;
    CHECK_OK(vram_get_allocator_stats(0, &st));
    CHECK_INT(st.active_bytes[0].current, ==, (long long)(12 * MiB));   /* c, d and b, which waits */
    CHECK_ALL();
    CHECK_OK(vram_capture_end(0));
    vram_plugin_release(c);
    vram_plugin_release(d);
    CHECK_OK(vram_trim(0, 0));                   /* after the capture: the events are recorded now */
    CHECK_U64(event_calls(), >, before);
    vram__sim_stream_complete(STREAM_A);         /* and once they complete, b is free */
    vram__sim_stream_complete(STREAM_B);
    CHECK_OK(vram_trim(0, 0));
    CHECK_OK(vram_get_allocator_stats(0, &st));
    CHECK_INT(st.active_bytes[0].current, ==, 0);
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_capture_end(0));          /* none underway */
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_capture_begin(4));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_ALL();
}
