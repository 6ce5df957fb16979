/*
 * replay.h: `vram replay`: replays an allocation trace through libvram on logical device 0 and
 * reports peak live bytes, peak reserved bytes, their ratio, the mean time of one call and the
 * driver calls made.
 */
#ifndef VRAM_TOOLS_REPLAY_H
#define VRAM_TOOLS_REPLAY_H

#include <stddef.h>
#include <stdio.h>

typedef struct replay_options {
    const char *trace_path;
    int         growth;       /* --growth: vram_set_memory_growth(0, 1) */
    int         has_limit;    /* --limit SIZE given */
    size_t      limit_bytes;  /* the parsed SIZE */
    int         json;         /* --json: one JSON object on stdout, everything else on stderr */
} replay_options;

/* Runs the replay and prints the report. Returns the exit status: 0 when the replay ran (failed
 * allocations included), 1 on errors (bad trace, configuration or start failure). */
int replay_run(const replay_options *opt);

/* Writes `s` as a JSON string literal (quoted, escaped); shared by the tool's JSON printers. */
void tool_json_string(FILE *f, const char *s);

#endif /* VRAM_TOOLS_REPLAY_H */
