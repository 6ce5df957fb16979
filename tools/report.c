/*
 * report.c: `vram report INPUT -o FILE.html [--policy NAME | --growth] [--limit SIZE]`.
 *
 * Order: read the trace with its detail (trace.c: times, ids, stack frames, the recording
 * allocator's reserved bytes); a PyTorch snapshot (INPUT ending in .pickle or .pkl) is converted
 * first by tools/snapshot_to_trace.py, whose output is read through a pipe. Find the event where
 * the trace's live bytes first reach their peak; start the runtime as `vram replay` does (the
 * simulated card without a GPU); replay the trace once on this thread, reading
 * vram_get_memory_info after every event; shut down; write the page.
 *
 * What is kept while replaying, all bounded, so that the page stays a few MB for any trace:
 *   - the timeline: the events cut into at most TIMELINE_POINTS runs of equal length, each kept as
 *     its first event and time (written as the microseconds after the trace's earliest time, which
 *     is time0_us: 0 to 2^64 - 1, times being any int64 in any order) and the maximum over the run
 *     of the trace's live bytes, vram's in-use and reserved bytes, the recording allocator's
 *     reserved bytes and, with overflow:host (VRAM_OVERFLOW=host or VRAM_ALLOC_CONF), the host memory
 *     its overflow holds (so every peak is in the page exactly: the page's peak is the maximum of its
 *     points);
 *   - the address-space map (vram_get_segments: segments and the blocks tiling them) after at most
 *     MAX_SNAPSHOTS events spread evenly over the trace (fewer when many blocks are live: about
 *     SNAPSHOT_BLOCK_BUDGET blocks in all), and after the peak event;
 *   - the TOP_BLOCKS largest allocations live at the peak event, with their frames;
 *   - the first MAX_OOMS failed allocations, with vram's message (all are counted).
 *
 * The page is tools/report.html (inline CSS and JavaScript, nothing fetched), embedded at build
 * time as report_html[] (generated report_html.h); the data go where it says @VRAM_DATA@, as one
 * JSON object in a <script type="application/json"> element (strings by json.c's json_string_html:
 * valid UTF-8 whatever the bytes of paths and frames, '<', '>' and '&' escaped).
 *
 * Single-threaded; the runtime is started and shut down here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vram.h>

#include "json.h"
#include "report_html.h"
#include "trace.h"

#define TIMELINE_POINTS       3000
#define MAX_SNAPSHOTS         120
#define MIN_SNAPSHOTS         8
#define SNAPSHOT_BLOCK_BUDGET 150000
#define TOP_BLOCKS            25
#define MAX_OOMS              200

typedef struct snapshot {
    size_t             event;        /* taken after this event (0-based) */
    uint64_t           live, in_use, reserved;
    vram_segment_info *segs;
    size_t             nsegs;
    vram_block_info   *blocks;
    size_t             nblocks;
} snapshot;

typedef struct oom_event {
    size_t   event;
    uint64_t bytes;
    char     message[1024];
} oom_event;

typedef struct top_block {
    uint32_t alloc;   /* its allocation number */
    uint64_t address;
} top_block;

typedef struct report {
    const trace *t;
    void       **ptrs;             /* by allocation number */
    uint8_t     *live;             /* by allocation number: vram holds it */
    size_t      *alloc_event;      /* by allocation number */
    /* timeline */
    size_t       run, npoints;     /* events per point; points */
    size_t      *pt_event;
    int64_t     *pt_time;
    uint64_t    *pt_live, *pt_in_use, *pt_reserved, *pt_recorded;
    uint64_t    *pt_overflow;      /* host memory of the overflow (overflow:host) */
    /* snapshots */
    size_t      *snap_events;      /* sorted, unique */
    size_t       nsnap_events, next_snap;
    snapshot    *snaps;
    size_t       nsnaps;
    size_t       peak_event;       /* the trace's live bytes first reach their peak after it */
    size_t       peak_snap;
    top_block    top[TOP_BLOCKS];
    size_t       ntop;
    oom_event   *ooms;
    size_t       nooms, failed;
    vram_memory_info end;
    char         backend[32];
} report;

/* ---- input ---------------------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_snapshot(const char *path) { return ends_with(path, ".pickle") || ends_with(path, ".pkl"); }

/* tools/snapshot_to_trace.py: $VRAM_SNAPSHOT_TO_TRACE, else next to the build (../tools from the
 * executable) or the installation (../share/vram), else the source tree the tool was built from. */
static int find_converter(char *out, size_t len) {
    const char *env = getenv("VRAM_SNAPSHOT_TO_TRACE");
    if (env && *env) return snprintf(out, len, "%s", env), 0;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    static const char *const rel[] = { "/../tools/snapshot_to_trace.py", "/../share/vram/snapshot_to_trace.py" };
    for (size_t i = 0; i < 2; i++) {
        snprintf(out, len, "%s%s", exe, rel[i]);
        if (access(out, R_OK) == 0) return 0;
    }
#ifdef VRAM_SOURCE_CONVERTER
    snprintf(out, len, "%s", VRAM_SOURCE_CONVERTER);   /* a build outside the source tree */
    if (access(out, R_OK) == 0) return 0;
#endif
    return -1;
}

/* Converts the snapshot with python3 and reads the trace it writes on a pipe. */
static int load_snapshot(const char *path, trace *t) {
    char script[PATH_MAX + 64], err[1024];
    if (find_converter(script, sizeof script) != 0) {
        fprintf(stderr, "vram report: cannot find tools/snapshot_to_trace.py (set VRAM_SNAPSHOT_TO_TRACE)\n");
        return -1;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) { perror("vram report: pipe"); return -1; }
    /* fork and exec, not posix_spawnp: glibc's spawn runs the child on a stack of its own in the
     * parent's memory (CLONE_VM), which AddressSanitizer now and then takes for an overflow */
    char *argv[] = { "python3", script, (char *)path, "-o", "-", NULL };
    pid_t pid = fork();
    if (pid == 0) {                        /* (the child: only async-signal-safe calls) */
        if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(127);
        execvp("python3", argv);
        static const char msg[] = "vram report: cannot run python3\n";
        if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(127);
        _exit(127);
    }
    int e = errno;
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        fprintf(stderr, "vram report: cannot run python3 %s: %s\n", script, strerror(e));
        return -1;
    }
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", fds[0]);
    int rc = trace_load_detail(fdpath, t, err, sizeof err);
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (rc != 0) {   /* the reader's error first: the converter may have failed only because it stopped */
        fprintf(stderr, "vram report: %s (converted from %s)\n", err, path);
        return -1;
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        trace_release(t);
        fprintf(stderr, "vram report: %s: the conversion failed (its message is above)\n", path);
        return -1;
    }
    return 0;
}

static int load_input(const char *path, trace *t) {
    if (is_snapshot(path)) return load_snapshot(path, t);
    char err[1024];
    if (trace_load_detail(path, t, err, sizeof err) != 0) {
        fprintf(stderr, "vram report: %s\n", err);
        return -1;
    }
    return 0;
}

/* ---- planning ------------------------------------------------------------------------------- */

/* The first event after which live bytes equal the peak, and the most allocations live at once. */
static void scan_peak(const trace *t, size_t *peak_event, size_t *max_live_count) {
    uint64_t live = 0;
    size_t count = 0, most = 0;
    *peak_event = 0;
    int found = 0;
    for (size_t i = 0; i < t->num_events; i++) {
        if (t->events[i].kind == TRACE_ALLOC) { live += t->events[i].bytes; count++; }
        else { live -= t->events[i].bytes; count--; }
        if (count > most) most = count;
        if (!found && live == t->peak_live_bytes) { *peak_event = i; found = 1; }
    }
    *max_live_count = most;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static int plan(report *r) {
    const trace *t = r->t;
    size_t n = t->num_events, most = 0;
    scan_peak(t, &r->peak_event, &most);
    r->run = n / TIMELINE_POINTS + 1;
    r->npoints = n ? (n + r->run - 1) / r->run : 0;
    size_t k = SNAPSHOT_BLOCK_BUDGET / (2 * most + 2);
    if (k > MAX_SNAPSHOTS) k = MAX_SNAPSHOTS;
    if (k < MIN_SNAPSHOTS) k = MIN_SNAPSHOTS;
    if (k > n) k = n;
    size_t allocs = t->num_allocs ? t->num_allocs : 1, pts = r->npoints ? r->npoints : 1;
    r->ptrs = calloc(allocs, sizeof *r->ptrs);
    r->live = calloc(allocs, 1);
    r->alloc_event = calloc(allocs, sizeof *r->alloc_event);
    r->pt_event = calloc(pts, sizeof *r->pt_event);
    r->pt_time = calloc(pts, sizeof *r->pt_time);
    r->pt_live = calloc(pts, sizeof *r->pt_live);
    r->pt_in_use = calloc(pts, sizeof *r->pt_in_use);
    r->pt_reserved = calloc(pts, sizeof *r->pt_reserved);
    r->pt_recorded = calloc(pts, sizeof *r->pt_recorded);
    r->pt_overflow = calloc(pts, sizeof *r->pt_overflow);
    r->snap_events = calloc(k + 1, sizeof *r->snap_events);
    r->snaps = calloc(k + 1, sizeof *r->snaps);
    r->ooms = calloc(MAX_OOMS, sizeof *r->ooms);
    if (!r->ptrs || !r->live || !r->alloc_event || !r->pt_event || !r->pt_time || !r->pt_live ||
        !r->pt_in_use || !r->pt_reserved || !r->pt_recorded || !r->pt_overflow || !r->snap_events || !r->snaps ||
        !r->ooms)
        return -1;
    size_t m = 0;
    for (size_t j = 0; j < k; j++) r->snap_events[m++] = (j + 1) * n / k - 1;
    if (n) r->snap_events[m++] = r->peak_event;
    qsort(r->snap_events, m, sizeof *r->snap_events, cmp_size);
    size_t u = 0;
    for (size_t j = 0; j < m; j++)
        if (u == 0 || r->snap_events[j] != r->snap_events[u - 1]) r->snap_events[u++] = r->snap_events[j];
    r->nsnap_events = u;
    return 0;
}

/* ---- the replay ----------------------------------------------------------------------------- */

static int take_snapshot(report *r, size_t event, uint64_t live, const vram_memory_info *info) {
    snapshot *s = &r->snaps[r->nsnaps];
    size_t nsegs = 0, nblocks = 0;
    for (int tries = 0; tries < 4; tries++) {
        vram_status st = vram_get_segments(0, s->segs, s->nsegs, &nsegs, s->blocks, s->nblocks, &nblocks);
        if (st != VRAM_OK) {
            fprintf(stderr, "vram report: vram_get_segments: %s: %s\n", vram_status_name(st), vram_last_error());
            return -1;
        }
        if (nsegs <= s->nsegs && nblocks <= s->nblocks) break;
        free(s->segs);
        free(s->blocks);
        s->segs = calloc(nsegs + 1, sizeof *s->segs);
        s->blocks = calloc(nblocks + 1, sizeof *s->blocks);
        if (!s->segs || !s->blocks) return -1;
        s->nsegs = nsegs;
        s->nblocks = nblocks;
    }
    s->nsegs = nsegs;
    s->nblocks = nblocks;
    s->event = event;
    s->live = live;
    s->in_use = info->current;
    s->reserved = info->reserved;
    if (event == r->peak_event) r->peak_snap = r->nsnaps;
    r->nsnaps++;
    return 0;
}

/* The TOP_BLOCKS largest allocations live now (at the peak event). */
static void take_top(report *r) {
    const trace *t = r->t;
    r->ntop = 0;
    for (uint32_t s = 0; s < t->num_allocs; s++) {
        if (!r->live[s]) continue;
        uint64_t b = 0;
        /* the allocation's requested bytes: found from its allocation event */
        b = t->events[r->alloc_event[s]].bytes;
        size_t at = r->ntop < TOP_BLOCKS ? r->ntop++ : TOP_BLOCKS;
        if (at == TOP_BLOCKS) {
            if (b <= t->events[r->alloc_event[r->top[TOP_BLOCKS - 1].alloc]].bytes) continue;
            at = TOP_BLOCKS - 1;
        }
        while (at > 0 && t->events[r->alloc_event[r->top[at - 1].alloc]].bytes < b) {
            r->top[at] = r->top[at - 1];
            at--;
        }
        r->top[at] = (top_block){ .alloc = s, .address = (uint64_t)(uintptr_t)r->ptrs[s] };
    }
}

static void note_oom(report *r, size_t event, uint64_t bytes, vram_status s) {
    if (r->failed++ >= MAX_OOMS) return;
    oom_event *o = &r->ooms[r->nooms++];
    o->event = event;
    o->bytes = bytes;
    snprintf(o->message, sizeof o->message, "%s: %s", vram_status_name(s), vram_last_error());
}

static int replay_events(report *r) {
    const trace *t = r->t;
    const trace_detail *d = t->detail;
    uint64_t live = 0;
    for (size_t i = 0; i < t->num_events; i++) {
        const trace_event *ev = &t->events[i];
        uint32_t a = ev->alloc;
        if (ev->kind == TRACE_ALLOC) {
            live += ev->bytes;
            r->alloc_event[a] = i;
            vram_status s = vram_malloc(&r->ptrs[a], (size_t)ev->bytes, 0);
            if (s == VRAM_OK) r->live[a] = 1;
            else note_oom(r, i, ev->bytes, s);
        } else {
            live -= ev->bytes;
            if (r->live[a]) {
                r->live[a] = 0;
                vram_status s = vram_free(r->ptrs[a]);
                if (s != VRAM_OK) {
                    fprintf(stderr, "vram report: event %zu: vram_free: %s: %s\n", i + 1, vram_status_name(s),
                            vram_last_error());
                    return -1;
                }
            }
        }
        vram_memory_info info;
        if (vram_get_memory_info(0, &info) != VRAM_OK) return -1;
        size_t p = i / r->run;
        if (i % r->run == 0) {
            r->pt_event[p] = i;
            r->pt_time[p] = d->time_us[i];
        }
        if (live > r->pt_live[p]) r->pt_live[p] = live;
        if (info.current > r->pt_in_use[p]) r->pt_in_use[p] = info.current;
        if (info.reserved > r->pt_reserved[p]) r->pt_reserved[p] = info.reserved;
        if (info.overflow_bytes > r->pt_overflow[p]) r->pt_overflow[p] = info.overflow_bytes;
        if (d->recorded_reserved && d->recorded_reserved[i] > r->pt_recorded[p])
            r->pt_recorded[p] = d->recorded_reserved[i];
        if (i == r->peak_event) take_top(r);
        if (r->next_snap < r->nsnap_events && r->snap_events[r->next_snap] == i) {
            r->next_snap++;
            if (take_snapshot(r, i, live, &info) != 0) return -1;
        }
    }
    int rc = vram_get_memory_info(0, &r->end) == VRAM_OK ? 0 : -1;
    for (size_t s = 0; s < t->num_allocs; s++)   /* what the trace leaves live, so that shutdown succeeds */
        if (r->live[s] && vram_free(r->ptrs[s]) != VRAM_OK) rc = -1;
    return rc;
}

/* ---- the page ------------------------------------------------------------------------------- */

static void json_u64s(FILE *f, const char *key, const uint64_t *v, size_t n) {
    fprintf(f, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%" PRIu64, i ? "," : "", v[i]);
    fputc(']', f);
}

/* The lowest address of any segment of any snapshot: the map's addresses are given from it. */
static uint64_t map_base(const report *r) {
    uint64_t base = UINT64_MAX;
    for (size_t k = 0; k < r->nsnaps; k++)
        for (size_t j = 0; j < r->snaps[k].nsegs; j++)
            if (r->snaps[k].segs[j].address < base) base = r->snaps[k].segs[j].address;
    return base == UINT64_MAX ? 0 : base;
}

/* A segment: [offset, size, expandable, small, [block sizes: + allocated, - free]]. Blocks tile a
 * segment in address order; a hole between them (none expected) is written as a free block. */
static void write_segment(FILE *f, const snapshot *s, const vram_segment_info *g, uint64_t base) {
    fprintf(f, "[%" PRIu64 ",%zu,%d,%d,[", g->address - base, g->size, g->expandable, g->small);
    uint64_t at = g->address;
    int first = 1;
    for (size_t b = g->first_block; b < g->first_block + g->nblocks && b < s->nblocks; b++) {
        const vram_block_info *k = &s->blocks[b];
        if (k->address > at) { fprintf(f, "%s-%" PRIu64, first ? "" : ",", k->address - at); first = 0; }
        fprintf(f, "%s%s%zu", first ? "" : ",", k->active ? "" : "-", k->size);
        first = 0;
        at = k->address + k->size;
    }
    fputs("]]", f);
}

static void write_snapshots(FILE *f, const report *r, uint64_t base) {
    fputs(",\"snapshots\":[", f);
    for (size_t k = 0; k < r->nsnaps; k++) {
        const snapshot *s = &r->snaps[k];
        fprintf(f, "%s{\"event\":%zu,\"live\":%" PRIu64 ",\"in_use\":%" PRIu64 ",\"reserved\":%" PRIu64
                ",\"segments\":[", k ? "," : "", s->event, s->live, s->in_use, s->reserved);
        for (size_t j = 0; j < s->nsegs; j++) {
            if (j) fputc(',', f);
            write_segment(f, s, &s->segs[j], base);
        }
        fputs("]}", f);
    }
    fprintf(f, "],\"peak_snapshot\":%zu", r->peak_snap);
}

static void write_top(FILE *f, const report *r, uint64_t base) {
    const trace_detail *d = r->t->detail;
    fputs(",\"top\":[", f);
    for (size_t i = 0; i < r->ntop; i++) {
        const top_block *b = &r->top[i];
        size_t ev = r->alloc_event[b->alloc];
        fprintf(f, "%s{\"id\":%" PRId64 ",\"bytes\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"event\":%zu,\"frames\":",
                i ? "," : "", d->ids[b->alloc], r->t->events[ev].bytes, b->address - base, ev);
        json_string_html(f, d->frames[b->alloc] ? d->frames[b->alloc] : "");
        fputc('}', f);
    }
    fputc(']', f);
}

static void write_ooms(FILE *f, const report *r) {
    fprintf(f, ",\"failed_allocs\":%zu,\"ooms\":[", r->failed);
    for (size_t i = 0; i < r->nooms; i++) {
        fprintf(f, "%s{\"event\":%zu,\"bytes\":%" PRIu64 ",\"message\":", i ? "," : "", r->ooms[i].event,
                r->ooms[i].bytes);
        json_string_html(f, r->ooms[i].message);
        fputc('}', f);
    }
    fputc(']', f);
}

static void write_data(FILE *f, const report *r, const report_options *opt) {
    const replay_policy *pol = opt->replay.policy ? opt->replay.policy : &replay_policies[0];
    const trace_detail *d = r->t->detail;
    uint64_t rec_peak = 0;
    for (size_t i = 0; d->recorded_reserved && i < r->npoints; i++)
        if (r->pt_recorded[i] > rec_peak) rec_peak = r->pt_recorded[i];
    int has_time = d->time_max_us != d->time_min_us;
    uint64_t base = map_base(r);
    fputs("{\"input\":", f);
    json_string_html(f, opt->replay.trace_path);
    fputs(",\"policy\":", f);
    json_string_html(f, pol->name);
    fputs(",\"policy_description\":", f);
    json_string_html(f, pol->description);
    fputs(",\"backend\":", f);
    json_string_html(f, r->backend);
    fprintf(f, ",\"version\":");
    json_string_html(f, vram_version_string());
    fprintf(f, ",\"limit_bytes\":%zu,\"limit_given\":%s,\"events\":%zu,\"allocs\":%zu,\"frees\":%zu",
            r->end.limit, opt->replay.has_limit ? "true" : "false", r->t->num_events, r->t->num_allocs,
            r->t->num_frees);
    fprintf(f, ",\"peak_live_bytes\":%" PRIu64 ",\"peak_event\":%zu,\"peak_reserved_bytes\":%zu"
            ",\"peak_in_use_bytes\":%zu", r->t->peak_live_bytes, r->peak_event, r->end.peak_reserved, r->end.peak);
    fprintf(f, ",\"driver_allocs\":%" PRIu64 ",\"driver_frees\":%" PRIu64 ",\"driver_moves\":%" PRIu64,
            r->end.num_driver_allocs, r->end.num_driver_frees, r->end.num_driver_moves);
    fprintf(f, ",\"recorded\":%s,\"recorded_peak_reserved_bytes\":%" PRIu64, d->recorded_reserved ? "true" : "false",
            rec_peak);
    fprintf(f, ",\"overflow\":%s,\"overflow_peak_bytes\":%zu,\"overflow_allocs\":%" PRIu64,
            r->end.overflow_max ? "true" : "false", r->end.overflow_peak, r->end.num_overflows);
    fprintf(f, ",\"has_time\":%s,\"time0_us\":%" PRId64 ",\"points_per_run\":%zu,\"map_base\":%" PRIu64,
            has_time ? "true" : "false", d->time_min_us, r->run, base);
    fputs(",\"timeline\":{\"event\":[", f);
    for (size_t i = 0; i < r->npoints; i++) fprintf(f, "%s%zu", i ? "," : "", r->pt_event[i]);
    fputs("],\"time_us\":[", f);
    for (size_t i = 0; i < r->npoints; i++)   /* after the earliest: unsigned, as two int64 times can be 2^64 - 1 apart */
        fprintf(f, "%s%" PRIu64, i ? "," : "", trace_time_since_min(d, r->pt_time[i]));
    fputc(']', f);
    json_u64s(f, "live", r->pt_live, r->npoints);
    json_u64s(f, "in_use", r->pt_in_use, r->npoints);
    json_u64s(f, "reserved", r->pt_reserved, r->npoints);
    json_u64s(f, "recorded", r->pt_recorded, d->recorded_reserved ? r->npoints : 0);
    json_u64s(f, "overflow", r->pt_overflow, r->end.overflow_max ? r->npoints : 0);
    fputc('}', f);
    write_snapshots(f, r, base);
    write_top(f, r, base);
    write_ooms(f, r);
    fputs("}", f);
}

static int write_page(const report *r, const report_options *opt) {
    static const char marker[] = "@VRAM_DATA@";
    const char *at = strstr(report_html, marker);
    if (!at) { fputs("vram report: the page template has no @VRAM_DATA@\n", stderr); return -1; }
    FILE *f = strcmp(opt->out_path, "-") == 0 ? stdout : fopen(opt->out_path, "w");
    if (!f) { fprintf(stderr, "vram report: %s: %s\n", opt->out_path, strerror(errno)); return -1; }
    fwrite(report_html, 1, (size_t)(at - report_html), f);
    write_data(f, r, opt);
    fputs(at + strlen(marker), f);
    int bad = ferror(f);
    if (f != stdout ? fclose(f) != 0 : fflush(f) != 0) bad = 1;
    if (bad) { fprintf(stderr, "vram report: %s: write error\n", opt->out_path); return -1; }
    return 0;
}

/* ---- entry point ---------------------------------------------------------------------------- */

static void report_release(report *r) {
    for (size_t k = 0; r->snaps && k < r->nsnap_events; k++) {
        free(r->snaps[k].segs);
        free(r->snaps[k].blocks);
    }
    free(r->snaps); free(r->snap_events); free(r->ooms);
    free(r->ptrs); free(r->live); free(r->alloc_event);
    free(r->pt_event); free(r->pt_time); free(r->pt_live); free(r->pt_in_use); free(r->pt_reserved);
    free(r->pt_recorded);
    free(r->pt_overflow);
}

int report_run(const report_options *opt) {
    trace t;
    if (load_input(opt->replay.trace_path, &t) != 0) return 1;
    report r = { .t = &t };
    int rc = 1;
    if (plan(&r) != 0) {
        fputs("vram report: out of memory\n", stderr);
    } else if (replay_start_runtime(&opt->replay, &t) == 0) {
        const char *b = getenv("VRAM_BACKEND");
        snprintf(r.backend, sizeof r.backend, "%s", b && *b ? b : "cuda");
        int ok = replay_events(&r) == 0;
        vram_status s = vram_shutdown();
        if (s != VRAM_OK) {
            fprintf(stderr, "vram report: vram_shutdown: %s: %s\n", vram_status_name(s), vram_last_error());
            ok = 0;
        }
        if (ok && write_page(&r, opt) == 0) {
            rc = 0;
            if (strcmp(opt->out_path, "-") != 0)
                fprintf(stderr, "vram report: wrote %s (%zu events, peak live %" PRIu64 " bytes, peak reserved "
                        "%zu bytes, %zu failed allocations)\n", opt->out_path, t.num_events, t.peak_live_bytes,
                        r.end.peak_reserved, r.failed);
        }
    }
    report_release(&r);
    trace_release(&t);
    return rc;
}
