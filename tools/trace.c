/*
 * trace.c: reads an allocation trace (traces/README.md) into an array of events.
 *
 *   a <id> <bytes> <stream> <time_us>     allocate
 *   f <id> <time_us>                      free
 *   # comment                             (blank lines are skipped too)
 *
 * gzip input is detected by its magic bytes and decompressed by `gzip -dc FILE` started with
 * posix_spawnp and read through a pipe (no zlib dependency). Ids are arbitrary 64-bit signed
 * integers, mapped to dense slots with an open-addressing hash table. The peak of live requested
 * bytes is computed while reading.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct parser {
    trace      *t;
    const char *path;
    size_t      line;
    /* id -> slot hash table; vals hold slot + 1, 0 marks an empty bucket */
    int64_t    *keys;
    uint32_t   *vals;
    size_t      cap, used;
    /* per slot: requested bytes, and whether it was freed */
    uint64_t   *slot_bytes;
    uint8_t    *slot_freed;
    size_t      slot_cap;
    uint64_t    live;
    char       *err;
    size_t      errlen;
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

/* ---- id -> slot hash table ------------------------------------------------------------------ */

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

/* The slot of `id`, or -1 when the id was never allocated. */
static int64_t table_find(const parser *p, int64_t id) {
    if (!p->cap) return -1;
    size_t b = bucket_of(p, id);
    return p->vals[b] ? (int64_t)p->vals[b] - 1 : -1;
}

static int table_insert(parser *p, int64_t id, uint32_t slot) {
    if ((p->used + 1) * 2 > p->cap && table_grow(p) != 0) return -1;
    size_t b = bucket_of(p, id);
    p->keys[b] = id;
    p->vals[b] = slot + 1;
    p->used++;
    return 0;
}

/* ---- slots and events ----------------------------------------------------------------------- */

static int slot_add(parser *p, uint64_t bytes, uint32_t *slot) {
    if (p->t->num_slots >= UINT32_MAX - 1) return fail(p, "too many allocation ids");
    if (p->t->num_slots == p->slot_cap) {
        size_t cap = p->slot_cap ? p->slot_cap * 2 : 1024;
        uint64_t *b = realloc(p->slot_bytes, cap * sizeof *b);
        if (b) p->slot_bytes = b;
        uint8_t *f = realloc(p->slot_freed, cap * sizeof *f);
        if (f) p->slot_freed = f;
        if (!b || !f) return fail(p, "out of memory");
        p->slot_cap = cap;
    }
    *slot = (uint32_t)p->t->num_slots++;
    p->slot_bytes[*slot] = bytes;
    p->slot_freed[*slot] = 0;
    return 0;
}

static int push_event(parser *p, char kind, uint32_t slot, uint64_t bytes) {
    trace *t = p->t;
    if (t->num_events == t->cap_events) {
        size_t cap = t->cap_events ? t->cap_events * 2 : 4096;
        trace_event *e = realloc(t->events, cap * sizeof *e);
        if (!e) return fail(p, "out of memory");
        t->events = e;
        t->cap_events = cap;
    }
    t->events[t->num_events++] = (trace_event){ .bytes = bytes, .slot = slot, .kind = kind };
    return 0;
}

/* ---- line parsing --------------------------------------------------------------------------- */

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
    uint32_t slot = 0;
    if (slot_add(p, bytes, &slot) || table_insert(p, id, slot)) return -1;
    p->live += bytes;
    if (p->live > p->t->peak_live_bytes) p->t->peak_live_bytes = p->live;
    p->t->num_allocs++;
    return push_event(p, TRACE_ALLOC, slot, bytes);
}

static int parse_free(parser *p, char *rest) {
    char *id_s = next_token(&rest), *time_s = next_token(&rest);
    int64_t id, time_us;
    if (parse_i64(id_s, &id) || parse_i64(time_s, &time_us) || next_token(&rest))
        return fail(p, "malformed free; expected 'f <id> <time_us>'");
    int64_t slot = table_find(p, id);
    if (slot < 0) return fail(p, "free of unknown id %" PRId64, id);
    if (p->slot_freed[slot]) return fail(p, "id %" PRId64 " freed twice", id);
    p->slot_freed[slot] = 1;
    p->live -= p->slot_bytes[slot];
    p->t->num_frees++;
    return push_event(p, TRACE_FREE, (uint32_t)slot, p->slot_bytes[slot]);
}

static int parse_line(parser *p, char *line) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    char *rest = line;
    char *kind = next_token(&rest);
    if (!kind || kind[0] == '#') return 0;
    if (strcmp(kind, "a") == 0) return parse_alloc(p, rest);
    if (strcmp(kind, "f") == 0) return parse_free(p, rest);
    return fail(p, "unknown event '%.32s' (expected 'a', 'f' or '#')", kind);
}

static int read_stream(parser *p, FILE *in) {
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, in) >= 0) {
        p->line++;
        rc = parse_line(p, line);
    }
    free(line);
    if (rc == 0 && ferror(in)) {
        p->line = 0;
        rc = fail(p, "read error: %s", strerror(errno));
    }
    return rc;
}

/* ---- input: plain file or `gzip -dc` -------------------------------------------------------- */

static int is_gzip(FILE *f) {
    unsigned char magic[2];
    int gz = fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    rewind(f);
    return gz;
}

static FILE *spawn_gzip(parser *p, pid_t *pid) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) { fail(p, "pipe: %s", strerror(errno)); return NULL; }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    char *argv[] = { "gzip", "-dc", "--", (char *)p->path, NULL };
    int e = posix_spawnp(pid, "gzip", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    FILE *in = e == 0 ? fdopen(fds[0], "r") : NULL;
    if (!in) {
        close(fds[0]);
        fail(p, "cannot run gzip -dc: %s", strerror(e ? e : errno));
        if (e == 0) waitpid(*pid, NULL, 0);
    }
    return in;
}

static int read_gzip(parser *p) {
    pid_t pid;
    FILE *in = spawn_gzip(p, &pid);
    if (!in) return -1;
    int rc = read_stream(p, in);
    fclose(in);  /* on an early error gzip may die of SIGPIPE: that is fine */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        p->line = 0;
        return WIFEXITED(status) ? fail(p, "gzip -dc failed (exit status %d)", WEXITSTATUS(status))
                                 : fail(p, "gzip -dc killed by signal %d", WTERMSIG(status));
    }
    return rc;
}

static int read_file(parser *p) {
    FILE *f = fopen(p->path, "rb");
    if (!f) return fail(p, "cannot open: %s", strerror(errno));
    int rc;
    if (is_gzip(f)) {
        fclose(f);
        rc = read_gzip(p);
    } else {
        rc = read_stream(p, f);
        fclose(f);
    }
    return rc;
}

int trace_load(const char *path, trace *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    parser p = { .t = out, .path = path, .err = err, .errlen = errlen };
    int rc = read_file(&p);
    free(p.keys); free(p.vals); free(p.slot_bytes); free(p.slot_freed);
    if (rc != 0) trace_release(out);
    return rc;
}

void trace_release(trace *t) {
    free(t->events);
    memset(t, 0, sizeof *t);
}
