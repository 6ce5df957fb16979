/*
 * test_threads.c: many threads allocating and freeing at once, on one and on several logical
 * devices, with and without growth, mixed with statistics and checks.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "harness.h"
#include "common/membarrier.h"
#include "pool/lock.h"

enum { THREADS = 8, OPS = 5000, HELD = 64 };

typedef struct worker {
    int      id;
    int      ndevices;
    size_t   max_size;
    uint64_t seed;
    int      with_info;   /* also read the memory info now and then */
    uint64_t allocs, ooms;
} worker;

static atomic_int workers_running;

/* Each live block carries a tag (thread, op) in its first bytes; another thread handed an
 * overlapping block would overwrite it (harness.c: the bytes on the simulated GPU, a shadow of them
 * on the CUDA backend). */
static void tag_block(void *p, size_t size, uint64_t tag) {
    block_tag(p, size, tag);
}

static void check_tag(const void *p, size_t size, uint64_t tag) {
    CHECK(block_tagged(p, size, tag));
}

static void *worker_main(void *arg) {
    worker *w = arg;
    test_rng rng = rng_make(w->seed);
    void    *live[HELD] = {0};
    size_t   sizes[HELD] = {0};
    uint64_t tags[HELD] = {0};
    for (int op = 0; op < OPS; op++) {
        int pick = (int)rng_below(&rng, HELD);
        int dev = (int)rng_below(&rng, (uint64_t)w->ndevices);
        if (live[pick] != NULL) {
            check_tag(live[pick], sizes[pick], tags[pick]);
            CHECK_OK(vram_free(live[pick]));
            live[pick] = NULL;
        } else {
            size_t size = rng_size_log(&rng, 1, w->max_size);
            vram_status s = vram_malloc(&live[pick], size, dev);
            if (s == VRAM_ERR_OUT_OF_MEMORY) {
                w->ooms++;
                live[pick] = NULL;
            } else {
                CHECK_STATUS(VRAM_OK, s);
                CHECK(live[pick] != NULL);
                CHECK((uintptr_t)live[pick] % 256 == 0);
                w->allocs++;
                sizes[pick] = size;
                tags[pick] = ((uint64_t)w->id << 32) | (uint64_t)op;
                tag_block(live[pick], size, tags[pick]);
            }
        }
        if (w->with_info && op % 8 == 0) {
            vram_memory_info info = INFO(dev);
            CHECK_INFO_SANE(info);
        }
    }
    for (int pick = 0; pick < HELD; pick++) {
        if (live[pick] == NULL) continue;
        check_tag(live[pick], sizes[pick], tags[pick]);
        CHECK_OK(vram_free(live[pick]));
    }
    atomic_fetch_sub(&workers_running, 1);
    return NULL;
}

/* Reads statistics and runs vram_check on every device while the workers run. */
static void *observer_main(void *arg) {
    int ndevices = *(int *)arg;
    while (atomic_load(&workers_running) > 0) {
        for (int d = 0; d < ndevices; d++) {
            vram_memory_info info = INFO(d);
            CHECK_INFO_SANE(info);
            CHECK_OK(vram_check(d));
        }
    }
    return NULL;
}

static void run_workers(int ndevices, size_t max_size, int with_info, int with_observer) {
    worker workers[THREADS];
    pthread_t threads[THREADS], observer;
    uint64_t seed = harness_seed();
    CHECK_OK(vram_init());
    atomic_store(&workers_running, THREADS);
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){.id = i, .ndevices = ndevices, .max_size = max_size,
                              .seed = seed + (uint64_t)i * 0x1000193u, .with_info = with_info};
        CHECK_INT(pthread_create(&threads[i], NULL, worker_main, &workers[i]), ==, 0);
    }
    if (with_observer) CHECK_INT(pthread_create(&observer, NULL, observer_main, &ndevices), ==, 0);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    if (with_observer) pthread_join(observer, NULL);

    CHECK_ALL();
    uint64_t allocs = 0, counted = 0;
    for (int i = 0; i < THREADS; i++) allocs += workers[i].allocs;
    for (int d = 0; d < ndevices; d++) {
        vram_memory_info info = INFO(d);
        CHECK_SIZE(info.current, ==, 0);
        CHECK_U64(info.num_allocs, ==, info.num_frees);
        CHECK_SIZE(info.reserved, <=, info.limit);
        counted += info.num_allocs;
    }
    CHECK_U64(counted, ==, allocs);
    CHECK_OK(vram_shutdown());
}

TEST(threads_one_device_prealloc) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    run_workers(1, 1 * MiB, 0, 0);
}

TEST(threads_one_device_growth) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    run_workers(1, 1 * MiB, 0, 0);
}

TEST(threads_several_logical_devices) {
    use_sim("2x16GiB");
    vram_logical_device_configuration two[2] = {{512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));
    run_workers(4, 512 * KiB, 0, 0);
}

TEST(threads_several_logical_devices_growth_shared_budget) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    vram_logical_device_configuration three[3] = {{512}, {512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(0, three, 3));
    run_workers(3, 1 * MiB, 1, 0);
}

TEST(threads_mixed_with_memory_info) {
    use_sim("16GiB");
    vram_logical_device_configuration two[2] = {{512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    run_workers(2, 256 * KiB, 1, 0);
}

TEST(threads_mixed_with_observer_and_check) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    vram_logical_device_configuration two[2] = {{512}, {512}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    run_workers(2, 256 * KiB, 1, 1);
}

TEST(threads_tight_limit_with_ooms) {
    /* 8 threads x up to 64 blocks of up to 4 MiB against a 64 MiB pool: failures must be clean */
    use_sim("16GiB");
    vram_logical_device_configuration one = {64};
    CHECK_OK(vram_set_logical_device_configuration(0, &one, 1));
    run_workers(1, 4 * MiB, 1, 0);
}

TEST(threads_tight_limit_growth_arenas) {
    /* the same with growth: the 8 threads spread over arenas that share the 64 MiB limit; what is
     * checked is that failures stay clean and the figures sound (run_workers, vram_check) under
     * that contention. That arenas give each other idle memory back is arenas_share_the_limit's */
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    run_workers(1, 4 * MiB, 1, 1);
}

/* Threads starting, using and shutting down the runtime at once: allocation and free always
 * work (an allocation restarts a stopped runtime), a shutdown either happens or is refused
 * because another thread holds a block. */
static void *lifecycle_main(void *arg) {
    worker *w = arg;
    test_rng rng = rng_make(w->seed);
    for (int op = 0; op < 2000; op++) {
        void *p = NULL;
        switch (rng_below(&rng, 4)) {
        case 0: CHECK_OK(vram_init()); break;
        case 1: {
            vram_status s = vram_shutdown();
            if (s != VRAM_OK) CHECK_STATUS(VRAM_ERR_CONFLICT, s);
            break;
        }
        default:
            CHECK_OK(vram_malloc(&p, rng_size_log(&rng, 1, 1 * MiB), 0));
            w->allocs++;
            CHECK_OK(vram_free(p));
            break;
        }
    }
    return NULL;
}

TEST(threads_init_use_shutdown_race) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    worker workers[THREADS];
    pthread_t threads[THREADS];
    uint64_t seed = harness_seed();
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){.id = i, .seed = seed + (uint64_t)i};
        CHECK_INT(pthread_create(&threads[i], NULL, lifecycle_main, &workers[i]), ==, 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    CHECK_OK(vram_init());
    CHECK_ALL();
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_OK(vram_shutdown());
}

/* The arena lock (src/pool/lock.h) alone: 8 threads take it in turn; a holder sometimes sleeps
 * inside, so that waiters stop spinning and sleep on the futex (the holder then sees the lock
 * marked 2), and giving it back must wake them. A plain counter counts the sections: a lost
 * update or two threads inside at once shows in the total or in `inside`. */
enum { LOCK_ROUNDS = 4000 };

typedef struct lock_test {
    pool_lock  lock;
    atomic_int inside;
    uint64_t   count;          /* under the lock only */
    uint64_t   saw_sleepers;   /* under the lock only */
} lock_test;

static void *lock_main(void *arg) {
    lock_test *t = arg;
    for (int i = 0; i < LOCK_ROUNDS; i++) {
        pool_lock_take(&t->lock);
        CHECK_INT(atomic_fetch_add(&t->inside, 1), ==, 0);
        t->count++;
        if (i % 256 == 0) usleep(200);   /* long enough for every waiter to go to sleep */
        if (atomic_load(&t->lock.state) == 2) t->saw_sleepers++;
        atomic_fetch_sub(&t->inside, 1);
        pool_lock_give(&t->lock);
    }
    return NULL;
}

TEST(threads_arena_lock_excludes_and_wakes_sleepers) {
    lock_test t = {.count = 0};
    pool_lock_init(&t.lock);
    atomic_init(&t.inside, 0);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK_INT(pthread_create(&threads[i], NULL, lock_main, &t), ==, 0);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    CHECK_U64(t.count, ==, (uint64_t)THREADS * LOCK_ROUNDS);
    CHECK_U64(t.saw_sleepers, >, 0);
    CHECK_INT(atomic_load(&t.lock.state), ==, 0);
}

/* The bias (lock.h): one thread taking the lock by pool_lock_take_by 64 times in a row gets it
 * biased to itself (then takes it without touching `state`); a take by another thread revokes it
 * (the owner out, the next bias needs twice as many takes in a row, unless the bias served 64 x as
 * many takes: then 64 again); sections stay exclusive while
 * the owner takes it by its bias and others by state, at once. Needs membarrier: where the kernel
 * has none, no bias forms and the lock is the plain one. */
typedef struct bias_test {
    pool_lock  lock;
    atomic_int inside, stop;
    uint64_t   count;          /* under the lock only */
    uint64_t   by_bias;        /* the owner's sections taken by the bias */
    uint64_t   owned;          /* the owner's sections */
    atomic_int others;         /* the other thread's */
} bias_test;

static void bias_section(bias_test *t) {
    CHECK_INT(atomic_fetch_add(&t->inside, 1), ==, 0);
    t->count++;
    atomic_fetch_sub(&t->inside, 1);
}

static void *bias_owner(void *arg) {
    bias_test *t = arg;
    for (int i = 0; i < 20 * LOCK_ROUNDS || atomic_load(&t->others) < 4; i++) {   /* (revoked 4 times) */
        pool_lock_take_by(&t->lock, t);
        bias_section(t);
        t->by_bias += (uint64_t)t->lock.by_bias;
        t->owned++;
        pool_lock_give(&t->lock);
    }
    atomic_store(&t->stop, 1);
    return NULL;
}

static void *bias_other(void *arg) {
    bias_test *t = arg;
    while (!atomic_load(&t->stop)) {
        for (int i = 0; i < 200 && !atomic_load(&t->stop); i++) sched_yield();   /* the owner re-biases */
        pool_lock_take(&t->lock);
        bias_section(t);
        pool_lock_give(&t->lock);
        atomic_fetch_add(&t->others, 1);
    }
    return NULL;
}

TEST(threads_arena_lock_bias_forms_is_revoked_and_excludes) {
    int ready = vram__membarrier_register();
    bias_test t = {.count = 0};
    pool_lock_init(&t.lock);
    atomic_init(&t.inside, 0);
    atomic_init(&t.stop, 0);
    atomic_init(&t.others, 0);
    for (int i = 0; i < 64; i++) {
        pool_lock_take_by(&t.lock, &t);
        CHECK_INT(t.lock.by_bias, ==, 0);                    /* by state, 64 in a row */
        pool_lock_give(&t.lock);
    }
    CHECK_PTR(atomic_load(&t.lock.owner), ==, ready ? (const void *)&t : NULL);
    pool_lock_take_by(&t.lock, &t);
    CHECK_INT(t.lock.by_bias, ==, ready);
    CHECK_INT(atomic_load(&t.lock.state), ==, 0);            /* not touched by the bias */
    pool_lock_give(&t.lock);
    pool_lock_take(&t.lock);                                  /* another taker: revoked */
    CHECK_PTR(atomic_load(&t.lock.owner), ==, NULL);
    CHECK_INT(atomic_load(&t.lock.owner_in), ==, 0);
    pool_lock_give(&t.lock);
    CHECK_U64(t.lock.need, ==, ready ? 128 : 64);            /* revoked after 1 take by the bias */
    for (int i = 0; ready && i < 128 + 128 * 64; i++) {     /* biased again, then 64 x 128 takes by it */
        pool_lock_take_by(&t.lock, &t);
        CHECK_INT(t.lock.by_bias, ==, i >= 128);
        pool_lock_give(&t.lock);
    }
    pool_lock_take(&t.lock);
    pool_lock_give(&t.lock);
    CHECK_U64(t.lock.need, ==, 64);                          /* it paid for its revocation */
    pthread_t a, b;
    CHECK_INT(pthread_create(&a, NULL, bias_owner, &t), ==, 0);
    CHECK_INT(pthread_create(&b, NULL, bias_other, &t), ==, 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_U64(t.count, ==, t.owned + (uint64_t)atomic_load(&t.others));
    if (ready) CHECK_U64(t.by_bias, >, 0);
    CHECK_INT(atomic_load(&t.lock.state), ==, 0);
    CHECK_INT(atomic_load(&t.lock.owner_in), ==, 0);
}

/* A revoker that finds the owner inside sleeps until it leaves: the owner holds the lock by its
 * bias for 50 ms, another thread takes it by state meanwhile and gets it only once the owner gave it
 * back (the owner's section saw no one else; the other's came after it). */
static void *take_by_state(void *arg) {
    bias_test *t = arg;
    pool_lock_take(&t->lock);
    CHECK_INT(atomic_fetch_add(&t->inside, 1), ==, 0);
    atomic_store(&t->stop, 2);                 /* after the owner's section (it set 1 at its end) */
    atomic_fetch_sub(&t->inside, 1);
    pool_lock_give(&t->lock);
    return NULL;
}

TEST(threads_arena_lock_revoker_waits_for_the_owner) {
    if (!vram__membarrier_register()) return;  /* no bias without membarrier */
    bias_test t = {.count = 0};
    pool_lock_init(&t.lock);
    atomic_init(&t.inside, 0);
    atomic_init(&t.stop, 0);
    for (int i = 0; i < 64; i++) {
        pool_lock_take_by(&t.lock, &t);
        pool_lock_give(&t.lock);
    }
    pool_lock_take_by(&t.lock, &t);
    CHECK_INT(t.lock.by_bias, ==, 1);
    CHECK_INT(atomic_fetch_add(&t.inside, 1), ==, 0);
    pthread_t b;
    CHECK_INT(pthread_create(&b, NULL, take_by_state, &t), ==, 0);
    usleep(50000);                             /* the other is revoking, asleep on owner_in */
    CHECK_INT(atomic_load(&t.stop), ==, 0);
    atomic_store(&t.stop, 1);
    atomic_fetch_sub(&t.inside, 1);
    pool_lock_give(&t.lock);
    pthread_join(b, NULL);
    CHECK_INT(atomic_load(&t.stop), ==, 2);
    CHECK_PTR(atomic_load(&t.lock.owner), ==, NULL);
    CHECK_INT(atomic_load(&t.lock.state), ==, 0);
}
