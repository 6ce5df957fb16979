/*
 * unit_vmm.c: the physical backing of a reserved range (src/pool/vmm.h) on its own, over a fake
 * driver that keeps the truth: which handle is mapped at every granule. It refuses what the real
 * driver would (a map over mapped memory, an unmap that is not one whole handle, a release of a
 * mapped handle) and can fail a call on request. Against it: the granule bitmaps (mapped_bits and
 * touched_bits) through every query (unmapped bytes, both quick tests, the longest mapped run, the
 * run after an address), a granule at each side of every 64-bit word's edge, ranges across them,
 * empty and full maps, mapping ahead, the extents' size limit, the busy counts, and giving back
 * (the largest idle first, outside a range, the idle since the last period), moving idle extents,
 * and a randomized run of all of it.
 *
 * The range is 200 granules of 64 KiB (vmm.c is indifferent to the granule's size): four bitmap
 * words, the last one partial.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/vmm.h"
#include "unit.h"

#define G ((size_t)64 << 10)
#define NG 200
#define FAKE_BASE ((uint64_t)0x7f0000000000ull)
#define MAXH (1 << 16)

/* ---- the fake driver ------------------------------------------------------------------------ */

static struct fake {
    uint32_t map_of[NG];        /* the handle mapped at each granule, 0: none */
    size_t   hsize[MAXH];       /* each handle's size; 0: released (or never made) */
    uint32_t next_handle;
    int      reserved;
    int      fail_create_at, fail_map_at;    /* the nth call from now fails (0: none) */
    uint64_t creates, releases, maps, unmaps;
} fake;

static size_t gran(uint64_t va) {
    return (size_t)((va - FAKE_BASE) / G);
}

static vram_status fake_va_reserve(int dev, size_t size, uint64_t *va) {
    EXPECT(!fake.reserved);
    EXPECT_SIZE(size, ==, NG * G);
    fake.reserved = 1;
    *va = FAKE_BASE;
    return VRAM_OK;
}

static vram_status fake_va_free(int dev, uint64_t va, size_t size) {
    EXPECT(fake.reserved);
    EXPECT_U64(va, ==, FAKE_BASE);
    for (size_t g = 0; g < NG; g++) EXPECT_INT(fake.map_of[g], ==, 0);   /* unmapped first */
    fake.reserved = 0;
    return VRAM_OK;
}

static vram_status fake_phys_create(int dev, size_t size, uint64_t *handle) {
    if (fake.fail_create_at > 0 && --fake.fail_create_at == 0) {
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY");
    }
    EXPECT(size > 0 && size % G == 0);
    EXPECT_INT(fake.next_handle + 1, <, MAXH);
    *handle = ++fake.next_handle;
    fake.hsize[*handle] = size;
    fake.creates++;
    return VRAM_OK;
}

static vram_status fake_phys_release(int dev, uint64_t handle) {
    EXPECT(handle > 0 && handle < MAXH && fake.hsize[handle] != 0);
    for (size_t g = 0; g < NG; g++) EXPECT_U64(fake.map_of[g], !=, handle);   /* unmapped first */
    fake.hsize[handle] = 0;
    fake.releases++;
    return VRAM_OK;
}

static vram_status fake_map(int dev, uint64_t va, size_t size, uint64_t handle) {
    if (fake.fail_map_at > 0 && --fake.fail_map_at == 0) {
        return vram__fail(VRAM_ERR_DRIVER, "cuMemMap: CUDA_ERROR_UNKNOWN");
    }
    EXPECT(handle > 0 && handle < MAXH && fake.hsize[handle] == size);
    EXPECT((va - FAKE_BASE) % G == 0 && va >= FAKE_BASE && gran(va) + size / G <= NG);
    for (size_t g = gran(va); g < gran(va) + size / G; g++) {
        EXPECT_INT(fake.map_of[g], ==, 0);            /* never over mapped memory */
        fake.map_of[g] = (uint32_t)handle;
    }
    fake.maps++;
    return VRAM_OK;
}

static vram_status fake_unmap(int dev, uint64_t va, size_t size) {
    EXPECT((va - FAKE_BASE) % G == 0 && size % G == 0 && gran(va) + size / G <= NG);
    uint32_t h = fake.map_of[gran(va)];
    EXPECT(h != 0);
    EXPECT_SIZE(fake.hsize[h], ==, size);             /* one whole handle */
    for (size_t g = gran(va); g < gran(va) + size / G; g++) {
        EXPECT_INT(fake.map_of[g], ==, h);
        fake.map_of[g] = 0;
    }
    fake.unmaps++;
    return VRAM_OK;
}

static const vram__backend fake_backend = {
    .name = "fake",
    .va_reserve = fake_va_reserve,
    .va_free = fake_va_free,
    .phys_create = fake_phys_create,
    .phys_release = fake_phys_release,
    .map = fake_map,
    .unmap = fake_unmap,
};

/* On a failure: the truth, a character a granule ('.' unmapped, else a letter a handle). */
static void print_map(void *ctx) {
    (void)ctx;
    printf("  mapped: ");
    for (size_t g = 0; g < NG; g++) {
        if (g % 64 == 0 && g > 0) putchar('|');
        putchar(fake.map_of[g] ? (char)('a' + fake.map_of[g] % 26) : '.');
    }
    putchar('\n');
}

static pool_vmm *vmm_new(size_t max_extent_granules) {
    memset(&fake, 0, sizeof fake);
    pool_vmm *v = calloc(1, sizeof *v);
    EXPECT(v != NULL);
    EXPECT_INT(vram__pool_vmm_init(v, &fake_backend, 0, G, NG * G, max_extent_granules * G), ==, VRAM_OK);
    EXPECT_U64(v->base, ==, FAKE_BASE);
    unit_on_failure(print_map, NULL);
    return v;
}

static void vmm_free(pool_vmm *v) {
    pool_vmm_change chg;
    vram__pool_vmm_destroy(v, &chg);
    EXPECT_U64(fake.creates, ==, fake.releases);
    EXPECT(!fake.reserved);
    free(v);
    unit_on_failure(NULL, NULL);
}

static uint64_t at_gran(size_t g) {
    return FAKE_BASE + (uint64_t)g * G;
}

/* Maps granules [g, g + n) as they would be for a block there (no ahead). */
static void acquire(pool_vmm *v, size_t g, size_t n) {
    pool_vmm_change chg;
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(g), n * G, 0, 0, &chg), ==, VRAM_OK);
}

/* Fresh busy counts for the blocks [addr[i], addr[i] + size[i]). */
static void recount(pool_vmm *v, const uint64_t *addr, const size_t *size, int n) {
    vram__pool_vmm_busy_begin(v);
    for (int i = 0; i < n; i++) vram__pool_vmm_busy_add(v, addr[i], size[i]);
    vram__pool_vmm_busy_end(v);
    EXPECT_INT(v->stale, ==, 0);
}

static size_t mapped_granules(void) {
    size_t n = 0;
    for (size_t g = 0; g < NG; g++) n += fake.map_of[g] != 0;
    return n;
}

/* ---- the queries against the truth ---------------------------------------------------------- */

static size_t ref_unmapped(uint64_t addr, size_t size) {
    size_t n = 0;
    for (size_t g = gran(addr); g <= gran(addr + size - 1); g++) n += fake.map_of[g] == 0;
    return n * G;
}

static size_t ref_mapped_run(uint64_t addr, size_t size, uint64_t *at) {
    uint64_t end = addr + size, best_at = addr;
    size_t best = 0;
    for (size_t g = gran(addr); g <= gran(end - 1);) {
        if (fake.map_of[g] == 0) {
            g++;
            continue;
        }
        size_t h = g;
        while (h < NG && fake.map_of[h] != 0) h++;
        uint64_t rs = at_gran(g) > addr ? at_gran(g) : addr, re = at_gran(h) < end ? at_gran(h) : end;
        if (re - rs > best) {
            best = (size_t)(re - rs);
            best_at = rs;
        }
        g = h;
    }
    *at = best_at;
    return best;
}

static size_t ref_run_after(uint64_t from, uint64_t *start) {
    size_t g = gran(from);
    while (g < NG && fake.map_of[g] == 0) g++;
    if (g == NG) return 0;
    size_t h = g;
    while (h < NG && fake.map_of[h] != 0) h++;
    *start = at_gran(g) > from ? at_gran(g) : from;
    return (size_t)(at_gran(h) - *start);
}

/* Every query about [addr, addr + size) says what the truth says. */
static void expect_queries(const pool_vmm *v, uint64_t addr, size_t size) {
    unit_note("the range [0x%" PRIx64 ", +0x%zx): granules %zu..%zu", addr, size, gran(addr), gran(addr + size - 1));
    size_t want = ref_unmapped(addr, size);
    EXPECT_SIZE(pool_vmm_unmapped(v, addr, size), ==, want);          /* the quick tests, then the bitmap */
    EXPECT_SIZE(vram__pool_vmm_unmapped_slow(v, addr, size), ==, want);
    uint64_t at = 0, want_at = 0;
    size_t run = vram__pool_vmm_mapped_run(v, addr, size, &at);
    EXPECT_SIZE(run, ==, ref_mapped_run(addr, size, &want_at));
    EXPECT_U64(at, ==, want_at);
    uint64_t start = 0, want_start = 0;
    size_t after = vram__pool_vmm_run_after(v, addr, &start), want_after = ref_run_after(addr, &want_start);
    EXPECT_SIZE(after, ==, want_after);
    if (want_after != 0) EXPECT_U64(start, ==, want_start);
}

/* All ranges of whole granules [a, b] with a or b next to a word's edge or the range's ends, and
 * some inside granules. */
static void expect_all_queries(const pool_vmm *v) {
    static const size_t edges[] = {0, 1, 2, 62, 63, 64, 65, 66, 126, 127, 128, 129, 190, 191, 192, 193, 197, 198, NG - 1};
    size_t ne = sizeof edges / sizeof edges[0];
    for (size_t i = 0; i < ne; i++) {
        for (size_t b = edges[i]; b < NG; b++) expect_queries(v, at_gran(edges[i]), (b - edges[i] + 1) * G);
        for (size_t a = 0; a <= edges[i]; a++) expect_queries(v, at_gran(a), (edges[i] - a + 1) * G);
        expect_queries(v, at_gran(edges[i]) + G / 2, G / 4);                 /* inside one granule */
        if (edges[i] + 1 < NG) expect_queries(v, at_gran(edges[i]) + G - 256, 512);   /* across an edge */
    }
    EXPECT_SOUND(vram__pool_vmm_check(v, UNIT_WHY));
    unit_note("%s", "");
}

/* ---- empty, full, one granule --------------------------------------------------------------- */

UNIT_TEST(vmm, an_empty_range_has_nothing_mapped) {
    pool_vmm *v = vmm_new(NG);
    EXPECT_SIZE(v->mapped, ==, 0);
    EXPECT_SIZE(v->mapped_prefix, ==, 0);
    EXPECT_SIZE(pool_vmm_unmapped(v, FAKE_BASE, NG * G), ==, NG * G);
    EXPECT_SIZE(pool_vmm_unmapped(v, FAKE_BASE, 1), ==, G);
    uint64_t at = 1;
    EXPECT_SIZE(vram__pool_vmm_mapped_run(v, FAKE_BASE, NG * G, &at), ==, 0);
    EXPECT_U64(at, ==, FAKE_BASE);
    EXPECT_SIZE(vram__pool_vmm_run_after(v, FAKE_BASE, &at), ==, 0);
    EXPECT_SIZE(vram__pool_vmm_run_after(v, FAKE_BASE - 1, &at), ==, 0);      /* outside the range */
    EXPECT_SIZE(vram__pool_vmm_run_after(v, FAKE_BASE + NG * G, &at), ==, 0);
    expect_all_queries(v);
    vmm_free(v);
}

UNIT_TEST(vmm, a_full_range_is_mapped_everywhere) {
    pool_vmm *v = vmm_new(NG);
    acquire(v, 0, NG);
    EXPECT_SIZE(mapped_granules(), ==, NG);
    EXPECT_U64(fake.creates, ==, 1);                  /* one extent: max_extent is the whole range */
    EXPECT_SIZE(v->mapped, ==, NG * G);
    EXPECT_SIZE(v->mapped_prefix, ==, NG * G);
    EXPECT_SIZE(pool_vmm_unmapped(v, FAKE_BASE, NG * G), ==, 0);
    uint64_t at = 0;
    EXPECT_SIZE(vram__pool_vmm_mapped_run(v, FAKE_BASE, NG * G, &at), ==, NG * G);
    EXPECT_SIZE(vram__pool_vmm_run_after(v, at_gran(NG - 1) + 256, &at), ==, G - 256);
    expect_all_queries(v);
    pool_vmm_change chg;
    recount(v, NULL, NULL, 0);
    EXPECT_SIZE(vram__pool_vmm_unmap_idle(v, 1, &chg), ==, NG * G);
    EXPECT_SIZE(chg.unmapped, ==, NG * G);
    EXPECT_U64(chg.releases, ==, 1);
    EXPECT_SIZE(mapped_granules(), ==, 0);
    EXPECT_SIZE(v->mapped_prefix, ==, 0);
    expect_all_queries(v);
    vmm_free(v);
}

/* One granule mapped at each side of each word's edge: it alone, its neighbours not. */
UNIT_TEST(vmm, one_granule_at_each_side_of_a_words_edge) {
    static const size_t at[] = {0, 1, 62, 63, 64, 65, 127, 128, 191, 192, NG - 2, NG - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        pool_vmm *v = vmm_new(NG);
        size_t g = at[i];
        unit_note("granule %zu", g);
        acquire(v, g, 1);
        EXPECT_SIZE(mapped_granules(), ==, 1);
        EXPECT_INT(fake.map_of[g], !=, 0);
        EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(g), G), ==, 0);
        if (g > 0) EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(g - 1), G), ==, G);
        if (g + 1 < NG) EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(g + 1), G), ==, G);
        EXPECT_SIZE(v->mapped_prefix, ==, g == 0 ? G : 0);
        uint64_t start = 0;
        EXPECT_SIZE(vram__pool_vmm_mapped_run(v, FAKE_BASE, NG * G, &start), ==, G);
        EXPECT_U64(start, ==, at_gran(g));
        EXPECT_SIZE(vram__pool_vmm_run_after(v, FAKE_BASE, &start), ==, G);
        EXPECT_U64(start, ==, at_gran(g));
        expect_all_queries(v);
        recount(v, NULL, NULL, 0);
        pool_vmm_change chg;
        EXPECT_SIZE(vram__pool_vmm_unmap_idle(v, G, &chg), ==, G);
        EXPECT_SIZE(mapped_granules(), ==, 0);
        expect_all_queries(v);
        vmm_free(v);
    }
}

/* Everything mapped but one granule, wherever it is (a word's first, last, or any bit): every query
 * sees the hole, and acquire over the whole range maps exactly it. */
UNIT_TEST(vmm, a_hole_of_one_granule_anywhere) {
    for (size_t h = 0; h < NG; h++) {
        pool_vmm *v = vmm_new(NG);
        unit_note("the hole at granule %zu", h);
        if (h > 0) acquire(v, 0, h);
        if (h + 1 < NG) acquire(v, h + 1, NG - h - 1);
        EXPECT_SIZE(mapped_granules(), ==, NG - 1);
        EXPECT_SIZE(v->mapped_prefix, ==, h * G);
        size_t word = h / 64 * 64, word_end = word + 64 < NG ? word + 64 : NG;
        EXPECT_SIZE(pool_vmm_unmapped(v, FAKE_BASE, NG * G), ==, G);
        EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(word), (word_end - word) * G), ==, G);   /* its word */
        EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(h), G), ==, G);
        if (h > word) {                                   /* up to the hole, and a byte into it */
            EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(word), (h - word) * G), ==, 0);
            EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(word), (h - word) * G + 1), ==, G);
        }
        uint64_t at = 0;
        size_t longest = (h > NG - 1 - h ? h : NG - 1 - h) * G;
        EXPECT_SIZE(vram__pool_vmm_mapped_run(v, FAKE_BASE, NG * G, &at), ==, longest);
        EXPECT_U64(at, ==, h >= NG - 1 - h ? FAKE_BASE : at_gran(h + 1));
        if (h + 1 < NG) {
            EXPECT_SIZE(vram__pool_vmm_run_after(v, at_gran(h), &at), ==, (NG - h - 1) * G);
            EXPECT_U64(at, ==, at_gran(h + 1));
        }
        for (size_t a = word; a < word_end; a++) expect_queries(v, at_gran(a), (word_end - a) * G);
        EXPECT_SOUND(vram__pool_vmm_check(v, UNIT_WHY));
        pool_vmm_change chg;
        EXPECT_INT(vram__pool_vmm_acquire(v, FAKE_BASE, NG * G, 0, 0, &chg), ==, VRAM_OK);
        EXPECT_SIZE(chg.mapped, ==, G);
        EXPECT_INT(fake.map_of[h], !=, 0);
        EXPECT_SIZE(v->mapped_prefix, ==, NG * G);
        vmm_free(v);
    }
    unit_note("%s", "");
}

/* Runs across words' edges, mapped one after another so that they touch: each query and each
 * granule's extent stay right. */
UNIT_TEST(vmm, ranges_across_words_edges) {
    static const size_t runs[][2] = {{60, 68}, {63, 65}, {0, 64}, {64, 128}, {127, 129}, {128, 192}, {190, NG},
                                     {65, 127}, {1, 2}, {191, 193}};
    pool_vmm *v = vmm_new(NG);
    size_t before = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        size_t a = runs[i][0], b = runs[i][1], n = 0;
        for (size_t g = a; g < b; g++) n += fake.map_of[g] == 0;
        pool_vmm_change chg;
        EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(a), (b - a) * G), ==, n * G);
        EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(a), (b - a) * G, 0, 0, &chg), ==, VRAM_OK);
        EXPECT_SIZE(chg.mapped, ==, n * G);
        EXPECT_SIZE(mapped_granules(), ==, before + n);
        before += n;
        for (size_t g = a; g < b; g++) EXPECT_INT(fake.map_of[g], !=, 0);
        expect_all_queries(v);
    }
    EXPECT_SIZE(mapped_granules(), ==, NG);            /* {0, 64} ... {190, NG}: all of it */
    EXPECT_SIZE(v->mapped_prefix, ==, NG * G);         /* the prefix reached on over every run */
    vmm_free(v);
}

/* ---- how acquire maps ----------------------------------------------------------------------- */

UNIT_TEST(vmm, ahead_maps_on_past_the_block_to_the_next_mapped_granule) {
    pool_vmm *v = vmm_new(NG);
    acquire(v, 70, 2);                                  /* [70, 72) */
    pool_vmm_change chg;
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(60) + 100 * 256, G, 20 * G, 0, &chg), ==, VRAM_OK);
    /* the block's granule 60 and ahead up to 69: stops at the mapped 70 */
    for (size_t g = 60; g < 72; g++) EXPECT_INT(fake.map_of[g], !=, 0);
    EXPECT_INT(fake.map_of[59], ==, 0);
    EXPECT_INT(fake.map_of[72], ==, 0);
    EXPECT_SIZE(chg.mapped, ==, 10 * G);
    EXPECT_U64(chg.creates, ==, 1);
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(NG - 3), G, 20 * G, 0, &chg), ==, VRAM_OK);   /* to the range's end */
    EXPECT_SIZE(chg.mapped, ==, 3 * G);
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(100), G, 0, 0, &chg), ==, VRAM_OK);
    EXPECT_SIZE(chg.mapped, ==, G);
    EXPECT_INT(fake.map_of[101], ==, 0);
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(100), G, 5 * G, 0, &chg), ==, VRAM_OK);     /* mapped: nothing */
    EXPECT_SIZE(chg.mapped, ==, 0);
    EXPECT_U64(chg.creates, ==, 0);
    expect_all_queries(v);
    vmm_free(v);
}

/* ...and mapping ahead only lengthens the block's last extent, up to that size. */
UNIT_TEST(vmm, extents_are_at_most_max_extent) {
    pool_vmm *v = vmm_new(3);
    pool_vmm_change chg;
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(10), 10 * G, 4 * G, 0, &chg), ==, VRAM_OK);
    EXPECT_U64(chg.creates, ==, 4);                     /* [10,13) [13,16) [16,19) [19,22) */
    EXPECT_SIZE(chg.mapped, ==, 12 * G);
    for (size_t g = 10; g < 22; g++) EXPECT_INT(fake.map_of[g], !=, 0);
    EXPECT_INT(fake.map_of[22], ==, 0);
    for (int32_t e = 0; e < v->ext_count; e++) EXPECT_SIZE(v->ext[e].size, <=, 3 * G);
    EXPECT_INT(fake.map_of[10], ==, fake.map_of[12]);
    EXPECT_INT(fake.map_of[12], !=, fake.map_of[13]);
    expect_all_queries(v);
    vmm_free(v);
}

/* A caller's `largest` (a load under one-granule extents: backing.c) stands for max_extent in that
 * call only. */
UNIT_TEST(vmm, largest_of_a_call_stands_for_max_extent) {
    pool_vmm *v = vmm_new(1);
    pool_vmm_change chg;
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(10), 10 * G, 0, 4 * G, &chg), ==, VRAM_OK);
    EXPECT_U64(chg.creates, ==, 3);                     /* [10,14) [14,18) [18,20) */
    EXPECT_INT(fake.map_of[10], ==, fake.map_of[13]);
    EXPECT_INT(fake.map_of[13], !=, fake.map_of[14]);
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(30), 3 * G, 0, 0, &chg), ==, VRAM_OK);
    EXPECT_U64(chg.creates, ==, 3);                     /* max_extent again: one granule each */
    EXPECT_INT(fake.map_of[30], !=, fake.map_of[31]);
    uint64_t addr[] = {at_gran(30)};
    size_t size[] = {3 * G};
    recount(v, addr, size, 1);                          /* [10, 20) idle: given back */
    EXPECT_SIZE(vram__pool_vmm_unmap_idle(v, SIZE_MAX, &chg), ==, 10 * G);
    EXPECT_U64(chg.releases, ==, 3);
    expect_all_queries(v);
    vmm_free(v);
}

/* A driver failure half-way: the extents mapped on the way stay (idle), the error keeps its name. */
UNIT_TEST(vmm, a_failed_create_keeps_what_was_mapped) {
    pool_vmm *v = vmm_new(2);
    pool_vmm_change chg;
    fake.fail_create_at = 3;
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(63), 8 * G, 0, 0, &chg), ==, VRAM_ERR_OUT_OF_MEMORY);
    EXPECT(strstr(vram_last_error(), "CUDA_ERROR_OUT_OF_MEMORY") != NULL);
    EXPECT_SIZE(chg.mapped, ==, 4 * G);
    EXPECT_SIZE(mapped_granules(), ==, 4);
    EXPECT_SIZE(v->mapped, ==, 4 * G);
    EXPECT_SIZE(v->idle, ==, 4 * G);
    expect_all_queries(v);
    fake.fail_map_at = 1;
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(63), 8 * G, 0, 0, &chg), ==, VRAM_ERR_DRIVER);
    EXPECT_U64(fake.creates, ==, fake.releases + 2);   /* the unmapped handle went back */
    EXPECT_INT(vram__pool_vmm_acquire(v, at_gran(63), 8 * G, 0, 0, &chg), ==, VRAM_OK);
    EXPECT_SIZE(chg.mapped, ==, 4 * G);
    EXPECT_SIZE(mapped_granules(), ==, 8);
    expect_all_queries(v);
    vmm_free(v);
}

/* ---- busy counts and giving back ------------------------------------------------------------- */

UNIT_TEST(vmm, busy_counts_and_giving_back_the_largest_idle_first) {
    pool_vmm *v = vmm_new(4);
    acquire(v, 0, 4);                  /* extents [0,4) [4,8) [8,12) [60,62) [62,64) [64,68)... */
    acquire(v, 4, 4);
    acquire(v, 8, 4);
    acquire(v, 60, 2);
    acquire(v, 62, 2);
    acquire(v, 64, 1);
    uint64_t addr[2] = {at_gran(4) + G - 256, at_gran(63) + 512};   /* a block across 4..5, one in 63 */
    size_t size[2] = {512, 1024};
    recount(v, addr, size, 2);
    int32_t e4 = -1, e62 = -1;
    for (int32_t e = 0; e < v->ext_count; e++) {
        if (v->ext[e].offset == 4 * G) e4 = e;
        if (v->ext[e].offset == 62 * G) e62 = e;
    }
    EXPECT(e4 >= 0 && e62 >= 0);
    EXPECT_SIZE(v->ext[e4].busy, ==, 512);
    EXPECT_SIZE(v->ext[e62].busy, ==, 1024);
    EXPECT_SIZE(v->idle, ==, 8 * G + 2 * G + G);
    pool_vmm_change chg;
    EXPECT_SIZE(vram__pool_vmm_unmap_idle(v, 5 * G, &chg), ==, 8 * G);       /* [0,4) and [8,12): 4 each */
    EXPECT_INT(fake.map_of[0], ==, 0);
    EXPECT_INT(fake.map_of[8], ==, 0);
    EXPECT_INT(fake.map_of[60], !=, 0);
    EXPECT_INT(fake.map_of[4], !=, 0);
    EXPECT_SIZE(vram__pool_vmm_unmap_idle(v, 1, &chg), ==, 2 * G);           /* [60,62) before [64,65) */
    EXPECT_INT(fake.map_of[60], ==, 0);
    EXPECT_INT(fake.map_of[64], !=, 0);
    EXPECT_SIZE(vram__pool_vmm_unmap_idle(v, 100 * G, &chg), ==, G);         /* all the idle there is */
    EXPECT_SIZE(mapped_granules(), ==, 6);                             /* the busy ones stay */
    EXPECT_INT(fake.map_of[63], !=, 0);
    expect_all_queries(v);
    recount(v, NULL, NULL, 0);
    EXPECT_SIZE(vram__pool_vmm_unmap_idle_outside(v, 5 * G, 6 * G, &chg), ==, 2 * G);   /* keeps [4,8) */
    EXPECT_SIZE(mapped_granules(), ==, 4);
    EXPECT_INT(fake.map_of[4], !=, 0);
    EXPECT_SIZE(vram__pool_vmm_unmap_idle_outside(v, 8 * G, 9 * G, &chg), ==, 4 * G);
    EXPECT_SIZE(mapped_granules(), ==, 0);
    expect_all_queries(v);
    vmm_free(v);
}

/* touched_bits: a freed block's granules, at each side of a word's edge, keep their extents through
 * one idle period; their untouched neighbours go. */
UNIT_TEST(vmm, idle_since_the_last_period_at_words_edges) {
    static const size_t pairs[][2] = {{63, 64}, {64, 63}, {127, 128}, {128, 127}, {0, 1}, {NG - 1, NG - 2}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        size_t freed = pairs[i][0], quiet = pairs[i][1];
        unit_note("freed in %zu, nothing in %zu", freed, quiet);
        pool_vmm *v = vmm_new(1);
        acquire(v, freed, 1);
        acquire(v, quiet, 1);
        pool_vmm_change chg;
        recount(v, NULL, NULL, 0);
        vram__pool_vmm_unmap_stale(v, &chg);                  /* the first period starts: nothing goes */
        EXPECT_SIZE(chg.unmapped, ==, 0);
        EXPECT(v->touched_bits != NULL);
        vram__pool_vmm_release(v, at_gran(freed) + G / 2, 256);   /* a block in `freed` was freed */
        recount(v, NULL, NULL, 0);
        vram__pool_vmm_unmap_stale(v, &chg);
        EXPECT_SIZE(chg.unmapped, ==, G);
        EXPECT_INT(fake.map_of[quiet], ==, 0);
        EXPECT_INT(fake.map_of[freed], !=, 0);
        recount(v, NULL, NULL, 0);
        vram__pool_vmm_unmap_stale(v, &chg);                  /* a whole period untouched: it goes */
        EXPECT_SIZE(chg.unmapped, ==, G);
        EXPECT_SIZE(mapped_granules(), ==, 0);
        /* mapping in a period counts as touching */
        acquire(v, quiet, 1);
        recount(v, NULL, NULL, 0);
        vram__pool_vmm_unmap_stale(v, &chg);
        EXPECT_INT(fake.map_of[quiet], !=, 0);
        vmm_free(v);
    }
    unit_note("%s", "");
    /* blocks over whole words freed ([0, 64) and [128, 192)): all their granules kept */
    {
        pool_vmm *w = vmm_new(1);
        acquire(w, 0, NG);
        pool_vmm_change c2;
        recount(w, NULL, NULL, 0);
        vram__pool_vmm_unmap_stale(w, &c2);
        vram__pool_vmm_release(w, at_gran(0), 64 * G);
        vram__pool_vmm_release(w, at_gran(128), 64 * G);
        recount(w, NULL, NULL, 0);
        vram__pool_vmm_unmap_stale(w, &c2);
        EXPECT_SIZE(c2.unmapped, ==, (NG - 128) * G);
        for (size_t g = 0; g < NG; g++) EXPECT_INT(fake.map_of[g] != 0, ==, g < 64 || (g >= 128 && g < 192));
        vmm_free(w);
    }
    /* a block over [63, 65) freed: both extents kept, 62 and 65 go */
    pool_vmm *v = vmm_new(1);
    acquire(v, 62, 4);
    pool_vmm_change chg;
    recount(v, NULL, NULL, 0);
    vram__pool_vmm_unmap_stale(v, &chg);
    vram__pool_vmm_release(v, at_gran(63) + G - 256, 256 + G);
    recount(v, NULL, NULL, 0);
    vram__pool_vmm_unmap_stale(v, &chg);
    EXPECT_SIZE(chg.unmapped, ==, 2 * G);
    EXPECT_INT(fake.map_of[62], ==, 0);
    EXPECT_INT(fake.map_of[63], !=, 0);
    EXPECT_INT(fake.map_of[64], !=, 0);
    EXPECT_INT(fake.map_of[65], ==, 0);
    vmm_free(v);
}

/* The second quick test (the large zone's mapped run from its start). */
UNIT_TEST(vmm, the_zones_quick_test) {
    pool_vmm *v = vmm_new(NG);
    vram__pool_vmm_set_zone(v, 100 * G);                        /* (before anything is mapped, as backing.c) */
    acquire(v, 0, 10);
    EXPECT_SIZE(v->zone_prefix, ==, 0);
    acquire(v, 100, 30);
    EXPECT_SIZE(v->zone_prefix, ==, 30 * G);
    EXPECT_SIZE(v->mapped_prefix, ==, 10 * G);
    expect_all_queries(v);
    acquire(v, 130, 40);                                  /* it reaches on: [100, 170) */
    EXPECT_SIZE(v->zone_prefix, ==, 70 * G);
    EXPECT_SIZE(v->zone_bytes[0], ==, 10 * G);
    EXPECT_SIZE(v->zone_bytes[1], ==, 70 * G);
    uint64_t addr[1] = {at_gran(100)};
    size_t size[1] = {30 * G};
    recount(v, addr, size, 1);
    pool_vmm_change chg;
    EXPECT_SIZE(vram__pool_vmm_unmap_idle_outside(v, 0, 100 * G, &chg), ==, 40 * G);   /* [130, 170) */
    EXPECT_SIZE(v->zone_prefix, ==, 30 * G);
    expect_all_queries(v);
    vmm_free(v);
}

/* Idle extents move under a block's unmapped granules: an unmap and a map each, nothing created. */
UNIT_TEST(vmm, moving_idle_extents_under_a_block) {
    pool_vmm *v = vmm_new(4);
    acquire(v, 0, 4);
    acquire(v, 4, 2);
    acquire(v, 10, 1);
    uint64_t busy[1] = {at_gran(10)};
    size_t busy_size[1] = {256};
    recount(v, busy, busy_size, 1);
    pool_vmm_change chg;
    vram__pool_vmm_move_idle(v, at_gran(62), 5 * G, &chg);   /* [62, 67): the 4, then a 2 reaching past */
    EXPECT_U64(chg.moves, ==, 2);
    EXPECT_U64(chg.creates, ==, 0);
    EXPECT_SIZE(mapped_granules(), ==, 7);
    for (size_t g = 62; g < 68; g++) EXPECT_INT(fake.map_of[g], !=, 0);
    EXPECT_INT(fake.map_of[0], ==, 0);
    EXPECT_INT(fake.map_of[10], !=, 0);                 /* the busy one stayed */
    EXPECT_SIZE(pool_vmm_unmapped(v, at_gran(62), 5 * G), ==, 0);
    expect_all_queries(v);
    vmm_free(v);
}

/* ---- randomized, against the fake driver's truth --------------------------------------------- */

#define MAXB 48

typedef struct block {
    uint64_t addr;
    size_t   size;
} block;

typedef struct model {
    block    b[MAXB];
    int      n;
    int      periods;          /* unmap_stale calls so far: touched is noted from the first on */
    uint8_t  touched[NG];
    uint32_t before[NG];       /* the truth before an operation */
} model;

static void recount_model(pool_vmm *v, const model *m) {
    vram__pool_vmm_busy_begin(v);
    for (int i = 0; i < m->n; i++) vram__pool_vmm_busy_add(v, m->b[i].addr, m->b[i].size);
    vram__pool_vmm_busy_end(v);
    for (int32_t e = 0; e < v->ext_count; e++) {     /* each extent's count: the bytes of blocks over it */
        const pool_extent *x = &v->ext[e];
        if (x->size == 0) continue;
        size_t busy = 0;
        uint64_t xs = FAKE_BASE + x->offset, xe = xs + x->size;
        for (int i = 0; i < m->n; i++) {
            uint64_t s = m->b[i].addr > xs ? m->b[i].addr : xs, t = m->b[i].addr + m->b[i].size;
            if (t > xe) t = xe;
            if (t > s) busy += (size_t)(t - s);
        }
        EXPECT_SIZE(x->busy, ==, busy);
    }
}

/* After an operation: every live block's granules mapped; granules newly mapped noted touched. */
static void after_op(const pool_vmm *v, model *m) {
    for (int i = 0; i < m->n; i++) {
        for (size_t g = gran(m->b[i].addr); g <= gran(m->b[i].addr + m->b[i].size - 1); g++) {
            EXPECT_INT(fake.map_of[g], !=, 0);
        }
    }
    for (size_t g = 0; g < NG; g++) {
        if (fake.map_of[g] != 0 && fake.map_of[g] != m->before[g] && m->periods > 0) m->touched[g] = 1;
    }
    EXPECT_SIZE(v->mapped, ==, mapped_granules() * G);
}

UNIT_TEST(vmm, random_against_the_drivers_truth) {
    unit_rng rng = unit_rng_make();
    pool_vmm *v = vmm_new(1 + unit_rng_below(&rng, 6));
    vram__pool_vmm_set_zone(v, 120 * G);
    static model m;
    unsigned long done[12] = {0}, moves = 0;
    for (int step = 0; step < 3000; step++) {
        unsigned op = (unsigned)unit_rng_below(&rng, 12);
        unit_note("step %d, op %u", step, op);
        memcpy(m.before, fake.map_of, sizeof m.before);
        pool_vmm_change chg;
        if (op < 4 && m.n < MAXB) {                              /* a block in use: mapped */
            size_t g = (size_t)unit_rng_below(&rng, NG), n = 1 + (size_t)unit_rng_below(&rng, unit_rng_below(&rng, 4) ? 4 : 24);
            if (g + n > NG) n = NG - g;
            uint64_t addr = at_gran(g) + unit_rng_below(&rng, G / 256) * 256;
            uint64_t end = at_gran(g + n) - unit_rng_below(&rng, G / 256) * 256;
            if (end <= addr) end = addr + 256;
            int clash = 0;
            for (int i = 0; i < m.n; i++) clash |= addr < m.b[i].addr + m.b[i].size && m.b[i].addr < end;
            if (clash) continue;
            size_t size = (size_t)(end - addr), ahead = unit_rng_below(&rng, 3) ? 0 : (size_t)unit_rng_below(&rng, 8) * G;
            if (unit_rng_below(&rng, 3) == 0) {                  /* idle extents moved under it first */
                recount_model(v, &m);
                uint8_t was_busy[NG];                            /* the extent at each granule was busy */
                for (size_t k = 0; k < NG; k++) was_busy[k] = v->gran_ext[k] >= 0 && v->ext[v->gran_ext[k]].busy != 0;
                size_t had = v->mapped;
                vram__pool_vmm_move_idle(v, addr, size, &chg);
                moves += chg.moves;
                EXPECT_U64(chg.creates, ==, 0);
                EXPECT_SIZE(chg.mapped, ==, 0);
                EXPECT_SIZE(v->mapped, ==, had);
                for (size_t k = 0; k < NG; k++) {
                    /* only idle extents move... */
                    if (m.before[k] != 0 && fake.map_of[k] != m.before[k]) EXPECT_INT(was_busy[k], ==, 0);
                    /* ...under the block, or over the run after it that was (or became) unmapped */
                    if (fake.map_of[k] == 0 || fake.map_of[k] == m.before[k] || (k >= gran(addr) && k <= gran(end - 1))) continue;
                    EXPECT_SIZE(k, >, gran(end - 1));
                    for (size_t j = gran(end - 1) + 1; j < k; j++) {
                        EXPECT(fake.map_of[j] != 0 && (m.before[j] == 0 || fake.map_of[j] != m.before[j]));
                    }
                }
            }
            uint32_t mid[NG];
            memcpy(mid, fake.map_of, sizeof mid);
            EXPECT_INT(vram__pool_vmm_acquire(v, addr, size, ahead, 0, &chg), ==, VRAM_OK);
            for (size_t k = 0; k < NG; k++) {                    /* only the block's and `ahead` after it */
                if (fake.map_of[k] == mid[k]) continue;
                EXPECT_INT(mid[k], ==, 0);
                EXPECT_SIZE(k, >=, gran(addr));
                EXPECT_SIZE(k, <=, gran(end - 1) + ahead / G);
            }
            for (int32_t e = 0; e < v->ext_count; e++) EXPECT_SIZE(v->ext[e].size, <=, v->max_extent);
            pool_vmm_mark(v);
            m.b[m.n++] = (block){addr, size};
        } else if (op < 7 && m.n > 0) {                          /* a block freed */
            int i = (int)unit_rng_below(&rng, (uint64_t)m.n);
            vram__pool_vmm_release(v, m.b[i].addr, m.b[i].size);
            if (m.periods > 0) {
                for (size_t g = gran(m.b[i].addr); g <= gran(m.b[i].addr + m.b[i].size - 1); g++) m.touched[g] = 1;
            }
            m.b[i] = m.b[--m.n];
        } else if (op == 7) {                                    /* the largest idle first */
            recount_model(v, &m);
            size_t want = (size_t)unit_rng_below(&rng, 16) * G, idle = v->idle, had = v->mapped;
            size_t idle_size[NG];                                /* the idle extent at each granule (0: none) */
            for (size_t k = 0; k < NG; k++) {
                int32_t e = v->gran_ext[k];
                idle_size[k] = e >= 0 && v->ext[e].busy == 0 ? v->ext[e].size : 0;
            }
            size_t got = vram__pool_vmm_unmap_idle(v, want, &chg);
            EXPECT_SIZE(got, ==, had - v->mapped);
            EXPECT_SIZE(got, ==, chg.unmapped);
            if (got < want) EXPECT_SIZE(got, ==, idle);          /* (all of it) */
            size_t least_gone = SIZE_MAX, most_left = 0;
            for (size_t k = 0; k < NG; k++) {
                if (m.before[k] != 0 && fake.map_of[k] == 0) {
                    EXPECT_SIZE(idle_size[k], >, 0);             /* only idle ones went */
                    if (idle_size[k] < least_gone) least_gone = idle_size[k];
                } else if (idle_size[k] > most_left) {
                    most_left = idle_size[k];
                }
            }
            if (got > 0) EXPECT_SIZE(least_gone, >=, most_left);
        } else if (op == 8) {                                    /* idle outside a range */
            recount_model(v, &m);
            size_t lo = (size_t)unit_rng_below(&rng, NG), hi = lo + (size_t)unit_rng_below(&rng, NG - lo + 1);
            vram__pool_vmm_unmap_idle_outside(v, lo * G, hi * G, &chg);
            for (int32_t e = 0; e < v->ext_count; e++) {
                const pool_extent *x = &v->ext[e];
                if (x->size == 0) continue;
                int overlaps = x->offset < hi * G && x->offset + x->size > lo * G;
                EXPECT(overlaps || x->busy != 0);
            }
            for (size_t g = 0; g < NG; g++) {                    /* what overlaps stayed */
                if (m.before[g] != 0 && g >= lo && g < hi) EXPECT_INT(fake.map_of[g], ==, m.before[g]);
            }
        } else if (op == 9) {                                    /* the idle since the last period */
            recount_model(v, &m);
            int32_t idle_untouched[NG];
            for (size_t g = 0; g < NG; g++) idle_untouched[g] = 0;
            for (int32_t e = 0; e < v->ext_count; e++) {
                const pool_extent *x = &v->ext[e];
                if (x->size == 0 || x->busy != 0) continue;
                int t = 0;
                for (size_t g = x->offset / G; g < (x->offset + x->size) / G; g++) t |= m.touched[g];
                for (size_t g = x->offset / G; g < (x->offset + x->size) / G; g++) idle_untouched[g] = !t;
            }
            int first = m.periods == 0;
            vram__pool_vmm_unmap_stale(v, &chg);
            for (size_t g = 0; g < NG; g++) {
                if (m.before[g] == 0) continue;
                EXPECT_INT(fake.map_of[g] == 0, ==, !first && idle_untouched[g]);
            }
            m.periods++;
            memset(m.touched, 0, sizeof m.touched);
        } else {                                                 /* queries */
            for (int k = 0; k < 8; k++) {
                size_t g = (size_t)unit_rng_below(&rng, NG), n = 1 + (size_t)unit_rng_below(&rng, NG - g);
                uint64_t addr = at_gran(g) + unit_rng_below(&rng, G / 256) * 256;
                uint64_t end = at_gran(g + n) - unit_rng_below(&rng, G / 256) * 256;
                if (end <= addr) end = addr + 256;
                expect_queries(v, addr, (size_t)(end - addr));
            }
        }
        unit_note("step %d, op %u", step, op);
        done[op]++;
        after_op(v, &m);
        if (op >= 7 && op <= 9) EXPECT_SOUND(vram__pool_vmm_check(v, UNIT_WHY));
    }
    recount_model(v, &m);
    EXPECT_SOUND(vram__pool_vmm_check(v, UNIT_WHY));
    expect_all_queries(v);
    unit_note("%s", "");
    printf("max extent %zu granules; ops done:", v->max_extent / G);
    for (int k = 0; k < 12; k++) printf(" %lu", done[k]);
    printf("; driver: %" PRIu64 " creates, %" PRIu64 " maps, %" PRIu64 " unmaps, %lu moves\n", fake.creates,
           fake.maps, fake.unmaps, moves);
    vmm_free(v);
}
