/*
 * config_template.c: the usual GPU memory configuration, in tf.config's order, with libvram.
 *
 *   1. list the GPUs (does not start the runtime); stop if there are none
 *   2. make card 0 the only visible one
 *   3. enable memory growth on it (take memory on demand, not the whole card at start)
 *   4. with `--limit`: cap it at 6 GiB
 *   5. start the runtime and print which card is in use
 *   6. allocate 256 MiB, print the memory statistics, free, print them again
 *
 * The 6 GiB cap is applied only when the program is given `--limit`: a fixed cap above a card's
 * memory is VRAM_ERR_CONFLICT, so applying it always would make the template fail on small (or
 * small simulated) cards. Every call's status is checked; a failure prints the status name and
 * vram_last_error() and exits 1.
 *
 * Build: cc -std=c11 config_template.c -lvram   Run: ./config_template [--limit]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vram.h>

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

/* Prints a failed call and returns 1; returns 0 for VRAM_OK. */
static int failed(vram_status s, const char *call) {
    if (s == VRAM_OK) return 0;
    fprintf(stderr, "config_template: %s failed: %s: %s\n", call, vram_status_name(s),
            vram_last_error());
    return 1;
}

static double gib(size_t bytes) { return (double)bytes / (double)GIB; }

/* Step 1: list the GPUs and keep the first one's description. */
static int list_gpus(vram_physical_device *first) {
    vram_physical_device devs[16];
    int count = 0;
    vram_status s = vram_list_physical_devices(devs, 16, &count);
    if (s == VRAM_ERR_NO_DEVICE) {
        fprintf(stderr, "No GPU found: %s\n", vram_last_error());
        return 1;
    }
    if (failed(s, "vram_list_physical_devices")) return 1;
    if (count < 1) {
        fprintf(stderr, "No GPU found\n");
        return 1;
    }
    printf("%d physical GPU(s):\n", count);
    for (int i = 0; i < count && i < 16; i++)
        printf("  %s  %s  %.2f GiB\n", devs[i].name, devs[i].product, gib(devs[i].total_bytes));
    *first = devs[0];
    return 0;
}

/* Steps 2-4: card 0 only, memory growth, and the optional 6 GiB cap. */
static int configure_card0(int with_limit) {
    const int card = 0;
    if (failed(vram_set_visible_devices(&card, 1), "vram_set_visible_devices")) return 1;
    if (failed(vram_set_memory_growth(card, 1), "vram_set_memory_growth")) return 1;
    if (with_limit && failed(vram_set_memory_limit(card, 6 * GIB), "vram_set_memory_limit"))
        return 1;
    return 0;
}

/* Step 5: starts the runtime (listing logical devices does) and says which card is in use. */
static int print_card_in_use(const vram_physical_device *card) {
    vram_logical_device logical[8];
    int count = 0;
    if (failed(vram_list_logical_devices(logical, 8, &count), "vram_list_logical_devices")) return 1;
    if (count < 1) {
        fprintf(stderr, "config_template: no logical device after configuration\n");
        return 1;
    }
    printf("Using %s (%s), uuid %s, as %s, limit %.2f GiB\n", card->product, card->name,
           card->uuid, logical[0].name, gib(logical[0].memory_limit_bytes));
    return 0;
}

static int print_memory_info(const char *when) {
    vram_memory_info info;
    if (failed(vram_get_memory_info(0, &info), "vram_get_memory_info")) return 1;
    printf("%-16s current %8.1f MiB  peak %8.1f MiB  reserved %8.1f MiB  limit %.2f GiB\n", when,
           (double)info.current / (double)MIB, (double)info.peak / (double)MIB,
           (double)info.reserved / (double)MIB, gib(info.limit));
    return 0;
}

/* Step 6: allocate 256 MiB, look at the statistics, free, look again. */
static int allocate_and_free(void) {
    void *p = NULL;
    if (failed(vram_malloc(&p, 256 * MIB, 0), "vram_malloc(256 MiB)")) return 1;
    int rc = print_memory_info("after malloc:");
    if (failed(vram_free(p), "vram_free")) return 1;
    return rc || print_memory_info("after free:");
}

int main(int argc, char **argv) {
    int with_limit = argc > 1 && strcmp(argv[1], "--limit") == 0;
    if (argc > 2 || (argc == 2 && !with_limit)) {
        fprintf(stderr, "usage: %s [--limit]\n", argv[0]);
        return 2;
    }
    vram_physical_device card0;
    if (list_gpus(&card0) || configure_card0(with_limit) || print_card_in_use(&card0) ||
        allocate_and_free())
        return 1;
    if (failed(vram_shutdown(), "vram_shutdown")) return 1;
    return 0;
}
