/*
 * trace.c: reads an allocation trace (traces/README.md) into an array of events.
 *
 *   a <id> <bytes> <stream> <time_us>     allocate
 *   f <id> <time_us>                      free
 *   # comment                             (blank lines are skipped too)
 *
 * gzip input is detected by its magic bytes and decompressed by `gzip -dc` started with
 * posix_spawnp and read through a pipe (no zlib dependency); gzip's own complaint is caught and
 * given back as one line. A regular file is opened by path (gzip reads it itself); standard input
 * ("-"), a pipe or a FIFO is never sought: its first bytes are read to sniff the magic, and a
 * feeder thread writes them and the rest of the stream into a pipe that gzip (or the parser)
 * reads. Ids are arbitrary 64-bit signed integers, mapped to dense allocation numbers with an
 * open-addressing hash table. The peak of live requested bytes is computed while reading.
 *
 * Detail (trace_load_detail, for `vram report`): each event's time_us (and the earliest and the
 * latest: times are any int64, in any order), each allocation's id, and two
 * kinds of comment lines that other readers skip: "# frames <id> F1<TAB>F2..." (the stack of an
 * allocation, after its 'a' line) and "# reserved <bytes>" (the recording allocator's reserved
 * bytes from here on; tools/snapshot_to_trace.py writes both).
 *
 * Threads: the caller's, plus the feeder for a stream (it owns only its pipe's write end and is
 * joined, or cancelled and joined, before trace_load returns).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct parser {
    trace      *t;
    const char *path;
    size_t      line;          /* lines read so far (the one being parsed) */
    int         partial;       /* the last line read had no newline: the input ended, or failed, there */
    /* id -> allocation number hash table; vals hold the number + 1, 0 marks an empty bucket */
    int64_t    *keys;
    uint32_t   *vals;
    size_t      cap, used;
    /* per allocation number: requested bytes, and whether it was freed */
    uint64_t   *alloc_bytes;
    uint8_t    *alloc_freed;
    size_t      alloc_cap;
    uint64_t    live;
    char       *err;
    size_t      errlen;
    /* detail (trace_load_detail): t->detail is set; arrays grow with events and allocations */
    size_t      time_cap, id_cap, rec_cap;
    uint64_t    rec_now;        /* the last "# reserved" value */
    int         has_rec;
} parser;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(parser *p, const char *fmt, ...) {
    int n = p->line ? snprintf(p->err, p->errlen, "%s:%zu: ", p->path, p->line)
                    : snprintf(p->err, p->errlen, "%s: ", p->path);
    if (n < 0 || (size_t)n >= p->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- id -> allocation number hash table ------------------------------------------------------ */

static uint64_t mix(uint64_t x) {  /* splitmix64 finaliser */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static size_t bucket_of(const parser *p, int64_t id) {
    size_t mask = p->cap - 1, b = (size_t)mix((uint64_t)id) & mask;
    while (p->vals[b] && p->keys[b] != id) b = (b + 1) & mask;
    return b;
}

static int table_grow(parser *p) {
    size_t old_cap = p->cap, cap = old_cap ? old_cap * 2 : 1024;
    int64_t *old_keys = p->keys;
    uint32_t *old_vals = p->vals;
    p->keys = malloc(cap * sizeof *p->keys);
    p->vals = calloc(cap, sizeof *p->vals);
    if (!p->keys || !p->vals) {
        free(p->keys); free(p->vals);
        p->keys = old_keys; p->vals = old_vals;
        return fail(p, "out of memory");
    }
    p->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old_vals[i]) continue;
        size_t b = bucket_of(p, old_keys[i]);
        p->keys[b] = old_keys[i];
        p->vals[b] = old_vals[i];
    }
    free(old_keys); free(old_vals);
    return 0;
}

/* The allocation number of `id`, or -1 when the id was never allocated. */
static int64_t table_find(const parser *p, int64_t id) {
    if (!p->cap) return -1;
    size_t b = bucket_of(p, id);
    return p->vals[b] ? (int64_t)p->vals[b] - 1 : -1;
}

static int table_insert(parser *p, int64_t id, uint32_t a) {
    if ((p->used + 1) * 2 > p->cap && table_grow(p) != 0) return -1;
    size_t b = bucket_of(p, id);
    p->keys[b] = id;
    p->vals[b] = a + 1;
    p->used++;
    return 0;
}

/* ---- allocations and events ------------------------------------------------------------------ */

static int alloc_add(parser *p, uint64_t bytes, uint32_t *a) {
    if (p->t->num_allocs >= UINT32_MAX - 1) return fail(p, "too many allocation ids");
    if (p->t->num_allocs == p->alloc_cap) {
        size_t cap = p->alloc_cap ? p->alloc_cap * 2 : 1024;
        uint64_t *b = realloc(p->alloc_bytes, cap * sizeof *b);
        if (b) p->alloc_bytes = b;
        uint8_t *f = realloc(p->alloc_freed, cap * sizeof *f);
        if (f) p->alloc_freed = f;
        if (!b || !f) return fail(p, "out of memory");
        p->alloc_cap = cap;
    }
    *a = (uint32_t)p->t->num_allocs;   /* counted by parse_alloc */
    p->alloc_bytes[*a] = bytes;
    p->alloc_freed[*a] = 0;
    return 0;
}

/* Grows a detail array of `elem`-byte items to hold index `n`; new items zeroed. */
static int detail_room(parser *p, void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 4096;
    while (c <= n) c *= 2;
    char *a = realloc(*arr, c * elem);
    if (!a) return fail(p, "out of memory");
    memset(a + *cap * elem, 0, (c - *cap) * elem);
    *arr = a;
    *cap = c;
    return 0;
}

static int detail_alloc(parser *p, uint32_t a, int64_t id) {
    trace_detail *d = p->t->detail;
    size_t cap = p->id_cap;
    if (detail_room(p, (void **)&d->ids, &cap, a, sizeof *d->ids)) return -1;
    cap = p->id_cap;
    if (detail_room(p, (void **)&d->frames, &cap, a, sizeof *d->frames)) return -1;
    p->id_cap = cap;
    d->alloc_cap = cap;
    d->ids[a] = id;
    return 0;
}

static int detail_event(parser *p, size_t index, int64_t time_us) {
    trace_detail *d = p->t->detail;
    if (detail_room(p, (void **)&d->time_us, &p->time_cap, index, sizeof *d->time_us)) return -1;
    d->time_us[index] = time_us;
    if (index == 0 || time_us < d->time_min_us) d->time_min_us = time_us;
    if (index == 0 || time_us > d->time_max_us) d->time_max_us = time_us;
    if (p->has_rec) {
        if (detail_room(p, (void **)&d->recorded_reserved, &p->rec_cap, index, sizeof(uint64_t))) return -1;
        d->recorded_reserved[index] = p->rec_now;
    }
    return 0;
}

static int push_event(parser *p, char kind, uint32_t a, uint64_t bytes) {
    trace *t = p->t;
    if (t->num_events == t->cap_events) {
        size_t cap = t->cap_events ? t->cap_events * 2 : 4096;
        trace_event *e = realloc(t->events, cap * sizeof *e);
        if (!e) return fail(p, "out of memory");
        t->events = e;
        t->cap_events = cap;
    }
    t->events[t->num_events++] = (trace_event){ .bytes = bytes, .alloc = a, .kind = kind };
    return 0;
}

/* ---- line parsing ---------------------------------------------------------------------------- */

static char *next_token(char **cursor) {
    char *s = *cursor;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) { *cursor = s; return NULL; }
    char *start = s;
    while (*s && *s != ' ' && *s != '\t') s++;
    if (*s) *s++ = '\0';
    *cursor = s;
    return start;
}

static int parse_u64(const char *s, uint64_t *v) {
    if (!s || *s < '0' || *s > '9') return -1;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

static int parse_i64(const char *s, int64_t *v) {
    if (!s) return -1;
    int neg = (*s == '-');
    uint64_t m;
    if (parse_u64(s + neg, &m) != 0) return -1;
    if (neg ? m > (uint64_t)INT64_MAX + 1 : m > (uint64_t)INT64_MAX) return -1;
    *v = neg ? (int64_t)(0 - m) : (int64_t)m;
    return 0;
}

static int parse_alloc(parser *p, char *rest) {
    char *id_s = next_token(&rest), *bytes_s = next_token(&rest);
    char *stream_s = next_token(&rest), *time_s = next_token(&rest);
    int64_t id, stream, time_us;
    uint64_t bytes;
    if (parse_i64(id_s, &id) || parse_u64(bytes_s, &bytes) || parse_i64(stream_s, &stream) ||
        parse_i64(time_s, &time_us) || next_token(&rest))
        return fail(p, "malformed alloc; expected 'a <id> <bytes> <stream> <time_us>'");
    if (table_find(p, id) >= 0) return fail(p, "id %" PRId64 " allocated twice", id);
    if (p->live > UINT64_MAX - bytes) return fail(p, "live bytes overflow 64 bits");
    uint32_t a = 0;
    if (alloc_add(p, bytes, &a) || table_insert(p, id, a)) return -1;
    p->live += bytes;
    if (p->live > p->t->peak_live_bytes) p->t->peak_live_bytes = p->live;
    p->t->num_allocs++;
    if (p->t->detail && (detail_alloc(p, a, id) || detail_event(p, p->t->num_events, time_us))) return -1;
    return push_event(p, TRACE_ALLOC, a, bytes);
}

static int parse_free(parser *p, char *rest) {
    char *id_s = next_token(&rest), *time_s = next_token(&rest);
    int64_t id, time_us;
    if (parse_i64(id_s, &id) || parse_i64(time_s, &time_us) || next_token(&rest))
        return fail(p, "malformed free; expected 'f <id> <time_us>'");
    int64_t a = table_find(p, id);
    if (a < 0) return fail(p, "free of unknown id %" PRId64, id);
    if (p->alloc_freed[a]) return fail(p, "id %" PRId64 " freed twice", id);
    p->alloc_freed[a] = 1;
    p->live -= p->alloc_bytes[a];
    p->t->num_frees++;
    if (p->t->detail && detail_event(p, p->t->num_events, time_us)) return -1;
    return push_event(p, TRACE_FREE, (uint32_t)a, p->alloc_bytes[a]);
}

/* "# reserved <bytes>" and "# frames <id> <text>" (detail only; other comments are skipped). */
static int parse_detail_comment(parser *p, char *rest) {
    char *what = next_token(&rest);
    if (!what) return 0;
    if (strcmp(what, "reserved") == 0) {
        uint64_t v;
        if (parse_u64(next_token(&rest), &v) != 0) return 0;   /* a comment like any other */
        if (!p->has_rec && p->t->num_events > 0) {   /* earlier events: 0 reserved as far as we know */
            if (detail_room(p, (void **)&p->t->detail->recorded_reserved, &p->rec_cap, p->t->num_events,
                            sizeof(uint64_t))) return -1;
        }
        p->has_rec = 1;
        p->rec_now = v;
        return 0;
    }
    if (strcmp(what, "frames") == 0) {
        int64_t id;
        if (parse_i64(next_token(&rest), &id) != 0) return 0;
        int64_t a = table_find(p, id);
        if (a < 0 || p->t->detail->frames[a]) return 0;   /* not (yet) allocated: ignored */
        while (*rest == ' ') rest++;
        if (!(p->t->detail->frames[a] = strdup(rest))) return fail(p, "out of memory");
    }
    return 0;
}

/* `s` with bytes that are not printable ASCII as \xHH (at most `max` input bytes), for messages. */
static const char *printable(const char *s, size_t max, char *buf, size_t len) {
    size_t o = 0;
    for (size_t i = 0; s[i] && i < max && o + 5 < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) buf[o++] = (char)c;
        else o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
    }
    buf[o] = '\0';
    return buf;
}

static int parse_line(parser *p, char *line, size_t n) {
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    if (memchr(line, '\0', n)) return fail(p, "binary data (a NUL byte): not a trace");
    char *rest = line;
    char *kind = next_token(&rest);
    if (!kind) return 0;
    if (kind[0] == '#') return p->t->detail && kind[1] == '\0' ? parse_detail_comment(p, rest) : 0;
    if (strcmp(kind, "a") == 0) return parse_alloc(p, rest);
    if (strcmp(kind, "f") == 0) return parse_free(p, rest);
    char shown[160];
    return fail(p, "unknown event '%s' (expected 'a', 'f' or '#')", printable(kind, 32, shown, sizeof shown));
}

/* The line where reading stopped: the last one read when it had no newline (cut short), else the next. */
static size_t stop_line(const parser *p) { return p->partial ? p->line : p->line + 1; }

/* "PATH:LINE: what: reason" for the line that could not be read whole. */
static int read_fail(parser *p, const char *what, int err) {
    p->line = stop_line(p);
    return fail(p, "%s: %s", what, strerror(err));
}

/* Reads and parses every line of `in`. A line that cannot be read whole is an error naming it: getline
 * failing without end of file (out of memory for a long line), a read error (ferror), or the source
 * behind the pipe failing (*src_err, set by a feeder before it closes the pipe: its end of file is
 * then no end of the trace). Without this the trace would silently end at that line. */
static int read_stream(parser *p, FILE *in, const atomic_int *src_err) {
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        ssize_t n = getline(&line, &cap, in);
        int e = errno, src = src_err ? atomic_load(src_err) : 0;
        if (n < 0) {
            if (e == ENOMEM || (!feof(in) && !ferror(in))) rc = read_fail(p, "cannot read the line", e ? e : ENOMEM);
            else if (ferror(in)) rc = read_fail(p, "read error", e ? e : EIO);
            else if (src) rc = read_fail(p, "read error", src);
            break;
        }
        p->line++;
        p->partial = n == 0 || line[n - 1] != '\n';
        if (p->partial && (ferror(in) || src)) {   /* the half of a line that a failed read left */
            rc = read_fail(p, "read error", ferror(in) ? (e ? e : EIO) : src);
            break;
        }
        if ((rc = parse_line(p, line, (size_t)n)) != 0) break;
    }
    free(line);
    return rc;
}

/* ---- input: a file, standard input or a pipe; plain or `gzip -dc` ---------------------------- */

/* Copies `prefix` and then everything of `src` into `dst` (a pipe), then closes dst. SIGPIPE is
 * blocked in this thread, so a reader that stops early makes write fail with EPIPE instead. A read of
 * src that fails sets `err` (its errno) before dst is closed, so that the reader, at the end of file
 * this close makes, knows the trace was cut. */
typedef struct feeder {
    int           src, dst;
    unsigned char prefix[2];
    size_t        nprefix;
    pthread_t     tid;
    int           running;
    atomic_int    err;
} feeder;

static int write_all(int fd, const unsigned char *b, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void feeder_close(void *arg) { close(((feeder *)arg)->dst); }

static void *feeder_main(void *arg) {
    feeder *fd = arg;
    pthread_cleanup_push(feeder_close, fd);
    sigset_t pipe_sig;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_sig, NULL);
    unsigned char buf[65536];
    if (write_all(fd->dst, fd->prefix, fd->nprefix) == 0) {
        for (;;) {
            ssize_t r = read(fd->src, buf, sizeof buf);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) atomic_store(&fd->err, errno ? errno : EIO);
            if (r <= 0 || write_all(fd->dst, buf, (size_t)r) != 0) break;
        }
    }
    pthread_cleanup_pop(1);
    return NULL;
}

/* Starts a feeder; returns the read end of its pipe, or -1. */
static int feeder_start(parser *p, feeder *fd) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return fail(p, "pipe: %s", strerror(errno));
    fd->dst = fds[1];
    int e = pthread_create(&fd->tid, NULL, feeder_main, fd);
    if (e != 0) {
        close(fds[0]);
        close(fds[1]);
        return fail(p, "cannot start a thread: %s", strerror(e));
    }
    fd->running = 1;
    return fds[0];
}

/* Stops the feeder (it may be blocked reading a terminal or a slow pipe) and joins it. */
static void feeder_stop(feeder *fd) {
    if (!fd->running) return;
    pthread_cancel(fd->tid);
    pthread_join(fd->tid, NULL);
    fd->running = 0;
}

/* One line of what gzip said on stderr (captured through `errfd`), for the message. */
static void gzip_complaint(int errfd, char *buf, size_t len) {
    ssize_t n = read(errfd, buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    char *first = buf + strspn(buf, "\n\r ");   /* gzip 1.12 starts "unexpected end of file" with a newline */
    char *nl = strchr(first, '\n');
    if (nl) *nl = '\0';
    char shown[512];
    snprintf(buf, len, "%s", printable(first, 120, shown, sizeof shown));
}

/* Runs `gzip -dc` on `path` (NULL: on `in_fd`, its standard input, fed by a feeder whose source
 * failing sets *src_err) and parses its output. gzip starts with SIGPIPE at its default whatever
 * this process inherited, so that when the parser stops early gzip dies of it rather than fail
 * with "Broken pipe" (which would read as broken data). */
static int read_gzip(parser *p, const char *path, int in_fd, const atomic_int *src_err) {
    int out[2], errp[2];
    if (pipe2(out, O_CLOEXEC) != 0) return fail(p, "pipe: %s", strerror(errno));
    if (pipe2(errp, O_CLOEXEC | O_NONBLOCK) != 0) {
        close(out[0]); close(out[1]);
        return fail(p, "pipe: %s", strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!path) posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, errp[1], STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t pipe_sig;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &pipe_sig);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    char *argv_path[] = { "gzip", "-dc", "--", (char *)path, NULL }, *argv_stdin[] = { "gzip", "-dc", NULL };
    pid_t pid;
    int e = posix_spawnp(&pid, "gzip", &fa, &attr, path ? argv_path : argv_stdin, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(out[1]);
    close(errp[1]);
    FILE *in = e == 0 ? fdopen(out[0], "r") : NULL;
    if (!in) {
        close(out[0]);
        close(errp[0]);
        if (e == 0) waitpid(pid, NULL, 0);
        return fail(p, "cannot run gzip -dc: %s", strerror(e ? e : errno));
    }
    int rc = read_stream(p, in, NULL);
    fclose(in);  /* on an early error gzip may die of SIGPIPE: that is fine */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    char said[512];
    gzip_complaint(errp[0], said, sizeof said);
    close(errp[0]);
    int failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int src = src_err ? atomic_load(src_err) : 0;
    /* The source behind gzip failing (gzip only saw its data end), or gzip failing (a truncated file
     * ends in half a line), wins over a parse error, which is then of the half line they left; gzip
     * killed by the SIGPIPE of an early stop does not. The message names the line where the text
     * stopped. */
    if (rc != 0 && (src || (WIFEXITED(status) && WEXITSTATUS(status) != 0))) {
        rc = 0;
        p->partial = 1;
    }
    if (rc == 0 && src) return read_fail(p, "read error", src);
    if (rc == 0 && failed) {
        p->line = stop_line(p);
        if (!WIFEXITED(status)) return fail(p, "gzip -dc killed by signal %d", WTERMSIG(status));
        const char *colon = strrchr(said, ':');   /* "gzip: FILE: unexpected end of file" */
        return fail(p, "broken gzip data (gzip -dc: %s)", colon && colon[1] ? colon + 2 : said[0] ? said : "failed");
    }
    return rc;
}

/* Reads up to 2 bytes (the gzip magic) without seeking; a read that fails sets *err (its errno). */
static size_t sniff(int fd, unsigned char magic[2], int *err) {
    size_t got = 0;
    *err = 0;
    while (got < 2) {
        ssize_t r = read(fd, magic + got, 2 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) *err = errno ? errno : EIO;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

static int is_gzip_magic(const unsigned char *m, size_t n) { return n == 2 && m[0] == 0x1f && m[1] == 0x8b; }

/* Standard input, a pipe or a FIFO: sniffed, then fed through a pipe to gzip or the parser. */
static int read_pipe(parser *p, int src) {
    feeder fd = { .src = src };
    int err;
    fd.nprefix = sniff(src, fd.prefix, &err);
    if (err) return read_fail(p, "read error", err);
    int gz = is_gzip_magic(fd.prefix, fd.nprefix);
    int rd = feeder_start(p, &fd);
    if (rd < 0) return -1;
    int rc;
    if (gz) {
        rc = read_gzip(p, NULL, rd, &fd.err);
        close(rd);
    } else {
        FILE *in = fdopen(rd, "r");
        if (!in) {
            close(rd);
            rc = fail(p, "fdopen: %s", strerror(errno));
        } else {
            rc = read_stream(p, in, &fd.err);
            fclose(in);
        }
    }
    feeder_stop(&fd);
    return rc;
}

static int read_input(parser *p) {
    int is_stdin = strcmp(p->path, "-") == 0;
    int fd = is_stdin ? STDIN_FILENO : open(p->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(p, "cannot open: %s", strerror(errno));
    struct stat st;
    int rc;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = fail(p, "is a directory, not a trace");
    } else if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && !is_stdin) {
        unsigned char magic[2];
        int err, gz = is_gzip_magic(magic, sniff(fd, magic, &err));
        if (err) {
            rc = read_fail(p, "read error", err);
        } else if (gz) {
            rc = read_gzip(p, p->path, -1, NULL);
        } else if (lseek(fd, 0, SEEK_SET) != 0) {
            rc = fail(p, "cannot seek: %s", strerror(errno));
        } else {
            FILE *in = fdopen(fd, "r");
            if (!in) return close(fd), fail(p, "fdopen: %s", strerror(errno));
            rc = read_stream(p, in, NULL);
            fclose(in);
            return rc;
        }
    } else {
        rc = read_pipe(p, fd);
    }
    if (!is_stdin) close(fd);
    return rc;
}

static int load(const char *path, trace *out, int detail, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    parser p = { .t = out, .path = strcmp(path, "-") == 0 ? "-" : path, .err = err, .errlen = errlen };
    if (detail && !(out->detail = calloc(1, sizeof *out->detail))) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = read_input(&p);
    if (rc == 0 && detail && p.has_rec && out->num_events > 0 &&
        detail_room(&p, (void **)&out->detail->recorded_reserved, &p.rec_cap, out->num_events - 1,
                    sizeof(uint64_t)) != 0)
        rc = -1;
    free(p.keys); free(p.vals); free(p.alloc_bytes); free(p.alloc_freed);
    if (rc != 0) trace_release(out);
    return rc;
}

int trace_load(const char *path, trace *out, char *err, size_t errlen) {
    return load(path, out, 0, err, errlen);
}

int trace_load_detail(const char *path, trace *out, char *err, size_t errlen) {
    return load(path, out, 1, err, errlen);
}

void trace_release(trace *t) {
    free(t->events);
    if (t->detail) {
        for (size_t i = 0; t->detail->frames && i < t->detail->alloc_cap; i++) free(t->detail->frames[i]);
        free(t->detail->time_us);
        free(t->detail->ids);
        free(t->detail->frames);
        free(t->detail->recorded_reserved);
        free(t->detail);
    }
    memset(t, 0, sizeof *t);
}
