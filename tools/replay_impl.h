/*
 * replay_impl.h: what the files of `vram replay` share and nothing else includes: the state of one
 * replay (a job: its workers, one per thread, and the sums of its passes), its result, and the
 * functions each file gives the others. replay.c owns the policy table, the device, the
 * configuration and the entry point; replay_loop.c the timed loop, its threads and the statistics
 * they collect; replay_report.c the text and JSON reports. replay.c's header says how it all runs.
 */
#ifndef VRAM_TOOLS_REPLAY_IMPL_H
#define VRAM_TOOLS_REPLAY_IMPL_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <vram.h>

#include "replay.h"
#include "trace.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

enum { ALLOC_NONE, ALLOC_LIVE, ALLOC_FAILED, ALLOC_FREED };

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
    void    **ptrs;              /* by allocation number */
    uint8_t  *state;             /* ALLOC_* by allocation number */
    /* this pass */
    size_t    allocs, frees, failed, skipped;
    uint64_t  t[4];              /* start and end of its timed loops: [0], [1]; pass 1's last quarter [2], [3] */
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
    /* pass 1's last quarter: events tail_from.. (replay.c's header) */
    size_t            tail_from;
    uint64_t          tail_live;            /* the trace's highest live bytes there (one thread's) */
    int               tail_armed;           /* the peaks were reset before it */
    int               has_tail;             /* every thread replayed it whole */
    size_t            tail_reserved;        /* the highest reserved there */
    size_t            pre_peak_reserved, pre_peak;   /* the peaks before the reset */
} replay_job;

typedef struct replay_result {
    size_t   ops, allocs, frees, failed_allocs, skipped_frees;
    uint64_t total_ns, wall_ns;
    uint64_t peak_live;          /* the trace's peak x threads */
    uint64_t tail_live;          /* the trace's highest live in pass 1's last quarter x threads */
    size_t   peak_reserved, peak_in_use, limit_bytes;
    uint64_t driver_allocs, driver_frees, driver_moves;
    uint64_t plan_steps, plan_ends;        /* the repeating step's plan (plan:true): steps under one, ends */
    uint64_t plan_slot_steps;              /* of plan_steps, those served by a lookup (slot mode) */
    uint64_t plan_refused;                 /* plans not followed: their range did not fit the limit */
    size_t   overflow_peak;                /* overflow:host: the most host memory its blocks held at once */
    uint64_t num_overflows;                /* requests host memory served (the device could not) */
    size_t   plan_given_back;              /* bytes given back when plans came into force */
    int      growth;
    char     backend[32];
    char     first_error[2100];
} replay_result;

/* replay.c */
const replay_policy *replay_opt_policy(const replay_options *opt);   /* the policy, or the table's first */
void replay_report_status(const char *what, vram_status s);          /* "vram replay: WHAT: STATUS: error" */
int  replay_read_info(vram_memory_info *info);                       /* card 0's; 0, or -1 reported */

/* replay_loop.c */
int  replay_job_init(replay_job *job, const trace *t, int passes, int threads);   /* 0, or -1: no memory */
void replay_job_release(replay_job *job, int synced);   /* synced: job_init got as far as the barrier */
void replay_catch_sigint(struct sigaction *old);        /* the replay's SIGINT handler; old: to restore */
int  replay_run_runtime(replay_job *job, replay_result *r);  /* every pass, the statistics, shutdown; 0 or -1 */

/* replay_report.c */
void replay_print_text(const replay_options *opt, const replay_job *job, const replay_result *r);
void replay_print_json(const replay_options *opt, const replay_job *job, const replay_result *r);

#endif /* VRAM_TOOLS_REPLAY_IMPL_H */
