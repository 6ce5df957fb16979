/*
 * gpu_test.c: the runtime's semantics on a real GPU through the CUDA backend.
 *
 * Skipped (exit 77) where there is no usable GPU, so it is part of every test run but only does
 * work on a GPU machine. Everything vram reports is checked against the driver itself: memory is
 * written and read back with cuMemsetD8/cuMemcpyDtoH, the owning card comes from
 * cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), and `reserved` is compared with the
 * drop in cuMemGetInfo's free memory.
 */
#include <stdlib.h>

#include "gpu_common.h"

static size_t driver_free(void) {
    return gpu_card_free(0);
}

/* The memory works: write a pattern with the driver, read it back, and find the owning card. */
static void check_usable(void *p, size_t size) {
    unsigned long long d = (unsigned long long)(size_t)p;
    unsigned char head[4096], tail[4096];
    size_t n = size < sizeof head ? size : sizeof head;
    CHECK(cu.cuMemsetD8(d, 0xab, size) == 0);
    CHECK(cu.cuMemcpyDtoH(head, d, n) == 0);
    CHECK(cu.cuMemcpyDtoH(tail, d + size - n, n) == 0);
    CHECK(head[0] == 0xab && head[n - 1] == 0xab && tail[0] == 0xab && tail[n - 1] == 0xab);
    int ordinal = -1;
    CHECK(cu.cuPointerGetAttribute(&ordinal, 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */, d) == 0);
    CHECK(ordinal == 0);
}

static void test_listing(void) {
    vram_physical_device dev[8];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(dev, 8, &n));
    CHECK(n >= 1 && !vram_is_initialized());
    CHECK(strstr(dev[0].product, "NVIDIA") != NULL && strncmp(dev[0].uuid, "GPU-", 4) == 0);
    CHECK(dev[0].total_bytes > GiB && dev[0].compute_major >= 7);
    printf("device 0: %s, %zu bytes, compute %d.%d, %s, %s\n", dev[0].product, dev[0].total_bytes,
           dev[0].compute_major, dev[0].compute_minor, dev[0].pci_bus_id, dev[0].uuid);
}

/* Growth under a 6 GiB limit: reserved follows need, matches the driver, stops at the limit. */
static void test_growth_with_limit(void) {
    int only0 = 0;
    CHECK_OK(vram_set_visible_devices(&only0, 1));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 6 * GiB));
    CHECK_OK(vram_init());
    size_t before = driver_free();
    CHECK(reserved_of(0) == 0);
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&a, GiB, 0));
    CHECK_OK(vram_malloc(&b, 1000, 0));
    size_t reserved = reserved_of(0);
    CHECK(reserved >= GiB + 256 && reserved <= GiB + 2 * MiB + 64 * MiB);   /* + map-ahead */
    CHECK(near(before - driver_free(), reserved, 8 * MiB));
    check_usable(a, GiB);
    check_usable(b, 1000);
    CHECK(vram_malloc(&c, 5 * GiB + 512 * MiB, 0) == VRAM_ERR_OUT_OF_MEMORY);
    CHECK(strstr(vram_last_error(), "vram_set_memory_limit") != NULL);
    CHECK(reserved_of(0) <= 6 * GiB);
    CHECK(vram_free(b) == VRAM_OK && vram_free(b) == VRAM_ERR_INVALID_POINTER);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_check(-1));
    CHECK_OK(vram_trim(0, 0));                 /* everything is free: all of it goes back */
    CHECK(reserved_of(0) == 0);
    CHECK(near(driver_free(), before, 8 * MiB));
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));    /* and comes back on demand */
    check_usable(a, 64 * MiB);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_shutdown());
    CHECK(near(driver_free(), before, 8 * MiB));
}

/* Idle extents moved under a block (hold_large_mb) on the real driver: the same physical memory,
 * unmapped in a hole and mapped under the new block, works there, and the driver's free memory shows
 * nothing created or released. */
static void test_moved_extents(void) {
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0,extent_mb:64,hold_large_mb:8"));
    CHECK_OK(vram_init());
    void *a = NULL, *b = NULL, *big = NULL;
    CHECK_OK(vram_malloc(&a, 64 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 2 * MiB, 0));
    check_usable(a, 64 * MiB);
    CHECK_OK(vram_free(a));                    /* an idle 64 MiB extent */
    vram_memory_info before;
    CHECK_OK(vram_get_memory_info(0, &before));
    size_t free_before = driver_free();
    CHECK_OK(vram_malloc(&big, 96 * MiB, 0));  /* fits no hole: a's extent moves under it */
    vram_memory_info after;
    CHECK_OK(vram_get_memory_info(0, &after));
    CHECK(after.num_driver_moves == before.num_driver_moves + 1);
    CHECK(after.num_driver_frees == before.num_driver_frees);
    CHECK(after.reserved == before.reserved + 32 * MiB);
    CHECK(near(free_before - driver_free(), 32 * MiB, 8 * MiB));
    check_usable(big, 96 * MiB);
    check_usable(b, 2 * MiB);
    CHECK_OK(vram_free(big));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_check(-1));
    CHECK_OK(vram_shutdown());
    CHECK_OK(vram_set_alloc_conf(""));
}

/* Without growth the limit is taken at start, as one block the driver sees go. */
static void test_preallocated_limit(void) {
    CHECK_OK(vram_set_memory_growth(0, 0));
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    size_t before = driver_free();
    CHECK_OK(vram_init());
    CHECK(reserved_of(0) == 4 * GiB);
    CHECK(near(before - driver_free(), 4 * GiB, 8 * MiB));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 3 * GiB, 0));
    check_usable(p, 3 * GiB);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_shutdown());
}

/* TensorFlow's default: free memory minus 1800 MiB (compute 9.x) taken at start. */
static void test_default_preallocation(void) {
    CHECK_OK(vram_set_memory_limit(0, 0));
    size_t before = driver_free();
    CHECK_OK(vram_init());
    size_t reserved = reserved_of(0);
    printf("default preallocation: %zu bytes of %zu free (free - reserved = %zu MiB)\n", reserved, before,
           (before - reserved) / MiB);
    CHECK(near(before - reserved, 1800 * MiB, 600 * MiB));   /* the first context costs ~550 MiB */
    CHECK_OK(vram_shutdown());
}

/* One card split into two logical devices with growth, on real streams. */
static void test_logical_and_streams(void) {
    vram_logical_device_configuration two[2] = {{1024}, {2048}};
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_logical_device_configuration(0, two, 2));
    vram_logical_device l[4];
    int n = 0;
    CHECK_OK(vram_list_logical_devices(l, 4, &n));
    CHECK(n == 2 && l[0].memory_limit_bytes == GiB && l[1].memory_limit_bytes == 2 * GiB);
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(vram_malloc(&p, 900 * MiB, 0));
    CHECK(vram_malloc(&q, 200 * MiB, 0) == VRAM_ERR_OUT_OF_MEMORY);
    CHECK(strstr(vram_last_error(), "logical device configuration") != NULL);
    CHECK_OK(vram_malloc(&q, 1900 * MiB, 1));
    check_usable(q, 1900 * MiB);
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(q));
    void *s1 = NULL, *s2 = NULL;
    CHECK(cu.cuStreamCreate(&s1, 1) == 0 && cu.cuStreamCreate(&s2, 1) == 0);
    CHECK_OK(vram_malloc_async(&p, 64 * MiB, 0, s1));
    CHECK(cu.cuMemsetD8((unsigned long long)(size_t)p, 1, 64 * MiB) == 0);
    CHECK_OK(vram_free_async(p, s1));
    CHECK_OK(vram_malloc_async(&r, 64 * MiB, 0, s1));
    CHECK(r == p);   /* same stream: reused at once */
    CHECK_OK(vram_free_async(r, s1));
    CHECK(cu.cuCtxSynchronize() == 0);
    CHECK_OK(vram_malloc_async(&q, 64 * MiB, 0, s2));
    CHECK(q == p);   /* the free completed on the GPU: another stream may take it */
    CHECK_OK(vram_free_async(q, s2));
    CHECK_OK(vram_check(-1));
    CHECK(cu.cuCtxSynchronize() == 0);
    CHECK(vram_set_logical_device_configuration(0, NULL, 0) == VRAM_ERR_ALREADY_INITIALIZED);
    CHECK_OK(vram_shutdown());
}

int main(void) {
    int n = 0;
    if (getenv("VRAM_BACKEND") != NULL && strcmp(getenv("VRAM_BACKEND"), "cuda") != 0) {
        printf("SKIP: VRAM_BACKEND=%s; this test runs on the CUDA backend only\n", getenv("VRAM_BACKEND"));
        return SKIP;
    }
    if (vram_list_physical_devices(NULL, 0, &n) != VRAM_OK || gpu_load_driver(1) != 0) {
        printf("SKIP: no usable GPU: %s\n", vram_last_error());
        return SKIP;
    }
    test_listing();
    test_growth_with_limit();
    test_moved_extents();
    test_preallocated_limit();
    test_default_preallocation();
    test_logical_and_streams();
    printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
