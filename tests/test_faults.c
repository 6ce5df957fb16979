/*
 * test_faults.c: faults from outside the allocator that must not lift a limit, crash or hang a
 * program, or give a wrong answer: a fraction that rounds to nothing, a decimal-comma locale,
 * malformed variable names and option values, too many logical devices, hidden cards, settings after
 * the start, stream-ordered frees in other arenas, fork while other threads are inside vram.
 */
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MAX_LOGICAL 256   /* the runtime's VRAM_MAX_LOGICAL */

TEST(faults_fraction_that_rounds_to_nothing_is_refused) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "1GiB");
    set_env("VRAM_MEMORY_FRACTION", "1e-20");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());   /* not "no limit": every limit would be gone */
    CHECK_ERROR_CONTAINS("VRAM_MEMORY_FRACTION=1e-20");
    CHECK_ERROR_CONTAINS("0 bytes");
}

/* A decimal-comma locale for this process (generated with localedef into a folder of its own). */
static void use_decimal_comma_locale(void) {
    char dir[] = "/tmp/vram-locale-XXXXXX", cmd[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
    CHECK(system(cmd) == 0);
    setenv("LOCPATH", dir, 1);
    CHECK(setlocale(LC_ALL, "de_DE.UTF-8") != NULL);
    CHECK(strtod("1.5", NULL) == 1.0);               /* the C library's own parse changed */
}

TEST(faults_sizes_and_fractions_ignore_the_locale) {
    use_decimal_comma_locale();
    size_t n = 0;
    CHECK_OK(vram_parse_size("1.5G", &n));
    CHECK_SIZE(n, ==, 3 * GiB / 2);
    CHECK_OK(vram_parse_size("0.5K", &n));
    CHECK_SIZE(n, ==, 512);
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_parse_size("1,5G", &n));
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "1.5G");
    set_env("VRAM_MEMORY_FRACTION", "0.5");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 3 * GiB / 2);
    CHECK_OK(vram_shutdown());
    set_env("VRAM_MEMORY_LIMIT", NULL);
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 8 * GiB);
}

TEST(faults_malformed_names_and_values_are_refused_by_name) {
    use_sim("2x16GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("arenas:+2"));
    CHECK_ERROR_CONTAINS("'arenas:+2'");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("arenas: -2"));
    CHECK_OK(vram_set_alloc_conf(" extent_mb: 4 ")); /* spaces around a key or value: fine */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_alloc_conf("nosuch:1"));
    CHECK_ERROR_CONTAINS("'nosuch:1'");
    CHECK_OK(vram_set_alloc_conf(NULL));
    set_env("VRAM_MEMORY_LIMIT_+0", "1GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("VRAM_MEMORY_LIMIT_+0");
    set_env("VRAM_MEMORY_LIMIT_+0", NULL);
    set_env("VRAM_MEMORY_LIMIT_ 0", "1GiB");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("VRAM_MEMORY_LIMIT_ 0");
    set_env("VRAM_MEMORY_LIMIT_ 0", NULL);
    set_env("VRAM_MEMORY_LIMIT_1", "1GiB");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(1).limit, ==, 1 * GiB);
}

TEST(faults_too_many_logical_devices_are_refused_at_the_call) {
    use_sim("2x16GiB");
    static vram_logical_device_configuration configs[MAX_LOGICAL + 1];
    for (int k = 0; k <= MAX_LOGICAL; k++) configs[k].memory_limit_mb = 16;
    /* card 1 keeps one logical device, so card 0 may have 255 */
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_logical_device_configuration(0, configs, MAX_LOGICAL));
    CHECK_ERROR_CONTAINS("at most 256 logical devices");
    CHECK_OK(vram_set_logical_device_configuration(0, configs, MAX_LOGICAL - 1));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_logical_device_configuration(1, configs, 2));
    int none = 0;
    CHECK_OK(vram_set_visible_devices(&none, 1));    /* card 1 hidden: it counts for nothing */
    CHECK_OK(vram_set_logical_device_configuration(0, configs, MAX_LOGICAL));
    int count = 0;
    CHECK_OK(vram_list_logical_devices(NULL, 0, &count));
    CHECK_INT(count, ==, MAX_LOGICAL);
}

TEST(faults_hidden_cards_are_not_planned) {
    use_sim("80GiB,24GiB");
    int first = 0;
    CHECK_OK(vram_set_visible_devices(&first, 1));
    set_env("VRAM_MEMORY_LIMIT", "40G");              /* more than card 1 has, but card 1 is hidden */
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 40 * GiB);
}

TEST(faults_settings_after_start_one_rule) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "2GiB");
    set_env("VRAM_ALLOC_CONF", "arenas:4");
    set_env("VRAM_FORCE_ALLOW_GROWTH", "true");
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_set_alloc_conf("arenas:2"));
    CHECK_OK(vram_set_memory_growth(0, 0));
    CHECK_OK(vram_init());
    /* what the program set is not in force (the environment overrode it): refused, all three alike */
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_limit(0, 4 * GiB));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_alloc_conf("arenas:2"));
    CHECK_STATUS(VRAM_ERR_ALREADY_INITIALIZED, vram_set_memory_growth(0, 0));
    /* what is in force: OK */
    CHECK_OK(vram_set_memory_limit(0, 2 * GiB));
    CHECK_OK(vram_set_alloc_conf("arenas:4"));
    CHECK_OK(vram_set_memory_growth(0, 1));
}

/* Two threads, so two arenas, each with a block freed on a stream that has not completed. */
static void *malloc_1gib(void *out) {
    if (vram_malloc((void **)out, 1 * GiB, 0) != VRAM_OK) *(void **)out = NULL;
    return NULL;
}

TEST(faults_a_request_waits_for_stream_frees_in_every_arena) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    void *a = NULL, *b = NULL, *all = NULL;
    pthread_t t[2];
    CHECK(pthread_create(&t[0], NULL, malloc_1gib, &a) == 0);
    pthread_join(t[0], NULL);
    CHECK(pthread_create(&t[1], NULL, malloc_1gib, &b) == 0);
    pthread_join(t[1], NULL);
    CHECK(a != NULL && b != NULL);
    CHECK_OK(vram_free_async(a, (void *)0x1));
    CHECK_OK(vram_free_async(b, (void *)0x2));
    CHECK_OK(vram_malloc(&all, 4 * GiB, 0));         /* the whole limit: nothing is live */
    CHECK_OK(vram_free(all));
    CHECK_ALL();
}

/* ---- fork while other threads are inside vram ------------------------------------------------- */

static atomic_int fork_stop;

static void *busy_allocating(void *arg) {
    (void)arg;
    while (!atomic_load(&fork_stop)) {
        void *p = NULL;
        if (vram_malloc(&p, 64 * KiB, 0) == VRAM_OK) vram_free(p);
    }
    return NULL;
}

static void *busy_configuring(void *arg) {
    (void)arg;
    while (!atomic_load(&fork_stop)) {
        vram_memory_info info;
        (void)vram_get_memory_info(0, &info);
        (void)vram_set_memory_growth(0, 1);           /* after the start: a writer each time */
        (void)vram_trim(0, 0);
        vram_check(0);
    }
    return NULL;
}

TEST(faults_fork_while_threads_are_inside_vram) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_alloc_conf("idle_release_ms:5"));   /* the idle thread too */
    CHECK_OK(vram_init());
    pthread_t t[4];
    atomic_store(&fork_stop, 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, i < 2 ? busy_allocating : busy_configuring, NULL) == 0);
    for (int round = 0; round < 20; round++) {
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {                             /* every kind of call works, nothing hangs */
            alarm(20);
            void *p = NULL;
            vram_memory_info info;
            int ok = vram_malloc(&p, 1 * MiB, 0) == VRAM_OK && vram_free(p) == VRAM_OK &&
                     vram_get_memory_info(0, &info) == VRAM_OK && vram_set_memory_growth(0, 1) == VRAM_OK &&
                     vram_trim(0, 0) == VRAM_OK && vram_check(-1) == VRAM_OK;
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        CHECK(waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&fork_stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK_ALL();
}
