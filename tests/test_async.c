/*
 * test_async.c: stream-ordered allocation on the simulated GPU. Streams are opaque handles; an
 * event recorded on a simulated stream completes when vram__sim_stream_complete(stream) runs or
 * when the event is waited for.
 */
#include <pthread.h>

#include "backend/backend.h"
#include "harness.h"

#define STREAM_A ((void *)0x1)
#define STREAM_B ((void *)0x2)

/* A growing 256 MiB pool on a simulated card, mapping only what blocks need. */
static void growth_256mib(void) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
}

/* A preallocated pool of `mib` MiB on a simulated card (a logical device of that size, no growth). */
static void prealloc_mib(unsigned mib) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {mib};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
}

/* n blocks of `size` from vram_plugin_alloc on `stream` (PyTorch's way), each checked. */
static void plugin_alloc_n(void **p, int n, size_t size, void *stream) {
    for (int i = 0; i < n; i++) CHECK((p[i] = vram_plugin_alloc((ptrdiff_t)size, 0, stream)) != NULL);
}

/* Makes logical device 0's first arena serve two streams, so that PyTorch's frees on either go
 * through events (with one stream only they are free at once: see the solo tests below). */
static void two_streams(void) {
    void *x = vram_plugin_alloc(256, 0, STREAM_B);
    CHECK(x != NULL);
    vram_plugin_free(x, 256, 0, STREAM_B);
    x = vram_plugin_alloc(256, 0, STREAM_A);        /* waits for B, and ends the solo stream */
    CHECK(x != NULL);
    CHECK_OK(vram_free(x));                          /* (not left pending) */
}

TEST(async_same_stream_reuses_at_once) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 1 * MiB, 0, STREAM_A));
    CHECK(p != NULL);
    CHECK((uintptr_t)p % 256 == 0);
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_ALL();
    CHECK_OK(vram_malloc_async(&q, 1 * MiB, 0, STREAM_A));
    CHECK_PTR(q, ==, p);
    CHECK_ALL();
    CHECK_OK(vram_free_async(q, STREAM_A));
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
}

/* A stream completes its work in order: once one of its frees is not done, the pool does not ask
 * about its newer ones, so an allocation costs about one event query per stream, not one per
 * pending free (with PyTorch on one stream, hundreds of frees may be in flight). */
TEST(async_reaping_asks_each_stream_once) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    enum { N = 200 };
    void *p[N] = {0}, *q = NULL, *r = NULL;
    for (int i = 0; i < N; i++) CHECK_OK(vram_malloc_async(&p[i], 4096, 0, STREAM_A));
    for (int i = 0; i < N; i++) CHECK_OK(vram_free_async(p[i], STREAM_A));   /* all in flight on A */
    vram__backend_counters before, after;
    before = sim_counters();
    for (int i = 0; i < 10; i++) {
        CHECK_OK(vram_malloc_async(&q, 1 * MiB, 0, STREAM_B));
        CHECK_OK(vram_free(q));
    }
    after = sim_counters();
    CHECK_U64(after.event_query - before.event_query, <=, 10 * 2);
    CHECK_U64(after.event_sync - before.event_sync, ==, 0);   /* nobody waited */
    vram__sim_stream_complete(STREAM_A);                      /* then all of them settle */
    CHECK_OK(vram_malloc_async(&r, 4096, 0, STREAM_B));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 4096);
    CHECK_SIZE(info.largest_free_block, ==, 1 * GiB - 4096);  /* nothing pending apart from r */
    CHECK_OK(vram_free(r));
    CHECK_ALL();
}

/* The same for blocks freed while another stream still uses them (vram_record_stream): however many
 * wait, a request asks about one event per stream, the oldest; once the stream got there, all of
 * them go back. */
TEST(async_record_stream_reaping_asks_each_stream_once) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    enum { N = 200 };
    void *p[N] = {0}, *q = NULL;
    for (int i = 0; i < N; i++) CHECK_OK(vram_malloc(&p[i], 4096, 0));
    for (int i = 0; i < N; i++) CHECK_OK(vram_record_stream(p[i], STREAM_B));
    for (int i = 0; i < N; i++) CHECK_OK(vram_free(p[i]));     /* all held for B */
    CHECK_ALL();
    uint64_t queries = sim_counters().event_query;
    for (int i = 0; i < 10; i++) {
        CHECK_OK(vram_malloc(&q, 1 * MiB, 0));
        CHECK_OK(vram_free(q));
    }
    CHECK_U64(sim_counters().event_query - queries, <=, 10 * 2);
    CHECK_ALL();
    vram__sim_stream_complete(STREAM_B);
    CHECK_OK(vram_malloc(&q, 4096, 0));
    CHECK_PTR(q, ==, p[0]);                                    /* all of them back */
    CHECK_SIZE(INFO(0).largest_free_block, ==, 1 * GiB - 4096);
    CHECK_OK(vram_free(q));
    CHECK_ALL();
}

/* PyTorch's frees (vram_plugin_free) are on streams PyTorch never destroys: no event per free,
 * one per stream for a batch of them; the stream reuses its blocks at once, the others get them
 * once that event completed, and a request that needs them waits for it. */
TEST(async_plugin_frees_share_events) {
    prealloc_mib(16);
    two_streams();
    enum { N = 100 };
    void *p[N] = {0};
    plugin_alloc_n(p, N, 64 * 1024, STREAM_A);
    vram__backend_counters before, after;
    before = sim_counters();
    for (int i = 0; i < N; i++) vram_plugin_free(p[i], 64 * 1024, 0, STREAM_A);
    CHECK_ALL();
    void *q = vram_plugin_alloc(64 * 1024, 0, STREAM_A);   /* the same stream: at once, no wait */
    int reused = 0;
    for (int i = 0; i < N; i++) reused |= q == p[i];
    CHECK(reused);
    after = sim_counters();
    CHECK_U64(after.event_record - before.event_record, <=, N / 32 + 1);   /* not one per free */
    CHECK_U64(after.event_sync - before.event_sync, ==, 0);
    CHECK_SIZE(INFO(0).current, ==, 64 * 1024);
    vram_plugin_free(q, 64 * 1024, 0, STREAM_A);
    void *big = NULL;                                       /* needs every freed block: waits */
    uint64_t waits = sim_counters().event_sync;
    CHECK_OK(vram_malloc(&big, 16 * MiB, 0));
    CHECK_U64(sim_counters().event_sync - waits, ==, 1);                /* for the one event of A's batch */
    CHECK_SIZE(INFO(0).current, ==, 16 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(big));
    q = vram_plugin_alloc(64 * 1024, 0, STREAM_A);
    vram_plugin_free(q, 64 * 1024, 0, STREAM_A);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());                              /* with a free still unrecorded */
}

/* The small zone (small_pool_kb) and the rest never merge, pending chunks of one stream included:
 * with the zone full, the next small block lies right after its end; freed on their stream, that
 * block and the zone's last stay two chunks, whichever goes first. */
TEST(async_plugin_frees_do_not_merge_across_the_small_zone) {
    growth_256mib();                                  /* a 32 MiB small zone */
    two_streams();
    enum { N = 129 };
    static void *p[N];
    for (int order = 0; order < 2; order++) {
        CHECK_OK(vram_trim(0, 0));
        plugin_alloc_n(p, N, 256 * KiB, STREAM_A);
        CHECK_PTR((char *)p[N - 1], ==, (char *)p[N - 2] + 256 * KiB);   /* across the zone's end */
        vram_plugin_free(p[order ? N - 2 : N - 1], 256 * KiB, 0, STREAM_A);
        vram_plugin_free(p[order ? N - 1 : N - 2], 256 * KiB, 0, STREAM_A);
        CHECK_ALL();
        for (int i = 0; i < N - 2; i++) vram_plugin_free(p[i], 256 * KiB, 0, STREAM_A);
        CHECK_ALL();
        vram__sim_stream_complete(STREAM_A);
    }
}

/* Shutdown waits for every stream's owned-stream frees, more streams than one recording pass
 * covers (16) included, before their memory goes back to the driver. */
TEST(async_shutdown_waits_for_the_frees_of_every_stream) {
    growth_256mib();
    two_streams();
    enum { STREAMS = 20 };
    void *p[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        CHECK((p[i] = vram_plugin_alloc(1 * MiB, 0, (void *)(uintptr_t)(0x100 + i))) != NULL);
    }
    for (int i = 0; i < STREAMS; i++) vram_plugin_free(p[i], 1 * MiB, 0, (void *)(uintptr_t)(0x100 + i));
    vram__backend_counters before = sim_counters();
    CHECK_OK(vram_shutdown());
    vram__backend_counters after = sim_counters();
    CHECK_U64(after.event_record - before.event_record, ==, STREAMS);   /* one per stream */
    CHECK_U64(after.event_sync - before.event_sync, ==, STREAMS);       /* each waited for */
}

/* vram_plugin_release frees on the stream the block was allocated on (vram remembers it): each
 * stream gets its own block back at once, not the other's; a block of vram_malloc goes as if freed
 * on the legacy default stream; a bad pointer is refused and says why. */
TEST(async_plugin_release_frees_on_the_allocation_stream) {
    growth_256mib();
    two_streams();
    void *a = vram_plugin_alloc(2 * MiB, 0, STREAM_A), *b = vram_plugin_alloc(2 * MiB, 0, STREAM_B);
    CHECK(a != NULL && b != NULL);
    vram_plugin_release(a);
    vram_plugin_release(b);
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
    void *b2 = vram_plugin_alloc(2 * MiB, 0, STREAM_B), *a2 = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
    CHECK_PTR(b2, ==, b);                            /* each stream's own block, at once */
    CHECK_PTR(a2, ==, a);
    vram_plugin_release(a2);
    void *c = vram_plugin_alloc(2 * MiB, 0, STREAM_B);
    CHECK_PTR(c, !=, a);                             /* A's free is not B's yet */
    vram_plugin_release(b2);
    vram_plugin_release(c);
    void *d = NULL, *e = NULL;
    CHECK_OK(vram_malloc(&d, 1 * MiB, 0));
    vram_plugin_release(d);                          /* a plain block: on the default stream */
    void *e2 = NULL;
    CHECK_OK(vram_malloc(&e2, 1 * MiB, 0));
    CHECK_PTR(e2, !=, d);                            /* pending on it, not free at once */
    CHECK_OK(vram_malloc_async(&e, 1 * MiB, 0, NULL));
    CHECK_PTR(e, ==, d);
    CHECK_OK(vram_free(e));
    CHECK_OK(vram_free(e2));
    vram_plugin_release((char *)a + 256);            /* not a block: refused, nothing changes */
    CHECK_ERROR_CONTAINS("vram_plugin_release(");
    CHECK_ERROR_CONTAINS("not a live block");
    vram_plugin_free((char *)a + 256, 256, 0, STREAM_A);
    CHECK_ERROR_CONTAINS("vram_plugin_free(");
    CHECK_ERROR_CONTAINS("not a live block");
    CHECK_OK(vram_free(NULL));
    CHECK(vram_free_async((char *)a + 256, STREAM_A) == VRAM_ERR_INVALID_POINTER);
    CHECK_ERROR_CONTAINS("vram_free_async(");
    CHECK_ALL();
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* A request on a stream takes a block that stream freed (pending) over a free one of the same size:
 * the stream reuses its own memory, as PyTorch's allocator does, and leaves the free block to
 * everyone else. */
TEST(async_stream_prefers_its_own_pending_block_on_a_tie) {
    growth_256mib();
    two_streams();
    void *a = vram_plugin_alloc(2 * MiB, 0, STREAM_A), *s1 = NULL, *f = NULL, *s2 = NULL;
    CHECK(a != NULL);
    CHECK_OK(vram_malloc(&s1, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&f, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&s2, 2 * MiB, 0));
    CHECK_OK(vram_free(f));                          /* free, between two live blocks */
    vram_plugin_release(a);                          /* pending on A, which has not passed it */
    void *b = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
    CHECK_PTR(b, ==, a);
    void *c = vram_plugin_alloc(2 * MiB, 0, STREAM_B);
    CHECK_PTR(c, ==, f);
    void *g = vram_plugin_alloc(4 * MiB, 0, STREAM_A), *s3 = NULL, *h = NULL, *s4 = NULL;
    CHECK_OK(vram_malloc(&s3, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&h, 2 * MiB, 0));
    CHECK_OK(vram_malloc(&s4, 2 * MiB, 0));
    CHECK_OK(vram_free(h));
    vram_plugin_release(g);                          /* 4 MiB pending on A */
    void *k = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
    CHECK_PTR(k, ==, h);                             /* not a tie: the better fit, though not its own */
    vram_plugin_release(k);
    CHECK_OK(vram_free(s3));
    CHECK_OK(vram_free(s4));
    vram_plugin_release(b);
    vram_plugin_release(c);
    CHECK_OK(vram_free(s1));
    CHECK_OK(vram_free(s2));
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* A block also used on another stream (vram_record_stream, PyTorch's record_stream) goes to no
 * request, its own stream's included, until that stream and the free's own have passed the free;
 * `current` drops at the free. Recording the same stream twice, or the block's own, adds nothing.
 * With one stream (solo, PyTorch's usual case) and with two. */
TEST(async_record_stream_holds_the_block_for_its_streams) {
    for (int solo = 1; solo >= 0; solo--) {
        growth_256mib();
        if (!solo) two_streams();
        void *a = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
        CHECK(a != NULL);
        CHECK_OK(vram_record_stream(a, STREAM_B));
        CHECK_OK(vram_record_stream(a, STREAM_B));
        vram_memory_info before = INFO(0);
        uint64_t records = sim_counters().event_record;
        vram_plugin_release(a);
        CHECK_U64(sim_counters().event_record - records, ==, 2);          /* on B, and on A (the free's) */
        CHECK_SIZE(INFO(0).current, ==, before.current - 2 * MiB);
        CHECK_U64(INFO(0).num_frees, ==, before.num_frees + 1);
        CHECK_ALL();
        void *x = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
        CHECK_PTR(x, !=, a);                                     /* B may still use it */
        vram__sim_stream_complete(STREAM_B);
        void *y = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
        CHECK_PTR(y, !=, a);                                     /* and A's free is not reached */
        CHECK_ALL();
        vram__sim_stream_complete(STREAM_A);
        void *z = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
        CHECK_PTR(z, ==, a);
        CHECK_ALL();
        vram_plugin_release(x);
        vram_plugin_release(y);
        vram_plugin_release(z);
        CHECK_OK(vram_shutdown());
    }
}

/* A block recorded on the stream it was allocated on is held for that stream when another stream
 * frees it, and so is a plain block recorded on the legacy default stream (NULL) when vram_free frees
 * it; freed on its own stream, the free's order covers the use and nothing more is waited for. */
TEST(async_record_stream_on_its_own_stream) {
    growth_256mib();
    two_streams();
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc_async(&p, 2 * MiB, 0, STREAM_A));
    CHECK_OK(vram_record_stream(p, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_B));
    vram__sim_stream_complete(STREAM_B);
    CHECK_OK(vram_malloc(&q, 2 * MiB, 0));
    CHECK_PTR(q, !=, p);                             /* A has not passed its use yet */
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_malloc(&r, 2 * MiB, 0));
    CHECK_PTR(r, ==, p);
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_free(r));
    CHECK_ALL();
    void *plain = NULL, *next = NULL;
    CHECK_OK(vram_malloc(&plain, 4 * MiB, 0));
    CHECK_OK(vram_record_stream(plain, NULL));
    CHECK_OK(vram_free(plain));
    CHECK_OK(vram_malloc(&next, 4 * MiB, 0));
    CHECK_PTR(next, !=, plain);                      /* the default stream may still use it */
    CHECK_OK(vram_free(next));
    vram__sim_stream_complete(NULL);
    CHECK_ALL();
    void *own = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
    CHECK_OK(vram_record_stream(own, STREAM_A));
    uint64_t records = sim_counters().event_record;
    vram_plugin_release(own);                        /* on A: an ordinary stream-ordered free */
    CHECK_U64(sim_counters().event_record, ==, records);
    void *again = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
    CHECK_PTR(again, ==, own);                       /* A reuses it at once */
    vram_plugin_release(again);
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
}

/* A plain block: vram_free waits for the recorded stream only (no stream of its own); a request
 * that needs its memory waits for that stream's event rather than fail; shutdown with such a block
 * still held for its stream goes through (it is no live allocation). */
TEST(async_record_stream_plain_block_waits_when_needed) {
    prealloc_mib(16);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc(&p, 16 * MiB, 0));
    CHECK_OK(vram_record_stream(p, STREAM_B));
    uint64_t records = sim_counters().event_record, waits = sim_counters().event_sync;
    CHECK_OK(vram_free(p));
    CHECK_U64(sim_counters().event_record - records, ==, 1);
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_malloc(&q, 16 * MiB, 0));                     /* all of it: waits for B */
    CHECK_PTR(q, ==, p);
    CHECK_U64(sim_counters().event_sync - waits, ==, 1);
    CHECK_OK(vram_record_stream(q, STREAM_B));
    CHECK_OK(vram_free(q));
    CHECK_ALL();
    waits = sim_counters().event_sync;
    CHECK_OK(vram_shutdown());
    CHECK_U64(sim_counters().event_sync - waits, ==, 1);     /* B waited for before the memory goes */
}

/* Bad input: NULL is nothing to do; an address that is no live block's start is refused and named;
 * a free whose event cannot be recorded fails, leaves the block allocated and with its streams, and
 * the next free goes through. */
TEST(async_record_stream_errors_lose_nothing) {
    growth_256mib();
    CHECK_OK(vram_record_stream(NULL, STREAM_B));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK(vram_record_stream((char *)p + 256, STREAM_B) == VRAM_ERR_INVALID_POINTER);
    CHECK_ERROR_CONTAINS("vram_record_stream(");
    CHECK_ERROR_CONTAINS("not a live block");
    CHECK_OK(vram_record_stream(p, STREAM_B));
    vram__sim_fail_event_records(1);
    vram_status s = vram_free(p);
    CHECK(s == VRAM_ERR_DRIVER);
    CHECK_ERROR_CONTAINS("vram_free(");
    CHECK_SIZE(INFO(0).current, ==, 1 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(p));                                   /* B recorded still */
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK(vram_record_stream(p, STREAM_B) == VRAM_ERR_INVALID_POINTER);   /* freed: no more */
    void *q = NULL;
    CHECK_OK(vram_malloc(&q, 1 * MiB, 0));
    CHECK_PTR(q, !=, p);                                      /* held for B all the same */
    CHECK_OK(vram_free(q));
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
    void *r = vram_plugin_alloc(1 * MiB, 0, STREAM_A);  /* PyTorch's deleter: the message names it */
    CHECK_OK(vram_record_stream(r, STREAM_B));
    vram__sim_fail_event_records(1);
    vram_plugin_release(r);
    CHECK_ERROR_CONTAINS("vram_plugin_release(");
    CHECK_SIZE(INFO(0).current, ==, 1 * MiB);
    vram_plugin_release(r);
    CHECK_SIZE(INFO(0).current, ==, 0);
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* With a second thread on the arena its thread caches park freed blocks for the next request of
 * their size; a block used on another stream is not parked (it would come back at once). */
TEST(async_record_stream_block_is_not_parked) {
    growth_256mib();
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,arenas:1"));
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, malloc_free_once, NULL), ==, 0);   /* caches park from now on */
    CHECK_INT(pthread_join(t, NULL), ==, 0);
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc(&p, 64 * KiB, 0));
    size_t lf = INFO(0).largest_free_block;
    CHECK_OK(vram_free(p));
    CHECK_SIZE(INFO(0).largest_free_block, ==, lf);   /* parked, not back in the pool */
    CHECK_OK(vram_malloc(&q, 64 * KiB, 0));
    CHECK_PTR(q, ==, p);                                 /* parked and taken back: caches are on */
    CHECK_OK(vram_record_stream(q, STREAM_B));
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_malloc(&r, 64 * KiB, 0));
    CHECK_PTR(r, !=, q);                                 /* B may still use it */
    CHECK_ALL();
    CHECK_OK(vram_free(r));
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* With caches parking (the pointer table's shards shared with other threads), a free whose event for
 * another stream's use cannot be recorded leaves the block live, in the table, and a later free of it
 * works; the same for a block freed on its own stream by PyTorch's deleter. */
TEST(async_record_stream_failed_event_with_caches_on) {
    growth_256mib();
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,arenas:1"));
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, malloc_free_once, NULL), ==, 0);   /* caches park from now on */
    CHECK_INT(pthread_join(t, NULL), ==, 0);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 64 * KiB, 0));
    CHECK_OK(vram_record_stream(p, STREAM_B));
    vram__sim_fail_event_records(1);
    CHECK(vram_free(p) == VRAM_ERR_DRIVER);
    CHECK_SIZE(INFO(0).current, ==, 64 * KiB);
    CHECK_ALL();                                         /* in the table: vram_check finds it */
    CHECK_OK(vram_record_stream(p, STREAM_A));           /* still a live block */
    CHECK_OK(vram_free(p));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK(vram_free(p) == VRAM_ERR_INVALID_POINTER);     /* once only */
    void *r = vram_plugin_alloc(64 * KiB, 0, STREAM_A);
    CHECK_OK(vram_record_stream(r, STREAM_B));
    vram__sim_fail_event_records(1);
    vram_plugin_release(r);
    CHECK_ERROR_CONTAINS("vram_plugin_release(");
    CHECK_SIZE(INFO(0).current, ==, 64 * KiB);
    CHECK_ALL();
    vram_plugin_release(r);
    CHECK_SIZE(INFO(0).current, ==, 0);
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* Neighbouring blocks freed by PyTorch on one stream become one pending chunk: the stream can
 * reuse their memory whole at once, as PyTorch's own allocator can, instead of growing for a
 * request larger than each of them. Blocks freed on another stream, or with events of their own
 * (vram_free_async), stay apart. */
TEST(async_plugin_frees_merge_on_their_stream) {
    growth_256mib();
    two_streams();
    CHECK_OK(vram_trim(0, 0));
    void *p[4] = {0};
    plugin_alloc_n(p, 4, 2 * MiB, STREAM_A);
    for (int i = 1; i < 4; i++) CHECK_PTR((char *)p[i], ==, (char *)p[0] + i * 2 * MiB);
    vram_plugin_free(p[1], 2 * MiB, 0, STREAM_A);
    vram_plugin_free(p[0], 2 * MiB, 0, STREAM_A);   /* before its neighbour: merges backwards too */
    vram_plugin_free(p[2], 2 * MiB, 0, STREAM_A);
    vram_plugin_free(p[3], 2 * MiB, 0, STREAM_B);   /* another stream: stays apart */
    CHECK_ALL();
    size_t reserved = INFO(0).reserved;
    void *q = vram_plugin_alloc(6 * MiB, 0, STREAM_A);
    CHECK_PTR(q, ==, p[0]);                          /* the three blocks of A, at once */
    CHECK_SIZE(INFO(0).reserved, ==, reserved);
    CHECK_ALL();
    vram_plugin_free(q, 6 * MiB, 0, STREAM_A);
    void *r = NULL;                                  /* per-free events do not merge */
    CHECK_OK(vram_malloc_async(&r, 4 * MiB, 0, STREAM_B));
    CHECK_PTR(r, !=, p[0]);
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_OK(vram_free(r));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_trim(0, 0));
    CHECK_OK(vram_malloc_async(&a, 2 * MiB, 0, STREAM_A));
    CHECK_OK(vram_malloc_async(&b, 2 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(a, STREAM_A));
    CHECK_OK(vram_free_async(b, STREAM_A));
    CHECK_OK(vram_malloc_async(&c, 4 * MiB, 0, STREAM_A));
    CHECK_PTR(c, !=, a);                             /* two events: two chunks, neither fits */
    CHECK_ALL();
    CHECK_OK(vram_free(c));
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_trim(0, 0));
    plugin_alloc_n(p, 2, 2 * MiB, STREAM_A);
    CHECK_PTR((char *)p[1], ==, (char *)p[0] + 2 * MiB);
    vram_plugin_free(p[0], 2 * MiB, 0, STREAM_A);
    CHECK_OK(vram_trim(0, 0));                       /* records p[0]'s event */
    vram_plugin_free(p[1], 2 * MiB, 0, STREAM_A);   /* later work on A: not under that event */
    vram__sim_stream_complete(STREAM_A);             /* p[0]'s event completes, p[1] has none */
    CHECK_OK(vram_malloc_async(&r, 4 * MiB, 0, STREAM_B));
    CHECK_PTR(r, !=, p[0]);                          /* p[1] is not free for B yet */
    CHECK_ALL();
    CHECK_OK(vram_free(r));
    CHECK_ALL();
}

/* One stream only (PyTorch's usual case): its frees are free at once, merged with free memory,
 * without an event; no request elsewhere can take them before the stream got there. */
TEST(async_solo_stream_frees_at_once) {
    growth_256mib();
    void *p[4] = {0};
    plugin_alloc_n(p, 4, 2 * MiB, STREAM_A);
    vram__backend_counters before, after;
    before = sim_counters();
    for (int i = 0; i < 4; i++) vram_plugin_free(p[i], 2 * MiB, 0, STREAM_A);
    CHECK_ALL();
    size_t reserved = INFO(0).reserved;
    void *q = vram_plugin_alloc(7 * MiB, 0, STREAM_A);    /* all four, and no growth */
    CHECK_PTR(q, ==, p[0]);
    CHECK_SIZE(INFO(0).reserved, ==, reserved);
    vram_plugin_free(q, 7 * MiB, 0, STREAM_A);
    after = sim_counters();
    CHECK_U64(after.event_record, ==, before.event_record);   /* no event at all */
    CHECK_U64(after.event_sync, ==, before.event_sync);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());                       /* gives the memory back: waits for A first */
    after = sim_counters();
    CHECK_U64(after.event_sync - before.event_sync, ==, 1);
}

/* Memory the solo stream freed at once is moved under another block (hold_large_mb) only after the
 * stream got there: one wait before the move, and none when there is nothing idle to move. */
TEST(async_solo_stream_waited_for_before_a_move) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:64,hold_large_mb:8"));
    void *a = vram_plugin_alloc(64 * MiB, 0, STREAM_A), *b = vram_plugin_alloc(2 * MiB, 0, STREAM_A);
    void *d1 = vram_plugin_alloc(64 * KiB, 0, STREAM_A), *d2 = vram_plugin_alloc(64 * KiB, 0, STREAM_A);
    CHECK(a != NULL && b != NULL && d1 != NULL && d2 != NULL);
    vram_plugin_free(d1, 64 * KiB, 0, STREAM_A);          /* freed at once, its extent still busy */
    uint64_t syncs = sim_counters().event_sync;
    void *c = vram_plugin_alloc(96 * MiB, 0, STREAM_A);  /* grows, nothing idle: no wait */
    CHECK(c != NULL);
    CHECK_U64(sim_counters().event_sync, ==, syncs);
    vram_plugin_free(a, 64 * MiB, 0, STREAM_A);           /* free at once (solo), not yet passed */
    vram_memory_info before = INFO(0);
    void *big = vram_plugin_alloc(128 * MiB, 0, STREAM_A);  /* fits no hole: a's extent moves */
    CHECK(big != NULL);
    CHECK_U64(INFO(0).num_driver_moves, ==, before.num_driver_moves + 1);
    CHECK_U64(sim_counters().event_sync, ==, syncs + 1);
    vram_plugin_free(big, 128 * MiB, 0, STREAM_A);
    vram_plugin_free(c, 96 * MiB, 0, STREAM_A);
    vram_plugin_free(b, 2 * MiB, 0, STREAM_A);
    vram_plugin_free(d2, 64 * KiB, 0, STREAM_A);
    CHECK_ALL();
}

/* What the stream freed at once is handed elsewhere only after the stream got there: a plain
 * request, a request on another stream, a trim and the shutdown each wait for it (once), and after
 * the first request elsewhere frees go through events again. */
TEST(async_solo_stream_waited_for_before_others) {
    growth_256mib();
    vram__backend_counters c0, c1, c2, c3;
    void *p = vram_plugin_alloc(8 * MiB, 0, STREAM_A);
    CHECK(p != NULL);
    vram_plugin_free(p, 8 * MiB, 0, STREAM_A);
    c0 = sim_counters();
    CHECK_OK(vram_trim(0, 0));                       /* gives back what A may still use: waits */
    c1 = sim_counters();
    CHECK_U64(c1.event_sync - c0.event_sync, ==, 1);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_trim(0, 0));                       /* nothing freed since: no wait */
    p = vram_plugin_alloc(8 * MiB, 0, STREAM_A);
    vram_plugin_free(p, 8 * MiB, 0, STREAM_A);
    c2 = sim_counters();
    CHECK_U64(c2.event_sync, ==, c1.event_sync);
    void *q = NULL;
    CHECK_OK(vram_malloc(&q, 8 * MiB, 0));           /* a plain request: waits for A, reuses */
    CHECK_PTR(q, ==, p);
    c3 = sim_counters();
    CHECK_U64(c3.event_sync - c2.event_sync, ==, 1);
    CHECK_OK(vram_free(q));
    p = vram_plugin_alloc(8 * MiB, 0, STREAM_A);     /* solo no more: the free goes pending */
    vram_plugin_free(p, 8 * MiB, 0, STREAM_A);
    CHECK_OK(vram_malloc(&q, 8 * MiB, 0));
    CHECK_PTR(q, !=, p);                             /* A has not got there: not handed out */
    CHECK_OK(vram_free(q));
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
}

/* A stream that cannot be waited for (its event cannot be recorded: the driver reports a fault)
 * keeps what it freed: a trim gives nothing back, and gives it back once the stream can be waited
 * for again; the figures stay sound throughout. */
TEST(async_solo_stream_that_cannot_be_waited_for_keeps_its_memory) {
    growth_256mib();
    void *p = vram_plugin_alloc(8 * MiB, 0, STREAM_A);
    CHECK(p != NULL);
    vram_plugin_free(p, 8 * MiB, 0, STREAM_A);
    vram__sim_fail_event_records(1);
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);       /* A may still use it: kept */
    CHECK_ALL();
    CHECK_OK(vram_trim(0, 0));                       /* the next wait succeeds */
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    p = vram_plugin_alloc(8 * MiB, 0, STREAM_A);
    vram_plugin_free(p, 8 * MiB, 0, STREAM_A);
    vram__sim_fail_event_records(1);
    void *q = NULL;                                  /* a plain request: solo ends all the same */
    CHECK_OK(vram_malloc(&q, 4 * MiB, 0));
    CHECK_ALL();
    CHECK_OK(vram_free(q));
    vram__sim_fail_event_records(0);
    p = vram_plugin_alloc(8 * MiB, 0, STREAM_A);     /* solo no more: A's free goes pending */
    vram_plugin_free(p, 8 * MiB, 0, STREAM_A);
    CHECK_OK(vram_malloc(&q, 8 * MiB, 0));
    CHECK_PTR(q, !=, p);
    CHECK_OK(vram_free(q));
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
}

/* A request on a second stream ends the solo stream, after waiting for it. */
TEST(async_solo_stream_ends_with_a_second_stream) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    void *p = vram_plugin_alloc(4 * MiB, 0, STREAM_A);
    vram_plugin_free(p, 4 * MiB, 0, STREAM_A);
    vram__backend_counters c0, c1;
    c0 = sim_counters();
    void *q = vram_plugin_alloc(4 * MiB, 0, STREAM_B);
    CHECK_PTR(q, ==, p);                             /* A's block, once A got there */
    c1 = sim_counters();
    CHECK_U64(c1.event_sync - c0.event_sync, ==, 1);
    vram_plugin_free(q, 4 * MiB, 0, STREAM_B);       /* two streams: through an event now */
    void *r = vram_plugin_alloc(4 * MiB, 0, STREAM_A);
    CHECK_PTR(r, !=, q);
    vram_plugin_free(r, 4 * MiB, 0, STREAM_A);
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

/* A few owned-stream frees (fewer than a batch) must not hold their memory forever: trim records
 * their event, and once it completed the next trim gives the memory back. */
TEST(async_plugin_frees_are_trimmed) {
    growth_256mib();
    two_streams();
    CHECK_OK(vram_trim(0, 0));
    void *p[4] = {0};
    plugin_alloc_n(p, 4, 8 * MiB, STREAM_A);
    for (int i = 0; i < 4; i++) vram_plugin_free(p[i], 8 * MiB, 0, STREAM_A);
    CHECK_SIZE(INFO(0).reserved, ==, 32 * MiB);
    CHECK_OK(vram_trim(0, 0));                 /* records A's event; A has not got there yet */
    CHECK_SIZE(INFO(0).reserved, ==, 32 * MiB);
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_ALL();
}

TEST(async_other_stream_waits_when_no_room) {
    prealloc_mib(4);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 4 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_ALL();
    /* nothing else fits: the pool waits for A's free to complete */
    uint64_t waits = sim_counters().event_sync;
    CHECK_OK(vram_malloc_async(&q, 4 * MiB, 0, STREAM_B));
    CHECK_PTR(q, ==, p);
    CHECK_U64(sim_counters().event_sync - waits, ==, 1);
    CHECK_ALL();
    CHECK_OK(vram_free_async(q, STREAM_B));
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

TEST(async_plain_malloc_waits_when_no_room) {
    prealloc_mib(4);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 4 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    uint64_t waits = sim_counters().event_sync;
    CHECK_OK(vram_malloc(&q, 4 * MiB, 0));
    CHECK_PTR(q, ==, p);
    CHECK_U64(sim_counters().event_sync - waits, ==, 1);               /* waited for A's free */
    CHECK_OK(vram_free(q));
    CHECK_ALL();
}

TEST(async_other_stream_gets_new_block_with_room) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 1 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_OK(vram_malloc_async(&q, 1 * MiB, 0, STREAM_B));  /* A's free is still pending */
    CHECK(q != p);
    CHECK_ALL();
    CHECK_OK(vram_free_async(q, STREAM_B));
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

TEST(async_plain_malloc_gets_new_block_while_free_pending) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc_async(&p, 1 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_OK(vram_malloc(&q, 1 * MiB, 0));
    CHECK(q != p);
    CHECK_ALL();
    /* once A has run past the free, a plain allocation may take the block again */
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_malloc(&r, 1 * MiB, 0));
    CHECK_PTR(r, ==, p);
    CHECK_ALL();
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_free(r));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(async_other_stream_reuses_after_complete) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 1 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_malloc_async(&q, 1 * MiB, 0, STREAM_B));
    CHECK_PTR(q, ==, p);
    CHECK_OK(vram_free_async(q, STREAM_B));
    vram__sim_stream_complete(STREAM_B);
    CHECK_ALL();
}

TEST(async_free_foreign_pointer_is_invalid) {
    use_sim("16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc_async(&p, 4096, 0, STREAM_A));
    vram_memory_info before = INFO(0);
    int local = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free_async(&local, STREAM_A));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free_async((char *)p + 8, STREAM_A));
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_ALL();
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free_async(p, STREAM_A));  /* double free */
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(p));
    CHECK_OK(vram_free_async(NULL, STREAM_A));
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
}

TEST(async_size_zero_gives_null) {
    use_sim("16GiB");
    void *p = (void *)0x1;
    CHECK_OK(vram_malloc_async(&p, 0, 0, STREAM_A));
    CHECK_PTR(p, ==, NULL);
    CHECK_ALL();
}

TEST(async_stats_after_completion) {
    use_sim("16GiB");
    void *p[16];
    for (int i = 0; i < 16; i++) CHECK_OK(vram_malloc_async(&p[i], 1000, 0, STREAM_A));
    CHECK_SIZE(INFO(0).current, ==, 16 * 1024);
    for (int i = 0; i < 16; i++) CHECK_OK(vram_free_async(p[i], i % 2 ? STREAM_A : STREAM_B));
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_U64(info.num_allocs, ==, 16);
    CHECK_U64(info.num_frees, ==, 16);
    CHECK_ALL();
}

TEST(async_mixed_with_plain_free) {
    use_sim("16GiB");
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_malloc_async(&p, 4096, 0, STREAM_A));
    CHECK_OK(vram_malloc(&q, 4096, 0));
    CHECK_OK(vram_free(p));              /* an async block freed the plain way */
    CHECK_OK(vram_free_async(q, STREAM_B));  /* and the other way round */
    vram__sim_stream_complete(STREAM_B);
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(async_shutdown_with_pending_free) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *p = NULL;
    CHECK_OK(vram_malloc_async(&p, 1 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));  /* never completed by the stream */
    CHECK_OK(vram_shutdown());
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_OK(vram_init());
    CHECK_ALL();
}

TEST(async_tight_pool_many_rounds) {
    /* a pool that holds only four blocks, cycled through two streams: every allocation must
     * succeed by waiting for the other stream's frees */
    prealloc_mib(8);
    void *live[4] = {0};
    for (int round = 0; round < 200; round++) {
        void *stream = round % 2 ? STREAM_A : STREAM_B;
        for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc_async(&live[i], 2 * MiB, 0, stream));
        for (int i = 0; i < 4; i++) CHECK_OK(vram_free_async(live[i], stream));
        CHECK_ALL();
    }
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
}

TEST(async_same_stream_reuses_part_of_a_larger_block) {
    prealloc_mib(2);
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc_async(&p, 2 * MiB, 0, STREAM_A));
    CHECK_OK(vram_free_async(p, STREAM_A));
    CHECK_OK(vram_malloc_async(&q, 1 * MiB, 0, STREAM_A));  /* half of A's pending block */
    CHECK_PTR(q, ==, p);
    CHECK_ALL();
    CHECK_OK(vram_malloc_async(&r, 1 * MiB, 0, STREAM_B));  /* the other half, after waiting */
    CHECK_PTR(r, ==, (char *)p + 1 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free_async(q, STREAM_A));
    CHECK_OK(vram_free_async(r, STREAM_B));
    vram__sim_stream_complete(STREAM_A);
    vram__sim_stream_complete(STREAM_B);
    void *whole = NULL;
    CHECK_OK(vram_malloc(&whole, 2 * MiB, 0));  /* everything merged again */
    CHECK_PTR(whole, ==, p);
    CHECK_OK(vram_free(whole));
    CHECK_ALL();
}

TEST(async_current_drops_at_free) {
    use_sim("16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc_async(&p, 1000, 0, STREAM_A));
    CHECK_SIZE(INFO(0).current, ==, 1024);
    CHECK_OK(vram_free_async(p, STREAM_A));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);  /* no longer a live allocation of the program */
    CHECK_U64(info.num_frees, ==, 1);
    CHECK_ALL();
}

/* Random stream-ordered traffic on three streams plus plain calls, vram_check after every step. */
TEST(async_stress_checked_every_step) {
    prealloc_mib(64);
    void *const streams[3] = {STREAM_A, STREAM_B, (void *)0x3};
    enum { LIVE = 64 };
    void *live[LIVE] = {0};
    size_t sizes[LIVE] = {0}, current = 0;
    test_rng rng = rng_make(harness_seed());
    for (int step = 0; step < 5000; step++) {
        int pick = (int)rng_below(&rng, LIVE);
        int which = (int)rng_below(&rng, 4);  /* 3: plain call */
        void *stream = which < 3 ? streams[which] : NULL;
        if (rng_below(&rng, 20) == 0) {
            vram__sim_stream_complete(streams[rng_below(&rng, 3)]);
        } else if (live[pick] != NULL) {
            if (rng_below(&rng, 6) == 0) {      /* used on another stream too: the free waits for it */
                CHECK_OK(vram_record_stream(live[pick], streams[rng_below(&rng, 3)]));
            }
            CHECK_OK(stream ? vram_free_async(live[pick], stream) : vram_free(live[pick]));
            current -= round256(sizes[pick]);
            live[pick] = NULL;
        } else {
            size_t size = rng_size_log(&rng, 1, 4 * MiB);
            vram_status s = stream ? vram_malloc_async(&live[pick], size, 0, stream)
                                   : vram_malloc(&live[pick], size, 0);
            if (s == VRAM_OK) {
                sizes[pick] = size;
                current += round256(size);
            } else {
                CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
                live[pick] = NULL;
            }
        }
        CHECK_OK(vram_check(0));
        vram_memory_info info = INFO(0);
        CHECK_INFO_SANE(info);
        CHECK_SIZE(info.current, ==, current);
    }
    for (int i = 0; i < LIVE; i++) {
        if (live[i] != NULL) CHECK_OK(vram_free_async(live[i], STREAM_A));
    }
    for (int i = 0; i < 3; i++) vram__sim_stream_complete(streams[i]);
    void *all = NULL;
    CHECK_OK(vram_malloc(&all, 64 * MiB, 0));  /* every pending free settled and merged */
    CHECK_OK(vram_free(all));
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_U64(info.num_allocs, ==, info.num_frees);
    CHECK_ALL();
}

enum { ASYNC_THREADS = 8, ASYNC_OPS = 3000 };

typedef struct async_worker {
    int      id;
    uint64_t seed;
} async_worker;

/* Each thread owns a stream (its id + 1) and completes it now and then. */
static void *async_worker_main(void *arg) {
    async_worker *w = arg;
    void *stream = (void *)(uintptr_t)(w->id + 1);
    test_rng rng = rng_make(w->seed);
    enum { HELD = 16 };
    void *live[HELD] = {0};
    for (int op = 0; op < ASYNC_OPS; op++) {
        int pick = (int)rng_below(&rng, HELD);
        if (rng_below(&rng, 32) == 0) {
            vram__sim_stream_complete(stream);
        } else if (live[pick] != NULL) {
            CHECK_OK(vram_free_async(live[pick], stream));
            live[pick] = NULL;
        } else {
            size_t size = rng_size_log(&rng, 1, 1 * MiB);
            vram_status s = vram_malloc_async(&live[pick], size, 0, stream);
            if (s != VRAM_OK) {
                CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
                live[pick] = NULL;
            }
        }
    }
    for (int pick = 0; pick < HELD; pick++) {
        if (live[pick] != NULL) CHECK_OK(vram_free_async(live[pick], stream));
    }
    vram__sim_stream_complete(stream);
    return NULL;
}

/* Runs fn on n threads (n <= ASYNC_THREADS), worker i with id i and its own seed, and joins them. */
static void run_workers(int n, void *(*fn)(void *)) {
    async_worker workers[ASYNC_THREADS];
    pthread_t threads[ASYNC_THREADS];
    uint64_t seed = harness_seed();
    for (int i = 0; i < n; i++) {
        workers[i] = (async_worker){.id = i, .seed = seed + (uint64_t)i * 7919u};
        CHECK_INT(pthread_create(&threads[i], NULL, fn, &workers[i]), ==, 0);
    }
    for (int i = 0; i < n; i++) CHECK_INT(pthread_join(threads[i], NULL), ==, 0);
}

TEST(async_threads_with_own_streams) {
    prealloc_mib(64);  /* tight: threads wait on each other's frees */
    CHECK_OK(vram_init());
    run_workers(ASYNC_THREADS, async_worker_main);
    CHECK_ALL();
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_U64(info.num_allocs, ==, info.num_frees);
    void *all = NULL;
    CHECK_OK(vram_malloc(&all, 64 * MiB, 0));
    CHECK_OK(vram_free(all));
    CHECK_OK(vram_shutdown());
}

/* PyTorch's threads (the program's and autograd's) all on one stream through the plugin, while one
 * of them starts plain requests halfway: the arena stays solo, then leaves it, under the lock. */
static void *solo_worker_main(void *arg) {
    async_worker *w = arg;
    test_rng rng = rng_make(w->seed);
    enum { HELD = 16 };
    void *live[HELD] = {0};
    size_t sizes[HELD] = {0};
    for (int op = 0; op < ASYNC_OPS; op++) {
        int pick = (int)rng_below(&rng, HELD);
        int plain = w->id == 0 && op >= ASYNC_OPS / 2;   /* thread 0 turns to vram_malloc */
        if (live[pick] != NULL) {
            if (sizes[pick] & 1) CHECK_OK(vram_free(live[pick]));
            else vram_plugin_free(live[pick], (ptrdiff_t)sizes[pick], 0, STREAM_A);
            live[pick] = NULL;
        } else {
            size_t size = rng_size_log(&rng, 2, 1 * MiB) & ~(size_t)1;   /* even: the plugin's */
            if (plain) {
                size |= 1;
                CHECK_OK(vram_malloc(&live[pick], size, 0));   /* 4 x 16 MiB at most: room */
            } else {
                live[pick] = vram_plugin_alloc((ptrdiff_t)size, 0, STREAM_A);
                CHECK(live[pick] != NULL);
            }
            sizes[pick] = size;
        }
    }
    for (int pick = 0; pick < HELD; pick++) {
        if (live[pick] == NULL) continue;
        if (sizes[pick] & 1) CHECK_OK(vram_free(live[pick]));
        else vram_plugin_free(live[pick], (ptrdiff_t)sizes[pick], 0, STREAM_A);
    }
    return NULL;
}

TEST(async_solo_stream_from_several_threads) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 512 * MiB));
    CHECK_OK(vram_init());
    run_workers(4, solo_worker_main);
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_U64(info.num_allocs, ==, info.num_frees);
    CHECK_OK(vram_trim(0, 0));                       /* records the last frees' event */
    vram__sim_stream_complete(STREAM_A);
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_shutdown());
}
