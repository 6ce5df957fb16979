/*
 * unit_free_bins.c: the free bins (src/pool/free_bins.h) on their own: the size classes and their
 * boundaries, best fit (exact fit, the smallest larger chunk, the smallest chunk within the
 * request's own class rather than the first, ties to the lowest address), insert / remove / resize
 * and the two bitmaps, the largest sizes, the ascending and descending walks, and a randomized run
 * against a reference model (every chunk in an array; best fit = the smallest size that holds the
 * request, lowest address among equals), with every class's list kept within the scan bound
 * (FREE_BINS_SCAN, 32), where free_bins.h promises the best fit exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/free_bins.h"
#include "unit.h"

#define U ((size_t)256)          /* the pool's unit: every chunk's size is a multiple of it */
#define SCAN 32                  /* free_bins.c's FREE_BINS_SCAN */

static free_bins *bins_new(void) {
    free_bins *b = calloc(1, sizeof *b);
    EXPECT(b != NULL);
    return b;
}

/* Chunk records for a test (FREE, not indexed), from a static array: each test runs in a process
 * of its own. */
static pool_chunk *chunk(size_t size, uint64_t addr) {
    static pool_chunk records[4096];
    static size_t used;
    EXPECT(used < 4096);
    pool_chunk *c = &records[used++];
    c->size = size;
    c->addr = addr;
    c->state = CHUNK_FREE;
    return c;
}

/* got and want are the same record; else both are described (size, address). */
#define EXPECT_CHUNK(got, want) expect_chunk(__FILE__, __LINE__, #got, (got), (want))
static void expect_chunk(const char *file, int line, const char *expr, const pool_chunk *got,
                         const pool_chunk *want) {
    if (got == want) return;
    char g[64] = "NULL", w[64] = "NULL";
    if (got) snprintf(g, sizeof g, "%zu bytes at 0x%" PRIx64, got->size, got->addr);
    if (want) snprintf(w, sizeof w, "%zu bytes at 0x%" PRIx64, want->size, want->addr);
    unit_fail(file, line, "%s\n    got:  %s\n    want: %s", expr, g, w);
}

static pool_chunk *put(free_bins *b, size_t size, uint64_t addr) {
    pool_chunk *c = chunk(size, addr);
    vram__free_bins_insert(b, c);
    return c;
}

/* The class a size is filed under (by inserting a chunk of it into scratch bins). */
typedef struct cls {
    int fl, sl;
} cls;

static cls class_of_size(size_t size) {
    static free_bins scratch;
    pool_chunk c = {.size = size, .addr = 0x1000, .state = CHUNK_FREE};
    vram__free_bins_insert(&scratch, &c);
    cls k = {c.bin_fl, c.bin_sl};
    vram__free_bins_remove(&scratch, &c);
    EXPECT_SIZE(scratch.count, ==, 0);
    return k;
}

static int cls_cmp(cls a, cls b) {
    return a.fl != b.fl ? (a.fl < b.fl ? -1 : 1) : (a.sl != b.sl ? (a.sl < b.sl ? -1 : 1) : 0);
}

UNIT_TEST(free_bins, empty_bins_find_nothing) {
    free_bins *b = bins_new();
    size_t sizes[] = {0, U, 8 * 1024, 1 << 20, (size_t)1 << 40, SIZE_MAX & ~(U - 1)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        EXPECT_CHUNK(vram__free_bins_best_fit(b, sizes[i]), NULL);
    }
    EXPECT_CHUNK(vram__free_bins_largest(b), NULL);
    EXPECT_U64(b->fl_map, ==, 0);
    EXPECT_SIZE(b->count, ==, 0);
    EXPECT_SIZE(b->bytes, ==, 0);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    free(b);
}

/* free_bins.h: 32 linear classes below 8 KiB (one size each), then 32 classes per power of two. */
UNIT_TEST(free_bins, classes_are_linear_below_8k_then_32_per_power_of_two) {
    for (size_t u = 0; u < 32; u++) {                    /* one class per size below 8 KiB */
        cls k = class_of_size(u * U);
        EXPECT_INT(k.fl, ==, 0);
        EXPECT_INT(k.sl, ==, (long long)u);
    }
    cls k = class_of_size(8192);
    EXPECT_INT(k.fl, ==, 1);
    EXPECT_INT(k.sl, ==, 0);
    k = class_of_size(8192 + U);                         /* [8 KiB, 16 KiB): still 256 bytes a class */
    EXPECT_INT(k.fl, ==, 1);
    EXPECT_INT(k.sl, ==, 1);
    k = class_of_size(16384 - U);
    EXPECT_INT(k.fl, ==, 1);
    EXPECT_INT(k.sl, ==, 31);
    k = class_of_size(16384);                            /* [16 KiB, 32 KiB): 512 bytes a class */
    EXPECT_INT(k.fl, ==, 2);
    EXPECT_INT(k.sl, ==, 0);
    k = class_of_size(16384 + U);
    EXPECT_INT(k.fl, ==, 2);
    EXPECT_INT(k.sl, ==, 0);
    k = class_of_size(16384 + 2 * U);
    EXPECT_INT(k.fl, ==, 2);
    EXPECT_INT(k.sl, ==, 1);
    k = class_of_size((size_t)1 << 30);                  /* 1 GiB = 2^22 units: row 22 - 4 */
    EXPECT_INT(k.fl, ==, 18);
    EXPECT_INT(k.sl, ==, 0);
    k = class_of_size(((size_t)1 << 30) - U);
    EXPECT_INT(k.fl, ==, 17);
    EXPECT_INT(k.sl, ==, 31);

    /* Every multiple of 256 up to 32 MiB: classes never go down as sizes grow, each is one run of
     * sizes, and a class spans 256 bytes below 16 KiB, at most 1/32 of its smallest size above. */
    cls prev = class_of_size(0);
    size_t first = 0;       /* the smallest size of prev's class */
    for (size_t s = U; s <= ((size_t)32 << 20); s += U) {
        cls c = class_of_size(s);
        int d = cls_cmp(prev, c);
        EXPECT_INT(d, <=, 0);
        if (d < 0) {
            size_t span = s - first;
            if (s <= 16384) EXPECT_SIZE(span, ==, U);
            else EXPECT_SIZE(span, <=, first / 32);
            first = s;
            prev = c;
        }
    }
    /* 32 classes in every power of two from 8 KiB on, up to the largest sizes */
    for (int e = 13; e < 64; e++) {
        size_t lo = (size_t)1 << e;
        cls a = class_of_size(lo), z = class_of_size(e == 63 ? SIZE_MAX & ~(U - 1) : 2 * lo - U);
        EXPECT_INT(a.sl, ==, 0);
        EXPECT_INT(z.sl, ==, 31);
        EXPECT_INT(a.fl, ==, z.fl);
        EXPECT_INT(a.fl, ==, e - 12);
        EXPECT_INT(a.fl, <, FREE_BINS_FL);
    }
}

UNIT_TEST(free_bins, exact_fit_beats_larger) {
    free_bins *b = bins_new();
    put(b, 1 << 20, 0x100000);
    pool_chunk *exact = put(b, 4096, 0x900000);
    put(b, 4096 + U, 0x200000);
    put(b, 8192, 0x300000);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 4096), exact);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 4096 - U + 1), exact);   /* a size between units */
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    free(b);
}

UNIT_TEST(free_bins, smallest_larger_block_across_classes) {
    free_bins *b = bins_new();
    pool_chunk *big = put(b, (size_t)64 << 20, 0x1000000);
    pool_chunk *mid = put(b, (size_t)3 << 20, 0x8000000);
    pool_chunk *small = put(b, 40 * 1024, 0x9000000);
    put(b, 512, 0xa000000);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 768), small);          /* nothing in 768's class: the next */
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 40 * 1024), small);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 40 * 1024 + U), mid);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, (size_t)3 << 20), mid);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, ((size_t)3 << 20) + U), big);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, (size_t)64 << 20), big);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, ((size_t)64 << 20) + U), NULL);
    EXPECT_PTR(vram__free_bins_best_fit(b, 512), !=, NULL);
    EXPECT_SIZE(vram__free_bins_best_fit(b, 512)->size, ==, 512);
    free(b);
}

/* The bug of issue 35: best fit turned into first fit within a size class. A class of 4 MiB spans
 * 128 KiB; its list is unsorted (newest first), so first fit takes whatever came last. */
UNIT_TEST(free_bins, best_fit_within_a_class_not_first_fit) {
    size_t base = (size_t)4 << 20, step = 128 * 1024 / 8;    /* eight sizes of one class */
    EXPECT_INT(cls_cmp(class_of_size(base), class_of_size(base + 7 * step)), ==, 0);
    for (int order = 0; order < 3; order++) {
        free_bins *b = bins_new();
        pool_chunk *c[8];
        for (int i = 0; i < 8; i++) {
            /* ascending, descending, or a shuffle of sizes; addresses unrelated to sizes */
            int k = order == 0 ? i : order == 1 ? 7 - i : (i * 5 + 3) % 8;
            c[k] = put(b, base + (size_t)k * step, 0x40000000ull - (uint64_t)i * 0x1000000);
        }
        for (int want = 0; want < 8; want++) {
            EXPECT_CHUNK(vram__free_bins_best_fit(b, base + (size_t)want * step), c[want]);
            EXPECT_CHUNK(vram__free_bins_best_fit(b, base + (size_t)want * step - U), c[want]);
        }
        /* take the best each time: sizes come out in ascending order */
        for (int want = 0; want < 8; want++) {
            pool_chunk *got = vram__free_bins_best_fit(b, base);
            EXPECT_CHUNK(got, c[want]);
            vram__free_bins_remove(b, got);
            EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
        }
        EXPECT_CHUNK(vram__free_bins_best_fit(b, base), NULL);
        free(b);
    }
    /* the same within the 2-unit classes of [16 KiB, 32 KiB): 16 KiB + 256 inserted last */
    free_bins *b = bins_new();
    pool_chunk *lo = put(b, 16384, 0x10000);
    put(b, 16384 + U, 0x20000);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 16384), lo);
    free(b);
}

/* A request in the middle of a class: its class's smaller chunks do not fit, the smallest that does
 * is chosen; when none of them does, the next non-empty class gives its smallest. */
UNIT_TEST(free_bins, best_fit_skips_the_smaller_chunks_of_the_requests_class) {
    size_t base = (size_t)4 << 20, step = 16 * 1024;
    free_bins *b = bins_new();
    put(b, base, 0x1000000);
    put(b, base + step, 0x2000000);
    pool_chunk *fit = put(b, base + 3 * step, 0x3000000);
    put(b, base + 6 * step, 0x4000000);
    put(b, base + 2 * step, 0x5000000);        /* newest: first in the list, too small */
    EXPECT_CHUNK(vram__free_bins_best_fit(b, base + 2 * step + U), fit);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, base + 3 * step), fit);
    vram__free_bins_remove(b, fit);
    EXPECT_SIZE(vram__free_bins_best_fit(b, base + 2 * step + U)->size, ==, base + 6 * step);
    /* none of the class fits: the next non-empty class, rows away */
    pool_chunk *far = put(b, (size_t)40 << 20, 0x6000000);
    put(b, (size_t)48 << 20, 0x7000000);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, base + 6 * step + U), far);
    free(b);
}

UNIT_TEST(free_bins, ties_go_to_the_lowest_address) {
    for (int order = 0; order < 2; order++) {
        free_bins *b = bins_new();
        uint64_t addrs[5] = {0x5000, 0x3000, 0x9000, 0x1000, 0x7000};
        pool_chunk *lowest = NULL;
        for (int i = 0; i < 5; i++) {
            pool_chunk *c = put(b, 8 * U, addrs[order ? 4 - i : i]);
            if (c->addr == 0x1000) lowest = c;
        }
        EXPECT_CHUNK(vram__free_bins_best_fit(b, 8 * U), lowest);      /* in the request's class */
        EXPECT_CHUNK(vram__free_bins_best_fit(b, 7 * U), lowest);      /* from a larger class */
        EXPECT_CHUNK(vram__free_bins_best_fit(b, 1), lowest);
        vram__free_bins_remove(b, lowest);
        EXPECT_U64(vram__free_bins_best_fit(b, 8 * U)->addr, ==, 0x3000);
        free(b);
    }
    /* equal sizes beat a lower address of a larger size in the same class */
    free_bins *b = bins_new();
    size_t s = (size_t)4 << 20;
    put(b, s + U, 0x1000);
    pool_chunk *a = put(b, s, 0x9000);
    pool_chunk *c = put(b, s, 0x5000);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, s), c);
    vram__free_bins_remove(b, c);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, s), a);
    free(b);
}

UNIT_TEST(free_bins, insert_remove_keep_the_bitmaps_and_counts) {
    free_bins *b = bins_new();
    pool_chunk *x = put(b, 3 * U, 0x1000);
    pool_chunk *y = put(b, 3 * U, 0x2000);
    pool_chunk *z = put(b, (size_t)1 << 20, 0x3000);
    cls kx = class_of_size(3 * U), kz = class_of_size((size_t)1 << 20);
    EXPECT_INT(x->bin_fl, ==, kx.fl);
    EXPECT_INT(x->bin_sl, ==, kx.sl);
    EXPECT_INT(z->bin_fl, ==, kz.fl);
    EXPECT_U64(b->fl_map, ==, (1ull << kx.fl) | (1ull << kz.fl));
    EXPECT_U64(b->sl_map[kx.fl], ==, 1u << kx.sl);
    EXPECT_U64(b->sl_map[kz.fl], ==, 1u << kz.sl);
    EXPECT_SIZE(b->count, ==, 3);
    EXPECT_SIZE(b->bytes, ==, 6 * U + ((size_t)1 << 20));
    /* newest first; links both ways */
    EXPECT_CHUNK(b->head[kx.fl][kx.sl], y);
    EXPECT_CHUNK(y->right, x);
    EXPECT_CHUNK(x->left, y);
    EXPECT_CHUNK(y->left, NULL);

    vram__free_bins_remove(b, y);                   /* the head */
    EXPECT_CHUNK(b->head[kx.fl][kx.sl], x);
    EXPECT_CHUNK(x->left, NULL);
    EXPECT_CHUNK(y->left, NULL);
    EXPECT_CHUNK(y->right, NULL);
    EXPECT_U64(b->sl_map[kx.fl], ==, 1u << kx.sl);
    vram__free_bins_remove(b, x);                   /* the class empties: its bit and its row's go */
    EXPECT_U64(b->sl_map[kx.fl], ==, 0);
    EXPECT_U64(b->fl_map, ==, 1ull << kz.fl);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 3 * U), z);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    vram__free_bins_remove(b, z);
    EXPECT_U64(b->fl_map, ==, 0);
    EXPECT_SIZE(b->count, ==, 0);
    EXPECT_SIZE(b->bytes, ==, 0);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 0), NULL);

    /* the middle of a list */
    pool_chunk *c[3];
    for (int i = 0; i < 3; i++) c[i] = put(b, 5 * U, 0x1000 * (uint64_t)(i + 1));
    vram__free_bins_remove(b, c[1]);
    EXPECT_CHUNK(c[2]->right, c[0]);
    EXPECT_CHUNK(c[0]->left, c[2]);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    free(b);
}

UNIT_TEST(free_bins, resize_keeps_its_place_within_a_class_and_moves_across) {
    free_bins *b = bins_new();
    size_t s = (size_t)4 << 20;
    pool_chunk *old = put(b, s, 0x1000);
    pool_chunk *c = put(b, s, 0x2000);         /* the head of the class */
    vram__free_bins_resize(b, c, s + 64 * 1024);      /* same class: stays at the head */
    EXPECT_CHUNK(b->head[c->bin_fl][c->bin_sl], c);
    EXPECT_SIZE(c->size, ==, s + 64 * 1024);
    EXPECT_SIZE(b->bytes, ==, 2 * s + 64 * 1024);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    EXPECT_CHUNK(vram__free_bins_best_fit(b, s), old);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, s + U), c);

    vram__free_bins_resize(b, c, 2 * U);              /* another class: moves */
    cls k = class_of_size(2 * U);
    EXPECT_INT(c->bin_fl, ==, k.fl);
    EXPECT_INT(c->bin_sl, ==, k.sl);
    EXPECT_CHUNK(b->head[old->bin_fl][old->bin_sl], old);
    EXPECT_CHUNK(old->left, NULL);
    EXPECT_SIZE(b->count, ==, 2);
    EXPECT_SIZE(b->bytes, ==, s + 2 * U);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, U), c);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, s + U), NULL);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    free(b);
}

/* A request in the last class of a row, with nothing there: the search goes on in the next row. */
UNIT_TEST(free_bins, row_boundaries) {
    for (int e = 13; e < 40; e++) {
        free_bins *b = bins_new();
        size_t row_end = (size_t)1 << e;                  /* the first size of the next row */
        pool_chunk *next_row = put(b, row_end, 0x1000);
        size_t w = row_end / 64;                          /* the width of the row's last class */
        put(b, w > U ? row_end - w : row_end - 2 * U, 0x2000);   /* below the request: never chosen */
        EXPECT_CHUNK(vram__free_bins_best_fit(b, row_end - U), next_row);
        EXPECT_CHUNK(vram__free_bins_best_fit(b, row_end), next_row);
        EXPECT_CHUNK(vram__free_bins_best_fit(b, row_end + U), NULL);
        free(b);
    }
    /* the linear classes' end: 8 KiB - 256 in row 0, 8 KiB in row 1 */
    free_bins *b = bins_new();
    pool_chunk *a = put(b, 8192 - U, 0x1000), *c = put(b, 8192, 0x2000);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 8192 - 2 * U), a);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 8192 - U + 1), c);
    vram__free_bins_remove(b, a);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, 1), c);
    free(b);
}

UNIT_TEST(free_bins, the_largest_sizes) {
    free_bins *b = bins_new();
    size_t top = SIZE_MAX & ~(U - 1), half = (size_t)1 << 63;
    pool_chunk *t = put(b, top, 0x1000);
    pool_chunk *h = put(b, half, 0x2000);
    pool_chunk *g = put(b, (size_t)1 << 40, 0x3000);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    EXPECT_CHUNK(vram__free_bins_best_fit(b, (size_t)1 << 40), g);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, ((size_t)1 << 40) + U), h);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, half), h);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, half + U), t);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, top), t);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, top + 1), NULL);     /* (SIZE_MAX - 254: the top class) */
    EXPECT_CHUNK(vram__free_bins_best_fit(b, SIZE_MAX), NULL);
    EXPECT_CHUNK(vram__free_bins_largest(b), t);
    vram__free_bins_remove(b, t);
    EXPECT_CHUNK(vram__free_bins_largest(b), h);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, half + U), NULL);
    free(b);
}

UNIT_TEST(free_bins, largest_is_the_largest_of_the_top_class) {
    free_bins *b = bins_new();
    size_t s = (size_t)4 << 20;
    put(b, s, 0x1000);
    pool_chunk *l = put(b, s + 96 * 1024, 0x2000);    /* same class, not at its head */
    put(b, s + 32 * 1024, 0x3000);
    put(b, 1 << 20, 0x4000);
    EXPECT_CHUNK(vram__free_bins_largest(b), l);
    free(b);
}

/* ---- the walks -------------------------------------------------------------------------------- */

typedef struct walk {
    pool_chunk *seen[1024];
    size_t      n, stop_after;
    size_t      raise_to;         /* the visitor raises the floor to this on its first visit */
} walk;

static int visit(pool_chunk *c, void *ctx, size_t *floor) {
    walk *w = ctx;
    EXPECT(w->n < 1024);
    w->seen[w->n++] = c;
    if (w->raise_to != 0 && *floor < w->raise_to) *floor = w->raise_to;
    return w->stop_after != 0 && w->n >= w->stop_after;
}

static int seen(const walk *w, const pool_chunk *c) {
    int k = 0;
    for (size_t i = 0; i < w->n; i++) k += w->seen[i] == c;
    return k;
}

UNIT_TEST(free_bins, ascending_visits_every_chunk_that_holds_the_size_smaller_classes_first) {
    free_bins *b = bins_new();
    size_t s = (size_t)4 << 20;
    pool_chunk *below = put(b, s - U, 0x1000);
    pool_chunk *own_small = put(b, s, 0x2000);          /* request's class, too small */
    pool_chunk *own_fit = put(b, s + 64 * 1024, 0x3000);
    pool_chunk *bigger = put(b, (size_t)1 << 30, 0x4000);
    pool_chunk *mid = put(b, (size_t)5 << 20, 0x5000);
    walk w = {0};
    vram__free_bins_ascending(b, s + U, visit, &w);
    EXPECT_SIZE(w.n, ==, 3);
    EXPECT_CHUNK(w.seen[0], own_fit);
    EXPECT_CHUNK(w.seen[1], mid);
    EXPECT_CHUNK(w.seen[2], bigger);
    EXPECT(!seen(&w, below) && !seen(&w, own_small));
    walk stop = {.stop_after = 2};
    vram__free_bins_ascending(b, 0, visit, &stop);
    EXPECT_SIZE(stop.n, ==, 2);
    EXPECT_CHUNK(stop.seen[0], below);
    walk none = {0};
    vram__free_bins_ascending(b, ((size_t)1 << 30) + U, visit, &none);
    EXPECT_SIZE(none.n, ==, 0);
    free(b);
}

UNIT_TEST(free_bins, descending_visits_from_the_top_and_stops_below_the_floor) {
    free_bins *b = bins_new();
    pool_chunk *g = put(b, (size_t)1 << 30, 0x1000);
    pool_chunk *m = put(b, (size_t)5 << 20, 0x2000);
    pool_chunk *k = put(b, 64 * 1024, 0x3000);
    pool_chunk *u = put(b, U, 0x4000);
    walk all = {0};
    vram__free_bins_descending(b, visit, &all, 0);
    EXPECT_SIZE(all.n, ==, 4);
    EXPECT_CHUNK(all.seen[0], g);
    EXPECT_CHUNK(all.seen[1], m);
    EXPECT_CHUNK(all.seen[2], k);
    EXPECT_CHUNK(all.seen[3], u);
    walk floor = {0};
    vram__free_bins_descending(b, visit, &floor, (size_t)5 << 20);
    EXPECT_SIZE(floor.n, ==, 2);                       /* 5 MiB's class reaches above 5 MiB */
    walk above = {0};
    vram__free_bins_descending(b, visit, &above, ((size_t)5 << 20) + 256 * 1024);
    EXPECT_SIZE(above.n, ==, 1);
    walk raised = {.raise_to = (size_t)2 << 20};       /* the visitor raises the floor as it goes */
    vram__free_bins_descending(b, visit, &raised, 0);
    EXPECT_SIZE(raised.n, ==, 2);
    walk stop = {.stop_after = 3};
    vram__free_bins_descending(b, visit, &stop, 0);
    EXPECT_SIZE(stop.n, ==, 3);
    EXPECT(!seen(&stop, u));
    free(b);
}

/* The top class of the top row, whose end (2^64) does not fit in a size_t: a floor of 0 visits it. */
UNIT_TEST(free_bins, descending_visits_the_top_class) {
    free_bins *b = bins_new();
    size_t top = SIZE_MAX & ~(U - 1);
    pool_chunk *t = put(b, top, 0x1000);
    pool_chunk *s = put(b, 1 << 20, 0x2000);
    walk w = {0};
    vram__free_bins_descending(b, visit, &w, 0);
    EXPECT_SIZE(w.n, ==, 2);
    EXPECT_CHUNK(w.seen[0], t);
    EXPECT_CHUNK(w.seen[1], s);
    walk f = {0};
    vram__free_bins_descending(b, visit, &f, top);
    EXPECT_SIZE(f.n, ==, 1);
    EXPECT_CHUNK(f.seen[0], t);
    free(b);
}

/* Lists longer than the scan bound: the fit is good rather than best, but it always holds the size. */
UNIT_TEST(free_bins, long_lists_still_give_a_chunk_that_fits) {
    free_bins *b = bins_new();
    size_t s = (size_t)4 << 20;
    pool_chunk *smallest = put(b, s + U, 0x1000);       /* oldest: at the list's end */
    for (int i = 0; i < 3 * SCAN; i++) put(b, s + 64 * 1024 + (size_t)(i % 7) * U, 0x100000 + (uint64_t)i * 0x1000);
    pool_chunk *c = vram__free_bins_best_fit(b, s + U);
    EXPECT(c != NULL);
    EXPECT_SIZE(c->size, >=, s + U);
    EXPECT_SIZE(c->size, <=, s + 64 * 1024 + 6 * U);
    EXPECT_CHUNK(vram__free_bins_best_fit(b, s + 64 * 1024 + 6 * U + U), NULL);
    vram__free_bins_remove(b, smallest);
    c = vram__free_bins_best_fit(b, s);
    EXPECT(c != NULL && c->size >= s);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    free(b);
}

/* vram__free_bins_check finds a chunk filed in the wrong class and counts that disagree. */
UNIT_TEST(free_bins, check_finds_what_is_wrong) {
    free_bins *b = bins_new();
    pool_chunk *c = put(b, 4 * U, 0x1000);
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    c->size = 1 << 20;                          /* resized behind the bins' back */
    char why[256];
    EXPECT_INT(vram__free_bins_check(b, why, sizeof why), !=, 0);
    c->size = 4 * U;
    b->bytes++;
    EXPECT_INT(vram__free_bins_check(b, why, sizeof why), !=, 0);
    b->bytes--;
    c->state = CHUNK_USED;
    EXPECT_INT(vram__free_bins_check(b, why, sizeof why), !=, 0);
    c->state = CHUNK_FREE;
    EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
    free(b);
}

/* ---- randomized, against the reference ------------------------------------------------------- */

#define NREF 768

typedef struct ref {
    pool_chunk *c[NREF];
    int         live[NREF];
    int         per_class[FREE_BINS_FL][FREE_BINS_SL];
} ref;

static pool_chunk *ref_best(const ref *r, size_t size) {
    pool_chunk *best = NULL;
    for (int i = 0; i < NREF; i++) {
        const pool_chunk *c = r->c[i];
        if (!r->live[i] || c->size < size) continue;
        if (best == NULL || c->size < best->size || (c->size == best->size && c->addr < best->addr)) {
            best = r->c[i];
        }
    }
    return best;
}

/* A size: log-uniform over 256 B .. 16 GiB, or near a live chunk's (the same class, often equal). */
static size_t random_size(unit_rng *rng, const ref *r) {
    if (unit_rng_below(rng, 3) == 0) {
        int i = (int)unit_rng_below(rng, NREF);
        if (r->live[i]) {
            long long s = (long long)r->c[i]->size + ((long long)unit_rng_below(rng, 7) - 3) * (long long)U;
            if (s > 0) return (size_t)s;
        }
    }
    int e = 8 + (int)unit_rng_below(rng, 27);
    size_t lo = (size_t)1 << e;
    return (lo + unit_rng_below(rng, lo)) & ~(U - 1);
}

UNIT_TEST(free_bins, random_against_a_sorted_reference) {
    unit_rng rng = unit_rng_make();
    free_bins *b = bins_new();
    ref *r = calloc(1, sizeof *r);
    EXPECT(r != NULL);
    for (int i = 0; i < NREF; i++) {
        /* distinct addresses, in an order unrelated to the records' */
        r->c[i] = chunk(0, 0x100000000ull + (uint64_t)((i * 7919) % NREF) * 0x10000);
    }
    size_t bytes = 0, count = 0;
    for (int step = 0; step < 30000; step++) {
        int i = (int)unit_rng_below(&rng, NREF);
        pool_chunk *c = r->c[i];
        unsigned op = (unsigned)unit_rng_below(&rng, 10);
        unit_note("step %d, op %u, record %d", step, op, i);
        if (op < 4 && !r->live[i]) {                              /* insert */
            c->size = random_size(&rng, r);
            vram__free_bins_insert(b, c);
            if (r->per_class[c->bin_fl][c->bin_sl] == SCAN) {    /* keep lists within the scan */
                vram__free_bins_remove(b, c);
            } else {
                r->per_class[c->bin_fl][c->bin_sl]++;
                r->live[i] = 1;
                bytes += c->size;
                count++;
            }
        } else if (op < 6 && r->live[i]) {                        /* remove */
            r->per_class[c->bin_fl][c->bin_sl]--;
            vram__free_bins_remove(b, c);
            r->live[i] = 0;
            bytes -= c->size;
            count--;
        } else if (op == 6 && r->live[i]) {                       /* resize */
            size_t size = random_size(&rng, r);
            cls k = class_of_size(size);
            if (r->per_class[k.fl][k.sl] < SCAN || (k.fl == c->bin_fl && k.sl == c->bin_sl)) {
                r->per_class[c->bin_fl][c->bin_sl]--;
                bytes = bytes - c->size + size;
                vram__free_bins_resize(b, c, size);
                r->per_class[c->bin_fl][c->bin_sl]++;
                EXPECT_INT(c->bin_fl, ==, k.fl);
                EXPECT_INT(c->bin_sl, ==, k.sl);
            }
        } else {                                                  /* find */
            size_t size = random_size(&rng, r);
            if (unit_rng_below(&rng, 8) == 0) size -= unit_rng_below(&rng, U);   /* between units */
            EXPECT_CHUNK(vram__free_bins_best_fit(b, size), ref_best(r, size));
        }
        EXPECT_SIZE(b->count, ==, count);
        EXPECT_SIZE(b->bytes, ==, bytes);
        if (step % 64 == 0) {
            EXPECT_SOUND(vram__free_bins_check(b, UNIT_WHY));
            pool_chunk *l = vram__free_bins_largest(b), *top = NULL;
            for (int j = 0; j < NREF; j++) {
                if (r->live[j] && (top == NULL || r->c[j]->size > top->size)) top = r->c[j];
            }
            EXPECT_SIZE(l ? l->size : 0, ==, top ? top->size : 0);
            /* the walks: ascending visits exactly the chunks that hold the size, each once, in class
             * order; descending every chunk of at least the floor, none of a class all below it */
            size_t size = random_size(&rng, r);
            walk *w = calloc(1, sizeof *w);
            EXPECT(w != NULL);
            vram__free_bins_ascending(b, size, visit, w);
            size_t fits = 0;
            for (int j = 0; j < NREF; j++) {
                if (!r->live[j]) continue;
                fits += r->c[j]->size >= size;
                EXPECT_INT(seen(w, r->c[j]), ==, r->c[j]->size >= size);
            }
            EXPECT_SIZE(w->n, ==, fits);
            for (size_t k = 1; k < w->n; k++) {
                EXPECT_INT(cls_cmp(class_of_size(w->seen[k - 1]->size), class_of_size(w->seen[k]->size)), <=, 0);
            }
            memset(w, 0, sizeof *w);
            vram__free_bins_descending(b, visit, w, size);
            for (int j = 0; j < NREF; j++) {
                if (r->live[j] && r->c[j]->size >= size) EXPECT_INT(seen(w, r->c[j]), ==, 1);
            }
            for (size_t k = 0; k < w->n; k++) {
                size_t s = w->seen[k]->size, span = s / 32 > U ? s / 32 : U;
                EXPECT_SIZE(s + span, >, size);
                if (k > 0) EXPECT_INT(cls_cmp(class_of_size(w->seen[k - 1]->size), class_of_size(s)), >=, 0);
            }
            free(w);
        }
    }
    unit_note("%s", "");
    free(r);
    free(b);
}
