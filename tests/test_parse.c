/*
 * test_parse.c: vram_parse_size, and the durations of the tools (vram__parse_duration).
 */
#include "harness.h"
#include "common/common.h"

typedef struct size_case {
    const char *text;
    size_t      bytes;
} size_case;

TEST(parse_size_good) {
    const size_case cases[] = {
        {"512", 512},
        {"0", 0},
        {"4K", 4 * KiB},
        {"4KB", 4 * KiB},
        {"4KiB", 4 * KiB},
        {"4k", 4 * KiB},
        {"6GiB", 6 * GiB},
        {"1.5G", 3 * GiB / 2},
        {"2T", 2048 * GiB},
        {"2TB", 2048 * GiB},
        {"100M", 100 * MiB},
        {"18446744073709551615", SIZE_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t bytes = 12345;
        vram_status s = vram_parse_size(cases[i].text, &bytes);
        if (s != VRAM_OK) harness_fail(__FILE__, __LINE__, "vram_parse_size(\"%s\"): %s",
                                       cases[i].text, vram_status_name(s));
        if (bytes != cases[i].bytes)
            harness_fail(__FILE__, __LINE__, "vram_parse_size(\"%s\") = %zu, expected %zu",
                         cases[i].text, bytes, cases[i].bytes);
    }
}

/* Every string is refused with VRAM_ERR_INVALID_ARGUMENT and a message. */
static void check_all_refused(const char *const *bad, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t bytes = 12345;
        vram_status s = vram_parse_size(bad[i], &bytes);
        if (s != VRAM_ERR_INVALID_ARGUMENT)
            harness_fail(__FILE__, __LINE__, "vram_parse_size(\"%s\"): expected "
                         "VRAM_ERR_INVALID_ARGUMENT, got %s (bytes %zu)", bad[i],
                         vram_status_name(s), bytes);
        CHECK(vram_last_error()[0] != '\0');
    }
}

TEST(parse_size_bad) {
    const char *bad[] = {"", "abc", "5X", "-1", "99999999999T", "18446744073709551616",
                         "4 KiBs", "1.5.2G", "G", "4Ki", "nan", "inf"};
    check_all_refused(bad, sizeof bad / sizeof bad[0]);
}

/* Only decimal numbers: strtod's hexadecimal form must not slip through ("0x10G" is not 16 GiB). */
TEST(parse_size_rejects_hexadecimal) {
    const char *bad[] = {"0x10", "0x10G", "0x1p4"};
    check_all_refused(bad, sizeof bad / sizeof bad[0]);
}

TEST(parse_size_null_arguments) {
    size_t bytes = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_parse_size(NULL, &bytes));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_parse_size("1G", NULL));
}

/* Durations (vram run --idle-sleep, --vram-idle-sleep): a number and ms, s, m, h or d (seconds when
 * none); nothing else, nothing of 0, under a millisecond or over a year. */
TEST(parse_duration) {
    static const struct { const char *text; uint64_t ns; } good[] = {
        {"30", 30000000000ull}, {"90s", 90000000000ull}, {"10m", 600000000000ull},
        {"1.5h", 5400000000000ull}, {"500ms", 500000000ull}, {"1d", 86400000000000ull}, {".5s", 500000000ull},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t ns = 7;
        if (vram__parse_duration(good[i].text, &ns) != 0 || ns != good[i].ns)
            harness_fail(__FILE__, __LINE__, "vram__parse_duration(\"%s\") = %llu, expected %llu", good[i].text,
                         (unsigned long long)ns, (unsigned long long)good[i].ns);
    }
    static const char *const bad[] = {"", "0", "0s", "-5s", "5x", "5 s", "s", "1e3", "0x10", "nan", "inf",
                                      "0.1ms", "400d", "10min", "5sec", " 5s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ns = 7;
        if (vram__parse_duration(bad[i], &ns) == 0)
            harness_fail(__FILE__, __LINE__, "vram__parse_duration(\"%s\") accepted (%llu ns)", bad[i],
                         (unsigned long long)ns);
        CHECK(ns == 7);
    }
    uint64_t ns = 0;
    CHECK(vram__parse_duration(NULL, &ns) == -1);
}
