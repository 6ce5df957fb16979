/*
 * harness.h: the small test harness of libvram's tests (in the manner of libuv's and mimalloc's).
 *
 * Every test is a `TEST(name) { ... }` function, registered once in test_list.h. The runner
 * (harness.c) runs each test in its own forked child process, because the runtime's state is
 * global, with a timeout. A test sets its own environment (use_sim(), set_env()) before its
 * first vram call; the runner clears every VRAM_* variable and CUDA_VISIBLE_DEVICES before it.
 *
 * Checks stop the test at the first failure and print file:line, the expression, both values
 * and vram_last_error() of the failing thread (and the random seed, when the test used one).
 */
#ifndef VRAM_TEST_HARNESS_H
#define VRAM_TEST_HARNESS_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/sim_hooks.h"
#include "vram.h"

/* The simulated backend's test hooks (sim_hooks.h) act on the driver the tests run on: on the CUDA
 * backend (VRAM_TEST_BACKEND=cuda) harness.c does the same through the fake driver's backdoors
 * (tests/shim/fake_cuda.h): completes a stream's work, makes the next cuMemMap / cuMemUnmap /
 * cuEventRecord calls fail with the errors the simulated ones give, holds the waits. The fake does not
 * fail its copies between host and device memory on demand: harness_fail_copies fails the test there. */
void harness_stream_complete(void *stream);
void harness_fail_event_records(int n);
void harness_fail_maps(int maps, int unmaps);
void harness_hold_event_syncs(int on);
int  harness_syncs_waiting(void);
void harness_fail_copies(int copies, int host_allocs);
#define vram__sim_stream_complete  harness_stream_complete
#define vram__sim_fail_event_records harness_fail_event_records
#define vram__sim_fail_maps        harness_fail_maps
#define vram__sim_hold_event_syncs harness_hold_event_syncs
#define vram__sim_syncs_waiting    harness_syncs_waiting
#define vram__sim_fail_copies      harness_fail_copies

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* 1 when the tests run on the CUDA backend (VRAM_TEST_BACKEND=cuda: harness.c). */
int harness_on_cuda(void);
/* A function of the driver libcuda.so.1 by name (the fake's backdoors: tests/shim/fake_cuda.h), loaded
 * if need be; the test fails when there is none. */
void *harness_fake(const char *name);

/* The driver's call counters so far (zeroed when the runtime starts on it): the simulated backend's,
 * or the CUDA backend's when the tests run there. */
static inline vram__backend_counters sim_counters(void) {
    vram__backend_counters c;
    (harness_on_cuda() ? &vram__backend_cuda : &vram__backend_sim)->counters(&c);
    return c;
}

/* Defines a test; the prototype keeps -Wmissing-prototypes quiet. */
#define TEST(name)               \
    void test_##name(void);      \
    void test_##name(void)

/* ---- checks ---------------------------------------------------------------------------------- */

#if defined(__GNUC__)
#define HARNESS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define HARNESS_PRINTF(f, a)
#endif

/* Prints the failure (with this thread's vram_last_error()) and ends the test process. */
_Noreturn void harness_fail(const char *file, int line, const char *fmt, ...) HARNESS_PRINTF(3, 4);

#define CHECK(expr)                                                                     \
    do {                                                                                \
        if (!(expr)) harness_fail(__FILE__, __LINE__, "CHECK(%s)", #expr);              \
    } while (0)

#define CHECK_STATUS(expected, call)                                                    \
    do {                                                                                \
        vram_status got_ = (call);                                                      \
        vram_status want_ = (expected);                                                 \
        if (got_ != want_)                                                              \
            harness_fail(__FILE__, __LINE__, "%s\n    expected %s, got %s", #call,      \
                         vram_status_name(want_), vram_status_name(got_));              \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(VRAM_OK, call)

/* Compares two values of type T with `op`, printing both with `fmt` on failure. */
#define CHECK_CMP(T, fmt, a, op, b)                                                     \
    do {                                                                                \
        T lhs_ = (a);                                                                   \
        T rhs_ = (b);                                                                   \
        if (!(lhs_ op rhs_))                                                            \
            harness_fail(__FILE__, __LINE__,                                            \
                         "CHECK(%s %s %s)\n    left:  " fmt "\n    right: " fmt, #a,    \
                         #op, #b, lhs_, rhs_);                                          \
    } while (0)

#define CHECK_SIZE(a, op, b) CHECK_CMP(size_t, "%zu", a, op, b)
#define CHECK_INT(a, op, b)  CHECK_CMP(long long, "%lld", a, op, b)
#define CHECK_U64(a, op, b)  CHECK_CMP(uint64_t, "%" PRIu64, a, op, b)
#define CHECK_PTR(a, op, b)  CHECK_CMP(const void *, "%p", a, op, b)

#define CHECK_STR_EQ(a, b) harness_check_str(__FILE__, __LINE__, #a, (a), (b), 0)
#define CHECK_CONTAINS(haystack, needle) \
    harness_check_str(__FILE__, __LINE__, #haystack, (haystack), (needle), 1)
#define CHECK_CONTAINS_NOCASE(haystack, needle) \
    harness_check_str(__FILE__, __LINE__, #haystack, (haystack), (needle), 2)
#define CHECK_NOT_CONTAINS(haystack, needle) \
    harness_check_str(__FILE__, __LINE__, #haystack, (haystack), (needle), 3)

/* The calling thread's last error message contains `needle` (case-sensitive). */
#define CHECK_ERROR_CONTAINS(needle) CHECK_CONTAINS(vram_last_error(), needle)
#define CHECK_ERROR_IS(text)         CHECK_STR_EQ(vram_last_error(), text)

/* mode: 0 equal, 1 contains, 2 contains ignoring case, 3 does not contain. */
void harness_check_str(const char *file, int line, const char *expr, const char *got,
                       const char *want, int mode);

/* Every logical device passes vram_check. */
#define CHECK_ALL() CHECK_OK(vram_check(-1))

/* vram_get_memory_info that must succeed. */
#define INFO(dev) harness_info(__FILE__, __LINE__, (dev))
vram_memory_info harness_info(const char *file, int line, int dev);

/* Every field of two vram_memory_info structs is equal. */
#define CHECK_INFO_EQ(a, b) harness_check_info_eq(__FILE__, __LINE__, &(a), &(b))
void harness_check_info_eq(const char *file, int line, const vram_memory_info *a,
                           const vram_memory_info *b);

/* The memory info's own invariants: current <= reserved <= limit, peaks above them. */
#define CHECK_INFO_SANE(info) harness_check_info_sane(__FILE__, __LINE__, &(info))
void harness_check_info_sane(const char *file, int line, const vram_memory_info *info);

/* ---- environment ----------------------------------------------------------------------------- */

/* VRAM_BACKEND=sim and VRAM_SIM_DEVICES=devices ("16GiB", "2x16GiB", "80GiB,24GiB"); on the CUDA
 * backend (VRAM_TEST_BACKEND=cuda) VRAM_BACKEND=cuda and the fake driver's FAKE_CUDA_MEM=devices. */
void use_sim(const char *devices);
/* A 16 GiB simulated card whose device 0 grows under `limit` with allocator options `conf`. */
void use_sim_growth(size_t limit, const char *conf);
/* setenv that must succeed; NULL value unsets. */
void set_env(const char *name, const char *value);

/* ---- random numbers (deterministic; the seed is printed on failure) ------------------------- */

/* This test's seed: VRAM_TEST_SEED when set, else a fixed value derived from the test's name.
 * Calling it makes failures print the seed. */
uint64_t harness_seed(void);

typedef struct test_rng {
    uint64_t state;
} test_rng;

test_rng rng_make(uint64_t seed);
uint64_t rng_next(test_rng *rng);
uint64_t rng_below(test_rng *rng, uint64_t n);          /* uniform in [0, n), n > 0 */
size_t   rng_size_log(test_rng *rng, size_t lo, size_t hi); /* log-uniform in [lo, hi] */

/* ---- small helpers ---------------------------------------------------------------------------- */

static inline size_t round256(size_t n) {
    return (n + 255) & ~(size_t)255;
}

/* TensorFlow's default amount for a compute 9.x card with `free_bytes` free at start. */
static inline size_t tf_default_limit(size_t free_bytes) {
    size_t reserve = free_bytes < 2 * GiB ? 225 * MiB : 1800 * MiB;
    return free_bytes > reserve ? free_bytes - reserve : 0;
}

/* Growth starts with (nearly) nothing reserved. */
#define NEAR_ZERO (64 * MiB)

/* Writes one byte per 4 KiB page (and the last byte) of a block, a pattern of `tag`; filled says
 * whether it is still there (the simulated card's memory is host memory; on the CUDA backend a
 * shadow of device memory stands for the bytes, and the driver must hold memory under the block). */
void fill(void *p, size_t n, unsigned tag);
int  filled(const void *p, size_t n, unsigned tag);
/* As fill / filled for a block's first 8 bytes: `tag` itself (nothing for a block smaller than that;
 * block_tagged is then 1). */
void block_tag(void *p, size_t n, uint64_t tag);
int  block_tagged(const void *p, size_t n, uint64_t tag);
/* A thread body (pthread_create): one vram_malloc of 64 KiB on logical device 0 and its free; run on a
 * second thread, it makes an arena's thread caches park from then on. */
void *malloc_free_once(void *arg);
/* Balanced driver calls on the simulated card: everything taken was given back (after a shutdown). */
void check_counters_balanced(void);

#endif /* VRAM_TEST_HARNESS_H */
