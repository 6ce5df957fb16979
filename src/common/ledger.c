/*
 * ledger.c: the per-machine ledger (see ledger.h for the file, its layout, its faults and its
 * rules): where the directory is (vram__ledger_place: VRAM_LEDGER_DIR, an XDG_RUNTIME_DIR of this user's,
 * /dev/shm/vram-<uid>, or a place of the user's own when that one is taken), the directory and the
 * file, checking a header and building one, opening, following and
 * rebuilding the file under the lock, the lock, and claiming, finding, releasing and summing slots
 * (a sum skips the slots of processes asleep: their memory is in host memory).
 * What is learnt through /proc (a process's start time, whether a slot is alive, carrying the live
 * slots over into a file made anew) is ledger_proc.c's, which calls nothing here. Compiled into libvram_preload.so, `vram` (top, run) and the Slurm plugin.
 * Invariants and locks: ledger.h's (slots claimed and released under ledger.lock's flock, their
 * counters stored by the owner alone without it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ledger.h"
#include "ledger_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t vram__ledger_checksum(const ledger_header *h) {
    ledger_header c = *h;
    c.checksum = 0;
    const unsigned char *p = (const unsigned char *)&c;
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof c; i++) {
        x ^= p[i];
        x *= 0x100000001b3ull;
    }
    return x;
}

/* ---- where the ledger lives (ledger.h, "Where") ---------------------------------------------------- */

/* Whether `path` is a directory (a symlink to one included) owned by this user. */
static int ledger_own_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

/* mkdir 0700, an existing entry kept (what it is is checked by the caller); 0, or -1 with err. */
static int ledger_mkdir(const char *path, char *err, size_t errlen) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST) return 0;
    snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    return -1;
}

/* snprintf into dir, -1 with err when it does not fit. */
__attribute__((format(printf, 5, 6)))
static int ledger_path(char *dir, size_t len, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dir, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - 16) {   /* room for "/ledger.lock" */
        snprintf(err, errlen, "the ledger directory's path is too long (%d bytes)", n);
        return -1;
    }
    return 0;
}

/* The home directory of this user in the password database (not $HOME) into home; 0, or -1 with err. */
static int ledger_home(char *home, size_t len, char *err, size_t errlen) {
    unsigned long uid = (unsigned long)geteuid();
    struct passwd pw, *found = NULL;
    char *buf = NULL;
    int rc = ERANGE;
    for (size_t cap = 4096; rc == ERANGE && cap <= (1u << 20); cap *= 4) {
        char *more = realloc(buf, cap);
        if (!more) break;
        buf = more;
        rc = getpwuid_r(geteuid(), &pw, buf, cap, &found);
    }
    if (rc != 0 || !found || !pw.pw_dir || pw.pw_dir[0] != '/') {
        if (rc != 0) snprintf(err, errlen, "cannot read the password database for uid %lu: %s", uid, strerror(rc));
        else snprintf(err, errlen, "uid %lu has no home directory in the password database", uid);
        free(buf);
        return -1;
    }
    rc = ledger_path(home, len, err, errlen, "%s", pw.pw_dir);
    free(buf);
    return rc;
}

/* A place only this user can own, the same for every process of the user on this machine whatever
 * their environment: /run/user/<uid>/vram when logind's runtime directory /run/user/<uid> is a
 * directory of this user, else <home>/.cache/vram/ledger-<host name> under the home of the password
 * database, the host in the name so that a home shared by several machines (NFS) never shares a
 * ledger. Made 0700 (each directory made here); 0, or -1 with err. */
static int ledger_own_place(char *dir, size_t len, char *err, size_t errlen) {
    unsigned long uid = (unsigned long)geteuid();
    char run[64], home[PATH_MAX], why[PATH_MAX + 64];
    snprintf(run, sizeof run, "/run/user/%lu", uid);
    if (ledger_own_dir(run))
        return ledger_path(dir, len, err, errlen, "%s/vram", run) || ledger_mkdir(dir, err, errlen) ? -1 : 0;
    if (ledger_home(home, sizeof home, why, sizeof why) != 0) {
        snprintf(err, errlen, "no /run/user/%lu of this user, and %s", uid, why);
        return -1;
    }
    if (!ledger_own_dir(home)) {
        snprintf(err, errlen, "no /run/user/%lu of this user, and the home directory %s is missing or not this "
                 "user's", uid, home);
        return -1;
    }
    char host[HOST_NAME_MAX + 1] = "";
    if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[HOST_NAME_MAX] = '\0';
    for (char *c = host; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '.' ||
              *c == '_' || *c == '-'))
            *c = '_';
    if (ledger_path(dir, len, err, errlen, "%s/.cache", home) || ledger_mkdir(dir, err, errlen) ||
        ledger_path(dir, len, err, errlen, "%s/.cache/vram", home) || ledger_mkdir(dir, err, errlen) ||
        ledger_path(dir, len, err, errlen, "%s/.cache/vram/ledger-%s", home, host) ||
        ledger_mkdir(dir, err, errlen))
        return -1;
    /* the path its open descriptors show in /proc (a home behind a symlink), so that a recovery
     * (ledger_proc.c) recognises the files of this ledger */
    if (realpath(dir, home) && strlen(home) + 16 < len) snprintf(dir, len, "%s", home);
    return 0;
}

int vram__ledger_place(char *dir, size_t len, unsigned flags, char *note, size_t notelen, char *err, size_t errlen) {
    if (note && notelen) note[0] = '\0';
    if (!(flags & LEDGER_PLACE_NODE)) {
        const char *set = getenv("VRAM_LEDGER_DIR");
        if (set && set[0]) {
            if (set[0] != '/') {
                snprintf(err, errlen, "VRAM_LEDGER_DIR=%s is not an absolute path", set);
                return -1;
            }
            if (ledger_path(dir, len, err, errlen, "%s", set) != 0) return -1;
            for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = '\0';
            return ledger_mkdir(dir, err, errlen);
        }
        /* an XDG_RUNTIME_DIR of another machine (srun exports the login session's) or of another user
         * is passed over */
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && xdg[0] == '/' && ledger_own_dir(xdg))
            return ledger_path(dir, len, err, errlen, "%s/vram", xdg) || ledger_mkdir(dir, err, errlen) ? -1 : 0;
    }
    unsigned long uid = (unsigned long)geteuid();
    char shm[64], why[160];
    snprintf(shm, sizeof shm, "/dev/shm/vram-%lu", uid);
    struct stat st;
    for (int tries = 0;; tries++) {
        if (ledger_mkdir(shm, err, errlen) != 0) return -1;
        if (lstat(shm, &st) == 0) break;
        if (tries == 2) {   /* removed each time between mkdir and lstat */
            snprintf(err, errlen, "cannot stat %s: %s", shm, strerror(errno));
            return -1;
        }
    }
    if (S_ISDIR(st.st_mode) && st.st_uid == geteuid()) return ledger_path(dir, len, err, errlen, "%s", shm);
    /* a name anyone can take first in sticky /dev/shm, and no one but its owner can remove: taken */
    if (S_ISDIR(st.st_mode))
        snprintf(why, sizeof why, "%s belongs to uid %lu, not to this user (uid %lu)", shm, (unsigned long)st.st_uid, uid);
    else
        snprintf(why, sizeof why, "%s is not a directory (a symlink or another file, of uid %lu)", shm,
                 (unsigned long)st.st_uid);
    char own_err[PATH_MAX + 160];
    if (ledger_own_place(dir, len, own_err, sizeof own_err) != 0) {
        snprintf(err, errlen, "%s, and no place of this user's own is left for the ledger (%s); set VRAM_LEDGER_DIR "
                 "to a directory of yours", why, own_err);
        return -1;
    }
    if (note && notelen) snprintf(note, notelen, "%s: the ledger is in %s instead", why, dir);
    return 0;
}

/* The directory of the ledger of this user at `dir` (vram__ledger_place's), or of the place the
 * environment gives when dir is NULL; 0, or -1 with err. */
static int ledger_dir_of(char *out, size_t len, const char *dir, char *note, size_t notelen, char *err, size_t errlen) {
    if (!dir) return vram__ledger_place(out, len, 0, note, notelen, err, errlen);
    if (note && notelen) note[0] = '\0';
    return ledger_path(out, len, err, errlen, "%s", dir);
}

int vram__ledger_repair_dir(char *said, size_t saidlen) {
    char dir[PATH_MAX], err[PATH_MAX + 256];
    said[0] = '\0';
    if (vram__ledger_place(dir, sizeof dir, 0, NULL, 0, err, sizeof err) != 0) return 0;   /* vram__ledger_open says why */
    /* opened without following a symlink, then checked and changed through the descriptor: what is
     * changed is what was checked */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077)) {
        if (fchmod(fd, 0700) == 0) {
            snprintf(said, saidlen, "the ledger directory %s had mode %03o (open to group or others); set it to 0700",
                     dir, (unsigned)(st.st_mode & 0777));
            rc = 1;
        } else {
            rc = -1;
        }
    }
    close(fd);
    return rc;
}

/* The directory (vram__ledger_place's, or `dir`): made 0700 when missing, and checked: a real directory (not
 * a symlink) of this user, not open to group or others. */
static int ledger_make_dir(ledger *l, const char *dir, char *err, size_t errlen) {
    if (ledger_dir_of(l->dir, sizeof l->dir, dir, l->note, sizeof l->note, err, errlen) != 0) return -1;
    if (mkdir(l->dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", l->dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(l->dir, &st) != 0) {
        snprintf(err, errlen, "cannot stat %s: %s", l->dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is not a directory (a symlink or another file); refused", l->dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s belongs to uid %lu, not to this user (uid %lu); refused", l->dir,
                 (unsigned long)st.st_uid, (unsigned long)geteuid());
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(err, errlen, "%s has mode %03o; it must not be open to group or others (0700); refused",
                 l->dir, (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

/* Opens `path` O_NOFOLLOW, creating it 0600; checks it is a regular file of this user. */
static int ledger_open_file(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(err, errlen, "%s is not a regular file of this user with mode 0600; refused", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Why the ledger file is not one this version can trust, or NULL when it is. */
static const char *ledger_bad(int fd, char *why, size_t len) {
    struct stat st;
    if (fstat(fd, &st) != 0) return "cannot be read";
    if ((size_t)st.st_size != LEDGER_FILE_SIZE) {
        snprintf(why, len, "of %lld bytes, not %zu", (long long)st.st_size, (size_t)LEDGER_FILE_SIZE);
        return why;
    }
    ledger_header h;
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) return "unreadable";
    if (h.magic != LEDGER_MAGIC) return "corrupted (bad magic number)";
    if (h.version != LEDGER_VERSION) {
        snprintf(why, len, "of another version (layout %u, this is %u)", h.version, LEDGER_VERSION);
        return why;
    }
    if (h.header_size != sizeof h || h.slot_size != sizeof(ledger_slot) || h.nslots != LEDGER_SLOTS ||
        h.file_size != LEDGER_FILE_SIZE)
        return "of another layout (sizes differ)";
    if (h.checksum != vram__ledger_checksum(&h)) return "corrupted (bad header checksum)";
    return NULL;
}

void vram__ledger_header_init(ledger_header *h) {
    memset(h, 0, sizeof *h);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->magic = LEDGER_MAGIC;
    h->version = LEDGER_VERSION;
    h->header_size = sizeof *h;
    h->slot_size = sizeof(ledger_slot);
    h->nslots = LEDGER_SLOTS;
    h->file_size = LEDGER_FILE_SIZE;
    h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    h->checksum = vram__ledger_checksum(h);
}

/* Writes a fresh ledger at fd (truncated, zeroed slots, header); 0, or -1 with err. */
static int ledger_init_file(const ledger *l, int fd, char *err, size_t errlen) {
    ledger_header h;
    vram__ledger_header_init(&h);
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)LEDGER_FILE_SIZE) != 0 ||
        pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        snprintf(err, errlen, "cannot write %s: %s", l->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The lock file records which file (device, inode) the ledger was when last opened whole, so that a
 * file put at the path by something other than vram (valid, but with none of the running processes'
 * slots) is noticed, and so is a file whose maker died before it had recovered the running processes'
 * slots (the record is cleared before a file is made and written once its recovery is done). 1 when
 * the record names another file or there is none. */
static int ledger_replaced(const ledger *l) {
    uint64_t id[2];
    if (pread(l->lock_fd, id, sizeof id, 0) != (ssize_t)sizeof id) return 1;
    return id[0] != (uint64_t)l->dev || id[1] != (uint64_t)l->ino;
}

static void ledger_clear_identity(const ledger *l) {
    uint64_t id[2] = { 0, 0 };
    if (pwrite(l->lock_fd, id, sizeof id, 0) != (ssize_t)sizeof id) {
        /* the old record stays: a file made now over the same inode would pass for recovered only if
         * this process dies before recording; the follow of the others then re-claims their own slots */
    }
}

static void ledger_record_identity(const ledger *l) {
    uint64_t id[2] = { (uint64_t)l->dev, (uint64_t)l->ino };
    if (pwrite(l->lock_fd, id, sizeof id, 0) != (ssize_t)sizeof id) {
        /* not recorded: the next opener searches for lost slots once more; no harm */
    }
}

/* Maps the ledger file at fd into l (which then owns fd); 0, or -1 with err. */
static int ledger_map_fd(ledger *l, int fd, char *err, size_t errlen) {
    void *map = mmap(NULL, LEDGER_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "cannot map %s: %s", l->path, strerror(errno));
        return -1;
    }
    l->fd = fd;
    l->map = map;
    l->size = LEDGER_FILE_SIZE;
    l->hdr = map;
    l->slots = (ledger_slot *)((char *)map + sizeof(ledger_header));
    ledger_record_identity(l);
    return 0;
}

/* Under the lock: opens the file at l->path (creating it, or rebuilding a bad one), maps it into l and
 * recovers the slots of running processes that a fault left elsewhere: those of the file moved aside
 * by a rebuild, and, when the file was made now or put there by something else, those of every file
 * still held open by a process of this user (ledger_recover_from_procs). 0, -1 with err, or -2 when
 * the bad file vanished while it was being moved aside (ledger_attach_locked tries again). */
static int ledger_attach_once(ledger *l, char *err, size_t errlen) {
    int fd = ledger_open_file(l->path, err, errlen), old_fd = -1, made = 0;
    if (fd < 0) return -1;
    struct stat st;
    char why[128], aside[PATH_MAX + 64];
    const char *bad = NULL;
    if (fstat(fd, &st) == 0 && st.st_size == 0) {
        ledger_clear_identity(l);
        if (ledger_init_file(l, fd, err, errlen) != 0) goto fail;
        made = 1;
    } else if ((bad = ledger_bad(fd, why, sizeof why)) != NULL) {
        /* Never trusted: moved aside (kept for a look), and a fresh one written. */
        snprintf(aside, sizeof aside, "%s.bad.%ld.%ld", l->path, (long)getpid(), (long)time(NULL));
        ledger_clear_identity(l);
        old_fd = fd;
        fd = -1;
        if (rename(l->path, aside) != 0) {
            int gone = errno == ENOENT;   /* deleted meanwhile: the next try makes a new one */
            snprintf(err, errlen, "%s is %s and cannot be moved aside: %s", l->path, bad, strerror(errno));
            close(old_fd);
            return gone ? -2 : -1;
        }
        if ((fd = ledger_open_file(l->path, err, errlen)) < 0 || ledger_init_file(l, fd, err, errlen) != 0) goto fail;
        made = 1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat %s: %s", l->path, strerror(errno));
        goto fail;
    }
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    int carried = old_fd >= 0 || made || ledger_replaced(l) ? vram__ledger_carry_slots(l, fd, old_fd) : 0;
    if (old_fd >= 0) close(old_fd);
    old_fd = -1;
    if (ledger_map_fd(l, fd, err, errlen) != 0) goto fail;
    l->recovered = carried;
    if (bad)
        snprintf(l->rebuilt, sizeof l->rebuilt, "%s was %s; moved aside to %s and rebuilt, keeping the %d slot(s) "
                 "of processes still running", l->path, bad, aside, carried);
    return 0;

fail:
    if (old_fd >= 0) close(old_fd);
    if (fd >= 0) close(fd);
    return -1;
}

static int ledger_attach_locked(ledger *l, char *err, size_t errlen) {
    int rc = -2;
    for (int tries = 0; tries < 3 && rc == -2; tries++) rc = ledger_attach_once(l, err, errlen);
    return rc == 0 ? 0 : -1;
}

static int ledger_open_dir(ledger *l, const char *dir, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    l->lock_fd = l->fd = -1;
    if (ledger_make_dir(l, dir, err, errlen) != 0) return -1;
    snprintf(l->lock_path, sizeof l->lock_path, "%s/ledger.lock", l->dir);
    snprintf(l->path, sizeof l->path, "%s/ledger", l->dir);
    if ((l->lock_fd = ledger_open_file(l->lock_path, err, errlen)) < 0) return -1;
    vram__ledger_lock(l);
    int rc = ledger_attach_locked(l, err, errlen);
    vram__ledger_unlock(l);
    if (rc != 0) {
        close(l->lock_fd);
        l->lock_fd = -1;
    }
    return rc;
}

int vram__ledger_open(ledger *l, char *err, size_t errlen) { return ledger_open_dir(l, NULL, err, errlen); }

int vram__ledger_open_in(ledger *l, const char *dir, char *err, size_t errlen) {
    if (!dir || dir[0] != '/') {
        snprintf(err, errlen, "the ledger directory '%s' is not an absolute path", dir ? dir : "");
        return -1;
    }
    return ledger_open_dir(l, dir, err, errlen);
}

int vram__ledger_follow_locked(ledger *l, int force, char *err, size_t errlen) {
    struct stat st, mine;
    if (!force && fstat(l->fd, &mine) == 0 && (size_t)mine.st_size == LEDGER_FILE_SIZE && stat(l->path, &st) == 0 &&
        st.st_dev == l->dev && st.st_ino == l->ino && !ledger_replaced(l))
        return 0;   /* the same file, whole and recovered (else the attach makes it so) */
    ledger n = *l;
    n.fd = -1;
    n.map = NULL;
    n.rebuilt[0] = '\0';
    if (ledger_attach_locked(&n, err, errlen) != 0) return -1;
    /* the old mapping's addresses stay readable, as zeros (a slot there reads as an awake, empty one),
     * for a reader that took a pointer into it without a lock (the preload library's sleep gate, shim.h):
     * address space only, no memory */
    if (mmap(l->map, l->size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        munmap(l->map, l->size);
    close(l->fd);
    *l = n;
    return 1;
}

void vram__ledger_close(ledger *l) {
    if (l->map) munmap(l->map, l->size);
    if (l->fd >= 0) close(l->fd);
    if (l->lock_fd >= 0) close(l->lock_fd);
    l->map = NULL;
    l->fd = l->lock_fd = -1;
}

void vram__ledger_lock(ledger *l) {
    for (int tries = 0;; tries++) {
        while (flock(l->lock_fd, LOCK_EX) != 0 && errno == EINTR) {
        }
        /* the lock file deleted or replaced: the others lock the file now at the path, so this one
         * must too (else two holders); its descriptor number is kept (dup2) */
        struct stat held, now;
        if (tries == 3 || !l->lock_path[0] || fstat(l->lock_fd, &held) != 0) return;
        if (stat(l->lock_path, &now) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino) return;
        char err[64];
        int fd = ledger_open_file(l->lock_path, err, sizeof err);
        if (fd < 0) return;   /* cannot: the lock held is the best there is */
        if (dup2(fd, l->lock_fd) < 0) {
            close(fd);
            return;
        }
        close(fd);
    }
}

void vram__ledger_unlock(ledger *l) { flock(l->lock_fd, LOCK_UN); }

static void ledger_free_slot(ledger_slot *s) {
    __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
    memset((char *)s + sizeof s->state, 0, sizeof *s - sizeof s->state);
}

int vram__ledger_reclaim_locked(ledger *l) {
    int n = 0;
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &l->slots[i];
        if (s->state == 0) continue;
        if (!vram__ledger_slot_alive(s)) {
            ledger_free_slot(s);
            n++;
        }
    }
    return n;
}

static void ledger_set_name(char *dst, size_t len, const char *src) {
    memset(dst, 0, len);
    if (src) snprintf(dst, len, "%s", src);
}

ledger_slot *vram__ledger_claim_locked(ledger *l, int pid, uint64_t start_time, int device, const char *uuid,
                                 const char *group, const char *command, uint64_t limit,
                                 uint64_t group_limit) {
    ledger_slot *s = NULL;
    for (uint32_t i = 0; i < LEDGER_SLOTS && !s; i++)
        if (l->slots[i].state == 0) s = &l->slots[i];
    if (!s && vram__ledger_reclaim_locked(l) > 0)
        for (uint32_t i = 0; i < LEDGER_SLOTS && !s; i++)
            if (l->slots[i].state == 0) s = &l->slots[i];
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->pid = pid;
    s->start_time = start_time;
    s->device = device;
    s->limit = limit;
    s->group_limit = group_limit;
    s->activity_fd = -1;
    ledger_set_name(s->uuid, sizeof s->uuid, uuid);
    ledger_set_name(s->group, sizeof s->group, group);
    ledger_set_name(s->command, sizeof s->command, command);
    __atomic_store_n(&s->state, LEDGER_SLOT_LIVE, __ATOMIC_RELEASE);
    return s;
}

ledger_slot *vram__ledger_find_locked(ledger *l, int pid, uint64_t start_time, int device) {
    return vram__ledger_slot_find(l->slots, pid, start_time, device);
}

void vram__ledger_release_locked(ledger_slot *s, int pid, uint64_t start_time) {
    if (s->state == LEDGER_SLOT_LIVE && s->pid == pid && s->start_time == start_time) ledger_free_slot(s);
}

uint64_t vram__ledger_group_total_locked(ledger *l, const char *group, const char *uuid) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &l->slots[i];
        if (s->state == 0) continue;
        /* other groups and cards first: a liveness check reads /proc; theirs are reclaimed by
         * vram__ledger_claim_locked and vram top */
        if (strncmp(s->group, group, sizeof s->group) != 0 || strncmp(s->uuid, uuid, sizeof s->uuid) != 0)
            continue;
        if (!vram__ledger_slot_alive(s)) {
            ledger_free_slot(s);
            continue;
        }
        if (__atomic_load_n(&s->sleep, __ATOMIC_RELAXED) == LEDGER_ASLEEP) continue;   /* in host memory */
        uint64_t u = __atomic_load_n(&s->in_use, __ATOMIC_RELAXED);
        total = u > UINT64_MAX - total ? UINT64_MAX : total + u;
    }
    return total;
}

/* The live, awake slot of `group` on `uuid` (stale ones freed on the way), for the sums below. */
static int ledger_member(ledger_slot *s, const char *group, const char *uuid) {
    if (s->state == 0 || strncmp(s->group, group, sizeof s->group) != 0 ||
        (uuid && strncmp(s->uuid, uuid, sizeof s->uuid) != 0))
        return 0;
    if (!vram__ledger_slot_alive(s)) {
        ledger_free_slot(s);
        return 0;
    }
    return 1;
}

/* ---- limits that move (ledger.h) ------------------------------------------------------------------- */

void vram__ledger_gen_bump(ledger_slot *s) {
    __atomic_add_fetch(&s->limits_gen, 1, __ATOMIC_RELEASE);
    /* a shared futex on the mapped file: a libvram watcher blocked in vram__ledger_gen_wait on this slot wakes
     * (nothing happens when none waits); the kernel reads the word, so a truncated file is EFAULT there */
    syscall(SYS_futex, &s->limits_gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int vram__ledger_gen_wait(const ledger_slot *s, uint32_t seen, int timeout_ms) {
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    long r = syscall(SYS_futex, &s->limits_gen, FUTEX_WAIT, seen, &ts, NULL, 0);
    if (r == 0) return 1;
    return errno == EAGAIN ? 1 : errno == EFAULT ? -1 : 0;
}

uint64_t vram__ledger_limit_in_force(const ledger_slot *s, uint64_t start, uint64_t limit_max, uint64_t card, int *src) {
    uint64_t set = __atomic_load_n(&s->limit_set, __ATOMIC_RELAXED);
    uint64_t cap = __atomic_load_n(&s->group_cap, __ATOMIC_RELAXED);
    if (set && limit_max && set > limit_max) set = limit_max;
    if (set && card && set > card) set = card;
    uint64_t lim = set ? set : start;
    int from = set ? LEDGER_LIMIT_FROM_SET : LEDGER_LIMIT_FROM_START;
    if (cap && (!lim || cap < lim)) {
        lim = cap;
        from = LEDGER_LIMIT_FROM_CAP;
    }
    if (src) *src = from;
    return lim;
}

uint64_t vram__ledger_group_limit_in_force(const ledger_slot *s, uint64_t start, uint64_t group_limit_max) {
    uint64_t set = __atomic_load_n(&s->group_limit_set, __ATOMIC_RELAXED);
    if (set && group_limit_max && set > group_limit_max) set = group_limit_max;
    return set ? set : start;
}

uint64_t vram__ledger_slot_limit(const ledger_slot *s) {
    return vram__ledger_limit_in_force(s, s->limit, s->limit_max, s->card_bytes, NULL);
}

uint64_t vram__ledger_slot_group_limit(const ledger_slot *s) {
    return vram__ledger_group_limit_in_force(s, s->group_limit, s->group_limit_max);
}

uint64_t vram__ledger_group_budget_set_locked(ledger *l, const char *group) {
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &l->slots[i];
        uint64_t set = s->state ? __atomic_load_n(&s->group_limit_set, __ATOMIC_RELAXED) : 0;
        if (set && ledger_member(s, group, NULL)) return set;
    }
    return 0;
}

static uint64_t ledger_sat_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

/* What slot s holds on its card now (0 asleep: in host memory). */
static uint64_t ledger_on_card(const ledger_slot *s) {
    if (__atomic_load_n(&s->sleep, __ATOMIC_RELAXED) == LEDGER_ASLEEP) return 0;
    return __atomic_load_n(&s->in_use, __ATOMIC_RELAXED);
}

uint64_t vram__ledger_group_rebalance_locked(ledger *l, const char *group, const char *uuid, uint64_t budget,
                                       int *opportunistic) {
    uint64_t g = 0, o = 0;
    int n = 0;
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &l->slots[i];
        if (!ledger_member(s, group, uuid)) continue;
        if (s->priority == LEDGER_PRIORITY_OPPORTUNISTIC) o = ledger_sat_add(o, ledger_on_card(s)), n++;
        else g = ledger_sat_add(g, ledger_on_card(s));
    }
    *opportunistic = n;
    if (n == 0) return g;
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        ledger_slot *s = &l->slots[i];
        if (s->state != LEDGER_SLOT_LIVE || s->priority != LEDGER_PRIORITY_OPPORTUNISTIC ||
            strncmp(s->group, group, sizeof s->group) != 0 || strncmp(s->uuid, uuid, sizeof s->uuid) != 0)
            continue;
        uint64_t cap = 0;
        if (g > 0) {
            uint64_t mine = ledger_on_card(s);   /* read again: the owner may have moved it meanwhile */
            uint64_t others = o > mine ? o - mine : 0;
            uint64_t taken = ledger_sat_add(g, others);
            cap = taken >= budget ? 1 : budget - taken;
        }
        if (__atomic_load_n(&s->group_cap, __ATOMIC_RELAXED) != cap) {
            __atomic_store_n(&s->group_cap, cap, __ATOMIC_RELAXED);
            vram__ledger_gen_bump(s);
        }
    }
    return g;
}

int vram__ledger_valid_group(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= LEDGER_NAME_LEN) return 0;
    for (; *name; name++)
        if (!((*name >= '0' && *name <= '9') || (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') ||
              *name == '.' || *name == '_' || *name == '-'))
            return 0;
    return 1;
}

void vram__ledger_copy_name(char *dst, size_t dstlen, const char *src, size_t srclen) {
    size_t i = 0;
    for (; i + 1 < dstlen && i < srclen && src[i]; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[i] = '\0';
}
