/*
 * replay.c: `vram replay TRACE [--policy NAME | --growth] [--limit SIZE] [--passes N]
 *           [--threads N] [--json]`.
 *
 * Order: read and check the whole trace (trace.c; allocation ids are already dense slot numbers,
 * so the replay indexes plain arrays and never hashes); make sure there is a device (without a
 * GPU and with VRAM_BACKEND unset, switch to a simulated card large enough for `threads` copies of
 * the trace); configure card 0 from the policy table (growth, allocator options) and the limit;
 * vram_init(); replay; read the statistics; vram_shutdown(); print the report.
 *
 * Passes and threads. Each of `threads` threads replays the whole trace on logical device 0 with
 * its own pointer table, `passes` times, in the same runtime. A pass is, for every thread:
 *   barrier; timed loop over every event; barrier; free what the trace left live (untimed);
 *   barrier; thread 0 sums the pass and reads the driver counters (untimed).
 * So every pass starts with no live allocation but with whatever memory the pool kept: pass 1 is
 * cold (the pool starts empty and takes memory from the driver), passes 2..N are warm.
 *
 * Timing. A call takes some tens of ns, about what clock_gettime costs, so calls are not timed one
 * by one: each thread reads CLOCK_MONOTONIC before and after its loop over the whole trace. The
 * loop does the vram_malloc / vram_free call and O(1) array bookkeeping (pointer and state by
 * slot, counters), nothing else; the first failure of a thread also formats its message. A pass's
 * `loop_ns` is the sum of its threads' loop times, its `wall_ns` runs from the first thread's start
 * to the last thread's end.
 *
 * Progress and Ctrl-C. The loop runs in chunks of REPLAY_CHUNK events; after each chunk a thread
 * looks at a flag that SIGINT sets (the handler is installed for the replay only, and a second
 * Ctrl-C kills as usual), and thread 0 prints "pass P/N, percent, rate" on stderr at most four times
 * a second when stderr is a terminal (inside its timed loop: a terminal's replay times a little
 * more). On SIGINT every thread stops after its chunk, the pass is closed as usual and the report
 * printed says where it stopped; the exit status is then 130.
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

#include "replay.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <vram.h>

#include "cli.h"
#include "trace.h"

#define REPLAY_CHUNK 65536        /* events between looks at the Ctrl-C flag and the progress line */
#define PROGRESS_NS  250000000u   /* at most four progress lines a second */

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

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

/* ---- state ---------------------------------------------------------------------------------- */

enum { SLOT_NONE, SLOT_LIVE, SLOT_FAILED, SLOT_FREED };

typedef struct pass_stats {      /* one pass, summed over the threads */
    size_t   ops, allocs, frees, failed_allocs, skipped_frees;
    uint64_t loop_ns;            /* sum of the threads' timed loops */
    uint64_t wall_ns;            /* first thread's start to last thread's end */
    uint64_t driver_allocs, driver_frees;  /* made during the pass and its cleanup */
    uint64_t driver_moves;                 /* idle pieces mapped again elsewhere (growth) */
} pass_stats;

struct replay_job;

typedef struct worker {
    struct replay_job *job;
    int       index;
    pthread_t tid;
    void    **ptrs;              /* by slot */
    uint8_t  *state;             /* SLOT_* by slot */
    /* this pass */
    size_t    allocs, frees, failed, skipped;
    uint64_t  t0, t1;
    int       err;               /* a failed free: the replay fails */
    size_t    done;              /* events of this pass replayed (less than the trace's when interrupted) */
    /* this thread's first failed allocation */
    int       has_failure, failure_pass;
    char      first_error[2048];
} worker;

typedef struct replay_job {
    const trace      *t;
    int               passes, threads;
    worker           *workers;
    pass_stats       *pass;      /* [passes] */
    int               passes_run;
    pthread_barrier_t barrier;
    pthread_mutex_t   gate_lock;
    pthread_cond_t    gate_cond;
    int               gate;      /* 0 wait, 1 go, -1 give up (a thread could not be started) */
    int               abort;     /* written by thread 0 before a start barrier */
    int               failed;    /* a failed free or statistics call */
    int               progress;  /* stderr is a terminal: thread 0 prints progress */
    uint64_t          last_progress_ns;
    int               interrupted;          /* SIGINT stopped pass interrupted_pass */
    int               interrupted_pass;
    size_t            interrupted_event;    /* thread 0's events done in that pass */
    uint64_t          last_driver_allocs, last_driver_frees, last_driver_moves;
} replay_job;

typedef struct replay_result {
    size_t   ops, allocs, frees, failed_allocs, skipped_frees;
    uint64_t total_ns, wall_ns;
    uint64_t peak_live;          /* the trace's peak x threads */
    size_t   peak_reserved, peak_in_use, limit_bytes;
    uint64_t driver_allocs, driver_frees, driver_moves;
    int      growth;
    char     backend[32];
    char     first_error[2100];
} replay_result;

static FILE *text_out(const replay_options *opt) { return opt->json ? stderr : stdout; }

static void report_status(const char *what, vram_status s) {
    fprintf(stderr, "vram replay: %s: %s: %s\n", what, vram_status_name(s), vram_last_error());
}

static const char *backend_env(void) {
    const char *b = getenv("VRAM_BACKEND");
    return b && *b ? b : NULL;
}

static int opt_passes(const replay_options *opt) { return opt->passes > 0 ? opt->passes : 1; }
static int opt_threads(const replay_options *opt) { return opt->threads > 0 ? opt->threads : 1; }
static const replay_policy *opt_policy(const replay_options *opt) {
    return opt->policy ? opt->policy : &replay_policies[0];
}

/* ---- device discovery and the simulated fallback -------------------------------------------- */

/* Which command is talking (replay_start_runtime is also vram report's). */
static const char *tool_name = "vram replay";

/* A card of 1.25 x (threads x the trace's peak) + 4 GiB, and at least the --limit asked for. */
static int fall_back_to_sim(const trace *t, int threads, uint64_t limit, const char *reason) {
    uint64_t live = t->peak_live_bytes * (uint64_t)threads;  /* checked against overflow by the caller */
    uint64_t bytes = live + live / 4 + 4 * GIB;
    if (bytes < limit) bytes = limit;
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
        report_status("vram_list_physical_devices", s);
    }
    return -1;
}

/* ---- configuration -------------------------------------------------------------------------- */

static int configure(const replay_options *opt) {
    const replay_policy *pol = opt_policy(opt);
    vram_status s;
    if ((s = vram_set_memory_growth(0, pol->growth)) != VRAM_OK) {
        report_status("vram_set_memory_growth", s);
        return -1;
    }
    if (pol->conf && (s = vram_set_alloc_conf(pol->conf)) != VRAM_OK) {
        report_status("vram_set_alloc_conf", s);
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

static int read_info(vram_memory_info *info) {
    vram_status s = vram_get_memory_info(0, info);
    if (s != VRAM_OK) report_status("vram_get_memory_info", s);
    return s == VRAM_OK ? 0 : -1;
}

int replay_start_runtime(const replay_options *opt, const trace *t) {
    uint64_t limit = opt->has_limit ? opt->limit_bytes : 0;
    tool_name = "vram report";
    if (!backend_env() && fall_back_to_sim(t, 1, limit, NULL) != 0) return -1;   /* the sim, GPU or not */
    return ensure_device(t, 1, limit) == 0 && configure(opt) == 0 ? 0 : -1;
}

/* ---- one pass of one thread ----------------------------------------------------------------- */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Out of line so that the timed loop stays small; runs once per failed allocation. */
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void note_failure(worker *w, int pass, size_t i, vram_status s) {
    if (w->has_failure) return;
    w->has_failure = 1;
    w->failure_pass = pass;
    snprintf(w->first_error, sizeof w->first_error, "event %zu, alloc of %" PRIu64 " bytes: %s: %s",
             i + 1, w->job->t->events[i].bytes, vram_status_name(s), vram_last_error());
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void note_bad_free(worker *w, int pass, size_t i, vram_status s) {
    char where[96];
    if (w->job->threads > 1 || w->job->passes > 1)
        snprintf(where, sizeof where, "pass %d, thread %d, event %zu", pass + 1, w->index, i + 1);
    else
        snprintf(where, sizeof where, "event %zu", i + 1);
    fprintf(stderr, "vram replay: %s: vram_free: %s: %s\n", where, vram_status_name(s), vram_last_error());
    w->err = 1;
}

/* Set by the SIGINT handler, read by every replay thread: a lock-free atomic (async-signal-safe). */
static atomic_int replay_sigint;

static int interrupted_now(void) { return atomic_load_explicit(&replay_sigint, memory_order_relaxed); }

static void on_sigint(int sig) {
    (void)sig;
    atomic_store_explicit(&replay_sigint, 1, memory_order_relaxed);
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void progress_line(replay_job *job, int pass, size_t done, uint64_t t0) {
    uint64_t t = now_ns();
    if (t - job->last_progress_ns < PROGRESS_NS) return;
    job->last_progress_ns = t;
    double secs = (double)(t - t0) / 1e9, pct = 100.0 * (double)done / (double)job->t->num_events;
    fprintf(stderr, "\rvram replay: pass %d/%d, %5.1f%%, %.2f M events/s per thread   ", pass + 1, job->passes,
            pct, secs > 0 ? (double)done / secs / 1e6 : 0.0);
    fflush(stderr);
}

/* The timed loop: the call and array bookkeeping by slot, in chunks (Ctrl-C, progress). */
static void replay_pass(worker *w, int pass) {
    const trace_event *ev = w->job->t->events;
    const size_t n = w->job->t->num_events;
    void **ptrs = w->ptrs;
    uint8_t *state = w->state;
    size_t allocs = 0, frees = 0, failed = 0, skipped = 0, done = 0;
    const int progress = w->job->progress && w->index == 0;
    uint64_t t0 = now_ns();
    for (size_t from = 0; from < n && !w->err; from = done) {
        const size_t to = n - from > REPLAY_CHUNK ? from + REPLAY_CHUNK : n;
        for (size_t i = from; i < to; i++) {
            const uint32_t slot = ev[i].slot;
            if (ev[i].kind == TRACE_ALLOC) {
                allocs++;
                vram_status s = vram_malloc(&ptrs[slot], (size_t)ev[i].bytes, 0);
                if (s == VRAM_OK) {
                    state[slot] = SLOT_LIVE;
                } else {
                    state[slot] = SLOT_FAILED;
                    failed++;
                    note_failure(w, pass, i, s);
                }
            } else if (state[slot] == SLOT_LIVE) {
                frees++;
                state[slot] = SLOT_FREED;
                vram_status s = vram_free(ptrs[slot]);
                if (s != VRAM_OK) {
                    note_bad_free(w, pass, i, s);
                    break;
                }
            } else {
                skipped++;
            }
        }
        done = to;
        if (interrupted_now()) break;
        if (progress) progress_line(w->job, pass, done, t0);
    }
    uint64_t t1 = now_ns();
    w->t0 = t0;
    w->t1 = t1;
    w->allocs = allocs;
    w->frees = frees;
    w->failed = failed;
    w->skipped = skipped;
    w->done = done;
}

/* Untimed: frees what the trace left live and forgets every slot's state. */
static void free_live(worker *w) {
    for (size_t i = 0; i < w->job->t->num_slots; i++) {
        if (w->state[i] == SLOT_LIVE) {
            vram_status s = vram_free(w->ptrs[i]);
            if (s != VRAM_OK && !w->err) {
                report_status("vram_free (cleanup)", s);
                w->err = 1;
            }
        }
        w->state[i] = SLOT_NONE;
        w->ptrs[i] = NULL;
    }
}

/* Thread 0, after every thread's cleanup: sums the pass and reads the driver counters. */
static void end_pass(replay_job *job, int pass) {
    pass_stats *ps = &job->pass[pass];
    uint64_t first = UINT64_MAX, last = 0;
    for (int k = 0; k < job->threads; k++) {
        worker *w = &job->workers[k];
        ps->allocs += w->allocs;
        ps->frees += w->frees;
        ps->failed_allocs += w->failed;
        ps->skipped_frees += w->skipped;
        ps->loop_ns += w->t1 - w->t0;
        if (w->t0 < first) first = w->t0;
        if (w->t1 > last) last = w->t1;
        if (w->err) job->failed = 1;
    }
    ps->ops = ps->allocs + ps->frees;
    ps->wall_ns = last > first ? last - first : 0;
    vram_memory_info info;
    if (read_info(&info) != 0) {
        job->failed = 1;
    } else {
        ps->driver_allocs = info.num_driver_allocs - job->last_driver_allocs;
        ps->driver_frees = info.num_driver_frees - job->last_driver_frees;
        ps->driver_moves = info.num_driver_moves - job->last_driver_moves;
        job->last_driver_allocs = info.num_driver_allocs;
        job->last_driver_frees = info.num_driver_frees;
        job->last_driver_moves = info.num_driver_moves;
    }
    job->passes_run = pass + 1;
    if (interrupted_now() && !job->interrupted) {
        job->interrupted = 1;
        job->interrupted_pass = pass;
        job->interrupted_event = job->workers[0].done;
    }
    if (job->failed || job->interrupted) job->abort = 1;
}

/* ---- the threads ---------------------------------------------------------------------------- */

/* Threads 1.. wait here until every thread exists (so that no barrier waits for a thread that
 * could not be started). Returns 1 to run, 0 to give up. */
static int gate_wait(replay_job *job) {
    pthread_mutex_lock(&job->gate_lock);
    while (job->gate == 0) pthread_cond_wait(&job->gate_cond, &job->gate_lock);
    int go = job->gate > 0;
    pthread_mutex_unlock(&job->gate_lock);
    return go;
}

static void gate_open(replay_job *job, int go) {
    pthread_mutex_lock(&job->gate_lock);
    job->gate = go ? 1 : -1;
    pthread_cond_broadcast(&job->gate_cond);
    pthread_mutex_unlock(&job->gate_lock);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    replay_job *job = w->job;
    if (w->index != 0 && !gate_wait(job)) return NULL;
    for (int p = 0; p < job->passes; p++) {
        pthread_barrier_wait(&job->barrier);   /* start; publishes thread 0's abort */
        if (job->abort) break;
        replay_pass(w, p);
        pthread_barrier_wait(&job->barrier);   /* every timed loop is done */
        free_live(w);
        pthread_barrier_wait(&job->barrier);   /* every cleanup is done */
        if (w->index == 0) end_pass(job, p);
    }
    return NULL;
}

/* Runs every pass on every thread; thread 0 is the calling thread. Returns 0, or -1. */
static int run_threads(replay_job *job) {
    int started = 1, rc = 0;
    for (int k = 1; k < job->threads; k++, started++) {
        int e = pthread_create(&job->workers[k].tid, NULL, worker_main, &job->workers[k]);
        if (e != 0) {
            fprintf(stderr, "vram replay: cannot start thread %d: %s\n", k, strerror(e));
            rc = -1;
            break;
        }
    }
    gate_open(job, rc == 0);
    if (rc == 0) worker_main(&job->workers[0]);
    for (int k = 1; k < started; k++) pthread_join(job->workers[k].tid, NULL);
    return rc == 0 && !job->failed ? 0 : -1;
}

static int job_init(replay_job *job, const trace *t, int passes, int threads) {
    memset(job, 0, sizeof *job);
    job->t = t;
    job->passes = passes;
    job->threads = threads;
    size_t slots = t->num_slots ? t->num_slots : 1;
    job->pass = calloc((size_t)passes, sizeof *job->pass);
    job->workers = calloc((size_t)threads, sizeof *job->workers);
    if (!job->pass || !job->workers) return -1;
    for (int k = 0; k < threads; k++) {
        worker *w = &job->workers[k];
        w->job = job;
        w->index = k;
        w->ptrs = calloc(slots, sizeof *w->ptrs);
        w->state = calloc(slots, sizeof *w->state);
        if (!w->ptrs || !w->state) return -1;
    }
    if (pthread_barrier_init(&job->barrier, NULL, (unsigned)threads) != 0) return -1;
    pthread_mutex_init(&job->gate_lock, NULL);
    pthread_cond_init(&job->gate_cond, NULL);
    return 0;
}

static void job_release(replay_job *job, int synced) {
    if (synced) {
        pthread_barrier_destroy(&job->barrier);
        pthread_mutex_destroy(&job->gate_lock);
        pthread_cond_destroy(&job->gate_cond);
    }
    for (int k = 0; job->workers && k < job->threads; k++) {
        free(job->workers[k].ptrs);
        free(job->workers[k].state);
    }
    free(job->workers);
    free(job->pass);
}

/* ---- the runtime ---------------------------------------------------------------------------- */

/* The first failed allocation: the earliest pass, then the lowest thread. */
static void pick_first_error(const replay_job *job, replay_result *r) {
    const worker *best = NULL;
    for (int k = 0; k < job->threads; k++) {
        const worker *w = &job->workers[k];
        if (w->has_failure && (!best || w->failure_pass < best->failure_pass)) best = w;
    }
    if (!best) return;
    if (job->threads > 1 || job->passes > 1)
        snprintf(r->first_error, sizeof r->first_error, "pass %d, thread %d: %s", best->failure_pass + 1,
                 best->index, best->first_error);
    else
        snprintf(r->first_error, sizeof r->first_error, "%s", best->first_error);
}

/* Replays every pass, collects the statistics and shuts down. */
static int run_runtime(replay_job *job, replay_result *r) {
    vram_memory_info info;
    r->growth = growth_in_force();
    int rc = read_info(&info);
    if (rc == 0) {
        job->last_driver_allocs = info.num_driver_allocs;
        job->last_driver_frees = info.num_driver_frees;
        job->last_driver_moves = info.num_driver_moves;
        rc = run_threads(job);
    }
    if (rc == 0 && (rc = read_info(&info)) == 0) {
        r->peak_reserved = info.peak_reserved;
        r->peak_in_use = info.peak;
        r->limit_bytes = info.limit;
        r->driver_allocs = info.num_driver_allocs;
        r->driver_frees = info.num_driver_frees;
        r->driver_moves = info.num_driver_moves;
    }
    for (int p = 0; p < job->passes_run; p++) {
        const pass_stats *ps = &job->pass[p];
        r->ops += ps->ops;
        r->allocs += ps->allocs;
        r->frees += ps->frees;
        r->failed_allocs += ps->failed_allocs;
        r->skipped_frees += ps->skipped_frees;
        r->total_ns += ps->loop_ns;
        r->wall_ns += ps->wall_ns;
    }
    pick_first_error(job, r);
    vram_status s = vram_shutdown();
    if (s != VRAM_OK) {
        report_status("vram_shutdown", s);
        rc = -1;
    }
    return rc;
}

/* ---- the report ----------------------------------------------------------------------------- */

typedef struct summary {         /* derived figures; the warm ones only when has_warm (else JSON null) */
    double ns_per_op, cold_ns_per_op, warm_ns_per_op;
    double ops_per_sec, cold_ops_per_sec, warm_ops_per_sec;
    int    has_warm;
    uint64_t driver_allocs_warm, driver_frees_warm, driver_moves_warm;
} summary;

static double per_op(uint64_t ns, size_t ops) { return ops ? (double)ns / (double)ops : 0.0; }
static double per_sec(size_t ops, uint64_t wall_ns) { return wall_ns ? (double)ops * 1e9 / (double)wall_ns : 0.0; }

static summary summarise(const replay_job *job, const replay_result *r) {
    summary s = { 0 };
    s.ns_per_op = per_op(r->total_ns, r->ops);
    s.ops_per_sec = per_sec(r->ops, r->wall_ns);
    if (job->passes_run > 0) {
        s.cold_ns_per_op = per_op(job->pass[0].loop_ns, job->pass[0].ops);
        s.cold_ops_per_sec = per_sec(job->pass[0].ops, job->pass[0].wall_ns);
    }
    s.has_warm = job->passes > 1;
    size_t ops = 0;
    uint64_t ns = 0, wall = 0;
    for (int p = 1; p < job->passes_run; p++) {
        ops += job->pass[p].ops;
        ns += job->pass[p].loop_ns;
        wall += job->pass[p].wall_ns;
        s.driver_allocs_warm += job->pass[p].driver_allocs;
        s.driver_frees_warm += job->pass[p].driver_frees;
        s.driver_moves_warm += job->pass[p].driver_moves;
    }
    s.warm_ns_per_op = per_op(ns, ops);
    s.warm_ops_per_sec = per_sec(ops, wall);
    return s;
}

static double ratio(const replay_result *r) {
    return r->peak_live ? (double)r->peak_reserved / (double)r->peak_live : 0.0;
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

/* `, "key": value` with `decimals` digits after the point, or null. */
static void json_warm(const char *key, int has, int decimals, double v) {
    printf(", \"%s\": ", key);
    if (has) printf("%.*f", decimals, v);
    else fputs("null", stdout);
}

static void json_warm_count(const char *key, int has, uint64_t v) {
    printf(", \"%s\": ", key);
    if (has) printf("%" PRIu64, v);
    else fputs("null", stdout);
}

static void print_json(const replay_options *opt, const replay_job *job, const replay_result *r) {
    summary s = summarise(job, r);
    printf("{\"trace\": ");
    tool_json_string(stdout, opt->trace_path);
    printf(", \"backend\": ");
    tool_json_string(stdout, r->backend);
    printf(", \"policy\": ");
    tool_json_string(stdout, opt_policy(opt)->name);
    printf(", \"policy_alloc_conf\": ");          /* what the policy set, then what the environment adds */
    if (opt_policy(opt)->conf) tool_json_string(stdout, opt_policy(opt)->conf);
    else fputs("null", stdout);
    printf(", \"env_alloc_conf\": ");
    if (getenv("VRAM_ALLOC_CONF")) tool_json_string(stdout, getenv("VRAM_ALLOC_CONF"));
    else fputs("null", stdout);
    printf(", \"growth\": %s, \"limit_bytes\": %zu", r->growth ? "true" : "false", r->limit_bytes);
    printf(", \"passes\": %d, \"threads\": %d, \"trace_events\": %zu", job->passes, job->threads,
           job->t->num_events);
    printf(", \"ops\": %zu, \"allocs\": %zu, \"frees\": %zu", r->ops, r->allocs, r->frees);
    printf(", \"peak_live_bytes\": %" PRIu64 ", \"peak_reserved_bytes\": %zu, \"peak_in_use_bytes\": %zu",
           r->peak_live, r->peak_reserved, r->peak_in_use);
    printf(", \"reserved_to_live\": %.3f, \"ns_per_op\": %.1f", ratio(r), s.ns_per_op);
    printf(", \"mean_ns_per_op\": %.1f, \"cold_ns_per_op\": %.1f", s.ns_per_op, s.cold_ns_per_op);
    json_warm("warm_ns_per_op", s.has_warm, 1, s.warm_ns_per_op);
    printf(", \"ops_per_sec\": %.0f, \"cold_ops_per_sec\": %.0f", s.ops_per_sec, s.cold_ops_per_sec);
    json_warm("warm_ops_per_sec", s.has_warm, 0, s.warm_ops_per_sec);
    printf(", \"driver_allocs\": %" PRIu64 ", \"driver_frees\": %" PRIu64 ", \"driver_moves\": %" PRIu64,
           r->driver_allocs, r->driver_frees, r->driver_moves);
    json_warm_count("driver_allocs_warm", s.has_warm, s.driver_allocs_warm);
    json_warm_count("driver_frees_warm", s.has_warm, s.driver_frees_warm);
    json_warm_count("driver_moves_warm", s.has_warm, s.driver_moves_warm);
    printf(", \"failed_allocs\": %zu, \"skipped_frees\": %zu, \"first_error\": ", r->failed_allocs,
           r->skipped_frees);
    if (r->failed_allocs) tool_json_string(stdout, r->first_error);
    else fputs("null", stdout);
    printf(", \"interrupted\": %s", job->interrupted ? "true" : "false");
    if (job->interrupted)
        printf(", \"interrupted_pass\": %d, \"interrupted_event\": %zu", job->interrupted_pass + 1,
               job->interrupted_event);
    printf(", \"per_pass\": [");
    for (int p = 0; p < job->passes_run; p++) {
        const pass_stats *ps = &job->pass[p];
        printf("%s{\"pass\": %d, \"ops\": %zu, \"ns_per_op\": %.1f, \"wall_ns\": %" PRIu64
               ", \"ops_per_sec\": %.0f, \"driver_allocs\": %" PRIu64 ", \"driver_frees\": %" PRIu64
               ", \"driver_moves\": %" PRIu64 ", \"failed_allocs\": %zu}",
               p ? ", " : "", p + 1, ps->ops, per_op(ps->loop_ns, ps->ops), ps->wall_ns,
               per_sec(ps->ops, ps->wall_ns), ps->driver_allocs, ps->driver_frees, ps->driver_moves,
               ps->failed_allocs);
    }
    printf("]}\n");
}

#define TEXT_PASS_LINES 20

static void print_text(const replay_options *opt, const replay_job *job, const replay_result *r) {
    FILE *f = text_out(opt);
    summary s = summarise(job, r);
    const replay_policy *pol = opt_policy(opt);
    double gib = (double)GIB;
    fprintf(f, "trace:            %s\n", opt->trace_path);
    fprintf(f, "backend:          %s\n", r->backend);
    fprintf(f, "policy:           %s (%s)\n", pol->name, pol->description);
    fprintf(f, "mode:             %s, limit %.2f GiB (%zu bytes)\n",
            r->growth ? "growth" : "preallocated", (double)r->limit_bytes / gib, r->limit_bytes);
    if (job->passes > 1)
        fprintf(f, "passes:           %d (1 cold, %d warm)\n", job->passes, job->passes - 1);
    else
        fprintf(f, "passes:           1 (cold)\n");
    fprintf(f, "threads:          %d\n", job->threads);
    fprintf(f, "ops:              %zu (%zu allocs, %zu frees, %zu frees skipped)\n", r->ops,
            r->allocs, r->frees, r->skipped_frees);
    if (job->threads > 1)
        fprintf(f, "peak live (%d threads, upper bound): %.2f GiB (%" PRIu64 " bytes)\n", job->threads,
                (double)r->peak_live / gib, r->peak_live);
    else
        fprintf(f, "peak live:        %.2f GiB (%" PRIu64 " bytes)\n", (double)r->peak_live / gib,
                r->peak_live);
    fprintf(f, "peak in use:      %.2f GiB (%zu bytes, measured by vram, rounded sizes)\n",
            (double)r->peak_in_use / gib, r->peak_in_use);
    fprintf(f, "peak reserved:    %.2f GiB (%zu bytes)\n", (double)r->peak_reserved / gib,
            r->peak_reserved);
    fprintf(f, "reserved / live:  %.3f%s\n", ratio(r), job->threads > 1 ? " (approximate with threads)" : "");
    fprintf(f, "ns / op:          %.1f\n", s.ns_per_op);
    fprintf(f, "ns / op cold:     %.1f\n", s.cold_ns_per_op);
    if (s.has_warm) fprintf(f, "ns / op warm:     %.1f\n", s.warm_ns_per_op);
    fprintf(f, "ops / s:          %.0f\n", s.ops_per_sec);
    fprintf(f, "driver allocs:    %" PRIu64 "\n", r->driver_allocs);
    fprintf(f, "driver frees:     %" PRIu64 "\n", r->driver_frees);
    fprintf(f, "driver moves:     %" PRIu64 " (idle pieces mapped again under a block)\n", r->driver_moves);
    if (s.has_warm)
        fprintf(f, "driver warm:      %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " moves (passes 2..%d)\n",
                s.driver_allocs_warm, s.driver_frees_warm, s.driver_moves_warm, job->passes);
    fprintf(f, "failed allocs:    %zu\n", r->failed_allocs);
    if (r->failed_allocs) fprintf(f, "first failure:    %s\n", r->first_error);
    if (job->interrupted)
        fprintf(f, "interrupted:      Ctrl-C in pass %d after %zu of %zu events; the figures are so far\n",
                job->interrupted_pass + 1, job->interrupted_event, job->t->num_events);
    if (job->passes > 1) {
        for (int p = 0; p < job->passes_run && p < TEXT_PASS_LINES; p++) {
            const pass_stats *ps = &job->pass[p];
            fprintf(f, "pass %-4d %s:   %.1f ns/op, %.0f ops/s, %zu ops, %" PRIu64 " driver allocs, %"
                    PRIu64 " driver frees, %" PRIu64 " moves, %zu failed\n", p + 1, p ? "warm" : "cold",
                    per_op(ps->loop_ns, ps->ops), per_sec(ps->ops, ps->wall_ns), ps->ops,
                    ps->driver_allocs, ps->driver_frees, ps->driver_moves, ps->failed_allocs);
        }
        if (job->passes_run > TEXT_PASS_LINES)
            fprintf(f, "(%d more passes in --json's per_pass)\n", job->passes_run - TEXT_PASS_LINES);
    }
}

/* ---- entry point ---------------------------------------------------------------------------- */

static int replay_trace(const replay_options *opt, const trace *t) {
    int passes = opt_passes(opt), threads = opt_threads(opt);
    /* threads x peak, and 1.25 x that + 4 GiB for the simulated card, must fit in 64 bits */
    if (t->peak_live_bytes > (UINT64_MAX / 2) / (uint64_t)threads) {
        fprintf(stderr, "vram replay: %s: peak live bytes x %d threads overflow 64 bits\n",
                opt->trace_path, threads);
        return 1;
    }
    replay_result r = { 0 };
    r.peak_live = t->peak_live_bytes * (uint64_t)threads;
    replay_job job;
    if (job_init(&job, t, passes, threads) != 0) {
        fprintf(stderr, "vram replay: out of memory\n");
        job_release(&job, 0);
        return 1;
    }
    int rc = 1;
    job.progress = isatty(STDERR_FILENO);
    if (ensure_device(t, threads, opt->has_limit ? opt->limit_bytes : 0) == 0 && configure(opt) == 0) {
        snprintf(r.backend, sizeof r.backend, "%s", backend_env() ? backend_env() : "cuda");
        struct sigaction sa = { .sa_handler = on_sigint, .sa_flags = SA_RESETHAND }, old;
        sigemptyset(&sa.sa_mask);
        atomic_store(&replay_sigint, 0);
        sigaction(SIGINT, &sa, &old);
        int ran = run_runtime(&job, &r) == 0;
        sigaction(SIGINT, &old, NULL);
        if (job.progress && job.last_progress_ns) fputs("\r\033[K", stderr);   /* the progress line goes */
        if (ran) {
            print_text(opt, &job, &r);
            if (opt->json) print_json(opt, &job, &r);
            rc = job.interrupted ? 130 : r.failed_allocs && !opt->allow_failures ? 3 : 0;
            if (rc == 3)
                fprintf(stderr, "vram replay: %zu allocations failed (exit status 3; --allow-failures when failures "
                        "are the measurement)\n", r.failed_allocs);
        }
    }
    job_release(&job, 1);
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
