/*
 * limit.c: `vram limit PID [SIZE|none] [--device N]` and `vram limit --group NAME [SIZE|none]`: the
 * limit of a running process under `vram run` (or the Slurm plugin), or its group's budget, changed
 * from outside, through the ledger (src/common/ledger.h, "Limits that move").
 *
 * PID: the process's ledger is the one it has open (its ledger.lock among /proc/PID/fd, whatever
 * environment this command runs in); its slots (one per device it used, or the one of --device N)
 * get limit_set = SIZE (none: 0, back to the limit it started with) and their limits_gen bumped,
 * under the ledger's lock. The process applies it at its next accounted call (an allocation, a free,
 * cuMemGetInfo): a lowered limit kills nothing (live memory stays; later allocations are refused, or
 * overflow to host memory, until frees bring it under; a preallocation gives the difference back to
 * the card at once). SIZE may raise the limit above the one the process started with (an operator's
 * choice), never above the card (its card_bytes) nor above the ceiling the Slurm plugin set
 * (VRAM_LIMIT_MAX, the slot's limit_max): refused, saying which. Only the process's owner can write
 * its ledger (0700 directory, 0600 file); root switches to the owner's uid and gid first (this
 * process does nothing else afterwards). Without SIZE it prints the process's limits.
 *
 * --group NAME: the caller's own ledger (vram__ledger_place: the group's members are processes of the
 * caller's; root changes a user's group with `sudo -u USER vram limit --group ...`); every live
 * member's slot gets group_limit_set (a member joining later takes it from them), never above a
 * member's group_limit_max (the Slurm plugin's budget).
 *
 * Exit status: 0 done (or printed), 1 an error (no such process, not yours, no slot, above the
 * ceiling, the ledger unavailable), 2 usage. No state, no locks of its own but the ledger's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common/common.h"
#include "common/ledger.h"
#include "limit.h"

__attribute__((format(printf, 1, 2)))
static int limit_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vram limit: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nUsage: vram limit PID [SIZE|none] [--device N]\n"
          "       vram limit --group NAME [SIZE|none]\n"
          "Try 'vram help limit'.\n", stderr);
    return 2;
}

__attribute__((format(printf, 1, 2)))
static int limit_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vram limit: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

static void limit_bytes(char *buf, size_t len, uint64_t b) {
    if (b == 0) snprintf(buf, len, "none");
    else vram__format_bytes(buf, len, (size_t)b);
}

/* The directory of the ledger process `pid` has open (its ledger.lock among /proc/PID/fd) into dir;
 * 0, or -1 when it has none open. */
static int limit_ledger_of(int pid, char *dir, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    struct dirent *e;
    int found = -1;
    while (found != 0 && (e = readdir(d)) != NULL) {
        char link[PATH_MAX + 32], target[PATH_MAX];
        if (e->d_name[0] == '.') continue;
        snprintf(link, sizeof link, "/proc/%d/fd/%s", pid, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        size_t tl = strlen(target), sl = strlen("/ledger.lock");
        if (tl > sl && strcmp(target + tl - sl, "/ledger.lock") == 0 && tl - sl < len) {
            memcpy(dir, target, tl - sl);
            dir[tl - sl] = '\0';
            found = 0;
        }
    }
    closedir(d);
    return found;
}

/* Prints one slot's limits. */
static void limit_print_slot(const ledger_slot *s) {
    uint64_t set = s->limit_set, cap = s->group_cap, use = __atomic_load_n(&s->in_use, __ATOMIC_RELAXED);
    uint64_t now = vram__ledger_slot_limit(s);
    char uuid[LEDGER_UUID_LEN], a[32], b[32], c[32], u[32];
    vram__ledger_copy_name(uuid, sizeof uuid, s->uuid, sizeof s->uuid);
    limit_bytes(a, sizeof a, now);
    limit_bytes(b, sizeof b, s->limit);
    limit_bytes(c, sizeof c, set);
    vram__format_bytes(u, sizeof u, (size_t)use);
    printf("pid %d device %d (%s): limit %s (started with %s, set from outside %s%s), in use %s%s\n", s->pid,
           s->device, uuid, a, b, c, cap ? ", lowered for its group's guaranteed members" : "", u,
           now && use > now ? ": over its limit" : "");
}

static int limit_pid(int pid, int has_size, uint64_t size, int device) {
    char proc[64];
    struct stat st;
    snprintf(proc, sizeof proc, "/proc/%d", pid);
    if (stat(proc, &st) != 0) return limit_error("no process %d", pid);
    if (geteuid() != 0 && st.st_uid != geteuid())
        return limit_error("process %d belongs to uid %lu, not to you (uid %lu): only its owner or root may change "
                           "its limit", pid, (unsigned long)st.st_uid, (unsigned long)geteuid());
    char dir[PATH_MAX];
    if (limit_ledger_of(pid, dir, sizeof dir) != 0)
        return limit_error("process %d has no ledger open: it does not run under vram run (or the Slurm plugin), or "
                           "has not used a GPU yet", pid);
    if (geteuid() == 0 && st.st_uid != 0) {
        /* the ledger is the owner's alone: act as the owner (nothing else is done afterwards) */
        if (setgroups(0, NULL) != 0 || setresgid(st.st_gid, st.st_gid, st.st_gid) != 0 ||
            setresuid(st.st_uid, st.st_uid, st.st_uid) != 0)
            return limit_error("cannot switch to uid %lu, the owner of process %d: %s", (unsigned long)st.st_uid, pid,
                               strerror(errno));
    }
    uint64_t start = 0;
    if (vram__ledger_start_time(pid, &start) != 0) return limit_error("no process %d", pid);
    ledger l;
    char err[1024];
    if (vram__ledger_open_in(&l, dir, err, sizeof err) != 0) return limit_error("the ledger of process %d is unavailable: %s", pid, err);
    vram__ledger_lock(&l);
    ledger_slot *slots[LEDGER_SLOTS];
    int n = 0, rc = 0;
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &l.slots[i];
        if (s->state == LEDGER_SLOT_LIVE && s->pid == pid && s->start_time == start && (device < 0 || s->device == device))
            slots[n++] = s;
    }
    if (n == 0) {
        rc = device < 0 ? limit_error("process %d has no slot in the ledger %s: it has not used a GPU yet", pid, l.path)
                        : limit_error("process %d has no slot for device %d in the ledger %s (it has not used that "
                                      "device)", pid, device, l.path);
    }
    for (int k = 0; rc == 0 && k < n && has_size && size; k++) {   /* every slot checked before any is changed */
        char want[32], max[32];
        limit_bytes(want, sizeof want, size);
        if (slots[k]->limit_max && size > slots[k]->limit_max) {
            limit_bytes(max, sizeof max, slots[k]->limit_max);
            rc = limit_error("%s is above the ceiling of process %d on device %d (%s = %llu bytes: VRAM_LIMIT_MAX, the "
                             "limit the Slurm job was given, or the limit a program that allocates through libvram "
                             "started with); refused", want, pid, slots[k]->device, max,
                             (unsigned long long)slots[k]->limit_max);
        } else if (slots[k]->card_bytes && size > slots[k]->card_bytes) {
            limit_bytes(max, sizeof max, slots[k]->card_bytes);
            rc = limit_error("%s is above the memory of the card of process %d's device %d (%s = %llu bytes); refused",
                             want, pid, slots[k]->device, max, (unsigned long long)slots[k]->card_bytes);
        }
    }
    for (int k = 0; rc == 0 && k < n; k++) {
        if (has_size) {
            __atomic_store_n(&slots[k]->limit_set, size, __ATOMIC_RELAXED);
            vram__ledger_gen_bump(slots[k]);
        }
        limit_print_slot(slots[k]);
    }
    vram__ledger_unlock(&l);
    vram__ledger_close(&l);
    if (rc == 0 && has_size) printf("applied at its next allocation, free or memory query\n");
    return rc;
}

static int limit_group(const char *group, int has_size, uint64_t size) {
    ledger l;
    char err[1024];
    if (vram__ledger_open(&l, err, sizeof err) != 0) return limit_error("the ledger is unavailable: %s", err);
    vram__ledger_lock(&l);
    vram__ledger_reclaim_locked(&l);
    int n = 0, rc = 0;
    char want[32], max[32];
    limit_bytes(want, sizeof want, size);
    for (uint32_t i = 0; i < LEDGER_SLOTS && rc == 0; i++) {
        ledger_slot *s = &l.slots[i];
        if (s->state != LEDGER_SLOT_LIVE || strncmp(s->group, group, sizeof s->group) != 0) continue;
        n++;
        if (has_size && size && s->group_limit_max && size > s->group_limit_max) {
            limit_bytes(max, sizeof max, s->group_limit_max);
            rc = limit_error("%s is above the ceiling of group %s's budget (%s = %llu bytes: VRAM_GROUP_LIMIT_MAX, the "
                             "Slurm job's); refused", want, group, max, (unsigned long long)s->group_limit_max);
        }
    }
    if (rc == 0 && n == 0) rc = limit_error("no running process of group %s in the ledger %s", group, l.path);
    for (uint32_t i = 0; i < LEDGER_SLOTS && rc == 0; i++) {
        ledger_slot *s = &l.slots[i];
        if (s->state != LEDGER_SLOT_LIVE || strncmp(s->group, group, sizeof s->group) != 0) continue;
        if (has_size) {
            __atomic_store_n(&s->group_limit_set, size, __ATOMIC_RELAXED);
            vram__ledger_gen_bump(s);
        }
        uint64_t budget = vram__ledger_slot_group_limit(s);
        char b[32], u[32], uuid[LEDGER_UUID_LEN];
        limit_bytes(b, sizeof b, budget);
        vram__format_bytes(u, sizeof u, (size_t)__atomic_load_n(&s->in_use, __ATOMIC_RELAXED));
        vram__ledger_copy_name(uuid, sizeof uuid, s->uuid, sizeof s->uuid);
        printf("group %s: pid %d device %d (%s): budget %s, in use %s\n", group, s->pid, s->device, uuid, b, u);
    }
    vram__ledger_unlock(&l);
    vram__ledger_close(&l);
    if (rc == 0 && has_size) printf("applied at each member's next allocation, free or memory query\n");
    return rc;
}

/* SIZE or "none" (0) into *out; 0, or 2 after saying why. */
static int limit_size_arg(const char *v, uint64_t *out) {
    if (strcmp(v, "none") == 0) {
        *out = 0;
        return 0;
    }
    size_t b = 0;
    if (cli_size(v, &b) != 0)
        return limit_usage("bad SIZE '%s' (" CLI_SIZE_HINT "; 'none' lifts a limit set from outside)", v);
    *out = b;
    return 0;
}

int limit_main(int argc, char **argv) {
    const char *group = NULL, *pos[2] = { NULL, NULL };
    int npos = 0, device = -1, missing = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return -1;
        if ((v = cli_option_value(argc, argv, &i, "--group", &missing)) || missing) {
            if (!v) return limit_usage("--group needs a NAME");
            if (!vram__ledger_valid_group(v)) return limit_usage("--group: bad NAME '%s' (1 to 31 of A-Z a-z 0-9 . _ -)", v);
            group = v;
            continue;
        }
        if ((v = cli_option_value(argc, argv, &i, "--device", &missing)) || missing) {
            char *end = NULL;
            long d = v ? strtol(v, &end, 10) : -1;
            if (!v || end == v || *end || d < 0 || d > 63) return limit_usage("--device needs N, a device ordinal 0-63");
            device = (int)d;
            continue;
        }
        if (a[0] == '-' && a[1]) return limit_usage("unknown option '%s'", a);
        if (npos == 2) return limit_usage("unexpected argument '%s'", a);
        pos[npos++] = a;
    }
    uint64_t size = 0;
    if (group) {
        if (device >= 0) return limit_usage("--device is for a PID, not a --group");
        if (npos > 1) return limit_usage("unexpected argument '%s'", pos[1]);
        if (npos == 1 && limit_size_arg(pos[0], &size) != 0) return 2;
        return limit_group(group, npos == 1, size);
    }
    if (npos == 0) return limit_usage("missing PID (or --group NAME)");
    char *end = NULL;
    errno = 0;
    long pid = strtol(pos[0], &end, 10);
    if (errno || end == pos[0] || *end || pid <= 0 || pid > INT_MAX) return limit_usage("bad PID '%s'", pos[0]);
    if (npos == 2 && limit_size_arg(pos[1], &size) != 0) return 2;
    return limit_pid((int)pid, npos == 2, size, device);
}
