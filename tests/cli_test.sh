#!/usr/bin/env bash
# cli_test.sh: end-to-end checks of the `vram` command-line tool and examples/config_template on
# the simulated backend.
#
#   tests/cli_test.sh PATH/TO/vram PATH/TO/config_template PATH/TO/libvram_fault_io.so \
#       PATH/TO/placement PATH/TO/warm_pair PATH/TO/plan_detect
#
# (libvram_fault_io.so: tests/fault_io.c, loaded with LD_PRELOAD to make reads of a trace fail. The last
# three are bench/'s programs built with the tests: their JSON lines are checked with vram's own.)
# Runs with VRAM_BACKEND=sim (set here; other VRAM_* variables are cleared). Prints each check's
# name with PASS/FAIL (and the captured output of a failure), then "N passed, N failed"; exits 1
# when any check failed, 2 on bad usage.
set -euo pipefail

if [[ $# -ne 6 ]]; then
    echo "usage: $0 VRAM_BINARY CONFIG_TEMPLATE_BINARY FAULT_IO_LIBRARY PLACEMENT WARM_PAIR PLAN_DETECT" >&2
    exit 2
fi
VRAM=$1
EXAMPLE=$2
FAULT_IO=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
PLACEMENT=$4
WARM_PAIR=$5
PLAN_DETECT=$6
TRACES="$(cd "$(dirname "$0")/.." && pwd)/traces"

unset VRAM_SIM_DEVICES VRAM_SIM_FAIL_ALLOC_AFTER VRAM_FORCE_ALLOW_GROWTH VRAM_MEMORY_LIMIT \
      VRAM_MEMORY_FRACTION CUDA_VISIBLE_DEVICES
for v in $(compgen -e | grep '^VRAM_MEMORY_LIMIT_' || true); do unset "$v"; done
export VRAM_BACKEND=sim

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PASSED=0
FAILED=0
SKIPPED=0

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # run()

# check NAME FUNCTION [ARGS]: runs a check function and counts the result (this script passes
# functions with arguments that may hold spaces, so it keeps its own check rather than lib.sh's).
check() {
    local name=$1
    shift
    if "$@"; then
        echo "PASS  $name"
        PASSED=$((PASSED + 1))
    else
        echo "FAIL  $name"
        echo "      exit status: ${RC:-?}"
        printf '      stdout: %s\n' "${OUT:-}" | sed -n '1,20p'
        printf '      stderr: %s\n' "${ERR:-}" | sed -n '1,20p'
        FAILED=$((FAILED + 1))
    fi
}

skip() {
    echo "SKIP  $1 ($2)"
    SKIPPED=$((SKIPPED + 1))
}

# json_value KEY: the number (or true/false/null) stored under KEY in the JSON object in $OUT; the
# first occurrence, so a top-level key wins over the same key inside replay's later "per_pass" list.
json_value() {
    printf '%s\n' "$OUT" | grep -oE "\"$1\": *(-?[0-9.]+|true|false|null)" | sed -n 1p |
        sed -E 's/^"[^"]*": *//'
}

# json_string KEY: the string stored under KEY (no escapes handled), first occurrence.
json_string() {
    printf '%s\n' "$OUT" | grep -oE "\"$1\": *\"[^\"]*\"" | sed -n 1p | sed -E 's/^"[^"]*": *"(.*)"$/\1/'
}

# is_number TEXT: TEXT is a plain decimal number (not null).
is_number() { [[ $1 =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; }

# one_json_object: stdout is exactly one line holding one JSON object.
one_json_object() {
    [[ $(printf '%s\n' "$OUT" | wc -l) -eq 1 && $OUT == \{*\} ]]
}

# ---- traces written here ------------------------------------------------------------------------
# live bytes: 1000, 4000, 3000, 3500, 5500 (peak), 2500, 2000; 4 allocs + 3 frees = 7 ops
cat >"$TMP/small.trace" <<'EOF'
# a small trace written by cli_test.sh
a 10 1000 0 100
a 20 3000 0 101

f 10 102
a 30 500 0 103
a 123456789012 2000 0 104
f 20 105
f 30 106
EOF
SMALL_OPS=7
SMALL_PEAK=5500
gzip -c "$TMP/small.trace" >"$TMP/small.trace.gz"

printf 'a 1 2097152 0 1\nf 1 2\n' >"$TMP/two_mib.trace"
# tail.trace: n = 8 events, so the tail is pass 1's last n/4 = 2 (events 7 and 8) and the state before them.
# live (MiB) after each event: 8, 16, 8, 0, 2, 0 | 4, 0: peak live 16 MiB, tail live max(0, 4, 0) = 4 MiB.
# Growth (map-ahead off) maps 16 MiB for events 1-2 (multiples of the sim's 2 MiB granule: no rounding) and,
# with no limit near, keeps it idle after the frees; events 5 and 7 fit in it. Reserved is 16 MiB
# throughout the tail: tail_reserved_to_live = 16 / 4 = 4.000, while reserved_to_live = 16 / 16 = 1.000.
printf 'a 1 8388608 0 1\na 2 8388608 0 2\nf 1 3\nf 2 4\na 3 2097152 0 5\nf 3 6\na 4 4194304 0 7\nf 4 8\n' \
    >"$TMP/tail.trace"
# ratio.trace: one block of 300,000 bytes (above small_pool_kb's 256 KiB: the main range). Peak live
# 300,000; peak in use 300,032 (rounded up to 256 bytes: 1,172 x 256); with growth and map-ahead off the
# pool maps whole 2 MiB granules of the sim (extents of one granule with the plan on): one, peak
# reserved 2,097,152. reserved_to_live = 2,097,152 / 300,000 = 6.99051 -> 6.991. Each wrong pair gives
# another figure: reserved / in use 6.990, in use / live 1.000, live / reserved 0.143.
printf 'a 1 300000 0 1\nf 1 2\n' >"$TMP/ratio.trace"
printf 'a 1 100 0 1\nf 1 2\na 2 0 0 3\nf 2 4\n' >"$TMP/zero_tail.trace"   # tail: event 4 (n/4 = 1) and the state before it: 0 bytes live
printf '# header\na 1 100 0 1\na 2 xyz 0 2\nf 1 3\n' >"$TMP/malformed.trace"
printf 'a 1 100 0 1\nf 1 2\nf 7 3\n' >"$TMP/unknown_free.trace"
printf 'a 1 100 0 1\nf 1 2\na 1 100 0 3\n' >"$TMP/twice.trace"

# ---- help, version, usage errors ----------------------------------------------------------------
t_help() {
    run "$VRAM" --help
    [[ $RC -eq 0 && $OUT == *replay* && $OUT == *VRAM_MEMORY_LIMIT_* && $OUT == *CUDA_VISIBLE_DEVICES* ]]
}
# every allocator option the library knows (its unknown-option message lists them) is in the help
t_help_alloc_conf() {
    run env VRAM_BACKEND=sim VRAM_ALLOC_CONF=bogus:1 "$VRAM" replay "$TMP/small.trace"
    local known=${ERR##*"(known: "} k
    known=${known%%")"*}
    [[ $RC -eq 1 && $known == vmm,* ]] || return 1
    run "$VRAM" --help
    local section=${OUT#*"VRAM_ALLOC_CONF=OPTS"}
    section=${section%%"VRAM_MEMBARRIER"*}
    [[ $RC -eq 0 && $section != "$OUT" ]] || return 1
    for k in ${known//,/ }; do [[ $section == *" $k:"* ]] || return 1; done
}
t_version() {
    run "$VRAM" --version
    [[ $RC -eq 0 && $OUT =~ [0-9]+\.[0-9]+\.[0-9]+ ]]
}
t_unknown_command() { run "$VRAM" frobnicate; [[ $RC -eq 2 && -n $ERR ]]; }
t_unknown_option() { run "$VRAM" replay "$TMP/small.trace" --bogus; [[ $RC -eq 2 && $ERR == *--bogus* ]]; }
t_missing_trace() { run "$VRAM" replay; [[ $RC -eq 2 ]]; }
t_limit_zero() { run "$VRAM" replay "$TMP/small.trace" --limit 0; [[ $RC -eq 2 && $ERR == *"more than 0"* ]]; }
check "vram --help exits 0 and documents replay and the environment" t_help
check "vram --help names every allocator option the library knows" t_help_alloc_conf
check "vram --version prints the version" t_version
check "unknown command exits 2" t_unknown_command
check "unknown option exits 2" t_unknown_option
check "replay without TRACE exits 2" t_missing_trace
check "replay --limit 0 exits 2 (a limit is more than 0)" t_limit_zero

# ---- vram ls ------------------------------------------------------------------------------------
t_ls() {
    run "$VRAM" ls
    [[ $RC -eq 0 && $(head -1 "$TMP/out") == *"sim (simulated)"* && $OUT == *"vram simulated GPU"* ]]
}
t_ls_two() {
    run env VRAM_SIM_DEVICES=2x8GiB "$VRAM" ls
    [[ $RC -eq 0 && $(grep -c "vram simulated GPU" "$TMP/out") -eq 2 ]]
}
t_ls_json() {
    run env VRAM_SIM_DEVICES=2x8GiB "$VRAM" ls --json
    one_json_object && [[ $RC -eq 0 && $(grep -o '"index"' "$TMP/out" | wc -l) -eq 2 ]]
}
check "vram ls names the backend and shows the simulated GPU" t_ls
check "vram ls with VRAM_SIM_DEVICES=2x8GiB shows two rows" t_ls_two
t_ls_capability() {     # the capability VRAM_SIM_DEVICES gives after '@', 9.0 where it gives none
    run env VRAM_SIM_DEVICES=16GiB@8.6,8GiB "$VRAM" ls --json
    one_json_object && [[ $RC -eq 0 && $(grep -o '"compute_capability": "[0-9.]*"' "$TMP/out" | tr '\n' ' ') == \
        '"compute_capability": "8.6" "compute_capability": "9.0" ' ]]
}
check "vram ls --json prints one object with two devices" t_ls_json
check "vram ls --json: the compute capability of VRAM_SIM_DEVICES=16GiB@8.6,8GiB" t_ls_capability

# ---- vram replay --------------------------------------------------------------------------------
t_replay_small() {
    run "$VRAM" replay "$TMP/small.trace" --json
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == "$SMALL_OPS" &&
        $(json_value peak_live_bytes) == "$SMALL_PEAK" && $(json_value failed_allocs) == 0 &&
        $(json_value first_error) == null ]]
}
t_replay_small_gz() {
    run "$VRAM" replay "$TMP/small.trace.gz" --growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == "$SMALL_OPS" &&
        $(json_value peak_live_bytes) == "$SMALL_PEAK" && $(json_value growth) == true &&
        $(json_string policy) == growth && $(json_value policy_alloc_conf) == null &&
        $(json_value env_alloc_conf) == null && $(json_value driver_moves) == 0 ]]
}
t_replay_conf_in_force() {
    run env VRAM_ALLOC_CONF=map_ahead_mb:0 "$VRAM" replay "$TMP/small.trace.gz" --policy growth-hold --json
    one_json_object && [[ $RC -eq 0 && $(json_string policy_alloc_conf) == "hold_large_mb:256,extent_mb:256" &&
        $(json_string env_alloc_conf) == "map_ahead_mb:0" ]]
}
t_replay_text() {
    run "$VRAM" replay "$TMP/small.trace"
    [[ $RC -eq 0 && $OUT == *"peak live"* && $OUT == *"reserved / live"* ]]
}
t_replay_limit() {
    run "$VRAM" replay "$TMP/two_mib.trace" --limit 1MiB --json
    one_json_object && [[ $RC -eq 3 && $(json_value failed_allocs) == 1 && $OUT == *OUT_OF_MEMORY* &&
        $ERR == *"1 allocations failed (exit status 3; --allow-failures"* ]] || return 1
    run "$VRAM" replay "$TMP/two_mib.trace" --limit 1MiB --json --allow-failures
    one_json_object && [[ $RC -eq 0 && $(json_value failed_allocs) == 1 ]]
}
t_replay_overflow() {   # the 2 MiB block above a 1 MiB limit goes to host memory: said in the JSON and the text
    run env VRAM_ALLOC_CONF=overflow:host,overflow_max_mb:4 "$VRAM" replay "$TMP/two_mib.trace" --growth --limit 1MiB --json
    one_json_object && [[ $RC -eq 0 && $(json_value failed_allocs) == 0 && $(json_value overflow_allocs) == 1 &&
        $(json_value overflow_peak_bytes) == 2097152 && $ERR == *"overflow:         1 requests served from host memory"* ]]
}
# tail_is RATIO RESERVED LIVE: $OUT's tail figures are these (and the tail line is in the text, $ERR).
tail_is() {
    [[ $(json_value tail_reserved_to_live) == "$1" && $(json_value tail_reserved_bytes) == "$2" &&
       $(json_value tail_live_bytes) == "$3" && $ERR == *"tail reserved / live: $1 (pass 1's last 2 events: $2 reserved, $3 live bytes)"* ]]
}
t_replay_tail() {
    run env VRAM_ALLOC_CONF=map_ahead_mb:0 "$VRAM" replay "$TMP/tail.trace" --growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value reserved_to_live) == 1.000 ]] &&
        tail_is 4.000 16777216 4194304 || return 1
    ! tail_is 1.000 16777216 16777216 || return 1        # the check can fail: the whole run's ratio is not the tail's
    ! tail_is 4.000 16777216 4194305 || return 1
    # two passes: the tail is pass 1's; the peaks reported span the reset before it (16 MiB in use in events 1-4)
    run env VRAM_ALLOC_CONF=map_ahead_mb:0 "$VRAM" replay "$TMP/tail.trace" --growth --passes 2 --json
    one_json_object && [[ $RC -eq 0 && $(json_value peak_in_use_bytes) == 16777216 &&
        $(json_value peak_reserved_bytes) == 16777216 ]] && tail_is 4.000 16777216 4194304 || return 1
    # nothing live in the tail (a 0-byte allocation there): no ratio
    run "$VRAM" replay "$TMP/zero_tail.trace" --growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value tail_reserved_to_live) == null && $(json_value tail_live_bytes) == 0 &&
        $ERR == *"tail reserved / live: n/a (nothing live in pass 1's last quarter)"* ]] || return 1
    # two threads: live is 2 x the trace's (an upper bound, as peak_live_bytes), reserved the card's total
    run env VRAM_ALLOC_CONF=map_ahead_mb:0 "$VRAM" replay "$TMP/tail.trace" --growth --threads 2 --json
    one_json_object && [[ $RC -eq 0 && $(json_value tail_live_bytes) == 8388608 ]] &&
        is_number "$(json_value tail_reserved_to_live)"
}
t_replay_ratio() {
    run env VRAM_ALLOC_CONF=map_ahead_mb:0 "$VRAM" replay "$TMP/ratio.trace" --growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value peak_live_bytes) == 300000 &&
        $(json_value peak_in_use_bytes) == 300032 && $(json_value peak_reserved_bytes) == 2097152 &&
        $(json_value reserved_to_live) == 6.991 && $ERR == *"reserved / live:  6.991"* ]]
}
t_replay_malformed() {
    run "$VRAM" replay "$TMP/malformed.trace" --json
    [[ $RC -eq 1 && $ERR == *"malformed.trace:3:"* && -z $OUT ]]
}
t_replay_unknown_free() { run "$VRAM" replay "$TMP/unknown_free.trace"; [[ $RC -eq 1 && $ERR == *":3:"* ]]; }
t_replay_twice() { run "$VRAM" replay "$TMP/twice.trace"; [[ $RC -eq 1 && $ERR == *":3:"* ]]; }
t_replay_missing() { run "$VRAM" replay "$TMP/no_such.trace"; [[ $RC -eq 1 && $ERR == *no_such* ]]; }
check "replay --json of a small trace: ops and peak live as computed by hand" t_replay_small
check "replay of the same trace gzip-compressed, with --growth" t_replay_small_gz
check "replay reports the allocator options in force (the policy's, the environment's)" t_replay_conf_in_force
check "replay without --json prints the text report" t_replay_text
check "replay --limit 1MiB with a 2 MiB alloc: failed_allocs 1, exit 3 (0 with --allow-failures)" t_replay_limit
check "replay --limit 1MiB with overflow:host: the 2 MiB alloc served from host memory, overflow_allocs 1" t_replay_overflow
check "replay --json: tail_reserved_to_live over pass 1's last quarter, as computed by hand" t_replay_tail
check "replay --json: reserved_to_live = peak reserved / peak live, as computed by hand" t_replay_ratio
check "replay of a malformed line exits 1 naming the line" t_replay_malformed
check "replay of a free of an unknown id exits 1" t_replay_unknown_free
check "replay of an id allocated twice exits 1" t_replay_twice
check "replay of a missing file exits 1" t_replay_missing

# ---- vram replay: input from standard input and pipes, broken input -----------------------------
t_replay_stdin() {
    run sh -c "cat '$TMP/small.trace' | '$VRAM' replay - --json"
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == "$SMALL_OPS" && $(json_string trace) == - ]] || return 1
    run sh -c "cat '$TMP/small.trace.gz' | '$VRAM' replay - --json"          # gzip sniffed from the stream
    one_json_object && [[ $RC -eq 0 && $(json_value peak_live_bytes) == "$SMALL_PEAK" ]] || return 1
    run bash -c "'$VRAM' replay <(cat '$TMP/small.trace.gz') --json"       # a pipe by name: not sought
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == "$SMALL_OPS" ]]
}
t_replay_broken_gzip() {
    head -c 200 "$TRACES/gpt2_train.trace.gz" >"$TMP/broken.trace.gz"
    run "$VRAM" replay "$TMP/broken.trace.gz"
    [[ $RC -eq 1 && $(wc -l <"$TMP/err") -eq 1 &&
        $ERR == "vram replay: $TMP/broken.trace.gz:1: broken gzip data (gzip -dc: unexpected end of file)" ]] || return 1
    run sh -c "cat '$TMP/broken.trace.gz' | '$VRAM' replay -"
    [[ $RC -eq 1 && $(wc -l <"$TMP/err") -eq 1 && $ERR == *"-:1: broken gzip data"* ]] || return 1
    # cut after line 3's "a 3 1": the message names line 4, where the text stopped, not line 3's
    printf 'a 1 100 0 1\na 2 100 0 2\nf 1 3\na 3 1' | gzip -c | head -c -8 >"$TMP/cut.trace.gz"
    run "$VRAM" replay "$TMP/cut.trace.gz"
    [[ $RC -eq 1 && $ERR == "vram replay: $TMP/cut.trace.gz:4: broken gzip data (gzip -dc: unexpected end of file)" ]]
}
# A bad line early in a large gzip file is the error even when SIGPIPE is ignored (as a parent may
# leave it): gzip, writing on after the parser stopped, must not make it read as broken gzip data.
t_replay_gzip_sigpipe_ignored() {
    { printf 'a 1 100 0 1\nbogus line\n'; for ((i = 0; i < 20000; i++)); do echo "a $((i + 10)) 100 0 5"; done; } |
        gzip -c >"$TMP/bogus.trace.gz"
    run bash -c "trap '' PIPE; exec '$VRAM' replay '$TMP/bogus.trace.gz'"
    [[ $RC -eq 1 && $ERR == "vram replay: $TMP/bogus.trace.gz:2: unknown event 'bogus' (expected 'a', 'f' or '#')" ]]
}
t_replay_binary_garbage() {
    printf '\x01\x02\xff\xfe\x1b[2J garbage\n' >"$TMP/garbage.trace"
    run "$VRAM" replay "$TMP/garbage.trace"
    [[ $RC -eq 1 && $ERR == *'\x01\x02\xff\xfe\x1b[2J'* ]] && ! LC_ALL=C grep -q '[^[:print:]]' "$TMP/err" || return 1
    head -c 300 "$VRAM" >"$TMP/elf.trace"                                  # NUL bytes: binary data
    run "$VRAM" replay "$TMP/elf.trace"
    [[ $RC -eq 1 && $ERR == *"binary data"* ]] && ! LC_ALL=C grep -q '[^[:print:]]' "$TMP/err"
}
# faulted CMD...: CMD with tests/fault_io.c preloaded (the sanitizer builds' runtime then does not
# come first among the libraries: ASan is told that this is fine).
faulted() {
    env LD_PRELOAD="$FAULT_IO" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$@"
}
# A line that cannot be read whole (getline cannot grow its buffer past 1 MiB: out of memory) is an
# error naming the file and the line, in replay and report, plain and gzip; before, the trace ended
# there and replay exited 0 having read 2 of its 4 events.
t_replay_line_out_of_memory() {
    { printf 'a 1 100 0 1\na 2 100 0 2\n# '; head -c 2097152 /dev/zero | tr '\0' x; printf '\nf 1 3\nf 2 4\n'; } \
        >"$TMP/huge_line.trace"
    gzip -c "$TMP/huge_line.trace" >"$TMP/huge_line.trace.gz"
    run "$VRAM" replay "$TMP/huge_line.trace" --json        # without the fault: the line is a comment
    [[ $RC -eq 0 && $(json_value ops) == 4 ]] || return 1
    local f
    for f in huge_line.trace huge_line.trace.gz; do
        run faulted FAULT_IO_REALLOC_ABOVE=1048576 "$VRAM" replay "$TMP/$f" --json
        [[ $RC -eq 1 && -z $OUT && $(wc -l <"$TMP/err") -eq 1 &&
            $ERR == "vram replay: $TMP/$f:3: cannot read the line: Cannot allocate memory" ]] || return 1
        run faulted FAULT_IO_REALLOC_ABOVE=1048576 "$VRAM" report "$TMP/$f" -o "$TMP/huge.html"
        [[ $RC -eq 1 && $ERR == "vram report: $TMP/$f:3: cannot read the line: Cannot allocate memory" ]] || return 1
    done
    run sh -c "cat '$TMP/huge_line.trace' | LD_PRELOAD='$FAULT_IO' FAULT_IO_REALLOC_ABOVE=1048576 \
        ASAN_OPTIONS='${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0' '$VRAM' replay -"
    [[ $RC -eq 1 && $ERR == "vram replay: -:3: cannot read the line: Cannot allocate memory" ]]
}
# A read of standard input that fails (EIO after the first 64 KiB the feeder passed on) is an error
# naming the line, not the end of the trace.
t_replay_read_error() {
    local i
    for ((i = 1000; i < 9000; i++)); do printf 'a %d 100 0 %d\n' "$i" "$i"; done >"$TMP/long.trace"
    run "$VRAM" replay - --json <"$TMP/long.trace"
    [[ $RC -eq 0 && $(json_value ops) == 8000 ]] || return 1
    run faulted FAULT_IO_READ_FD=0 FAULT_IO_READ_OK=2 "$VRAM" replay - --json <"$TMP/long.trace"
    [[ $RC -eq 1 && -z $OUT && $(wc -l <"$TMP/err") -eq 1 &&
        $ERR =~ ^"vram replay: -:"[0-9]+": read error: Input/output error"$ ]]
}
check "replay - reads standard input (plain and gzip), and a pipe by name" t_replay_stdin
check "replay/report of a line that cannot be allocated: exit 1 naming the file and line" t_replay_line_out_of_memory
check "replay - whose standard input fails to read: exit 1 naming the line" t_replay_read_error
check "replay of a truncated gzip file (or stream): one line naming the line and gzip's reason" t_replay_broken_gzip
check "replay of a bad line in a gzip file with SIGPIPE ignored: the line's error, not gzip's" t_replay_gzip_sigpipe_ignored
check "replay of binary garbage: the bytes are not echoed raw" t_replay_binary_garbage

# ---- JSON of names that are bytes, not UTF-8 text -------------------------------------------------
# json_is_strict KEY PATH: $TMP/out is one JSON object in valid UTF-8 that Python reads strictly (no raw
# control character in a string), its KEY is PATH's bytes decoded as UTF-8 with each ill-formed part
# replaced by U+FFFD (Python's errors="replace", as RFC 8259 wants valid UTF-8), and no raw control
# byte (C0, DEL, C1) is in the output at all.
json_is_strict() {
    python3 -c '
import json, os, sys
raw = open(sys.argv[3], "rb").read().rstrip(b"\n")
d = json.loads(raw.decode("utf-8"))
want = os.fsencode(sys.argv[2]).decode("utf-8", "replace")
assert d[sys.argv[1]] == want, (d[sys.argv[1]], want)
assert not any(b < 0x20 or b == 0x7f for b in raw), "a raw control byte"
assert not any(0x80 <= ord(c) <= 0x9f for c in raw.decode("utf-8")), "a raw C1 control"
' "$1" "$2" "$TMP/out"
}
# A Latin-1 file name (and ill-formed UTF-8 of every kind: a surrogate, a truncated sequence, an
# overlong form, past U+10FFFF, controls) in replay --json: valid JSON with U+FFFD where the bytes
# were not UTF-8; before, the bytes were copied raw (invalid JSON).
t_replay_json_latin1() {
    cp "$TMP/small.trace" "$TMP/$(printf 'caf\xe9.trace')"
    run "$VRAM" replay "$TMP/$(printf 'caf\xe9.trace')" --json
    one_json_object && [[ $RC -eq 0 && $OUT == *'/caf\ufffd.trace", "backend": "sim"'* ]] &&
        json_is_strict trace "$TMP/$(printf 'caf\xe9.trace')" || return 1
    local odd
    odd=$(printf '\xe9t\xe9 \xed\xa0\x80 \xf0\x9f\x98\x80 \xf0\x9f\x98 \xc0\xaf \xf4\x90\x80\x80 \xff \x1b[1m\x7f \xc2\x9b \xe2\x80\xa8 "q" \\ \x01\x02.trace')
    cp "$TMP/small.trace" "$TMP/$odd"
    run "$VRAM" replay "$TMP/$odd" --json
    one_json_object && [[ $RC -eq 0 ]] && json_is_strict trace "$TMP/$odd"
}
check "replay --json of a Latin-1 (and otherwise ill-formed) file name: strict JSON, U+FFFD for the bad bytes" \
    t_replay_json_latin1
# vram ls --json's reason quotes the malformed VRAM_SIM_DEVICES: the same writer
t_ls_json_latin1() {
    run env "VRAM_SIM_DEVICES=$(printf '8GiB\xe9\x1b')" "$VRAM" ls --json
    one_json_object && [[ $RC -eq 1 && $OUT == *"\"reason\": \"VRAM_SIM_DEVICES='8GiB\\ufffd\\u001b' is malformed"* ]] &&
        python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))' "$TMP/out"
}
check "ls --json quoting a Latin-1 VRAM_SIM_DEVICES: strict JSON, U+FFFD" t_ls_json_latin1
# bench/'s programs write the trace's path into their JSON lines with the same writer: before, placement
# copied bytes >= 0x80 raw and warm_pair and plan_detect escaped nothing (a '"' in the name broke the line)
t_bench_json_latin1() {
    local odd line
    odd=$(printf 'caf\xe9 \xed\xa0\x80 \xc0\xaf \xff \x1b[1m\x7f \xc2\x9b "q" \\ \x01.trace')
    grep -v 123456789012 "$TMP/small.trace" >"$TMP/$odd"   # (plan_detect sizes its tables by the highest id)
    for tool in "$PLACEMENT" "$WARM_PAIR" "$PLAN_DETECT"; do
        case $tool in
            "$PLACEMENT") run "$tool" "$TMP/$odd" ;;
            "$WARM_PAIR") run "$tool" "$TMP/$odd" 3 ;;
            *) run "$tool" "$TMP/$odd" 1 1 ;;
        esac
        [[ $RC -eq 0 && -n $OUT ]] || return 1
        while IFS= read -r line; do          # every line one JSON object: placement prints one per rule
            printf '%s\n' "$line" >"$TMP/out"       # (what json_is_strict reads)
            json_is_strict trace "$TMP/$odd" || { echo "not strict JSON from $tool: $line"; return 1; }
        done < <(printf '%s\n' "$OUT")
    done
}
check "placement, warm_pair and plan_detect: a Latin-1 (and otherwise odd) trace path gives strict JSON" t_bench_json_latin1

# ---- vram replay: Ctrl-C, progress ----------------------------------------------------------------
t_replay_sigint() {
    set +e
    "$VRAM" replay "$TRACES/bert_varlen.trace.gz" --growth --passes 100000 --json >"$TMP/out" 2>"$TMP/err" &
    local pid=$! mask
    # A background job of a script starts with SIGINT ignored: a Ctrl-C before the replay installs
    # its handler (after reading the trace and starting the runtime; slow in the sanitizer builds)
    # would be lost and the 100000 passes run on. So wait for the handler (SIGINT in SigCgt), then a
    # little into the replay.
    for _ in $(seq 1200); do
        mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
        (( 0x${mask:-0} & 2 )) && break
        sleep 0.05
    done
    sleep 0.5
    kill -INT "$pid"
    wait "$pid"
    RC=$?
    set -e
    OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
    one_json_object && [[ $RC -eq 130 && $(json_value interrupted) == true && $ERR == *"interrupted:"*"Ctrl-C in pass"* &&
        $(json_value peak_live_bytes) == 12941578172 ]] && (( $(json_value ops) > 0 )) || return 1
    # the tail is pass 1's: null when the Ctrl-C came inside pass 1 (before its last event), a number
    # once pass 1's events were all replayed (a Ctrl-C after its last chunk, as a slow build can see)
    if [[ $(json_value interrupted_pass) == 1 && $(json_value interrupted_event) -lt $(json_value trace_events) ]]; then
        [[ $(json_value tail_reserved_to_live) == null && $ERR == *"tail reserved / live: n/a (pass 1 stopped"* ]]
    else
        is_number "$(json_value tail_reserved_to_live)"
    fi
}
t_replay_progress() {
    if ! command -v script >/dev/null; then RC=-; OUT=; ERR="no script(1) to give the replay a terminal"; return 1; fi
    # the first line comes after the first batch of events (replay_loop.c), well inside one pass of
    # bert_varlen's 117,859 events: two passes show it (and run fast in the sanitizer builds)
    run script -qec "'$VRAM' replay '$TRACES/bert_varlen.trace.gz' --growth --passes 2 --json" /dev/null
    [[ $OUT == *"vram replay: pass "*"/2, "*"%"*"events/s"* ]] || return 1
    run "$VRAM" replay "$TRACES/bert_varlen.trace.gz" --growth --passes 2 --json   # stderr is no terminal here
    [[ $RC -eq 0 && $ERR != *"vram replay: pass "* ]]
}
check "replay interrupted by SIGINT: prints what it has, exit 130" t_replay_sigint
check "replay shows progress on stderr only when it is a terminal" t_replay_progress

# ---- help per command -----------------------------------------------------------------------------
t_help_command() {
    run "$VRAM" help replay
    [[ $RC -eq 0 && $OUT == "Usage: vram replay TRACE"* && $OUT == *--passes* && $OUT == *--allow-failures* &&
        $OUT != *"VRAM_SIM_DEVICES"* && $OUT != *"top [--json]"* ]] || return 1
    run "$VRAM" ls --help
    [[ $RC -eq 0 && $OUT == "Usage: vram ls"* && $OUT != *"replay TRACE"* ]] || return 1
    run "$VRAM" report --help
    [[ $RC -eq 0 && $OUT == "Usage: vram report INPUT"* && $OUT != *"--passes"* ]] || return 1
    run "$VRAM" top --help
    [[ $RC -eq 0 && $OUT == "Usage: vram top"* && $OUT != *"replay TRACE"* ]] || return 1
    run "$VRAM" help frobnicate
    [[ $RC -eq 2 && $ERR == *frobnicate* ]]
}
t_bare_usage() {
    run "$VRAM"
    [[ $RC -eq 2 && $(wc -l <"$TMP/err") -le 14 && $ERR == *"vram help COMMAND"* && $ERR == *report* ]]
}
check "vram help COMMAND / COMMAND --help: that command's help only" t_help_command
check "bare vram: a short usage" t_bare_usage

# ---- vram replay: passes, threads, policies -----------------------------------------------------
# `ops` counts the calls of every pass and thread: passes x threads x the trace's events when
# nothing fails (trace_events is one copy of the trace).
t_replay_one_pass() {
    run "$VRAM" replay "$TMP/small.trace" --json
    one_json_object && [[ $RC -eq 0 && $(json_value passes) == 1 && $(json_value threads) == 1 &&
        $(json_value trace_events) == "$SMALL_OPS" && $(json_string policy) == prealloc &&
        $(json_value growth) == false && $(json_value warm_ns_per_op) == null &&
        $(json_value driver_allocs_warm) == null &&
        $(json_value cold_ns_per_op) == "$(json_value ns_per_op)" &&
        $(json_value mean_ns_per_op) == "$(json_value ns_per_op)" ]] &&
        is_number "$(json_value ops_per_sec)"
}
t_replay_passes() {
    run "$VRAM" replay "$TMP/small.trace" --passes 3 --json
    one_json_object && [[ $RC -eq 0 && $(json_value passes) == 3 &&
        $(json_value ops) == $((3 * SMALL_OPS)) && $(json_value trace_events) == "$SMALL_OPS" &&
        $(json_value peak_live_bytes) == "$SMALL_PEAK" && $(json_value failed_allocs) == 0 &&
        $(json_value driver_allocs_warm) == 0 && $(grep -o '"pass": ' "$TMP/out" | wc -l) -eq 3 ]] &&
        is_number "$(json_value cold_ns_per_op)" && is_number "$(json_value warm_ns_per_op)" &&
        is_number "$(json_value warm_ops_per_sec)"
}
t_replay_passes_text() {
    run "$VRAM" replay "$TMP/small.trace" --passes=2 --policy=growth
    [[ $RC -eq 0 && $OUT == *"ns / op cold:"* && $OUT == *"ns / op warm:"* && $OUT == *"pass 2"* &&
        $OUT == *"policy:           growth"* && $OUT == *"reserved / live"* ]]
}
t_replay_threads() {
    run "$VRAM" replay "$TMP/small.trace" --threads 4 --json
    one_json_object && [[ $RC -eq 0 && $(json_value threads) == 4 && $(json_value failed_allocs) == 0 &&
        $(json_value ops) == $((4 * SMALL_OPS)) && $(json_value peak_live_bytes) == $((4 * SMALL_PEAK)) &&
        $ERR == *"peak live (4 threads, upper bound)"* ]] && is_number "$(json_value ops_per_sec)"
}
t_replay_threads_passes_growth() {
    run "$VRAM" replay "$TMP/small.trace.gz" --threads 3 --passes 2 --growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value failed_allocs) == 0 &&
        $(json_value ops) == $((2 * 3 * SMALL_OPS)) && $(json_value growth) == true ]] &&
        is_number "$(json_value warm_ns_per_op)"
}
# Every pass of every thread fails its 2 MiB alloc (1 call) and skips its free; the 100-byte alloc
# that follows succeeds and is freed between passes.
t_replay_failures_each_pass() {
    printf 'a 1 2097152 0 1\nf 1 2\na 2 100 0 3\n' >"$TMP/fail_then_live.trace"
    run "$VRAM" replay "$TMP/fail_then_live.trace" --limit 1MiB --passes 2 --threads 2 --json --allow-failures
    one_json_object && [[ $RC -eq 0 && $(json_value failed_allocs) == 4 &&
        $(json_value skipped_frees) == 4 && $(json_value ops) == 8 && $OUT == *OUT_OF_MEMORY* &&
        $OUT == *'"first_error": "pass 1, thread 0: event 1'* ]]
}
t_replay_policy_prealloc() {
    run "$VRAM" replay "$TMP/small.trace" --policy prealloc --json
    one_json_object && [[ $RC -eq 0 && $(json_string policy) == prealloc &&
        $(json_value growth) == false && $(json_value failed_allocs) == 0 ]]
}
t_replay_policy_growth_plain() {
    run "$VRAM" replay "$TMP/small.trace" --policy growth-plain --passes 2 --json
    one_json_object && [[ $RC -eq 0 && $(json_string policy) == growth-plain &&
        $(json_value growth) == true && $(json_value failed_allocs) == 0 &&
        $(json_value ops) == $((2 * SMALL_OPS)) ]]
}
t_replay_policy_growth_shared() {
    run "$VRAM" replay "$TMP/small.trace" --policy growth-shared --threads 3 --passes 2 --json
    one_json_object && [[ $RC -eq 0 && $(json_string policy) == growth-shared &&
        $(json_value growth) == true && $(json_value failed_allocs) == 0 &&
        $(json_value ops) == $((6 * SMALL_OPS)) ]]
}
t_replay_policy_unknown() {
    run "$VRAM" replay "$TMP/small.trace" --policy best-guess
    [[ $RC -eq 2 && -z $OUT && $ERR == *best-guess* && $ERR == *prealloc* && $ERR == *growth-plain* ]]
}
t_replay_policy_conflict() { run "$VRAM" replay "$TMP/small.trace" --growth --policy prealloc; [[ $RC -eq 2 ]]; }
t_replay_bad_counts() {
    local a
    for a in "--passes 0" "--passes x" "--passes" "--threads 0" "--threads 1.5" "--threads 99999"; do
        # shellcheck disable=SC2086
        run "$VRAM" replay "$TMP/small.trace" $a
        [[ $RC -eq 2 ]] || return 1
    done
}
t_replay_help() {
    run "$VRAM" replay --help
    [[ $RC -eq 0 && $OUT == *--passes* && $OUT == *--threads* && $OUT == *--policy* &&
        $OUT == *prealloc* && $OUT == *growth-plain* && $OUT == *cold_ns_per_op* ]]
}
check "replay, one pass: passes 1, policy prealloc, warm figures null, cold = mean ns/op" t_replay_one_pass
check "replay --passes 3 --json: ops 3 x the trace, cold and warm ns/op, no warm driver allocs" t_replay_passes
check "replay --passes=2 --policy=growth prints cold, warm and per-pass lines" t_replay_passes_text
check "replay --threads 4: ops and peak live 4 x the trace, failed_allocs 0" t_replay_threads
check "replay --threads 3 --passes 2 --growth of the gzip trace" t_replay_threads_passes_growth
check "replay --limit 1MiB --passes 2 --threads 2: each failed alloc's free skipped" t_replay_failures_each_pass
check "replay --policy prealloc" t_replay_policy_prealloc
check "replay --policy growth-plain --passes 2" t_replay_policy_growth_plain
check "replay --policy growth-shared --threads 3 --passes 2 (one arena for every thread)" t_replay_policy_growth_shared
check "replay --policy with an unknown name exits 2 listing the valid ones" t_replay_policy_unknown
check "replay --growth with another --policy exits 2" t_replay_policy_conflict
check "replay with a malformed --passes or --threads exits 2" t_replay_bad_counts
check "replay --help lists the options and the policies" t_replay_help

# Without VRAM_BACKEND and without a GPU the replay falls back to a simulated card.
run env -u VRAM_BACKEND "$VRAM" ls
if [[ $RC -eq 1 && $ERR == "No GPU found:"* ]]; then
    t_fallback() {
        run env -u VRAM_BACKEND "$VRAM" replay "$TMP/small.trace" --json
        one_json_object && [[ $RC -eq 0 && $ERR == *simulated* && $OUT == *'"backend": "sim"'* &&
            $(json_value ops) == "$SMALL_OPS" ]]
    }
    check "no GPU: vram ls says so; replay falls back to a simulated card" t_fallback
    t_no_gpu_message() {
        run env -u VRAM_BACKEND "$VRAM" ls
        [[ $RC -eq 1 && $(wc -l <"$TMP/err") -eq 2 && $(head -1 "$TMP/err" | wc -c) -lt 120 &&
            $(sed -n 2p "$TMP/err") == "Hint: set VRAM_BACKEND=sim"* ]] || return 1
        run env -u VRAM_BACKEND "$VRAM" replay "$TMP/small.trace"
        [[ $RC -eq 0 && $(grep -c "no GPU" "$TMP/err") -eq 1 && $(grep "no GPU" "$TMP/err" | wc -c) -lt 160 ]]
    }
    check "no GPU: one short sentence plus the hint (ls), one short line (replay)" t_no_gpu_message
    t_ls_json_no_gpu() {
        run env -u VRAM_BACKEND "$VRAM" ls --json
        one_json_object && [[ $RC -eq 1 && $(json_string error) == VRAM_ERR_NO_DEVICE && $OUT == *'"devices": []'* &&
            $OUT == *'"reason": "'* && $OUT == *'"hint": "set VRAM_BACKEND=sim'* ]]
    }
    check "no GPU: vram ls --json prints one object with the reason" t_ls_json_no_gpu
    # 4 x 5500 x 1.25 + 4 GiB = 4294994796 bytes, rounded up to 4097 MiB
    t_fallback_threads() {
        run env -u VRAM_BACKEND "$VRAM" replay "$TMP/small.trace" --threads 4 --json
        one_json_object && [[ $RC -eq 0 && $ERR == *"simulated 4097MiB card (4 threads)"* &&
            $(json_value failed_allocs) == 0 && $(json_value ops) == $((4 * SMALL_OPS)) ]]
    }
    check "no GPU, --threads 4: the simulated card is sized for 4 copies of the trace" t_fallback_threads
    t_fallback_limit() {
        run env -u VRAM_BACKEND "$VRAM" replay "$TMP/small.trace" --limit 40G --json
        one_json_object && [[ $RC -eq 0 && $ERR == *"simulated 40960MiB card"* && $(json_value failed_allocs) == 0 ]]
    }
    check "no GPU, --limit 40G: the simulated card is at least the limit" t_fallback_limit
    # A limit no simulated card can hold (16 TiB at most: its memory is this process's address
    # space) is refused naming --limit; the card's size wrapped to 0 MiB and the error blamed
    # VRAM_SIM_DEVICES, which nobody set. 16 TiB itself is taken, and replays where the host has the
    # address space for growth's reservation (ThreadSanitizer's build leaves a few TiB: the sim says so).
    t_fallback_huge_limit() {
        local l
        for l in 18446744073709551615 17592186044417; do
            run env -u VRAM_BACKEND "$VRAM" replay "$TMP/small.trace" --limit "$l" --json
            [[ $RC -eq 1 && -z $OUT && $(wc -l <"$TMP/err") -eq 1 &&
                $ERR == "vram replay: --limit of $l bytes is more than a simulated card holds (16 TiB; no GPU: "*")" &&
                $ERR != *VRAM_SIM_DEVICES* ]] || return 1
        done
        run env -u VRAM_BACKEND "$VRAM" replay "$TMP/small.trace" --limit 16TiB --policy growth --json
        [[ $ERR == *"replaying on a simulated 16777216MiB card"* ]] || return 1
        [[ $RC -eq 1 && $ERR == *"cuMemAddressReserve("*"[simulated: no host address space: Cannot allocate memory]"* ]] ||
            { one_json_object && [[ $RC -eq 0 && $(json_value limit_bytes) == 17592186044416 && $(json_value failed_allocs) == 0 ]]; }
    }
    check "no GPU, --limit 2^64-1: refused naming --limit (16 TiB at most); 16 TiB works" t_fallback_huge_limit
else
    skip "replay falls back to a simulated card without a GPU" "a GPU is present"
fi

# The real trace copied into the repository.
GPT2="$TRACES/gpt2_train.trace.gz"
t_replay_gpt2() {
    local want_ops
    if [[ ! -r $GPT2 ]]; then RC=-; OUT=; ERR="missing $GPT2"; return 1; fi
    want_ops=$(gzip -dc "$GPT2" | grep -c '^[af] ')
    run env VRAM_SIM_DEVICES=32GiB "$VRAM" replay "$GPT2" --growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == "$want_ops" &&
        $(json_value peak_live_bytes) == 13594206920 && $(json_value failed_allocs) == 0 ]]
}
check "replay gpt2_train.trace.gz --growth: every op, peak live 13594206920" t_replay_gpt2
# Issue target: a real trace whose peak live is 95% of the limit completes in growth mode (the
# pool maps memory where blocks go and gives idle extents back under the limit).
t_replay_tight() {  # t_replay_tight TRACE PEAK_LIVE
    local limit=$(( $2 * 100 / 95 ))
    if [[ ! -r $1 ]]; then RC=-; OUT=; ERR="missing $1"; return 1; fi
    run env VRAM_SIM_DEVICES=32GiB "$VRAM" replay "$1" --policy growth --limit "$limit" --passes 2 --json
    one_json_object && [[ $RC -eq 0 && $(json_value failed_allocs) == 0 ]] &&
        (( $(json_value peak_reserved_bytes) <= limit ))
}
check "replay gpt2_train at a limit 95% full: no failed allocation" t_replay_tight "$GPT2" 13594206920
check "replay bert_varlen at a limit 95% full: no failed allocation" \
    t_replay_tight "$TRACES/bert_varlen.trace.gz" 12941578172
check "replay transformer_varlen at a limit 95% full: no failed allocation" \
    t_replay_tight "$TRACES/transformer_varlen.trace.gz" 12684404008
# bench/train.py's workloads too: with extents of limit / 64 (before POOL_EXTENT_DIV was 256)
# train_gpt2 failed 2 requests here and train_gpt2_generate 57 (idle memory inside busy extents)
check "replay train_gpt2 at a limit 95% full: no failed allocation" \
    t_replay_tight "$TRACES/train_gpt2.trace.gz" 17528300364
check "replay train_gpt2_generate at a limit 95% full: no failed allocation" \
    t_replay_tight "$TRACES/train_gpt2_generate.trace.gz" 738012616
check "replay train_resnet50 at a limit 95% full: no failed allocation" \
    t_replay_tight "$TRACES/train_resnet50.trace.gz" 6105339104
check "replay train_bert_varlen at a limit 95% full: no failed allocation" \
    t_replay_tight "$TRACES/train_bert_varlen.trace.gz" 19138130244
t_replay_gpt2_passes() {
    local want_ops
    if [[ ! -r $GPT2 ]]; then RC=-; OUT=; ERR="missing $GPT2"; return 1; fi
    want_ops=$(gzip -dc "$GPT2" | grep -c '^[af] ')
    run env VRAM_SIM_DEVICES=32GiB "$VRAM" replay "$GPT2" --policy growth --passes 2 --json
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == $((2 * want_ops)) &&
        $(json_value failed_allocs) == 0 ]] && is_number "$(json_value driver_allocs_warm)" &&
        is_number "$(json_value warm_ns_per_op)"
}
check "replay gpt2_train.trace.gz --policy growth --passes 2: every op twice" t_replay_gpt2_passes
# Traces recorded with tools/record_trace.py (traces/README.md): each replays every op, reaches the
# peak live bytes that `record_trace.py --check` computed, and fails no allocation.
t_replay_recorded() {  # t_replay_recorded TRACE PEAK_LIVE
    local want_ops
    if [[ ! -r $1 ]]; then RC=-; OUT=; ERR="missing $1"; return 1; fi
    want_ops=$(gzip -dc "$1" | grep -c '^[af] ')
    run env VRAM_SIM_DEVICES=32GiB "$VRAM" replay "$1" --policy growth --json
    one_json_object && [[ $RC -eq 0 && $(json_value ops) == "$want_ops" &&
        $(json_value peak_live_bytes) == "$2" && $(json_value failed_allocs) == 0 ]]
}
check "replay resnet50_train.trace.gz --policy growth: every op, no failed allocation" \
    t_replay_recorded "$TRACES/resnet50_train.trace.gz" 1846041060
check "replay transformer_varlen.trace.gz --policy growth: every op, no failed allocation" \
    t_replay_recorded "$TRACES/transformer_varlen.trace.gz" 12684404008
check "replay gpt2_generate.trace.gz --policy growth: every op, no failed allocation" \
    t_replay_recorded "$TRACES/gpt2_generate.trace.gz" 377499941
# bench/train.py's own workloads (traces/train_*): growth's placement must keep holding less than
# PyTorch's expandable segments held for the same workload on the H200 (peak reserved bytes in
# bench/results/2026-11-30-h200-train-3e0a95f*.jsonl). Placement is host-side and deterministic, so the
# simulated card gives what the H200 gives.
t_replay_below() {  # t_replay_below TRACE PEAK_LIVE MAX_RESERVED
    t_replay_recorded "$1" "$2" && (( $(json_value peak_reserved_bytes) < $3 ))
}
check "replay train_gpt2: every op, less than expandable segments' 18492686336 bytes" \
    t_replay_below "$TRACES/train_gpt2.trace.gz" 17528300364 18492686336
check "replay train_resnet50: every op, less than expandable segments' 6178209792 bytes" \
    t_replay_below "$TRACES/train_resnet50.trace.gz" 6105339104 6178209792
check "replay train_bert_varlen: every op, less than expandable segments' 19849543680 bytes" \
    t_replay_below "$TRACES/train_bert_varlen.trace.gz" 19138130244 19849543680
check "replay train_gpt2_generate: every op, less than expandable segments' 799014912 bytes" \
    t_replay_below "$TRACES/train_gpt2_generate.trace.gz" 738012616 799014912

# vram report replays on a simulated card whenever VRAM_BACKEND is unset, GPU or not: the same limit refused.
t_report_huge_limit() {
    run env -u VRAM_BACKEND "$VRAM" report "$TMP/small.trace" -o "$TMP/huge_limit.html" --limit 18446744073709551615
    [[ $RC -eq 1 && $(wc -l <"$TMP/err") -eq 1 && ! -e $TMP/huge_limit.html &&
        $ERR == "vram report: --limit of 18446744073709551615 bytes is more than a simulated card holds (16 TiB; VRAM_BACKEND=cuda: on the GPU)" ]]
}
check "report --limit 2^64-1 on the simulated card: refused naming --limit" t_report_huge_limit
# A trace whose peak live is near 2^64 (1.25 x it + 4 GiB wrapped to a few GiB): the card saturates at
# 16 TiB, the allocations it cannot hold fail and are counted. (--limit 1GiB: growth reserves for the
# limit, not the card, whose 16 TiB a sanitizer build's address space may not hold.)
t_report_huge_peak() {
    printf 'a 1 18446744073709551000 0 1\nf 1 2\na 2 4096 0 3\n' >"$TMP/huge_peak.trace"
    run env -u VRAM_BACKEND "$VRAM" report "$TMP/huge_peak.trace" -o "$TMP/huge_peak.html" --growth --limit 1GiB
    [[ $RC -eq 0 && $ERR == *"replaying on a simulated 16777216MiB card"* && $ERR == *"1 failed allocations"* ]]
}
check "report of a trace whose peak is near 2^64: the simulated card saturates at 16 TiB" t_report_huge_peak
t_replay_huge_peak() {
    run env -u VRAM_BACKEND "$VRAM" replay "$TMP/huge_peak.trace" --growth --limit 1GiB --allow-failures --json
    one_json_object && [[ $RC -eq 0 && $ERR == *"simulated 16777216MiB card"* && $(json_value failed_allocs) == 1 &&
        $(json_value peak_live_bytes) == 18446744073709551000 ]] || return 1
    run env -u VRAM_BACKEND "$VRAM" replay "$TMP/huge_peak.trace" --growth --threads 2    # 2 x the peak: 65 bits
    [[ $RC -eq 1 && $ERR == *"huge_peak.trace: peak live bytes x 2 threads overflow 64 bits"* ]]
}
check "replay of a trace whose peak is near 2^64: 16 TiB card, the allocation fails; x 2 threads refused" t_replay_huge_peak
# vram report's messages from the runtime's start name vram report (they said vram replay)
t_report_names_itself() {
    run env VRAM_ALLOC_CONF=bogus:1 "$VRAM" report "$TMP/small.trace" -o "$TMP/bogus.html"
    [[ $RC -eq 1 && $ERR == *"vram report: vram_init: VRAM_ERR_INVALID_ARGUMENT: VRAM_ALLOC_CONF"* && $ERR != *"vram replay"* ]]
}
check "report: a runtime that cannot start is named in vram report's words" t_report_names_itself

# ---- the example program ------------------------------------------------------------------------
t_example() { run "$EXAMPLE"; [[ $RC -eq 0 && $OUT == *"vram simulated GPU"* ]]; }
check "config_template exits 0 and prints the simulated product" t_example

echo "$PASSED passed, $FAILED failed"
if [[ $SKIPPED -gt 0 ]]; then echo "($SKIPPED skipped)"; fi
[[ $FAILED -eq 0 ]]
