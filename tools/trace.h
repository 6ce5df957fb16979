/*
 * trace.h: allocation traces for `vram replay` (format: traces/README.md).
 *
 * A trace is read whole into memory before anything is replayed: gzip files (magic 1f 8b) are
 * decompressed by running `gzip -dc`, plain files are read directly. Allocation ids, arbitrary
 * integers in the file, become dense allocation numbers 0..num_allocs-1 so that the replay can keep its
 * pointers in a plain array. Every event is checked while reading: malformed lines, an id
 * allocated twice, and a free of an id that is not live are errors naming the file and line.
 */
#ifndef VRAM_TOOLS_TRACE_H
#define VRAM_TOOLS_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum { TRACE_ALLOC = 'a', TRACE_FREE = 'f' };

typedef struct trace_event {
    uint64_t bytes;   /* requested bytes (for a free: the bytes of the allocation it frees) */
    uint32_t alloc;   /* the allocation's number (its id's dense index: 0..num_allocs-1) */
    char     kind;    /* TRACE_ALLOC or TRACE_FREE */
} trace_event;

/* What trace_load_detail keeps beside the events (for `vram report`); the replay does not need it. */
typedef struct trace_detail {
    int64_t  *time_us;          /* [num_events]: the event's time_us (any int64; not always in order) */
    int64_t   time_min_us, time_max_us;  /* the earliest and latest of them (0 without events) */
    int64_t  *ids;              /* [num_allocs]: the id of each allocation number, as in the file */
    char    **frames;           /* [num_allocs]: "# frames <id> F1<TAB>F2..." text, or NULL */
    size_t    alloc_cap;        /* room in ids and frames (at least num_allocs) */
    uint64_t *recorded_reserved; /* [num_events] or NULL: the recording allocator's reserved bytes
                                    after the event ("# reserved <bytes>" lines; NULL when none) */
} trace_detail;

typedef struct trace {
    trace_event *events;
    size_t       num_events, cap_events;
    size_t       num_allocs, num_frees;   /* num_allocs: distinct allocation ids too (an id is allocated once) */
    uint64_t     peak_live_bytes;  /* max over time of the requested bytes not yet freed */
    trace_detail *detail;          /* trace_load_detail only, else NULL */
} trace;

/* Reads and checks the trace at `path` into *out (zeroed first). `path` "-" is standard input; a
 * pipe or FIFO is read as a stream (the gzip magic is sniffed from its first bytes, nothing is
 * sought). Returns 0, or -1 with a message in err (one line): "PATH:LINE: message" for a bad line
 * (bytes that are not printable are written as \xHH) and for a line that cannot be read whole (out
 * of memory, a read error, gzip failing or its data cut short: LINE is where the text stopped), "PATH:
 * message" for failures to open or start. Never a trace cut short without an error. */
int trace_load(const char *path, trace *out, char *err, size_t errlen);

/* trace_load, keeping times, ids, frames and the recording allocator's reserved bytes (`detail`).
 * Malformed "# frames" / "# reserved" lines are comments like any other (ignored). */
int trace_load_detail(const char *path, trace *out, char *err, size_t errlen);

/* Microseconds from the earliest event's time to `time_us` (one of the trace's): 0 to 2^64 - 1, since
 * two int64 times can be more than INT64_MAX apart; computed without signed overflow. */
static inline uint64_t trace_time_since_min(const trace_detail *d, int64_t time_us) {
    return (uint64_t)time_us - (uint64_t)d->time_min_us;
}

/* Frees what trace_load allocated; the trace is zeroed. */
void trace_release(trace *t);

#endif /* VRAM_TOOLS_TRACE_H */
