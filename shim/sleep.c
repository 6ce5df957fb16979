/*
 * sleep.c: sleeping and waking a CUDA process through the driver's checkpoint API, with its ledger
 * slots kept in step (sleep.h says what, and the rules). Compiled into `vram` (tools/sleepwake.c, the
 * idle watcher) and the Slurm plugin (its watcher), beside ledger.c, which it calls; nothing here
 * calls back. Invariants and locks: sleep.h's (the sleep fields of slots change only under the
 * ledger lock; the driver's calls are made without it, after a mark that keeps the budget right).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "sleep.h"

#include <dlfcn.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

/* ---- the driver ---------------------------------------------------------------------------------- */

void sleep_error_text(const sleep_driver *d, CUresult r, char *buf, size_t len) {
    cuda_abi_error_text(r, d ? d->error_name : NULL, d ? d->error_string : NULL, buf, len);
}

void sleep_driver_close(sleep_driver *d) {
    if (d->lib) dlclose(d->lib);
    memset(d, 0, sizeof *d);
}

int sleep_driver_open(sleep_driver *d, int init, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    /* RTLD_NODELETE: the driver keeps threads that must outlive a dlclose */
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!d->lib) {
        const char *e = dlerror();
        snprintf(err, errlen, "there is no CUDA driver here (libcuda.so.1: %s)", e ? e : "not found");
        return -1;
    }
#define SLEEP_SYM(field, name) d->field = (__typeof__(d->field))dlsym(d->lib, name)
    SLEEP_SYM(init, "cuInit");
    SLEEP_SYM(driver_version, "cuDriverGetVersion");
    SLEEP_SYM(error_name, "cuGetErrorName");
    SLEEP_SYM(error_string, "cuGetErrorString");
    SLEEP_SYM(device_count, "cuDeviceGetCount");
    SLEEP_SYM(device_get, "cuDeviceGet");
    SLEEP_SYM(device_uuid, "cuDeviceGetUuid_v2");
    if (!d->device_uuid) SLEEP_SYM(device_uuid, "cuDeviceGetUuid");
    SLEEP_SYM(get_state, "cuCheckpointProcessGetState");
    SLEEP_SYM(lock, "cuCheckpointProcessLock");
    SLEEP_SYM(checkpoint, "cuCheckpointProcessCheckpoint");
    SLEEP_SYM(restore, "cuCheckpointProcessRestore");
    SLEEP_SYM(unlock, "cuCheckpointProcessUnlock");
#undef SLEEP_SYM
    if (d->driver_version && d->driver_version(&d->version) != CUDA_SUCCESS) d->version = 0;
    const char *missing = !d->get_state ? "cuCheckpointProcessGetState" : !d->lock ? "cuCheckpointProcessLock"
                        : !d->checkpoint ? "cuCheckpointProcessCheckpoint" : !d->restore ? "cuCheckpointProcessRestore"
                        : !d->unlock ? "cuCheckpointProcessUnlock" : !d->init ? "cuInit" : NULL;
    if (missing) {
        char ver[32] = "of unknown version";
        if (d->version) snprintf(ver, sizeof ver, "CUDA %d.%d", d->version / 1000, (d->version % 1000) / 10);
        snprintf(err, errlen, "the CUDA driver here (libcuda.so.1, %s) has no process checkpoint API (%s and the "
                 "rest of it come with the drivers of CUDA 12.8 and later)", ver, missing);
        sleep_driver_close(d);
        return -1;
    }
    if (init) {
        CUresult r = d->init(0);
        if (r != CUDA_SUCCESS) {
            char e[160];
            sleep_error_text(d, r, e, sizeof e);
            snprintf(err, errlen, "the CUDA driver did not start (cuInit: %s)", e);
            sleep_driver_close(d);
            return -1;
        }
    }
    return 0;
}

/* ---- processes ----------------------------------------------------------------------------------- */

void sleep_command(int pid, char *out, size_t len) {
    char path[64], buf[LEDGER_NAME_LEN] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    if (n && buf[n - 1] == '\n') buf[n - 1] = '\0';
    vram__ledger_copy_name(out, len, buf[0] ? buf : "?", sizeof buf);
}

/* 0 when this process may act on pid (its owner, or root); -1 with msg (gone: SLEEP_GONE in *rc). */
static int sleep_may(int pid, const char *verb, char *msg, size_t len, int *rc) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", pid);
    if (pid <= 0 || stat(path, &st) != 0) {
        snprintf(msg, len, "PID %d: no such process", pid);
        *rc = SLEEP_GONE;
        return -1;
    }
    if (geteuid() != 0 && st.st_uid != geteuid()) {
        struct passwd pw, *found = NULL;
        char buf[1024], who[64];
        if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found) snprintf(who, sizeof who, "%s", pw.pw_name);
        else snprintf(who, sizeof who, "uid %u", (unsigned)st.st_uid);
        snprintf(msg, len, "PID %d belongs to %s, not to you: only its owner or root may %s", pid, who, verb);
        *rc = SLEEP_FAILED;
        return -1;
    }
    return 0;
}

static uint64_t sleep_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the ledger ----------------------------------------------------------------------------------- */

#define SLEEP_MAX_SLOTS 64   /* a process's slots: one per device it uses */

typedef struct sleep_slots {
    ledger_slot *s[SLEEP_MAX_SLOTS];
    int n;
} sleep_slots;

/* Locks the ledger (following the file now at its path) and finds pid's live slots (start time: the
 * running process's). 0 with the lock held, or -1 (no ledger, or it cannot be followed: unlocked). */
static int sleep_ledger_lock(ledger *l, int pid, sleep_slots *out) {
    out->n = 0;
    if (!l) return -1;
    char err[256];
    vram__ledger_lock(l);
    if (vram__ledger_follow_locked(l, 0, err, sizeof err) < 0) {
        vram__ledger_unlock(l);
        return -1;
    }
    uint64_t start = 0;
    if (vram__ledger_start_time(pid, &start) != 0) return 0;   /* gone: no slot of it counts */
    for (uint32_t i = 0; i < LEDGER_SLOTS && out->n < SLEEP_MAX_SLOTS; i++) {
        ledger_slot *s = &l->slots[i];
        if (s->state == LEDGER_SLOT_LIVE && s->pid == pid && s->start_time == start) out->s[out->n++] = s;
    }
    return 0;
}

/* This process as the ledger names a sleeper. */
static int sleep_self(uint64_t *start) {
    *start = 0;
    vram__ledger_start_time((int)getpid(), start);
    return (int)getpid();
}

/* Sets every slot's sleep field (and the sleeper, this process). */
static void sleep_mark(sleep_slots *ss, uint32_t state) {
    uint64_t start = 0;
    int self = sleep_self(&start);
    for (int i = 0; i < ss->n; i++) {
        ledger_slot *s = ss->s[i];
        s->sleeper_pid = self;
        s->sleeper_start = start;
        uint32_t was = s->sleep;
        if (state == LEDGER_ASLEEP && was != LEDGER_ASLEEP && was != LEDGER_WAKING) {   /* (a wake undone keeps them) */
            s->host_bytes = __atomic_load_n(&s->in_use, __ATOMIC_RELAXED);
            s->slept_ns = sleep_now_ns();
        } else if (state == LEDGER_AWAKE) {
            s->host_bytes = 0;
            s->slept_ns = 0;
        }
        __atomic_store_n(&s->sleep, state, __ATOMIC_RELEASE);
    }
}

/* Re-finds pid's slots under a fresh lock and marks them; nothing when there is no ledger. */
static void sleep_mark_again(ledger *l, int pid, uint32_t state) {
    sleep_slots ss;
    if (sleep_ledger_lock(l, pid, &ss) != 0) return;
    sleep_mark(&ss, state);
    vram__ledger_unlock(l);
}

/* " on GPU-a, GPU-b" and the sum of the slots' bytes (in use, or in host memory when asleep). */
static uint64_t sleep_cards(const sleep_slots *ss, int host, char *cards, size_t len) {
    uint64_t sum = 0;
    size_t used = 0;
    cards[0] = '\0';
    for (int i = 0; i < ss->n; i++) {
        const ledger_slot *s = ss->s[i];
        uint64_t b = host ? s->host_bytes : __atomic_load_n(&s->in_use, __ATOMIC_RELAXED);
        sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
        char uuid[LEDGER_UUID_LEN];
        vram__ledger_copy_name(uuid, sizeof uuid, s->uuid, sizeof s->uuid);
        int n = snprintf(cards + used, len - used, "%s%s", i ? ", " : "", uuid);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
    return sum;
}

/* pid's command name into cmd and the driver's state of it into *st; -1 with msg when the driver does
 * not know it as a CUDA process. */
static int sleep_state(const sleep_driver *d, int pid, char *cmd, size_t cmdlen, CUprocessState *st, char *msg,
                       size_t len) {
    sleep_command(pid, cmd, cmdlen);
    CUresult r = d->get_state(pid, st);
    if (r == CUDA_SUCCESS) return 0;
    char e[200];
    sleep_error_text(d, r, e, sizeof e);
    snprintf(msg, len, "PID %d (%s): the driver does not know it as a CUDA process (cuCheckpointProcessGetState: %s)",
             pid, cmd, e);
    return -1;
}

/* ---- sleep ----------------------------------------------------------------------------------------- */

/* Locks pid's CUDA calls (waiting up to lock_ms) and checkpoints it; unlocked again when the checkpoint
 * fails. 0, or -1 with the reason in msg ("stays awake: ..."). */
static int sleep_checkpoint(const sleep_driver *d, int pid, const char *cmd, unsigned lock_ms, char *msg, size_t len) {
    CUcheckpointLockArgs la;
    memset(&la, 0, sizeof la);
    la.timeoutMs = lock_ms;
    CUresult r = d->lock(pid, &la);
    const char *step = "cuCheckpointProcessLock";
    int locking = 1;
    if (r == CUDA_SUCCESS) {
        CUcheckpointCheckpointArgs ca;
        memset(&ca, 0, sizeof ca);
        r = d->checkpoint(pid, &ca);
        step = "cuCheckpointProcessCheckpoint";
        locking = 0;
        if (r != CUDA_SUCCESS) {
            CUcheckpointUnlockArgs ua;
            memset(&ua, 0, sizeof ua);
            d->unlock(pid, &ua);   /* it goes on running */
        }
    }
    if (r == CUDA_SUCCESS) return 0;
    char e[200];
    sleep_error_text(d, r, e, sizeof e);
    if (r == CUDA_ERROR_NOT_READY && locking)
        snprintf(msg, len, "PID %d (%s) stays awake: its CUDA calls did not stop within %u ms (%s: %s)", pid, cmd,
                 lock_ms, step, e);
    else
        snprintf(msg, len, "PID %d (%s) stays awake: the driver refused (%s: %s)", pid, cmd, step, e);
    return -1;
}

int sleep_process(const sleep_driver *d, ledger *l, int pid, unsigned lock_ms, int claim, char *msg, size_t len,
                  uint64_t *host) {
    int rc = SLEEP_FAILED;
    char cmd[LEDGER_NAME_LEN], cards[512];
    *host = 0;
    if (sleep_may(pid, "put it to sleep", msg, len, &rc) != 0) return rc;
    CUprocessState st = CU_PROCESS_STATE_RUNNING;
    if (sleep_state(d, pid, cmd, sizeof cmd, &st, msg, len) != 0) return SLEEP_FAILED;
    if (st == CU_PROCESS_STATE_CHECKPOINTED) {
        if (claim) sleep_mark_again(l, pid, LEDGER_ASLEEP);   /* now this one's (and a dead sleeper's mark settled) */
        snprintf(msg, len, "PID %d (%s) is asleep already", pid, cmd);
        return SLEEP_ALREADY;
    }
    if (st != CU_PROCESS_STATE_RUNNING) {
        snprintf(msg, len, "PID %d (%s) is %s by another checkpoint (cuda-checkpoint, or a vram sleep or wake "
                 "under way): try again", pid, cmd, st == CU_PROCESS_STATE_LOCKED ? "locked" : "in a failed state");
        return SLEEP_FAILED;
    }
    sleep_slots ss;
    int ledgered = sleep_ledger_lock(l, pid, &ss) == 0;
    if (ledgered) {
        sleep_mark(&ss, LEDGER_SLEEPING);   /* still on its cards: counted */
        vram__ledger_unlock(l);
    }
    if (sleep_checkpoint(d, pid, cmd, lock_ms, msg, len) != 0) {
        if (ledgered) sleep_mark_again(l, pid, LEDGER_AWAKE);
        return SLEEP_FAILED;
    }
    int locked = sleep_ledger_lock(l, pid, &ss) == 0;
    if (!locked || ss.n == 0) {
        if (locked) vram__ledger_unlock(l);
        snprintf(msg, len, "PID %d (%s) is asleep (not under vram run: vram top does not list it, and no group "
                 "counts it)", pid, cmd);
        return SLEEP_DONE;
    }
    sleep_mark(&ss, LEDGER_ASLEEP);
    *host = sleep_cards(&ss, 1, cards, sizeof cards);
    vram__ledger_unlock(l);
    char b[32];
    vram__format_bytes(b, sizeof b, (size_t)*host);
    snprintf(msg, len, "PID %d (%s) is asleep: its %s of device memory on %s moved to host memory", pid, cmd, b, cards);
    return SLEEP_DONE;
}

/* ---- wake ------------------------------------------------------------------------------------------ */

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into u; 0, or -1. */
static int sleep_parse_uuid(const char *s, CUuuid *u) {
    if (strncmp(s, "GPU-", 4) != 0) return -1;
    s += 4;
    for (int i = 0; i < 16; i++) {
        if (*s == '-') s++;
        unsigned v = 0;
        if (sscanf(s, "%2x", &v) != 1 || !s[0] || !s[1]) return -1;
        u->bytes[i] = (char)v;
        s += 2;
    }
    return *s == '\0' ? 0 : -1;
}

static void sleep_format_uuid(const CUuuid *u, char *out, size_t len) {
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int sleep_card_uuid(const sleep_driver *d, const char *dev, char *uuid, size_t len, char *err, size_t errlen) {
    int n = 0;
    if (!d->device_count || !d->device_get || !d->device_uuid || d->device_count(&n) != CUDA_SUCCESS) {
        snprintf(err, errlen, "--device: the driver does not list its cards");
        return -1;
    }
    char *end = NULL;
    long index = strtol(dev, &end, 10);
    int by_index = end != dev && *end == '\0';
    for (int i = 0; i < n; i++) {
        CUdevice cd = 0;
        CUuuid u;
        char s[LEDGER_UUID_LEN];
        if (d->device_get(&cd, i) != CUDA_SUCCESS || d->device_uuid(&u, cd) != CUDA_SUCCESS) continue;
        sleep_format_uuid(&u, s, sizeof s);
        if (by_index ? index == i : strcasecmp(s, dev) == 0) {
            snprintf(uuid, len, "%s", s);
            return 0;
        }
    }
    if (by_index) snprintf(err, errlen, "--device %s: no such card (the driver sees %d: indices 0 to %d, or their UUIDs)",
                           dev, n, n - 1);
    else snprintf(err, errlen, "--device %s: no card of that UUID here (vram ls lists them)", dev);
    return -1;
}

/* Under the ledger lock: whether each of the process's groups has room on the card it wakes on for
 * what it holds asleep; -1 with the reason in msg when one has not. */
static int sleep_budget_locked(ledger *l, const sleep_slots *ss, const char *to, int pid, const char *cmd, char *msg,
                               size_t len) {
    for (int i = 0; i < ss->n; i++) {
        const ledger_slot *s = ss->s[i];
        if (!s->group[0] || !s->group_limit || s->sleep != LEDGER_ASLEEP) continue;
        char group[LEDGER_NAME_LEN], uuid[LEDGER_UUID_LEN];
        vram__ledger_copy_name(group, sizeof group, s->group, sizeof s->group);
        vram__ledger_copy_name(uuid, sizeof uuid, to ? to : s->uuid, to ? LEDGER_UUID_LEN : sizeof s->uuid);
        uint64_t total = vram__ledger_group_total_locked(l, group, uuid);   /* without it: it is asleep */
        if (total <= s->group_limit && s->host_bytes <= s->group_limit - total) continue;
        char t[32], h[32], lim[32];
        vram__format_bytes(t, sizeof t, (size_t)total);
        vram__format_bytes(h, sizeof h, (size_t)s->host_bytes);
        vram__format_bytes(lim, sizeof lim, (size_t)s->group_limit);
        snprintf(msg, len, "PID %d (%s) stays asleep: its group %s uses %s of its %s limit on %s, and the %s it holds "
                 "would pass it", pid, cmd, group, t, lim, uuid, h);
        return -1;
    }
    return 0;
}

/* A process the driver reports locked: restored by a waker that died before it unlocked (0: unlock it),
 * or being put to sleep by a live sleeper (-1 with msg). Takes the ledger lock that sleep_ledger_lock
 * left held (ledgered) and lets it go. */
static int wake_locked_check(ledger *l, int ledgered, const sleep_slots *ss, int pid, const char *cmd, char *msg,
                             size_t len) {
    for (int i = 0; ledgered && i < ss->n; i++) {
        uint64_t start = 0;
        const ledger_slot *s = ss->s[i];
        uint64_t self_start;
        if (s->sleep == LEDGER_SLEEPING && s->sleeper_pid && s->sleeper_pid != sleep_self(&self_start) &&
            vram__ledger_start_time(s->sleeper_pid, &start) == 0 && start == s->sleeper_start) {
            vram__ledger_unlock(l);
            snprintf(msg, len, "PID %d (%s) is being put to sleep by PID %d: try again", pid, cmd, s->sleeper_pid);
            return -1;
        }
    }
    if (ledgered) vram__ledger_unlock(l);
    return 0;
}

/* Under the ledger lock (ledgered), which it lets go: whether the process may wake (on card `to`, when
 * given) and, when it may, its slots marked waking, so that no one else takes its room. SLEEP_DONE, or
 * SLEEP_FAILED / SLEEP_REFUSED with msg. */
static int wake_claim(ledger *l, int ledgered, sleep_slots *ss, int pid, const char *to, const char *cmd, char *msg,
                      size_t len) {
    int rc = SLEEP_DONE;
    if (to && ss->n > 1) {
        snprintf(msg, len, "PID %d (%s) uses %d cards: --device moves a process of one card", pid, cmd, ss->n);
        rc = SLEEP_FAILED;
    } else if (to && ss->n == 0) {
        snprintf(msg, len, "PID %d (%s) is not under vram run: which card it used is not known, so --device cannot "
                 "move it (wake it without --device)", pid, cmd);
        rc = SLEEP_FAILED;
    } else if (ledgered && sleep_budget_locked(l, ss, to, pid, cmd, msg, len) != 0) {
        rc = SLEEP_REFUSED;
    } else if (ledgered) {
        sleep_mark(ss, LEDGER_WAKING);   /* counted from now on: no one else takes its room */
    }
    if (ledgered) vram__ledger_unlock(l);
    return rc;
}

/* Restores a process asleep (onto card `to`, when given and not its own), its slots claimed by wake_claim;
 * on a failure they are marked asleep again. SLEEP_DONE, or SLEEP_FAILED / SLEEP_REFUSED with msg. */
static int wake_restore(const sleep_driver *d, ledger *l, int ledgered, const sleep_slots *ss, int pid, const char *to,
                        const char *cmd, char *msg, size_t len) {
    CUcheckpointRestoreArgs ra;
    CUcheckpointGpuPair pair;
    memset(&ra, 0, sizeof ra);
    if (to) {
        char from[LEDGER_UUID_LEN];
        vram__ledger_copy_name(from, sizeof from, ss->s[0]->uuid, sizeof ss->s[0]->uuid);
        if (sleep_parse_uuid(from, &pair.oldUuid) != 0 || sleep_parse_uuid(to, &pair.newUuid) != 0) {
            if (ledgered) sleep_mark_again(l, pid, LEDGER_ASLEEP);
            snprintf(msg, len, "PID %d (%s): its card '%s' or '%s' is not a UUID the driver knows", pid, cmd, from, to);
            return SLEEP_FAILED;
        }
        if (strcasecmp(from, to) != 0) {
            ra.gpuPairs = &pair;
            ra.gpuPairsCount = 1;
        }
    }
    CUresult r = d->restore(pid, &ra);
    if (r == CUDA_SUCCESS) return SLEEP_DONE;
    if (ledgered) sleep_mark_again(l, pid, LEDGER_ASLEEP);
    char e[200];
    sleep_error_text(d, r, e, sizeof e);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        snprintf(msg, len, "PID %d (%s) stays asleep: %s has no room for its memory (cuCheckpointProcessRestore: "
                 "%s)", pid, cmd, to ? to : "its card", e);
        return SLEEP_REFUSED;
    }
    snprintf(msg, len, "PID %d (%s) stays asleep: the driver refused (cuCheckpointProcessRestore: %s)", pid, cmd, e);
    return SLEEP_FAILED;
}

/* After the restore: pid's slots name card `to` (a --device move). */
static void wake_moved(ledger *l, int pid, const char *to) {
    sleep_slots ss;
    if (sleep_ledger_lock(l, pid, &ss) != 0) return;
    for (int i = 0; i < ss.n; i++) {
        memset(ss.s[i]->uuid, 0, sizeof ss.s[i]->uuid);
        snprintf(ss.s[i]->uuid, sizeof ss.s[i]->uuid, "%s", to);
    }
    vram__ledger_unlock(l);
}

int wake_process(const sleep_driver *d, ledger *l, int pid, const char *to, char *msg, size_t len) {
    int rc = SLEEP_FAILED;
    char cmd[LEDGER_NAME_LEN], e[200], cards[512];
    if (sleep_may(pid, "wake it", msg, len, &rc) != 0) {
        if (rc == SLEEP_GONE && l) {   /* died asleep: its memory went with it; its slots are freed */
            vram__ledger_lock(l);
            vram__ledger_reclaim_locked(l);
            vram__ledger_unlock(l);
        }
        return rc;
    }
    CUprocessState st = CU_PROCESS_STATE_RUNNING;
    if (sleep_state(d, pid, cmd, sizeof cmd, &st, msg, len) != 0) return SLEEP_FAILED;
    if (st == CU_PROCESS_STATE_RUNNING) {
        sleep_mark_again(l, pid, LEDGER_AWAKE);
        snprintf(msg, len, "PID %d (%s) is awake already", pid, cmd);
        return SLEEP_ALREADY;
    }
    if (st == CU_PROCESS_STATE_FAILED) {
        snprintf(msg, len, "PID %d (%s): the driver reports a failed checkpoint or restore (CU_PROCESS_STATE_FAILED): "
                 "it cannot be woken", pid, cmd);
        return SLEEP_FAILED;
    }
    sleep_slots ss;
    int ledgered = sleep_ledger_lock(l, pid, &ss) == 0;
    if (st == CU_PROCESS_STATE_LOCKED) {
        if (wake_locked_check(l, ledgered, &ss, pid, cmd, msg, len) != 0) return SLEEP_FAILED;
    } else {
        if ((rc = wake_claim(l, ledgered, &ss, pid, to, cmd, msg, len)) != SLEEP_DONE) return rc;
        if ((rc = wake_restore(d, l, ledgered, &ss, pid, to, cmd, msg, len)) != SLEEP_DONE) return rc;
        if (to && ledgered) wake_moved(l, pid, to);   /* its card is the new one */
    }
    CUcheckpointUnlockArgs ua;
    memset(&ua, 0, sizeof ua);
    CUresult r = d->unlock(pid, &ua);
    if (r != CUDA_SUCCESS) {
        sleep_error_text(d, r, e, sizeof e);
        snprintf(msg, len, "PID %d (%s) is back on its card but still locked: the driver refused to unlock it "
                 "(cuCheckpointProcessUnlock: %s); run vram wake %d again", pid, cmd, e, pid);
        return SLEEP_FAILED;
    }
    if (sleep_ledger_lock(l, pid, &ss) != 0) {
        snprintf(msg, len, "PID %d (%s) is awake", pid, cmd);
        return SLEEP_DONE;
    }
    uint64_t back = 0;
    for (int i = 0; i < ss.n; i++) back += ss.s[i]->host_bytes;
    sleep_cards(&ss, 0, cards, sizeof cards);
    sleep_mark(&ss, LEDGER_AWAKE);
    vram__ledger_unlock(l);
    char b[32];
    vram__format_bytes(b, sizeof b, (size_t)back);
    if (ss.n) snprintf(msg, len, "PID %d (%s) is awake: its %s of device memory are back on %s", pid, cmd, b, cards);
    else snprintf(msg, len, "PID %d (%s) is awake", pid, cmd);
    return SLEEP_DONE;
}
