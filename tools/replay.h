/*
 * replay.h: `vram replay`: replays an allocation trace through libvram on logical device 0 and
 * reports peak live bytes, peak reserved bytes, their ratio, the mean time of one call (cold first
 * pass and warm later passes), the throughput of one or more threads and the driver calls made.
 */
#ifndef VRAM_TOOLS_REPLAY_H
#define VRAM_TOOLS_REPLAY_H

#include <stddef.h>
#include <stdio.h>

/* An allocator strategy `--policy NAME` selects. The table (replay_policies, in replay.c) is the
 * one place that lists them: adding a strategy is one line there; `vram --help` prints it. */
typedef struct replay_policy {
    const char *name;         /* "growth" */
    int         growth;       /* passed to vram_set_memory_growth(0, growth) */
    const char *conf;         /* passed to vram_set_alloc_conf(conf); NULL: not called */
    const char *description;  /* one line for --help */
} replay_policy;

extern const replay_policy replay_policies[];
extern const size_t        replay_num_policies;

/* The policy called `name`, or NULL. */
const replay_policy *replay_find_policy(const char *name);

#define REPLAY_MAX_PASSES  100000
#define REPLAY_MAX_THREADS 1024

typedef struct replay_options {
    const char          *trace_path;
    const replay_policy *policy;       /* --policy NAME (--growth: "growth"); NULL: replay_policies[0] */
    int                  has_limit;    /* --limit SIZE given */
    size_t               limit_bytes;  /* the parsed SIZE */
    int                  passes;       /* --passes N, 1..REPLAY_MAX_PASSES; 0 means 1 */
    int                  threads;      /* --threads N, 1..REPLAY_MAX_THREADS; 0 means 1 */
    int                  json;         /* --json: one JSON object on stdout, everything else on stderr */
    int                  allow_failures; /* --allow-failures: failed allocations still exit 0 */
} replay_options;

/* Runs the replay and prints the report. Returns the exit status: 0 when the replay ran and every
 * allocation succeeded (or failed ones with allow_failures), 3 when some failed, 130 when SIGINT
 * stopped it (the report of what ran is printed), 1 on errors (bad trace, configuration or start
 * failure). */
int replay_run(const replay_options *opt);

struct trace;
/* What replay_run does before it replays, for `vram report`: makes sure there is a device (the
 * simulated card, sized for one thread, whenever VRAM_BACKEND is unset, GPU or not), configures
 * card 0 from opt's policy and limit and starts the runtime. 0, or -1 with the reason on stderr;
 * the caller calls vram_shutdown() after a 0. */
int replay_start_runtime(const replay_options *opt, const struct trace *t);

#endif /* VRAM_TOOLS_REPLAY_H */
