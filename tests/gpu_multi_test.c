/*
 * gpu_multi_test.c: the runtime on a machine with two or more real GPUs (issue 6).
 *
 * Skipped (exit 77) with fewer than two usable GPUs. Card 0 is split into two logical devices
 * with memory growth and a 3 GiB card limit; card 1 stays one logical device, preallocated with a
 * 4 GiB limit; then a limit on card 0 only, with growth on both. Checked against the driver
 * itself: the card that owns each block (cuPointerGetAttribute
 * CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), the bytes each card lost
 * (cuMemGetInfo with that card's context current) against vram's `reserved`, and memory written
 * and read back on both cards.
 */
#include "gpu_common.h"

/* The block is usable and lives on card `want`. */
static void check_on_card(void *p, size_t size, int want) {
    unsigned long long d = (unsigned long long)(size_t)p;
    unsigned char head[256] = {0};
    int ordinal = -1;
    cu.cuCtxSetCurrent(gpu_ctx[want]);
    CHECK(cu.cuMemsetD8(d, 0x5a, size) == 0);
    CHECK(cu.cuMemcpyDtoH(head, d, sizeof head) == 0 && head[0] == 0x5a && head[255] == 0x5a);
    CHECK(cu.cuPointerGetAttribute(&ordinal, 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */, d) == 0);
    CHECK(ordinal == want);
    printf("block of %zu MiB: card %d (expected %d)\n", size / MiB, ordinal, want);
}

/* A limit on card 0 only, growth on both: card 0 stops at its limit, card 1 does not. */
static void limit_on_one_card_only(void) {
    CHECK_OK(vram_set_logical_device_configuration(0, NULL, 0));   /* card 0 unsplit again */
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    CHECK_OK(vram_set_memory_limit(0, 2 * GiB));
    CHECK_OK(vram_set_memory_limit(1, 0));
    void *a = NULL, *b = NULL;
    CHECK(vram_malloc(&a, 3 * GiB, 0) == VRAM_ERR_OUT_OF_MEMORY);   /* card 0: limited to 2 GiB */
    CHECK(strstr(vram_last_error(), "vram_set_memory_limit(0") != NULL);
    CHECK_OK(vram_malloc(&b, 3 * GiB, 1));                         /* card 1: no limit */
    check_on_card(b, 3 * GiB, 1);
    vram_memory_info i0, i1;
    CHECK_OK(vram_get_memory_info(0, &i0));
    CHECK_OK(vram_get_memory_info(1, &i1));
    printf("limit on card 0 only: card 0 limit %zu MiB, card 1 limit %zu MiB (free memory minus the reserve)\n",
           i0.limit / MiB, i1.limit / MiB);
    CHECK(i0.limit == 2 * GiB && i1.limit > 100 * GiB);
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_shutdown());
}

int main(void) {
    vram_physical_device dev[8];
    int n = 0;
    if (vram_list_physical_devices(dev, 8, &n) != VRAM_OK || n < 2 || gpu_load_driver(2) != 0) {
        printf("SKIP: fewer than two usable GPUs (%d): %s\n", n, vram_last_error());
        return SKIP;
    }
    for (int i = 0; i < n && i < 8; i++) {
        printf("%s: %s, %zu bytes, %s, %s\n", dev[i].name, dev[i].product, dev[i].total_bytes, dev[i].pci_bus_id,
               dev[i].uuid);
    }
    CHECK(strcmp(dev[0].uuid, dev[1].uuid) != 0 && strcmp(dev[0].pci_bus_id, dev[1].pci_bus_id) != 0);

    int both[2] = {0, 1};
    vram_logical_device_configuration split[2] = {{1024}, {2048}};
    CHECK_OK(vram_set_visible_devices(both, 2));
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 3 * GiB));
    CHECK_OK(vram_set_logical_device_configuration(0, split, 2));
    CHECK_OK(vram_set_memory_growth(1, 0));
    CHECK_OK(vram_set_memory_limit(1, 4 * GiB));
    size_t free0 = gpu_card_free(0), free1 = gpu_card_free(1);
    vram_logical_device l[4];
    int nl = 0;
    CHECK_OK(vram_list_logical_devices(l, 4, &nl));
    CHECK(nl == 3 && l[0].physical_index == 0 && l[1].physical_index == 0 && l[2].physical_index == 1);
    CHECK(l[0].memory_limit_bytes == GiB && l[1].memory_limit_bytes == 2 * GiB && l[2].memory_limit_bytes == 4 * GiB);
    CHECK(reserved_of(0) == 0 && reserved_of(1) == 0);          /* growth: nothing taken yet */
    CHECK(reserved_of(2) == 4 * GiB);                           /* preallocated at start */
    CHECK(near(free1 - gpu_card_free(1), 4 * GiB, 16 * MiB));

    void *a = NULL, *b = NULL, *c = NULL, *x = NULL;
    CHECK_OK(vram_malloc(&a, 512 * MiB, 0));
    CHECK_OK(vram_malloc(&b, 1536 * MiB, 1));
    CHECK_OK(vram_malloc(&c, 3 * GiB, 2));
    check_on_card(a, 512 * MiB, 0);
    check_on_card(b, 1536 * MiB, 0);
    check_on_card(c, 3 * GiB, 1);
    size_t on0 = reserved_of(0) + reserved_of(1);
    printf("card 0: vram reserved %zu MiB, driver free dropped %zu MiB\n", on0 / MiB, (free0 - gpu_card_free(0)) / MiB);
    CHECK(near(free0 - gpu_card_free(0), on0, 16 * MiB));
    CHECK(vram_malloc(&x, 2 * GiB, 1) == VRAM_ERR_OUT_OF_MEMORY);   /* logical limit 2 GiB, 1.5 used */
    CHECK(vram_malloc(&x, 1536 * MiB, 0) == VRAM_ERR_OUT_OF_MEMORY); /* logical limit 1 GiB */
    CHECK_OK(vram_check(-1));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_shutdown());
    CHECK(near(gpu_card_free(0), free0, 16 * MiB) && near(gpu_card_free(1), free1, 16 * MiB));
    limit_on_one_card_only();
    printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
