/*
 * help.c: what `vram --help`, `vram help COMMAND`, `vram help trace` and the manual page vram(1) say,
 * as tables (types in help.h; help_print.c prints them as text or roff). Everything the tool takes is
 * here once: each command with its options and exit statuses, the general options, the environment,
 * the exit statuses, the trace format, the files. Two lists come from elsewhere, through help_list_fn:
 * the replay policies (replay.c's table) and the allocator options (the library's,
 * vram_alloc_conf_option).
 *
 * Adding an option: one line in its command's table (it joins the synopsis as "[NAME ARG]" unless its
 * syn says otherwise); the test `man` (tests/man_test.sh) checks that the manual page names every
 * option, variable and exit status that the help does. Paragraphs are single unwrapped lines of plain
 * text. No state, no locks.
 */
#include <stddef.h>
#include <string.h>

#include <vram.h>

#include "help.h"
#include "replay.h"

#ifndef VRAM_INSTALL_LIBDIR
#define VRAM_INSTALL_LIBDIR "lib"
#endif

static int policy_item(int i, const char **name, const char **text) {
    if (i < 0 || (size_t)i >= replay_num_policies) return 0;
    *name = replay_policies[i].name;
    *text = replay_policies[i].description;
    return 1;
}

/* "key:value", one at a time (the library's table: vram_alloc_conf_option). */
static int alloc_conf_item(int i, const char **name, const char **text) {
    static char buf[128];
    const char *key = NULL, *value = NULL;
    if (!vram_alloc_conf_option(i, &key, &value)) return 0;
    size_t k = strlen(key), v = strlen(value);
    if (k + 1 + v >= sizeof buf) return 0;
    memcpy(buf, key, k);
    buf[k] = ':';
    memcpy(buf + k + 1, value, v + 1);
    *name = buf;
    *text = NULL;
    return 1;
}

const char *const help_name_line =
    "GPU memory runtime: list the GPUs, replay allocation traces, run CUDA programs under a memory limit";

const char *const help_description[] = {
    "vram is a GPU memory runtime: the library libvram (see libvram(3)) gives programs TensorFlow "
    "tf.config's control over GPU memory (visible cards, memory growth, limits, logical devices) over a "
    "best-fit allocator whose out-of-memory errors name their cause. The vram command lists the GPUs, "
    "replays allocation traces through the library and reports what they cost, draws a trace's memory "
    "over time, runs unmodified CUDA programs under a device-memory limit (through the preload library "
    "libvram_preload.so) and shows the processes that run so.",
    NULL,
};

const char *const help_notes[] = {
    "Sizes are bytes or a number with K, M, G or T (powers of 1024): 512M, 6GiB, 1.5G.",
    "--json output is valid UTF-8: bytes of a name that are not (a Latin-1 file name) become U+FFFD.",
    NULL,
};

/* ---- the commands --------------------------------------------------------------------------- */

static const help_item help_ls_options[] = {
    { "--json", NULL, "print one JSON object instead (without a GPU: devices [], error, reason, detail and "
      "hint; exit status 1)", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_ls_about[] = {
    "List the physical GPUs (index, product, memory, compute capability, PCI bus id, UUID) after a first "
    "line naming the backend. Without a GPU it says \"No GPU found: REASON\" and what to try on stderr.",
    NULL,
};
static const help_item help_ls_exit[] = {
    { "0", NULL, "the GPUs are listed", NULL, NULL },
    { "1", NULL, "no GPU, or another error", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_replay_options[] = {
    { "--policy", "NAME", "the allocator strategy on card 0, one of (default prealloc):",
      "[--policy NAME | --growth]", policy_item },
    { "--growth", NULL, "same as --policy growth", "", NULL },
    { "--limit", "SIZE", "cap card 0 at SIZE (\"512M\", \"6GiB\", \"1.5G\"; powers of 1024)", NULL, NULL },
    { "--passes", "N", "replay the whole trace N times in the same runtime (default 1). What the trace leaves "
      "live is freed between passes (untimed); the pool keeps its memory, so pass 1 is cold (cold_ns_per_op) "
      "and passes 2..N are warm (warm_ns_per_op; driver_allocs_warm is what they took from the driver)",
      NULL, NULL },
    { "--threads", "N", "N threads (default 1) each replay the trace on device 0 with their own pointers, "
      "started together behind a barrier at every pass. mean_ns_per_op = the threads' summed loop time / ops; "
      "ops_per_sec = ops / wall time of the parallel phases. peak_live_bytes is then N x the trace's peak, an "
      "upper bound (the threads' peaks need not coincide), so reserved/live is approximate "
      "(peak_in_use_bytes is vram's measured peak)", NULL, NULL },
    { "--json", NULL, "print one JSON object on stdout; the text report goes to stderr", NULL, NULL },
    { "--allow-failures", NULL, "exit 0 even when allocations failed (failures are the measurement)",
      NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_replay_about[] = {
    "Replay an allocation trace (gzip-compressed or plain text; its format: 'vram help trace') through "
    "vram on logical device 0 and report ops, peak live bytes, peak reserved bytes, reserved/live, "
    "reserved/live over pass 1's last quarter (tail_reserved_to_live: what the pool still holds late in the "
    "run), mean ns per call (cold first pass, warm later passes), ops per second, driver allocs/frees/moves "
    "(physical pieces created, released, moved under a block) and failed allocations.",
    NULL,
};
static const char *const help_replay_notes[] = {
    "ops counts the calls of every pass and thread (passes x threads x the trace's events when nothing "
    "fails; trace_events is one copy); a failed allocation's free is skipped. Each thread's loop over the "
    "trace is timed as a whole (the loop does the call and array bookkeeping only), not each call; "
    "ns_per_op = mean_ns_per_op over all passes.",
    "With no GPU and VRAM_BACKEND unset, the replay runs on a simulated card of 1.25 x N threads x the "
    "trace's peak live bytes + 4 GiB, at least --limit (said on stderr), at most 16 TiB (a larger --limit "
    "is refused).",
    "TRACE '-' is standard input; pipes are read as streams (gzip found by its magic). A trace that cannot "
    "be read whole (a bad line, a read error, gzip data cut short) is an error naming the file and the "
    "line: nothing is replayed.",
    "On a terminal, stderr shows progress (pass, percent, rate); Ctrl-C stops the replay and prints what it "
    "has so far.",
    NULL,
};
static const help_item help_replay_exit[] = {
    { "0", NULL, "the replay ran and every allocation succeeded", NULL, NULL },
    { "3", NULL, "it ran and some allocations failed (0 with --allow-failures)", NULL, NULL },
    { "130", NULL, "interrupted by Ctrl-C", NULL, NULL },
    { "1", NULL, "an error (a trace that cannot be read, a failed library call)", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_report_options[] = {
    { "-o, --output", "FILE.html", "write the page to FILE.html; -o - writes it on stdout", "-o FILE.html",
      NULL },
    { "--policy", "NAME", "the allocator strategy, as vram replay's (default prealloc)",
      "[--policy NAME | --growth]", NULL },
    { "--growth", NULL, "same as --policy growth", "", NULL },
    { "--limit", "SIZE", "cap the card at SIZE, as vram replay's", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_report_about[] = {
    "Replay INPUT once on a simulated card (VRAM_BACKEND=cuda: on the GPU) and write one self-contained "
    "HTML page (no network, opens from disk): live, in-use and reserved bytes over time (by event, and by "
    "wall time), the address-space map (blocks, free holes, unmapped ranges) at the peak and at a moment "
    "picked with a slider, the largest live blocks at the peak with their stack frames, each failed "
    "allocation with vram's message, and the headline figures.",
    "INPUT is a trace ('vram help trace'), '-' for standard input, or a PyTorch snapshot "
    "(torch.cuda.memory._dump_snapshot(), FILE.pickle or .pkl), converted by snapshot_to_trace.py "
    "(python3; see Files), whose allocator's reserved bytes are drawn beside vram's.",
    NULL,
};
static const help_item help_report_exit[] = {
    { "0", NULL, "the page is written (failed allocations are in it)", NULL, NULL },
    { "1", NULL, "an error", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_run_options[] = {
    { "--devices", "LIST", "CUDA_VISIBLE_DEVICES=LIST (indices or UUIDs; renumbered from 0)", NULL, NULL },
    { "--growth", NULL, "take memory on demand (VRAM_GROWTH=1). Without it (VRAM_GROWTH=0) the limit is "
      "preallocated: reserved on the card at the program's first allocation, so no other process can take it",
      NULL, NULL },
    { "--limit", "SIZE", "cap every visible device at SIZE (VRAM_LIMIT, in bytes)", NULL, NULL },
    { "--fraction", "F", "cap each visible device at F x its memory, 0 < F <= 1 (VRAM_LIMIT_<i>; with "
      "--limit the smaller wins)", NULL, NULL },
    { "--group", "NAME", "list the process under group NAME in vram top (VRAM_GROUP; 1-31 of A-Z a-z 0-9 . _ -)",
      "[--group NAME [--group-limit SIZE]]", NULL },
    { "--group-limit", "SIZE", "(with --group) the group's processes together take at most SIZE on each "
      "device (by UUID); an allocation past it fails with CUDA_ERROR_OUT_OF_MEMORY (VRAM_GROUP_LIMIT, in "
      "bytes). Costs two scans of the ledger under its lock per allocation of a grouped process (three for a guaranteed member while its group has opportunistic ones). The ledger "
      "is checked first: a ledger directory of yours open to others is set to 0700 (said); one that cannot "
      "be opened safely (a symlink, another owner's, a file open to others) refuses the start with the "
      "reason (exit status 1)", "", NULL },
    { "--priority", "guaranteed|opportunistic", "(with --group and --group-limit) the process's priority in its "
      "group (VRAM_PRIORITY; default guaranteed): a guaranteed member may use up to the budget less what the "
      "other guaranteed members use; an opportunistic member's limit is what is left, lowered while the "
      "guaranteed members need room and raised back when they free it ('vram help limit')", NULL, NULL },
    { "--overflow", "host|none", "host: an allocation (cuMemAlloc) that the limit or the card refuses is served "
      "from pinned host memory mapped for the device (slower, over the bus) instead of failing; counted apart "
      "(vram top's OVERFLOW) and freed by the program's cuMemFree (VRAM_OVERFLOW)", NULL, NULL },
    { "--overflow-max", "SIZE", "(with --overflow host) the most host memory the overflow holds per device "
      "(VRAM_OVERFLOW_MAX; default the device's limit, else its card)", NULL, NULL },
    { "--log", NULL, "VRAM_LOG=1: say on stderr when the vram limit (or group limit) refused an allocation",
      NULL, NULL },
    { "--idle-sleep", "DURATION", "put CMD (and each process under it) to sleep after DURATION without a CUDA "
      "call (500ms, 30s, 10m, 1.5h, 1d), waking it at its next call (vram help sleep); a watcher process started "
      "before CMD does it (VRAM_IDLE_WATCHER). Without the driver's checkpoint API it is said in one line, and "
      "off", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_run_about[] = {
    "Run an unmodified CUDA program (PyTorch, JAX, any binary) with libvram_preload.so (LD_PRELOAD; see "
    "Files), which caps the device memory it takes: an allocation past the limit fails with "
    "CUDA_ERROR_OUT_OF_MEMORY (the program's usual out-of-memory error) and cuMemGetInfo / "
    "cuDeviceTotalMem (and NVML's memory info, as nvidia-smi shows it) report the limit as the total.",
    NULL,
};
static const char *const help_run_notes[] = {
    "Each process under vram run holds a slot per device in the per-machine ledger (in $VRAM_LEDGER_DIR, "
    "else $XDG_RUNTIME_DIR/vram when it is your directory here, else /dev/shm/vram-<uid>; when another "
    "user has taken that name, in a place only you can own, /run/user/<uid>/vram or "
    "~/.cache/vram/ledger-<host>, said on stderr), read by vram top. A ledger deleted, replaced or rebuilt "
    "under running processes keeps their slots (found through their open descriptors, /proc/PID/fd).",
    NULL,
};
static const help_item help_run_exit[] = {
    { "CMD's status", NULL, "the process becomes CMD", NULL, NULL },
    { "126", NULL, "CMD cannot be run", NULL, NULL },
    { "127", NULL, "CMD is not found", NULL, NULL },
    { "1", NULL, "an error before CMD starts (no libvram_preload.so, a ledger that cannot be opened safely)",
      NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_limit_options[] = {
    { "--device", "N", "(with PID) only the process's device N (as the program numbers it); else every device "
      "it uses", NULL, NULL },
    { "--group", "NAME", "change the budget of group NAME (vram run --group NAME --group-limit SIZE) instead: "
      "every running member of yours takes it (and a member that joins later)", "", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_limit_about[] = {
    "Change the device-memory limit of a running process under vram run (or the Slurm plugin), or with "
    "--group NAME its group's budget, through the ledger; without SIZE, print them. SIZE as everywhere (8GiB, "
    "512M); none goes back to the limit the process started with (the group limit it started with). The "
    "process applies the new limit at its next allocation, free or memory query (cuMemGetInfo), and vram "
    "top shows it at once.",
    "Lowering kills nothing: memory the process holds stays; its allocations are refused (out of memory, "
    "or served from host memory under vram run --overflow host) until its frees bring it under the new "
    "limit, and vram top shows it as over limit meanwhile; with preallocation (no --growth) the memory "
    "reserved above the new limit goes back to the card at once. Raising above the start limit is allowed "
    "(an operator's choice) up to the card's memory, never above the limit of a Slurm job "
    "(VRAM_LIMIT_MAX, VRAM_GROUP_LIMIT_MAX: a ceiling).",
    "A program that allocates through vram (vram.torch, the C API, vram replay) under vram run or the Slurm "
    "plugin follows it too: it is listed in the ledger and a thread of its waits on its ledger slot, so the new limit "
    "reaches its pools at once and its next call applies it (cached memory above it goes back, requests are "
    "refused or overflow to host memory with the allocator option overflow:host or vram run --overflow host); "
    "its groups rebalance alike. Outside vram run it is listed when VRAM_GROUP or VRAM_LEDGER_DIR is set. Its "
    "limit can be lowered and raised back up to the limit it started with, not above (its pools are sized for "
    "it at start). On the CUDA driver under vram run the preload library's ledger slot is the one listed: it counts "
    "the library's driver memory once, and both hold the limit set there.",
    "Only the owner of a process (or root) can change its limit: the ledger is the user's own (a 0700 "
    "directory). vram limit finds the process's ledger through /proc/PID/fd; root acts as the process's "
    "owner. --group acts on your own ledger (root: sudo -u USER vram limit --group ...).",
    "Groups rebalance: in a group with a budget, a guaranteed member (vram run --priority guaranteed, the "
    "default) may use up to the budget less what the other guaranteed members use; an opportunistic member "
    "(--priority opportunistic) gets what is left: while guaranteed members use memory its limit is lowered "
    "to budget - their use - the other opportunistic members' use (it then refuses, or overflows to host "
    "memory), and it is raised back to its own limit when they use nothing.",
    NULL,
};
static const help_item help_limit_exit[] = {
    { "0", NULL, "the limit is set (or printed)", NULL, NULL },
    { "1", NULL, "an error: no such process, not yours, not under vram run, no running member of the group, "
      "SIZE above the card or the Slurm job's ceiling, the ledger unavailable", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_top_options[] = {
    { "--json", NULL, "print JSON objects (keys pid, command, device, uuid, limit_bytes, in_use_bytes, "
      "peak_bytes, free_bytes, group, group_limit_bytes, state, host_bytes, idle_sleep_seconds, over_limit, "
      "start_limit_bytes, priority, overflow_bytes)", NULL, NULL },
    { "--once", NULL, "print one table (or object) and exit", NULL, NULL },
    { "--prometheus", NULL, "print the ledger once in Prometheus' text format (vram_* gauges, for "
      "node_exporter's textfile collector; README); not with --json", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_top_about[] = {
    "List every process on this machine that runs under vram run: pid, command, device (ordinal as the "
    "program numbers it / UUID), limit in force (vram limit may have moved it), in use, peak, free under the "
    "limit, group and group limit (vram run --group NAME --group-limit SIZE), state (over limit when it "
    "holds more than a lowered limit) and the host memory of its overflow (vram run --overflow host). Slots of processes that are gone (kill -9 included) are reclaimed as "
    "it reads; a corrupted ledger or one of another version is moved aside (ledger.bad.*) and rebuilt, "
    "keeping the slots of running processes; one truncated while top reads it is read again.",
    "In a terminal it redraws in place every second: a line per device (processes, in use, peaks, limits), "
    "then the processes with a short history of their use; keys m (in use), k (peak), p (pid), d (device) "
    "sort, q quits. Elsewhere it prints the table every second until interrupted.",
    "STATE is awake, or asleep (vram sleep, vram run --idle-sleep) with HOST, the bytes of its device memory "
    "in host memory: a process asleep holds nothing on its card (IN USE 0) and counts nothing in its group.",
    NULL,
};

static const help_item help_top_exit[] = {
    { "0", NULL, "the table is printed (--once, --prometheus), or q quit the live view", NULL, NULL },
    { "1", NULL, "an error (the ledger cannot be opened, a failed write)", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_sleep_options[] = {
    { "--group", "NAME", "every running process of group NAME in the ledger (vram run --group, a Slurm job's "
      "slurm-<id>)", "", NULL },
    { "--timeout", "DURATION", "how long the lock waits for the CUDA calls under way (default 10s, at most 1h)",
      NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_sleep_about[] = {
    "Put CUDA processes to sleep through the driver's process checkpoint API (CUDA 12.8 and later): their "
    "CUDA calls block, their device memory moves to host memory and the card's memory is free for others. "
    "vram top shows them asleep with their host footprint, and their usage leaves their group's budget. Any "
    "CUDA process of yours (root: anyone's), under vram run or not (then vram knows nothing of its memory or "
    "group). vram wake brings them back.",
    NULL,
};
static const char *const help_sleep_notes[] = {
    "vram run --idle-sleep DURATION (srun --vram-idle-sleep=DURATION) does it by itself: a process that has "
    "made no CUDA call for DURATION goes to sleep, and wakes at its next call (it waits meanwhile). The "
    "preload library sees allocations, kernel launches, the common copies and sets, and synchronisations, and "
    "holds them while the process is asleep; a call it does not see (an event or stream query, a module "
    "load, a 2D copy) goes to the driver, whose checkpoint lock is documented to hold it until a call the "
    "library sees comes, from any of its threads, or until vram wake (on driver 580.159.04 work reaching "
    "the driver of a process asleep crashed it: that is why the library holds the calls it sees).",
    "A process put to sleep by vram sleep stays asleep until vram wake, even under an idle watcher (its "
    "calls wait).",
    NULL,
};
static const help_item help_sleep_exit[] = {
    { "0", NULL, "every process is asleep (or was)", NULL, NULL },
    { "1", NULL, "an error (no checkpoint API, no such process, not yours, the driver refused: each said with "
      "its reason)", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item help_wake_options[] = {
    { "--group", "NAME", "every process of group NAME that sleeps", "", NULL },
    { "--device", "DEV", "wake it on another card of the same kind (its index as vram ls shows it, or its "
      "UUID), where the driver allows; for a process of one card under vram run", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const help_wake_about[] = {
    "Wake processes put to sleep (vram sleep, or an idle watcher): their memory goes back on the card at the "
    "same addresses, then their CUDA calls go on. Refused, with the reason, when the card or the process's "
    "group budget has no room for it (no overcommit): it stays asleep, nothing lost, and vram wake can be "
    "tried again.",
    NULL,
};
static const help_item help_wake_exit[] = {
    { "0", NULL, "every process is awake (or was)", NULL, NULL },
    { "3", NULL, "refused for lack of room on the card or in the group: it stays asleep", NULL, NULL },
    { "1", NULL, "an error", NULL, NULL },
    { "2", NULL, "usage error", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

const help_command help_commands[] = {
    { "ls", NULL, NULL, "list the GPUs (or say why there is none)", help_ls_about, help_ls_options, NULL, help_ls_exit },
    { "run", NULL, "-- CMD [ARGS]", "run an unmodified CUDA program under a device-memory limit", help_run_about,
      help_run_options, help_run_notes, help_run_exit },
    { "top", NULL, NULL, "show the processes running under vram run", help_top_about, help_top_options, NULL, help_top_exit },
    { "limit", "PID|--group NAME", "[SIZE|none]", "change a running process's limit (or a group's budget)",
      help_limit_about, help_limit_options, NULL, help_limit_exit },
    { "sleep", NULL, "PID... | --group NAME", "put CUDA processes to sleep: their device memory to host memory, "
      "the card free", help_sleep_about, help_sleep_options, help_sleep_notes, help_sleep_exit },
    { "wake", NULL, "PID... | --group NAME", "wake processes put to sleep", help_wake_about, help_wake_options,
      NULL, help_wake_exit },
    { "replay", "TRACE", NULL, "replay an allocation trace through vram and report peak memory and speed",
      help_replay_about, help_replay_options, help_replay_notes, help_replay_exit },
    { "report", "INPUT", NULL, "write one HTML page of a trace's or a PyTorch snapshot's memory over time",
      help_report_about, help_report_options, NULL, help_report_exit },
    { NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL },
};

const help_command *help_find_command(const char *name) {
    for (const help_command *c = help_commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

/* ---- general options, environment, exit status ------------------------------------------------ */

const help_item help_general_options[] = {
    { "-h, --help", NULL, "show this help (also after a command: vram COMMAND --help)", NULL, NULL },
    { "-V, --version", NULL, "print the library version", NULL, NULL },
    { "--man", NULL, "print this manual page, vram(1), in roff (the build writes vram.1 with it)", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item env_library[] = {
    { "VRAM_BACKEND", "cuda|sim", "device backend: the CUDA driver (default) or a simulated GPU", NULL, NULL },
    { "VRAM_SIM_DEVICES", "LIST", "simulated cards and their memory, e.g. \"16GiB\" or \"2x8GiB\" "
      "(default 1x16GiB); \"@MAJOR.MINOR\" after a size sets the compute capability (default 9.0): "
      "\"2x24GiB@8.6,16GiB@7.5\"", NULL, NULL },
    { "VRAM_SIM_FAIL_ALLOC_AFTER", "N", "simulated driver: allocations fail after N have succeeded", NULL, NULL },
    { "VRAM_SIM_SHARED", "FILE", "simulated cards shared by every process that names FILE: each sees the "
      "memory the others take and give back", NULL, NULL },
    { "VRAM_GROWTH", "true|false", "force memory growth on or off, overriding the program (vram run sets it); "
      "its older name VRAM_FORCE_ALLOW_GROWTH is read where it is unset", NULL, NULL },
    { "VRAM_LIMIT", "SIZE", "cap every card at SIZE (vram run sets it, for the preload library and the library "
      "alike); older name VRAM_MEMORY_LIMIT", NULL, NULL },
    { "VRAM_LIMIT_<i>", "SIZE", "cap physical card <i> (wins over VRAM_LIMIT and the API); older name "
      "VRAM_MEMORY_LIMIT_<i>. Both names of one setting set to different values: an error naming both", NULL,
      NULL },
    { "VRAM_GROUP", "NAME", "list the process in the ledger under group NAME (also VRAM_GROUP_LIMIT, "
      "VRAM_PRIORITY, VRAM_LEDGER_DIR: vram help limit), so that vram limit reaches it", NULL, NULL },
    { "VRAM_OVERFLOW", "host|none", "the allocator option overflow (VRAM_OVERFLOW_MAX=SIZE: overflow_max_mb); "
      "VRAM_ALLOC_CONF's keys win", NULL, NULL },
    { "VRAM_MEMORY_FRACTION", "F", "cap every card at F x its memory (the smaller cap wins)", NULL, NULL },
    { "VRAM_ALLOC_CONF", "OPTS", "allocator options, key:value,... (overrides the program's):", NULL,
      alloc_conf_item },
    { "VRAM_MEMBARRIER", "0", "every call fences its entry into the runtime itself instead of configuration "
      "calls fencing all threads with membarrier", NULL, NULL },
    { "CUDA_VISIBLE_DEVICES", "LIST", "cards the CUDA driver shows, renumbered from 0", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item env_run[] = {
    { "VRAM_LIMIT", "BYTES", "cap every device; VRAM_LIMIT_<i>=BYTES caps device <i> (wins)", NULL, NULL },
    { "VRAM_GROWTH", "0|1", "0: reserve the limit up front (preallocation), 1: memory on demand", NULL, NULL },
    { "VRAM_LOG", "1", "one line on stderr for each allocation the limit refused", NULL, NULL },
    { "VRAM_GROUP", "NAME", "the process's group in the ledger", NULL, NULL },
    { "VRAM_GROUP_LIMIT", "BYTES", "the group's budget on each device (needs VRAM_GROUP)", NULL, NULL },
    { "VRAM_PRIORITY", "guaranteed|opportunistic", "the process's priority in its group (vram help limit)", NULL,
      NULL },
    { "VRAM_OVERFLOW", "host|none", "host: allocations the limit or the card refuses go to host memory", NULL,
      NULL },
    { "VRAM_OVERFLOW_MAX", "SIZE", "the most host memory the overflow holds per device (0: none)", NULL, NULL },
    { "VRAM_LIMIT_MAX", "SIZE", "the most vram limit may raise the limit to (set by the Slurm plugin); "
      "VRAM_GROUP_LIMIT_MAX the same for the group budget", NULL, NULL },
    { "VRAM_IDLE_WATCHER", "PID:START:NS", "the idle watcher of vram run --idle-sleep (set by vram run and the "
      "Slurm plugin)", NULL, NULL },
    { "VRAM_LEDGER_DIR", "DIR", "the ledger's directory (absolute; made 0700; vram run, vram top)", NULL, NULL },
    { "XDG_RUNTIME_DIR", "DIR", "else the ledger is in DIR/vram when DIR is yours here, else in "
      "/dev/shm/vram-<uid> (if another user took that name: /run/user/<uid>/vram, else "
      "~/.cache/vram/ledger-<host>)", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static const help_item env_other[] = {
    { "VRAM_SNAPSHOT_TO_TRACE", "PATH", "vram report: the snapshot_to_trace.py to convert PyTorch snapshots "
      "with (else the one of this installation; see Files)", NULL, NULL },
    { "VRAM_LIBRARY", "PATH", "the Python package: the libvram.so to load", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

const help_env_group help_environment[] = {
    { "Environment (read when the runtime starts)", env_library },
    { "Environment of a program under vram run (read by libvram_preload.so)", env_run },
    { "Other environment", env_other },
    { NULL, NULL },
};

const help_item help_exit_status[] = {
    { "0", NULL, "success", NULL, NULL },
    { "1", NULL, "error", NULL, NULL },
    { "2", NULL, "usage error (unknown command or option, missing or malformed argument)", NULL, NULL },
    { "3", NULL, "vram replay: allocations failed; vram wake: refused for lack of room (it stays asleep)",
      NULL, NULL },
    { "130", NULL, "vram replay: interrupted", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

const char *const help_exit_notes[] = {
    "vram run exits with the command's own status (126 or 127 when it cannot be run).",
    NULL,
};

/* ---- the trace format, the files -------------------------------------------------------------- */

static const char *const trace_about[] = {
    "A trace is text, gzip-compressed or plain, one event per line; lines starting with # are comments. "
    "An event is one of:",
    NULL,
};
static const help_item trace_items[] = {
    { "a", "ID BYTES STREAM TIME_US", "allocate BYTES (the size the program asked for) and call the "
      "allocation ID", NULL, NULL },
    { "f", "ID TIME_US", "free the allocation ID", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
static const char *const trace_notes[] = {
    "IDs are unique within a file; some allocations are never freed (they were live when recording "
    "stopped). STREAM is the CUDA stream id the framework used. TIME_US is the host clock in microseconds "
    "when the framework made the call (a signed 64-bit integer; vram report's wall-time axis counts from "
    "the earliest). Peak live is the maximum over time of the sum of the requested bytes of the "
    "allocations not yet freed.",
    "Two kinds of comment lines carry what vram report shows beside the events (other readers skip them): "
    "'# frames ID F1<TAB>F2...' (the stack of allocation ID, innermost first, after its a line) and "
    "'# reserved BYTES' (the reserved bytes of the allocator that recorded the trace, from there on).",
    "The first comment line is the header: '# gpumem-trace v1 workload=NAME source=pytorch-VERSION "
    "[KEY=VALUE ...] device=NAME' (device= may come last, since its value has spaces).",
    "tools/record_trace.py of the source tree records a PyTorch program's trace; snapshot_to_trace.py "
    "(see Files) converts a PyTorch memory snapshot into one.",
    NULL,
};

const help_topic help_trace_topic = { "trace", "Trace format", trace_about, trace_items, trace_notes };

const help_item help_files[] = {
    { "libvram_preload.so", NULL, "the preload library of vram run: next to the vram binary (a build tree), "
      "else in ../" VRAM_INSTALL_LIBDIR " from it (an installation)", NULL, NULL },
    { "snapshot_to_trace.py", NULL, "vram report's converter of PyTorch snapshots: $VRAM_SNAPSHOT_TO_TRACE, "
      "else ../share/vram/snapshot_to_trace.py from the vram binary (../tools/ in a build tree)", NULL, NULL },
    { "DIR/ledger, DIR/ledger.lock", NULL, "the per-machine ledger of the processes under vram run, in the "
      "directory DIR that VRAM_LEDGER_DIR and XDG_RUNTIME_DIR decide (see Environment)", NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};
