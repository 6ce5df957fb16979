/*
 * top.c: `vram top [--json] [--once] [--prometheus]`.
 *
 * Opens the ledger (src/common/ledger.h, "Where": VRAM_LEDGER_DIR, else $XDG_RUNTIME_DIR/vram, else
 * /dev/shm/vram-<uid>, or a place of the user's own when that one is another user's, said once on
 * stderr; created when missing; a corrupted ledger or one of another version is moved aside and
 * rebuilt, said on stderr), takes its lock, frees the stale slots (process gone, or its pid reused), copies the
 * live ones and prints one line per (process, device): pid, command, device ordinal (as the program
 * numbers it) and UUID, limit, in use, peak, free under the limit (0 when in use exceeds it, "-"
 * without a limit), group, group limit, state (awake, sleeping, asleep, waking: shim/sleep.h; "over
 * limit" for one awake above its limit) and, for a process asleep, the bytes of its device memory in
 * host memory (its in use is then 0: nothing of it is on its card), and the host memory of its
 * overflow (vram run --overflow host). The limits are those in force (vram__ledger_slot_limit: vram limit,
 * a group's rebalance). --json prints one JSON object instead (state, host_bytes, the idle watcher's
 * DURATION in idle_sleep_seconds, null without one, over_limit, start_limit_bytes, priority and
 * overflow_bytes). Without --once the table is printed again every
 * second until interrupted.
 *
 * --prometheus prints the snapshot once in Prometheus' text exposition format (0.0.4), for
 * node_exporter's textfile collector: gauges only, no timestamps, every family's HELP and TYPE even
 * when it has no sample, every series with label user (the ledger's owner: ledgers are per user, so
 * that files written for several users merge without two alike series). Per (process, device):
 * vram_process_{limit,in_use,peak,host,overflow}_bytes, vram_process_asleep and vram_process_over_limit
 * (1/0) {pid, command, device, uuid,
 * group (when in one)}; in use 0 and host the bytes in host memory for a process asleep; no limit
 * series for a process without a limit (the ledger's 0: a series of 0 would read as a full card). Per (group,
 * UUID): vram_group_in_use_bytes (its live members summed, saturating as the preload library's check
 * does) and vram_group_limit_bytes (the smallest group limit of its members: the first to refuse;
 * none when no member has one). Per ledger: vram_ledger_info {path} 1, vram_ledger_live_slots and
 * vram_ledger_max_slots. Label values escaped as the format asks (\\, \", \n) and made valid UTF-8
 * (json_utf8_sequence; U+FFFD for each ill-formed subpart). A failed write exits 1, so that
 * `... > f.$$ && mv f.$$ f` never installs a partial file.
 *
 * Live mode (no --once, no --json, stdin and stdout terminals): the alternate screen, redrawn in
 * place every second: a line per device (processes, in use, peak, limits summed), then the process
 * table with a short history of each row's use (the last HISTORY_LEN samples as a bar of ASCII
 * levels, scaled to its limit, else its peak). Keys, read in raw mode between refreshes: m (in use),
 * k (peak), p (pid), d (device) sort; q, Esc or Ctrl-C quit, restoring the terminal. The history is
 * kept here by (pid, device), at most HISTORY_ROWS rows; one thread; signals only set a flag.
 *
 * A ledger file truncated by another process while top reads it would raise SIGBUS on the mapping:
 * a handler (top_sigbus) puts private zeroed memory over the mapping, the read finishes on that, and
 * the snapshot is thrown away and taken again from the file now at the path (three times at most).
 * State: top_map / top_map_size name the mapping being read (set around each snapshot, one thread).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

#include "common/ledger.h"
#include "json.h"
#include "top.h"

typedef struct top_row {
    int pid, device;
    uint32_t sleep;                      /* LEDGER_AWAKE ... */
    uint64_t in_use, peak, limit, group_limit;   /* limit, group_limit: in force (vram__ledger_slot_limit) */
    uint64_t start_limit, overflow;      /* the limit it started with; its overflow in host memory */
    uint32_t priority;
    uint64_t host, idle_ns;              /* asleep: bytes in host memory; its idle watcher's DURATION, 0 none */
    char uuid[LEDGER_UUID_LEN], group[LEDGER_NAME_LEN], command[LEDGER_NAME_LEN];
} top_row;

static const char *top_state(const top_row *t) {
    switch (t->sleep) {
    case LEDGER_AWAKE: return "awake";
    case LEDGER_SLEEPING: return "sleeping";
    case LEDGER_ASLEEP: return "asleep";
    case LEDGER_WAKING: return "waking";
    default: return "?";
    }
}

static int top_row_cmp(const void *a, const void *b) {
    const top_row *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

static void top_bytes(char *buf, size_t len, uint64_t b, int none_if_zero) {
    if (none_if_zero && b == 0) snprintf(buf, len, "-");
    else if (b >= (1ull << 30)) snprintf(buf, len, "%.2f GiB", (double)b / (double)(1ull << 30));
    else snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
}

static char *volatile top_map;
static volatile size_t top_map_size;
static volatile sig_atomic_t top_truncated;

/* SIGBUS in the mapping being read: private zeros in its place, noted; elsewhere, the default action. */
static void top_sigbus(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    char *map = top_map, *addr = si ? (char *)si->si_addr : NULL;
    if (map && addr >= map && addr < map + top_map_size &&
        mmap(map, top_map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
        top_truncated = 1;
        return;
    }
    signal(sig, SIG_DFL);   /* the access is made again on return: the default action then */
}

/* One snapshot: rows (malloc'd, *n of them), *reclaimed stale slots freed. 0, 1 on error, or 3 when
 * the file was truncated during the read (nothing returned). */
static int top_snapshot_once(top_row **rows, int *n, int *reclaimed, char *path, size_t pathlen) {
    ledger l;
    char err[512];
    if (vram__ledger_open(&l, err, sizeof err) != 0) {
        fprintf(stderr, "vram top: the ledger is unavailable: %s\n", err);
        return 1;
    }
    if (l.rebuilt[0]) fprintf(stderr, "vram top: the ledger %s\n", l.rebuilt);
    static int noted;   /* where the ledger moved (its default place taken by another user): said once */
    if (l.note[0] && !noted++) fprintf(stderr, "vram top: %s\n", l.note);
    snprintf(path, pathlen, "%s", l.path);
    top_row *r = calloc(LEDGER_SLOTS, sizeof *r);
    if (!r) {
        vram__ledger_close(&l);
        fputs("vram top: out of memory\n", stderr);
        return 1;
    }
    int k = 0;
    top_truncated = 0;
    top_map_size = l.size;
    top_map = l.map;
    vram__ledger_lock(&l);
    *reclaimed = vram__ledger_reclaim_locked(&l);
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        const ledger_slot *s = &l.slots[i];
        if (s->state != LEDGER_SLOT_LIVE) continue;
        top_row *t = &r[k++];
        t->pid = s->pid;
        t->device = s->device;
        t->sleep = __atomic_load_n(&s->sleep, __ATOMIC_ACQUIRE);
        t->in_use = __atomic_load_n(&s->in_use, __ATOMIC_RELAXED);
        t->peak = __atomic_load_n(&s->peak, __ATOMIC_RELAXED);
        if (t->sleep == LEDGER_ASLEEP) {   /* nothing on its card: its memory is in host memory */
            t->host = s->host_bytes;
            t->in_use = 0;
        }
        t->idle_ns = s->watcher_pid ? s->idle_ns : 0;
        t->limit = vram__ledger_slot_limit(s);
        t->start_limit = s->limit;
        t->group_limit = vram__ledger_slot_group_limit(s);
        t->priority = s->priority;
        t->overflow = __atomic_load_n(&s->overflow_bytes, __ATOMIC_RELAXED);
        vram__ledger_copy_name(t->uuid, sizeof t->uuid, s->uuid, sizeof s->uuid);
        vram__ledger_copy_name(t->group, sizeof t->group, s->group, sizeof s->group);
        vram__ledger_copy_name(t->command, sizeof t->command, s->command, sizeof s->command);
    }
    vram__ledger_unlock(&l);
    top_map = NULL;
    vram__ledger_close(&l);
    if (top_truncated) {
        free(r);
        return 3;
    }
    qsort(r, (size_t)k, sizeof *r, top_row_cmp);
    *rows = r;
    *n = k;
    return 0;
}

static int top_snapshot(top_row **rows, int *n, int *reclaimed, char *path, size_t pathlen) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = top_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old);
    int rc = 3;
    for (int attempt = 0; attempt < 3 && rc == 3; attempt++) {
        rc = top_snapshot_once(rows, n, reclaimed, path, pathlen);
        if (rc == 3) fputs("vram top: the ledger was truncated while it was read; reading it again\n", stderr);
    }
    sigaction(SIGBUS, &old, NULL);
    if (rc == 3) {
        fputs("vram top: the ledger keeps being truncated; giving up\n", stderr);
        return 1;
    }
    return rc;
}

static uint64_t top_free(const top_row *t) {
    return t->in_use >= t->limit ? 0 : t->limit - t->in_use;   /* never wraps */
}

/* Holds more than its limit (a limit lowered under it: vram limit, its group's guaranteed members). */
static int top_over(const top_row *t) { return t->limit && t->in_use > t->limit; }

/* The table's STATE: the sleep state, or "over limit" for a process awake above its limit. */
static const char *top_table_state(const top_row *t) {
    return t->sleep == LEDGER_AWAKE && top_over(t) ? "over limit" : top_state(t);
}

static void top_print_table(const top_row *r, int n, const char *path) {
    printf("vram top: %d process slot%s in %s\n", n, n == 1 ? "" : "s", path);
    printf("%-8s %-16s %-44s %11s %11s %11s %11s %-16s %11s %-10s %11s %11s\n", "PID", "COMMAND", "DEVICE", "LIMIT",
           "IN USE", "PEAK", "FREE", "GROUP", "GROUP LIMIT", "STATE", "HOST", "OVERFLOW");
    for (int i = 0; i < n; i++) {
        const top_row *t = &r[i];
        char dev[64], lim[32], use[32], peak[32], fr[32], glim[32], host[32], ovf[32];
        snprintf(dev, sizeof dev, "%d/%s", t->device, t->uuid);
        top_bytes(lim, sizeof lim, t->limit, 1);
        top_bytes(use, sizeof use, t->in_use, 0);
        top_bytes(peak, sizeof peak, t->peak, 0);
        if (t->limit) top_bytes(fr, sizeof fr, top_free(t), 0);
        else snprintf(fr, sizeof fr, "-");
        top_bytes(glim, sizeof glim, t->group_limit, 1);
        if (t->sleep == LEDGER_ASLEEP) top_bytes(host, sizeof host, t->host, 0);
        else snprintf(host, sizeof host, "-");
        if (t->overflow) top_bytes(ovf, sizeof ovf, t->overflow, 0);
        else snprintf(ovf, sizeof ovf, "-");
        printf("%-8d %-16s %-44s %11s %11s %11s %11s %-16s %11s %-10s %11s %11s\n", t->pid, t->command, dev, lim, use, peak,
               fr, t->group[0] ? t->group : "-", glim, top_table_state(t), host, ovf);
    }
}

static void top_print_json(const top_row *r, int n, const char *path, int reclaimed) {
    printf("{\"ledger\": ");
    json_string(stdout, path);
    printf(", \"reclaimed\": %d, \"processes\": [", reclaimed);
    for (int i = 0; i < n; i++) {
        const top_row *t = &r[i];
        printf("%s{\"pid\": %d, \"command\": ", i ? ", " : "", t->pid);
        json_string(stdout, t->command);
        printf(", \"device\": %d, \"uuid\": ", t->device);
        json_string(stdout, t->uuid);
        printf(", \"limit_bytes\": %llu, \"in_use_bytes\": %llu, \"peak_bytes\": %llu, \"free_bytes\": ",
               (unsigned long long)t->limit, (unsigned long long)t->in_use, (unsigned long long)t->peak);
        if (t->limit) printf("%llu", (unsigned long long)top_free(t));
        else printf("null");
        printf(", \"group\": ");
        if (t->group[0]) json_string(stdout, t->group);
        else printf("null");
        printf(", \"group_limit_bytes\": %llu, \"state\": \"%s\", \"host_bytes\": %llu, \"idle_sleep_seconds\": ",
               (unsigned long long)t->group_limit, top_state(t), (unsigned long long)t->host);
        if (t->idle_ns) printf("%.3f", (double)t->idle_ns / 1e9);
        else printf("null");
        printf(", \"over_limit\": %s, \"start_limit_bytes\": %llu, \"priority\": \"%s\", \"overflow_bytes\": %llu}",
               top_over(t) ? "true" : "false", (unsigned long long)t->start_limit,
               t->priority == LEDGER_PRIORITY_OPPORTUNISTIC ? "opportunistic" : "guaranteed",
               (unsigned long long)t->overflow);
    }
    printf("]}\n");
}

/* ---- Prometheus' text format ------------------------------------------------------------------- */

/* `,name="value"` (no comma when first), the value escaped as the text format asks: backslash, double
 * quote and line feed as \\, \" and \n; valid UTF-8 copied, each maximal ill-formed subpart as U+FFFD. */
static void prom_label(const char *name, const char *value, int first) {
    const unsigned char *s = (const unsigned char *)value;
    printf("%s%s=\"", first ? "" : ",", name);
    while (*s) {
        if (*s < 0x80) {
            if (*s == '\\' || *s == '"') putchar('\\'), putchar(*s);
            else if (*s == '\n') fputs("\\n", stdout);
            else putchar(*s);
            s++;
            continue;
        }
        size_t bad = 0, n = json_utf8_sequence(s, &bad);
        if (n) fwrite(s, 1, n, stdout), s += n;
        else fputs("\xef\xbf\xbd", stdout), s += bad;   /* U+FFFD */
    }
    putchar('"');
}

static void prom_family(const char *name, const char *help) {
    printf("# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* One process series: name{pid,command,device,uuid[,group],user} value. */
static void prom_process(const char *name, const top_row *t, const char *user, uint64_t value) {
    char num[16];
    snprintf(num, sizeof num, "%d", t->pid);
    printf("%s{", name);
    prom_label("pid", num, 1);
    prom_label("command", t->command, 0);
    snprintf(num, sizeof num, "%d", t->device);
    prom_label("device", num, 0);
    prom_label("uuid", t->uuid, 0);
    if (t->group[0]) prom_label("group", t->group, 0);
    prom_label("user", user, 0);
    printf("} %llu\n", (unsigned long long)value);
}

typedef struct prom_group {
    const char *group, *uuid;   /* into the rows */
    uint64_t in_use, limit;     /* limit: the smallest of the members', 0 none */
} prom_group;

static int prom_group_cmp(const void *a, const void *b) {
    const prom_group *x = a, *y = b;
    int c = strcmp(x->group, y->group);
    return c ? c : strcmp(x->uuid, y->uuid);
}

/* The ledger's owner (this process's effective user): its name, else its number. */
static void prom_user(char *out, size_t len) {
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_name[0])
        snprintf(out, len, "%s", found->pw_name);
    else
        snprintf(out, len, "%lu", (unsigned long)geteuid());
}

/* 0, or 1 when the output could not be written (said on stderr). */
static int top_print_prometheus(const top_row *r, int n, const char *path) {
    char user[256];
    prom_user(user, sizeof user);
    prom_group *g = calloc((size_t)n + 1, sizeof *g);
    if (!g) {
        fputs("vram top: out of memory\n", stderr);
        return 1;
    }
    int ng = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].group[0]) continue;
        int k = 0;
        while (k < ng && (strcmp(g[k].group, r[i].group) != 0 || strcmp(g[k].uuid, r[i].uuid) != 0)) k++;
        if (k == ng) g[ng++] = (prom_group){ .group = r[i].group, .uuid = r[i].uuid };
        g[k].in_use = r[i].in_use > UINT64_MAX - g[k].in_use ? UINT64_MAX : g[k].in_use + r[i].in_use;
        if (r[i].group_limit && (!g[k].limit || r[i].group_limit < g[k].limit)) g[k].limit = r[i].group_limit;
    }
    qsort(g, (size_t)ng, sizeof *g, prom_group_cmp);

    prom_family("vram_ledger_info", "The ledger of processes under vram run that vram top read (value 1).");
    printf("vram_ledger_info{");
    prom_label("path", path, 1);
    prom_label("user", user, 0);
    printf("} 1\n");
    prom_family("vram_ledger_live_slots", "Slots of running processes in the ledger, one per process and device.");
    printf("vram_ledger_live_slots{");
    prom_label("user", user, 1);
    printf("} %d\n", n);
    prom_family("vram_ledger_max_slots", "Slots in the ledger; a device of a process finding none free is not listed.");
    printf("vram_ledger_max_slots{");
    prom_label("user", user, 1);
    printf("} %u\n", LEDGER_SLOTS);

    prom_family("vram_process_limit_bytes", "The vram limit of a process under vram run on a device (no series: no limit).");
    for (int i = 0; i < n; i++)
        if (r[i].limit) prom_process("vram_process_limit_bytes", &r[i], user, r[i].limit);
    prom_family("vram_process_in_use_bytes", "Device memory a process under vram run holds on a device.");
    for (int i = 0; i < n; i++) prom_process("vram_process_in_use_bytes", &r[i], user, r[i].in_use);
    prom_family("vram_process_peak_bytes", "The most device memory a process under vram run has held on a device.");
    for (int i = 0; i < n; i++) prom_process("vram_process_peak_bytes", &r[i], user, r[i].peak);
    prom_family("vram_process_asleep", "1 when a process under vram run is asleep (vram sleep, idle sleep): its device memory in host memory.");
    for (int i = 0; i < n; i++) prom_process("vram_process_asleep", &r[i], user, r[i].sleep == LEDGER_ASLEEP);
    prom_family("vram_process_host_bytes", "The device memory of a process asleep that host memory holds (0 awake).");
    for (int i = 0; i < n; i++) prom_process("vram_process_host_bytes", &r[i], user, r[i].host);

    prom_family("vram_process_over_limit", "1 when a process under vram run holds more than its limit (a limit lowered under it).");
    for (int i = 0; i < n; i++) prom_process("vram_process_over_limit", &r[i], user, top_over(&r[i]));
    prom_family("vram_process_overflow_bytes", "Host memory serving a process's overflow (vram run --overflow host).");
    for (int i = 0; i < n; i++) prom_process("vram_process_overflow_bytes", &r[i], user, r[i].overflow);

    prom_family("vram_group_limit_bytes", "The group limit of a vram group on a device: its members' smallest.");
    for (int k = 0; k < ng; k++) {
        if (!g[k].limit) continue;
        printf("vram_group_limit_bytes{");
        prom_label("group", g[k].group, 1);
        prom_label("uuid", g[k].uuid, 0);
        prom_label("user", user, 0);
        printf("} %llu\n", (unsigned long long)g[k].limit);
    }
    prom_family("vram_group_in_use_bytes", "Device memory the running members of a vram group hold on a device together.");
    for (int k = 0; k < ng; k++) {
        printf("vram_group_in_use_bytes{");
        prom_label("group", g[k].group, 1);
        prom_label("uuid", g[k].uuid, 0);
        prom_label("user", user, 0);
        printf("} %llu\n", (unsigned long long)g[k].in_use);
    }
    free(g);
    int e = fflush(stdout) != 0 ? errno : 0;
    if (e || ferror(stdout)) {
        fprintf(stderr, "vram top: cannot write the metrics to the standard output: %s\n", strerror(e ? e : EIO));
        return 1;
    }
    return 0;
}

/* ---- live mode -------------------------------------------------------------------------------- */

#define HISTORY_LEN  24
#define HISTORY_ROWS 256

typedef struct history {
    int      pid, device, used;
    uint64_t samples[HISTORY_LEN];   /* oldest first */
    int      n;
} history;

typedef enum { SORT_PID, SORT_IN_USE, SORT_PEAK, SORT_DEVICE } sort_key;

static volatile sig_atomic_t top_stop;
static void top_on_signal(int sig) { (void)sig; top_stop = 1; }

static sort_key top_sort;

static int top_row_sorted(const void *a, const void *b) {
    const top_row *x = a, *y = b;
    switch (top_sort) {
    case SORT_IN_USE: if (x->in_use != y->in_use) return x->in_use > y->in_use ? -1 : 1; break;
    case SORT_PEAK:   if (x->peak != y->peak) return x->peak > y->peak ? -1 : 1; break;
    case SORT_DEVICE: {
        int c = strcmp(x->uuid, y->uuid);
        if (c) return c;
        break;
    }
    case SORT_PID: break;
    }
    return top_row_cmp(a, b);
}

/* Adds this refresh's samples; rows of processes no longer listed are forgotten. */
static void history_add(history *h, const top_row *r, int n) {
    for (int k = 0; k < HISTORY_ROWS; k++) h[k].used = 0;
    for (int i = 0; i < n; i++) {
        int at = -1, empty = -1;
        for (int k = 0; k < HISTORY_ROWS && at < 0; k++) {
            if (h[k].n && h[k].pid == r[i].pid && h[k].device == r[i].device) at = k;
            else if (!h[k].n && empty < 0) empty = k;
        }
        if (at < 0 && empty < 0) continue;                /* more rows than kept: no history */
        if (at < 0) { at = empty; h[at] = (history){ .pid = r[i].pid, .device = r[i].device }; }
        if (h[at].n == HISTORY_LEN) memmove(h[at].samples, h[at].samples + 1, (HISTORY_LEN - 1) * sizeof(uint64_t));
        else h[at].n++;
        h[at].samples[h[at].n - 1] = r[i].in_use;
        h[at].used = 1;
    }
    for (int k = 0; k < HISTORY_ROWS; k++)
        if (!h[k].used) h[k].n = 0;
}

/* The row's history as HISTORY_LEN characters of " .:-=+*#%@", scaled to `scale`. */
static void history_bar(const history *h, const top_row *t, char *out) {
    static const char levels[] = " .:-=+*#%@";
    memset(out, ' ', HISTORY_LEN);
    out[HISTORY_LEN] = '\0';
    for (int k = 0; k < HISTORY_ROWS; k++) {
        if (!h[k].n || h[k].pid != t->pid || h[k].device != t->device) continue;
        uint64_t scale = t->limit ? t->limit : t->peak;
        for (int i = 0; i < h[k].n; i++) {
            int lv = scale ? (int)((double)h[k].samples[i] / (double)scale * 9.0 + 0.5) : 0;
            if (lv > 9) lv = 9;
            if (h[k].samples[i] > 0 && lv == 0) lv = 1;
            out[HISTORY_LEN - h[k].n + i] = levels[lv];
        }
    }
}

static void top_print_devices(const top_row *r, int n) {
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(r[j].uuid, r[i].uuid) == 0;
        if (seen) continue;
        int procs = 0;
        uint64_t use = 0, peak = 0, lim = 0;
        for (int j = i; j < n; j++) {
            if (strcmp(r[j].uuid, r[i].uuid) != 0) continue;
            procs++;
            use += r[j].in_use;
            peak += r[j].peak;
            lim += r[j].limit;
        }
        char u[32], p[32], l[32];
        top_bytes(u, sizeof u, use, 0);
        top_bytes(p, sizeof p, peak, 0);
        top_bytes(l, sizeof l, lim, 1);
        printf("device %-44s %3d process%s  in use %11s  peaks %11s  limits %11s\033[K\n", r[i].uuid, procs,
               procs == 1 ? "  " : "es", u, p, l);
    }
}

static void top_print_live(top_row *r, int n, const char *path, const history *h) {
    static const char *const names[] = { "pid", "in use", "peak", "device" };
    qsort(r, (size_t)n, sizeof *r, top_row_sorted);
    printf("\033[H");
    printf("vram top: %d process slot%s in %s; every 1 s, sorted by %s\033[K\n", n, n == 1 ? "" : "s", path,
           names[top_sort]);
    printf("keys: m in use  k peak  p pid  d device  q quit\033[K\n\033[K\n");
    top_print_devices(r, n);
    printf("\033[K\n%-8s %-16s %-44s %11s %11s %11s %-16s %-8s %-*s\033[K\n", "PID", "COMMAND", "DEVICE", "LIMIT",
           "IN USE", "PEAK", "GROUP", "STATE", HISTORY_LEN, "HISTORY (of limit/peak)");
    for (int i = 0; i < n; i++) {
        const top_row *t = &r[i];
        char dev[64], lim[32], use[32], peak[32], bar[HISTORY_LEN + 1];
        snprintf(dev, sizeof dev, "%d/%s", t->device, t->uuid);
        top_bytes(lim, sizeof lim, t->limit, 1);
        top_bytes(use, sizeof use, t->in_use, 0);
        top_bytes(peak, sizeof peak, t->peak, 0);
        history_bar(h, t, bar);
        printf("%-8d %-16s %-44s %11s %11s %11s %-16s %-8s [%s]\033[K\n", t->pid, t->command, dev, lim, use, peak,
               t->group[0] ? t->group : "-", top_state(t), bar);
    }
    printf("\033[J");
    fflush(stdout);
}

/* Waits up to 1 s for keys; returns 1 to quit. */
static int top_keys(void) {
    struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
    int r = poll(&pfd, 1, 1000);
    if (r <= 0) return top_stop;
    char buf[16];
    ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
    for (ssize_t i = 0; i < got; i++) {
        switch (buf[i]) {
        case 'q': case 'Q': case 27: case 3: return 1;
        case 'm': case 'M': top_sort = SORT_IN_USE; break;
        case 'k': case 'K': top_sort = SORT_PEAK; break;
        case 'p': case 'P': top_sort = SORT_PID; break;
        case 'd': case 'D': top_sort = SORT_DEVICE; break;
        default: break;
        }
    }
    return top_stop || got == 0;   /* EOF on the terminal: quit */
}

static int top_live(void) {
    struct termios old, raw;
    if (tcgetattr(STDIN_FILENO, &old) != 0) return -1;
    raw = old;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    struct sigaction sa = { .sa_handler = top_on_signal }, oint, oterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oint);
    sigaction(SIGTERM, &sa, &oterm);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    fputs("\033[?1049h\033[?25l", stdout);             /* the alternate screen, no cursor */
    history *h = calloc(HISTORY_ROWS, sizeof *h);
    int rc = h ? 0 : 1;
    top_sort = SORT_PID;
    while (rc == 0) {
        top_row *rows = NULL;
        int n = 0, reclaimed = 0;
        char path[PATH_MAX + 16];
        if (top_snapshot(&rows, &n, &reclaimed, path, sizeof path) != 0) { rc = 1; break; }
        history_add(h, rows, n);
        top_print_live(rows, n, path, h);
        free(rows);
        if (top_keys()) break;
    }
    free(h);
    fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSANOW, &old);
    sigaction(SIGINT, &oint, NULL);
    sigaction(SIGTERM, &oterm, NULL);
    return rc;
}

int top_main(int argc, char **argv) {
    int json = 0, once = 0, prom = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return -1;
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--once") == 0) once = 1;
        else if (strcmp(argv[i], "--prometheus") == 0) prom = 1;
        else {
            fprintf(stderr, "vram: top: unknown option '%s'\nTry 'vram top --help'.\n", argv[i]);
            return 2;
        }
    }
    if (json && prom) {
        fputs("vram: top: --json and --prometheus cannot be given together\nTry 'vram top --help'.\n", stderr);
        return 2;
    }
    if (prom) {                                         /* one snapshot, as --once */
        top_row *rows = NULL;
        int n = 0, reclaimed = 0;
        char path[PATH_MAX + 16];
        if (top_snapshot(&rows, &n, &reclaimed, path, sizeof path) != 0) return 1;
        int rc = top_print_prometheus(rows, n, path);
        free(rows);
        return rc;
    }
    int tty = isatty(STDOUT_FILENO);
    if (!once && !json && tty && isatty(STDIN_FILENO)) {
        int rc = top_live();
        if (rc >= 0) return rc;                         /* else no terminal settings: plain refresh */
    }
    for (;;) {
        top_row *rows = NULL;
        int n = 0, reclaimed = 0;
        char path[PATH_MAX + 16];
        if (top_snapshot(&rows, &n, &reclaimed, path, sizeof path) != 0) return 1;
        if (!once && tty && !json) fputs("\033[H\033[2J", stdout);
        if (json) top_print_json(rows, n, path, reclaimed);
        else top_print_table(rows, n, path);
        free(rows);
        fflush(stdout);
        if (once) return 0;
        sleep(1);
    }
}
