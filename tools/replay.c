/*
 * replay.c: `vram replay TRACE [--growth] [--limit SIZE] [--json]`.
 *
 * Order: read and check the whole trace (trace.c); make sure there is a device (without a GPU
 * and with VRAM_BACKEND unset, switch to a simulated card large enough for the trace); configure
 * card 0 (growth, limit); vram_init(); replay every event on logical device 0, timing each
 * vram_malloc / vram_free call alone with CLOCK_MONOTONIC; read the statistics; free what is
 * still live (untimed); vram_shutdown(); print the report.
 *
 * A failed allocation is counted, its first message kept, and its later free skipped; `ops` is
 * the number of calls made (and timed). A failed free is an error (exit 1): it means a bug.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "replay.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <vram.h>

#include "trace.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

enum { SLOT_NONE, SLOT_LIVE, SLOT_FAILED, SLOT_FREED };

typedef struct replay_result {
    size_t   ops, allocs, frees, failed_allocs, skipped_frees;
    uint64_t total_ns;
    size_t   peak_reserved, limit_bytes;
    uint64_t driver_allocs, driver_frees;
    int      growth;
    char     backend[32];
    char     first_error[4096];
} replay_result;

typedef struct replay_state {
    const trace *t;
    void       **ptrs;   /* by slot */
    uint8_t     *slot;   /* SLOT_* by slot */
} replay_state;

static FILE *text_out(const replay_options *opt) { return opt->json ? stderr : stdout; }

static void report_status(const char *what, vram_status s) {
    fprintf(stderr, "vram replay: %s: %s: %s\n", what, vram_status_name(s), vram_last_error());
}

static const char *backend_env(void) {
    const char *b = getenv("VRAM_BACKEND");
    return b && *b ? b : NULL;
}

/* ---- device discovery and the simulated fallback -------------------------------------------- */

static int fall_back_to_sim(const trace *t, const char *reason) {
    uint64_t bytes = t->peak_live_bytes + t->peak_live_bytes / 4 + 4 * GIB;
    char size[32];
    snprintf(size, sizeof size, "%" PRIu64 "MiB", (bytes + MIB - 1) / MIB);
    fprintf(stderr, "vram replay: no GPU (%s); replaying on a simulated %s card\n", reason, size);
    /* CUDA_VISIBLE_DEVICES named real cards; the sim applies it too and could hide this one. */
    if (getenv("CUDA_VISIBLE_DEVICES"))
        fprintf(stderr, "vram replay: ignoring CUDA_VISIBLE_DEVICES for the simulated card\n");
    if (setenv("VRAM_BACKEND", "sim", 1) != 0 || setenv("VRAM_SIM_DEVICES", size, 1) != 0 ||
        unsetenv("CUDA_VISIBLE_DEVICES") != 0) {
        perror("vram replay: setenv");
        return -1;
    }
    return 0;
}

static int ensure_device(const trace *t) {
    int n = 0;
    vram_status s = vram_list_physical_devices(NULL, 0, &n);
    if (s == VRAM_OK) return 0;
    if (s == VRAM_ERR_NO_DEVICE && !backend_env()) {
        char reason[512];
        snprintf(reason, sizeof reason, "%s", vram_last_error());
        return fall_back_to_sim(t, reason);
    }
    if (s == VRAM_ERR_NO_DEVICE)
        fprintf(stderr, "vram replay: No GPU found: %s\n", vram_last_error());
    else
        report_status("vram_list_physical_devices", s);
    return -1;
}

/* ---- configuration -------------------------------------------------------------------------- */

static int configure(const replay_options *opt) {
    vram_status s;
    if (opt->growth && (s = vram_set_memory_growth(0, 1)) != VRAM_OK) {
        report_status("vram_set_memory_growth", s);
        return -1;
    }
    if (opt->has_limit && (s = vram_set_memory_limit(0, opt->limit_bytes)) != VRAM_OK) {
        report_status("vram_set_memory_limit", s);
        return -1;
    }
    if ((s = vram_init()) != VRAM_OK) {
        report_status("vram_init", s);
        return -1;
    }
    return 0;
}

/* Growth in force: VRAM_FORCE_ALLOW_GROWTH=true|false wins over the API, as in TensorFlow. */
static int growth_in_force(void) {
    const char *env = getenv("VRAM_FORCE_ALLOW_GROWTH");
    static const char *const yes[] = { "true", "1", "yes", "on" }, *const no[] = { "false", "0", "no", "off" };
    for (size_t i = 0; env && i < 4; i++) {
        if (strcasecmp(env, yes[i]) == 0) return 1;
        if (strcasecmp(env, no[i]) == 0) return 0;
    }
    int enabled = -1;
    return vram_get_memory_growth(0, &enabled) == VRAM_OK && enabled == 1;
}

/* ---- the replay loop ------------------------------------------------------------------------ */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void replay_alloc(replay_state *st, size_t i, replay_result *r) {
    const trace_event *e = &st->t->events[i];
    void *p = NULL;
    uint64_t t0 = now_ns();
    vram_status s = vram_malloc(&p, (size_t)e->bytes, 0);
    r->total_ns += now_ns() - t0;
    r->ops++;
    r->allocs++;
    if (s == VRAM_OK) {
        st->ptrs[e->slot] = p;
        st->slot[e->slot] = SLOT_LIVE;
        return;
    }
    st->slot[e->slot] = SLOT_FAILED;
    if (r->failed_allocs++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "event %zu, alloc of %" PRIu64 " bytes: %s: %s",
                 i + 1, e->bytes, vram_status_name(s), vram_last_error());
}

static int replay_free(replay_state *st, size_t i, replay_result *r) {
    const trace_event *e = &st->t->events[i];
    if (st->slot[e->slot] != SLOT_LIVE) {
        r->skipped_frees++;
        return 0;
    }
    uint64_t t0 = now_ns();
    vram_status s = vram_free(st->ptrs[e->slot]);
    r->total_ns += now_ns() - t0;
    r->ops++;
    r->frees++;
    if (s != VRAM_OK) {
        fprintf(stderr, "vram replay: event %zu: ", i + 1);
        report_status("vram_free", s);
        return -1;
    }
    st->slot[e->slot] = SLOT_FREED;
    return 0;
}

static int replay_events(replay_state *st, replay_result *r) {
    for (size_t i = 0; i < st->t->num_events; i++) {
        if (st->t->events[i].kind == TRACE_ALLOC)
            replay_alloc(st, i, r);
        else if (replay_free(st, i, r) != 0)
            return -1;
    }
    return 0;
}

static int free_live(replay_state *st) {
    int rc = 0;
    for (size_t i = 0; i < st->t->num_slots; i++) {
        if (st->slot[i] != SLOT_LIVE) continue;
        vram_status s = vram_free(st->ptrs[i]);
        if (s != VRAM_OK && rc == 0) {
            report_status("vram_free (cleanup)", s);
            rc = -1;
        }
        st->slot[i] = SLOT_FREED;
    }
    return rc;
}

static int read_info(vram_memory_info *info) {
    vram_status s = vram_get_memory_info(0, info);
    if (s != VRAM_OK) report_status("vram_get_memory_info", s);
    return s == VRAM_OK ? 0 : -1;
}

/* Replays, collects the statistics, frees the rest and shuts down. */
static int run_runtime(replay_state *st, replay_result *r) {
    vram_memory_info info;
    r->growth = growth_in_force();
    int rc = replay_events(st, r);
    if (rc == 0 && (rc = read_info(&info)) == 0) {
        r->peak_reserved = info.peak_reserved;
        r->limit_bytes = info.limit;
    }
    if (free_live(st) != 0) rc = -1;
    if (rc == 0 && (rc = read_info(&info)) == 0) {
        r->driver_allocs = info.num_driver_allocs;
        r->driver_frees = info.num_driver_frees;
    }
    vram_status s = vram_shutdown();
    if (s != VRAM_OK) {
        report_status("vram_shutdown", s);
        rc = -1;
    }
    return rc;
}

/* ---- the report ----------------------------------------------------------------------------- */

static double ratio(const trace *t, const replay_result *r) {
    return t->peak_live_bytes ? (double)r->peak_reserved / (double)t->peak_live_bytes : 0.0;
}

static double ns_per_op(const replay_result *r) {
    return r->ops ? (double)r->total_ns / (double)r->ops : 0.0;
}

void tool_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void print_json(const replay_options *opt, const trace *t, const replay_result *r) {
    printf("{\"trace\": ");
    tool_json_string(stdout, opt->trace_path);
    printf(", \"backend\": ");
    tool_json_string(stdout, r->backend);
    printf(", \"growth\": %s, \"limit_bytes\": %zu", r->growth ? "true" : "false", r->limit_bytes);
    printf(", \"ops\": %zu, \"allocs\": %zu, \"frees\": %zu", r->ops, r->allocs, r->frees);
    printf(", \"peak_live_bytes\": %" PRIu64 ", \"peak_reserved_bytes\": %zu", t->peak_live_bytes,
           r->peak_reserved);
    printf(", \"reserved_to_live\": %.3f, \"ns_per_op\": %.1f", ratio(t, r), ns_per_op(r));
    printf(", \"driver_allocs\": %" PRIu64 ", \"driver_frees\": %" PRIu64, r->driver_allocs,
           r->driver_frees);
    printf(", \"failed_allocs\": %zu, \"skipped_frees\": %zu, \"first_error\": ", r->failed_allocs,
           r->skipped_frees);
    if (r->failed_allocs) tool_json_string(stdout, r->first_error);
    else fputs("null", stdout);
    printf("}\n");
}

static void print_text(const replay_options *opt, const trace *t, const replay_result *r) {
    FILE *f = text_out(opt);
    double gib = (double)GIB;
    fprintf(f, "trace:            %s\n", opt->trace_path);
    fprintf(f, "backend:          %s\n", r->backend);
    fprintf(f, "mode:             %s, limit %.2f GiB (%zu bytes)\n",
            r->growth ? "growth" : "preallocated", (double)r->limit_bytes / gib, r->limit_bytes);
    fprintf(f, "ops:              %zu (%zu allocs, %zu frees, %zu frees skipped)\n", r->ops,
            r->allocs, r->frees, r->skipped_frees);
    fprintf(f, "peak live:        %.2f GiB (%" PRIu64 " bytes)\n",
            (double)t->peak_live_bytes / gib, t->peak_live_bytes);
    fprintf(f, "peak reserved:    %.2f GiB (%zu bytes)\n", (double)r->peak_reserved / gib,
            r->peak_reserved);
    fprintf(f, "reserved / live:  %.3f\n", ratio(t, r));
    fprintf(f, "ns / op:          %.1f\n", ns_per_op(r));
    fprintf(f, "driver allocs:    %" PRIu64 "\n", r->driver_allocs);
    fprintf(f, "driver frees:     %" PRIu64 "\n", r->driver_frees);
    fprintf(f, "failed allocs:    %zu\n", r->failed_allocs);
    if (r->failed_allocs) fprintf(f, "first failure:    %s\n", r->first_error);
}

/* ---- entry point ---------------------------------------------------------------------------- */

static int replay_trace(const replay_options *opt, const trace *t) {
    replay_result r = { 0 };
    replay_state st = { .t = t };
    if (ensure_device(t) != 0 || configure(opt) != 0) return 1;
    snprintf(r.backend, sizeof r.backend, "%s", backend_env() ? backend_env() : "cuda");
    st.ptrs = calloc(t->num_slots ? t->num_slots : 1, sizeof *st.ptrs);
    st.slot = calloc(t->num_slots ? t->num_slots : 1, sizeof *st.slot);
    int rc = 1;
    if (!st.ptrs || !st.slot) {
        fprintf(stderr, "vram replay: out of memory\n");
        vram_shutdown();
    } else if (run_runtime(&st, &r) == 0) {
        print_text(opt, t, &r);
        if (opt->json) print_json(opt, t, &r);
        rc = 0;
    }
    free(st.ptrs);
    free(st.slot);
    return rc;
}

int replay_run(const replay_options *opt) {
    trace t;
    char err[1024];
    if (trace_load(opt->trace_path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = replay_trace(opt, &t);
    trace_release(&t);
    return rc;
}
