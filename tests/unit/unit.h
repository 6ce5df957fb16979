/*
 * unit.h: the harness of the pool's unit tests (tests/unit/unit_*.c), each of which tests one piece
 * of src/pool directly through its internal header, in the manner of jemalloc's test/unit/: many
 * small exact checks, and randomized runs against a simple reference model with fixed seeds.
 *
 * A test is `UNIT_TEST(group, name) { ... }`; it registers itself (a constructor), so no list has
 * to be kept. The runner (unit_main.c) runs each test in its own forked child with a timeout, so a
 * crash or a hang fails that test alone; `vram_unit 'free_bins.*'` selects by "group.name" glob.
 * A check stops its test at the first failure and prints file:line, the expression, both values
 * and the seed (when the test used one). Nothing here starts the runtime: no test touches
 * vram_malloc or a backend other than its own fakes.
 */
#ifndef VRAM_UNIT_H
#define VRAM_UNIT_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*unit_fn)(void);
void unit_register(const char *group, const char *name, unit_fn fn);

#define UNIT_TEST(group, name)                                                         \
    static void unit_##group##_##name(void);                                           \
    __attribute__((constructor)) static void unit_reg_##group##_##name(void) {         \
        unit_register(#group, #name, unit_##group##_##name);                           \
    }                                                                                  \
    static void unit_##group##_##name(void)

#if defined(__GNUC__)
#define UNIT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define UNIT_PRINTF(f, a)
#endif

/* Prints the failure (and the seed, when used) and ends the test's process. */
_Noreturn void unit_fail(const char *file, int line, const char *fmt, ...) UNIT_PRINTF(3, 4);
/* Adds a line of context that a failure prints after its own ("step 512: insert 0x1000"). */
void unit_note(const char *fmt, ...) UNIT_PRINTF(1, 2);
/* A failure also calls print(ctx), which prints what it knows (a layout, a map), when set. */
void unit_on_failure(void (*print)(void *ctx), void *ctx);

#define EXPECT(expr)                                                                   \
    do {                                                                               \
        if (!(expr)) unit_fail(__FILE__, __LINE__, "EXPECT(%s)", #expr);               \
    } while (0)

#define EXPECT_CMP(T, fmt, a, op, b)                                                   \
    do {                                                                               \
        T lhs_ = (a);                                                                  \
        T rhs_ = (b);                                                                  \
        if (!(lhs_ op rhs_))                                                           \
            unit_fail(__FILE__, __LINE__, "EXPECT(%s %s %s)\n    left:  " fmt          \
                      "\n    right: " fmt, #a, #op, #b, lhs_, rhs_);                   \
    } while (0)

#define EXPECT_SIZE(a, op, b) EXPECT_CMP(size_t, "%zu", a, op, b)
#define EXPECT_INT(a, op, b)  EXPECT_CMP(long long, "%lld", a, op, b)
#define EXPECT_U64(a, op, b)  EXPECT_CMP(uint64_t, "0x%" PRIx64, a, op, b)
#define EXPECT_PTR(a, op, b)  EXPECT_CMP(const void *, "%p", a, op, b)

/* A consistency check of a piece that writes its reason into msg: it must say 0. */
#define EXPECT_SOUND(call_with_msg)                                                    \
    do {                                                                               \
        char why_[256] = "";                                                           \
        if ((call_with_msg) != 0)                                                      \
            unit_fail(__FILE__, __LINE__, "%s failed: %s", #call_with_msg, why_);      \
    } while (0)
/* (the call names why_ and sizeof why_ for its message: EXPECT_SOUND(vram__free_bins_check(&b, UNIT_WHY))) */
#define UNIT_WHY why_, sizeof why_

/* ---- random numbers (splitmix64): the seed is the test's name's hash unless VRAM_TEST_SEED ---- */

typedef struct unit_rng {
    uint64_t state;
} unit_rng;

unit_rng unit_rng_make(void);                        /* from this test's seed (printed on failure) */
uint64_t unit_rng_next(unit_rng *r);
uint64_t unit_rng_below(unit_rng *r, uint64_t n);    /* uniform in [0, n), n > 0 */

#endif /* VRAM_UNIT_H */
