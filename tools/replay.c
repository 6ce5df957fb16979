/*
 * replay.c: `vram replay TRACE [--policy NAME | --growth] [--limit SIZE] [--passes N]
 *           [--threads N] [--json]`.
 *
 * Order: read and check the whole trace (trace.c; allocation ids are already dense allocation
 * numbers, so the replay indexes plain arrays and never hashes); make sure there is a device (without a
 * GPU and with VRAM_BACKEND unset, switch to a simulated card large enough for `threads` copies of
 * the trace and the limit, of at most 16 TiB: a larger limit is refused); configure card 0 from the policy table (growth, allocator options) and the limit;
 * vram_init(); replay; read the statistics; vram_shutdown(); print the report.
 *
 * Files: this one owns the policy table, the device and the simulated fallback, the configuration
 * and the entry point; replay_loop.c the timed loop, its threads, the passes' sums and the SIGINT
 * flag; replay_report.c the text and JSON reports; replay_impl.h the state they share.
 *
 * Passes and threads. Each of `threads` threads replays the whole trace on logical device 0 with
 * its own array of pointers, `passes` times, in the same runtime. A pass is, for every thread:
 *   barrier; timed loop over every event; barrier; free what the trace left live (untimed);
 *   barrier; thread 0 sums the pass and reads the driver counters (untimed).
 * So every pass starts with no live allocation but with whatever memory the pool kept: pass 1 is
 * cold (the pool starts empty and takes memory from the driver), passes 2..N are warm.
 *
 * Timing. A call takes some tens of ns, about what clock_gettime costs, so calls are not timed one
 * by one: each thread reads CLOCK_MONOTONIC before and after its loop over the whole trace. The
 * loop does the vram_malloc / vram_free call and O(1) array bookkeeping (pointer and state by
 * allocation number, counters), nothing else; the first failure of a thread also formats its
 * message. A pass's `loop_ns` is the sum of its threads' loop times, its `wall_ns` runs from the
 * first thread's start to the last thread's end.
 *
 * Progress and Ctrl-C. The loop runs in batches of REPLAY_BATCH events; after each batch a thread
 * looks at a flag that SIGINT sets (the handler is installed for the replay only, and a second
 * Ctrl-C kills as usual), and thread 0 prints "pass P/N, percent, rate" on stderr at most four times
 * a second when stderr is a terminal (inside its timed loop: a terminal's replay times a little
 * more). On SIGINT every thread stops after its batch, the pass is closed as usual and the report
 * printed says where it stopped; the exit status is then 130.
 *
 * Tail reserved / live (tail_reserved_to_live). Over pass 1's last quarter, from just before event
 * q = n - n/4 (n the trace's events; q = n when n < 4) to just after the last: the highest reserved
 * bytes (what the pool holds from the driver, vram_memory_info.reserved: one device-wide total, all
 * threads' arenas) over the highest live bytes of the trace there (requested bytes not yet freed, as
 * peak_live_bytes counts them, failed allocations included; x threads, so with threads an upper
 * bound as peak_live_bytes is). How: pass 1's timed loop is cut in two at q. Every thread stops its
 * clock at q and waits at a barrier; thread 0 keeps the peaks so far (peak_reserved, peak) and calls
 * vram_reset_memory_stats (peak_reserved = reserved now); a second barrier; the loops go on timed.
 * After pass 1, peak_reserved is the tail's highest reserved (read after the cleanup, which only frees
 * and so never raises it); the final peaks reported are the higher of the kept and the final ones
 * (exact for peak_reserved; for peak_in_use with threads, a sum of arenas' peaks, possibly lower
 * than without the reset, never below the exact peak). Cost: two barriers, two memory-info reads and
 * one reset (every arena's lock once) in pass 1, all outside the timed loops; pass 1's wall_ns adds
 * its two loops' spans and leaves the pause out; the tail's live bytes are one walk over the trace
 * before the runtime starts. Null in the JSON ("n/a" in the text) when pass 1 stopped before its end
 * (Ctrl-C) or nothing was live there.
 *
 * Exit status: 0 the replay ran and every allocation succeeded; 3 it ran and some failed (0 with
 * --allow-failures, for runs where failures are the measurement); 130 interrupted; 1 errors.
 *
 * Counting. `ops` is the number of calls made (allocations, failed ones included, and frees) over
 * all passes and threads: passes x threads x the trace's events when nothing fails. A failed
 * allocation is counted, its first message kept, and its later free skipped (not a call, not an
 * op). A failed free is an error (exit 1): it means a bug.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "replay_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <vram.h>

#include "common/common.h"

#include "cli.h"
#include "trace.h"

/* ---- the policy table ----------------------------------------------------------------------- */

const replay_policy replay_policies[] = {
    /* name            growth  alloc conf   description (for --help) */
    { "prealloc",      0,      NULL,        "growth off: take nearly the whole card at start, TensorFlow's default" },
    { "growth",        1,      NULL,        "memory growth: physical extents mapped into a reserved range as blocks need them" },
    { "growth-hold",   1,      "hold_large_mb:256,extent_mb:256",
      "memory growth that moves idle memory under a block of 256 MiB or more rather than map more, "
      "alloc conf hold_large_mb:256,extent_mb:256" },
    { "growth-plain",  1,      "vmm:false", "memory growth with separate cuMemAlloc regions, alloc conf vmm:false" },
    { "growth-lean",   1,      "hold_peak:true,extent_mb:64",
      "memory growth that gives idle 64 MiB extents back rather than raise its peak (fewer bytes, more driver calls)" },
    { "growth-shared", 1,      "arenas:1",
      "memory growth with every thread in one arena (its thread caches), instead of spread over up to 8" },
};
const size_t replay_num_policies = sizeof replay_policies / sizeof replay_policies[0];

const replay_policy *replay_find_policy(const char *name) {
    for (size_t i = 0; i < replay_num_policies; i++)
        if (strcmp(replay_policies[i].name, name) == 0) return &replay_policies[i];
    return NULL;
}

/* ---- shared helpers (replay_impl.h) --------------------------------------------------------- */

/* Which command is talking (replay_start_runtime is also vram report's). */
static const char *tool_name = "vram replay";

void replay_report_status(const char *what, vram_status s) {
    fprintf(stderr, "%s: %s: %s: %s\n", tool_name, what, vram_status_name(s), vram_last_error());
}

static const char *backend_env(void) {
    const char *b = getenv("VRAM_BACKEND");
    return b && *b ? b : NULL;
}

static int opt_passes(const replay_options *opt) { return opt->passes > 0 ? opt->passes : 1; }
static int opt_threads(const replay_options *opt) { return opt->threads > 0 ? opt->threads : 1; }
const replay_policy *replay_opt_policy(const replay_options *opt) {
    return opt->policy ? opt->policy : &replay_policies[0];
}

/* ---- device discovery and the simulated fallback -------------------------------------------- */

/* A card of 1.25 x (threads x the trace's peak) + 4 GiB, and at least the --limit asked for; at
 * most SIM_CARD_MAX (its memory is this process's address space: 16 TiB leaves room for growth's
 * reservation of about twice the limit in 128 TiB). A limit above that is refused naming --limit;
 * a trace that needs more gets SIM_CARD_MAX and its allocations beyond fail (counted). */
#define SIM_CARD_MAX (16384 * GIB)
static int fall_back_to_sim(const trace *t, int threads, uint64_t limit, const char *reason) {
    if (limit > SIM_CARD_MAX) {
        if (reason)
            fprintf(stderr, "%s: --limit of %" PRIu64 " bytes is more than a simulated card holds (16 TiB; no GPU: %s)\n",
                    tool_name, limit, reason);
        else
            fprintf(stderr, "%s: --limit of %" PRIu64 " bytes is more than a simulated card holds (16 TiB; "
                    "VRAM_BACKEND=cuda: on the GPU)\n", tool_name, limit);
        return -1;
    }
    /* threads x peak may be up to 2^64 - 1 (vram report does not check it): saturate, no wrap */
    uint64_t live = threads > 0 && t->peak_live_bytes > UINT64_MAX / (uint64_t)threads
                        ? UINT64_MAX : t->peak_live_bytes * (uint64_t)threads;
    uint64_t bytes = live > (SIM_CARD_MAX - 4 * GIB) / 5 * 4 ? SIM_CARD_MAX : live + live / 4 + 4 * GIB;
    if (bytes < limit) bytes = limit;
    if (bytes > SIM_CARD_MAX) bytes = SIM_CARD_MAX;
    char size[32];
    snprintf(size, sizeof size, "%" PRIu64 "MiB", (bytes + MIB - 1) / MIB);
    if (!reason)                                   /* vram report: the simulated card by choice */
        fprintf(stderr, "%s: replaying on a simulated %s card (VRAM_BACKEND=cuda: on the GPU)\n", tool_name, size);
    else if (threads > 1)
        fprintf(stderr, "%s: no GPU (%s); replaying on a simulated %s card (%d threads)\n",
                tool_name, reason, size, threads);
    else
        fprintf(stderr, "%s: no GPU (%s); replaying on a simulated %s card\n", tool_name, reason, size);
    /* CUDA_VISIBLE_DEVICES named real cards; the sim applies it too and could hide this one. */
    if (getenv("CUDA_VISIBLE_DEVICES"))
        fprintf(stderr, "%s: ignoring CUDA_VISIBLE_DEVICES for the simulated card\n", tool_name);
    if (setenv("VRAM_BACKEND", "sim", 1) != 0 || setenv("VRAM_SIM_DEVICES", size, 1) != 0 ||
        unsetenv("CUDA_VISIBLE_DEVICES") != 0) {
        fprintf(stderr, "%s: setenv: %s\n", tool_name, strerror(errno));
        return -1;
    }
    return 0;
}

static int ensure_device(const trace *t, int threads, uint64_t limit) {
    int n = 0;
    vram_status s = vram_list_physical_devices(NULL, 0, &n);
    if (s == VRAM_OK) return 0;
    if (s == VRAM_ERR_NO_DEVICE && !backend_env()) {
        char reason[512];
        cli_short_reason(vram_last_error(), reason, sizeof reason);   /* one line; `vram ls --json` has it all */
        return fall_back_to_sim(t, threads, limit, reason);
    }
    if (s == VRAM_ERR_NO_DEVICE) {
        char reason[512];
        cli_short_reason(vram_last_error(), reason, sizeof reason);
        fprintf(stderr, "vram: No GPU found: %s.\nHint: %s.\n", reason, CLI_NO_GPU_HINT);
    } else {
        replay_report_status("vram_list_physical_devices", s);
    }
    return -1;
}

/* ---- configuration -------------------------------------------------------------------------- */

static int configure(const replay_options *opt) {
    const replay_policy *pol = replay_opt_policy(opt);
    vram_status s;
    if ((s = vram_set_memory_growth(0, pol->growth)) != VRAM_OK) {
        replay_report_status("vram_set_memory_growth", s);
        return -1;
    }
    if (pol->conf && (s = vram_set_alloc_conf(pol->conf)) != VRAM_OK) {
        replay_report_status("vram_set_alloc_conf", s);
        return -1;
    }
    if (opt->has_limit && (s = vram_set_memory_limit(0, opt->limit_bytes)) != VRAM_OK) {
        replay_report_status("vram_set_memory_limit", s);
        return -1;
    }
    if ((s = vram_init()) != VRAM_OK) {
        replay_report_status("vram_init", s);
        return -1;
    }
    return 0;
}

/* Growth in force: VRAM_GROWTH (else its older name VRAM_FORCE_ALLOW_GROWTH)=true|false wins over the API,
 * as in TensorFlow (the library refused the two names disagreeing at its start). */
static int growth_in_force(void) {
    const char *used = NULL, *other = NULL;
    const char *env = vram__getenv_either("VRAM_GROWTH", "VRAM_FORCE_ALLOW_GROWTH", &used, &other);
    static const char *const yes[] = { "true", "1", "yes", "on" }, *const no[] = { "false", "0", "no", "off" };
    for (size_t i = 0; env && i < 4; i++) {
        if (strcasecmp(env, yes[i]) == 0) return 1;
        if (strcasecmp(env, no[i]) == 0) return 0;
    }
    int enabled = -1;
    return vram_get_memory_growth(0, &enabled) == VRAM_OK && enabled == 1;
}

int replay_read_info(vram_memory_info *info) {
    vram_status s = vram_get_memory_info(0, info);
    if (s != VRAM_OK) replay_report_status("vram_get_memory_info", s);
    return s == VRAM_OK ? 0 : -1;
}

int replay_start_runtime(const replay_options *opt, const trace *t) {
    uint64_t limit = opt->has_limit ? opt->limit_bytes : 0;
    tool_name = "vram report";
    if (!backend_env() && fall_back_to_sim(t, 1, limit, NULL) != 0) return -1;   /* the sim, GPU or not */
    return ensure_device(t, 1, limit) == 0 && configure(opt) == 0 ? 0 : -1;
}

/* ---- entry point ---------------------------------------------------------------------------- */

static int replay_trace(const replay_options *opt, const trace *t) {
    int passes = opt_passes(opt), threads = opt_threads(opt);
    /* threads x peak must fit in 64 bits (the simulated card's size saturates on its own) */
    if (t->peak_live_bytes > UINT64_MAX / (uint64_t)threads) {
        fprintf(stderr, "vram replay: %s: peak live bytes x %d threads overflow 64 bits\n",
                opt->trace_path, threads);
        return 1;
    }
    replay_result r = { 0 };
    r.peak_live = t->peak_live_bytes * (uint64_t)threads;
    replay_job job;
    if (replay_job_init(&job, t, passes, threads) != 0) {
        fprintf(stderr, "vram replay: out of memory\n");
        replay_job_release(&job, 0);
        return 1;
    }
    r.tail_live = job.tail_live * (uint64_t)threads;
    int rc = 1;
    job.progress = isatty(STDERR_FILENO);
    if (ensure_device(t, threads, opt->has_limit ? opt->limit_bytes : 0) == 0 && configure(opt) == 0) {
        snprintf(r.backend, sizeof r.backend, "%s", backend_env() ? backend_env() : "cuda");
        r.growth = growth_in_force();
        struct sigaction old;
        replay_catch_sigint(&old);
        int ran = replay_run_runtime(&job, &r) == 0;
        sigaction(SIGINT, &old, NULL);
        if (job.progress && job.last_progress_ns) fputs("\r\033[K", stderr);   /* the progress line goes */
        if (ran) {
            replay_print_text(opt, &job, &r);
            if (opt->json) replay_print_json(opt, &job, &r);
            rc = job.interrupted ? 130 : r.failed_allocs && !opt->allow_failures ? 3 : 0;
            if (rc == 3)
                fprintf(stderr, "vram replay: %zu allocations failed (exit status 3; --allow-failures when failures "
                        "are the measurement)\n", r.failed_allocs);
        }
    }
    replay_job_release(&job, 1);
    return rc;
}

int replay_run(const replay_options *opt) {
    trace t;
    char err[1024];
    if (trace_load(opt->trace_path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "vram replay: %s\n", err);
        return 1;
    }
    int rc = replay_trace(opt, &t);
    trace_release(&t);
    return rc;
}
