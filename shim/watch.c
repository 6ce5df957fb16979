/*
 * watch.c: the idle watcher (watch.h says what it does, whom it watches and when it sleeps and wakes
 * them). Compiled into `vram` and the Slurm plugin beside sleep.c and ledger.c, which it calls.
 * Invariants and locks: watch.h's; the ledger lock is taken for each scan, never across a sleep or a
 * wake (sleep.c takes it for each of its steps).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/ledger.h"
#include "sleep.h"

#define WATCH_MAX 256                 /* processes watched at once */
#define WATCH_SCAN_NS 500000000ull    /* the ledger is read this often */
#define WATCH_RETRY_NS 1000000000ull  /* a refused wake is tried again this often */
#define WATCH_LOCK_MS 10000u          /* the lock may wait this long for calls under way */

void watch_format_duration(uint64_t ns, char *out, size_t len) {
    static const struct { const char *unit; double ns; } units[] = {
        { "d", 86400e9 }, { "h", 3600e9 }, { "m", 60e9 }, { "s", 1e9 }, { "ms", 1e6 },
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if ((double)ns < units[i].ns && i + 1 < sizeof units / sizeof units[0]) continue;
        snprintf(out, len, "%.4g%s", (double)ns / units[i].ns, units[i].unit);
        return;
    }
}

static uint64_t watch_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the watcher's processes ------------------------------------------------------------------------ */

typedef struct watched {
    int pid;
    uint64_t start;
    const ledger_activity *page;   /* NULL: cannot be seen (said once) */
    uint64_t calls;                /* the count last read */
    uint64_t changed;              /* when it last moved (or the process was first seen, or woken) */
    uint64_t retry;                /* a refused wake: not before this */
    int asleep, said, seen, was;
    int held;                      /* asleep by another's hand (vram sleep): left alone until woken */
} watched;

typedef struct watcher {
    int pid;
    uint64_t start, idle_ns;
    int root;                      /* the process that started it */
    uint64_t root_start;
    ledger l;
    sleep_driver d;
    watched w[WATCH_MAX];
    int n;
} watcher;

static volatile sig_atomic_t watch_stop;
static void watch_on_term(int sig) { (void)sig; watch_stop = 1; }

/* Maps pid's activity page through its descriptor fd (/proc/<pid>/fd/<fd>, checked to be the memfd
 * "vram-activity" of that very process), read-only; NULL when it cannot. */
static const ledger_activity *watch_map(int pid, uint64_t start, int fd) {
    char path[64], target[128];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (fd < 0 || n <= 0) return NULL;
    target[n] = '\0';
    if (strncmp(target, "/memfd:" LEDGER_ACTIVITY_NAME " ", strlen("/memfd:" LEDGER_ACTIVITY_NAME " ")) != 0) return NULL;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return NULL;
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(f, &st) == 0 && st.st_size >= (off_t)LEDGER_ACTIVITY_BYTES)
        m = mmap(NULL, LEDGER_ACTIVITY_BYTES, PROT_READ, MAP_SHARED, f, 0);
    close(f);
    if (m == MAP_FAILED) return NULL;
    const ledger_activity *a = m;
    if (__atomic_load_n(&a->magic, __ATOMIC_ACQUIRE) != LEDGER_ACTIVITY_MAGIC || a->pid != pid || a->start_time != start) {
        munmap(m, LEDGER_ACTIVITY_BYTES);
        return NULL;
    }
    return a;
}

static watched *watch_find(watcher *w, int pid, uint64_t start) {
    for (int i = 0; i < w->n; i++)
        if (w->w[i].pid == pid && w->w[i].start == start) return &w->w[i];
    return NULL;
}

/* Reads the ledger: the live processes that name this watcher, with their pages and whether they are
 * asleep; those no longer there are dropped. */
static void watch_scan(watcher *w, uint64_t now) {
    char err[256];
    for (int i = 0; i < w->n; i++) w->w[i].seen = 0;
    vram__ledger_lock(&w->l);
    if (vram__ledger_follow_locked(&w->l, 0, err, sizeof err) >= 0) {
        (void)vram__ledger_reclaim_locked(&w->l);
        for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
            const ledger_slot *s = &w->l.slots[i];
            if (s->state != LEDGER_SLOT_LIVE || s->watcher_pid != w->pid || s->watcher_start != w->start) continue;
            watched *p = watch_find(w, s->pid, s->start_time);
            if (!p) {
                if (w->n == WATCH_MAX) continue;
                p = &w->w[w->n++];
                memset(p, 0, sizeof *p);
                p->pid = s->pid;
                p->start = s->start_time;
                p->changed = now;
                p->page = watch_map(s->pid, s->start_time, s->activity_fd);
                if (p->page) p->calls = __atomic_load_n(&p->page->calls, __ATOMIC_RELAXED);
            }
            if (!p->seen) p->was = p->asleep || p->held, p->asleep = 0, p->held = 0;
            p->seen = 1;
            uint32_t st = __atomic_load_n(&s->sleep, __ATOMIC_ACQUIRE);
            if (st == LEDGER_ASLEEP && s->sleeper_pid == w->pid && s->sleeper_start == w->start) p->asleep = 1;
            else if (st == LEDGER_ASLEEP) p->held = 1;   /* vram sleep's: it stays asleep until vram wake */
        }
    }
    vram__ledger_unlock(&w->l);
    for (int i = 0; i < w->n; i++) {
        watched *p = &w->w[i];
        if (p->seen && p->was && !p->asleep && !p->held) p->changed = now, p->retry = 0;   /* woken by vram wake */
        if (p->seen) continue;
        if (p->page) munmap((void *)p->page, LEDGER_ACTIVITY_BYTES);
        w->w[i--] = w->w[--w->n];
    }
}

/* Whether p is still asleep by this watcher's hand, as the ledger says now (a vram sleep of it since
 * the last scan names another sleeper: then it is held, and left asleep). */
static int watch_still_mine(watcher *w, watched *p) {
    char err[256];
    int mine = 0, other = 0;
    vram__ledger_lock(&w->l);
    if (vram__ledger_follow_locked(&w->l, 0, err, sizeof err) >= 0) {
        for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
            const ledger_slot *s = &w->l.slots[i];
            if (s->state != LEDGER_SLOT_LIVE || s->pid != p->pid || s->start_time != p->start) continue;
            if (__atomic_load_n(&s->sleep, __ATOMIC_ACQUIRE) != LEDGER_ASLEEP) continue;
            if (s->sleeper_pid == w->pid && s->sleeper_start == w->start) mine = 1;
            else other = 1;
        }
    }
    vram__ledger_unlock(&w->l);
    if (other) p->held = 1, p->asleep = 0;
    return mine && !other;
}

static void watch_say_unseen(watcher *w, watched *p) {
    if (p->page || p->said) return;
    char cmd[LEDGER_NAME_LEN];
    sleep_command(p->pid, cmd, sizeof cmd);
    fprintf(stderr, "vram: idle sleep: PID %d (%s) cannot be watched (its activity page is not found: its "
            "descriptor was closed?): it is not put to sleep\n", p->pid, cmd);
    p->said = 1;
}

static void watch_wake(watcher *w, watched *p, uint64_t now, const char *why) {
    char msg[1024];
    int r = wake_process(&w->d, &w->l, p->pid, NULL, msg, sizeof msg);
    if (r == SLEEP_DONE || r == SLEEP_ALREADY) {
        fprintf(stderr, "vram: %s: %s\n", why, msg);
        p->asleep = 0;
        p->said = 0;
        p->retry = 0;
        p->changed = now;
    } else if (r == SLEEP_GONE) {
        p->asleep = 0;
    } else {
        if (!p->said) fprintf(stderr, "vram: %s, but %s; tried again every second\n", why, msg);
        p->said = 1;
        p->retry = now + WATCH_RETRY_NS;
    }
}

static void watch_sleep(watcher *w, watched *p, uint64_t now) {
    char msg[1024], dur[32];
    uint64_t host = 0;
    watch_format_duration(w->idle_ns, dur, sizeof dur);
    uint64_t before = p->calls;
    int r = sleep_process(&w->d, &w->l, p->pid, WATCH_LOCK_MS, 0, msg, sizeof msg, &host);
    if (r == SLEEP_ALREADY) {   /* put to sleep by hand meanwhile (vram sleep): left to vram wake */
        p->held = 1;
    } else if (r == SLEEP_DONE) {
        fprintf(stderr, "vram: no CUDA call for %s: %s\n", dur, msg);
        p->asleep = 1;
        p->said = 0;
        /* a call made while it was being locked is waiting in the driver: compared with the count read
         * before the sleep, it wakes the process at the next tick */
        p->calls = before;
    } else if (r != SLEEP_GONE) {
        fprintf(stderr, "vram: no CUDA call for %s, but %s; tried again after %s more\n", dur, msg, dur);
        p->changed = now;
    }
}

static void watch_loop(watcher *w) {
    uint64_t next_scan = 0;
    for (;;) {
        uint64_t now = watch_now();
        if (watch_stop) break;
        if (now >= next_scan) {
            watch_scan(w, now);
            next_scan = now + WATCH_SCAN_NS;
            uint64_t st = 0;
            if (w->n == 0 && (vram__ledger_start_time(w->root, &st) != 0 || st != w->root_start)) return;
        }
        int asleep = 0;
        for (int i = 0; i < w->n; i++) {
            watched *p = &w->w[i];
            if (!p->page) {
                watch_say_unseen(w, p);
                continue;
            }
            uint64_t calls = __atomic_load_n(&p->page->calls, __ATOMIC_RELAXED);
            if (p->held) {   /* put to sleep by hand: its calls wait for vram wake */
                p->calls = calls;
                continue;
            }
            if (calls != p->calls) {
                p->calls = calls;
                p->changed = now;
                if (p->asleep && now >= p->retry && watch_still_mine(w, p)) watch_wake(w, p, now, "a CUDA call");
            } else if (p->asleep && p->retry && now >= p->retry) {
                watch_wake(w, p, now, "a CUDA call");
            } else if (!p->asleep && now - p->changed >= w->idle_ns &&
                       __atomic_load_n(&p->page->waits, __ATOMIC_RELAXED) == 0) {
                watch_sleep(w, p, now);
            }
            asleep |= p->asleep;
        }
        uint64_t tick = asleep ? 10000000ull : w->idle_ns / 10;
        if (tick > 1000000000ull) tick = 1000000000ull;
        if (tick < 10000000ull) tick = 10000000ull;
        struct timespec ts = { (time_t)(tick / 1000000000ull), (long)(tick % 1000000000ull) };
        nanosleep(&ts, NULL);
    }
    /* SIGTERM: every process it put to sleep is woken before it goes */
    for (int i = 0; i < w->n; i++)
        if (w->w[i].asleep) watch_wake(w, &w->w[i], watch_now(), "the watcher stops");
}

/* ---- starting it ---------------------------------------------------------------------------------- */

/* In the watcher: everything but standard error and the report pipe closed, /dev/null for standard
 * input and output, its own session, the signals it keeps. */
static void watch_detach(int report) {
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        if (null > 2) close(null);
    }
    if (report != 3) {
        dup2(report, 3);
        close(report);
    }
    closefrom(4);
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTSTP, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watch_on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

/* The watcher process: reports "ok PID START" or "err SENTENCE" on fd 3, then watches. */
static void watch_child(int root, uint64_t root_start, uint64_t idle_ns, const char *ledger_dir) {
    static watcher w;
    char err[PATH_MAX + 512], line[PATH_MAX + 600];
    memset(&w, 0, sizeof w);
    w.pid = (int)getpid();
    w.root = root;
    w.root_start = root_start;
    w.idle_ns = idle_ns;
    int ok = vram__ledger_start_time(w.pid, &w.start) == 0;
    if (!ok) snprintf(err, sizeof err, "cannot read /proc/%d/stat", w.pid);
    if (ok && sleep_driver_open(&w.d, 1, err, sizeof err) != 0) ok = 0;
    int ledger_failed = 0;
    if (ok && (ledger_dir ? vram__ledger_open_in(&w.l, ledger_dir, err, sizeof err) : vram__ledger_open(&w.l, err, sizeof err)) != 0)
        ok = 0, ledger_failed = 1;
    int n = ok ? snprintf(line, sizeof line, "ok %d %llu\n", w.pid, (unsigned long long)w.start)
               : snprintf(line, sizeof line, "err %s%.*s%s\n", ledger_failed ? "the ledger cannot be opened (" : "",
                          (int)(sizeof line - 64), err, ledger_failed ? ")" : "");
    if (n > 0 && write(3, line, (size_t)n) < 0) ok = 0;
    close(3);
    if (!ok) _exit(1);
    watch_loop(&w);
    _exit(0);
}

int watch_start(uint64_t idle_ns, const char *ledger_dir, char *env, size_t envlen, char *err, size_t errlen) {
    int root = (int)getpid();
    uint64_t root_start = 0;
    if (vram__ledger_start_time(root, &root_start) != 0) {
        snprintf(err, errlen, "cannot read /proc/%d/stat", root);
        return -1;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t c = fork();
    if (c < 0) {
        snprintf(err, errlen, "cannot fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (c == 0) {   /* the intermediate child: a new session, the watcher in it, gone at once */
        close(fds[0]);
        setsid();
        pid_t w = fork();
        if (w == 0) {
            watch_detach(fds[1]);
            watch_child(root, root_start, idle_ns, ledger_dir);
        }
        _exit(w < 0 ? 1 : 0);
    }
    close(fds[1]);
    int status = 0;
    while (waitpid(c, &status, 0) < 0 && errno == EINTR) {
    }
    char line[PATH_MAX + 600];
    size_t got = 0;
    for (;;) {   /* until the watcher closes its end (it has reported, or died) */
        ssize_t n = read(fds[0], line + got, sizeof line - 1 - got);
        if (n > 0) got += (size_t)n;
        else if (n == 0 || errno != EINTR || got == sizeof line - 1) break;
    }
    close(fds[0]);
    line[got] = '\0';
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    int wpid = 0;
    unsigned long long wstart = 0;
    if (strncmp(line, "ok ", 3) == 0 && sscanf(line + 3, "%d %llu", &wpid, &wstart) == 2) {
        snprintf(env, envlen, "%d:%llu:%llu", wpid, wstart, (unsigned long long)idle_ns);
        return 0;
    }
    if (strncmp(line, "err ", 4) == 0) snprintf(err, errlen, "%s", line + 4);
    else snprintf(err, errlen, "the watcher process did not start");
    return -1;
}
