/*
 * vram.c: the `vram` command-line tool: `vram ls`, `vram replay`, `vram run`, `vram top`, `vram limit`,
 * `vram report`, `vram sleep`, `vram wake`, `vram help [COMMAND | trace]`, `--help`, `--version`, `--man` (the manual page vram(1)
 * in roff; the build writes vram.1 with it). What the help and the manual say is in help.c's tables.
 *
 * Exit status: 0 success, 1 an error (no GPU, bad trace, a failed library call), 2 a usage error
 * (unknown command or option, missing or malformed argument); replay: 3 when allocations failed
 * (unless --allow-failures), 130 when interrupted (replay.c); wake: 3 when refused for lack of room
 * (sleepwake.c). Everything goes through the public
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
#include "help.h"
#include "json.h"
#include "replay.h"
#include "report.h"
#include "run.h"
#include "limit.h"
#include "sleepwake.h"
#include "top.h"

/* The help and the manual page: tables in help.c, printed by help_print.c. */
static int print_command_help(FILE *f, const char *name) {
    const help_command *c = help_find_command(name);
    if (!c) return -1;
    help_print_command(f, c);
    return 0;
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
        help_print_short(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (is_help(cmd)) { help_print_all(stdout); return 0; }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) { help_print_all(stdout); return 0; }
        if (argc > 3) return usage_error("help: unexpected argument '%s'", argv[3]);
        if (strcmp(argv[2], help_trace_topic.name) == 0) { help_print_topic(stdout, &help_trace_topic); return 0; }
        if (print_command_help(stdout, argv[2]) == 0) return 0;
        return usage_error("help: unknown command '%s'", argv[2]);
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("vram %s\n", vram_version_string());
        return 0;
    }
    if (strcmp(cmd, "--man") == 0) {
        if (argc > 2) return usage_error("--man: unexpected argument '%s'", argv[2]);
        help_print_man(stdout, vram_version_string());
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    if (strcmp(cmd, "ls") == 0) return cmd_ls(argc - 1, argv + 1);
    if (strcmp(cmd, "replay") == 0) return cmd_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0) return cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) {
        int rc = run_main(argc - 1, argv + 1);
        if (rc == -1) { print_command_help(stdout, "run"); return 0; }
        return rc;
    }
    if (strcmp(cmd, "limit") == 0) {
        int rc = limit_main(argc - 1, argv + 1);
        if (rc == -1) { print_command_help(stdout, "limit"); return 0; }
        return rc;
    }
    if (strcmp(cmd, "sleep") == 0 || strcmp(cmd, "wake") == 0) {
        int rc = sleep_main(argc - 1, argv + 1, cmd[0] == 'w');
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
