/*
 * vram.c: the `vram` command-line tool: `vram ls`, `vram replay`, `vram run`, `vram top`,
 * `vram report`, `vram sleep`, `vram wake`, `--help`, `--version`.
 *
 * Exit status: 0 success, 1 an error (no GPU, bad trace, a failed library call), 2 a usage error
 * (unknown command or option, missing or malformed argument); replay: 3 when allocations failed
 * (unless --allow-failures), 130 when interrupted (replay.c). Everything goes through the public
 * API in <vram.h>; the replay itself lives in replay.c (with replay_loop.c and replay_report.c),
 * trace reading in trace.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vram.h>

#include "cli.h"
#include "json.h"
#include "replay.h"
#include "report.h"
#include "run.h"
#include "sleepwake.h"
#include "top.h"

/* The help, one section per command (`vram help COMMAND`, `vram COMMAND --help`), all of them with
 * the general part for `vram --help`, and a short usage for a bare `vram`. The replay section
 * prints the policy table (from replay.c) between its two halves. */
static const char usage_short[] =
    "Usage: vram <command> [options]\n"
    "\n"
    "Commands:\n"
    "  ls       list the GPUs (or say why there is none)\n"
    "  replay   replay an allocation trace through vram and report peak memory and speed\n"
    "  report   write one HTML page of a trace's or a PyTorch snapshot's memory over time\n"
    "  run      run an unmodified CUDA program under a device-memory limit\n"
    "  sleep    put CUDA processes to sleep: their device memory to host memory, the card free\n"
    "  top      show the processes running under vram run\n"
    "  wake     wake processes put to sleep\n"
    "\n"
    "'vram help COMMAND' or 'vram COMMAND --help' shows one command; 'vram --help' everything.\n";

static const char usage_title[] =
    "Usage: vram <command> [options]\n"
    "       vram help [COMMAND] | --help | --version\n"
    "\n"
    "Commands:\n";

static const char help_ls[] =
    "  ls [--json]\n"
    "      List the physical GPUs (index, product, memory, compute capability, PCI bus id,\n"
    "      UUID) after a first line naming the backend. Exits 1 with \"No GPU found: <reason>\"\n"
    "      when there is none. --json prints one JSON object instead (without a GPU: devices [],\n"
    "      error, reason, detail and hint; exit status 1).\n";

static const char help_replay_head[] =
    "  replay TRACE [--policy NAME | --growth] [--limit SIZE] [--passes N] [--threads N] [--json]\n"
    "         [--allow-failures]\n"
    "      Replay an allocation trace (gzip-compressed or plain text; format in traces/README.md)\n"
    "      through vram on logical device 0 and report ops, peak live bytes, peak reserved bytes,\n"
    "      reserved/live, reserved/live over pass 1's last quarter (tail_reserved_to_live: what\n"
    "      the pool still holds late in the run), mean ns per call (cold first pass, warm later\n"
    "      passes), ops per second,\n"
    "      driver allocs/frees/moves (physical pieces created, released, moved under a block)\n"
    "      and failed allocations.\n"
    "      --policy NAME the allocator strategy on card 0, one of (default prealloc):\n";

static const char help_replay_tail[] =
    "      --growth      same as --policy growth\n"
    "      --limit SIZE  cap card 0 at SIZE (\"512M\", \"6GiB\", \"1.5G\"; powers of 1024)\n"
    "      --passes N    replay the whole trace N times in the same runtime (default 1). What the\n"
    "                    trace leaves live is freed between passes (untimed); the pool keeps its\n"
    "                    memory, so pass 1 is cold (cold_ns_per_op) and passes 2..N are warm\n"
    "                    (warm_ns_per_op; driver_allocs_warm is what they took from the driver)\n"
    "      --threads N   N threads (default 1) each replay the trace on device 0 with their own\n"
    "                    pointers, started together behind a barrier at every pass.\n"
    "                    mean_ns_per_op = the threads' summed loop time / ops; ops_per_sec = ops /\n"
    "                    wall time of the parallel phases. peak_live_bytes is then N x the trace's\n"
    "                    peak, an upper bound (the threads' peaks need not coincide), so\n"
    "                    reserved/live is approximate (peak_in_use_bytes is vram's measured peak)\n"
    "      --json        print one JSON object on stdout; the text report goes to stderr\n"
    "      ops counts the calls of every pass and thread (passes x threads x the trace's events\n"
    "      when nothing fails; trace_events is one copy); a failed allocation's free is skipped.\n"
    "      Each thread's loop over the trace is timed as a whole (the loop does the call and\n"
    "      array bookkeeping only), not each call; ns_per_op = mean_ns_per_op over all passes.\n"
    "      With no GPU and VRAM_BACKEND unset, the replay runs on a simulated card of\n"
    "      1.25 x N threads x the trace's peak live bytes + 4 GiB, at least --limit (said on stderr),\n"
    "      at most 16 TiB (a larger --limit is refused).\n"
    "      --allow-failures  exit 0 even when allocations failed (failures are the measurement)\n"
    "      TRACE '-' is standard input; pipes are read as streams (gzip found by its magic).\n"
    "      On a terminal, stderr shows progress (pass, percent, rate); Ctrl-C stops the replay and\n"
    "      prints what it has so far.\n"
    "      Exit status: 0 the replay ran and every allocation succeeded; 3 it ran and some failed\n"
    "      (0 with --allow-failures); 130 interrupted by Ctrl-C; 1 errors; 2 usage errors.\n";

static const char help_report[] =
    "  report INPUT -o FILE.html [--policy NAME | --growth] [--limit SIZE]\n"
    "      Replay INPUT once on a simulated card (VRAM_BACKEND=cuda: on the GPU) and write one\n"
    "      self-contained HTML page (no network, opens from disk): live, in-use and reserved bytes\n"
    "      over time (by event, and by wall time), the address-space map (blocks, free holes,\n"
    "      unmapped ranges) at the peak and at a moment picked with a slider, the largest live\n"
    "      blocks at the peak with their stack frames, each failed allocation with vram's message,\n"
    "      and the headline figures. INPUT is a trace, '-' for standard input, or a PyTorch\n"
    "      snapshot (torch.cuda.memory._dump_snapshot(), FILE.pickle or .pkl), converted by\n"
    "      tools/snapshot_to_trace.py (python3), whose allocator's reserved bytes are drawn beside\n"
    "      vram's. -o - writes the page on stdout. Exits 0 when the page is written (failed\n"
    "      allocations are in it), 1 on errors.\n";

static const char help_run[] =
    "  run [--devices LIST] [--growth] [--limit SIZE] [--fraction F] [--group NAME\n"
    "      [--group-limit SIZE]] [--log] -- CMD [ARGS]\n"
    "      Run an unmodified CUDA program (PyTorch, JAX, any binary) with libvram_preload.so\n"
    "      (LD_PRELOAD; found next to vram or in ../lib), which caps the device memory it takes:\n"
    "      an allocation past the limit fails with CUDA_ERROR_OUT_OF_MEMORY (the program's usual\n"
    "      out-of-memory error) and cuMemGetInfo / cuDeviceTotalMem (and NVML's memory info, as\n"
    "      nvidia-smi shows it) report the limit as the total.\n"
    "      --devices LIST  CUDA_VISIBLE_DEVICES=LIST (indices or UUIDs; renumbered from 0)\n"
    "      --growth        take memory on demand (VRAM_GROWTH=1). Without it (VRAM_GROWTH=0) the\n"
    "                      limit is preallocated: reserved on the card at the program's first\n"
    "                      allocation, so no other process can take it\n"
    "      --limit SIZE    cap every visible device at SIZE (VRAM_LIMIT, in bytes)\n"
    "      --fraction F    cap each visible device at F x its memory, 0 < F <= 1 (VRAM_LIMIT_<i>;\n"
    "                      with --limit the smaller wins)\n"
    "      --group NAME    list the process under group NAME in vram top (VRAM_GROUP; 1-31 of\n"
    "                      A-Z a-z 0-9 . _ -)\n"
    "      --group-limit SIZE  (with --group) the group's processes together take at most SIZE\n"
    "                      on each device (by UUID); an allocation past it fails with\n"
    "                      CUDA_ERROR_OUT_OF_MEMORY (VRAM_GROUP_LIMIT, in bytes). Costs one scan of\n"
    "                      the ledger under its lock per allocation of a grouped process.\n"
    "                      The ledger is checked first: a ledger directory of yours open to\n"
    "                      others is set to 0700 (said); one that cannot be opened safely (a\n"
    "                      symlink, another owner's, a file open to others) refuses the start\n"
    "                      with the reason (exit status 1)\n"
    "      --log           VRAM_LOG=1: say on stderr when the vram limit (or group limit) refused\n"
    "                      an allocation\n"
    "      --idle-sleep DURATION  put CMD (and each process under it) to sleep after DURATION\n"
    "                      without a CUDA call (e.g. 10m; ms, s, m, h, d), waking it at its next call\n"
    "                      (vram help sleep); without the driver's checkpoint API: said, and off\n"
    "      The process becomes CMD (its exit status is CMD's); 126/127 when CMD cannot be run.\n"
    "      Each process under vram run holds a slot per device in the per-machine ledger\n"
    "      (in $VRAM_LEDGER_DIR, else $XDG_RUNTIME_DIR/vram when it is your directory here, else\n"
    "      /dev/shm/vram-<uid>; when another user has taken that name, in a place only you can own,\n"
    "      /run/user/<uid>/vram or ~/.cache/vram/ledger-<host>, said on stderr), read by vram top.\n"
    "      A ledger deleted, replaced or rebuilt under running processes keeps their slots\n"
    "      (found through their open descriptors, /proc/PID/fd); see the README's \"faults\".\n";

static const char help_sleep[] =
    "  sleep [--timeout DURATION] PID... | --group NAME\n"
    "      Put CUDA processes to sleep through the driver's process checkpoint API (CUDA 12.8 and\n"
    "      later): their CUDA calls block, their device memory moves to host memory and the card's\n"
    "      memory is free for others. vram top shows them asleep with their host footprint, and their\n"
    "      usage leaves their group's budget. Any CUDA process of yours (root: anyone's), under vram\n"
    "      run or not (then vram knows nothing of its memory or group). vram wake brings them back.\n"
    "      --group NAME        every running process of group NAME in the ledger (vram run --group,\n"
    "                          a Slurm job's slurm-<id>)\n"
    "      --timeout DURATION  how long the lock waits for CUDA calls under way (default 10s)\n"
    "      vram run --idle-sleep DURATION (srun --vram-idle-sleep=DURATION) does it by itself: a\n"
    "      process that has made no CUDA call for DURATION goes to sleep, and wakes at its next call\n"
    "      (it waits meanwhile). The preload library sees allocations, kernel launches, the common\n"
    "      copies and sets, and synchronisations; a process whose first call after its sleep is one it\n"
    "      does not see (an event or stream query, a module load, a 2D copy) waits until a call it\n"
    "      sees comes, from any of its threads, or until vram wake.\n"
    "      Exit status: 0 asleep (or already), 1 an error (no checkpoint API, not your process, the\n"
    "      driver refused: each said with its reason), 2 usage error.\n";

static const char help_wake[] =
    "  wake [--device DEV] PID... | --group NAME\n"
    "      Wake processes put to sleep (vram sleep, or an idle watcher): their memory goes back on the\n"
    "      card at the same addresses, then their CUDA calls go on. Refused, with the reason, when the\n"
    "      card or the process's group budget has no room for it (no overcommit): it stays asleep,\n"
    "      nothing lost, and vram wake can be tried again.\n"
    "      --group NAME  every process of group NAME that sleeps\n"
    "      --device DEV  wake it on another card of the same kind (index as vram ls shows it, or\n"
    "                    UUID), where the driver allows; for a process of one card under vram run\n"
    "      Exit status: 0 awake (or already), 1 an error, 2 usage error, 3 refused for lack of room.\n";

static const char help_top[] =
    "  top [--json] [--once]\n"
    "      List every process on this machine that runs under vram run: pid, command, device\n"
    "      (ordinal as the program numbers it / UUID), limit, in use, peak, free under the limit,\n"
    "      group and group limit (vram run --group NAME --group-limit SIZE). Slots of processes\n"
    "      that are gone (kill -9 included) are reclaimed as it reads; a corrupted ledger or one\n"
    "      of another version is moved aside (ledger.bad.*) and rebuilt, keeping the slots of\n"
    "      running processes; one truncated while top reads it is read again. In a terminal it\n"
    "      redraws in place every second: a line per device (processes, in use, peaks, limits),\n"
    "      then the processes with a short history of their use; keys m (in use), k (peak),\n"
    "      p (pid), d (device) sort, q quits. Elsewhere it prints the table every second until\n"
    "      interrupted; --once prints one table and exits; --json prints JSON objects (keys pid,\n"
    "      command, device, uuid, limit_bytes, in_use_bytes, peak_bytes, free_bytes, group,\n"
    "      group_limit_bytes, state, host_bytes, idle_sleep_seconds).\n"
    "      STATE is awake, or asleep (vram sleep, vram run --idle-sleep) with HOST, the bytes of its\n"
    "      device memory in host memory; an asleep process holds nothing on its card (IN USE 0).\n"
    "      --prometheus prints the ledger once in Prometheus' text format (vram_* gauges; README).\n";

static const char help_general[] =
    "Options:\n"
    "  -h, --help        show this help (also after a command)\n"
    "  -V, --version     print the library version\n"
    "\n"
    "Environment (read when the runtime starts):\n"
    "  VRAM_BACKEND=cuda|sim            device backend: the CUDA driver (default) or a simulated GPU\n"
    "  VRAM_SIM_DEVICES=LIST            simulated cards and their memory, e.g. \"16GiB\" or \"2x8GiB\";\n"
    "                                   \"@MAJOR.MINOR\" after a size sets the compute capability\n"
    "                                   (default 9.0): \"2x24GiB@8.6,16GiB@7.5\"\n"
    "  VRAM_SIM_FAIL_ALLOC_AFTER=N      simulated driver: allocations fail after N have succeeded\n"
    "  VRAM_FORCE_ALLOW_GROWTH=true|false  force memory growth on or off, overriding the program\n"
    "  VRAM_MEMORY_LIMIT=SIZE           cap every card at SIZE\n"
    "  VRAM_MEMORY_LIMIT_<i>=SIZE       cap physical card <i> (wins over VRAM_MEMORY_LIMIT and the API)\n"
    "  VRAM_MEMORY_FRACTION=F           cap every card at F x its memory (the smaller cap wins)\n"
    "  VRAM_ALLOC_CONF=OPTS             allocator options (overrides the program's):";

/* printed between help_general and help_general_tail: the allocator options' keys, from the library */
static const char help_general_tail[] =
    "  VRAM_MEMBARRIER=0                every call fences its entry into the runtime itself instead of\n"
    "                                   configuration calls fencing all threads with membarrier\n"
    "  CUDA_VISIBLE_DEVICES=LIST        cards the CUDA driver shows, renumbered from 0\n"
    "\n"
    "Environment of a program under `vram run` (read by libvram_preload.so):\n"
    "  VRAM_LIMIT=BYTES                 cap every device; VRAM_LIMIT_<i>=BYTES caps device <i> (wins)\n"
    "  VRAM_GROWTH=0|1                  0: reserve the limit up front (preallocation), 1: memory on demand\n"
    "  VRAM_LOG=1                       one line on stderr for each allocation the limit refused\n"
    "  VRAM_GROUP=NAME                  the process's group in the ledger\n"
    "  VRAM_GROUP_LIMIT=BYTES           the group's budget on each device (needs VRAM_GROUP)\n"
    "  VRAM_IDLE_WATCHER=PID:START:NS   the idle watcher of vram run --idle-sleep (set by vram run)\n"
    "  VRAM_LEDGER_DIR=DIR              the ledger's directory (absolute; made 0700; vram run, vram top)\n"
    "  XDG_RUNTIME_DIR=DIR              else the ledger is in DIR/vram when DIR is yours here, else in\n"
    "                                   /dev/shm/vram-<uid> (if another user took that name:\n"
    "                                   /run/user/<uid>/vram, else ~/.cache/vram/ledger-<host>)\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage error (vram run: the command's own status; vram replay:\n"
    "3 when allocations failed, 130 when interrupted; vram wake: 3 when refused for lack of room).\n"
    "--json output is valid UTF-8: bytes of a name that are not (a Latin-1 file name) become U+FFFD.\n";;

/* " key:value," for each allocator option (vram_alloc_conf_option), wrapped at 100 columns under
 * the description's column, after help_general's last line. */
static void print_alloc_conf_help(FILE *f) {
    const char *key = NULL, *value = NULL;
    int col = (int)strlen(strrchr(help_general, '\n') + 1);
    for (int i = 0; vram_alloc_conf_option(i, &key, &value); i++) {
        int last = !vram_alloc_conf_option(i + 1, NULL, NULL);
        int len = 1 + (int)(strlen(key) + 1 + strlen(value)) + !last;
        if (col + len > 100) col = fprintf(f, "\n%34s", "") - 1;
        col += fprintf(f, " %s:%s%s", key, value, last ? "" : ",");
    }
    fputs("\n", f);
}

static void print_replay_help(FILE *f, int indent) {
    fputs(help_replay_head + (indent ? 0 : 2), f);
    for (size_t i = 0; i < replay_num_policies; i++)
        fprintf(f, "        %-14s%s\n", replay_policies[i].name, replay_policies[i].description);
    fputs(help_replay_tail, f);
}

static const struct { const char *name, *text; } command_help[] = {
    { "ls", help_ls }, { "replay", NULL }, { "report", help_report }, { "run", help_run }, { "sleep", help_sleep },
    { "top", help_top }, { "wake", help_wake },
};

/* One command's section; -1 when there is no such command. */
static int print_command_help(FILE *f, const char *name) {
    for (size_t i = 0; i < sizeof command_help / sizeof command_help[0]; i++) {
        if (strcmp(command_help[i].name, name) != 0) continue;
        fputs("Usage: vram ", f);                     /* the section's first line, less its indent */
        if (command_help[i].text) fputs(command_help[i].text + 2, f);
        else print_replay_help(f, 0);
        fputs("\nExit status: see above, else 0 success, 1 error, 2 usage error. 'vram --help' shows every "
              "command and the environment.\n", f);
        return 0;
    }
    return -1;
}

static void print_usage(FILE *f) {
    fputs(usage_title, f);
    fputs(help_ls, f);
    fputs("\n", f);
    print_replay_help(f, 1);
    fputs("\n", f);
    fputs(help_report, f);
    fputs("\n", f);
    fputs(help_run, f);
    fputs("\n", f);
    fputs(help_sleep, f);
    fputs("\n", f);
    fputs(help_top, f);
    fputs("\n", f);
    fputs(help_wake, f);
    fputs("\n", f);
    fputs(help_general, f);
    print_alloc_conf_help(f);
    fputs(help_general_tail, f);
}

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vram: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'vram help' or 'vram COMMAND --help'.\n", stderr);
    return 2;
}

static int is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

static const char *backend_label(void) {
    const char *b = getenv("VRAM_BACKEND");
    if (!b || !*b) return "cuda";
    return strcmp(b, "sim") == 0 ? "sim (simulated)" : b;
}

/* ---- vram ls -------------------------------------------------------------------------------- */

static void ls_print_table(const vram_physical_device *d, int n) {
    int w = (int)strlen("PRODUCT");
    for (int i = 0; i < n; i++)
        if ((int)strlen(d[i].product) > w) w = (int)strlen(d[i].product);
    printf("backend: %s\n", backend_label());
    printf("%-5s  %-*s  %10s  %-7s  %-16s  %s\n", "INDEX", w, "PRODUCT", "MEMORY", "COMPUTE",
           "PCI BUS ID", "UUID");
    for (int i = 0; i < n; i++) {
        char mem[32], cc[16];
        snprintf(mem, sizeof mem, "%.2f GiB", (double)d[i].total_bytes / (double)(1u << 30));
        snprintf(cc, sizeof cc, "%d.%d", d[i].compute_major, d[i].compute_minor);
        printf("%-5d  %-*s  %10s  %-7s  %-16s  %s\n", d[i].index, w, d[i].product, mem, cc,
               d[i].pci_bus_id, d[i].uuid);
    }
}

static void ls_print_json(const vram_physical_device *d, int n) {
    const char *b = getenv("VRAM_BACKEND");
    printf("{\"backend\": ");
    json_string(stdout, b && *b ? b : "cuda");
    printf(", \"devices\": [");
    for (int i = 0; i < n; i++) {
        printf("%s{\"index\": %d, \"name\": ", i ? ", " : "", d[i].index);
        json_string(stdout, d[i].name);
        printf(", \"product\": ");
        json_string(stdout, d[i].product);
        printf(", \"total_bytes\": %zu, \"compute_capability\": \"%d.%d\", \"pci_bus_id\": ",
               d[i].total_bytes, d[i].compute_major, d[i].compute_minor);
        json_string(stdout, d[i].pci_bus_id);
        printf(", \"uuid\": ");
        json_string(stdout, d[i].uuid);
        printf("}");
    }
    printf("]}\n");
}

/* No device list: a short sentence and the hint on stderr, or (--json) one object on stdout with the
 * status, the short reason, the library's whole message and the hint. Exit status 1. */
static int ls_fail(vram_status s, int json) {
    char detail[2048], reason[512];
    snprintf(detail, sizeof detail, "%s", vram_last_error());
    cli_short_reason(detail, reason, sizeof reason);
    if (json) {
        const char *b = getenv("VRAM_BACKEND");
        printf("{\"backend\": ");
        json_string(stdout, b && *b ? b : "cuda");
        printf(", \"devices\": [], \"error\": ");
        json_string(stdout, vram_status_name(s));
        printf(", \"reason\": ");
        json_string(stdout, reason);
        printf(", \"detail\": ");
        json_string(stdout, detail);
        printf(", \"hint\": ");
        json_string(stdout, s == VRAM_ERR_NO_DEVICE ? CLI_NO_GPU_HINT : "");
        printf("}\n");
    } else if (s == VRAM_ERR_NO_DEVICE) {
        fprintf(stderr, "No GPU found: %s.\nHint: %s.\n", reason, CLI_NO_GPU_HINT);
    } else {
        fprintf(stderr, "vram ls: %s: %s\n", vram_status_name(s), detail);
    }
    return 1;
}

static int cmd_ls(int argc, char **argv) {
    int json = 0, n = 0;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) { print_command_help(stdout, "ls"); return 0; }
        if (strcmp(argv[i], "--json") != 0) return usage_error("ls: unknown option '%s'", argv[i]);
        json = 1;
    }
    vram_status s = vram_list_physical_devices(NULL, 0, &n);
    if (s != VRAM_OK) return ls_fail(s, json);
    vram_physical_device *devs = calloc(n > 0 ? (size_t)n : 1, sizeof *devs);
    if (!devs) { fputs("vram ls: out of memory\n", stderr); return 1; }
    int count = n;
    if ((s = vram_list_physical_devices(devs, n, &count)) != VRAM_OK) {
        free(devs);
        return ls_fail(s, json);
    }
    if (count < n) n = count;
    if (json) ls_print_json(devs, n);
    else ls_print_table(devs, n);
    free(devs);
    return 0;
}

/* ---- vram replay ---------------------------------------------------------------------------- */

/* "a, b, c": the names of the policy table. */
static void policy_names(char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < replay_num_policies && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", replay_policies[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}

/* A whole number in 1..max, digits only. */
static int parse_count(const char *v, int max, int *out) {
    long x = 0;
    if (!*v) return -1;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        x = x * 10 + (*c - '0');
        if (x > max) return -1;
    }
    if (x < 1) return -1;
    *out = (int)x;
    return 0;
}

static int set_policy(replay_options *opt, const char *name, const char *given_as) {
    const replay_policy *p = replay_find_policy(name);
    if (!p) {
        char names[256];
        policy_names(names, sizeof names);
        return usage_error("replay: unknown policy '%.100s' (valid: %s)", name, names);
    }
    if (opt->policy && opt->policy != p)
        return usage_error("replay: %s conflicts with the policy '%s' given before", given_as, opt->policy->name);
    opt->policy = p;
    return 0;
}

/* Parses one argument of `replay` at argv[*i]; returns 0, or an exit status (2, or -1 for help). */
static int replay_arg(int argc, char **argv, int *i, replay_options *opt) {
    const char *a = argv[*i], *v;
    int missing = 0;
    char msg[160];
    if (is_help(a)) return -1;
    if (strcmp(a, "--growth") == 0) return set_policy(opt, "growth", "--growth");
    if (strcmp(a, "--json") == 0) { opt->json = 1; return 0; }
    if (strcmp(a, "--allow-failures") == 0) { opt->allow_failures = 1; return 0; }
    if ((v = cli_option_value(argc, argv, i, "--policy", &missing)) || missing) {
        if (!v) return usage_error("replay: --policy needs a NAME");
        snprintf(msg, sizeof msg, "--policy %.100s", v);
        return set_policy(opt, v, msg);
    }
    if ((v = cli_option_value(argc, argv, i, "--limit", &missing)) || missing) {
        if (!v) return usage_error("replay: %s needs a SIZE", a);
        if (cli_size(v, &opt->limit_bytes) != 0)
            return usage_error("replay: --limit: bad size '%s' (" CLI_SIZE_HINT ")", v);
        opt->has_limit = 1;
        return 0;
    }
    if ((v = cli_option_value(argc, argv, i, "--passes", &missing)) || missing) {
        if (!v) return usage_error("replay: --passes needs a number");
        if (parse_count(v, REPLAY_MAX_PASSES, &opt->passes) != 0)
            return usage_error("replay: --passes: bad number '%.40s' (1 to %d)", v, REPLAY_MAX_PASSES);
        return 0;
    }
    if ((v = cli_option_value(argc, argv, i, "--threads", &missing)) || missing) {
        if (!v) return usage_error("replay: --threads needs a number");
        if (parse_count(v, REPLAY_MAX_THREADS, &opt->threads) != 0)
            return usage_error("replay: --threads: bad number '%.40s' (1 to %d)", v, REPLAY_MAX_THREADS);
        return 0;
    }
    if (a[0] == '-' && a[1]) return usage_error("replay: unknown option '%s'", a);
    if (opt->trace_path) return usage_error("replay: unexpected argument '%s'", a);
    opt->trace_path = a;
    return 0;
}

static int cmd_replay(int argc, char **argv) {
    replay_options opt = { 0 };
    for (int i = 1; i < argc; i++) {
        int rc = replay_arg(argc, argv, &i, &opt);
        if (rc == -1) { print_command_help(stdout, "replay"); return 0; }
        if (rc != 0) return rc;
    }
    if (!opt.trace_path) return usage_error("replay: missing TRACE");
    return replay_run(&opt);
}

/* ---- vram report ---------------------------------------------------------------------------- */

static int cmd_report(int argc, char **argv) {
    report_options opt = { 0 };
    int missing = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = cli_option_value(argc, argv, &i, "-o", &missing);
        if (!v && !missing) v = cli_option_value(argc, argv, &i, "--output", &missing);
        if (v) { opt.out_path = v; continue; }
        if (missing) return usage_error("report: -o needs a FILE");
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0 || strcmp(a, "--allow-failures") == 0 || strncmp(a, "--passes", 8) == 0 ||
            strncmp(a, "--threads", 9) == 0)
            return usage_error("report: %s is an option of replay, not report", a);
        int rc = replay_arg(argc, argv, &i, &opt.replay);
        if (rc == -1) { print_command_help(stdout, "report"); return 0; }
        if (rc != 0) return rc;
    }
    if (!opt.replay.trace_path) return usage_error("report: missing INPUT");
    if (!opt.out_path) return usage_error("report: missing -o FILE.html");
    return report_run(&opt);
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage_short, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (is_help(cmd)) { print_usage(stdout); return 0; }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) { print_usage(stdout); return 0; }
        if (print_command_help(stdout, argv[2]) == 0) return 0;
        return usage_error("help: unknown command '%s'", argv[2]);
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("vram %s\n", vram_version_string());
        return 0;
    }
    if (strcmp(cmd, "ls") == 0) return cmd_ls(argc - 1, argv + 1);
    if (strcmp(cmd, "replay") == 0) return cmd_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0) return cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) {
        int rc = run_main(argc - 1, argv + 1);
        if (rc == -1) { print_command_help(stdout, "run"); return 0; }
        return rc;
    }
    if (strcmp(cmd, "sleep") == 0 || strcmp(cmd, "wake") == 0) {
        int wake = cmd[0] == 'w';
        int rc = sleep_main(argc - 1, argv + 1, wake);
        if (rc == -1) { print_command_help(stdout, cmd); return 0; }
        return rc;
    }
    if (strcmp(cmd, "top") == 0) {
        int rc = top_main(argc - 1, argv + 1);
        if (rc == -1) { print_command_help(stdout, "top"); return 0; }
        return rc;
    }
    if (cmd[0] == '-') return usage_error("unknown option '%s'", cmd);
    return usage_error("unknown command '%s'", cmd);
}
