/*
 * run.c: `vram run [--devices LIST] [--growth] [--limit SIZE] [--fraction F] [--group NAME
 * [--group-limit SIZE]] [--idle-sleep DURATION] [--log] -- CMD [ARGS]`.
 *
 * Sets, then execvp's CMD:
 *   CUDA_VISIBLE_DEVICES  from --devices (the program's devices are then numbered from 0)
 *   VRAM_LIMIT            from --limit, in bytes: every visible device
 *   VRAM_LIMIT_<i>        from --fraction: F x device <i>'s memory (read with
 *                         vram_list_physical_devices after CUDA_VISIBLE_DEVICES is set), or the
 *                         smaller of that and --limit. --limit or --fraction first clear the
 *                         VRAM_LIMIT* and VRAM_MEMORY_LIMIT* the environment had. The preload
 *                         library and libvram read the same variables (a libvram program under
 *                         vram run enforces the same limit; README, "Environment variables").
 *   VRAM_GROWTH           1 with --growth: memory is taken on demand, nothing up front (an inherited
 *                         VRAM_FORCE_ALLOW_GROWTH, its older name, is cleared). Else 0:
 *                         preallocation, as in the library: the preload library reserves each
 *                         limited device's limit on the card at the program's first allocation
 *                         there (cuMemCreate pieces it gives up as the program allocates and
 *                         takes back as it frees), so a second process cannot take it away; it
 *                         falls back to on demand, with a note, where the driver cannot
 *   VRAM_GROUP            from --group: the name the process is listed under in the ledger (vram
 *                         top); 1-31 of A-Z a-z 0-9 . _ -
 *   VRAM_GROUP_LIMIT      from --group-limit, in bytes (needs --group): the group's processes
 *                         together stay under it on each device (by UUID). --group clears an
 *                         inherited VRAM_GROUP_LIMIT unless --group-limit is given. With a group
 *                         limit the ledger is checked first (run_check_ledger): a ledger directory
 *                         of the user's open to others is set to 0700 (said); a ledger that cannot
 *                         be opened safely (a symlink, another owner's, a file open to others)
 *                         refuses the start with the reason (exit status 1). With or without one,
 *                         a ledger moved from its default place taken by another user (ledger.h,
 *                         "Where") is said on stderr.
 *   VRAM_PRIORITY         from --priority guaranteed|opportunistic (needs --group): the process's
 *                         priority when its group rebalances (shim/group.c)
 *   VRAM_OVERFLOW         from --overflow host|none: allocations the limit or the card refuses go to
 *                         host memory mapped for the device (shim/overflow.c)
 *   VRAM_OVERFLOW_MAX     from --overflow-max SIZE, in bytes (needs --overflow host): its cap per device
 *   VRAM_IDLE_WATCHER     with --idle-sleep DURATION: the idle watcher (shim/watch.h), started just
 *                         before the exec, names itself here (PID:START:NS); CMD and every process
 *                         under it that keeps the variable is put to sleep after DURATION without a
 *                         CUDA call and woken at its next one. When the watcher cannot start (a driver
 *                         without the checkpoint API, no ledger) one line says why and CMD runs
 *                         without idle sleep.
 *   VRAM_LOG              1 with --log: the preload library says on stderr when the limit refused
 *   LD_PRELOAD            the absolute path of libvram_preload.so (next to this binary, in ../lib or
 *                         ../<libdir>), put first
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vram.h>

#include "cli.h"
#include "common/visible.h"
#include "common/common.h"
#include "common/ledger.h"
#include "run.h"
#include "watch.h"

#ifndef VRAM_INSTALL_LIBDIR
#define VRAM_INSTALL_LIBDIR "lib"
#endif

#define RUN_PRELOAD_NAME "libvram_preload.so"

extern char **environ;

typedef struct run_options {
    const char *devices;
    int growth, log;
    int has_limit;
    size_t limit;
    double fraction;   /* 0: not given */
    const char *group;
    int has_group_limit;
    size_t group_limit;
    const char *priority, *overflow;
    int has_overflow_max;
    size_t overflow_max;
    uint64_t idle_ns;  /* --idle-sleep; 0: not given */
} run_options;

__attribute__((format(printf, 1, 2)))
static int run_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vram run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nUsage: vram run [--devices LIST] [--growth] [--limit SIZE] [--fraction F]\n"
          "                [--group NAME [--group-limit SIZE] [--priority guaranteed|opportunistic]]\n"
          "                [--overflow host|none [--overflow-max SIZE]] [--idle-sleep DURATION] [--log]\n"
          "                -- CMD [ARGS]\n"
          "Without --growth the limit is preallocated: reserved on the card at the first allocation,\n"
          "so no other process can take it; --growth takes memory on demand.\n"
          "Try 'vram --help'.\n", stderr);
    return 2;
}

/* A size option's value (NULL: missing) into *out, more than 0; 0, or 2 after saying why. */
static int run_size_arg(const char *name, const char *v, const char *example, size_t *out) {
    if (!v) return run_usage_error("%s needs a SIZE (e.g. %s)", name, example);
    if (cli_size(v, out) != 0) return run_usage_error("%s: bad size '%s' (" CLI_SIZE_HINT ")", name, v);
    return 0;
}

/* A choice of two words (NULL: missing) into *out; 0, or 2 after saying why. */
static int run_choice_arg(const char *name, const char *v, const char *one, const char *other, const char **out) {
    if (!v || (strcmp(v, one) != 0 && strcmp(v, other) != 0))
        return run_usage_error("%s needs %s or %s%s%s%s", name, one, other, v ? " (not '" : "", v ? v : "",
                               v ? "')" : "");
    *out = v;
    return 0;
}

/* The option at argv[*i] when it takes a value (the value moves *i on): 0 (taken), 2 (said why), or 1
 * when it is no such option. */
static int run_value_option(int argc, char **argv, int *i, run_options *o) {
    int missing = 0;
    const char *v;
    if ((v = cli_option_value(argc, argv, i, "--devices", &missing)) || missing) {
        if (!v) return run_usage_error("--devices needs a LIST (e.g. 0,1)");
        if (!vram__visible_valid(v))
            return run_usage_error("--devices: bad LIST '%s' (indices or UUIDs separated by commas)", v);
        o->devices = v;
    } else if ((v = cli_option_value(argc, argv, i, "--limit", &missing)) || missing) {
        if (run_size_arg("--limit", v, "8GiB", &o->limit) != 0) return 2;
        o->has_limit = 1;
    } else if ((v = cli_option_value(argc, argv, i, "--fraction", &missing)) || missing) {
        char *end = NULL;
        if (!v) return run_usage_error("--fraction needs a number F, 0 < F <= 1");
        errno = 0;
        double f = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(f) || f <= 0.0 || f > 1.0)
            return run_usage_error("--fraction: bad number '%s' (0 < F <= 1)", v);
        o->fraction = f;
    } else if ((v = cli_option_value(argc, argv, i, "--group-limit", &missing)) || missing) {
        if (run_size_arg("--group-limit", v, "20GiB", &o->group_limit) != 0) return 2;
        o->has_group_limit = 1;
    } else if ((v = cli_option_value(argc, argv, i, "--priority", &missing)) || missing) {
        return run_choice_arg("--priority", v, "guaranteed", "opportunistic", &o->priority);
    } else if ((v = cli_option_value(argc, argv, i, "--overflow-max", &missing)) || missing) {
        if (run_size_arg("--overflow-max", v, "8GiB", &o->overflow_max) != 0) return 2;
        o->has_overflow_max = 1;
    } else if ((v = cli_option_value(argc, argv, i, "--overflow", &missing)) || missing) {
        return run_choice_arg("--overflow", v, "host", "none", &o->overflow);
    } else if ((v = cli_option_value(argc, argv, i, "--idle-sleep", &missing)) || missing) {
        if (!v) return run_usage_error("--idle-sleep needs a DURATION (e.g. 10m)");
        if (vram__parse_duration(v, &o->idle_ns) != 0)
            return run_usage_error("--idle-sleep: bad DURATION '%s' (a number and ms, s, m, h or d: 30s, 10m, "
                                   "1.5h; at most a year)", v);
    } else if ((v = cli_option_value(argc, argv, i, "--group", &missing)) || missing) {
        if (!v) return run_usage_error("--group needs a NAME");
        if (!vram__ledger_valid_group(v)) return run_usage_error("--group: bad NAME '%s' (1 to 31 of A-Z a-z 0-9 . _ -)", v);
        o->group = v;
    } else {
        return 1;
    }
    return 0;
}

/* Parses the options before CMD; sets *cmd_at to the index of CMD. Returns 0, 2 or -1 (help). */
static int run_parse(int argc, char **argv, run_options *o, int *cmd_at) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return -1;
        if (strcmp(a, "--growth") == 0) { o->growth = 1; continue; }
        if (strcmp(a, "--log") == 0) { o->log = 1; continue; }
        int rc = run_value_option(argc, argv, &i, o);
        if (rc == 2) return 2;
        if (rc == 0) continue;
        if (a[0] == '-' && a[1]) return run_usage_error("unknown option '%s' (put the command after --)", a);
        break;   /* the command */
    }
    if (o->has_group_limit && !o->group) return run_usage_error("--group-limit needs --group NAME");
    if (o->priority && !o->group) return run_usage_error("--priority needs --group NAME");
    if (o->has_overflow_max && !(o->overflow && strcmp(o->overflow, "host") == 0))
        return run_usage_error("--overflow-max needs --overflow host");
    if (i >= argc) return run_usage_error("missing CMD");
    *cmd_at = i;
    return 0;
}

/* The absolute path of libvram_preload.so next to this binary, in ../lib or ../<libdir>; 0 when found. */
static int run_find_preload(char *out, size_t len, char *dir, size_t dir_len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    snprintf(dir, dir_len, "%s", exe);
    const char *rel[] = { "", "/../lib", "/../" VRAM_INSTALL_LIBDIR };
    for (size_t k = 0; k < sizeof rel / sizeof rel[0]; k++) {
        char candidate[PATH_MAX + 64];
        snprintf(candidate, sizeof candidate, "%s%s/" RUN_PRELOAD_NAME, exe, rel[k]);
        char resolved[PATH_MAX];
        if (access(candidate, R_OK) == 0 && realpath(candidate, resolved)) {
            snprintf(out, len, "%s", resolved);
            return 0;
        }
    }
    return -1;
}

/* Clears VRAM_LIMIT and every VRAM_LIMIT_<i> inherited from the environment (not VRAM_LIMIT_MAX), and
 * their older names VRAM_MEMORY_LIMIT(_<i>), which the library and the preload library also read. */
static void run_clear_limits(void) {
    for (;;) {
        char name[64] = "";
        for (char **e = environ; e && *e; e++) {
            const char *v = strncmp(*e, "VRAM_MEMORY_LIMIT", 17) == 0 ? *e + 17
                          : strncmp(*e, "VRAM_LIMIT", 10) == 0 ? *e + 10 : NULL;
            if (v && (*v == '=' || *v == '_') &&
                strncmp(*e, "VRAM_LIMIT_MAX=", 15) != 0) {   /* a ceiling (the Slurm plugin's) stays */
                size_t n = strcspn(*e, "=");
                if (n < sizeof name) { memcpy(name, *e, n); name[n] = '\0'; }
                break;
            }
        }
        if (!name[0]) return;
        unsetenv(name);
    }
}

static int run_set_size(const char *name, size_t bytes) {
    char v[32];
    snprintf(v, sizeof v, "%zu", bytes);
    return setenv(name, v, 1);
}

/* VRAM_LIMIT_<i> = F x the memory of each visible device (the smaller of that and --limit). */
static int run_set_fraction(const run_options *o) {
    int n = 0;
    vram_status s = vram_list_physical_devices(NULL, 0, &n);
    if (s != VRAM_OK || n <= 0) {
        fprintf(stderr, "vram run: --fraction needs the devices' memory: %s\n",
                s == VRAM_OK ? "no device" : vram_last_error());
        return 1;
    }
    vram_physical_device *devs = calloc((size_t)n, sizeof *devs);
    if (!devs) { fputs("vram run: out of memory\n", stderr); return 1; }
    int count = n;
    if ((s = vram_list_physical_devices(devs, n, &count)) != VRAM_OK) {
        fprintf(stderr, "vram run: --fraction needs the devices' memory: %s\n", vram_last_error());
        free(devs);
        return 1;
    }
    for (int i = 0; i < count && i < n; i++) {
        size_t bytes = (size_t)floor(o->fraction * (double)devs[i].total_bytes);
        if (o->has_limit && o->limit < bytes) bytes = o->limit;
        if (bytes == 0) {
            fprintf(stderr, "vram run: --fraction %g of device %d (%zu bytes) is 0 bytes\n", o->fraction,
                    devs[i].index, devs[i].total_bytes);
            free(devs);
            return 1;
        }
        char name[32];
        snprintf(name, sizeof name, "VRAM_LIMIT_%d", devs[i].index);
        run_set_size(name, bytes);
    }
    free(devs);
    return 0;
}

/* LD_PRELOAD with `lib` first (not repeated when it is already there). */
static int run_set_preload(const char *lib) {
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old) return setenv("LD_PRELOAD", lib, 1);
    size_t n = strlen(lib);
    if (strncmp(old, lib, n) == 0 && (old[n] == '\0' || old[n] == ':' || old[n] == ' ')) return 0;
    size_t len = n + 1 + strlen(old) + 1;
    char *v = malloc(len);
    if (!v) return -1;
    snprintf(v, len, "%s:%s", lib, old);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* A group limit is shared through the ledger: before the program starts, its directory's mode is
 * repaired when that is safe (a directory of this user open to others: set to 0700, said), and the
 * ledger is opened; when it cannot be opened safely (the directory or a file a symlink, another
 * owner's, a file open to others) the program is not started and the reason is said. 0 to go on. */
static int run_check_ledger(const char *cmd) {
    char said[PATH_MAX + 128], err[512];
    int r = vram__ledger_repair_dir(said, sizeof said);
    if (r > 0) fprintf(stderr, "vram run: %s\n", said);
    ledger l;
    if (vram__ledger_open(&l, err, sizeof err) != 0) {
        fprintf(stderr, "vram run: not starting '%s': its group limit needs the ledger, which cannot be opened "
                "safely: %s (remove or fix it; vram makes a new one)\n", cmd, err);
        return 1;
    }
    if (l.rebuilt[0]) fprintf(stderr, "vram run: the ledger %s\n", l.rebuilt);
    if (l.note[0]) fprintf(stderr, "vram run: %s\n", l.note);
    vram__ledger_close(&l);
    return 0;
}

/* Without a group limit the ledger only lists the program (the preload library opens it): where it is
 * is said when its default place is another user's. */
static void run_note_ledger(void) {
    char dir[PATH_MAX], note[2 * PATH_MAX], err[PATH_MAX + 256];
    if (vram__ledger_place(dir, sizeof dir, 0, note, sizeof note, err, sizeof err) == 0 && note[0])
        fprintf(stderr, "vram run: %s\n", note);
}

/* --idle-sleep: the idle watcher (shim/watch.h) started, VRAM_IDLE_WATCHER set for the program; when it
 * cannot start (no checkpoint API, no ledger) that is said in one line and the program runs without idle
 * sleep. -1 only when the environment cannot be set. */
static int run_start_watcher(uint64_t idle_ns) {
    char env[96], err[PATH_MAX + 600];
    if (watch_start(idle_ns, NULL, env, sizeof env, err, sizeof err) != 0) {
        fprintf(stderr, "vram run: --idle-sleep is off: %s\n", err);
        return 0;
    }
    return setenv("VRAM_IDLE_WATCHER", env, 1);
}

int run_main(int argc, char **argv) {
    run_options o = { 0 };
    int cmd_at = 0;
    int rc = run_parse(argc, argv, &o, &cmd_at);
    if (rc != 0) return rc;

    char lib[PATH_MAX], dir[PATH_MAX];
    if (run_find_preload(lib, sizeof lib, dir, sizeof dir) != 0) {
        fprintf(stderr, "vram run: cannot find " RUN_PRELOAD_NAME " next to the vram binary (%s) or in "
                "%s/../lib; build the vram_preload target or reinstall vram\n", dir, dir);
        return 1;
    }
    if (o.devices && setenv("CUDA_VISIBLE_DEVICES", o.devices, 1) != 0) goto env_failed;
    if (o.has_limit || o.fraction > 0) run_clear_limits();
    if (o.has_limit && run_set_size("VRAM_LIMIT", o.limit) != 0) goto env_failed;
    if (o.fraction > 0 && (rc = run_set_fraction(&o)) != 0) return rc;
    if (setenv("VRAM_GROWTH", o.growth ? "1" : "0", 1) != 0 || unsetenv("VRAM_FORCE_ALLOW_GROWTH") != 0)
        goto env_failed;   /* (its older name, which would disagree) */
    if (o.log && setenv("VRAM_LOG", "1", 1) != 0) goto env_failed;
    if (o.priority && setenv("VRAM_PRIORITY", o.priority, 1) != 0) goto env_failed;
    if (o.overflow && setenv("VRAM_OVERFLOW", o.overflow, 1) != 0) goto env_failed;
    if (o.overflow && (o.has_overflow_max ? run_set_size("VRAM_OVERFLOW_MAX", o.overflow_max) != 0
                                          : unsetenv("VRAM_OVERFLOW_MAX") != 0))
        goto env_failed;
    if (o.group) {
        if (setenv("VRAM_GROUP", o.group, 1) != 0) goto env_failed;
        if (o.has_group_limit ? run_set_size("VRAM_GROUP_LIMIT", o.group_limit) != 0
                              : unsetenv("VRAM_GROUP_LIMIT") != 0)
            goto env_failed;
    }
    const char *glimit = getenv("VRAM_GROUP_LIMIT");   /* from --group-limit, or inherited without --group */
    if (glimit && *glimit) {
        if (run_check_ledger(argv[cmd_at]) != 0) return 1;
    } else {
        run_note_ledger();
    }
    if (run_set_preload(lib) != 0) goto env_failed;
    if (o.idle_ns && run_start_watcher(o.idle_ns) != 0) goto env_failed;
    fflush(NULL);
    execvp(argv[cmd_at], argv + cmd_at);
    int err = errno;
    fprintf(stderr, "vram run: cannot run '%s': %s\n", argv[cmd_at], strerror(err));
    return err == ENOENT ? 127 : 126;

env_failed:
    fprintf(stderr, "vram run: cannot set the environment: %s\n", strerror(errno));
    return 1;
}
