/*
 * test_cuda.c: the CUDA driver backend (src/backend/cuda.c, cuda_load.c) over tests/shim's fake
 * libcuda.so.1, in every CI run: the group runs with VRAM_TEST_BACKEND=cuda only (ctest's vram_cuda.*,
 * which put the fake first on LD_LIBRARY_PATH; harness.c skips it on the simulated backend). What the
 * library reserves is checked against what the driver holds (fake_cuda_held), and the driver is made
 * to fail at chosen calls (fake_cuda_fail, FAKE_CUDA_FAIL: tests/shim/fake_cuda.h): every failure
 * must surface with the driver's call and error name in vram_last_error(), and lose nothing (vram_check
 * passes, and the driver holds no more than the library counts). test_driver_fail.c's and test_oom.c's
 * VRAM_SIM_FAIL_ALLOC_AFTER tests have their twins here.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cuda_abi.h"
#include "fake_cuda.h"
#include "harness.h"

/* ---- the fake driver's backdoors ------------------------------------------------------------- */

static size_t held(int dev) {
    return ((fake_cuda_held_fn *)harness_fake("fake_cuda_held"))(dev);
}

static void plan(const char *spec) {
    if (((fake_cuda_fail_fn *)harness_fake("fake_cuda_fail"))(spec) != 0)
        harness_fail(__FILE__, __LINE__, "fake_cuda_fail(\"%s\") refused the plan", spec ? spec : "");
}

static size_t events(void) {
    return ((fake_cuda_events_fn *)harness_fake("fake_cuda_events"))();
}

static int backed(const void *p, size_t n) {
    return ((fake_cuda_backed_fn *)harness_fake("fake_cuda_backed"))((unsigned long long)(uintptr_t)p, n);
}

/* The driver holds exactly what the library reserves on device `dev` (one logical device a card). */
#define CHECK_HELD_IS_RESERVED(dev) CHECK_SIZE(held(dev), ==, INFO(dev).reserved)

/* After a shutdown: nothing of the library left in the driver. */
static void check_driver_empty(int ndev) {
    for (int d = 0; d < ndev; d++) CHECK_SIZE(held(d), ==, 0);
    CHECK_SIZE(events(), ==, 0);
    check_counters_balanced();
}

/* ---- devices ------------------------------------------------------------------------------------- */

/* The driver's names, bus ids, UUIDs and sizes, in CUDA_VISIBLE_DEVICES's order; listing retains no
 * context (cuDevicePrimaryCtxGetState: inactive). */
TEST(cuda_listing) {
    use_sim("80GiB,24GiB");
    vram_physical_device d[2];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(d, 2, &n));
    CHECK_INT(n, ==, 2);
    CHECK_STR_EQ(d[0].product, "NVIDIA Fake GPU 80GB");
    CHECK_STR_EQ(d[1].product, "NVIDIA Fake GPU 24GB");
    CHECK_STR_EQ(d[0].pci_bus_id, "0000:01:00.0");
    CHECK_STR_EQ(d[1].pci_bus_id, "0000:02:00.0");
    CHECK_STR_EQ(d[0].uuid, "GPU-fa4ec0da-0000-4000-8000-000000000000");
    CHECK_STR_EQ(d[1].uuid, "GPU-fa4ec0da-0000-4000-8000-000000000001");
    CHECK_SIZE(d[0].total_bytes, ==, 80 * GiB);
    CHECK_SIZE(d[1].total_bytes, ==, 24 * GiB);
    CHECK_INT(d[0].compute_major * 10 + d[0].compute_minor, ==, 90);
    pfn_cuDevicePrimaryCtxGetState state = (pfn_cuDevicePrimaryCtxGetState)harness_fake("cuDevicePrimaryCtxGetState");
    unsigned flags = 0;
    int active = -1;
    CHECK_INT(state(0, &flags, &active), ==, CUDA_SUCCESS);
    CHECK_INT(active, ==, 0);
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(cuda_listing_follows_visible_devices) {
    use_sim("80GiB,24GiB");
    set_env("CUDA_VISIBLE_DEVICES", "1");
    vram_physical_device d[2];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(d, 2, &n));
    CHECK_INT(n, ==, 1);
    CHECK_STR_EQ(d[0].product, "NVIDIA Fake GPU 24GB");
    CHECK_STR_EQ(d[0].pci_bus_id, "0000:02:00.0");
    CHECK_STR_EQ(d[0].uuid, "GPU-fa4ec0da-0000-4000-8000-000000000001");
}

/* A driver that cannot start says why, with the driver's error name and what to do. */
TEST(cuda_init_failures_name_the_driver_error) {
    use_sim("16GiB");
    plan("cuInit:1-2:CUDA_ERROR_NO_DEVICE");
    CHECK_STATUS(VRAM_ERR_NO_DEVICE, vram_init());
    CHECK_ERROR_CONTAINS("cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
    CHECK_ERROR_CONTAINS("VRAM_BACKEND=sim");
    CHECK_INT(vram_is_initialized(), ==, 0);
    int n = -1;
    CHECK_STATUS(VRAM_ERR_NO_DEVICE, vram_list_physical_devices(NULL, 0, &n));   /* the second call too */
    plan("cuInit:1:CUDA_ERROR_STUB_LIBRARY");
    CHECK_STATUS(VRAM_ERR_NO_DEVICE, vram_init());
    CHECK_ERROR_CONTAINS("CUDA_ERROR_STUB_LIBRARY");
    CHECK_ERROR_CONTAINS("the CUDA toolkit's stub library");
    plan("cuDeviceGetCount:1:CUDA_ERROR_ILLEGAL_STATE");
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_init());
    CHECK_ERROR_CONTAINS("cuDeviceGetCount: CUDA_ERROR_ILLEGAL_STATE");
    plan(NULL);
    set_env("FAKE_CUDA_DEVICES", "0");
    CHECK_STATUS(VRAM_ERR_NO_DEVICE, vram_init());
    CHECK_ERROR_CONTAINS("the NVIDIA driver reports no CUDA device");
    set_env("FAKE_CUDA_DEVICES", NULL);
    CHECK_OK(vram_init());                       /* and once the driver answers, it starts */
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* ---- what the driver holds --------------------------------------------------------------------- */

/* Growth, preallocation and logical devices: the driver holds what vram reserves, nothing after a
 * trim of idle memory and nothing after the shutdown (no event either). */
TEST(cuda_driver_holds_what_vram_reserves) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    CHECK_OK(vram_set_memory_limit(1, 512 * MiB));   /* card 1 preallocated */
    void *a = NULL, *b = NULL, *c = NULL, *s = NULL;
    CHECK_OK(vram_malloc(&a, 100 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 1000, 0));
    CHECK_OK(vram_malloc(&c, 300 * MiB, 1));
    CHECK_OK(vram_malloc_async(&s, 8 * MiB, 0, (void *)0x5));
    CHECK(backed(a, 100 * MiB) && backed(b, 1000) && backed(c, 300 * MiB) && backed(s, 8 * MiB));
    CHECK_HELD_IS_RESERVED(0);
    CHECK_HELD_IS_RESERVED(1);
    CHECK_SIZE(held(1), ==, 512 * MiB);
    CHECK_SIZE(INFO(0).reserved, >=, 100 * MiB + 8 * MiB);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_free_async(s, (void *)0x5));
    CHECK_ALL();
    CHECK_OK(vram_trim(0, 0));                   /* the stream may still use s's memory */
    CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    vram__sim_stream_complete((void *)0x5);      /* (the fake driver's stream, here) */
    CHECK_OK(vram_trim(0, 0));                   /* everything goes back */
    CHECK_SIZE(held(0), ==, 0);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_SIZE(held(1), ==, 512 * MiB);          /* preallocated: kept */
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));      /* and memory comes back on demand */
    CHECK_HELD_IS_RESERVED(0);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());
    check_driver_empty(2);
}

/* Under a tight limit, with random sizes, streams and frees, the driver never holds more than the
 * limit, and holds what vram reserves after every step. */
TEST(cuda_limit_is_never_passed_on_the_driver) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 100 * MiB));
    test_rng rng = rng_make(harness_seed());
    void *live[32] = {0};
    int ooms = 0;
    for (int step = 0; step < 600; step++) {
        int k = (int)rng_below(&rng, 32);
        void *stream = (void *)(uintptr_t)(0x10 + rng_below(&rng, 3));
        if (live[k] != NULL) {
            CHECK_OK(rng_below(&rng, 2) ? vram_free(live[k]) : vram_free_async(live[k], stream));
            live[k] = NULL;
        } else {
            size_t size = rng_size_log(&rng, 256, 40 * MiB);
            vram_status s = rng_below(&rng, 2) ? vram_malloc(&live[k], size, 0)
                                               : vram_malloc_async(&live[k], size, 0, stream);
            if (s == VRAM_ERR_OUT_OF_MEMORY) {
                ooms++;
                live[k] = NULL;
            } else {
                CHECK_OK(s);
                CHECK(backed(live[k], size));
            }
        }
        CHECK_SIZE(held(0), <=, 100 * MiB);
        CHECK_HELD_IS_RESERVED(0);
        if (step % 50 == 0) CHECK_ALL();
    }
    CHECK_INT(ooms, >, 0);
    for (int k = 0; k < 32; k++) CHECK_OK(vram_free(live[k]));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* ---- the driver failing: test_driver_fail.c's and test_oom.c's twins ----------------------------- */

TEST(cuda_driver_fail_mid_growth) {
    use_sim("16GiB");
    plan("cuMemCreate:4+:CUDA_ERROR_OUT_OF_MEMORY");   /* the card is full after 3 pieces */
    CHECK_OK(vram_set_memory_growth(0, 1));
    enum { MAX = 256 };
    void *blocks[MAX];
    int n = 0;
    vram_status s = VRAM_OK;
    while (n < MAX) {
        s = vram_malloc(&blocks[n], 32 * MiB, 0);
        CHECK_ALL();
        if (s != VRAM_OK) break;
        n++;
    }
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
    CHECK_ERROR_CONTAINS("cuMemCreate(");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
    CHECK_INT(n, <, MAX);
    vram_memory_info info = INFO(0);
    CHECK_INFO_SANE(info);
    CHECK_U64(info.num_ooms, ==, 1);
    CHECK_SIZE(info.current, ==, (size_t)n * 32 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    void *p = NULL;                                      /* a request that needs growth fails the same way */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * GiB, 0));
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_ALL();
    if (n > 0) {                                         /* memory already held is still handed out */
        CHECK_OK(vram_free(blocks[n - 1]));
        CHECK_OK(vram_malloc(&blocks[n - 1], 32 * MiB, 0));
    }
    CHECK_SIZE(INFO(0).reserved, ==, info.reserved);
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

TEST(cuda_driver_fail_mid_growth_several_logical_devices) {
    use_sim("16GiB");
    plan("cuMemCreate:6+:CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_OK(vram_set_memory_growth(0, 1));
    vram_logical_device_configuration two[2] = {{4096}, {4096}};
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    enum { MAX = 256 };
    void *blocks[MAX];
    int n = 0, failures = 0;
    for (int i = 0; i < MAX && failures < 4; i++) {
        vram_status s = vram_malloc(&blocks[n], 16 * MiB, i % 2);
        CHECK_ALL();
        if (s == VRAM_OK) {
            n++;
        } else {
            CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, s);
            CHECK_ERROR_CONTAINS("cuMemCreate(");
            CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
            failures++;
        }
    }
    CHECK_INT(failures, ==, 4);
    CHECK_SIZE(held(0), ==, INFO(0).reserved + INFO(1).reserved);
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_SIZE(INFO(0).current + INFO(1).current, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

TEST(cuda_driver_fail_at_start_without_growth) {
    use_sim("16GiB");
    plan("cuMemAlloc_v2:1+:CUDA_ERROR_OUT_OF_MEMORY,cuMemCreate:1+:CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_init());
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_SIZE(held(0), ==, 0);
    check_counters_balanced();
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_init());   /* trying again fails the same way */
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_SIZE(held(0), ==, 0);
}

TEST(cuda_driver_fail_at_start_of_second_logical_device) {
    use_sim("16GiB");
    plan("cuMemAlloc_v2:2+:CUDA_ERROR_OUT_OF_MEMORY");
    vram_logical_device_configuration two[2] = {{8192}, {8192}};   /* the whole card */
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_init());
    CHECK_ERROR_CONTAINS("cuMemAlloc(");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_U64(sim_counters().mem_alloc, ==, 1);         /* the first logical device's 8 GiB went back */
    CHECK_SIZE(held(0), ==, 0);
    check_counters_balanced();
}

TEST(cuda_driver_fail_at_start_with_growth_is_fine) {
    use_sim("16GiB");
    plan("cuMemCreate:1+:CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());   /* growth takes nothing at start */
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * MiB, 0));
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_ALL();
    CHECK_SIZE(held(0), ==, 0);
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

TEST(cuda_oom_card_full_shared_by_two_logical_devices) {
    use_sim("16GiB");
    plan("cuMemCreate:5+:CUDA_ERROR_OUT_OF_MEMORY");
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
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_U64(INFO(0).num_ooms + INFO(1).num_ooms, ==, 1);
    CHECK_ALL();
    for (int i = 0; i < n; i++) CHECK_OK(vram_free(blocks[i]));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* ---- threads ------------------------------------------------------------------------------------- */

typedef struct backend_worker {
    int id;
    int failures;
} backend_worker;

/* Stream-ordered blocks on the thread's own stream and plain ones, freed at once or on the stream. */
static void *backend_worker_main(void *arg) {
    backend_worker *w = arg;
    void *stream = (void *)(uintptr_t)(0x1000 + w->id);
    void *live[8] = {0};
    for (int op = 0; op < 200; op++) {
        int k = op % 8;
        if (live[k] != NULL) {
            if ((op & 1 ? vram_free_async(live[k], stream) : vram_free(live[k])) != VRAM_OK) w->failures++;
            live[k] = NULL;
        } else {
            size_t size = (size_t)(1 + (op * 7919 + w->id) % 3000) * 1024;
            vram_status s = op & 2 ? vram_malloc_async(&live[k], size, w->id % 2, stream)
                                   : vram_malloc(&live[k], size, w->id % 2);
            if (s != VRAM_OK || !backed(live[k], size)) w->failures++;
        }
        if (op % 50 == 0) vram__sim_stream_complete(stream);
    }
    for (int k = 0; k < 8; k++)
        if (live[k] != NULL && vram_free(live[k]) != VRAM_OK) w->failures++;
    return NULL;
}

/* Eight threads start the runtime at once (each device's context retained once) and share the backend
 * (its spare events, its counters) on two cards and eight streams. */
TEST(cuda_threads_share_the_backend) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    enum { T = 8 };
    pthread_t th[T];
    backend_worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (backend_worker){.id = i};
        CHECK(pthread_create(&th[i], NULL, backend_worker_main, &w[i]) == 0);
    }
    for (int i = 0; i < T; i++) CHECK(pthread_join(th[i], NULL) == 0);
    for (int i = 0; i < T; i++) CHECK_INT(w[i].failures, ==, 0);
    CHECK_ALL();
    for (int i = 0; i < T; i++) vram__sim_stream_complete((void *)(uintptr_t)(0x1000 + i));
    CHECK_OK(vram_trim(0, 0));
    CHECK_OK(vram_trim(1, 0));
    CHECK_SIZE(held(0) + held(1), ==, 0);
    CHECK_OK(vram_shutdown());
    check_driver_empty(2);
}

/* ---- sharing memory with other processes ---------------------------------------------------------- */

/* Runs `body` in a child process; its exit status. */
static int in_child(int (*body)(const void *), const void *arg) {
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) _exit(body(arg));
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

typedef struct shared_block {
    unsigned char handle[512];
    size_t length, offset, size;
} shared_block;

/* The receiver: opens the handle (the driver's import), finds the memory behind it, holds nothing more
 * of the card itself, closes it. */
static int receive(const void *arg) {
    const shared_block *b = arg;
    void *there = NULL;
    size_t before = held(0);
    if (vram_ipc_open(0, b->handle, b->length, &there) != VRAM_OK) {
        printf("  child: vram_ipc_open: %s\n", vram_last_error());
        return 2;
    }
    if (!backed((char *)there + b->offset, b->size)) return 3;
    if (held(0) != before) return 4;              /* the exporter's memory */
    if (vram_ipc_close(there) != VRAM_OK) return 5;
    return vram_ipc_close(there) == VRAM_ERR_INVALID_POINTER ? 0 : 6;
}

TEST(cuda_ipc_growth_memory_in_this_and_another_process) {
    use_sim_growth(1 * GiB, "map_ahead_mb:0,small_pool_kb:0,extent_mb:4");
    void *a = NULL, *there = NULL;
    shared_block b = {.size = 6 * MiB};
    CHECK_OK(vram_malloc(&a, b.size, 0));
    CHECK_OK(vram_ipc_export(a, b.handle, sizeof b.handle, &b.length, &b.offset));
    CHECK_OK(vram_ipc_open(0, b.handle, b.length, &there));       /* in this process too */
    CHECK_PTR((char *)there + b.offset, !=, a);
    CHECK(backed((char *)there + b.offset, b.size));
    CHECK_HELD_IS_RESERVED(0);                                    /* nothing more held */
    CHECK_OK(vram_ipc_close(there));
    CHECK_INT(in_child(receive, &b), ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(held(0), ==, 0);                                   /* the imports' references went */
    CHECK_OK(vram_shutdown());
    CHECK_SIZE(held(0), ==, 0);                  /* (the counters count the imports' releases too) */
    CHECK_SIZE(events(), ==, 0);
}

/* A preallocated pool's plain region goes through the driver's own IPC (cuIpcGetMemHandle): another
 * process opens it; this one cannot (CUDA_ERROR_INVALID_CONTEXT, as the driver answers). */
TEST(cuda_ipc_plain_region) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {64};
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *a = NULL, *there = NULL;
    shared_block b = {.size = 1 * MiB};
    CHECK_OK(vram_malloc(&a, b.size, 0));
    CHECK_OK(vram_ipc_export(a, b.handle, sizeof b.handle, &b.length, &b.offset));
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_ipc_open(0, b.handle, b.length, &there));
    CHECK_ERROR_CONTAINS("cuIpcOpenMemHandle on device 0: CUDA_ERROR_INVALID_CONTEXT");
    CHECK_INT(in_child(receive, &b), ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* A device that cannot share memory: growth goes on with memory created unexportable (the driver
 * refused exportable memory once), and an export says why it cannot. */
TEST(cuda_memory_not_shareable) {
    use_sim_growth(1 * GiB, "");
    set_env("FAKE_CUDA_SHAREABLE", "off");
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 6 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 60 * MiB, 0));
    CHECK_HELD_IS_RESERVED(0);
    unsigned char handle[512];
    size_t length = 0, offset = 0;
    CHECK_STATUS(VRAM_ERR_UNSUPPORTED, vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    CHECK_ERROR_CONTAINS("cannot export memory to other processes");
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* A driver without virtual memory management: growth by plain regions, vmm:true refused by name. */
/* overflow:host places host memory with VMM on the fake (cuMemCreate on a host location: the card's
 * bytes do not grow, no pinned host memory is taken); without VMM the backend falls back to pinned
 * mapped memory (cuMemHostAlloc with DEVICEMAP): the fake then holds exactly the block's bytes of
 * pinned host memory until its free. Nothing is left at the shutdown either way. */
TEST(cuda_overflow_host_location_and_its_fallback) {
    fake_cuda_host_held_fn *host_held = (fake_cuda_host_held_fn *)harness_fake("fake_cuda_host_held");
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    CHECK_OK(vram_set_alloc_conf("overflow:host"));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 60 * MiB, 0));              /* on the card */
    size_t card = held(0);
    CHECK_OK(vram_malloc(&b, 10 * MiB, 0));              /* host memory, with VMM */
    CHECK_SIZE(held(0), ==, card);
    CHECK_SIZE(host_held(), ==, 0);
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 10 * MiB);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
    set_env("FAKE_CUDA_VMM", "off");
    CHECK_OK(vram_malloc(&a, 60 * MiB, 0));
    card = held(0);
    CHECK_OK(vram_malloc(&b, 10 * MiB, 0));              /* pinned mapped host memory */
    CHECK_SIZE(held(0), ==, card);
    CHECK_SIZE(host_held(), ==, 10 * MiB);
    CHECK_SIZE(INFO(0).overflow_bytes, ==, 10 * MiB);
    CHECK_ALL();
    CHECK_OK(vram_free(b));
    CHECK_SIZE(host_held(), ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

TEST(cuda_without_vmm) {
    use_sim("16GiB");
    set_env("FAKE_CUDA_VMM", "off");
    vram__device_caps caps = {0};
    CHECK_OK(vram_set_alloc_conf("vmm:true"));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_init());
    CHECK_ERROR_CONTAINS("virtual memory management");
    CHECK_OK(vram_set_alloc_conf(""));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 10 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 100 * MiB, 0));
    CHECK_OK(vram__backend_cuda.device_props(0, NULL, &caps));
    CHECK_INT(caps.vmm_supported, ==, 0);
    CHECK_U64(sim_counters().phys_create, ==, 0);
    CHECK_U64(sim_counters().mem_alloc, >=, 2);
    CHECK_HELD_IS_RESERVED(0);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(held(0), ==, 0);
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* ---- frees the driver refuses ------------------------------------------------------------------- */

/* The driver refusing to give memory back (a release, an unmap, a plain free) must not lift the
 * limit: vram keeps counting what the driver still holds, says which call failed, and gives it back
 * once the driver takes it. */
static void refused_trim(const char *conf, const char *refusal, const char *call) {
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    CHECK_OK(vram_set_alloc_conf(conf));
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    plan(refusal);
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_trim(0, 0));
    CHECK_ERROR_CONTAINS(call);
    CHECK_ERROR_CONTAINS("CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);   /* the driver still holds it: still counted */
    CHECK_HELD_IS_RESERVED(0);
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));       /* the limit's worth again, no more from the driver */
    CHECK_SIZE(held(0), <=, 64 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    void *b = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 2 * MiB, 0));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
    plan(NULL);                                   /* the driver takes it back now */
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_SIZE(held(0), ==, 0);
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

TEST(cuda_refused_release_keeps_its_bytes_counted) {
    use_sim("16GiB");
    refused_trim("map_ahead_mb:0", "cuMemRelease:1+:CUDA_ERROR_ILLEGAL_ADDRESS", "cuMemRelease");
}

TEST(cuda_refused_unmap_keeps_its_bytes_counted) {
    use_sim("16GiB");
    refused_trim("map_ahead_mb:0", "cuMemUnmap:1+:CUDA_ERROR_ILLEGAL_ADDRESS", "cuMemUnmap");
}

/* A refused release whose handle cannot be mapped back either: the handle is kept aside, its bytes
 * still counted, and released at the shutdown. */
TEST(cuda_refused_release_that_cannot_be_mapped_back_stays_counted) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:64"));
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_free(a));
    plan("cuMemRelease:1:CUDA_ERROR_ILLEGAL_ADDRESS,cuMemMap:1:CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_trim(0, 0));
    CHECK_ERROR_CONTAINS("cuMemRelease on device 0: CUDA_ERROR_ILLEGAL_ADDRESS");   /* the refusal, not the map */
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 64 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&a, 2 * MiB, 0));   /* the limit is held by it */
    CHECK_SIZE(held(0), ==, 64 * MiB);
    CHECK_OK(vram_shutdown());                    /* released then */
    check_driver_empty(1);
}

/* Without VMM, growth takes plain regions: a refused cuMemFree keeps the region. */
TEST(cuda_refused_plain_free_keeps_the_region) {
    use_sim("16GiB");
    set_env("FAKE_CUDA_VMM", "off");
    refused_trim("", "cuMemFree_v2:1+:CUDA_ERROR_ILLEGAL_ADDRESS", "cuMemFree");
}

/* Growth without VMM at the limit gives an idle plain region back first (growth_plain_gives_an_idle_
 * region_back_at_the_limit): when the driver refuses that free, the region stays in the pool, counted,
 * the request fails as out of memory, and the region goes back once the driver takes it. */
TEST(cuda_refused_plain_free_at_the_limit_keeps_the_region) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 4 * MiB));
    CHECK_OK(vram_set_alloc_conf("vmm:false"));
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 2 * MiB, 0));
    CHECK_OK(vram_free(a));
    plan("cuMemFree_v2:1:CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&b, 4 * MiB, 0));
    CHECK_ALL();                                  /* the region is still the pool's */
    CHECK_SIZE(INFO(0).reserved, ==, 2 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    CHECK_OK(vram_malloc(&b, 4 * MiB, 0));        /* the driver frees it now: room for 4 MiB */
    CHECK_SIZE(held(0), ==, 4 * MiB);
    CHECK_OK(vram_free(b));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* At the shutdown nothing can be kept: the runtime stops and says what the driver refused. */
TEST(cuda_refused_free_at_shutdown_is_said) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(1, 64 * MiB));   /* card 1: one plain region */
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 10 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 10 * MiB, 1));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    plan("cuMemFree_v2:1:CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_shutdown());
    CHECK_ERROR_CONTAINS("vram_shutdown: the driver refused to free memory");
    CHECK_ERROR_CONTAINS("cuMemFree(");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_INT(vram_is_initialized(), ==, 0);
    CHECK_SIZE(held(0), ==, 0);
    CHECK_SIZE(held(1), ==, 64 * MiB);            /* the driver's until the process ends */
    CHECK_OK(vram_init());                        /* and the runtime starts again */
    CHECK_OK(vram_shutdown());
}
/* ---- every driver call the backend makes, failing ------------------------------------------------ */

#define VRAM_TEST_VERBOSE_SWEEP (getenv("VRAM_TEST_VERBOSE") != NULL)

/* Each call fails at its 1st, 2nd and 3rd call; only the 1st in the sanitizer builds (a forked
 * workload costs seconds there, and the 1st finds every refusal's first path). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SWEEP_CALLS 1
#else
#define SWEEP_CALLS 3
#endif

typedef struct sweep_result {
    unsigned long long injected;   /* driver calls the plan failed */
    char log[2048];            /* step: message, for every failed step */
    int failed_steps;          /* vram calls that failed */
    int named;                 /* ... of which named the call and the driver's error */
    int unnamed;               /* ... of which named no driver error */
    int refused_free;          /* ... of which said that the driver refused to free memory */
    int unchecked;             /* vram_check failures */
    size_t held_after[2];      /* what the driver holds after the shutdown */
    size_t events_after;
} sweep_result;

#define sweep_step(r, s, call) sweep_step_at(r, s, call, __LINE__)
static void sweep_step_at(sweep_result *r, vram_status s, const char *call, int line) {
    if (s != VRAM_OK) {
        const char *e = vram_last_error();
        size_t used = strlen(r->log);
        snprintf(r->log + used, sizeof r->log - used, "\n      line %d: %s: %.150s", line, vram_status_name(s), e);
        r->failed_steps++;
        if (strstr(e, call) != NULL && strstr(e, "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"))
            r->named++;
        if (strstr(e, "CUDA_ERROR_") == NULL) r->unnamed++;
        if (strstr(e, "cuMemFree") || strstr(e, "cuMemRelease") || strstr(e, "cuMemUnmap") ||
            strstr(e, "cuMemAddressFree"))
            r->refused_free = 1;
    }
    if (vram_is_initialized() && vram_check(-1) != VRAM_OK) r->unchecked++;
}

/* A program's life on two cards (card 0 grows under 256 MiB, card 1 preallocates 64 MiB): listing,
 * start, plain and stream-ordered blocks on two streams, sharing with itself through IPC, frees, a
 * trim and the shutdown. */
static void sweep_workload(sweep_result *r, const char *call) {
    vram_physical_device devs[2];
    int n = 0;
    sweep_step(r, vram_list_physical_devices(devs, 2, &n), call);
    sweep_step(r, vram_set_memory_growth(0, 1), call);
    sweep_step(r, vram_set_memory_limit(0, 256 * MiB), call);
    sweep_step(r, vram_set_memory_limit(1, 64 * MiB), call);
    sweep_step(r, vram_init(), call);
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *there = NULL;
    sweep_step(r, vram_malloc(&a, 10 * MiB, 0), call);
    sweep_step(r, vram_malloc(&b, 1000, 0), call);
    sweep_step(r, vram_malloc(&c, 1 * MiB, 1), call);
    sweep_step(r, vram_malloc_async(&d, 4 * MiB, 0, (void *)0x7), call);
    if (d != NULL && vram_free_async(d, (void *)0x7) != VRAM_OK) {
        sweep_step(r, VRAM_ERR_DRIVER, call);
        sweep_step(r, vram_free(d), call);       /* a refused free leaves the block live */
    }
    sweep_step(r, vram_malloc_async(&e, 4 * MiB, 0, (void *)0x8), call);
    unsigned char handle[512];
    size_t length = 0, offset = 0;
    if (a != NULL) {
        vram_status s = vram_ipc_export(a, handle, sizeof handle, &length, &offset);
        sweep_step(r, s, call);
        if (s == VRAM_OK) {
            s = vram_ipc_open(0, handle, length, &there);
            sweep_step(r, s, call);
            if (s == VRAM_OK) sweep_step(r, vram_ipc_close(there), call);
        }
    }
    if (c != NULL) sweep_step(r, vram_ipc_export(c, handle, sizeof handle, &length, &offset), call);
    void *big = NULL;                            /* needs d's memory back: waits for stream 0x7 */
    vram_status s = vram_malloc(&big, 240 * MiB, 0);
    sweep_step(r, s == VRAM_ERR_OUT_OF_MEMORY && strstr(vram_last_error(), "limit") ? VRAM_OK : s, call);
    void *live[] = {a, b, c, e, big};
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] != NULL) sweep_step(r, vram_free(live[i]), call);
    vram__sim_stream_complete((void *)0x7);
    vram__sim_stream_complete((void *)0x8);
    if (vram_is_initialized()) sweep_step(r, vram_trim(0, 0), call);
    sweep_step(r, vram_shutdown(), call);
    r->held_after[0] = held(0);
    r->held_after[1] = held(1);
    r->events_after = events();
    r->injected = ((fake_cuda_failed_fn *)harness_fake("fake_cuda_failed"))();
}

/* Runs the workload in a child process with the Nth call of `symbol` failing. */
static sweep_result sweep_run(const char *symbol, int nth) {
    sweep_result r;
    memset(&r, 0, sizeof r);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        char spec[128];
        snprintf(spec, sizeof spec, "%s:%d:CUDA_ERROR_ILLEGAL_ADDRESS", symbol, nth);
        use_sim("2x16GiB");
        plan(spec);
        char call[64];
        snprintf(call, sizeof call, "%s", symbol);
        char *v2 = strstr(call, "_v2");
        if (v2 != NULL) *v2 = '\0';              /* the backend names cuMemAlloc_v2 "cuMemAlloc" */
        sweep_workload(&r, call);
        ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    if (got != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        harness_fail(__FILE__, __LINE__, "the workload with the call %d of %s failing died (status 0x%x)", nth,
                     symbol, status);
    return r;
}

/* A refusal the library may absorb, and why (it goes on without naming it). */
static const char *absorbed(const char *call) {
    if (strcmp(call, "cuDeviceGetAttribute") == 0 || strcmp(call, "cuMemGetAllocationGranularity") == 0)
        return "probing virtual memory management: the device goes on with plain memory";
    if (strcmp(call, "cuEventQuery") == 0) return "a stream not known to be done yet: asked again or waited for";
    if (strcmp(call, "cuEventSynchronize") == 0) return "a wait that cannot be made (vram_trim's documented case)";
    return NULL;
}

/* ---- sleep and wake ------------------------------------------------------------------------------- */

/* A tag's memory goes back to the driver at the sleep and is taken again at the wake, under the same
 * addresses; the driver holds exactly what vram reserves throughout. */
TEST(cuda_sleep_gives_the_driver_its_memory_back) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    void *w = NULL, *u = NULL;
    CHECK_OK(vram_set_tag("w"));
    CHECK_OK(vram_malloc(&w, 16 * MiB, 0));
    CHECK_OK(vram_set_tag(NULL));
    CHECK_OK(vram_malloc(&u, 4 * MiB, 0));
    CHECK_SIZE(held(0), ==, 20 * MiB);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_SIZE(held(0), ==, 4 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    CHECK(!backed(w, 16 * MiB) && backed(u, 4 * MiB));
    CHECK_ALL();
    CHECK_OK(vram_wake(0, "w"));
    CHECK_SIZE(held(0), ==, 20 * MiB);
    CHECK(backed(w, 16 * MiB));
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_free(u));
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* The driver refuses an unmap at the sleep: the tag sleeps all the same (its blocks marked, the rest of
 * its memory given back), the refusal is said, and what the driver kept stays counted and is used again
 * by the wake. */
TEST(cuda_sleep_refused_unmap_is_said_and_counted) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    void *w = NULL;
    CHECK_OK(vram_set_tag("w"));
    CHECK_OK(vram_malloc(&w, 8 * MiB, 0));
    CHECK_OK(vram_set_tag(NULL));
    plan("cuMemUnmap:1:CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_ERROR_CONTAINS("sleeps, but the driver kept some of its memory (still counted)");
    CHECK_ERROR_CONTAINS("cuMemUnmap");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 8 * MiB);
    CHECK_SIZE(held(0), ==, 2 * MiB);                              /* one granule kept */
    CHECK_HELD_IS_RESERVED(0);
    CHECK_ALL();
    CHECK_OK(vram_wake(0, "w"));
    CHECK_SIZE(held(0), ==, 8 * MiB);
    CHECK_HELD_IS_RESERVED(0);
    CHECK_ALL();
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_shutdown());
    check_driver_empty(1);
}

/* VRAM_SLEEP_OFFLOAD through the driver's pinned host memory and copies (cuMemHostAlloc,
 * cuMemcpyDtoH_v2, cuMemcpyHtoD_v2): a refusal of any of them is said with the call and the driver's
 * error, and changes nothing (a sleep leaves the blocks awake and backed, a wake leaves them asleep and
 * the driver holding none of their memory); the pinned block kept after the wake goes back at the
 * shutdown. */
static size_t host_held(void) {
    return ((fake_cuda_host_held_fn *)harness_fake("fake_cuda_host_held"))();
}

TEST(cuda_sleep_offload_through_the_drivers_copies) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    void *w = NULL;
    CHECK_OK(vram_set_tag("w"));
    CHECK_OK(vram_malloc(&w, 4 * MiB, 0));
    CHECK_OK(vram_set_tag(NULL));
    plan("cuMemHostAlloc:1:CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("cuMemHostAlloc");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK(backed(w, 4 * MiB));
    CHECK_ALL();
    plan("cuMemcpyDtoH_v2:1:CUDA_ERROR_LAUNCH_FAILED");
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("cuMemcpyDtoH");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_LAUNCH_FAILED");
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK(backed(w, 4 * MiB));
    CHECK_SIZE(host_held(), ==, 0);                                 /* the refused sleep's block went back */
    CHECK_ALL();
    plan(NULL);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 4 * MiB);
    CHECK_SIZE(host_held(), ==, 4 * MiB);
    CHECK_SIZE(held(0), ==, 0);
    CHECK_ALL();
    plan("cuMemcpyHtoD_v2:1:CUDA_ERROR_LAUNCH_FAILED");
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_wake(0, "w"));
    CHECK_ERROR_CONTAINS("cuMemcpyHtoD");
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 4 * MiB);
    CHECK_SIZE(held(0), ==, 0);                                     /* what the wake mapped went back */
    CHECK_ALL();
    plan(NULL);
    CHECK_OK(vram_wake(0, "w"));
    CHECK(backed(w, 4 * MiB));
    CHECK_HELD_IS_RESERVED(0);
    CHECK_SIZE(INFO(0).host_kept_bytes, ==, 4 * MiB);
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    CHECK_SIZE(host_held(), ==, 0);
    check_driver_empty(1);
}

/* Each driver call the backend makes, failing at its 1st, 2nd and 3rd call in the workload (with an
 * error the library's own table does not name, so that the name comes from cuGetErrorName): no crash,
 * vram_check passes after every step, every failed step names a driver error and the call that failed
 * names its own, and after the shutdown the driver holds nothing and no event, unless a step said
 * that it refused to free memory. */
TEST(cuda_every_driver_call_fails_cleanly) {
    static const char *const calls[] = {
        "cuDeviceGetName", "cuDeviceGetUuid_v2", "cuDeviceGetPCIBusId", "cuDeviceTotalMem_v2",
        "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain", "cuCtxPushCurrent_v2", "cuMemGetInfo_v2",
        "cuMemGetAllocationGranularity", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAddressReserve",
        "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
        "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle", "cuIpcGetMemHandle",
        "cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        int injected = 0;
        for (int nth = 1; nth <= SWEEP_CALLS; nth++) {
            sweep_result r = sweep_run(calls[i], nth);
            if (VRAM_TEST_VERBOSE_SWEEP)
                printf("  %-32s %d: injected %llu, %d failed, %d named, held %zu %zu, events %zu%s\n", calls[i], nth,
                       r.injected, r.failed_steps, r.named, r.held_after[0], r.held_after[1], r.events_after, r.log);
            injected += r.injected > 0;
            if (r.unchecked > 0 || r.unnamed > 0 ||
                (r.injected > 0 && r.named == 0 && absorbed(calls[i]) == NULL) ||
                ((r.held_after[0] | r.held_after[1] | r.events_after) != 0 && !r.refused_free))
                harness_fail(__FILE__, __LINE__,
                             "%s failing at its call %d: %d vram_check failures, %d failures without a driver "
                             "error's name, %d naming it (of %d failed steps); after the shutdown the driver "
                             "holds %zu + %zu bytes and %zu events:%s", calls[i], nth, r.unchecked, r.unnamed,
                             r.named, r.failed_steps, r.held_after[0], r.held_after[1], r.events_after, r.log);
        }
        if (injected == 0) harness_fail(__FILE__, __LINE__, "the workload never calls %s", calls[i]);
    }
}
