/*
 * test_stress.c: deterministic random allocation and free on one thread, with vram_check and the
 * statistics verified after every step (preallocated and growing pools, sizes 1 B to 64 MiB).
 */
#include <stdlib.h>

#include "harness.h"

enum { STEPS = 4000, MAX_LIVE = 256 };

typedef struct model {
    void  *ptr[MAX_LIVE];
    size_t size[MAX_LIVE];
    int    n;
    size_t current;          /* what `current` must be */
    uint64_t allocs, frees, ooms;
} model;

static void model_check(const model *m, int dev, int growth) {
    CHECK_OK(vram_check(dev));
    vram_memory_info info = INFO(dev);
    CHECK_INFO_SANE(info);
    CHECK_SIZE(info.current, ==, m->current);
    CHECK_U64(info.num_allocs, ==, m->allocs);
    CHECK_U64(info.num_frees, ==, m->frees);
    CHECK_U64(info.num_ooms, ==, m->ooms);
    if (!growth) CHECK_SIZE(info.reserved, ==, info.limit);
}

static size_t random_size(test_rng *rng) {
    switch (rng_below(rng, 4)) {
    case 0: return 1 + (size_t)rng_below(rng, 512);           /* tiny */
    case 1: return rng_size_log(rng, 1, 64 * KiB);           /* small */
    case 2: return rng_size_log(rng, 64 * KiB, 4 * MiB);     /* medium */
    default: return rng_size_log(rng, 1, 64 * MiB);          /* anything up to 64 MiB */
    }
}

static void stress(int growth, size_t limit) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, growth));
    CHECK_OK(vram_set_memory_limit(0, limit));
    CHECK_OK(vram_init());
    test_rng rng = rng_make(harness_seed());
    model m = {0};
    for (int step = 0; step < STEPS; step++) {
        int do_free = m.n == MAX_LIVE || (m.n > 0 && rng_below(&rng, 100) < 45);
        if (do_free) {
            int i = (int)rng_below(&rng, (uint64_t)m.n);
            CHECK_OK(vram_free(m.ptr[i]));
            m.current -= round256(m.size[i]);
            m.frees++;
            m.ptr[i] = m.ptr[m.n - 1];
            m.size[i] = m.size[m.n - 1];
            m.n--;
        } else {
            size_t size = random_size(&rng);
            vram_memory_info before = INFO(0);
            void *p = NULL;
            vram_status s = vram_malloc(&p, size, 0);
            if (s == VRAM_ERR_OUT_OF_MEMORY) {
                m.ooms++;
                /* it fails only when no free block is large enough and, growing, when taking
                 * the request afresh would pass the limit */
                CHECK_SIZE(before.largest_free_block, <, round256(size));
                if (growth) CHECK_SIZE(limit - before.reserved, <, round256(size));
            } else {
                CHECK_STATUS(VRAM_OK, s);
                CHECK((uintptr_t)p % 256 == 0);
                m.ptr[m.n] = p;
                m.size[m.n] = size;
                m.n++;
                m.current += round256(size);
                m.allocs++;
            }
        }
        model_check(&m, 0, growth);
        if (step % 500 == 0) {
            CHECK_OK(vram_reset_memory_stats(0));
            vram_memory_info info = INFO(0);
            CHECK_SIZE(info.peak, ==, info.current);
            CHECK_SIZE(info.peak_reserved, ==, info.reserved);
        }
    }
    while (m.n > 0) {
        CHECK_OK(vram_free(m.ptr[--m.n]));
        m.current -= round256(m.size[m.n]);
        m.frees++;
        model_check(&m, 0, growth);
    }
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.current, ==, 0);
    if (!growth) CHECK_SIZE(info.largest_free_block, ==, limit);  /* everything merged again */
    CHECK_OK(vram_shutdown());
}

TEST(stress_prealloc_checked_every_step) {
    stress(0, 512 * MiB);
}

TEST(stress_growth_checked_every_step) {
    stress(1, 512 * MiB);
}

TEST(stress_prealloc_tight_limit) {
    stress(0, 128 * MiB);
}

TEST(stress_growth_tight_limit) {
    stress(1, 128 * MiB);
}

/* Limits that are not whole 2 MiB granules: the last piece comes from elsewhere than mapping */
TEST(stress_growth_odd_limit) {
    stress(1, 129 * MiB + 512 * KiB);
}

TEST(stress_prealloc_odd_limit) {
    stress(0, 129 * MiB + 512 * KiB);
}
