/*
 * unit_main.c: the runner of the pool's unit tests (see unit.h). Each test runs in a forked child
 * under an alarm (VRAM_TEST_TIMEOUT seconds, default 30); the parent prints one line a test, the
 * output of a failing one (of every one with VRAM_TEST_VERBOSE=1), and "N passed, M failed" (ctest
 * fails on a nonzero count). Its seed is
 * the test name's FNV-1a hash unless VRAM_TEST_SEED is set, so a run repeats exactly.
 */
#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

#define UNIT_MAX_TESTS 512

typedef struct unit_entry {
    const char *group, *name;
    unit_fn     fn;
} unit_entry;

static unit_entry tests[UNIT_MAX_TESTS];
static size_t     ntests;

void unit_register(const char *group, const char *name, unit_fn fn) {
    if (ntests == UNIT_MAX_TESTS) {
        fprintf(stderr, "unit: more than %d tests: raise UNIT_MAX_TESTS\n", UNIT_MAX_TESTS);
        abort();
    }
    tests[ntests++] = (unit_entry){group, name, fn};
}

/* ---- the child: one test ------------------------------------------------------------------- */

static const char *current = "";
static uint64_t    seed;
static int         seed_used;
static char        note[512];

uint64_t unit_rng_next(unit_rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t unit_rng_below(unit_rng *r, uint64_t n) {
    return unit_rng_next(r) % n;
}

unit_rng unit_rng_make(void) {
    seed_used = 1;
    return (unit_rng){seed};
}

static void (*fail_print)(void *ctx);
static void *fail_ctx;

void unit_on_failure(void (*print)(void *ctx), void *ctx) {
    fail_print = print;
    fail_ctx = ctx;
}

void unit_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, sizeof note, fmt, ap);
    va_end(ap);
}

_Noreturn void unit_fail(const char *file, int line, const char *fmt, ...) {
    const char *tail = strstr(file, "tests/");
    va_list ap;
    va_start(ap, fmt);
    printf("  %s: %s:%d: ", current, tail != NULL ? tail : file, line);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (note[0] != '\0') printf("  at: %s\n", note);
    if (fail_print != NULL) {
        void (*print)(void *) = fail_print;
        fail_print = NULL;                 /* (a check failing inside it ends here) */
        print(fail_ctx);
    }
    if (seed_used) printf("  seed: %" PRIu64 " (set VRAM_TEST_SEED=%" PRIu64 " to repeat)\n", seed, seed);
    fflush(stdout);
    _exit(1);
}

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static _Noreturn void run_child(const unit_entry *t, unsigned timeout_s) {
    current = t->name;
    const char *env = getenv("VRAM_TEST_SEED");
    seed = env != NULL ? strtoull(env, NULL, 0) : name_hash(t->name);
    alarm(timeout_s);
    t->fn();
    fflush(stdout);
    exit(0);
}

/* ---- the parent ------------------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 1 when the test passed. Its output goes to a temporary file, printed when it failed. */
static int run_one(const unit_entry *t, size_t k, size_t n, unsigned timeout_s, int verbose) {
    FILE *out = tmpfile();
    if (out == NULL) {
        perror("unit: tmpfile");
        exit(2);
    }
    fflush(stdout);
    double start = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        perror("unit: fork");
        exit(2);
    }
    if (pid == 0) {
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(out), STDERR_FILENO);
        run_child(t, timeout_s);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    double took = now_s() - start;
    int passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char why[96] = "";
    if (WIFEXITED(status) && !passed) {
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        snprintf(why, sizeof why, "timed out after %u s", timeout_s);
    } else if (WIFSIGNALED(status)) {
        snprintf(why, sizeof why, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    }
    if (passed) {
        printf("[%3zu/%zu] ok      %s.%s (%.3f s)\n", k, n, t->group, t->name, took);
    } else {
        printf("[%3zu/%zu] FAILED  %s.%s (%s, %.3f s)\n", k, n, t->group, t->name, why, took);
    }
    if (!passed || verbose) {
        rewind(out);
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, out)) > 0) fwrite(buf, 1, got, stdout);
    }
    fclose(out);
    return passed;
}

static int selected(const char *pattern, const unit_entry *t) {
    if (pattern == NULL || fnmatch(pattern, t->name, 0) == 0) return 1;
    char full[256];
    snprintf(full, sizeof full, "%s.%s", t->group, t->name);
    return fnmatch(pattern, full, 0) == 0;
}

int main(int argc, char **argv) {
    const char *pattern = NULL;
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [--list] [PATTERN]\n"
                   "  PATTERN: a test name, or a shell glob matched against NAME and GROUP.NAME ('vmm.*')\n"
                   "  VRAM_TEST_SEED=N fixes the random seed, VRAM_TEST_TIMEOUT=S the timeout per test (30 s),\n"
                   "  VRAM_TEST_VERBOSE=1 prints the output of passing tests too\n",
                   argv[0]);
            return 0;
        } else if (pattern == NULL) {
            pattern = argv[i];
        } else {
            fprintf(stderr, "%s: one pattern at most\n", argv[0]);
            return 2;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < ntests; i++) {
        if (!selected(pattern, &tests[i])) continue;
        n++;
        if (list) printf("%s.%s\n", tests[i].group, tests[i].name);
    }
    if (list) return 0;
    if (n == 0) {
        fprintf(stderr, "%s: no test matches '%s'\n", argv[0], pattern ? pattern : "");
        return 2;
    }
    const char *env = getenv("VRAM_TEST_TIMEOUT");
    unsigned timeout_s = env != NULL && atoi(env) > 0 ? (unsigned)atoi(env) : 30;
    env = getenv("VRAM_TEST_VERBOSE");
    int verbose = env != NULL && strcmp(env, "0") != 0;
    size_t passed = 0, failed = 0, k = 0;
    for (size_t i = 0; i < ntests; i++) {
        if (!selected(pattern, &tests[i])) continue;
        if (run_one(&tests[i], ++k, n, timeout_s, verbose)) passed++; else failed++;
    }
    printf("%zu passed, %zu failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
