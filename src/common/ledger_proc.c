/*
 * ledger_proc.c: what the ledger learns through /proc. Whether a slot is alive (its pid runs with
 * the start time recorded, /proc/<pid>/stat field 22), finding a live slot, and carrying the live
 * slots over into a ledger file made anew (deleted, truncated, rebuilt) or found replaced (ledger.h,
 * "Faults to the file"): from the file moved aside, from the files running processes of this user
 * still hold open (found through /proc/<pid>/fd) and from each member's shadow of its own slots
 * (vram__ledger_shadow_create, a sealed memfd). A leaf under ledger.c (it calls nothing there); compiled
 * wherever ledger.c is.
 *
 * Invariants: the new file is read and written only through its descriptor (pread / pwrite), never
 * through a mapping, until the recovery is done, so a truncation by another process meanwhile cannot
 * fault; a slot is written with its state last; a slot found in two copies keeps the larger usage
 * (counting too much is safe, too little is not); only slots alive on their own (their pid runs with
 * the start time recorded) are carried.
 * Lock: vram__ledger_carry_slots runs with the ledger lock (ledger.lock's flock) held, by ledger.c's
 * attach; liveness needs none.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ledger.h"
#include "ledger_proc.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int vram__ledger_start_time(int pid, uint64_t *out) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');   /* the command may hold spaces and parentheses */
    if (!p) return -1;
    p++;
    /* fields 3.. follow; field 22 is the 20th of them */
    for (int field = 3; field < 22; field++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
        if (!*p) return -1;
    }
    while (*p == ' ') p++;
    char *end = NULL;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) return -1;
    *out = v;
    return 0;
}

int vram__ledger_slot_alive(const ledger_slot *s) {
    uint32_t state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    if (state != LEDGER_SLOT_LIVE) return 0;
    int pid = s->pid;
    uint64_t st = 0;
    if (pid <= 0) return 0;
    if (vram__ledger_start_time(pid, &st) != 0) return 0;   /* gone */
    return st == s->start_time;                      /* else the pid was reused */
}

/* The live slot of (pid, start_time, device) among `slots`, or NULL. */
ledger_slot *vram__ledger_slot_find(ledger_slot *slots, int pid, uint64_t start_time, int device) {
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &slots[i];
        if (s->state == LEDGER_SLOT_LIVE && s->pid == pid && s->start_time == start_time && s->device == device)
            return s;
    }
    return NULL;
}

/* A private copy of a ledger file's slots, merged into before the file is mapped: the recovery reads
 * and writes the new file only through its descriptor (pread / pwrite), so that a truncation by another
 * process meanwhile cannot fault (SIGBUS) in a mapping no handler knows yet. */
typedef struct ledger_table {
    ledger_slot slots[LEDGER_SLOTS];
    unsigned char dirty[LEDGER_SLOTS];
} ledger_table;

/* Copies into t every slot of the ledger file (or shadow) at fd that is whole and alive on its own (the
 * right size of file, a live state, its pid running with the start time recorded): at its own place
 * (a shadow's slot names it in reserved0, as index + 1) when that is free, else at the first free one.
 * A slot already in t keeps the larger usage of the two (copies may be older than the owner's last
 * stores: counting too much is safe, too little is not). Returns how many were copied. */
static int ledger_merge_from_fd(ledger_table *t, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (size_t)st.st_size != LEDGER_FILE_SIZE)
        return 0;
    int kept = 0;
    for (unsigned k = 0; k < LEDGER_SLOTS; k++) {
        ledger_slot s;
        off_t at = (off_t)(sizeof(ledger_header) + (size_t)k * sizeof s);
        if (pread(fd, &s, sizeof s, at) != (ssize_t)sizeof s || !vram__ledger_slot_alive(&s)) continue;
        ledger_slot *have = vram__ledger_slot_find(t->slots, s.pid, s.start_time, s.device);
        if (have) {
            if (s.in_use > have->in_use) have->in_use = s.in_use, t->dirty[have - t->slots] = 1;
            if (s.peak > have->peak) have->peak = s.peak, t->dirty[have - t->slots] = 1;
            continue;
        }
        unsigned at_k = s.reserved0 >= 1 && s.reserved0 <= LEDGER_SLOTS ? s.reserved0 - 1 : k;
        s.reserved0 = 0;
        ledger_slot *to = t->slots[at_k].state == 0 ? &t->slots[at_k] : NULL;
        for (uint32_t i = 0; i < LEDGER_SLOTS && !to; i++)
            if (t->slots[i].state == 0) to = &t->slots[i];
        if (!to) break;
        s.uuid[LEDGER_UUID_LEN - 1] = s.group[LEDGER_NAME_LEN - 1] = s.command[LEDGER_NAME_LEN - 1] = '\0';
        *to = s;
        t->dirty[to - t->slots] = 1;
        kept++;
    }
    return kept;
}

/* Writes t's changed slots into the file at fd (each slot with its state last, so that a reader of
 * the mapping never sees a live state over half-written fields). */
static void ledger_table_store(const ledger_table *t, int fd) {
    for (unsigned k = 0; k < LEDGER_SLOTS; k++) {
        if (!t->dirty[k]) continue;
        off_t at = (off_t)(sizeof(ledger_header) + (size_t)k * sizeof(ledger_slot));
        const char *p = (const char *)&t->slots[k];
        size_t head = sizeof t->slots[k].state;
        if (pwrite(fd, p + head, sizeof(ledger_slot) - head, at + (off_t)head) != (ssize_t)(sizeof(ledger_slot) - head))
            continue;
        if (pwrite(fd, p, head, at) != (ssize_t)head) {
            /* the slot stays as it was: the owner claims one again when it follows */
        }
    }
}

/* Processes that still map a ledger file no longer at the path (deleted, replaced by another file,
 * or moved aside to ledger.bad.*) keep their slots there, where no one else looks, and every process
 * under vram run keeps a shadow of its own slots (vram__ledger_shadow_create). Their open descriptors lead
 * to them: every process of this user is searched (/proc/<pid>/fd) for a descriptor of
 * "<path> (deleted)", "<path>.bad.*" or "/memfd:vram:<path> (deleted)", and the live slots of each
 * such file (once per file) are merged into t. Returns how many were merged. Called under the lock,
 * when a file was made or found replaced: rare, and a few thousand readlinks at most. */
static int ledger_recover_from_procs(const ledger *l, ledger_table *t) {
    char deleted[sizeof l->path + 16], aside[sizeof l->path + 8], shadow[sizeof l->path + 32];
    snprintf(deleted, sizeof deleted, "%s (deleted)", l->path);
    snprintf(aside, sizeof aside, "%s.bad.", l->path);
    snprintf(shadow, sizeof shadow, "/memfd:vram:%s (deleted)", l->path);
    struct { dev_t dev; ino_t ino; } seen[64];
    int nseen = 0, kept = 0;
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    struct dirent *e;
    while ((e = readdir(proc)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char dir[64];
        struct stat ps;
        snprintf(dir, sizeof dir, "/proc/%.20s", e->d_name);
        if (stat(dir, &ps) != 0 || ps.st_uid != geteuid()) continue;
        snprintf(dir, sizeof dir, "/proc/%.20s/fd", e->d_name);
        DIR *fds = opendir(dir);
        if (!fds) continue;
        struct dirent *f;
        while ((f = readdir(fds)) != NULL) {
            if (f->d_name[0] == '.') continue;
            char link[96], target[sizeof shadow + 64];
            snprintf(link, sizeof link, "%s/%.20s", dir, f->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n <= 0) continue;
            target[n] = '\0';
            if (strcmp(target, deleted) != 0 && strcmp(target, shadow) != 0 &&
                strncmp(target, aside, strlen(aside)) != 0)
                continue;
            int fd = open(link, O_RDONLY | O_CLOEXEC);   /* the file itself, deleted or not */
            if (fd < 0) continue;
            struct stat st;
            int known = fstat(fd, &st) != 0 || (st.st_dev == l->dev && st.st_ino == l->ino);
            for (int i = 0; i < nseen && !known; i++) known = seen[i].dev == st.st_dev && seen[i].ino == st.st_ino;
            if (!known) {
                if (nseen < (int)(sizeof seen / sizeof seen[0])) {
                    seen[nseen].dev = st.st_dev;
                    seen[nseen].ino = st.st_ino;
                    nseen++;
                }
                kept += ledger_merge_from_fd(t, fd);
            }
            close(fd);
        }
        closedir(fds);
    }
    closedir(proc);
    return kept;
}

int vram__ledger_shadow_create(const ledger *l) {
    char name[256];
    if (snprintf(name, sizeof name, "vram:%s", l->path) >= 250) return -1;   /* memfd names: 249 bytes */
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)LEDGER_FILE_SIZE) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Into the file at fd (fresh, rebuilt or replaced): the live slots of the file moved aside (old_fd,
 * or -1) and those running processes still map or shadow; the number carried over. */
int vram__ledger_carry_slots(ledger *l, int fd, int old_fd) {
    int kept = 0, found = 0;
    ledger_table *t = calloc(1, sizeof *t);
    if (!t) return 0;
    if (pread(fd, t->slots, sizeof t->slots, (off_t)sizeof(ledger_header)) != (ssize_t)sizeof t->slots)
        memset(t->slots, 0, sizeof t->slots);   /* shrunk meanwhile: whatever comes next rebuilds it */
    if (old_fd >= 0) kept = ledger_merge_from_fd(t, old_fd);
    found = ledger_recover_from_procs(l, t);
    ledger_table_store(t, fd);
    free(t);
    return kept + found;
}
