/*
 * replay_report.c: the reports of `vram replay`, for replay.c: the figures derived from a job's
 * passes (mean, cold and warm time per call, throughput, the warm passes' driver calls), the text
 * report (on stdout, on stderr with --json) and the one JSON object of --json (its strings written by
 * json.c's json_string, as every JSON of the tool).
 */
#include "replay_impl.h"
#include "json.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *text_out(const replay_options *opt) { return opt->json ? stderr : stdout; }

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

/* The tail's ratio exists when pass 1 replayed its last quarter whole and something was live there. */
static int has_tail(const replay_job *job, const replay_result *r) { return job->has_tail && r->tail_live; }
static double tail_ratio(const replay_job *job, const replay_result *r) {
    return has_tail(job, r) ? (double)job->tail_reserved / (double)r->tail_live : 0.0;
}

/* `, "key": value` with `decimals` digits after the point, or null. */
static void json_number_or_null(const char *key, int has, int decimals, double v) {
    printf(", \"%s\": ", key);
    if (has) printf("%.*f", decimals, v);
    else fputs("null", stdout);
}

static void json_count_or_null(const char *key, int has, uint64_t v) {
    printf(", \"%s\": ", key);
    if (has) printf("%" PRIu64, v);
    else fputs("null", stdout);
}

void replay_print_json(const replay_options *opt, const replay_job *job, const replay_result *r) {
    summary s = summarise(job, r);
    printf("{\"trace\": ");
    json_string(stdout, opt->trace_path);
    printf(", \"backend\": ");
    json_string(stdout, r->backend);
    printf(", \"policy\": ");
    json_string(stdout, replay_opt_policy(opt)->name);
    printf(", \"policy_alloc_conf\": ");          /* what the policy set, then what the environment adds */
    if (replay_opt_policy(opt)->conf) json_string(stdout, replay_opt_policy(opt)->conf);
    else fputs("null", stdout);
    printf(", \"env_alloc_conf\": ");
    if (getenv("VRAM_ALLOC_CONF")) json_string(stdout, getenv("VRAM_ALLOC_CONF"));
    else fputs("null", stdout);
    printf(", \"growth\": %s, \"limit_bytes\": %zu", r->growth ? "true" : "false", r->limit_bytes);
    printf(", \"passes\": %d, \"threads\": %d, \"trace_events\": %zu", job->passes, job->threads,
           job->t->num_events);
    printf(", \"ops\": %zu, \"allocs\": %zu, \"frees\": %zu", r->ops, r->allocs, r->frees);
    printf(", \"peak_live_bytes\": %" PRIu64 ", \"peak_reserved_bytes\": %zu, \"peak_in_use_bytes\": %zu",
           r->peak_live, r->peak_reserved, r->peak_in_use);
    printf(", \"reserved_to_live\": %.3f", ratio(r));
    json_number_or_null("tail_reserved_to_live", has_tail(job, r), 3, tail_ratio(job, r));
    json_count_or_null("tail_reserved_bytes", has_tail(job, r), job->tail_reserved);
    printf(", \"tail_live_bytes\": %" PRIu64 ", \"ns_per_op\": %.1f", r->tail_live, s.ns_per_op);
    printf(", \"mean_ns_per_op\": %.1f, \"cold_ns_per_op\": %.1f", s.ns_per_op, s.cold_ns_per_op);
    json_number_or_null("warm_ns_per_op", s.has_warm, 1, s.warm_ns_per_op);
    printf(", \"ops_per_sec\": %.0f, \"cold_ops_per_sec\": %.0f", s.ops_per_sec, s.cold_ops_per_sec);
    json_number_or_null("warm_ops_per_sec", s.has_warm, 0, s.warm_ops_per_sec);
    printf(", \"driver_allocs\": %" PRIu64 ", \"driver_frees\": %" PRIu64 ", \"driver_moves\": %" PRIu64,
           r->driver_allocs, r->driver_frees, r->driver_moves);
    printf(", \"plan_steps\": %" PRIu64 ", \"plan_slot_steps\": %" PRIu64 ", \"plan_ends\": %" PRIu64
           ", \"plan_given_back_bytes\": %zu, \"plan_refused\": %" PRIu64, r->plan_steps, r->plan_slot_steps,
           r->plan_ends, r->plan_given_back, r->plan_refused);
    printf(", \"overflow_allocs\": %" PRIu64 ", \"overflow_peak_bytes\": %zu", r->num_overflows, r->overflow_peak);
    json_count_or_null("driver_allocs_warm", s.has_warm, s.driver_allocs_warm);
    json_count_or_null("driver_frees_warm", s.has_warm, s.driver_frees_warm);
    json_count_or_null("driver_moves_warm", s.has_warm, s.driver_moves_warm);
    printf(", \"failed_allocs\": %zu, \"skipped_frees\": %zu, \"first_error\": ", r->failed_allocs,
           r->skipped_frees);
    if (r->failed_allocs) json_string(stdout, r->first_error);
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

/* The driver's calls, the plan's steps and the overflow, as replay_print_text's lines. */
static void text_driver(FILE *f, const replay_job *job, const replay_result *r, const summary *s) {
    double gib = (double)GIB;
    fprintf(f, "driver allocs:    %" PRIu64 "\n", r->driver_allocs);
    fprintf(f, "driver frees:     %" PRIu64 "\n", r->driver_frees);
    fprintf(f, "driver moves:     %" PRIu64 " (idle pieces mapped again under a block)\n", r->driver_moves);
    if (s->has_warm)
        fprintf(f, "driver warm:      %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " moves (passes 2..%d)\n",
                s->driver_allocs_warm, s->driver_frees_warm, s->driver_moves_warm, job->passes);
    if (r->plan_steps > 0 || r->plan_ends > 0)
        fprintf(f, "plan:             %" PRIu64 " steps placed from the repeating step's plan (%" PRIu64
                   " by a lookup), %" PRIu64 " plans ended early, %zu bytes given back when plans came"
                   " into force\n", r->plan_steps, r->plan_slot_steps, r->plan_ends, r->plan_given_back);
    if (r->plan_refused > 0)
        fprintf(f, "plan refused:     %" PRIu64 " (the plan's range did not fit beside the blocks from before its step"
                   " under the limit: best fit placed the steps)\n", r->plan_refused);
    if (r->num_overflows > 0)
        fprintf(f, "overflow:         %" PRIu64 " requests served from host memory (overflow:host), at most %.2f GiB"
                   " (%zu bytes) there at once\n", r->num_overflows, (double)r->overflow_peak / gib, r->overflow_peak);
}

/* One line a pass (the first TEXT_PASS_LINES), after a replay of several passes. */
static void text_passes(FILE *f, const replay_job *job) {
    if (job->passes <= 1) return;
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

void replay_print_text(const replay_options *opt, const replay_job *job, const replay_result *r) {
    FILE *f = text_out(opt);
    summary s = summarise(job, r);
    const replay_policy *pol = replay_opt_policy(opt);
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
    if (has_tail(job, r))
        fprintf(f, "tail reserved / live: %.3f (pass 1's last %zu events: %zu reserved, %" PRIu64 " live bytes)\n",
                tail_ratio(job, r), job->t->num_events - job->tail_from, job->tail_reserved, r->tail_live);
    else
        fprintf(f, "tail reserved / live: n/a (%s)\n", job->has_tail ? "nothing live in pass 1's last quarter"
                                                                    : "pass 1 stopped before its end");
    fprintf(f, "ns / op:          %.1f\n", s.ns_per_op);
    fprintf(f, "ns / op cold:     %.1f\n", s.cold_ns_per_op);
    if (s.has_warm) fprintf(f, "ns / op warm:     %.1f\n", s.warm_ns_per_op);
    fprintf(f, "ops / s:          %.0f\n", s.ops_per_sec);
    text_driver(f, job, r, &s);
    fprintf(f, "failed allocs:    %zu\n", r->failed_allocs);
    if (r->failed_allocs) fprintf(f, "first failure:    %s\n", r->first_error);
    if (job->interrupted)
        fprintf(f, "interrupted:      Ctrl-C in pass %d after %zu of %zu events; the figures are so far\n",
                job->interrupted_pass + 1, job->interrupted_event, job->t->num_events);
    text_passes(f, job);
}
