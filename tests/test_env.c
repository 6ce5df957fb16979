/*
 * test_env.c: the environment variables, good and bad values, and their precedence over the API.
 */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "runtime/env.h"

/* vram_init fails with VRAM_ERR_INVALID_ARGUMENT naming `name` (and `value` when given), and
 * leaves the runtime stopped. */
static void check_init_rejects(const char *name, const char *value) {
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_CONTAINS(vram_last_error(), name);
    if (value != NULL && value[0] != '\0') CHECK_CONTAINS(vram_last_error(), value);
    CHECK_INT(vram_is_initialized(), ==, 0);
}

/* ---- VRAM_FORCE_ALLOW_GROWTH ---------------------------------------------------------------- */

TEST(env_force_growth_true_overrides_program) {
    use_sim("16GiB");
    set_env("VRAM_FORCE_ALLOW_GROWTH", "true");
    CHECK_OK(vram_set_memory_growth(0, 0));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, <=, NEAR_ZERO);
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 100 * MiB, 0));
    CHECK_SIZE(INFO(0).reserved, <, 4 * GiB);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

TEST(env_force_growth_false_overrides_program) {
    use_sim("16GiB");
    set_env("VRAM_FORCE_ALLOW_GROWTH", "false");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, ==, tf_default_limit(16 * GiB));
    CHECK_ALL();
}

TEST(env_force_growth_applies_to_every_card) {
    use_sim("2x16GiB");
    set_env("VRAM_FORCE_ALLOW_GROWTH", "true");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).reserved, <=, NEAR_ZERO);
    CHECK_SIZE(INFO(1).reserved, <=, NEAR_ZERO);
}

TEST(env_force_growth_bad_value) {
    use_sim("16GiB");
    set_env("VRAM_FORCE_ALLOW_GROWTH", "maybe");
    check_init_rejects("VRAM_FORCE_ALLOW_GROWTH", "maybe");
}

TEST(env_membarrier_bad_value) {
    use_sim("16GiB");
    set_env("VRAM_MEMBARRIER", "sometimes");
    check_init_rejects("VRAM_MEMBARRIER", "sometimes");
}

/* ---- VRAM_MEMORY_LIMIT and VRAM_MEMORY_LIMIT_<i> -------------------------------------------- */

TEST(env_memory_limit) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "2GiB");
    CHECK_OK(vram_init());
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.limit, ==, 2 * GiB);
    CHECK_SIZE(info.reserved, ==, 2 * GiB);
    CHECK_ALL();
}

TEST(env_memory_limit_overrides_larger_api_limit) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "2GiB");
    CHECK_OK(vram_set_memory_limit(0, 4 * GiB));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 2 * GiB);
}

TEST(env_memory_limit_overrides_smaller_api_limit) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "2GiB");
    CHECK_OK(vram_set_memory_limit(0, 1 * GiB));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 2 * GiB);
}

TEST(env_memory_limit_bad_values) {
    use_sim("16GiB");
    const char *bad[] = {"abc", "-5", "", "5X"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_env("VRAM_MEMORY_LIMIT", bad[i]);
        check_init_rejects("VRAM_MEMORY_LIMIT", bad[i]);
    }
    set_env("VRAM_MEMORY_LIMIT", "1GiB");  /* each failed start cached nothing */
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 1 * GiB);
}

/* A limit never turns into no limit: a size of 0 bytes, or one that rounds to nothing, is refused
 * by name, for every card and for one. */
TEST(env_memory_limit_of_zero_bytes_is_refused) {
    use_sim("2x16GiB");
    const char *zero[] = {"0", "0.4", "0K"};
    const char *names[] = {"VRAM_MEMORY_LIMIT", "VRAM_MEMORY_LIMIT_1"};
    for (size_t n = 0; n < 2; n++) {
        for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
            set_env(names[n], zero[i]);
            check_init_rejects(names[n], zero[i]);
            CHECK_CONTAINS(vram_last_error(), "larger than zero");
        }
        set_env(names[n], NULL);
    }
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(1).limit, ==, tf_default_limit(16 * GiB));
}

TEST(env_memory_limit_above_card_is_conflict) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "100GiB");
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_init());
    CHECK_CONTAINS(vram_last_error(), "VRAM_MEMORY_LIMIT");
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(env_memory_limit_per_card) {
    use_sim("2x16GiB");
    set_env("VRAM_MEMORY_LIMIT_1", "1G");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(16 * GiB));
    CHECK_SIZE(INFO(1).limit, ==, 1 * GiB);
    CHECK_SIZE(INFO(1).reserved, ==, 1 * GiB);
}

TEST(env_memory_limit_per_card_takes_precedence) {
    use_sim("2x16GiB");
    set_env("VRAM_MEMORY_LIMIT", "2GiB");
    set_env("VRAM_MEMORY_LIMIT_1", "3GiB");
    CHECK_OK(vram_set_memory_limit(1, 1 * GiB));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 2 * GiB);
    CHECK_SIZE(INFO(1).limit, ==, 3 * GiB);
}

TEST(env_memory_limit_per_card_unknown_card) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT_7", "1G");
    check_init_rejects("VRAM_MEMORY_LIMIT_7", NULL);
}

TEST(env_memory_limit_per_card_bad_value) {
    use_sim("2x16GiB");
    set_env("VRAM_MEMORY_LIMIT_1", "lots");
    check_init_rejects("VRAM_MEMORY_LIMIT_1", "lots");
}

TEST(env_memory_limit_per_card_above_card_is_conflict) {
    use_sim("16GiB,8GiB");
    set_env("VRAM_MEMORY_LIMIT_1", "12GiB");
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_init());
    CHECK_INT(vram_is_initialized(), ==, 0);
}

TEST(env_memory_limit_with_growth) {
    use_sim("16GiB");
    set_env("VRAM_MEMORY_LIMIT", "512MiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 256 * MiB, 0));
    void *q = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&q, 300 * MiB, 0));
    CHECK_SIZE(INFO(0).reserved, <=, 512 * MiB);
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

/* ---- VRAM_MEMORY_FRACTION ------------------------------------------------------------------- */

TEST(env_memory_fraction) {
    use_sim("16GiB,8GiB");
    set_env("VRAM_MEMORY_FRACTION", "0.5");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 8 * GiB);
    CHECK_SIZE(INFO(0).reserved, ==, 8 * GiB);
    CHECK_SIZE(INFO(1).limit, ==, 4 * GiB);
}

TEST(env_memory_fraction_and_limit_smaller_wins) {
    use_sim("2x16GiB");
    set_env("VRAM_MEMORY_FRACTION", "0.25");
    set_env("VRAM_MEMORY_LIMIT_0", "2GiB");
    CHECK_OK(vram_set_memory_limit(1, 8 * GiB));
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 2 * GiB);   /* 2 GiB < 4 GiB */
    CHECK_SIZE(INFO(1).limit, ==, 4 * GiB);   /* 4 GiB < 8 GiB */
}

TEST(env_memory_fraction_bad_values) {
    use_sim("16GiB");
    const char *bad[] = {"0", "1.5", "x", "-0.5", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_env("VRAM_MEMORY_FRACTION", bad[i]);
        check_init_rejects("VRAM_MEMORY_FRACTION", bad[i]);
    }
    set_env("VRAM_MEMORY_FRACTION", "1");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, 16 * GiB);
}

/* ---- VRAM_SIM_DEVICES, VRAM_SIM_FAIL_ALLOC_AFTER, VRAM_BACKEND ------------------------------ */

TEST(env_sim_devices_count_times_size) {
    use_sim("2x16GiB");
    vram_physical_device devs[2];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(devs, 2, &n));
    CHECK_INT(n, ==, 2);
    CHECK_SIZE(devs[0].total_bytes, ==, 16 * GiB);
    CHECK_SIZE(devs[1].total_bytes, ==, 16 * GiB);
    CHECK_OK(vram_init());
}

TEST(env_sim_devices_list) {
    use_sim("80GiB,24GiB");
    CHECK_OK(vram_init());
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(80 * GiB));
    CHECK_SIZE(INFO(1).limit, ==, tf_default_limit(24 * GiB));
}

/* "@MAJOR.MINOR" after a size: the compute capability of those cards (9.0 otherwise). */
TEST(env_sim_devices_compute_capability) {
    use_sim("16GiB@8.6,2x8GiB@7.5,4GiB,1GiB@10.0");
    vram_physical_device devs[5];
    int n = 0;
    CHECK_OK(vram_list_physical_devices(devs, 5, &n));
    CHECK_INT(n, ==, 5);
    const int major[] = {8, 7, 7, 9, 10}, minor[] = {6, 5, 5, 0, 0};
    const size_t total[] = {16 * GiB, 8 * GiB, 8 * GiB, 4 * GiB, 1 * GiB};
    for (int i = 0; i < 5; i++) {
        CHECK_INT(devs[i].compute_major, ==, major[i]);
        CHECK_INT(devs[i].compute_minor, ==, minor[i]);
        CHECK_SIZE(devs[i].total_bytes, ==, total[i]);
    }
}

/* Without a limit or growth every card takes TensorFlow's default at start: its free memory less
 * MinSystemMemory (tensorflow/core/common_runtime/gpu/gpu_device.cc): 225 MiB when less than 2 GiB
 * is free, else by the compute capability's major: 500 MiB up to 6.x, 1050 up to 7.x, 1536 up to
 * 8.x, 1800 from 9.0. The cards are empty at start: free memory is their size. */
TEST(env_default_limit_follows_compute_capability) {
    use_sim("4GiB@9.0,4GiB@8.9,4GiB@8.0,4GiB@7.5,4GiB@7.0,4GiB@6.1,4GiB@10.0,1536MiB@8.6,2GiB@8.6");
    CHECK_OK(vram_init());
    const size_t reserve_mib[] = {1800, 1536, 1536, 1050, 1050, 500, 1800, 225, 1536};
    const size_t size[] = {4 * GiB, 4 * GiB, 4 * GiB, 4 * GiB, 4 * GiB, 4 * GiB, 4 * GiB, 1536 * MiB, 2 * GiB};
    for (int i = 0; i < 9; i++) {
        vram_memory_info info = INFO(i);
        CHECK_SIZE(info.limit, ==, size[i] - reserve_mib[i] * MiB);
        CHECK_SIZE(info.reserved, ==, info.limit);       /* taken at start */
    }
    CHECK_ALL();
}

TEST(env_sim_devices_bad_values) {
    const char *bad[] = {"2x", "0x16GiB", "foo", "", "16GiB,", "x16GiB", "65x1GiB", "2x0", "16GiB@",
                         "16GiB@8", "16GiB@8.", "16GiB@.6", "16GiB@x.0", "16GiB@0.0", "16GiB@8.10",
                         "16GiB@100.0", "16GiB@-8.6", "@8.6", "2x@8.6", "16GiB@8.6@8.6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        use_sim(bad[i]);
        int n = 99;
        CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_list_physical_devices(NULL, 0, &n));
        CHECK_CONTAINS(vram_last_error(), "VRAM_SIM_DEVICES");
        check_init_rejects("VRAM_SIM_DEVICES", bad[i]);
    }
    use_sim("16GiB@8");                                  /* the message says what a capability is */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_init());
    CHECK_ERROR_CONTAINS("compute capability is MAJOR.MINOR");
    use_sim("16GiB");
    CHECK_OK(vram_init());
}

TEST(env_sim_fail_alloc_after_bad_value) {
    use_sim("16GiB");
    set_env("VRAM_SIM_FAIL_ALLOC_AFTER", "abc");
    check_init_rejects("VRAM_SIM_FAIL_ALLOC_AFTER", "abc");
}

TEST(env_backend_sim) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    vram_physical_device dev;
    int n = 0;
    CHECK_OK(vram_list_physical_devices(&dev, 1, &n));
    CHECK_STR_EQ(dev.product, "vram simulated GPU");
}

TEST(env_backend_bogus) {
    set_env("VRAM_BACKEND", "bogus");
    check_init_rejects("VRAM_BACKEND", "bogus");
}

TEST(env_read_at_start_only) {
    use_sim("16GiB");
    CHECK_OK(vram_init());
    set_env("VRAM_MEMORY_LIMIT", "abc");  /* too late to matter */
    set_env("VRAM_FORCE_ALLOW_GROWTH", "maybe");
    CHECK_OK(vram_init());
    void *p = NULL;
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_SIZE(INFO(0).limit, ==, tf_default_limit(16 * GiB));
}

/* ---- VRAM_ALLOC_CONF's table ---------------------------------------------------------------- */

/* The text of the source file `path` (relative to the repository), NUL-terminated; the caller frees it. */
static char *read_source(const char *path) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", VRAM_SOURCE_DIR, path);
    FILE *f = fopen(full, "rb");
    CHECK(f != NULL);
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc((size_t)n + 1, 1);
    CHECK(text != NULL && fread(text, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    return text;
}

/* The option table (VRAM_ALLOC_CONF_OPTIONS in src/runtime/env.h) is the parser's; the docs that
 * describe options to people are written by hand (docs/reference.md, vram.h): each must name every key of the
 * table. `vram --help` lists them from vram_alloc_conf_option, which must give every key, in the
 * table's order, with its value's form (cli_test.sh checks the help names every key). */
TEST(env_alloc_conf_options_documented) {
    char *readme = read_source("docs/reference.md"), *header = read_source("include/vram.h");
    if (readme == NULL || header == NULL) return;
    int i = 0;
    const char *key = NULL, *value = NULL;
#define DOCUMENTED(k, kind, type, def, min, max, want)                                            \
    CHECK_CONTAINS(readme, "`" #k ":");                                                            \
    CHECK_CONTAINS(header, " " #k ":");                                                            \
    CHECK_INT(vram_alloc_conf_option(i, &key, &value), ==, 1);                                    \
    CHECK_STR_EQ(key, #k);                                                                         \
    CHECK_STR_EQ(value, strcmp(#kind, "BOOL") == 0 ? "true|false" : strcmp(#kind, "PLACE") == 0 ? "none|host" : "N"); \
    i++;
    VRAM_ALLOC_CONF_OPTIONS(DOCUMENTED)
#undef DOCUMENTED
    CHECK_INT(vram_alloc_conf_option(i, &key, &value), ==, 0);
    CHECK_INT(vram_alloc_conf_option(-1, NULL, NULL), ==, 0);
    free(readme);
    free(header);
}
