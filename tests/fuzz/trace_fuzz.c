/*
 * trace_fuzz.c: libFuzzer harness for the trace reader of `vram replay` (traces are user input), and
 * for the JSON string writer (json.c) that writes the names and frames traces carry: any bytes must
 * come out as one quoted string of valid UTF-8 without a raw control character.
 * Build: cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVRAM_BUILD_FUZZERS=ON && cmake --build
 * build-fuzz --target trace_fuzz && build-fuzz/trace_fuzz -max_total_time=120
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether [s, s + n) is well-formed UTF-8 (decoded the long way, independently of json.c). */
static int utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || i + len > n) return 0;
        uint32_t cp = len == 1 ? c : c & (0x7fu >> len);
        for (unsigned k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3fu);
        }
        static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

/* The data up to its first NUL through json_string (and the HTML variant): one quoted string, valid
 * UTF-8, no raw C0, DEL or C1 control, no raw '<' in the HTML one. */
static void check_json(const uint8_t *data, size_t size, int html) {
    char *in = malloc(size + 1), *out = NULL;
    size_t n = 0;
    if (!in) return;
    memcpy(in, data, size);
    in[size] = '\0';
    FILE *f = open_memstream(&out, &n);
    if (!f) { free(in); return; }
    if (html) json_string_html(f, in);
    else json_string(f, in);
    fclose(f);
    const unsigned char *o = (const unsigned char *)out;
    if (n < 2 || o[0] != '"' || o[n - 1] != '"' || !utf8_ok(o, n)) abort();
    for (size_t i = 0; i < n; i++)
        if (o[i] < 0x20 || o[i] == 0x7f || (o[i] == 0xc2 && i + 1 < n && o[i + 1] < 0xa0) || (html && o[i] == '<'))
            abort();
    free(in);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_json(data, size, size & 2);
    if (size > 0 && data[0] == 0x1f) return 0;   /* gzip input runs `gzip -dc`: not fuzzed here */
    char path[] = "/tmp/vram-trace-fuzz-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    trace t;
    char err[512];
    /* odd sizes through the detail reader of vram report (times, ids, '# frames', '# reserved') */
    int rc = size & 1 ? trace_load_detail(path, &t, err, sizeof err) : trace_load(path, &t, err, sizeof err);
    if (rc == 0 && t.detail) {   /* every time lies from the earliest to the latest (report's time axis) */
        const trace_detail *d = t.detail;
        uint64_t span = trace_time_since_min(d, d->time_max_us);
        for (size_t i = 0; i < t.num_events; i++)
            if (d->time_us[i] < d->time_min_us || d->time_us[i] > d->time_max_us ||
                trace_time_since_min(d, d->time_us[i]) > span)
                abort();
    }
    if (rc == 0) trace_release(&t);
    unlink(path);
    return 0;
}
