/*
 * trace_fuzz.c: libFuzzer harness for the trace reader of `vram replay` (traces are user input).
 * Build: cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVRAM_BUILD_FUZZERS=ON && cmake --build
 * build-fuzz --target trace_fuzz && build-fuzz/trace_fuzz -max_total_time=120
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
