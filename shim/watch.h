/*
 * watch.h: the idle watcher of `vram run --idle-sleep DURATION` and of the Slurm plugin's
 * --vram-idle-sleep: a process of its own that puts each process it watches to sleep once it has made
 * no CUDA call for DURATION, and wakes it at its next call (sleep.h does both). Compiled into `vram`
 * and the Slurm plugin; not into the preload library.
 *
 * Who is watched: the process that starts the watcher (it execs its program next) and every process
 * under it that inherits VRAM_IDLE_WATCHER: each names the watcher in its ledger slots and keeps an
 * activity page (ledger.h's ledger_activity; shim/activity.c) where every driver call the preload
 * library sees is counted. So a notebook server's kernels, children of the server, are watched each
 * on its own.
 *
 * The watcher: forked twice (reparented away from the program, which never sees it as a child) into
 * its own session (no terminal signals reach it), its standard input and output on /dev/null, its
 * standard error the program's (it says there, one line each, when it puts a process to sleep or
 * wakes it, and why it cannot). It loads the driver (cuInit: a restore needs it) and opens the ledger
 * before the program starts: watch_start returns only once it runs, or with the reason it cannot.
 * Every tick it reads the activity pages of its processes (found in the ledger every half second):
 * a count that moved is activity (and wakes a process asleep: its call is blocked in the driver
 * meanwhile); a process whose count has not moved for DURATION, with no synchronising call under way,
 * is put to sleep. A process put to sleep by hand (`vram sleep`, or `vram sleep` of one the watcher put
 * to sleep: the ledger names its sleeper) is left alone: its calls wait until `vram wake`. A tick is 10 ms while one of its processes sleeps (a call waits at most that long
 * before its wake starts), else a tenth of DURATION (at most 1 s). A wake refused for lack of room
 * is tried again every second (said once). It exits once the process that started it is gone and
 * none of its processes lives; SIGTERM makes it wake every process it put to sleep and exit. A
 * watcher killed outright (kill -9) leaves its sleeping processes asleep: `vram wake PID` wakes them.
 *
 * Invariants: one thread; the pages are mapped read-only and unmapped when their process is gone.
 */
#ifndef VRAM_SHIM_WATCH_H
#define VRAM_SHIM_WATCH_H

#include <stddef.h>
#include <stdint.h>

/* Starts the watcher of the calling process (about to exec its program) for `idle_ns`, with the ledger
 * in `ledger_dir` (absolute; NULL: vram__ledger_place's, as the preload library finds it). 0 with `env` set
 * to the value of VRAM_IDLE_WATCHER for the program; -1 with one sentence in err (no checkpoint API,
 * no ledger, ...; the program then runs without idle sleep). */
int watch_start(uint64_t idle_ns, const char *ledger_dir, char *env, size_t envlen, char *err, size_t errlen);

/* "10m", "90s", "1.5h", "250ms": a duration for messages. */
void watch_format_duration(uint64_t ns, char *out, size_t len);

#endif /* VRAM_SHIM_WATCH_H */
