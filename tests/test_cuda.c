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
