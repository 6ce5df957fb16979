/*
 * env.c: what the shim reads from the environment, and the process state g it fills. Owns g's
 * definition, the reading of the variables below (once, at the first interposed call or at an NVML
 * query of a program that has not loaded CUDA, which must not load it: see nvml.c), the line
 * VRAM_LOG=1 prints when the driver is loaded, and what a fork child resets.
 *
 *   VRAM_LIMIT=SIZE        every device; VRAM_LIMIT_<i>=SIZE device <i> as the program numbers it
 *                          (after CUDA_VISIBLE_DEVICES), winning over VRAM_LIMIT. The library's older
 *                          names VRAM_MEMORY_LIMIT and VRAM_MEMORY_LIMIT_<i> are read where the new
 *                          one is unset (both set to different sizes fails closed, said); VRAM_GROWTH's
 *                          older name is VRAM_FORCE_ALLOW_GROWTH (vram__getenv_either). Sizes as everywhere
 *                          in vram ("1073741824", "6GiB", "1.5G": vram_parse_size of src/common). A
 *                          value that is no size, or is 0 bytes (one that rounds to nothing, "0.4"
 *                          or "0.5B", included), fails closed: every allocation is refused, said by
 *                          name (a limit never silently drops; unset is no limit, as in the library).
 *   VRAM_GROWTH=BOOL       false (0, no, off; `vram run` without --growth): preallocation (balloon.c);
 *                          unset or true: memory on demand.
 *   VRAM_LOG=BOOL          true (1, yes, on; --log): the shim says on stderr why it refused.
 *                          Booleans as the library reads its own (vram__parse_bool); another value
 *                          is ignored, said on stderr.
 *   VRAM_GROUP=NAME, VRAM_GROUP_LIMIT=SIZE   group.c; a group limit without a valid group limits
 *                          the process alone; VRAM_GROUP_LIMIT fails closed as VRAM_LIMIT does.
 *   VRAM_IDLE_WATCHER=PID:START:NS   the idle watcher of vram run --idle-sleep (activity.c,
 *                          shim/watch.c), set by vram run and the Slurm plugin.
 *   VRAM_LIMIT_MAX=SIZE, VRAM_GROUP_LIMIT_MAX=SIZE   the most a limit (a group budget) set from
 *                          outside by `vram limit` may be (the Slurm plugin sets them to its limit:
 *                          a ceiling); unset, the card. Malformed: said, and the start limit is the
 *                          ceiling (never none).
 *   VRAM_PRIORITY=guaranteed|opportunistic   the process's priority in its group (group.c); another
 *                          value is said and taken as guaranteed (the default).
 *   VRAM_OVERFLOW=host|none, VRAM_OVERFLOW_MAX=SIZE   overflow to host memory (overflow.c) and its cap
 *                          per device (default: the device's start limit, else its card; 0: none).
 *
 * Invariants: every field set here is written once, under shim_env_once, before any accounted call
 * reads it (the fast paths read it without a lock). The fork handlers take every lock of the shim
 * in its order (balloon_mu, ledger_mu, g.mu; held.c registers its own for held_mu, which comes
 * first) so that the child inherits none held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

shim_state g = { .mu = PTHREAD_MUTEX_INITIALIZER, .ledger_mu = PTHREAD_MUTEX_INITIALIZER,
                 .balloon_mu = PTHREAD_MUTEX_INITIALIZER, .shadow_fd = -1, .activity_fd = -1 };

/* ---- the variables --------------------------------------------------------------------------- */

/* A limit variable that is not a size, or one of 0 bytes (a size that rounds to nothing, "0.4" or
 * "0.5B", included): nothing is allowed then (a limit never silently drops; as in the library,
 * leaving the variable unset is how to have no limit). */
static void shim_malformed(const char *name, const char *value, int zero) {
    if (!g.malformed[0]) snprintf(g.malformed, sizeof g.malformed, "%s='%.80s' is not a size", name, value);
    if (zero)
        fprintf(stderr, "vram: %s='%s' is 0 bytes: a limit must be larger than zero (unset the variable for no "
                "limit): every allocation is refused\n", name, value);
    else
        fprintf(stderr, "vram: %s='%s' is not a size (bytes, or a number with K, M, G or T, e.g. 6GiB): every "
                "allocation is refused\n", name, value);
}

/* The size of limit variable `name`; 0 (said, every allocation refused) when it is none or 0 bytes. */
static size_t shim_limit_value(const char *name, const char *v) {
    size_t bytes = 0;
    if (vram_parse_size(v, &bytes) != VRAM_OK) shim_malformed(name, v, 0);
    else if (bytes == 0) shim_malformed(name, v, 1);
    return bytes;
}

/* A limit: `name` (VRAM_LIMIT, VRAM_LIMIT_<i>), else `old` (VRAM_MEMORY_LIMIT, VRAM_MEMORY_LIMIT_<i>, the
 * library's older names); both set to different sizes is refused as a malformed limit is (fails closed). */
static void shim_read_limit(const char *name, const char *old, int dev, int src) {
    const char *used = NULL, *other = NULL;
    const char *v = vram__getenv_either(name, old, &used, &other);
    if (!v) return;
    size_t bytes = shim_limit_value(used, v), old_bytes = 0;
    if (bytes == 0) return;
    if (other && (vram_parse_size(other, &old_bytes) != VRAM_OK || old_bytes != bytes)) {
        if (!g.malformed[0])
            snprintf(g.malformed, sizeof g.malformed, "%s='%.40s' and %s='%.40s' disagree", used, v, old, other);
        fprintf(stderr, "vram: %s='%s' and %s='%s' disagree: they name one limit (%s is its older name); every "
                "allocation is refused until one of them is unset\n", used, v, old, other, old);
        return;
    }
    for (int d = (dev < 0 ? 0 : dev); d < (dev < 0 ? SHIM_MAX_DEVICES : dev + 1); d++) {
        if (src == SHIM_LIMIT_ALL && g.limit_src[d] == SHIM_LIMIT_DEVICE) continue;
        g.limit[d] = g.limit_start[d] = bytes;
        g.limit_src[d] = g.limit_start_src[d] = src;
    }
}

/* A ceiling variable (VRAM_LIMIT_MAX, VRAM_GROUP_LIMIT_MAX): its size, 0 when unset;
 * one that is no size (or 0) is said, and `fallback` (the start limit) is the ceiling then. */
static size_t shim_read_ceiling(const char *name, size_t fallback) {
    const char *v = getenv(name);
    size_t bytes = 0;
    if (!v || !*v) return 0;
    if (vram_parse_size(v, &bytes) != VRAM_OK || bytes == 0) {
        fprintf(stderr, "vram: %s='%.80s' is not a size larger than zero: a limit set from outside stays at most "
                "the start limit\n", name, v);
        return fallback ? fallback : 1;
    }
    return bytes;
}

/* VRAM_PRIORITY, VRAM_OVERFLOW, VRAM_OVERFLOW_MAX, VRAM_LIMIT_MAX, VRAM_GROUP_LIMIT_MAX. */
static void shim_read_moving(void) {
    const char *p = getenv("VRAM_PRIORITY");
    if (p && *p) {
        if (strcmp(p, "opportunistic") == 0) g.priority = LEDGER_PRIORITY_OPPORTUNISTIC;
        else if (strcmp(p, "guaranteed") != 0)
            fprintf(stderr, "vram: VRAM_PRIORITY='%.80s' is not guaranteed or opportunistic; guaranteed\n", p);
    }
    const char *o = getenv("VRAM_OVERFLOW");
    if (o && *o) {
        if (strcmp(o, "host") == 0) g.overflow = 1;
        else if (strcmp(o, "none") != 0)
            fprintf(stderr, "vram: VRAM_OVERFLOW='%.80s' is not host or none; no overflow\n", o);
    }
    const char *m = getenv("VRAM_OVERFLOW_MAX");
    if (m && *m) {
        size_t bytes = 0;
        if (vram_parse_size(m, &bytes) != VRAM_OK) {
            fprintf(stderr, "vram: VRAM_OVERFLOW_MAX='%.80s' is not a size; no overflow\n", m);
            g.overflow = 0;
        }
        g.overflow_max = bytes;
        g.overflow_max_set = 1;
    }
    size_t lowest = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++)
        if (g.limit_start[d] && (!lowest || g.limit_start[d] < lowest)) lowest = g.limit_start[d];
    g.limit_max = shim_read_ceiling("VRAM_LIMIT_MAX", lowest);
    g.group_limit_max = shim_read_ceiling("VRAM_GROUP_LIMIT_MAX", g.group_limit_start);
}

/* VRAM_GROUP=NAME, VRAM_GROUP_LIMIT=SIZE (a limit without a group is ignored, said on stderr). */
static void shim_read_group(void) {
    const char *name = getenv("VRAM_GROUP"), *lim = getenv("VRAM_GROUP_LIMIT");
    if (name && *name) {
        if (vram__ledger_valid_group(name)) snprintf(g.group, sizeof g.group, "%s", name);
        else fprintf(stderr, "vram: VRAM_GROUP='%s' is not a group name (1-31 of A-Z a-z 0-9 . _ -); ignored\n", name);
    }
    if (lim && *lim) {
        size_t bytes = shim_limit_value("VRAM_GROUP_LIMIT", lim);
        if (bytes == 0) {
            /* refused: every allocation fails (g.malformed) */
        } else if (!g.group[0]) {
            /* a group limit with no group to share it: this process alone is held to it */
            fputs("vram: VRAM_GROUP_LIMIT without a valid VRAM_GROUP: it limits this process alone\n", stderr);
            g.group_limit = g.group_limit_start = bytes;
        } else {
            g.group_limit = g.group_limit_start = bytes;
        }
    }
}

/* VRAM_IDLE_WATCHER=PID:START:NS (set by vram run --idle-sleep and the Slurm plugin, not by hand): the
 * idle watcher's pid and start time, and after how many nanoseconds without a driver call it puts the
 * process to sleep. The process then makes an activity page (activity.c) and names the watcher in
 * its slots; a value that does not parse is said and ignored (the process is not watched). */
static void shim_read_watcher(void) {
    const char *v = getenv("VRAM_IDLE_WATCHER");
    if (!v || !*v) return;
    int pid = 0, used = 0;
    unsigned long long start = 0, ns = 0;
    if (sscanf(v, "%d:%llu:%llu%n", &pid, &start, &ns, &used) != 3 || v[used] != '\0' || pid <= 0 || !start || !ns) {
        fprintf(stderr, "vram: VRAM_IDLE_WATCHER='%.80s' is not PID:START:NS; ignored (no idle sleep)\n", v);
        return;
    }
    g.watcher_pid = pid;
    g.watcher_start = start;
    g.idle_ns = ns;
}

/* A boolean variable into *value; unset or empty leaves it, another value is ignored (said). */
static void shim_read_bool(const char *name, int *value) {
    const char *v = getenv(name);
    if (v && *v && vram__parse_bool(v, value) != 0)
        fprintf(stderr, "vram: %s='%s' is not a boolean (1/0, true/false, yes/no, on/off); ignored\n", name, v);
}

/* ---- fork ------------------------------------------------------------------------------------- */

/* fork: the child must not write the parent's slots nor share its ledger lock (flock belongs to the
 * open file description, which the child inherits): it starts with no slot, no ledger and nothing
 * counted (memory the parent allocated is the parent's), and registers anew at its first call. */
static void shim_fork_prepare(void) {
    pthread_mutex_lock(&g.balloon_mu);
    pthread_mutex_lock(&g.ledger_mu);
    pthread_mutex_lock(&g.mu);
}

static void shim_fork_parent(void) {
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.ledger_mu);
    pthread_mutex_unlock(&g.balloon_mu);
}

static void shim_fork_child(void) {
    __atomic_store_n(&g.sleep_slot, NULL, __ATOMIC_RELAXED);   /* the parent's sleep is the parent's */
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        g.slot[d] = NULL;
        g.slot_tried[d] = 0;
        g.used[d] = 0;
        g.peak[d] = 0;
        /* the parent's balloon pieces are the parent's: forgotten, not released */
        g.balloon_state[d] = 0;
        g.balloon_bytes[d] = 0;
        g.balloon_n[d] = 0;
        g.balloon_short[d] = 0;
        g.balloon_slack[d] = 0;
        g.limits_seen[d] = 0;
        g.overflow_bytes[d] = 0;   /* the parent's overflow blocks are the parent's */
        g.limit[d] = g.limit_start[d];
        g.limit_src[d] = g.limit_start_src[d];
    }
    g.group_limit = g.group_limit_start;
    if (g.table) memset(g.table, 0, g.cap * sizeof *g.table);
    g.count = 0;
    g.npins = 0;
    if (g.ledger_state == 1) vram__ledger_close(&g.ledger);
    g.ledger_state = 0;
    if (g.shadow_map) munmap(g.shadow_map, SHIM_LEDGER_BYTES);
    if (g.shadow_fd >= 0) close(g.shadow_fd);   /* the parent's; the child makes its own */
    g.shadow_map = NULL;
    g.shadow = NULL;
    g.shadow_fd = -1;
    /* the parent's activity page is the parent's (this child is single-threaded now: no one counts
     * into it); the child makes its own at its first slot */
    ledger_activity *a = g.activity;
    __atomic_store_n(&g.activity, NULL, __ATOMIC_RELAXED);
    if (a) munmap(a, LEDGER_ACTIVITY_BYTES);
    if (g.activity_fd >= 0) close(g.activity_fd);
    g.activity_fd = -1;
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.ledger_mu);
    pthread_mutex_unlock(&g.balloon_mu);
}

/* ---- once per process ------------------------------------------------------------------------- */

static void shim_env_init(void) {
    int growth = 1;
    shim_read_bool("VRAM_LOG", &g.log);
    const char *used = NULL, *other = NULL;   /* VRAM_GROWTH, else its older name VRAM_FORCE_ALLOW_GROWTH */
    if (vram__getenv_either("VRAM_GROWTH", "VRAM_FORCE_ALLOW_GROWTH", &used, &other)) shim_read_bool(used, &growth);
    g.prealloc = !growth;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        char name[32], old[40];
        snprintf(name, sizeof name, "VRAM_LIMIT_%d", d);
        snprintf(old, sizeof old, "VRAM_MEMORY_LIMIT_%d", d);
        shim_read_limit(name, old, d, SHIM_LIMIT_DEVICE);
    }
    shim_read_limit("VRAM_LIMIT", "VRAM_MEMORY_LIMIT", -1, SHIM_LIMIT_ALL);
    shim_read_group();
    shim_read_watcher();
    shim_read_moving();
    pthread_atfork(shim_fork_prepare, shim_fork_parent, shim_fork_child);
}

static pthread_once_t shim_env_once = PTHREAD_ONCE_INIT;

void shim_env(void) { pthread_once(&shim_env_once, shim_env_init); }

void shim_env_say(int cuda_loaded) {
    char all[32] = "none";
    int per_device = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        if (g.limit_src[d] == SHIM_LIMIT_ALL) vram__format_bytes(all, sizeof all, g.limit[d]);
        per_device += g.limit_src[d] == SHIM_LIMIT_DEVICE;
    }
    char grp[96] = "";
    if (g.group[0]) {
        char gl[32] = "none";
        if (g.group_limit) vram__format_bytes(gl, sizeof gl, g.group_limit);
        snprintf(grp, sizeof grp, ", group %s (group limit %s)", g.group, gl);
    }
    fprintf(stderr, "vram: preload active in pid %ld: VRAM_LIMIT %s, %d device limit(s) from "
            "VRAM_LIMIT_<i>%s, %s%s\n", (long)getpid(), all, per_device, grp,
            g.prealloc ? "preallocation (the limit is reserved at the first allocation)"
                       : "memory on demand (growth)",
            cuda_loaded ? "" : "; libcuda.so.1 could not be loaded");
}
