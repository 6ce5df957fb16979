/*
 * trace.h: allocation traces for `vram replay` (format: traces/README.md).
 *
 * A trace is read whole into memory before anything is replayed: gzip files (magic 1f 8b) are
 * decompressed by running `gzip -dc`, plain files are read directly. Allocation ids, arbitrary
 * integers in the file, become dense slot numbers 0..num_slots-1 so that the replay can keep its
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
    uint32_t slot;    /* dense index of the allocation id */
    char     kind;    /* TRACE_ALLOC or TRACE_FREE */
} trace_event;

typedef struct trace {
    trace_event *events;
    size_t       num_events, cap_events;
    size_t       num_allocs, num_frees;
    size_t       num_slots;        /* distinct allocation ids */
    uint64_t     peak_live_bytes;  /* max over time of the requested bytes not yet freed */
} trace;

/* Reads and checks the trace at `path` into *out (zeroed first). Returns 0, or -1 with a message
 * in err: "PATH:LINE: message" for a bad line, "PATH: message" for I/O and gzip failures. */
int trace_load(const char *path, trace *out, char *err, size_t errlen);

/* Frees what trace_load allocated; the trace is zeroed. */
void trace_release(trace *t);

#endif /* VRAM_TOOLS_TRACE_H */
