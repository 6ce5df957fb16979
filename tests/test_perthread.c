/*
 * test_perthread.c: what threads get of their own. Arenas (src/pool/arenas.c): once a second thread
 * calls vram_malloc on a growth pool, threads spread over arenas that share the limit. Thread
 * caches (src/pool/thread_cache.c): once a second thread uses an arena, a block freed with vram_free is parked in the freeing thread's cache for its next request
 * of that size; the limit, reserved memory and the program's figures must not notice, parked
 * memory must serve any request that needs it, and trim and shutdown must give it back. Caches park
 * in an arena that several threads share; with `arenas:1` every thread shares the one arena.
 */
#include <pthread.h>
#include <stdio.h>

#include "backend/backend.h"
#include "harness.h"

typedef struct side_call {
    size_t size;
    int    keep;       /* leave the block allocated, in `ptr` */
    void  *ptr;
    void  *stream;     /* non-NULL: vram_malloc_async on it */
    char   error[512]; /* side_try: vram_last_error() of a refused request */
} side_call;

static void *side_main(void *arg) {
    side_call *c = arg;
    CHECK_OK(c->stream ? vram_malloc_async(&c->ptr, c->size, 0, c->stream) : vram_malloc(&c->ptr, c->size, 0));
    if (!c->keep) {
        CHECK_OK(vram_free(c->ptr));
        c->ptr = NULL;
    }
    return NULL;
}

/* A request that may be refused: then ptr stays NULL and error says why. */
static void *side_try(void *arg) {
    side_call *c = arg;
    if (vram_malloc(&c->ptr, c->size, 0) != VRAM_OK) {
        c->ptr = NULL;
        snprintf(c->error, sizeof c->error, "%s", vram_last_error());
    }
    return NULL;
}

/* Allocates (and frees unless keep) on a thread of its own, which makes the pool multi-threaded. */
static void *on_other_thread(size_t size, int keep) {
    side_call c = {.size = size, .keep = keep};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, side_main, &c) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    return c.ptr;
}

static void start_growth(size_t limit, const char *conf) {
    use_sim("16GiB");
    if (conf != NULL) CHECK_OK(vram_set_alloc_conf(conf));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, limit));
    CHECK_OK(vram_init());
}

TEST(tcache_parks_per_thread_and_keeps_the_figures_exact) {
    start_growth(256 * MiB, "thread_cache_mb:16,map_ahead_mb:0,arenas:1");
    void *x = NULL, *w = NULL, *z = NULL;
    CHECK_OK(vram_malloc(&x, 1 * MiB, 0));
    CHECK_OK(vram_malloc(&w, 4 * MiB, 0));
    CHECK_OK(vram_free(w));                        /* one thread so far: back to the pool, mapped */
    on_other_thread(256, 0);                       /* a second thread: caches park from now on */
    CHECK_OK(vram_free(x));                        /* parked in this thread's cache */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_U64(info.num_allocs, ==, 3);
    CHECK_U64(info.num_frees, ==, 3);
    CHECK_ALL();
    void *y = on_other_thread(1 * MiB, 1);         /* another thread's cache has none: not x */
    CHECK_PTR(y, !=, x);
    CHECK_OK(vram_malloc(&z, 1 * MiB, 0));         /* this thread's cache gives x back */
    CHECK_PTR(z, ==, x);
    info = INFO(0);
    CHECK_SIZE(info.current, ==, 2 * MiB);
    CHECK_U64(info.num_allocs, ==, 5);
    CHECK_U64(info.num_frees, ==, 3);
    CHECK_ALL();
    CHECK_OK(vram_free(y));
    CHECK_OK(vram_free(z));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(z));  /* parked is not live: a double free */
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(tcache_single_thread_parks_nothing) {
    start_growth(256 * MiB, "thread_cache_mb:16,arenas:1");
    void *x = NULL, *y = NULL;
    CHECK_OK(vram_malloc(&x, 1 * MiB, 0));
    CHECK_OK(vram_free(x));                                  /* back in the pool at once, merged: */
    CHECK_OK(vram_malloc(&y, 2 * MiB, 0));                   /* x's place serves 2 MiB */
    CHECK_PTR(y, ==, x);
    CHECK_OK(vram_free(y));
    CHECK_ALL();
}

TEST(tcache_parked_memory_serves_a_request_at_the_limit) {
    start_growth(64 * MiB, "thread_cache_mb:16,map_ahead_mb:0,arenas:1");
    on_other_thread(256, 0);
    void *b[16] = {0};
    for (int i = 0; i < 16; i++) CHECK_OK(vram_malloc(&b[i], 4 * MiB, 0));   /* the whole limit */
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(b[i]));                  /* 16 MiB parked */
    CHECK_SIZE(INFO(0).current, ==, 48 * MiB);
    CHECK_SIZE(INFO(0).largest_free_block, ==, 0);                          /* parked, not in the pool */
    void *big = NULL;
    CHECK_OK(vram_malloc(&big, 16 * MiB, 0));      /* needs the parked blocks, merged */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 64 * MiB);
    CHECK_SIZE(info.reserved, <=, 64 * MiB);
    CHECK_U64(info.num_ooms, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_free(big));
    for (int i = 4; i < 16; i++) CHECK_OK(vram_free(b[i]));
    CHECK_ALL();
}

TEST(tcache_parked_blocks_of_another_thread_serve_it_too) {
    start_growth(32 * MiB, "thread_cache_mb:16,map_ahead_mb:0,arenas:1");
    on_other_thread(256, 0);
    void *b[8] = {0};
    for (int i = 0; i < 8; i++) CHECK_OK(vram_malloc(&b[i], 4 * MiB, 0));
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(b[i]));   /* parked here, 16 MiB */
    CHECK_SIZE(INFO(0).largest_free_block, ==, 0);
    void *other = on_other_thread(16 * MiB, 1);              /* another thread, at the limit */
    CHECK(other != NULL);
    CHECK_SIZE(INFO(0).current, ==, 32 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(other));
    for (int i = 4; i < 8; i++) CHECK_OK(vram_free(b[i]));
}

TEST(tcache_trim_and_shutdown_give_parked_memory_back) {
    start_growth(256 * MiB, "thread_cache_mb:16,map_ahead_mb:0,arenas:1");
    on_other_thread(256, 0);
    size_t free_before = INFO(0).largest_free_block;        /* the small zone's granule, 2 MiB */
    void *b[4] = {0};                                         /* blocks larger than that granule, */
    for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc(&b[i], 4 * MiB, 0));   /* the caches' largest */
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(b[i]));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_SIZE(INFO(0).largest_free_block, ==, free_before);   /* parked, none in the pool */
    CHECK_SIZE(INFO(0).reserved, >=, 16 * MiB);
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_ALL();
    for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc(&b[i], 4 * MiB, 0));
    for (int i = 0; i < 4; i++) CHECK_OK(vram_free(b[i]));   /* parked again */
    CHECK_OK(vram_shutdown());                               /* parked blocks are not live ones */
}

TEST(tcache_off_keeps_every_block_in_the_pool) {
    start_growth(64 * MiB, "thread_cache_mb:0,map_ahead_mb:0,arenas:1");
    on_other_thread(256, 0);
    void *x = NULL;
    CHECK_OK(vram_malloc(&x, 4 * MiB, 0));
    CHECK_OK(vram_free(x));
    void *y = on_other_thread(4 * MiB, 1);         /* nothing parked: the pool hands x out again */
    CHECK_PTR(y, ==, x);
    CHECK_OK(vram_free(y));
    CHECK_ALL();
}

/* thread_cache_mb's default: the limit / 256 (4 MiB of a 1 GiB limit), each block at most a quarter
 * of that. With 8 MiB free in the pool (no growth, so no cache is emptied): a freed 2 MiB block goes
 * back to the pool, and another thread's request gets it again (the best fit); a freed 1 MiB block is
 * parked, and the other thread gets other memory. */
TEST(tcache_default_is_the_limit_over_256) {
    start_growth(1 * GiB, "map_ahead_mb:0,arenas:1");
    on_other_thread(256, 0);
    void *x = NULL, *w = NULL, *z = NULL, *a = NULL;
    CHECK_OK(vram_malloc(&x, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&w, 1 * MiB, 0));            /* keeps x's hole apart from z's */
    CHECK_OK(vram_malloc(&z, 8 * MiB, 0));
    CHECK_OK(vram_free(z));                           /* too large for a cache: free in the pool */
    CHECK_OK(vram_free(x));
    void *y = on_other_thread(2 * MiB, 1);
    CHECK_PTR(y, ==, x);
    CHECK_OK(vram_free(y));
    CHECK_OK(vram_malloc(&a, 1 * MiB, 0));
    CHECK_OK(vram_free(a));
    y = on_other_thread(1 * MiB, 1);
    CHECK(y != NULL && y != a);
    CHECK_OK(vram_free(y));
    CHECK_OK(vram_free(w));
    CHECK_ALL();
}

TEST(tcache_option_is_checked) {
    use_sim("16GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("thread_cache_mb:-1"));
    CHECK_ERROR_CONTAINS("thread_cache_mb");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("thread_cache_mb:lots"));
    CHECK_OK(vram_set_alloc_conf("thread_cache_mb:0"));
    CHECK_OK(vram_set_alloc_conf("thread_cache_mb:1024"));
}

/* ---- arenas ---------------------------------------------------------------------------------- */

static uint64_t va_reservations(void) {
    vram__backend_counters c = sim_counters();
    return c.va_reserve - c.va_free;
}

TEST(arenas_one_thread_keeps_one) {
    start_growth(256 * MiB, NULL);
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 4 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 4 * MiB, 0));
    CHECK_U64(va_reservations(), ==, 1);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(arenas_second_thread_gets_its_own_and_figures_add_up) {
    start_growth(256 * MiB, "map_ahead_mb:0");
    void *mine = NULL;
    CHECK_OK(vram_malloc(&mine, 8 * MiB, 0));
    void *theirs = on_other_thread(4 * MiB, 1);          /* in an arena of its own */
    CHECK(theirs != NULL);
    CHECK_U64(va_reservations(), ==, 2);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 12 * MiB);
    CHECK_SIZE(info.reserved, ==, 12 * MiB);
    CHECK_U64(info.num_allocs, ==, 2);
    CHECK_ALL();
    CHECK_OK(vram_free(theirs));                          /* freed here, by the owner's range */
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(theirs));
    CHECK_OK(vram_free(mine));
    info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_U64(info.num_frees, ==, 2);
    CHECK_ALL();
}

static void *on_device_1(void *arg) {
    (void)arg;
    void *x = NULL;
    CHECK_OK(vram_malloc(&x, 1 * MiB, 1));
    CHECK_OK(vram_free(x));
    return NULL;
}

/* Threads get arenas in the order they first call on this pool, whatever they did elsewhere: 8
 * threads, some of which allocated on another device first, end in 8 arenas (by their process-wide
 * order, the 8th met the first in arena 0 while arena 4 stayed unused). */
TEST(arenas_threads_each_get_one_whatever_came_before) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    for (int d = 0; d < 2; d++) CHECK_OK(vram_set_memory_growth(d, 1));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    CHECK_OK(vram_init());
    void *block[8] = {0};
    CHECK_OK(vram_malloc(&block[0], 4 * MiB, 0));        /* the first thread: arena 0 */
    for (int i = 0; i < 3; i++) {                         /* threads seen elsewhere first */
        pthread_t t;
        CHECK(pthread_create(&t, NULL, on_device_1, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    for (int i = 1; i < 8; i++) CHECK((block[i] = on_other_thread(4 * MiB, 1)) != NULL);
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < i; j++) {                     /* one arena's blocks lie side by side */
            uintptr_t a = (uintptr_t)block[i], b = (uintptr_t)block[j];
            CHECK_U64(a > b ? a - b : b - a, >=, 256 * MiB);
        }
    }
    CHECK_ALL();
    for (int i = 0; i < 8; i++) CHECK_OK(vram_free(block[i]));
    CHECK_ALL();
}

TEST(arenas_share_the_limit) {
    start_growth(64 * MiB, "map_ahead_mb:0");
    void *mine = NULL;
    CHECK_OK(vram_malloc(&mine, 40 * MiB, 0));
    on_other_thread(256, 0);                              /* another arena exists from now on */
    side_call c = {.size = 40 * MiB, .keep = 1};                    /* 40 + 40 > 64: the limit refuses */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, side_try, &c) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(c.ptr == NULL);
    CHECK_CONTAINS(c.error, "memory limit of 67108864 bytes is reached");
    CHECK_SIZE(INFO(0).reserved, <=, 64 * MiB);
    CHECK_OK(vram_free(mine));                            /* idle in this thread's arena... */
    void *theirs = on_other_thread(40 * MiB, 1);          /* ...and given back for the other one */
    CHECK(theirs != NULL);
    CHECK_PTR(theirs, !=, mine);                          /* in its own arena, not served from mine */
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 40 * MiB);
    CHECK_SIZE(info.reserved, <=, 64 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(theirs));
}

/* Each arena's room is what the shared limit has left, not its own limit less its own memory: with
 * 4 of 5 MiB held by two arenas, a 512 KiB request gets the last MiB (as a plain region: the limit's
 * partial granule), as it would with one arena. */
TEST(arenas_room_is_what_the_shared_limit_has_left) {
    start_growth(5 * MiB, "map_ahead_mb:0");
    void *mine = NULL, *more = NULL;
    CHECK_OK(vram_malloc(&mine, 2 * MiB, 0));
    void *theirs = on_other_thread(2 * MiB, 1);           /* in the other thread's own arena */
    CHECK(theirs != NULL);
    vram_status s = vram_malloc(&more, 512 * KiB, 0);
    if (s != VRAM_OK) printf("  512 KiB with 4 of 5 MiB held: %s\n", vram_last_error());
    CHECK_OK(s);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 4 * MiB + 512 * KiB);
    CHECK_SIZE(info.reserved, <=, 5 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(more));
    CHECK_OK(vram_free(theirs));
    CHECK_OK(vram_free(mine));
}

/* A thread that frees a block of device 1 (on_device_1, above) asks device 0's pool first whether
 * the block is its own: that must not make device 0, which one thread uses, start parking its frees
 * in thread caches. */

static void *ask_pool_0(void *arg) {
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(arg));
    return NULL;
}

TEST(tcache_a_free_asking_another_pool_starts_nothing_there) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 2 * MiB, 0));               /* device 0: this thread only */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, ask_pool_0, (char *)a + 256) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).largest_free_block, ==, 2 * MiB);  /* back in the pool, not parked */
    CHECK_ALL();
}

TEST(arenas_stream_ordered_requests_stay_in_the_first) {
    start_growth(256 * MiB, NULL);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 1 * MiB, 0, (void *)0x1));
    side_call c = {.size = 1 * MiB, .keep = 1, .stream = (void *)0x1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, side_main, &c) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_U64(va_reservations(), ==, 1);                  /* no arena for stream-ordered requests */
    CHECK_OK(vram_free_async(c.ptr, (void *)0x1));
    CHECK_OK(vram_malloc_async(&q, 1 * MiB, 0, (void *)0x1));   /* the same stream: at once */
    CHECK_PTR(q, ==, c.ptr);
    CHECK_OK(vram_free_async(q, (void *)0x1));
    CHECK_OK(vram_free_async(p, (void *)0x1));
    vram__sim_stream_complete((void *)0x1);
    CHECK_ALL();
}

TEST(arenas_off_and_preallocated_pools_keep_one) {
    start_growth(256 * MiB, "arenas:1");
    void *mine = NULL;
    CHECK_OK(vram_malloc(&mine, 1 * MiB, 0));
    void *theirs = on_other_thread(1 * MiB, 1);
    CHECK_U64(va_reservations(), ==, 1);
    CHECK_OK(vram_free(theirs));
    CHECK_OK(vram_free(mine));
    CHECK_OK(vram_shutdown());
    CHECK_OK(vram_set_alloc_conf(NULL));                 /* the configuration outlives a shutdown */
    CHECK_OK(vram_set_memory_growth(0, 0));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));       /* preallocated: one region, no range */
    CHECK_OK(vram_malloc(&mine, 1 * MiB, 0));
    theirs = on_other_thread(1 * MiB, 1);
    CHECK_U64(va_reservations(), ==, 0);
    CHECK_OK(vram_free(theirs));
    CHECK_OK(vram_free(mine));
    CHECK_ALL();
}

TEST(arenas_trim_and_shutdown_cover_every_arena) {
    start_growth(256 * MiB, "map_ahead_mb:0");
    void *mine = NULL;
    CHECK_OK(vram_malloc(&mine, 8 * MiB, 0));
    void *theirs = on_other_thread(8 * MiB, 1);
    CHECK_OK(vram_free(theirs));
    CHECK_OK(vram_free(mine));
    CHECK_SIZE(INFO(0).reserved, ==, 16 * MiB);
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_ALL();
    theirs = on_other_thread(8 * MiB, 1);
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_shutdown());     /* a live block in the second arena */
    CHECK_OK(vram_free(theirs));
    CHECK_OK(vram_shutdown());
    CHECK_U64(va_reservations(), ==, 0);
}

/* vram_trim(d, keep) keeps at most `keep` bytes beyond live blocks on the logical device, whatever
 * number of arenas hold them (vram.h), not `keep` in each arena. Four arenas (this thread's and
 * three others', each thread the first to call there), map-ahead off and a chosen limit: extents
 * are one 2 MiB granule and each arena maps exactly its blocks, 32 + 3 x 16 = 80 MiB, all idle once
 * freed. Keeping 20 MiB: the first arena's 32 idle MiB go down by whole granules to 20 (12 MiB is 6
 * granules) and the other arenas give back everything: 20 MiB in total (68 if every arena kept
 * up to 20). Keeping 5 MiB then: 20 - 5 = 15 MiB must go, 8 granules (16 MiB), 4 MiB stay. */
TEST(arenas_trim_keeps_keep_bytes_in_total) {
    start_growth(256 * MiB, "map_ahead_mb:0");
    void *mine = NULL, *theirs[3] = {0};
    CHECK_OK(vram_malloc(&mine, 32 * MiB, 0));
    for (int i = 0; i < 3; i++) CHECK((theirs[i] = on_other_thread(16 * MiB, 1)) != NULL);
    CHECK_U64(va_reservations(), ==, 4);                  /* four arenas, four ranges */
    CHECK_OK(vram_free(mine));
    for (int i = 0; i < 3; i++) CHECK_OK(vram_free(theirs[i]));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_SIZE(info.reserved, ==, 80 * MiB);
    CHECK_OK(vram_trim(0, 20 * MiB));
    CHECK_SIZE(INFO(0).reserved, ==, 20 * MiB);
    CHECK_OK(vram_trim(0, 5 * MiB));
    CHECK_SIZE(INFO(0).reserved, ==, 4 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
}

TEST(arenas_option_is_checked) {
    use_sim("16GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("arenas:0"));
    CHECK_ERROR_CONTAINS("arenas");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("arenas:9"));
    CHECK_OK(vram_set_alloc_conf("arenas:8"));
    CHECK_OK(vram_set_alloc_conf("arenas:1"));
}
