/*
 * report.h: `vram report INPUT -o FILE.html`: replays a trace (or a PyTorch memory snapshot,
 * converted by tools/snapshot_to_trace.py) on one thread through vram's policies and writes one
 * self-contained HTML page of what memory it held: the timeline of live and reserved bytes, the
 * address-space map at bounded moments, the largest blocks at the peak, the out-of-memory events
 * and the headline figures.
 */
#ifndef VRAM_TOOLS_REPORT_H
#define VRAM_TOOLS_REPORT_H

#include "replay.h"

typedef struct report_options {
    replay_options replay;     /* trace_path (the INPUT), policy, limit; passes/threads/json unused */
    const char    *out_path;   /* -o FILE */
} report_options;

/* Writes the report; returns the exit status (0 written, 1 error). */
int report_run(const report_options *opt);

#endif /* VRAM_TOOLS_REPORT_H */
