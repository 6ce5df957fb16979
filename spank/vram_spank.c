/*
 * vram_spank.c: vram as Slurm's GPU memory enforcement, a SPANK plugin (lib/slurm/vram.so).
 *
 *   plugstack.conf:  required /usr/local/lib/slurm/vram.so [default_limit=SIZE] [shard_limit=SIZE]
 *                                                         [growth=0|1] [preload=PATH]
 *   srun / sbatch / salloc:  --vram-limit=SIZE  --vram-fraction=F  --vram-growth  --vram-idle-sleep=DURATION
 *                            --vram-overflow=host|none  --vram-priority=guaranteed|opportunistic
 *
 * What it owns: the options and the site defaults, and the environment of every task, which it sets
 * in slurm_spank_task_init (in the task, just before exec) as `vram run` sets it:
 *   LD_PRELOAD         libvram_preload.so (preload=, else next to this plugin: ../libvram_preload.so),
 *                      put first;
 *   VRAM_LIMIT         the limit per GPU: --vram-limit, else shard_limit x the job's shards on the
 *                      node (SLURM_SHARDS_ON_NODE), else default_limit, else none;
 *   VRAM_LIMIT_<i>     with --vram-fraction: F x GPU i's memory (as the job's CUDA_VISIBLE_DEVICES
 *                      numbers them, read from the driver), or the smaller of that and the limit;
 *   VRAM_GROUP         slurm-<job id>: every task of the job on a node is listed under it (vram top);
 *   VRAM_GROUP_LIMIT   the same limit: the job's tasks on the node share one budget per GPU;
 *   VRAM_GROWTH        1 with --vram-growth (or growth=1), else 0 (the limit is preallocated);
 *   VRAM_LIMIT_MAX, VRAM_GROUP_LIMIT_MAX   the same limit (with --vram-fraction alone: the smallest
 *                      GPU's): a ceiling, so that `vram limit` (src/common/ledger.h, "Limits that move") can
 *                      lower the job's limit and raise it back, never above what the job was given;
 *   VRAM_OVERFLOW      from --vram-overflow (host: allocations past the limit go to host memory);
 *   VRAM_PRIORITY      from --vram-priority (the job's tasks in their group slurm-<job id>);
 *   VRAM_LEDGER_DIR    the node's place of the user's ledger (vram__ledger_place with LEDGER_PLACE_NODE: not
 *                      the XDG_RUNTIME_DIR or VRAM_LEDGER_DIR the job exported from the login node),
 *                      made and opened there first (the task is not started when it cannot be opened
 *                      safely), so that every task of the job and the epilog share one ledger;
 *   VRAM_IDLE_WATCHER  with --vram-idle-sleep=DURATION: the task's idle watcher (shim/watch.h), started
 *                      here, in the task as the job's user, just before the exec (with the job's
 *                      environment, which the driver may read): it puts the task (and every process
 *                      under it) to sleep after DURATION without a CUDA call and wakes it at its next
 *                      one, and exits once they are gone. When it cannot start (a driver without the
 *                      checkpoint API) the task runs without idle sleep, said once on its stderr.
 * CUDA_VISIBLE_DEVICES stays as Slurm set it from the job's GPUs. In slurm_spank_job_epilog (slurmd,
 * as root) it frees the ledger slots of the job's processes that are gone (a task killed by
 * scancel or the node leaves one), in the job user's ledger at that place, in a child that runs as
 * that user; the child is given EPILOG_DEADLINE_MS (another process of the user may hold the ledger's
 * lock for as long as it likes), then killed, and what was skipped is said in slurmd's log.
 *
 * Invariants: a value that does not parse is refused where it is given (srun refuses the job before
 * anything runs; a plugstack.conf argument fails every job with the reason), never ignored; a
 * computed limit is never 0 (which would mean none). Sizes are vram_parse_size's, the library's own
 * code (src/common/status.c, compiled in hidden), so they mean here what they mean everywhere.
 * No locks: SPANK calls a plugin from one thread of each process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "common/common.h"
#include "common/cuda_abi.h"   /* the driver functions' types (pfn_cuInit, ...) */
#include "common/ledger.h"
#include "vram.h"
#include "watch.h"

/* The target hides everything (the library's and the ledger's code compiled in stays private);
 * what Slurm looks up is visible. */
#pragma GCC visibility push(default)
SPANK_PLUGIN(vram, 1);

#define SPANK_MAX_GPUS 64

/* The job's choices (options), and the site's (plugstack.conf arguments). */
static size_t opt_limit;          /* --vram-limit; 0: not given */
static double opt_fraction;       /* --vram-fraction; 0: not given */
static int opt_growth;            /* --vram-growth */
static const char *opt_overflow;  /* --vram-overflow: "host", "none" or NULL */
static const char *opt_priority;  /* --vram-priority: "guaranteed", "opportunistic" or NULL */
static uint64_t opt_idle_ns;      /* --vram-idle-sleep; 0: not given */
static size_t site_default_limit, site_shard_limit;
static int site_growth;
static char site_preload[4096];

static int parse_limit(const char *what, const char *text, size_t *out) {
    size_t v = 0;
    if (text == NULL || vram_parse_size(text, &v) != VRAM_OK) {
        slurm_error("vram: %s=%s is not a size: %s", what, text ? text : "", vram_last_error());
        return -1;
    }
    if (v == 0) {
        slurm_error("vram: %s=%s is 0 bytes: give a size above 0 (no limit: leave the option out)", what, text);
        return -1;
    }
    *out = v;
    return 0;
}

static int opt_limit_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)remote;
    return parse_limit("--vram-limit", optarg, &opt_limit);
}

static int opt_fraction_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)remote;
    char *end = NULL;
    double f = optarg ? vram__strtod_c(optarg, &end) : 0;
    if (optarg == NULL || end == optarg || *end != '\0' || !(f > 0 && f <= 1)) {
        slurm_error("vram: --vram-fraction=%s: give a number above 0 and at most 1 (a share of each GPU's memory)",
                    optarg ? optarg : "");
        return -1;
    }
    opt_fraction = f;
    return 0;
}

static int opt_growth_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)optarg;
    (void)remote;
    opt_growth = 1;
    return 0;
}

static int opt_overflow_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)remote;
    if (optarg == NULL || (strcmp(optarg, "host") != 0 && strcmp(optarg, "none") != 0)) {
        slurm_error("vram: --vram-overflow=%s: give host or none", optarg ? optarg : "");
        return -1;
    }
    opt_overflow = strcmp(optarg, "host") == 0 ? "host" : "none";
    return 0;
}

static int opt_priority_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)remote;
    if (optarg == NULL || (strcmp(optarg, "guaranteed") != 0 && strcmp(optarg, "opportunistic") != 0)) {
        slurm_error("vram: --vram-priority=%s: give guaranteed or opportunistic", optarg ? optarg : "");
        return -1;
    }
    opt_priority = strcmp(optarg, "guaranteed") == 0 ? "guaranteed" : "opportunistic";
    return 0;
}

static int opt_idle_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)remote;
    if (optarg == NULL || vram__parse_duration(optarg, &opt_idle_ns) != 0) {
        slurm_error("vram: --vram-idle-sleep=%s is not a duration: give a number and ms, s, m, h or d (30s, 10m, "
                    "1.5h; at most a year)", optarg ? optarg : "");
        return -1;
    }
    return 0;
}

struct spank_option spank_options[] = {
    {"vram-limit", "SIZE", "vram: GPU memory limit per GPU for the job's tasks together (e.g. 8GiB)", 1, 0,
     opt_limit_cb},
    {"vram-fraction", "F", "vram: limit each GPU to F (0 < F <= 1) of its memory", 1, 0, opt_fraction_cb},
    {"vram-growth", NULL, "vram: take GPU memory on demand instead of preallocating the limit", 0, 0,
     opt_growth_cb},
    {"vram-overflow", "host|none", "vram: host: allocations past the limit go to host memory instead of failing",
     1, 0, opt_overflow_cb},
    {"vram-priority", "guaranteed|opportunistic", "vram: the job's priority when its group's limits rebalance",
     1, 0, opt_priority_cb},
    {"vram-idle-sleep", "DURATION", "vram: put a task to sleep (its GPU memory to host memory) after DURATION "
     "without a CUDA call; it wakes at its next one", 1, 0, opt_idle_cb},
    SPANK_OPTIONS_TABLE_END};

/* The plugstack.conf arguments; -1 (every job fails, with the reason) on one that does not parse. */
static int parse_site(int ac, char **av) {
    for (int i = 0; i < ac; i++) {
        const char *a = av[i];
        if (strncmp(a, "default_limit=", 14) == 0) {
            if (parse_limit("plugstack.conf default_limit", a + 14, &site_default_limit) != 0) return -1;
        } else if (strncmp(a, "shard_limit=", 12) == 0) {
            if (parse_limit("plugstack.conf shard_limit", a + 12, &site_shard_limit) != 0) return -1;
        } else if (strncmp(a, "growth=", 7) == 0) {
            if (vram__parse_bool(a + 7, &site_growth) != 0) {
                slurm_error("vram: plugstack.conf growth=%s: give 0 or 1", a + 7);
                return -1;
            }
        } else if (strncmp(a, "preload=", 8) == 0) {
            if (a[8] != '/' || strlen(a + 8) >= sizeof site_preload) {
                slurm_error("vram: plugstack.conf preload=%s: give the absolute path of libvram_preload.so", a + 8);
                return -1;
            }
            snprintf(site_preload, sizeof site_preload, "%s", a + 8);
        } else {
            slurm_error("vram: unknown plugstack.conf argument '%s' (default_limit=SIZE, shard_limit=SIZE, "
                        "growth=0|1, preload=PATH)", a);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
    (void)sp;
    return parse_site(ac, av) == 0 ? ESPANK_SUCCESS : ESPANK_ERROR;
}

/* libvram_preload.so: preload=, else next to this plugin (../libvram_preload.so, as installed:
 * lib/slurm/vram.so beside lib/libvram_preload.so), else this plugin's own directory. */
static int preload_path(char *out, size_t len) {
    if (site_preload[0]) return snprintf(out, len, "%s", site_preload) < (int)len ? 0 : -1;
    Dl_info info;
    if (dladdr((void *)preload_path, &info) == 0 || info.dli_fname == NULL) return -1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) return -1;
    *slash = '\0';
    const char *rel[] = {"/../libvram_preload.so", "/libvram_preload.so"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(out, len, "%s%s", dir, rel[i]);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

static int set(spank_t sp, const char *name, const char *value) {
    if (spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS) {
        slurm_error("vram: cannot set %s for the task", name);
        return -1;
    }
    return 0;
}

static int set_size(spank_t sp, const char *name, size_t bytes) {
    char v[32];
    snprintf(v, sizeof v, "%zu", bytes);
    return set(sp, name, v);
}

/* The memory of each GPU the task sees (CUDA_VISIBLE_DEVICES as the job has it), from the driver;
 * how many, or -1 with the reason said. */
static int gpu_memory(spank_t sp, size_t *total, int cap) {
    char cvd[1024];
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof cvd) == ESPANK_SUCCESS) {
        setenv("CUDA_VISIBLE_DEVICES", cvd, 1);   /* this process is the task: it execs next */
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        slurm_error("vram: --vram-fraction needs the CUDA driver: %s", dlerror());
        return -1;
    }
    pfn_cuInit init = (pfn_cuInit)dlsym(lib, "cuInit");
    pfn_cuDeviceGetCount count = (pfn_cuDeviceGetCount)dlsym(lib, "cuDeviceGetCount");
    pfn_cuDeviceGet get = (pfn_cuDeviceGet)dlsym(lib, "cuDeviceGet");
    pfn_cuDeviceTotalMem_v2 mem = (pfn_cuDeviceTotalMem_v2)dlsym(lib, "cuDeviceTotalMem_v2");
    int n = 0, rc = -1;
    if (init && count && get && mem && init(0) == CUDA_SUCCESS && count(&n) == CUDA_SUCCESS) {
        rc = n < cap ? n : cap;
        for (int i = 0; i < rc; i++) {
            CUdevice dev = 0;
            if (get(&dev, i) != CUDA_SUCCESS || mem(&total[i], dev) != CUDA_SUCCESS) rc = -1;
            if (rc < 0) break;
        }
    }
    if (rc < 0) slurm_error("vram: --vram-fraction: the CUDA driver gave no device memory (cuInit, "
                            "cuDeviceGetCount, cuDeviceTotalMem_v2)");
    dlclose(lib);
    return rc;
}

/* --vram-idle-sleep: the task's idle watcher (shim/watch.h), started from this process (the task, as
 * the job's user, about to exec) with the job's environment (the driver it loads may read it: this
 * process's own is slurmstepd's; it execs with the job's next, so changing it here loses nothing), the
 * ledger in the job's place; VRAM_IDLE_WATCHER set for the task. A watcher that cannot start is said on
 * the task's stderr and the task runs without idle sleep. -1 only when the environment cannot be set. */
static int start_watcher(spank_t sp, uint32_t job, const char *ledger_dir) {
    char **env = NULL;
    if (spank_get_item(sp, S_JOB_ENV, &env) == ESPANK_SUCCESS && env) {
        for (char **e = env; *e; e++) {
            const char *eq = strchr(*e, '=');
            if (!eq || eq == *e || (size_t)(eq - *e) >= 256) continue;
            char name[256];
            memcpy(name, *e, (size_t)(eq - *e));
            name[eq - *e] = '\0';
            setenv(name, eq + 1, 1);
        }
    }
    char value[96], err[PATH_MAX + 600];
    if (watch_start(opt_idle_ns, ledger_dir, value, sizeof value, err, sizeof err) != 0) {
        fprintf(stderr, "vram: job %u: --vram-idle-sleep is off: %s\n", job, err);
        return 0;
    }
    return set(sp, "VRAM_IDLE_WATCHER", value);
}

/* The limit per GPU the job asked for or the site gives it; 0: none. */
static size_t job_limit(spank_t sp) {
    if (opt_limit) return opt_limit;
    char shards[32];
    if (site_shard_limit && spank_getenv(sp, "SLURM_SHARDS_ON_NODE", shards, sizeof shards) == ESPANK_SUCCESS) {
        char *end = NULL;
        unsigned long n = strtoul(shards, &end, 10);
        if (end != shards && *end == '\0' && n > 0) {
            return n > SIZE_MAX / site_shard_limit ? SIZE_MAX : (size_t)n * site_shard_limit;
        }
    }
    return site_default_limit;
}

/* --vram-fraction: VRAM_LIMIT_<i> for each of the task's GPUs (the fraction of its memory, no more than
 * limit when one is set) and VRAM_LIMIT_MAX the smallest of them; 0, or -1 (said). */
static int set_fraction_limits(spank_t sp, size_t limit) {
    size_t total[SPANK_MAX_GPUS];
    int n = gpu_memory(sp, total, SPANK_MAX_GPUS);
    if (n < 0) return -1;
    size_t smallest = 0;
    for (int i = 0; i < n; i++) {
        size_t cap = (size_t)((double)total[i] * opt_fraction);
        if (limit && limit < cap) cap = limit;
        if (cap == 0) {
            slurm_error("vram: --vram-fraction=%g of GPU %d's %zu bytes is 0 bytes", opt_fraction, i, total[i]);
            return -1;
        }
        char name[32];
        snprintf(name, sizeof name, "VRAM_LIMIT_%d", i);
        if (set_size(sp, name, cap)) return -1;
        if (!smallest || cap < smallest) smallest = cap;
    }
    if (smallest && set_size(sp, "VRAM_LIMIT_MAX", smallest)) return -1;
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    if (!spank_remote(sp)) return ESPANK_SUCCESS;
    uint32_t job = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
        slurm_error("vram: the job id is not known: the task runs without a vram limit");
        return ESPANK_ERROR;
    }
    size_t limit = job_limit(sp);
    if (limit == 0 && opt_fraction == 0 && opt_idle_ns == 0) return ESPANK_SUCCESS;   /* nothing asked or given */
    char preload[4096], old[8192], value[8192 + 4096 + 2];
    if (preload_path(preload, sizeof preload) != 0) {
        slurm_error("vram: libvram_preload.so not found next to the plugin: set preload=PATH in plugstack.conf");
        return ESPANK_ERROR;
    }
    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof old) == ESPANK_SUCCESS && old[0]) {
        snprintf(value, sizeof value, "%s:%s", preload, old);
    } else {
        snprintf(value, sizeof value, "%s", preload);
    }
    /* The job's ledger on this node: the node's place for the user (ledger.h, "Where"), whatever
     * XDG_RUNTIME_DIR or VRAM_LEDGER_DIR the job brought (srun exports the login session's), so that
     * every task of the job and the epilog use one ledger. This process is the task, as the user:
     * the directory is made and checked here, before the program can need it. */
    char dir[PATH_MAX], note[2 * PATH_MAX], err[PATH_MAX + 512];
    ledger l;
    if (vram__ledger_place(dir, sizeof dir, LEDGER_PLACE_NODE, note, sizeof note, err, sizeof err) != 0 ||
        vram__ledger_open_in(&l, dir, err, sizeof err) != 0) {
        slurm_error("vram: job %u: the job's ledger on this node cannot be opened safely: %s; the task is not "
                    "started (its tasks could pass the job's limit together)", job, err);
        return ESPANK_ERROR;
    }
    vram__ledger_close(&l);
    if (note[0]) slurm_info("vram: job %u: %s", job, note);
    char group[LEDGER_NAME_LEN];
    snprintf(group, sizeof group, "slurm-%u", job);
    if (set(sp, "LD_PRELOAD", value) || set(sp, "VRAM_GROUP", group) ||
        set(sp, "VRAM_GROWTH", opt_growth || site_growth ? "1" : "0") || set(sp, "VRAM_LEDGER_DIR", dir)) {
        return ESPANK_ERROR;
    }
    if (limit && (set_size(sp, "VRAM_LIMIT", limit) || set_size(sp, "VRAM_GROUP_LIMIT", limit) ||
                  set_size(sp, "VRAM_LIMIT_MAX", limit) || set_size(sp, "VRAM_GROUP_LIMIT_MAX", limit)))
        return ESPANK_ERROR;
    if ((opt_overflow && set(sp, "VRAM_OVERFLOW", opt_overflow)) || (opt_priority && set(sp, "VRAM_PRIORITY", opt_priority)))
        return ESPANK_ERROR;
    if (opt_fraction > 0 && set_fraction_limits(sp, limit)) return ESPANK_ERROR;
    if (opt_idle_ns && start_watcher(sp, job, dir)) return ESPANK_ERROR;
    return ESPANK_SUCCESS;
}

/* In a child as the job's user (its ledger is that user's, at the node's place the tasks were given):
 * writes the ledger's directory to `report` (for the parent's line if it has to give up), frees the
 * stale slots and counts the job's slots still alive; the child's exit status says how many (at most
 * 254), 255 on failure. */
static int epilog_child(uint32_t job, int report) {
    char dir[PATH_MAX], err[PATH_MAX + 512];
    ledger l;
    if (vram__ledger_place(dir, sizeof dir, LEDGER_PLACE_NODE, NULL, 0, err, sizeof err) != 0) return 255;
    if (write(report, dir, strlen(dir)) < 0) {
        /* the parent's line then names no path */
    }
    close(report);
    if (vram__ledger_open_in(&l, dir, err, sizeof err) != 0) return 255;
    char group[LEDGER_NAME_LEN];
    snprintf(group, sizeof group, "slurm-%u", job);
    vram__ledger_lock(&l);
    (void)vram__ledger_reclaim_locked(&l);
    int alive = 0;
    for (uint32_t i = 0; i < l.hdr->nslots; i++) {
        ledger_slot *s = &l.slots[i];
        if (s->state == LEDGER_SLOT_LIVE && strncmp(s->group, group, sizeof s->group) == 0) alive++;
    }
    vram__ledger_unlock(&l);
    vram__ledger_close(&l);
    return alive > 254 ? 254 : alive;
}

/* How long the epilog waits for its child: the child runs as the job's user, whose other processes may
 * hold the ledger's lock (flock) for as long as they like; the node must not stay COMPLETING for it. */
#define EPILOG_DEADLINE_MS 10000

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    uint32_t job = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
        return ESPANK_SUCCESS;            /* nothing to clean that we could name */
    }
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) report[0] = report[1] = -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (report[0] >= 0) close(report[0]);
        if ((getuid() != uid && (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0))) _exit(255);
        _exit(epilog_child(job, report[1]));
    }
    if (report[1] >= 0) close(report[1]);
    /* Waited for with a deadline, then killed (SIGKILL: a stopped child too) and reaped. */
    int status = 0, gave_up = 0;
    pid_t got = -1;
    if (pid > 0) {
        uint64_t end = now_ms() + EPILOG_DEADLINE_MS;
        while ((got = waitpid(pid, &status, WNOHANG)) == 0 || (got < 0 && errno == EINTR)) {
            if (now_ms() >= end) {
                kill(pid, SIGKILL);
                while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
                }
                gave_up = 1;
                break;
            }
            usleep(20000);
        }
    }
    char dir[PATH_MAX] = "";
    if (report[0] >= 0) {   /* the child has exited: its end of the pipe is closed, this read ends */
        ssize_t n = read(report[0], dir, sizeof dir - 1);
        dir[n > 0 ? n : 0] = '\0';
        close(report[0]);
    }
    if (gave_up) {
        if (dir[0])
            slurm_error("vram: job %u: the ledger lock %s/ledger.lock was held by another process of uid %u (or "
                        "the ledger did not answer) for more than %d s; the epilog gave up: stale ledger slots "
                        "of the job were not freed (the next reader of the ledger frees them)", job, dir,
                        (unsigned)uid, EPILOG_DEADLINE_MS / 1000);
        else
            slurm_error("vram: job %u: the ledger of uid %u could not be found within %d s; the epilog gave up: "
                        "stale ledger slots of the job were not freed (the next reader of the ledger frees them)",
                        job, (unsigned)uid, EPILOG_DEADLINE_MS / 1000);
    } else if (pid < 0 || got != pid || !WIFEXITED(status) || WEXITSTATUS(status) == 255) {
        slurm_info("vram: job %u: its ledger could not be cleaned (the next reader frees its slots)", job);
    } else if (WEXITSTATUS(status) > 0) {
        slurm_info("vram: job %u: %d process(es) of the job still hold GPU memory after its end", job,
                   WEXITSTATUS(status));
    }
    return ESPANK_SUCCESS;
}
#pragma GCC visibility pop
