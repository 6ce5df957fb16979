/*
 * bench/lib_loop.c: replays a trace through libvram.so loaded with dlopen, as PyTorch and Python
 * load it: vram_malloc / vram_free on logical device 0 with memory growth, PASSES times, what a pass
 * leaves live freed between passes. bench/instructions.sh counts its instructions with callgrind;
 * the `vram` tool links libvram statically, so its replay loop is not what callers of the shared
 * library run (no cross-library inlining, thread-locals through __tls_get_addr).
 *
 *   gzip -dc TRACE | lib_loop LIBVRAM_SO PASSES [plugin]   (the trace format of traces/README.md)
 *
 * With `plugin`, through the entry points PyTorch's CUDAPluggableAllocator calls instead
 * (vram_plugin_alloc / vram_plugin_free on card 0, one stream), as vram.torch.install() runs them.
 *
 * Prints the events and passes, then the wall time of one warm call: passes 2..PASSES (the first
 * maps the memory) timed with CLOCK_MONOTONIC, divided by their calls (bench/warm_ns.sh compares
 * libraries with it).
 *
 * With LIB_LOOP_STATS=N in the environment, the last pass also calls vram_get_allocator_stats (what
 * torch.cuda.memory_stats() calls) every N events and says how many times: bench/plan_cost.sh counts
 * those calls' instructions with callgrind's --toggle-collect.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vram.h"

typedef struct event {
    char   op;     /* 'a' or 'f' */
    long   id;
    size_t size;
} event;

static vram_status (*malloc_fn)(void **, size_t, int);
static vram_status (*free_fn)(void *);
static vram_status (*growth_fn)(int, int);
static const char *(*error_fn)(void);
static vram_status (*info_fn)(int, vram_memory_info *);
static vram_status (*stats_fn)(int, vram_allocator_stats *);
static void *(*plugin_alloc_fn)(ptrdiff_t, int, void *);
static void (*plugin_free_fn)(void *, ptrdiff_t, int, void *);
static int plugin;                 /* through the plugin entry points */
#define PLUGIN_STREAM ((void *)0x1)

/* One allocation or free, the way the caller asked for (0: done). */
static int do_alloc(void **p, size_t size) {
    if (!plugin) return malloc_fn(p, size, 0) != VRAM_OK;
    *p = plugin_alloc_fn((ptrdiff_t)size, 0, PLUGIN_STREAM);
    return *p == NULL;
}

static int do_free(void *p) {
    if (!plugin) return free_fn(p) != VRAM_OK;
    plugin_free_fn(p, 0, 0, PLUGIN_STREAM);
    return 0;
}

static int load(const char *path) {
    void *lib = dlopen(path, RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "lib_loop: %s\n", dlerror());
        return -1;
    }
    malloc_fn = (vram_status(*)(void **, size_t, int))dlsym(lib, "vram_malloc");
    free_fn = (vram_status(*)(void *))dlsym(lib, "vram_free");
    growth_fn = (vram_status(*)(int, int))dlsym(lib, "vram_set_memory_growth");
    error_fn = (const char *(*)(void))dlsym(lib, "vram_last_error");
    info_fn = (vram_status(*)(int, vram_memory_info *))dlsym(lib, "vram_get_memory_info");
    stats_fn = (vram_status(*)(int, vram_allocator_stats *))dlsym(lib, "vram_get_allocator_stats");
    plugin_alloc_fn = (void *(*)(ptrdiff_t, int, void *))dlsym(lib, "vram_plugin_alloc");
    plugin_free_fn = (void (*)(void *, ptrdiff_t, int, void *))dlsym(lib, "vram_plugin_free");
    return malloc_fn && free_fn && growth_fn && error_fn && info_fn && stats_fn && plugin_alloc_fn && plugin_free_fn ? 0 : -1;
}

int main(int argc, char **argv) {
    int passes = argc > 2 ? atoi(argv[2]) : 0;
    plugin = argc > 3 && strcmp(argv[3], "plugin") == 0;
    if (passes < 1 || (argc > 3 && !plugin)) {
        fprintf(stderr, "usage: gzip -dc TRACE | lib_loop LIBVRAM_SO PASSES [plugin]\n");
        return 2;
    }
    if (load(argv[1]) != 0) return 1;
    size_t cap = 1024, n = 0;
    long max_id = 0;
    event *ev = malloc(cap * sizeof *ev);
    char line[256];
    while (ev != NULL && fgets(line, sizeof line, stdin) != NULL) {
        event e = {line[0], 0, 0};
        if (e.op == 'a' && sscanf(line + 1, "%ld %zu", &e.id, &e.size) != 2) continue;
        if (e.op == 'f' && sscanf(line + 1, "%ld", &e.id) != 1) continue;
        if ((e.op != 'a' && e.op != 'f') || e.id < 0) continue;
        if (n == cap) {
            event *more = realloc(ev, 2 * cap * sizeof *ev);
            if (more == NULL) break;
            ev = more;
            cap *= 2;
        }
        ev[n++] = e;
        if (e.id > max_id) max_id = e.id;
    }
    void **ptr = calloc((size_t)max_id + 1, sizeof *ptr);
    if (ev == NULL || ptr == NULL || growth_fn(0, 1) != VRAM_OK) {
        fprintf(stderr, "lib_loop: no memory or no runtime\n");
        return 1;
    }
    long failed_frees = 0, stats_calls = 0;
    const char *every_s = getenv("LIB_LOOP_STATS");
    long every = every_s != NULL ? atol(every_s) : 0;
    struct timespec t0 = {0}, t1 = {0};
    long warm_calls = 0;
    for (int p = 0; p < passes; p++) {
        if (p == 1) clock_gettime(CLOCK_MONOTONIC, &t0);
        if (p >= 1) warm_calls += (long)n;
        for (size_t i = 0; i < n; i++) {
            if (every > 0 && p == passes - 1 && i % (size_t)every == 0) {
                vram_allocator_stats st;
                if (stats_fn(0, &st) != VRAM_OK) {
                    fprintf(stderr, "lib_loop: vram_get_allocator_stats: %s\n", error_fn());
                    return 1;
                }
                stats_calls++;
            }
            if (ev[i].op == 'a') {
                if (do_alloc(&ptr[ev[i].id], ev[i].size) != 0) {
                    fprintf(stderr, "lib_loop: allocation %ld of %zu bytes failed: %s\n", ev[i].id, ev[i].size,
                            error_fn());
                    return 1;
                }
            } else if (ptr[ev[i].id] != NULL) {
                failed_frees += do_free(ptr[ev[i].id]);
                ptr[ev[i].id] = NULL;
            }
        }
        for (long k = 0; k <= max_id; k++) {
            if (ptr[k] != NULL) failed_frees += do_free(ptr[k]);
            ptr[k] = NULL;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    vram_memory_info info = {0};
    if (failed_frees > 0 || info_fn(0, &info) != VRAM_OK || info.current != 0) {
        fprintf(stderr, "lib_loop: %ld frees failed, %zu bytes still in use\n", failed_frees, info.current);
        return 1;
    }
    printf("%zu events, %d passes\n", n, passes);
    if (stats_calls > 0) printf("stats calls: %ld\n", stats_calls);
    if (warm_calls > 0) {
        double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        printf("warm call: %.2f ns (passes 2..%d, %ld calls)\n", ns / (double)warm_calls, passes, warm_calls);
    }
    free(ptr);
    free(ev);
    return 0;
}
