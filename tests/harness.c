/*
 * harness.c: the test runner.
 *
 *   vram_tests [--list] [PATTERN]
 *
 * Runs every test of test_list.h whose name or "group.name" matches PATTERN (a shell glob:
 * "env.*", "*fraction*", or one exact name), each in a forked child with a timeout
 * (VRAM_TEST_TIMEOUT seconds, default 60).
 * Prints one line per test, the child's output for failures, and at the end exactly
 * "N passed, N failed" (", N skipped" after it when tests were skipped). Exits non-zero when a test
 * failed or PATTERN matched nothing.
 * VRAM_TEST_SEED=N fixes the seed of the random tests; VRAM_TEST_VERBOSE=1 shows the output of
 * passing tests too.
 *
 * VRAM_TEST_BACKEND=cuda runs the tests on the CUDA backend (src/backend/cuda.c) instead of the
 * simulated one, over the driver found as libcuda.so.1 (ctest's vram_cuda.* put tests/shim's fake
 * first on LD_LIBRARY_PATH): use_sim() then selects VRAM_BACKEND=cuda and gives the fake driver the
 * cards it names (FAKE_CUDA_MEM) and streams whose work stays pending until waited for, as the
 * simulated ones (FAKE_CUDA_STREAMS=lazy). The tests that cannot run on a driver are skipped by name, each
 * with its reason (cuda_skips.h); the group "cuda" (test_cuda.c) runs only there.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_skips.h"
#include "fake_cuda.h"
#include "harness.h"
#include "test_list.h"

#define DECLARE_TEST(group, name) void test_##name(void);
TEST_LIST(DECLARE_TEST)
#undef DECLARE_TEST

typedef struct test_entry {
    const char *group;
    const char *name;
    void (*fn)(void);
} test_entry;

static const test_entry all_tests[] = {
#define TEST_ENTRY(group, name) {#group, #name, test_##name},
    TEST_LIST(TEST_ENTRY)
#undef TEST_ENTRY
};
static const size_t num_tests = sizeof all_tests / sizeof all_tests[0];

/* ---- the backend the tests run on (VRAM_TEST_BACKEND) ------------------------------------------ */

static int on_cuda;   /* set by main before any test is forked */

int harness_on_cuda(void) {
    return on_cuda;
}

static const struct {
    const char *name, *reason;
} cuda_skips[] = {
#define CUDA_SKIP_ENTRY(name, reason) {#name, reason},
    CUDA_SKIPS(CUDA_SKIP_ENTRY)
#undef CUDA_SKIP_ENTRY
};

/* Why a test does not run on this backend, or NULL when it runs. */
static const char *skip_reason(const test_entry *t) {
    if (!on_cuda) {
        return strcmp(t->group, "cuda") == 0
                   ? "runs on the CUDA backend only (VRAM_TEST_BACKEND=cuda over tests/shim's fake driver: "
                     "ctest -R vram_cuda)"
                   : NULL;
    }
    for (size_t i = 0; i < sizeof cuda_skips / sizeof cuda_skips[0]; i++) {
        if (strcmp(cuda_skips[i].name, t->name) == 0) return cuda_skips[i].reason;
    }
    return NULL;
}

/* ---- the simulated backend's hooks, on the driver the tests run on ------------------------------ */

#undef vram__sim_stream_complete
#undef vram__sim_fail_event_records
#undef vram__sim_fail_maps
#undef vram__sim_hold_event_syncs
#undef vram__sim_syncs_waiting
#undef vram__sim_fail_copies

/* A backdoor of tests/shim's fake driver (loaded here if the library has not loaded it yet: the
 * same library then). */
void *harness_fake(const char *name) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *fn = lib != NULL ? dlsym(lib, name) : NULL;
    if (fn == NULL) {
        harness_fail(__FILE__, __LINE__, "the driver libcuda.so.1 has no %s: the CUDA backend's tests run "
                     "over tests/shim's fake driver (LD_LIBRARY_PATH)", name);
    }
    return fn;
}

void harness_stream_complete(void *stream) {
    if (!on_cuda) {
        vram__sim_stream_complete(stream);
    } else if (((fake_cuda_stream_complete_fn *)harness_fake("fake_cuda_stream_complete"))(stream) != 0) {
        harness_fail(__FILE__, __LINE__, "fake_cuda_stream_complete(%p) failed", stream);
    }
}

/* The simulated driver's errors: a failed map is out of memory, a failed unmap or event record a
 * launch failure. */
void harness_fail_event_records(int n) {
    if (!on_cuda) vram__sim_fail_event_records(n);
    else ((fake_cuda_fail_next_fn *)harness_fake("fake_cuda_fail_next"))("cuEventRecord", (unsigned)n, 719);
}

void harness_fail_maps(int maps, int unmaps) {
    if (!on_cuda) {
        vram__sim_fail_maps(maps, unmaps);
        return;
    }
    fake_cuda_fail_next_fn *next = (fake_cuda_fail_next_fn *)harness_fake("fake_cuda_fail_next");
    next("cuMemMap", (unsigned)maps, 2);
    next("cuMemUnmap", (unsigned)unmaps, 719);
}

void harness_hold_event_syncs(int on) {
    if (!on_cuda) vram__sim_hold_event_syncs(on);
    else ((fake_cuda_hold_waits_fn *)harness_fake("fake_cuda_hold_waits"))(on);
}

void harness_fail_copies(int copies, int host_allocs) {
    if (!on_cuda) vram__sim_fail_copies(copies, host_allocs);
    else harness_fail(__FILE__, __LINE__, "the fake driver does not fail its copies between host and device memory "
                      "(cuMemcpyDtoH_v2, cuMemHostAlloc) on demand: skip this test on the CUDA backend (cuda_skips.h)");
}

int harness_syncs_waiting(void) {
    if (!on_cuda) return vram__sim_syncs_waiting();
    return ((fake_cuda_waiting_fn *)harness_fake("fake_cuda_waiting"))();
}

/* ---- state of the test running in this (child) process ---------------------------------------- */

static const char *current_test = "";
static uint64_t    seed_value;
static atomic_int  seed_used;
static atomic_flag failing = ATOMIC_FLAG_INIT;

uint64_t harness_seed(void) {
    atomic_store(&seed_used, 1);
    return seed_value;
}

static const char *short_path(const char *file) {
    const char *p = strstr(file, "tests/");
    return p != NULL ? p : file;
}

_Noreturn void harness_fail(const char *file, int line, const char *fmt, ...) {
    char last_error[2048];
    snprintf(last_error, sizeof last_error, "%s", vram_last_error());
    if (atomic_flag_test_and_set(&failing)) {
        for (;;) pause();  /* another thread is already reporting; the process is ending */
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "  %s: %s:%d: ", current_test, short_path(file), line);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fprintf(stdout, "\n  vram_last_error(): \"%s\"\n", last_error);
    if (atomic_load(&seed_used)) {
        fprintf(stdout, "  seed: %" PRIu64 " (set VRAM_TEST_SEED=%" PRIu64 " to repeat)\n",
                seed_value, seed_value);
    }
    fflush(stdout);
    _exit(1);
}

void harness_check_str(const char *file, int line, const char *expr, const char *got,
                       const char *want, int mode) {
    static const char *const ops[] = {"equals", "contains", "contains (ignoring case)",
                                      "does not contain"};
    int ok;
    if (got == NULL) {
        ok = 0;
    } else if (mode == 0) {
        ok = strcmp(got, want) == 0;
    } else if (mode == 1) {
        ok = strstr(got, want) != NULL;
    } else if (mode == 2) {
        ok = strcasestr(got, want) != NULL;
    } else {
        ok = strstr(got, want) == NULL;
    }
    if (!ok) {
        harness_fail(file, line, "CHECK(%s %s \"%s\")\n    got: %s%s%s", expr, ops[mode], want,
                     got ? "\"" : "", got ? got : "NULL", got ? "\"" : "");
    }
}

vram_memory_info harness_info(const char *file, int line, int dev) {
    vram_memory_info info;
    memset(&info, 0xAB, sizeof info);
    vram_status s = vram_get_memory_info(dev, &info);
    if (s != VRAM_OK) {
        harness_fail(file, line, "vram_get_memory_info(%d, &info)\n    expected VRAM_OK, got %s", dev,
                     vram_status_name(s));
    }
    return info;
}

void harness_check_info_eq(const char *file, int line, const vram_memory_info *a,
                           const vram_memory_info *b) {
#define INFO_FIELD_EQ(type, field)                                                             \
    if (a->field != b->field)                                                                  \
        harness_fail(file, line, "memory info changed: %s was %llu, is now %llu", #field,      \
                     (unsigned long long)a->field, (unsigned long long)b->field);
    VRAM_MEMORY_INFO_FIELDS(INFO_FIELD_EQ)
#undef INFO_FIELD_EQ
}

void harness_check_info_sane(const char *file, int line, const vram_memory_info *i) {
    size_t on_card = i->current - i->asleep_bytes;   /* (blocks asleep hold no memory: vram_sleep) */
    if (!(i->asleep_bytes <= i->current && on_card <= i->reserved && i->reserved <= i->limit &&
          i->current <= i->peak && i->reserved <= i->peak_reserved && i->largest_free_block <= i->reserved - on_card &&
          i->num_frees <= i->num_allocs)) {
        harness_fail(file, line,
                     "memory info is inconsistent: current %zu, peak %zu, reserved %zu, "
                     "peak_reserved %zu, limit %zu, largest_free_block %zu, allocs %" PRIu64
                     ", frees %" PRIu64,
                     i->current, i->peak, i->reserved, i->peak_reserved, i->limit,
                     i->largest_free_block, i->num_allocs, i->num_frees);
    }
}

void set_env(const char *name, const char *value) {
    int rc = value != NULL ? setenv(name, value, 1) : unsetenv(name);
    if (rc != 0) harness_fail(__FILE__, __LINE__, "setenv(%s): %s", name, strerror(errno));
}

void use_sim(const char *devices) {
    if (on_cuda) {   /* the fake driver's cards, as the simulated ones would be */
        set_env("VRAM_BACKEND", "cuda");
        set_env("FAKE_CUDA_MEM", devices);
        set_env("FAKE_CUDA_DEVICES", NULL);
        set_env("FAKE_CUDA_STREAMS", "lazy");   /* work pending until waited for, as on the simulated card */
        return;
    }
    set_env("VRAM_BACKEND", "sim");
    set_env("VRAM_SIM_DEVICES", devices);
}

void use_sim_growth(size_t limit, const char *conf) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, limit));
    CHECK_OK(vram_set_alloc_conf(conf));
}

/* ---- random numbers: splitmix64 ------------------------------------------------------------- */

test_rng rng_make(uint64_t seed) {
    test_rng r = {seed};
    return r;
}

uint64_t rng_next(test_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rng_below(test_rng *rng, uint64_t n) {
    return rng_next(rng) % n;
}

size_t rng_size_log(test_rng *rng, size_t lo, size_t hi) {
    /* pick a power-of-two band, then a uniform value inside it, clamped to [lo, hi] */
    int lo_bits = 0, hi_bits = 0;
    while (((size_t)1 << lo_bits) < lo) lo_bits++;
    while (((size_t)1 << hi_bits) < hi) hi_bits++;
    int bits = lo_bits + (int)rng_below(rng, (uint64_t)(hi_bits - lo_bits + 1));
    size_t top = (size_t)1 << bits;
    size_t v = top / 2 + (size_t)rng_below(rng, top / 2 + 1);
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return v;
}

/* ---- the child: one test ------------------------------------------------------------------- */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Removes every VRAM_* variable (except the harness's own VRAM_TEST_* and VRAM_MEMBARRIER, which a
 * whole run sets: ctest's vram.*_fenced) and CUDA_VISIBLE_DEVICES, so that each test starts from the
 * same environment and sets what it needs. */
static void clear_environment(void) {
    extern char **environ;
    for (;;) {
        char name[256] = "";
        for (char **e = environ; *e != NULL; e++) {
            int ours = strncmp(*e, "VRAM_", 5) == 0 && strncmp(*e, "VRAM_TEST_", 10) != 0 &&
                       strncmp(*e, "VRAM_MEMBARRIER=", 16) != 0;
            if (ours || strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0) {
                size_t len = strcspn(*e, "=");
                if (len >= sizeof name) len = sizeof name - 1;
                memcpy(name, *e, len);
                name[len] = '\0';
                break;
            }
        }
        if (name[0] == '\0') break;
        unsetenv(name);
    }
}

static _Noreturn void run_child(const test_entry *t, unsigned timeout_s) {
    current_test = t->name;
    const char *seed_env = getenv("VRAM_TEST_SEED");
    seed_value = seed_env != NULL ? strtoull(seed_env, NULL, 0) : name_hash(current_test);
    clear_environment();
    alarm(timeout_s);
    t->fn();
    if (vram_is_initialized()) {
        vram_status s = vram_check(-1);
        if (s != VRAM_OK) {
            harness_fail(__FILE__, __LINE__, "vram_check(-1) at the end of the test: %s",
                         vram_status_name(s));
        }
    }
    fflush(stdout);
    exit(0);
}

/* ---- the parent: runs the children, collects their output ------------------------------------ */

typedef struct buffer {
    char  *data;
    size_t len, cap;
} buffer;

static void buffer_append(buffer *b, const char *data, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (p == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs one test in a child; returns 1 when it passed. */
static int run_test(const test_entry *t, size_t number, size_t total, unsigned timeout_s, int verbose) {
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(2);
    }
    fflush(stdout);
    fflush(stderr);
    double start = now_seconds();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        run_child(t, timeout_s);
    }
    close(fds[1]);

    /* Read the child's output until it closes the pipe; kill it if it outlives its own alarm. */
    buffer out = {0};
    int killed = 0;
    for (;;) {
        struct pollfd p = {fds[0], POLLIN, 0};
        int rc = poll(&p, 1, 1000);
        if (rc < 0 && errno == EINTR) continue;
        if (rc > 0) {
            char chunk[4096];
            ssize_t n = read(fds[0], chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            buffer_append(&out, chunk, (size_t)n);
        }
        if (!killed && now_seconds() - start > timeout_s + 10.0) {
            kill(pid, SIGKILL);
            killed = 1;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    double elapsed = now_seconds() - start;

    char why[128] = "";
    int passed = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        passed = 1;
    } else if (WIFEXITED(status)) {
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGALRM || killed)) {
        snprintf(why, sizeof why, "timed out after %u s", timeout_s);
    } else if (WIFSIGNALED(status)) {
        snprintf(why, sizeof why, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    }
    int width = total >= 100 ? 3 : 2;
    if (passed) {
        printf("[%*zu/%zu] ok      %s (%.2f s)\n", width, number, total, t->name, elapsed);
    } else {
        printf("[%*zu/%zu] FAILED  %s (%s, %.2f s)\n", width, number, total, t->name, why, elapsed);
    }
    if ((!passed || verbose) && out.len > 0) {
        fputs(out.data, stdout);
        if (out.data[out.len - 1] != '\n') putchar('\n');
    }
    free(out.data);
    return passed;
}

/* PATTERN is matched against the name and against "group.name". */
static int selected_by(const char *pattern, const test_entry *t) {
    if (pattern == NULL || fnmatch(pattern, t->name, 0) == 0) return 1;
    char full[256];
    snprintf(full, sizeof full, "%s.%s", t->group, t->name);
    return fnmatch(pattern, full, 0) == 0;
}

int main(int argc, char **argv) {
    const char *pattern = NULL;
    int list_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            list_only = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [--list] [PATTERN]\n"
                   "  PATTERN: a test name, or a shell glob matched against NAME and GROUP.NAME ('env.*')\n"
                   "  VRAM_TEST_SEED=N fixes the random seed, VRAM_TEST_TIMEOUT=S the timeout per test\n"
                   "  (default 60 s), VRAM_TEST_VERBOSE=1 prints the output of passing tests\n",
                   argv[0]);
            return 0;
        } else if (pattern == NULL) {
            pattern = argv[i];
        } else {
            fprintf(stderr, "%s: one pattern at most\n", argv[0]);
            return 2;
        }
    }

    size_t selected = 0;
    for (size_t i = 0; i < num_tests; i++) {
        if (selected_by(pattern, &all_tests[i])) selected++;
    }
    if (list_only) {
        for (size_t i = 0; i < num_tests; i++) {
            if (selected_by(pattern, &all_tests[i])) printf("%s.%s\n", all_tests[i].group, all_tests[i].name);
        }
        return 0;
    }
    if (selected == 0) {
        fprintf(stderr, "%s: no test matches '%s'\n", argv[0], pattern);
        return 2;
    }

    const char *backend_env = getenv("VRAM_TEST_BACKEND");
    if (backend_env != NULL && strcmp(backend_env, "cuda") != 0 && strcmp(backend_env, "sim") != 0) {
        fprintf(stderr, "%s: VRAM_TEST_BACKEND='%s' is not valid: use 'sim' (the default) or 'cuda'\n", argv[0],
                backend_env);
        return 2;
    }
    on_cuda = backend_env != NULL && strcmp(backend_env, "cuda") == 0;
    for (size_t k = 0; k < sizeof cuda_skips / sizeof cuda_skips[0]; k++) {   /* no stale entry */
        size_t i = 0;
        while (i < num_tests && strcmp(all_tests[i].name, cuda_skips[k].name) != 0) i++;
        if (i == num_tests) {
            fprintf(stderr, "%s: tests/cuda_skips.h names %s, which test_list.h does not have\n", argv[0],
                    cuda_skips[k].name);
            return 2;
        }
    }

    const char *timeout_env = getenv("VRAM_TEST_TIMEOUT");
    unsigned timeout_s = timeout_env != NULL ? (unsigned)strtoul(timeout_env, NULL, 10) : 60;
    if (timeout_s == 0) timeout_s = 60;
    const char *verbose_env = getenv("VRAM_TEST_VERBOSE");
    int verbose = verbose_env != NULL && strcmp(verbose_env, "0") != 0;
    signal(SIGPIPE, SIG_IGN);

    size_t passed = 0, failed = 0, skipped = 0, number = 0;
    for (size_t i = 0; i < num_tests; i++) {
        if (!selected_by(pattern, &all_tests[i])) continue;
        const char *why = skip_reason(&all_tests[i]);
        if (why != NULL) {
            printf("[%*zu/%zu] skip    %s (%s)\n", selected >= 100 ? 3 : 2, ++number, selected, all_tests[i].name,
                   why);
            skipped++;
        } else if (run_test(&all_tests[i], ++number, selected, timeout_s, verbose)) {
            passed++;
        } else {
            failed++;
        }
    }
    if (skipped > 0) printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
    else printf("%zu passed, %zu failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

/* ---- block contents and the simulated driver's counters ---- */

/* The pattern byte at offset `off` of a block written with `tag`. */
static unsigned char fill_pattern(size_t off, unsigned tag) {
    return (unsigned char)(tag * 31u + off / 4096 + off % 4096);
}

void *malloc_free_once(void *arg) {
    (void)arg;
    void *p = NULL;
    if (vram_malloc(&p, 64 * KiB, 0) == VRAM_OK) vram_free(p);
    return NULL;
}

/* On the CUDA backend device memory is not host memory (the fake driver's has no bytes at all, and a
 * library that touched a device pointer would crash there as on a GPU). fill and block_tag then
 * record their tag for the range in a shadow of device memory, and filled and block_tagged check that
 * the newest record over each byte they sample has the tag and that the driver holds memory under
 * the whole block (tests/shim's fake_cuda_backed). As the bytes on the simulated card, the shadow
 * shows a block handed out over a live one; the driver's answer shows memory unmapped under it. */
typedef struct shadow_record {
    uintptr_t base;
    size_t    n;
    uint64_t  tag;
} shadow_record;

static pthread_mutex_t shadow_lock = PTHREAD_MUTEX_INITIALIZER;
static shadow_record  *shadow;
static size_t          shadow_n, shadow_cap;

static void shadow_write(const void *p, size_t n, uint64_t tag) {
    uintptr_t base = (uintptr_t)p;
    pthread_mutex_lock(&shadow_lock);
    size_t kept = 0;
    for (size_t i = 0; i < shadow_n; i++) {   /* records wholly under the new one are gone */
        if (shadow[i].base >= base && shadow[i].base + shadow[i].n <= base + n) continue;
        shadow[kept++] = shadow[i];
    }
    shadow_n = kept;
    if (shadow_n == shadow_cap) {
        size_t cap = shadow_cap ? 2 * shadow_cap : 256;
        shadow_record *r = realloc(shadow, cap * sizeof *r);
        if (r == NULL) harness_fail(__FILE__, __LINE__, "out of host memory for the shadow of device memory");
        shadow = r;
        shadow_cap = cap;
    }
    shadow[shadow_n++] = (shadow_record){base, n, tag};
    pthread_mutex_unlock(&shadow_lock);
}

/* The tag of the newest record over address a: 1 and *tag, or 0 when none covers it. */
static int shadow_tag_at(uintptr_t a, uint64_t *tag) {
    for (size_t i = shadow_n; i-- > 0;) {
        if (a >= shadow[i].base && a - shadow[i].base < shadow[i].n) {
            *tag = shadow[i].tag;
            return 1;
        }
    }
    return 0;
}

static int shadow_holds(const void *p, size_t n, uint64_t tag, int sampled) {
    fake_cuda_backed_fn *backed = (fake_cuda_backed_fn *)harness_fake("fake_cuda_backed");
    if (!backed((unsigned long long)(uintptr_t)p, n)) return 0;
    uintptr_t base = (uintptr_t)p;
    int ok = 1;
    uint64_t got = 0;
    pthread_mutex_lock(&shadow_lock);
    for (size_t off = 0; ok && off < n; off += sampled ? 4096 : n) ok = shadow_tag_at(base + off, &got) && got == tag;
    if (ok && sampled) ok = shadow_tag_at(base + n - 1, &got) && got == tag;
    pthread_mutex_unlock(&shadow_lock);
    return ok;
}

void block_tag(void *p, size_t n, uint64_t tag) {
    if (n < sizeof tag) return;
    if (on_cuda) shadow_write(p, sizeof tag, tag);
    else memcpy(p, &tag, sizeof tag);
}

int block_tagged(const void *p, size_t n, uint64_t tag) {
    uint64_t got = tag;
    if (n < sizeof tag) return 1;
    if (on_cuda) return shadow_holds(p, n, tag, 0);
    memcpy(&got, p, sizeof got);
    return got == tag;
}

/* Writes one byte per 4 KiB page (and the last byte) of a block. */
void fill(void *p, size_t n, unsigned tag) {
    if (on_cuda) {
        shadow_write(p, n, tag);
        return;
    }
    unsigned char *b = p;
    for (size_t off = 0; off < n; off += 4096) b[off] = fill_pattern(off, tag);
    b[n - 1] = fill_pattern(n - 1, tag);
}

/* 1 when the pattern of fill() is still there. */
int filled(const void *p, size_t n, unsigned tag) {
    if (on_cuda) return shadow_holds(p, n, tag, 1);
    const unsigned char *b = p;
    for (size_t off = 0; off < n; off += 4096) {
        if (b[off] != fill_pattern(off, tag)) return 0;
    }
    return b[n - 1] == fill_pattern(n - 1, tag);
}

/* Balanced driver calls: everything taken was given back (after a shutdown). */
void check_counters_balanced(void) {
    vram__backend_counters c = sim_counters();
    CHECK_U64(c.mem_alloc, ==, c.mem_free);
    CHECK_U64(c.phys_create, ==, c.phys_release);
    CHECK_U64(c.map, ==, c.unmap);
    CHECK_U64(c.va_reserve, ==, c.va_free);
}
