/*
 * test_lifecycle.c: vram_init and vram_shutdown.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "harness.h"
#include "runtime/runtime.h"

TEST(shutdown_with_live_blocks_is_conflict) {
    use_sim("16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_shutdown());
    CHECK_INT(vram_is_initialized(), ==, 1);
    /* the runtime still works */
    void *q = NULL;
    CHECK_OK(vram_malloc(&q, 1 * MiB, 0));
    CHECK_SIZE(INFO(0).current, ==, 2 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(p));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_shutdown());
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_shutdown());
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(shutdown_with_live_block_on_other_device_is_conflict) {
    use_sim("2x16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 1));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_shutdown());
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_ALL();
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_shutdown());
}

TEST(shutdown_then_new_configuration_and_init) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(16 * GiB));
    CHECK_OK(vram_shutdown());
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_OK(vram_set_memory_limit(0, 2 * GiB));
    CHECK_OK(vram_init());
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.limit, ==, 2 * GiB);
    CHECK_SIZE(info.reserved, ==, 2 * GiB);
    CHECK_U64(info.num_allocs, ==, 0);
    CHECK_ALL();
}

TEST(shutdown_keeps_api_configuration) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 3 * GiB));
    CHECK_OK(vram_init());
    CHECK_OK(vram_shutdown());
    int enabled = 0;
    size_t limit = 0;
    CHECK_OK(vram_get_memory_growth(0, &enabled));
    CHECK_INT(enabled, ==, 1);
    CHECK_OK(vram_get_memory_limit(0, &limit));
    CHECK_SIZE(limit, ==, 3 * GiB);
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 3 * GiB);
    CHECK_SIZE(INFO(0).reserved, <=, NEAR_ZERO);
    CHECK_ALL();
}

TEST(shutdown_rereads_environment) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_OK(vram_shutdown());
    set_env("VRAM_MEMORY_LIMIT", "1GiB");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 1 * GiB);
    CHECK_OK(vram_shutdown());
    set_env("VRAM_MEMORY_LIMIT", NULL);
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(16 * GiB));
}

TEST(shutdown_when_not_initialized_is_ok) {
    use_sim("16GiB");
    CHECK_OK(vram_shutdown());
    CHECK_OK(vram_shutdown());
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_OK(vram_init());
    CHECK_OK(vram_shutdown());
    CHECK_OK(vram_shutdown());
}

TEST(shutdown_and_init_many_times) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 16 * GiB));  /* the whole card: leaks would show */
    for (int i = 0; i < 20; i++) {
        CHECK_OK(vram_init());
        CHECK_SIZE(INFO(0).reserved, ==, 16 * GiB);
        void *p = NULL;
        CHECK_OK(vram_malloc(&p, 1 * GiB, 0));
        CHECK_OK(vram_free(p));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        CHECK_INT(vram_is_initialized(), ==, 0);
    }
}

TEST(shutdown_growth_pool_returns_memory) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 16 * GiB));
    for (int i = 0; i < 5; i++) {
        void *p = NULL;
        CHECK_OK(vram_malloc(&p, 15 * GiB, 0));
        CHECK_OK(vram_free(p));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
    }
}

TEST(init_twice_is_ok) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    CHECK_OK(vram_init());
    CHECK_INT(vram_is_initialized(), ==, 1);
    CHECK_SIZE(INFO(0).reserved, ==, tf_default_limit(16 * GiB));  /* taken once */
    CHECK_ALL();
}

TEST(init_failure_leaves_runtime_stopped) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "abc");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_INT(vram_is_initialized(), ==, 0);
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_malloc(&p, 256, 0));
    CHECK_INT(vram_is_initialized(), ==, 0);
    set_env("VRAM_MEMORY_LIMIT", "2GiB");  /* a failed start caches nothing */
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 2 * GiB);
}

enum { INIT_THREADS = 8 };
static pthread_barrier_t init_barrier;
static vram_status init_status[INIT_THREADS];

static void *init_thread(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&init_barrier);
    init_status[i] = vram_init();
    return NULL;
}

TEST(init_from_8_threads_at_once) {
    use_sim("2x16GiB");
    pthread_t threads[INIT_THREADS];
    pthread_barrier_init(&init_barrier, NULL, INIT_THREADS);
    for (int i = 0; i < INIT_THREADS; i++) {
        CHECK_INT(pthread_create(&threads[i], NULL, init_thread, (void *)(intptr_t)i), ==, 0);
    }
    for (int i = 0; i < INIT_THREADS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&init_barrier);
    for (int i = 0; i < INIT_THREADS; i++) CHECK_STATUS(VRAM_OK, init_status[i]);
    CHECK_INT(vram_is_initialized(), ==, 1);
    int n = 0;
    CHECK_OK(vram_list_logical_devices(NULL, 0, &n));
    CHECK_INT(n, ==, 2);
    CHECK_SIZE(INFO(0).reserved, ==, tf_default_limit(16 * GiB));
    CHECK_SIZE(INFO(1).reserved, ==, tf_default_limit(16 * GiB));
    CHECK_ALL();
}

static void *malloc_thread(void *arg) {
    int i = (int)(intptr_t)arg;
    void *p = NULL;
    pthread_barrier_wait(&init_barrier);
    init_status[i] = vram_malloc(&p, 4096, 0);
    if (init_status[i] == VRAM_OK) init_status[i] = vram_free(p);
    return NULL;
}

TEST(init_by_malloc_from_8_threads_at_once) {
    use_sim("16GiB");
    pthread_t threads[INIT_THREADS];
    pthread_barrier_init(&init_barrier, NULL, INIT_THREADS);
    for (int i = 0; i < INIT_THREADS; i++) {
        CHECK_INT(pthread_create(&threads[i], NULL, malloc_thread, (void *)(intptr_t)i), ==, 0);
    }
    for (int i = 0; i < INIT_THREADS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&init_barrier);
    for (int i = 0; i < INIT_THREADS; i++) CHECK_STATUS(VRAM_OK, init_status[i]);
    vram_memory_info info = INFO(0);
    CHECK_U64(info.num_allocs, ==, INIT_THREADS);
    CHECK_U64(info.num_frees, ==, INIT_THREADS);
    CHECK_SIZE(info.current, ==, 0);
    CHECK_ALL();
}

/* After a shutdown the (simulated) driver holds nothing of ours: every allocation, mapping,
 * reservation and physical handle went back. Uses the backend's call counters, kept for tests. */
TEST(shutdown_returns_every_byte_to_the_driver) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(1, 1));
    vram_logical_device_configuration two[2] = {{1024}, {2048}};
    CHECK_OK(vram_set_logical_device_configuration(1, two, 2));
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc(&p, 100 * MiB, 0));
    CHECK_OK(vram_malloc(&q, 300 * MiB, 1));
    CHECK_OK(vram_malloc_async(&r, 50 * MiB, 2, (void *)0x1));
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(q));
    CHECK_OK(vram_free_async(r, (void *)0x1));  /* still pending at shutdown */
    vram__backend_counters before = sim_counters();
    CHECK_U64(before.mem_alloc + before.phys_create, >=, 3);
    CHECK_OK(vram_shutdown());
    vram__backend_counters c = sim_counters();
    CHECK_U64(c.mem_alloc, ==, c.mem_free);
    CHECK_U64(c.phys_create, ==, c.phys_release);
    CHECK_U64(c.map, ==, c.unmap);
    CHECK_U64(c.va_reserve, ==, c.va_free);
}

/* Writers (shutdown, configuration) and readers (allocation, free, stats) on many threads at once:
 * a shutdown attempted while blocks are live is refused and changes nothing; readers never see a
 * runtime half started or half stopped; once every thread is done, the shutdown succeeds. */
enum { RW_THREADS = 4, RW_ROUNDS = 3000 };
static atomic_int rw_failures;

static void *rw_reader(void *arg) {
    uintptr_t seed = (uintptr_t)arg;
    void *p = NULL;
    for (int i = 0; i < RW_ROUNDS; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t size = 256 + (size_t)(seed >> 40) % (1 << 20);
        if (vram_malloc(&p, size, 0) != VRAM_OK || vram_free(p) != VRAM_OK) atomic_fetch_add(&rw_failures, 1);
        vram_memory_info info;
        if (vram_get_memory_info(0, &info) != VRAM_OK) atomic_fetch_add(&rw_failures, 1);
    }
    return NULL;
}

TEST(shutdown_races_with_allocating_threads) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());
    void *held = NULL;
    CHECK_OK(vram_malloc(&held, 4096, 0));      /* keeps every shutdown below refused */
    pthread_t t[RW_THREADS];
    for (uintptr_t i = 0; i < RW_THREADS; i++) CHECK(pthread_create(&t[i], NULL, rw_reader, (void *)(i + 1)) == 0);
    for (int i = 0; i < 200; i++) {
        CHECK(vram_shutdown() == VRAM_ERR_CONFLICT);
        CHECK(vram_set_memory_growth(0, 0) == VRAM_ERR_ALREADY_INITIALIZED);
        CHECK_OK(vram_check(-1));
    }
    for (int i = 0; i < RW_THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(atomic_load(&rw_failures) == 0);
    CHECK_OK(vram_free(held));
    CHECK_OK(vram_shutdown());
    CHECK(!vram_is_initialized());
}

/* VRAM_MEMBARRIER=0 makes readers fence their own entry; otherwise, where the kernel has private
 * expedited membarrier, the writers fence for them. ctest's vram.lifecycle_fenced and
 * vram.threads_fenced run whole groups with VRAM_MEMBARRIER=0 and say so in VRAM_TEST_FENCED=1, so
 * that this fails if the setting does not reach the tests. */
TEST(membarrier_switch_is_honoured) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    const char *off = getenv("VRAM_MEMBARRIER");
    int fenced = vram__rt_readers_fence();
    if (getenv("VRAM_TEST_FENCED") != NULL) CHECK(off != NULL && strcmp(off, "0") == 0);
    if (off != NULL && strcmp(off, "0") == 0) {
        CHECK_INT(fenced, ==, 1);
    } else {
        long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
        int have = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
        CHECK_INT(fenced, ==, !have);
    }
    CHECK_OK(vram_shutdown());
}

/* A forked child (PyTorch's DataLoader workers are forks) inherits a started runtime: its own
 * configuration calls and shutdown, which fence every thread (membarrier, registered by the parent),
 * work there too. */
TEST(fork_child_configures_and_shuts_down) {
    use_sim("16GiB");
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 << 20, 0));
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int ok = vram_free(p) == VRAM_OK && vram_shutdown() == VRAM_OK &&
                 vram_set_memory_limit(0, 256u << 20) == VRAM_OK && vram_init() == VRAM_OK &&
                 vram_shutdown() == VRAM_OK;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK_INT(waitpid(pid, &status, 0), ==, pid);
    CHECK(WIFEXITED(status));
    CHECK_INT(WEXITSTATUS(status), ==, 0);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_shutdown());
}
