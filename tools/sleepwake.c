/*
 * sleepwake.c: `vram sleep [--timeout DURATION] PID... | --group NAME` and `vram wake [--device DEV]
 * PID... | --group NAME`: put CUDA processes to sleep (their device memory to host memory, the card's
 * memory free for others, their CUDA calls blocked) and wake them, through the driver's process
 * checkpoint API; shim/sleep.h does the work and keeps the ledger in step (vram top, group budgets).
 *
 * --group NAME: every running process of the group in the ledger (vram run --group, a Slurm job's
 * slurm-<id>), in pid order; for sleep those awake, for wake those asleep. --timeout: how long the
 * lock may wait for the process's CUDA calls under way (default 10 s). --device DEV (wake): onto
 * another card of the same kind, by index (vram ls) or UUID, for a process of one card.
 *
 * Output: a line per process on stdout ("PID 1234 (python) is asleep: its 6.00 GiB ..."), refusals
 * and errors on stderr. Exit status: 0 every process is asleep / awake (or was), 1 an error (no
 * checkpoint API, no such process, not yours, a driver refusal), 2 a usage error, 3 a wake refused for
 * lack of room on its card or in its group (the process stays asleep, nothing lost). No state, one
 * thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/common.h"
#include "common/ledger.h"
#include "sleep.h"
#include "sleepwake.h"

#define SLEEP_MAX_PIDS 1024

typedef struct sleep_opts {
    int wake;
    const char *group, *device;
    uint64_t timeout_ns;
    int pids[SLEEP_MAX_PIDS];
    int npids;
} sleep_opts;

__attribute__((format(printf, 2, 3)))
static int sleep_usage(const sleep_opts *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vram %s: ", o->wake ? "wake" : "sleep");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nUsage: %s\nTry 'vram %s --help'.\n",
            o->wake ? "vram wake [--device DEV] PID... | --group NAME" : "vram sleep [--timeout DURATION] PID... | --group NAME",
            o->wake ? "wake" : "sleep");
    return 2;
}

/* 0, 2 (said), or -1 for --help. */
static int sleep_parse(int argc, char **argv, sleep_opts *o) {
    int missing = 0;
    const char *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return -1;
        if ((v = cli_option_value(argc, argv, &i, "--group", &missing)) || missing) {
            if (!v) return sleep_usage(o, "--group needs a NAME");
            if (!vram__ledger_valid_group(v)) return sleep_usage(o, "--group: bad NAME '%s' (1 to 31 of A-Z a-z 0-9 . _ -)", v);
            o->group = v;
            continue;
        }
        if (!o->wake && ((v = cli_option_value(argc, argv, &i, "--timeout", &missing)) || missing)) {
            if (!v) return sleep_usage(o, "--timeout needs a DURATION (e.g. 30s)");
            if (vram__parse_duration(v, &o->timeout_ns) != 0 || o->timeout_ns > 3600000000000ull)
                return sleep_usage(o, "--timeout: bad DURATION '%s' (a number and ms, s, m or h: 30s; at most 1h)", v);
            continue;
        }
        if (o->wake && ((v = cli_option_value(argc, argv, &i, "--device", &missing)) || missing)) {
            if (!v || !*v) return sleep_usage(o, "--device needs a card (an index as vram ls shows it, or a UUID)");
            o->device = v;
            continue;
        }
        if (a[0] == '-') return sleep_usage(o, "unknown option '%s'", a);
        char *end = NULL;
        errno = 0;
        long pid = strtol(a, &end, 10);
        if (end == a || *end || errno || pid <= 0 || pid > INT_MAX) return sleep_usage(o, "'%s' is not a PID", a);
        if (o->npids == SLEEP_MAX_PIDS) return sleep_usage(o, "more than %d PIDs", SLEEP_MAX_PIDS);
        o->pids[o->npids++] = (int)pid;
    }
    if (o->group && o->npids) return sleep_usage(o, "give PIDs or --group NAME, not both");
    if (!o->group && !o->npids) return sleep_usage(o, "missing PID (or --group NAME)");
    return 0;
}

static int int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The running processes of group NAME in the ledger (each once, in pid order): for a sleep those with a
 * ledger slot awake, for a wake those with a ledger slot asleep (or being slept or woken). 0, or 1 (said). */
static int sleep_group_pids(ledger *l, sleep_opts *o) {
    vram__ledger_lock(l);
    (void)vram__ledger_reclaim_locked(l);
    int members = 0;
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        const ledger_slot *s = &l->slots[i];
        if (s->state != LEDGER_SLOT_LIVE || strncmp(s->group, o->group, sizeof s->group) != 0) continue;
        members++;
        uint32_t st = __atomic_load_n(&s->sleep, __ATOMIC_ACQUIRE);
        if (o->wake ? st == LEDGER_AWAKE : st == LEDGER_ASLEEP) continue;
        int seen = 0;
        for (int k = 0; k < o->npids && !seen; k++) seen = o->pids[k] == s->pid;
        if (!seen && o->npids < SLEEP_MAX_PIDS) o->pids[o->npids++] = s->pid;
    }
    vram__ledger_unlock(l);
    if (!members) {
        fprintf(stderr, "vram %s: group %s has no running process in the ledger %s\n", o->wake ? "wake" : "sleep",
                o->group, l->path);
        return 1;
    }
    qsort(o->pids, (size_t)o->npids, sizeof o->pids[0], int_cmp);
    if (!o->npids) printf("group %s: every process is %s already\n", o->group, o->wake ? "awake" : "asleep");
    return 0;
}

/* Sleeps or wakes each of o's processes (onto card `to`, when given), a line each; 0, 1 (one failed) or 3
 * (one was refused for want of room, none failed otherwise). */
static int sleep_each(const sleep_driver *d, ledger *lp, const sleep_opts *o, const char *to) {
    int rc = 0;
    for (int i = 0; i < o->npids; i++) {
        char msg[1024];
        uint64_t host = 0;
        int r = o->wake ? wake_process(d, lp, o->pids[i], to, msg, sizeof msg)
                        : sleep_process(d, lp, o->pids[i], (unsigned)(o->timeout_ns / 1000000u), 1, msg, sizeof msg,
                                        &host);
        if (r == SLEEP_DONE || r == SLEEP_ALREADY) {
            printf("%s\n", msg);
        } else {
            fprintf(stderr, "vram %s: %s\n", o->wake ? "wake" : "sleep", msg);
            if (r == SLEEP_REFUSED && rc == 0) rc = 3;
            else if (r != SLEEP_REFUSED) rc = 1;
        }
        fflush(stdout);
    }
    return rc;
}

int sleep_main(int argc, char **argv, int wake) {
    sleep_opts *o = calloc(1, sizeof *o);
    if (!o) {
        fputs("vram: out of memory\n", stderr);
        return 1;
    }
    o->wake = wake;
    o->timeout_ns = 10000000000ull;
    const char *name = wake ? "wake" : "sleep";
    int rc = sleep_parse(argc, argv, o);
    if (rc != 0) {
        free(o);
        return rc;
    }
    char err[PATH_MAX + 512];
    ledger l, *lp = &l;
    if (vram__ledger_open(&l, err, sizeof err) != 0) {
        if (o->group) {
            fprintf(stderr, "vram %s: --group needs the ledger, which is unavailable: %s\n", name, err);
            free(o);
            return 1;
        }
        fprintf(stderr, "vram %s: the ledger is unavailable (%s): vram top and the group budgets do not see what "
                "this %s does\n", name, err, name);
        lp = NULL;
    } else if (l.rebuilt[0]) {
        fprintf(stderr, "vram %s: the ledger %s\n", name, l.rebuilt);
    }
    if (o->group && (rc = sleep_group_pids(lp, o)) != 0) goto out;
    sleep_driver d;
    if (o->npids && sleep_driver_open(&d, 1, err, sizeof err) != 0) {
        fprintf(stderr, "vram %s: processes cannot be put to sleep or woken here: %s\n", name, err);
        rc = 1;
        goto out;
    }
    char to[LEDGER_UUID_LEN];
    if (o->npids && o->device && sleep_card_uuid(&d, o->device, to, sizeof to, err, sizeof err) != 0) {
        fprintf(stderr, "vram wake: %s\n", err);
        sleep_driver_close(&d);
        rc = 2;
        goto out;
    }
    if (o->npids) {
        rc = sleep_each(&d, lp, o, o->device ? to : NULL);
        sleep_driver_close(&d);
    }
out:
    if (lp) vram__ledger_close(lp);
    free(o);
    return rc;
}
