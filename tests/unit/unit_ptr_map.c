/*
 * unit_ptr_map.c: the pointer table (src/pool/ptr_map.h) on its own: insert / get / take, growth
 * at half load with every entry kept, probe runs of colliding addresses emptied in every order
 * (backward-shift deletion, no tombstones), a run that wraps around the table's end, take_unused,
 * and randomized runs against a reference (a flag per address of a fixed universe).
 *
 * The tests learn where the table's hash puts an address from the table itself (the bucket it takes
 * in an empty table of 64), not from a copy of the hash: a new hash keeps them meaningful.
 */
#include <stdlib.h>
#include <string.h>

#include "pool/ptr_map.h"
#include "unit.h"

#define FIRST_CAPACITY 64          /* ptr_map.c: the table's first size */

static pool_chunk records[8192];   /* the chunk an address maps to: records[i] for address i */

static uint64_t addr_of(size_t i) {
    return 0x7f0000000000ull + (uint64_t)i * 256;
}

static size_t capacity(const ptr_map *m) {
    return m->buckets != NULL ? m->mask + 1 : 0;
}

/* The bucket an address takes alone in an empty table of FIRST_CAPACITY: its home there. */
static size_t home_of(uint64_t addr) {
    ptr_map m = {0};
    EXPECT_INT(vram__ptr_map_insert(&m, addr, &records[0]), ==, 0);
    EXPECT_SIZE(capacity(&m), ==, FIRST_CAPACITY);
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < capacity(&m); i++) {
        if (m.buckets[i].addr == addr) at = i;
    }
    vram__ptr_map_destroy(&m);
    EXPECT_SIZE(at, !=, SIZE_MAX);
    return at;
}

/* The first n addresses (of index >= from) whose home is `home`. */
static void with_home(size_t home, size_t from, size_t n, uint64_t *out) {
    for (size_t i = from, k = 0; k < n; i++) {
        EXPECT_SIZE(i, <, 1u << 20);
        if (home_of(addr_of(i)) == home) out[k++] = addr_of(i);
    }
}

/* Occupied buckets == count, load at most one half, capacity a power of two. */
static void expect_shape(const ptr_map *m) {
    size_t used = 0, cap = capacity(m);
    for (size_t i = 0; i < cap; i++) used += m->buckets[i].addr != 0;
    EXPECT_SIZE(used, ==, m->count);
    EXPECT_SIZE(2 * m->count, <=, cap);
    EXPECT_SIZE(cap & (cap - 1), ==, 0);
}

UNIT_TEST(ptr_map, empty_table_finds_nothing) {
    ptr_map m = {0};
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(1)), ==, NULL);
    EXPECT_PTR(vram__ptr_map_take(&m, addr_of(1)), ==, NULL);
    EXPECT_PTR(vram__ptr_map_take_unused(&m, addr_of(1)), ==, NULL);
    EXPECT_SIZE(m.count, ==, 0);
    vram__ptr_map_destroy(&m);                      /* of a table that never held anything */
    EXPECT_PTR(m.buckets, ==, NULL);
}

UNIT_TEST(ptr_map, insert_get_take_one) {
    ptr_map m = {0};
    EXPECT_INT(vram__ptr_map_insert(&m, addr_of(5), &records[5]), ==, 0);
    EXPECT_SIZE(m.count, ==, 1);
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(5)), ==, &records[5]);
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(6)), ==, NULL);
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(5) + 256 * FIRST_CAPACITY), ==, NULL);
    EXPECT_PTR(vram__ptr_map_take(&m, addr_of(6)), ==, NULL);
    EXPECT_SIZE(m.count, ==, 1);
    EXPECT_PTR(vram__ptr_map_take(&m, addr_of(5)), ==, &records[5]);
    EXPECT_SIZE(m.count, ==, 0);
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(5)), ==, NULL);
    EXPECT_PTR(vram__ptr_map_take(&m, addr_of(5)), ==, NULL);
    EXPECT_INT(vram__ptr_map_insert(&m, addr_of(5), &records[7]), ==, 0);   /* again, another chunk */
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(5)), ==, &records[7]);
    expect_shape(&m);
    vram__ptr_map_destroy(&m);
    EXPECT_SIZE(m.count, ==, 0);
    EXPECT_PTR(m.buckets, ==, NULL);
}

/* The table doubles when an insert would pass half load, and keeps every entry through each growth. */
UNIT_TEST(ptr_map, grows_at_half_load_and_keeps_every_entry) {
    ptr_map m = {0};
    size_t growths = 0;
    for (size_t n = 1; n <= 5000; n++) {
        size_t before = capacity(&m);
        EXPECT_INT(vram__ptr_map_insert(&m, addr_of(n), &records[n]), ==, 0);
        size_t want = FIRST_CAPACITY;
        while (want < 2 * n) want *= 2;
        EXPECT_SIZE(capacity(&m), ==, want);
        EXPECT_SIZE(m.count, ==, n);
        if (capacity(&m) != before) {
            growths++;
            for (size_t i = 1; i <= n; i++) EXPECT_PTR(vram__ptr_map_get(&m, addr_of(i)), ==, &records[i]);
            expect_shape(&m);
        }
    }
    EXPECT_SIZE(growths, ==, 9);              /* 64, 128, ..., 16384 */
    for (size_t i = 1; i <= 5000; i++) EXPECT_PTR(vram__ptr_map_take(&m, addr_of(i)), ==, &records[i]);
    EXPECT_SIZE(m.count, ==, 0);
    EXPECT_SIZE(capacity(&m), ==, 16384);     /* (it never shrinks) */
    vram__ptr_map_destroy(&m);
}

static int next_permutation(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return 1;
}

/* Fills a table of FIRST_CAPACITY with keys[0..n) in order, then takes them out in every order; after
 * each take, every key still in must be found and every key out must not. */
static void every_removal_order(const uint64_t *keys, int n) {
    int order[8];
    for (int i = 0; i < n; i++) order[i] = i;
    size_t orders = 0;
    do {
        ptr_map m = {0};
        for (int i = 0; i < n; i++) EXPECT_INT(vram__ptr_map_insert(&m, keys[i], &records[i]), ==, 0);
        EXPECT_SIZE(capacity(&m), ==, FIRST_CAPACITY);
        int in[8];
        for (int i = 0; i < n; i++) in[i] = 1;
        for (int k = 0; k < n; k++) {
            int gone = order[k];
            unit_note("removal order %zu, take %d (key %d)", orders, k, gone);
            EXPECT_PTR(vram__ptr_map_take(&m, keys[gone]), ==, &records[gone]);
            in[gone] = 0;
            for (int i = 0; i < n; i++) {
                EXPECT_PTR(vram__ptr_map_get(&m, keys[i]), ==, (in[i] ? &records[i] : NULL));
            }
            expect_shape(&m);
        }
        EXPECT_SIZE(m.count, ==, 0);
        vram__ptr_map_destroy(&m);
        orders++;
    } while (next_permutation(order, n));
    unit_note("%s", "");
}

/* Five addresses of one home and two of the next share one probe run. */
UNIT_TEST(ptr_map, a_probe_run_emptied_in_every_order) {
    uint64_t keys[7];
    with_home(20, 1, 5, keys);
    with_home(21, 1, 2, keys + 5);
    uint64_t mixed[7] = {keys[0], keys[5], keys[1], keys[2], keys[6], keys[3], keys[4]};
    every_removal_order(keys, 7);
    every_removal_order(mixed, 7);
}

/* A run that starts at the last bucket and goes on at bucket 0, where keys of homes 0 and 1 are. */
UNIT_TEST(ptr_map, a_probe_run_wrapping_around_the_end) {
    uint64_t keys[7];
    with_home(FIRST_CAPACITY - 1, 1, 3, keys);
    with_home(0, 1, 2, keys + 3);
    with_home(1, 1, 1, keys + 5);
    with_home(FIRST_CAPACITY - 2, 1, 1, keys + 6);
    every_removal_order(keys, 7);
    uint64_t late[7] = {keys[3], keys[5], keys[0], keys[4], keys[1], keys[6], keys[2]};   /* home 0 first */
    every_removal_order(late, 7);
}

UNIT_TEST(ptr_map, take_unused_keeps_a_block_used_on_other_streams) {
    ptr_map m = {0};
    pool_chunk plain = {0}, used = {0};
    used.uses = (struct pool_uses *)&used;     /* any non-NULL: the table does not look inside */
    EXPECT_INT(vram__ptr_map_insert(&m, addr_of(1), &plain), ==, 0);
    EXPECT_INT(vram__ptr_map_insert(&m, addr_of(2), &used), ==, 0);
    EXPECT_PTR(vram__ptr_map_take_unused(&m, addr_of(2)), ==, &used);
    EXPECT_SIZE(m.count, ==, 2);
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(2)), ==, &used);
    EXPECT_PTR(vram__ptr_map_take_unused(&m, addr_of(1)), ==, &plain);
    EXPECT_SIZE(m.count, ==, 1);
    EXPECT_PTR(vram__ptr_map_get(&m, addr_of(1)), ==, NULL);
    EXPECT_PTR(vram__ptr_map_take_unused(&m, addr_of(3)), ==, NULL);
    used.uses = NULL;
    EXPECT_PTR(vram__ptr_map_take_unused(&m, addr_of(2)), ==, &used);
    EXPECT_SIZE(m.count, ==, 0);
    vram__ptr_map_destroy(&m);
}

/* Addresses as the pool has them: granule-aligned ones that differ only in high bits, and neighbours
 * 256 bytes apart. */
UNIT_TEST(ptr_map, aligned_and_high_bit_addresses) {
    ptr_map m = {0};
    static pool_chunk c[3][1000];
    for (uint64_t i = 1; i <= 1000; i++) {
        EXPECT_INT(vram__ptr_map_insert(&m, i << 40, &c[0][i - 1]), ==, 0);
        EXPECT_INT(vram__ptr_map_insert(&m, 0x7f0000000000ull + (i << 21), &c[1][i - 1]), ==, 0);
        EXPECT_INT(vram__ptr_map_insert(&m, 0x7f0000000000ull + (i << 21) + 256, &c[2][i - 1]), ==, 0);
    }
    for (uint64_t i = 1; i <= 1000; i++) {
        EXPECT_PTR(vram__ptr_map_get(&m, i << 40), ==, &c[0][i - 1]);
        EXPECT_PTR(vram__ptr_map_get(&m, 0x7f0000000000ull + (i << 21)), ==, &c[1][i - 1]);
        EXPECT_PTR(vram__ptr_map_get(&m, 0x7f0000000000ull + (i << 21) + 256), ==, &c[2][i - 1]);
        EXPECT_PTR(vram__ptr_map_get(&m, 0x7f0000000000ull + (i << 21) + 512), ==, NULL);
    }
    expect_shape(&m);
    vram__ptr_map_destroy(&m);
}

/* ---- against a reference -------------------------------------------------------------------- */

#define KEYS 4096

static void expect_all(const ptr_map *m, const int *in) {
    size_t n = 0;
    for (size_t i = 1; i <= KEYS; i++) {
        EXPECT_PTR(vram__ptr_map_get(m, addr_of(i)), ==, (in[i] ? &records[i] : NULL));
        n += in[i] != 0;
    }
    EXPECT_SIZE(m->count, ==, n);
    expect_shape(m);
}

UNIT_TEST(ptr_map, random_against_a_reference) {
    unit_rng rng = unit_rng_make();
    static int in[KEYS + 1];
    ptr_map m = {0};
    for (int step = 0; step < 60000; step++) {
        /* the live set drifts: inserts win in the first third, takes in the last */
        size_t i = 1 + (size_t)unit_rng_below(&rng, KEYS);
        unsigned bias = step < 20000 ? 7 : step < 40000 ? 5 : 3;
        unit_note("step %d, key %zu", step, i);
        if (unit_rng_below(&rng, 10) < bias) {
            if (!in[i]) {
                EXPECT_INT(vram__ptr_map_insert(&m, addr_of(i), &records[i]), ==, 0);
                in[i] = 1;
            }
            EXPECT_PTR(vram__ptr_map_get(&m, addr_of(i)), ==, &records[i]);
        } else {
            EXPECT_PTR(vram__ptr_map_take(&m, addr_of(i)), ==, (in[i] ? &records[i] : NULL));
            in[i] = 0;
            EXPECT_PTR(vram__ptr_map_get(&m, addr_of(i)), ==, NULL);
        }
        if (step % 1000 == 0) expect_all(&m, in);
    }
    expect_all(&m, in);
    unit_note("%s", "");
    vram__ptr_map_destroy(&m);
}

/* 4096 entries taken out in four orders: ascending, descending, the order of insertion (a shuffle),
 * and a random one; every entry left is checked along the way. */
UNIT_TEST(ptr_map, removal_orders) {
    unit_rng rng = unit_rng_make();
    static size_t inserted[KEYS], order[KEYS];
    static int in[KEYS + 1];
    for (int how = 0; how < 4; how++) {
        for (size_t k = 0; k < KEYS; k++) inserted[k] = k + 1;
        for (size_t k = KEYS - 1; k > 0; k--) {                /* Fisher-Yates */
            size_t j = (size_t)unit_rng_below(&rng, k + 1), t = inserted[k];
            inserted[k] = inserted[j];
            inserted[j] = t;
        }
        ptr_map m = {0};
        for (size_t k = 0; k < KEYS; k++) {
            EXPECT_INT(vram__ptr_map_insert(&m, addr_of(inserted[k]), &records[inserted[k]]), ==, 0);
            in[inserted[k]] = 1;
        }
        for (size_t k = 0; k < KEYS; k++) {
            order[k] = how == 0 ? k + 1 : how == 1 ? KEYS - k : inserted[k];
        }
        if (how == 3) {
            for (size_t k = KEYS - 1; k > 0; k--) {
                size_t j = (size_t)unit_rng_below(&rng, k + 1), t = order[k];
                order[k] = order[j];
                order[j] = t;
            }
        }
        for (size_t k = 0; k < KEYS; k++) {
            unit_note("order %d, take %zu", how, k);
            EXPECT_PTR(vram__ptr_map_take(&m, addr_of(order[k])), ==, &records[order[k]]);
            in[order[k]] = 0;
            if (k % 512 == 0 || k > KEYS - 64) expect_all(&m, in);
        }
        EXPECT_SIZE(m.count, ==, 0);
        vram__ptr_map_destroy(&m);
    }
    unit_note("%s", "");
}
