/*
 * replay_loop.c: the replay itself, for replay.c: the timed loop of one thread over the trace
 * (replay_pass), the untimed cleanup after it, the threads and their barriers, the sums of each
 * pass and the driver counters read between passes, the SIGINT flag, and the job's memory. How a
 * pass runs and what is timed: replay.c's header.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "replay_impl.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPLAY_BATCH 65536        /* events between looks at the Ctrl-C flag and the progress line */
#define PROGRESS_NS  250000000u   /* at most four progress lines a second */

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

/* For the replay only: one Ctrl-C sets the flag, a second kills as usual (SA_RESETHAND). */
void replay_catch_sigint(struct sigaction *old) {
    struct sigaction sa = { .sa_handler = on_sigint, .sa_flags = SA_RESETHAND };
    sigemptyset(&sa.sa_mask);
    atomic_store(&replay_sigint, 0);
    sigaction(SIGINT, &sa, old);
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

/* The timed loop over events [begin, end): the call and array bookkeeping by allocation number, in
 * batches (Ctrl-C, progress). Adds to the worker's counts of this pass; segment `seg` (0, or 1 after
 * pass 1's pause) keeps its start and end times. */
static void replay_pass(worker *w, int pass, size_t begin, size_t end, int seg) {
    const trace_event *ev = w->job->t->events;
    void **ptrs = w->ptrs;
    uint8_t *state = w->state;
    size_t allocs = 0, frees = 0, failed = 0, skipped = 0, done = begin;
    const int progress = w->job->progress && w->index == 0;
    uint64_t t0 = now_ns();
    for (size_t from = begin; from < end && !w->err; from = done) {
        const size_t to = end - from > REPLAY_BATCH ? from + REPLAY_BATCH : end;
        for (size_t i = from; i < to; i++) {
            const uint32_t a = ev[i].alloc;
            if (ev[i].kind == TRACE_ALLOC) {
                allocs++;
                vram_status s = vram_malloc(&ptrs[a], (size_t)ev[i].bytes, 0);
                if (s == VRAM_OK) {
                    state[a] = ALLOC_LIVE;
                } else {
                    state[a] = ALLOC_FAILED;
                    failed++;
                    note_failure(w, pass, i, s);
                }
            } else if (state[a] == ALLOC_LIVE) {
                frees++;
                state[a] = ALLOC_FREED;
                vram_status s = vram_free(ptrs[a]);
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
        if (progress) progress_line(w->job, pass, done, seg ? w->t[0] : t0);
    }
    uint64_t t1 = now_ns();
    w->t[2 * seg] = t0;
    w->t[2 * seg + 1] = t1;
    w->allocs += allocs;
    w->frees += frees;
    w->failed += failed;
    w->skipped += skipped;
    w->done = done;
}

/* Untimed: frees what the trace left live and forgets every allocation's state. */
static void free_live(worker *w) {
    for (size_t i = 0; i < w->job->t->num_allocs; i++) {
        if (w->state[i] == ALLOC_LIVE) {
            vram_status s = vram_free(w->ptrs[i]);
            if (s != VRAM_OK && !w->err) {
                replay_report_status("vram_free (cleanup)", s);
                w->err = 1;
            }
        }
        w->state[i] = ALLOC_NONE;
        w->ptrs[i] = NULL;
    }
}

/* Pass 1 only, every thread between its two timed loops (untimed): thread 0 keeps the peaks so far
 * and resets them, so that peak_reserved from here on is the highest reserved of the last quarter. */
static void tail_pause(worker *w) {
    replay_job *job = w->job;
    pthread_barrier_wait(&job->barrier);   /* every thread is at the last quarter (or stopped) */
    if (w->index == 0) {
        vram_memory_info info;
        vram_status s;
        if (replay_read_info(&info) != 0) {
            job->failed = 1;
        } else if ((s = vram_reset_memory_stats(0)) != VRAM_OK) {
            replay_report_status("vram_reset_memory_stats", s);
            job->failed = 1;
        } else {
            job->pre_peak_reserved = info.peak_reserved;
            job->pre_peak = info.peak;
            job->tail_armed = 1;
        }
    }
    pthread_barrier_wait(&job->barrier);   /* the peaks are reset: the last quarter starts */
}

/* The pass's wall time: first start to last end of each of its timed loops (two in pass 1). */
static uint64_t pass_wall(const replay_job *job, int seg) {
    uint64_t first = UINT64_MAX, last = 0;
    for (int k = 0; k < job->threads; k++) {
        const worker *w = &job->workers[k];
        if (w->t[2 * seg + 1] == 0) continue;   /* no such loop (stopped before it) */
        if (w->t[2 * seg] < first) first = w->t[2 * seg];
        if (w->t[2 * seg + 1] > last) last = w->t[2 * seg + 1];
    }
    return last > first ? last - first : 0;
}

/* Thread 0, after every thread's cleanup: sums the pass and reads the driver counters (and, after
 * pass 1, the tail's peak reserved: the cleanup only frees, which never raises it). */
static void end_pass(replay_job *job, int pass) {
    pass_stats *ps = &job->pass[pass];
    int whole = 1;                          /* every thread replayed every event */
    for (int k = 0; k < job->threads; k++) {
        worker *w = &job->workers[k];
        ps->allocs += w->allocs;
        ps->frees += w->frees;
        ps->failed_allocs += w->failed;
        ps->skipped_frees += w->skipped;
        ps->loop_ns += (w->t[1] - w->t[0]) + (w->t[3] - w->t[2]);
        if (w->err) job->failed = 1;
        if (w->err || w->done != job->t->num_events) whole = 0;
    }
    ps->ops = ps->allocs + ps->frees;
    ps->wall_ns = pass_wall(job, 0) + pass_wall(job, 1);
    vram_memory_info info;
    if (replay_read_info(&info) != 0) {
        job->failed = 1;
    } else {
        ps->driver_allocs = info.num_driver_allocs - job->last_driver_allocs;
        ps->driver_frees = info.num_driver_frees - job->last_driver_frees;
        ps->driver_moves = info.num_driver_moves - job->last_driver_moves;
        job->last_driver_allocs = info.num_driver_allocs;
        job->last_driver_frees = info.num_driver_frees;
        job->last_driver_moves = info.num_driver_moves;
        if (pass == 0 && job->tail_armed && whole) {
            job->has_tail = 1;
            job->tail_reserved = info.peak_reserved;
        }
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

/* One pass of one thread: its timed loop (pass 1: two, around tail_pause), its cleanup. */
static void worker_pass(worker *w, int p) {
    replay_job *job = w->job;
    const size_t n = job->t->num_events, q = job->tail_from;
    w->allocs = w->frees = w->failed = w->skipped = 0;
    memset(w->t, 0, sizeof w->t);
    if (p == 0) {
        replay_pass(w, p, 0, q, 0);
        tail_pause(w);
        if (w->done == q && !w->err && !interrupted_now()) replay_pass(w, p, q, n, 1);
    } else {
        replay_pass(w, p, 0, n, 0);
    }
    pthread_barrier_wait(&job->barrier);   /* every timed loop is done */
    free_live(w);
    pthread_barrier_wait(&job->barrier);   /* every cleanup is done */
    if (w->index == 0) end_pass(job, p);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    replay_job *job = w->job;
    if (w->index != 0 && !gate_wait(job)) return NULL;
    for (int p = 0; p < job->passes; p++) {
        pthread_barrier_wait(&job->barrier);   /* start; publishes thread 0's abort */
        if (job->abort) break;
        worker_pass(w, p);
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

/* The trace's highest live bytes from just before event `from` to just after the last event. */
static uint64_t tail_live(const trace *t, size_t from) {
    uint64_t live = 0, high = 0;
    for (size_t i = 0; i < t->num_events; i++) {
        if (i == from) high = live;
        if (t->events[i].kind == TRACE_ALLOC) live += t->events[i].bytes;
        else live -= t->events[i].bytes;
        if (i >= from && live > high) high = live;
    }
    return high;
}

int replay_job_init(replay_job *job, const trace *t, int passes, int threads) {
    memset(job, 0, sizeof *job);
    job->t = t;
    job->tail_from = t->num_events - t->num_events / 4;   /* the last n / 4 events (rounded down) */
    job->tail_live = tail_live(t, job->tail_from);
    job->passes = passes;
    job->threads = threads;
    size_t allocs = t->num_allocs ? t->num_allocs : 1;
    job->pass = calloc((size_t)passes, sizeof *job->pass);
    job->workers = calloc((size_t)threads, sizeof *job->workers);
    if (!job->pass || !job->workers) return -1;
    for (int k = 0; k < threads; k++) {
        worker *w = &job->workers[k];
        w->job = job;
        w->index = k;
        w->ptrs = calloc(allocs, sizeof *w->ptrs);
        w->state = calloc(allocs, sizeof *w->state);
        if (!w->ptrs || !w->state) return -1;
    }
    if (pthread_barrier_init(&job->barrier, NULL, (unsigned)threads) != 0) return -1;
    pthread_mutex_init(&job->gate_lock, NULL);
    pthread_cond_init(&job->gate_cond, NULL);
    return 0;
}

void replay_job_release(replay_job *job, int synced) {
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
int replay_run_runtime(replay_job *job, replay_result *r) {
    vram_memory_info info;
    int rc = replay_read_info(&info);
    if (rc == 0) {
        job->last_driver_allocs = info.num_driver_allocs;
        job->last_driver_frees = info.num_driver_frees;
        job->last_driver_moves = info.num_driver_moves;
        rc = run_threads(job);
    }
    if (rc == 0 && (rc = replay_read_info(&info)) == 0) {
        /* the peaks were reset before pass 1's last quarter: the highest of before and after */
        r->peak_reserved = info.peak_reserved > job->pre_peak_reserved ? info.peak_reserved : job->pre_peak_reserved;
        r->peak_in_use = info.peak > job->pre_peak ? info.peak : job->pre_peak;
        r->limit_bytes = info.limit;
        r->driver_allocs = info.num_driver_allocs;
        r->driver_frees = info.num_driver_frees;
        r->driver_moves = info.num_driver_moves;
        r->plan_steps = info.plan_steps;
        r->plan_ends = info.plan_ends;
        r->plan_slot_steps = info.plan_slot_steps;
        r->plan_refused = info.plan_refused;
        r->overflow_peak = info.overflow_peak;
        r->num_overflows = info.num_overflows;
        r->plan_given_back = info.plan_given_back;
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
        replay_report_status("vram_shutdown", s);
        rc = -1;
    }
    return rc;
}
