/*
 * api_fuzz.c: libFuzzer harness for random sequences of public calls on the simulated card, with
 * vram_check after each: every input is a program of one-byte opcodes and their arguments (allocations
 * of all kinds, frees of every kind, record_stream, trim, memory fraction, live limits and limits
 * posted from outside, private pools, CUDA-graph captures, tags, sleep and wake, statistics, allocator
 * options before the start, overflow to host memory). Any broken invariant, crash or sanitizer report
 * is a finding.
 * Built with the other fuzzers (VRAM_BUILD_FUZZERS=ON with clang; the library is instrumented too):
 *   build-fuzz/api_fuzz -max_total_time=60 tests/fuzz/corpus/api
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/sim_hooks.h"
#include "runtime/runtime.h"
#include "vram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIVE 64

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static unsigned take(reader *r) {
    return r->p < r->end ? *r->p++ : 0;
}

static size_t take_size(reader *r) {        /* 0 .. 64 MiB, skewed small */
    unsigned a = take(r), b = take(r);
    return ((size_t)a << (b % 19)) + (b & 7) * 256;
}

static void check_or_die(const char *what) {
    if (vram_check(-1) != VRAM_OK) {
        fprintf(stderr, "api_fuzz: vram_check failed after %s: %s\n", what, vram_last_error());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int env_set;
    if (!env_set) {
        setenv("VRAM_BACKEND", "sim", 1);
        setenv("VRAM_SIM_DEVICES", "2x1GiB", 1);
        env_set = 1;
    }
    static const char *tags[] = {NULL, "weights", "kv", "graph"};
    reader r = {data, data + size};
    vram_set_tag(NULL);
    void *live[LIVE] = {0};
    int pools[4] = {-1, -1, -1, -1};
    int captures = 0;                                   /* vram_capture_begin without its end yet */
    unsigned flags = take(&r);
    vram_set_memory_growth(0, flags & 1);
    vram_set_memory_growth(1, (flags >> 1) & 1);
    if (flags & 4) vram_set_memory_limit(0, (size_t)(take(&r) + 1) << 20);
    static const char *confs[] = {"", "arenas:1,plan:true", "small_pool_kb:0", "map_ahead_mb:0,extent_mb:2", "hold_peak:true",
                                  "hold_large_mb:4,extent_mb:4", "thread_cache_mb:0", "vmm:false"};
    char conf[96];
    snprintf(conf, sizeof conf, "%s%s", confs[(flags >> 3) & 7],
             (flags & 0xc0) == 0 ? "" : (flags & 0xc0) == 0x40 ? ",overflow:host" : ",overflow:host,overflow_max_mb:8");
    vram_set_alloc_conf(conf[0] == ',' ? conf + 1 : conf);
    while (r.p < r.end) {
        unsigned op = take(&r) % 18, k = take(&r) % LIVE, dev = take(&r) & 1;
        void *stream = (void *)(uintptr_t)(take(&r) % 3);   /* NULL, 0x1, 0x2 */
        switch (op) {
        case 0: case 1:
            if (live[k] == NULL) vram_malloc(&live[k], take_size(&r), (int)dev);
            break;
        case 2:
            if (live[k] == NULL) vram_malloc_async(&live[k], take_size(&r), 0, stream);
            break;
        case 3:
            if (live[k] != NULL && vram_free(live[k]) == VRAM_OK) live[k] = NULL;
            break;
        case 4:
            if (live[k] != NULL && vram_free_async(live[k], stream) == VRAM_OK) live[k] = NULL;
            break;
        case 5:
            if (live[k] != NULL) vram_plugin_release(live[k]), live[k] = NULL;
            break;
        case 6:
            if (live[k] != NULL) vram_record_stream(live[k], stream);
            break;
        case 7:
            vram_trim((int)dev, take_size(&r));
            break;
        case 8:
            vram_set_memory_fraction(0, (double)(take(&r) % 101) / 100.0);
            break;
        case 9: {
            int *pool = &pools[k % 4];
            if (*pool < 0) vram_private_pool_create(0, pool);
            else if (live[k] == NULL) vram_private_malloc_async(&live[k], take_size(&r), 0, *pool, stream);
            break;
        }
        case 10: {
            int *pool = &pools[k % 4];
            if (*pool >= 0 && vram_private_pool_release(0, *pool) == VRAM_OK) *pool = -1;
            break;
        }
        case 11:
            if (captures == 0 || (take(&r) & 1)) {
                if (vram_capture_begin(0) == VRAM_OK) captures++;
            } else if (vram_capture_end(0) == VRAM_OK) {
                captures--;
            }
            break;
        case 12:
            vram_set_tag(tags[k % 4]);
            break;
        case 13:
            vram_sleep((int)dev, tags[k % 4], (take(&r) & 1) ? VRAM_SLEEP_DISCARD : VRAM_SLEEP_OFFLOAD);
            break;
        case 14:
            vram_wake((int)dev, tags[k % 4]);
            break;
        case 15: {                                      /* the program's own limit, within the configured one */
            size_t configured = 0, live_limit = 0;
            if (vram_get_live_limit((int)dev, &live_limit, &configured) == VRAM_OK)
                vram_set_live_limit((int)dev, take(&r) == 0 ? configured : configured / 256 * take(&r));
            break;
        }
        case 16: {                                      /* a limit from outside: none, or some MiB */
            unsigned v = take(&r);
            vram__limit_post((int)dev, v < 32 ? SIZE_MAX : (size_t)v << 20);
            break;
        }
        default: {
            vram_allocator_stats st;
            vram_memory_info info;
            vram_get_allocator_stats((int)dev, &st);
            vram_get_memory_info((int)dev, &info);
            if (take(&r) & 1) vram__sim_stream_complete(stream);
            break;
        }
        }
        check_or_die("a call");
    }
    while (captures > 0) {
        if (vram_capture_end(0) != VRAM_OK) {
            fprintf(stderr, "api_fuzz: a capture could not be ended: %s\n", vram_last_error());
            abort();
        }
        captures--;
    }
    for (int k = 0; k < LIVE; k++) {
        if (live[k] != NULL && vram_free(live[k]) != VRAM_OK) {
            fprintf(stderr, "api_fuzz: a live block could not be freed: %s\n", vram_last_error());
            abort();
        }
    }
    for (int i = 0; i < 4; i++) {
        if (pools[i] >= 0) vram_private_pool_release(0, pools[i]);
    }
    vram__sim_stream_complete((void *)1);
    vram__sim_stream_complete((void *)2);
    vram__sim_stream_complete(NULL);
    check_or_die("the frees");
    if (vram_shutdown() != VRAM_OK) {
        fprintf(stderr, "api_fuzz: shutdown refused with nothing live: %s\n", vram_last_error());
        abort();
    }
    vram_set_alloc_conf(NULL);
    vram_set_memory_limit(0, 0);
    vram__limit_post(0, SIZE_MAX);
    vram__limit_post(1, SIZE_MAX);
    vram_set_tag(NULL);
    return 0;
}
