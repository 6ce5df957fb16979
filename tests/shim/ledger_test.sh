#!/usr/bin/env bash
# ledger_test.sh: the per-machine ledger, `vram top` and group limits (`vram run --group NAME
# --group-limit SIZE`), as real processes over the fake libcuda.so.1, without a GPU.
#
#   tests/shim/ledger_test.sh VRAM FAKE_CUDA_DIR APP_DRIVER TRUNCATE_ON_LOCK
#
# The ledger goes to a private XDG_RUNTIME_DIR. As root, the squatting checks make two users (useradd -m,
# removed at exit) and run vram as one of them (setpriv). Processes that hold memory are app_driver's `hold`
# scenario: one block allocated, then it waits for EOF on its stdin (a fifo this script holds open).
# TRUNCATE_ON_LOCK is tests/shim/truncate_on_lock.c (LD_PRELOAD: truncates the ledger under a lock).
# promtool (Debian: prometheus; skipped without it outside CI) parses and lints `vram top --prometheus`.
# Prints each check with PASS/FAIL, then "N passed, N failed"; exits 1 when a check failed.
set -euo pipefail

if [[ $# -ne 4 ]]; then
    echo "usage: $0 VRAM FAKE_CUDA_DIR APP_DRIVER TRUNCATE_ON_LOCK" >&2
    exit 2
fi
VRAM=$1 FAKE=$2 APP=$3 TRUNC_LIB=$4

unset VRAM_LIMIT VRAM_LOG VRAM_GROWTH VRAM_GROUP VRAM_GROUP_LIMIT CUDA_VISIBLE_DEVICES LD_PRELOAD \
      VRAM_BACKEND VRAM_SIM_DEVICES FAKE_CUDA_DEVICES FAKE_CUDA_UUID_BASE
for v in $(compgen -e | grep '^VRAM_LIMIT_' || true); do unset "$v"; done
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

MiB=1048576
GiB=1073741824
UUID0=GPU-fa4ec0da-0000-4000-8000-000000000000
UUID1=GPU-fa4ec0da-0000-4000-8000-000000000001
TMP=$(mktemp -d)
export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
LEDGER_DIR=$XDG_RUNTIME_DIR/vram
LEDGER=$LEDGER_DIR/ledger
LEDGER_SIZE=$((64 + 1024 * 320))
PASSED=0
FAILED=0
declare -A HOLD_PID HOLD_FD

SQ_USERS=() SQ_DIRS=() SQ_BIN= HOLD_PREFIX=()
cleanup() {
    for name in "${!HOLD_PID[@]}"; do kill -9 "${HOLD_PID[$name]}" 2>/dev/null || true; done
    for u in "${SQ_USERS[@]}"; do   # the users this test made, and the directory one made for the other
        rm -rf "/dev/shm/vram-$(id -u "$u")"
        userdel -r "$u" 2>/dev/null || true
    done
    for d in "${SQ_DIRS[@]}"; do rm -rf "$d"; done
    [[ -n $SQ_BIN ]] && rm -rf "$SQ_BIN"
    rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # run, check, has

# hold NAME [VRAM RUN OPTIONS] -- KIND MIB DEV: starts a process under vram run that allocates one
# block and keeps it until `release NAME` (or kill -9); waits until it said hold=E (E in HOLD_RC).
# HOLD_PREFIX: a command put before vram run (to run it as another user).
hold() {
    local name=$1
    shift
    local opts=()
    while [[ $1 != -- ]]; do opts+=("$1"); shift; done
    shift
    rm -f "$TMP/$name.in" "$TMP/$name.out" "$TMP/$name.err"
    mkfifo "$TMP/$name.in"
    # The child closes the write ends of the other holders' fifos (else their EOF would never come).
    (
        for f in "${HOLD_FD[@]}"; do exec {f}>&-; done
        exec ${HOLD_PREFIX[@]+"${HOLD_PREFIX[@]}"} "$VRAM" run --growth "${opts[@]}" -- "$APP" dlsym hold "$@" \
            <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err"
    ) &
    HOLD_PID[$name]=$!
    local fd
    exec {fd}>"$TMP/$name.in"
    HOLD_FD[$name]=$fd
}

# wait_held NAME...: until each said hold=E (10 s at most).
wait_held() {
    for name in "$@"; do
        for _ in $(seq 200); do
            grep -q '^hold=' "$TMP/$name.out" 2>/dev/null && break
            sleep 0.05
        done
    done
}

held() { sed -n 's/^hold=//p' "$TMP/$1.out"; }

release() {
    local name=$1 fd=${HOLD_FD[$1]}
    exec {fd}>&-
    wait "${HOLD_PID[$name]}" 2>/dev/null || true
    unset "HOLD_PID[$name]" "HOLD_FD[$name]"
}

kill9() {
    local name=$1 fd=${HOLD_FD[$1]}
    kill -9 "${HOLD_PID[$name]}"
    wait "${HOLD_PID[$name]}" 2>/dev/null || true
    exec {fd}>&-
    unset "HOLD_PID[$name]" "HOLD_FD[$name]"
}

top_json() { run "$VRAM" top --once --json; }

# row PID DEV UUID LIMIT IN_USE PEAK FREE GROUP GROUP_LIMIT: the JSON object vram top prints for it
row() {
    local group=null free=$7
    [[ $8 != - ]] && group="\"$8\""
    printf '{"pid": %s, "command": "vram_shim_app_d", "device": %s, "uuid": "%s", "limit_bytes": %s, "in_use_bytes": %s, "peak_bytes": %s, "free_bytes": %s, "group": %s, "group_limit_bytes": %s, "state": "awake", "host_bytes": 0, "idle_sleep_seconds": null, "over_limit": false, "start_limit_bytes": %s, "priority": "guaranteed", "overflow_bytes": 0}' \
        "$1" "$2" "$3" "$4" "$5" "$6" "$free" "$group" "$9" "$4"
}

# ---- several processes show up in vram top with their numbers ---------------------------------------
run "$VRAM" top --once --json
check "vram top on an empty ledger: no process" '[[ $RC == 0 ]] && has "$OUT" "\"processes\": []"'
check "the ledger directory is 0700, the ledger and its lock file 0600" \
    '[[ $(stat -c %a "$LEDGER_DIR") == 700 && $(stat -c %a "$LEDGER") == 600 && $(stat -c %a "$LEDGER.lock") == 600 &&
       $(stat -c %s "$LEDGER") == $LEDGER_SIZE ]]'

hold a --limit 1GiB --group ga -- alloc 256 0
hold b -- async 512 1
hold c --limit 2GiB -- create 100 0 300
hold d --limit 1GiB -- alloc 64 1
wait_held a b c d
PA=${HOLD_PID[a]} PB=${HOLD_PID[b]} PC=${HOLD_PID[c]} PD=${HOLD_PID[d]}
OUT="a=$(held a) b=$(held b) c=$(held c) d=$(held d)"
check "four processes under vram run hold their blocks" '[[ $OUT == "a=0 b=0 c=0 d=0" ]]'
top_json
check "vram top --json: A on device 0 with its limit, in use, peak, free and group" \
    'has "$OUT" "$(row $PA 0 $UUID0 $GiB $((256 * MiB)) $((256 * MiB)) $((768 * MiB)) ga 0)"'
check "vram top --json: B on device 1, no limit (free null), no group" \
    'has "$OUT" "$(row $PB 1 $UUID1 0 $((512 * MiB)) $((512 * MiB)) null - 0)"'
check "vram top --json: C (cuMemCreate; 300 MiB taken and freed before, so its peak is 300 MiB) and D" \
    'has "$OUT" "$(row $PC 0 $UUID0 $((2 * GiB)) $((100 * MiB)) $((300 * MiB)) $((1948 * MiB)) - 0)" &&
     has "$OUT" "$(row $PD 1 $UUID1 $GiB $((64 * MiB)) $((64 * MiB)) $((960 * MiB)) - 0)"'
check "vram top --json lists exactly four processes" '[[ $(grep -o "\"pid\"" <<<"$OUT" | wc -l) == 4 ]]'
run "$VRAM" top --once
check "vram top --once: a table with every process, its device and numbers" \
    '[[ $RC == 0 ]] && has "$OUT" "4 process slots" && has "$OUT" "PID" && has "$OUT" "GROUP LIMIT" &&
     grep -qE "^$PA +vram_shim_app_d +0/$UUID0 +1.00 GiB +256.0 MiB +256.0 MiB +768.0 MiB +ga " <<<"$OUT" &&
     grep -qE "^$PB +vram_shim_app_d +1/$UUID1 +- +512.0 MiB +512.0 MiB +- +- " <<<"$OUT" &&
     has "$OUT" "$PC " && has "$OUT" "$PD "'

# ---- the live vram top in a terminal (tmux): redrawn in place, device lines, history, keys ------------
# Skipped without tmux outside CI (CI=1, as .ci/run sets it and installs tmux, makes it a failure).
if command -v tmux >/dev/null; then
    TSOCK=$TMP/tmux.sock
    screen_text() { tmux -S "$TSOCK" capture-pane -p -t vt; }
    # wait_screen TEXT: until the screen shows TEXT (10 s at most); OUT is the last screen
    wait_screen() {
        for _ in $(seq 100); do OUT=$(screen_text 2>/dev/null || true); has "$OUT" "$1" && return 0; sleep 0.1; done
        return 1
    }
    # wait_true EXPR: until EXPR (evaluated on OUT, the screen) holds, 10 s at most: a loaded machine
    # may show a screen half redrawn, or the history bar after more than one refresh
    wait_true() {
        for _ in $(seq 100); do OUT=$(screen_text 2>/dev/null || true); eval "$1" && return 0; sleep 0.1; done
        return 1
    }
    tmux -S "$TSOCK" -f /dev/null new-session -d -s vt -x 230 -y 40 \
        "env XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR' '$VRAM' top; echo top-exited=\$?; sleep 30"
    RC=0; ERR=
    SCREEN1='has "$OUT" "4 process slots" && has "$OUT" "keys: m in use" &&
         grep -qE "^device $UUID0 +2 processes +in use +356.0 MiB" <<<"$OUT" &&
         grep -qE "^device $UUID1 +2 processes +in use +576.0 MiB" <<<"$OUT" &&
         has "$OUT" "$PA " && has "$OUT" "$PB " && has "$OUT" "$PC " && has "$OUT" "$PD "'
    wait_true "$SCREEN1" || true
    check "live vram top (tmux): header, keys, a line per device and every process" "$SCREEN1"
    SCREEN2='[[ $(grep -c "process slots" <<<"$OUT") == 1 ]] && grep -qE "^$PB .*\[ *[.:=+*#%@-]+\]$" <<<"$OUT"'
    sleep 1.2
    wait_true "$SCREEN2" || true
    check "live vram top: in place (one header on the screen) with a history bar per process" "$SCREEN2"
    tmux -S "$TSOCK" send-keys -t vt m
    SCREEN3='has "$OUT" "sorted by in use" && [[ $(grep -E "^[0-9]+ +vram_shim" <<<"$OUT" | head -1) == "$PB "* &&
           $(grep -E "^[0-9]+ +vram_shim" <<<"$OUT" | tail -1) == "$PD "* ]]'
    wait_true "$SCREEN3" || true
    check "live vram top: key m sorts by use (B, 512 MiB, first; D, 64 MiB, last)" "$SCREEN3"
    tmux -S "$TSOCK" send-keys -t vt q
    wait_screen "top-exited=0" || true
    check "live vram top: q quits with status 0 and gives the screen back" \
        'has "$OUT" "top-exited=0" && ! has "$OUT" "keys: m in use"'
    tmux -S "$TSOCK" kill-server 2>/dev/null || true
elif [[ -n ${CI:-} ]]; then
    RC=1; OUT=; ERR="tmux is not installed (.ci/run installs it)"
    check "live vram top (tmux)" false
else
    echo "SKIP  live vram top: tmux is not installed (apt-get install tmux; .ci/run installs it)"
fi

# ---- kill -9: the slot disappears; a normal exit frees it --------------------------------------------
kill9 b
top_json
check "kill -9: the process is gone from vram top, its slot reclaimed as top read" \
    '[[ $RC == 0 ]] && ! has "$OUT" "\"pid\": $PB," && has "$OUT" "\"reclaimed\": 1," && has "$OUT" "\"pid\": $PA,"'
release d
top_json
check "a process that exits frees its own slot" '! has "$OUT" "\"pid\": $PD," && has "$OUT" "\"reclaimed\": 0,"'
check "the exiting process freed its block first (free_after = its limit)" 'has "$(cat $TMP/d.out)" "free_after=$GiB total=$GiB"'
release a
release c
top_json
check "all released: vram top lists none" '[[ $RC == 0 ]] && has "$OUT" "\"processes\": []"'

# A command named with a double quote, a backslash, a line feed and a byte that is not UTF-8 (a symlink to
# app_driver named q"b\c, LF, d, 0xff, e: its comm): listed whole, the ledger keeping printable ASCII ('?'
# for the line feed and 0xff).
mkdir "$TMP/bin"
ODD=$(printf 'q"b\\c\nd\xffe')
ln -s "$APP" "$TMP/bin/$ODD"
APP_SAVED=$APP APP=$TMP/bin/$ODD
hold odd -- alloc 64 0
APP=$APP_SAVED
wait_held odd
top_json
check "a command with a quote, a backslash, a line feed and byte 0xff: listed whole (LF and 0xff as '?'), escaped in JSON" \
    'has "$OUT" "\"pid\": ${HOLD_PID[odd]}, \"command\": \"q\\\"b\\\\c?d?e\","'
release odd

# ---- vram top --prometheus: Prometheus' text format, checked by promtool and value by value ----------------
# promtool (Debian: prometheus) parses and lints it; skipped without it outside CI (.ci/run installs it).
if command -v promtool >/dev/null; then
    U=$(id -un)
    # promtool_ok: OUT (not empty) passes `promtool check metrics` without a word (no parse error, no lint
    # warning), every family's lines together (each metric name in one run of lines) and no series twice
    promtool_ok() {
        local said names
        said=$(promtool check metrics <<<"$OUT" 2>&1) || { echo "promtool: $said"; return 1; }
        [[ -z $said && -n $OUT ]] || { echo "promtool: $said"; return 1; }
        names=$(grep -v '^#' <<<"$OUT" | sed 's/[{ ].*//' | uniq)
        [[ -z $(sort <<<"$names" | uniq -d) ]] || { echo "a family in two places"; return 1; }
        [[ -z $(grep -v '^#' <<<"$OUT" | sed 's/ [^ ]*$//' | sort | uniq -d) ]] || { echo "a series twice"; return 1; }
    }
    # samples: OUT's sample lines, sorted (to compare with the expected ones, sorted)
    samples() { grep -v '^#' <<<"$OUT" | LC_ALL=C sort; }
    FAMILIES="vram_ledger_info vram_ledger_live_slots vram_ledger_max_slots vram_process_limit_bytes
              vram_process_in_use_bytes vram_process_peak_bytes vram_process_asleep vram_process_host_bytes
              vram_process_over_limit vram_process_overflow_bytes vram_group_limit_bytes vram_group_in_use_bytes"
    families_ok() {
        for f in $FAMILIES; do has "$OUT" "# HELP $f " && has "$OUT" "# TYPE $f gauge" || return 1; done
        [[ $(grep -c '^# TYPE' <<<"$OUT") == 12 ]]
    }
    run "$VRAM" top --prometheus
    EXPECT="vram_ledger_info{path=\"$LEDGER\",user=\"$U\"} 1
vram_ledger_live_slots{user=\"$U\"} 0
vram_ledger_max_slots{user=\"$U\"} 1024"
    check "vram top --prometheus, empty ledger: promtool accepts it; every family's HELP and TYPE (gauge), no process or group series" \
        '[[ $RC == 0 ]] && promtool_ok && families_ok && [[ $(samples) == "$(LC_ALL=C sort <<<"$EXPECT")" ]]'

    # Five processes on two devices: limits or none, group ga on both devices (limits 2 and 3 GiB on device
    # 0, none on device 1), group gb; one whose command needs escaping (ODD, above).
    hold p1 --limit 1GiB --group ga --group-limit 2GiB -- alloc 256 0
    hold p2 --group ga --group-limit 3GiB -- alloc 128 0
    hold p3 --limit 2GiB --group ga -- create 100 1 300
    hold p4 -- async 512 1
    APP_SAVED=$APP APP=$TMP/bin/$ODD
    hold p5 --limit 512MiB --group gb --group-limit 1GiB -- alloc 64 0
    APP=$APP_SAVED
    wait_held p1 p2 p3 p4 p5
    OUT="$(held p1)$(held p2)$(held p3)$(held p4)$(held p5)"
    check "five processes under vram run for --prometheus hold their blocks" '[[ $OUT == 00000 ]]'
    # proc METRIC NAME DEV UUID GROUP VALUE [COMMAND]: one process series as vram top --prometheus writes it
    proc() {
        local g=
        [[ $5 != - ]] && g=",group=\"$5\""
        printf '%s{pid="%s",command="%s",device="%s",uuid="%s"%s,user="%s"} %s\n' \
            "$1" "${HOLD_PID[$2]}" "${7:-vram_shim_app_d}" "$3" "$4" "$g" "$U" "$6"
    }
    ODD_LABEL='q\"b\\c?d?e'
    EXPECT="vram_ledger_info{path=\"$LEDGER\",user=\"$U\"} 1
vram_ledger_live_slots{user=\"$U\"} 5
vram_ledger_max_slots{user=\"$U\"} 1024
$(proc vram_process_limit_bytes p1 0 $UUID0 ga $GiB)
$(proc vram_process_limit_bytes p3 1 $UUID1 ga $((2 * GiB)))
$(proc vram_process_limit_bytes p5 0 $UUID0 gb $((512 * MiB)) "$ODD_LABEL")
$(proc vram_process_in_use_bytes p1 0 $UUID0 ga $((256 * MiB)))
$(proc vram_process_in_use_bytes p2 0 $UUID0 ga $((128 * MiB)))
$(proc vram_process_in_use_bytes p3 1 $UUID1 ga $((100 * MiB)))
$(proc vram_process_in_use_bytes p4 1 $UUID1 - $((512 * MiB)))
$(proc vram_process_in_use_bytes p5 0 $UUID0 gb $((64 * MiB)) "$ODD_LABEL")
$(proc vram_process_peak_bytes p1 0 $UUID0 ga $((256 * MiB)))
$(proc vram_process_peak_bytes p2 0 $UUID0 ga $((128 * MiB)))
$(proc vram_process_peak_bytes p3 1 $UUID1 ga $((300 * MiB)))
$(proc vram_process_peak_bytes p4 1 $UUID1 - $((512 * MiB)))
$(proc vram_process_peak_bytes p5 0 $UUID0 gb $((64 * MiB)) "$ODD_LABEL")
$(for p in p1:0:$UUID0:ga p2:0:$UUID0:ga p3:1:$UUID1:ga p4:1:$UUID1:- p5:0:$UUID0:gb; do
    IFS=: read -r n d u g <<<"$p"; c=; [[ $n == p5 ]] && c=$ODD_LABEL
    proc vram_process_asleep $n $d $u $g 0 "$c"; proc vram_process_host_bytes $n $d $u $g 0 "$c"
    proc vram_process_over_limit $n $d $u $g 0 "$c"; proc vram_process_overflow_bytes $n $d $u $g 0 "$c"; done)
vram_group_limit_bytes{group=\"ga\",uuid=\"$UUID0\",user=\"$U\"} $((2 * GiB))
vram_group_limit_bytes{group=\"gb\",uuid=\"$UUID0\",user=\"$U\"} $GiB
vram_group_in_use_bytes{group=\"ga\",uuid=\"$UUID0\",user=\"$U\"} $((384 * MiB))
vram_group_in_use_bytes{group=\"ga\",uuid=\"$UUID1\",user=\"$U\"} $((100 * MiB))
vram_group_in_use_bytes{group=\"gb\",uuid=\"$UUID0\",user=\"$U\"} $((64 * MiB))"
    run "$VRAM" top --prometheus
    check "vram top --prometheus: promtool accepts it, without a warning" '[[ $RC == 0 ]] && promtool_ok && families_ok'
    check "vram top --prometheus: exactly these series: per process and device its limit (none without one), in use and peak; per group and device its use and smallest member limit (none without one); the command escaped" \
        '[[ $(samples) == "$(LC_ALL=C sort <<<"$EXPECT")" ]] || { diff <(LC_ALL=C sort <<<"$EXPECT") <(samples); false; }'
    check "vram top --prometheus: families in their order (ledger, process, group), each under its HELP and TYPE" \
        '[[ $(grep "^# TYPE" <<<"$OUT" | cut -d" " -f3 | tr "\n" " ") == "$(echo $FAMILIES) " ]] &&
         [[ $(grep -A1 "^# TYPE vram_group_in_use_bytes" <<<"$OUT" | tail -1) == "vram_group_in_use_bytes{group=\"ga\",uuid=\"$UUID0\""* ]]'
    P4=${HOLD_PID[p4]}
    kill9 p4
    run "$VRAM" top --prometheus
    check "vram top --prometheus after kill -9 of one process: its series are gone, its slot reclaimed" \
        '[[ $RC == 0 ]] && promtool_ok && has "$OUT" "vram_ledger_live_slots{user=\"$U\"} 4" &&
         ! has "$OUT" "pid=\"$P4\"" && [[ $(grep -c "^vram_process_in_use_bytes" <<<"$OUT") == 4 ]]'
    for p in p1 p2 p3 p5; do release $p; done

    # The ledger's path is bytes: a directory named with a double quote, a backslash, a line feed and a byte
    # that is not UTF-8 (0xff) gives a label value that is escaped and valid UTF-8 (U+FFFD for 0xff).
    ODD_DIR=$TMP/$ODD
    run env VRAM_LEDGER_DIR="$ODD_DIR" "$VRAM" top --prometheus
    check "vram top --prometheus, a ledger path that needs escaping and is not UTF-8: escaped, U+FFFD, promtool accepts it" \
        '[[ $RC == 0 ]] && promtool_ok &&
         has "$OUT" "vram_ledger_info{path=\"$TMP/q\\\"b\\\\c\\nd$(printf "\xef\xbf\xbd")e/ledger\",user=\"$U\"} 1"'
elif [[ -n ${CI:-} ]]; then
    RC=1; OUT=; ERR="promtool is not installed (.ci/run installs prometheus)"
    check "vram top --prometheus (promtool)" false
else
    echo "SKIP  vram top --prometheus: promtool is not installed (apt-get install --no-install-recommends prometheus)"
fi
run bash -c '"$1" top --prometheus >/dev/full' - "$VRAM"
check "vram top --prometheus to a full disk (/dev/full): exit 1 and says why (so that > f.tmp && mv never installs it)" \
    '[[ $RC == 1 ]] && has "$ERR" "vram top: cannot write the metrics to the standard output: No space left on device"'
run "$VRAM" top --prometheus --json
check "vram top --prometheus --json: usage error" '[[ $RC == 2 ]] && has "$ERR" "--json and --prometheus cannot be given together"'
run "$VRAM" top --help
check "vram top --help documents --prometheus" '[[ $RC == 0 ]] && has "$OUT" "top [--json] [--once] [--prometheus]" && has "$OUT" "--prometheus  print the ledger once in Prometheus'"'"' text format"'

# ---- group limits -------------------------------------------------------------------------------------
G="--group gg --group-limit 1GiB --log"
hold g2 $G -- alloc 768 0
wait_held g2
OUT="g2=$(held g2)"
check "group gg (1 GiB): one process alone takes 768 MiB" '[[ $OUT == "g2=0" ]]'
release g2
hold g1 $G -- alloc 768 0
wait_held g1
hold g2 $G -- alloc 512 0
wait_held g2
OUT="g1=$(held g1) g2=$(held g2)"
ERR=$(cat "$TMP/g2.err")
check "a second process of the group cannot pass 1 GiB together (768 + 512 MiB): CUDA_ERROR_OUT_OF_MEMORY" \
    '[[ $OUT == "g1=0 g2=2" ]]'
check "--log says the group limit was the cause, with the group's numbers" \
    'has "$ERR" "refused: the vram group limit would be exceeded (group gg uses 768.00 MiB = 805306368 bytes on $UUID0, group limit 1.00 GiB = 1073741824 bytes, from VRAM_GROUP_LIMIT)"'
release g2
run "$VRAM" run --growth $G -- "$APP" dlsym info 0
check "next to 768 MiB of the group, cuMemGetInfo's free is the 256 MiB the group has left" \
    '[[ $RC == 0 ]] && has "$OUT" "free=268435456"'
# NVML (the fake libnvidia-ml.so.1: 16 GiB cards, all free; _v2 512 MiB reserved) gives the same free as
# cuMemGetInfo under the group limit, and used = total - free (- reserved), as on a real card.
CARD=$((16 * GiB)) M128=$((128 * MiB)) M512=$((512 * MiB))
run "$VRAM" run --growth $G -- "$APP" dlsym nvml 128
check "NVML next to 768 MiB of the group (+128 MiB of its own, no --limit): free is the 128 MiB the group has left, as cuMemGetInfo's" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml_alloc=0" && has "$OUT" "cuinfo=$M128 total=$CARD" &&
     has "$OUT" "nvml 0 total=$CARD free=$M128 used=$((CARD - M128))" &&
     has "$OUT" "nvml_v2 0 total=$CARD reserved=$M512 free=$M128 used=$((CARD - M512 - M128))"'
check "NVML under the group limit, the other device: the group'\''s whole 1 GiB there is free" \
    'has "$OUT" "nvml 1 total=$CARD free=$GiB used=$((CARD - GiB))" &&
     has "$OUT" "nvml_v2 1 total=$CARD reserved=$M512 free=$GiB used=$((CARD - M512 - GiB))"'
run "$VRAM" run --growth --limit 4GiB $G -- "$APP" dlsym nvml 128
check "NVML under --limit 4GiB and the group limit: total the limit, free the group'\''s 128 MiB left, as cuMemGetInfo's" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml_alloc=0" && has "$OUT" "cuinfo=$M128 total=$((4 * GiB))" &&
     has "$OUT" "nvml 0 total=$((4 * GiB)) free=$M128 used=$((4 * GiB - M128))" &&
     has "$OUT" "nvml_v2 0 total=$((4 * GiB)) reserved=0 free=$M128 used=$((4 * GiB - M128))" &&
     has "$OUT" "nvml 1 total=$((4 * GiB)) free=$GiB used=$((3 * GiB))"'
run "$VRAM" run --growth $G -- "$APP" nvml_only
check "NVML in a member that never loads CUDA (as nvidia-smi): the group's 256 MiB left on card 0, 1 GiB on card 1" \
    '[[ $RC == 0 ]] && has "$OUT" "cuda_loaded=0" &&
     has "$OUT" "nvml 0 total=$CARD free=$((256 * MiB)) used=$((CARD - 256 * MiB))" &&
     has "$OUT" "nvml 1 total=$CARD free=$GiB used=$((CARD - GiB))"'
run "$VRAM" run --growth $G -- "$APP" dlsym fill alloc 64 0
check "next to 768 MiB of the group, another member fills only the remaining 256 MiB" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=268435456 err=2" && has "$OUT" "refill=0"'
hold g3 $G -- alloc 768 1
wait_held g3
OUT="g3=$(held g3)"
check "the group limit is per device: 768 MiB more on device 1 fit" '[[ $OUT == "g3=0" ]]'
run "$VRAM" run --growth --group other --group-limit 1GiB -- "$APP" dlsym fill alloc 256 0
check "another group is not charged for gg's memory" '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2"'
run "$VRAM" run --growth --group gg -- "$APP" dlsym fill alloc 256 0
check "a member without --group-limit is not limited" '[[ $RC == 0 ]] && has "$OUT" "chunks=64 "'
top_json
check "vram top shows the group and its limit" \
    'has "$OUT" "$(row ${HOLD_PID[g1]} 0 $UUID0 0 $((768 * MiB)) $((768 * MiB)) null gg $GiB)"'
kill9 g1
run "$VRAM" run --growth $G -- "$APP" dlsym info 0
check "after kill -9 of a member holding 768 MiB, cuMemGetInfo's free is the group's whole 1 GiB again" \
    '[[ $RC == 0 ]] && has "$OUT" "free=$GiB "'
hold g4 $G -- alloc 768 0
wait_held g4
OUT="g4=$(held g4)"
check "after kill -9 of a member its 768 MiB no longer count toward the group" '[[ $OUT == "g4=0" ]]'
release g4
release g3

# Four members start at once, each asking 384 MiB of a 1 GiB group: exactly two get it.
for i in 1 2 3 4; do hold r$i --group race --group-limit 1GiB -- alloc 384 0; done
wait_held r1 r2 r3 r4
OUT="$(held r1)$(held r2)$(held r3)$(held r4)"
check "4 processes racing for a 1 GiB group (384 MiB each): exactly 2 succeed" \
    '[[ $(grep -o 0 <<<"$OUT" | wc -l) == 2 && $(grep -o 2 <<<"$OUT" | wc -l) == 2 ]]'
for i in 1 2 3 4; do release r$i; done

# ---- a ledger corrupted or of another version is moved aside and rebuilt ----------------------------
bad_count() { ls "$LEDGER_DIR" | grep -c '^ledger\.bad\.' || true; }
head -c 5000 /dev/urandom >"$LEDGER"
run "$VRAM" top --once --json
check "garbage of the wrong size: detected, moved aside, rebuilt; vram top works" \
    '[[ $RC == 0 ]] && has "$ERR" "was of 5000 bytes" && has "$ERR" "moved aside to $LEDGER.bad." &&
     has "$OUT" "\"processes\": []" && [[ $(bad_count) == 1 && $(stat -c %s "$LEDGER") == $LEDGER_SIZE ]]'
head -c 64 /dev/urandom | dd of="$LEDGER" conv=notrunc status=none
run "$VRAM" top --once --json
check "garbage over the header: detected (magic) and rebuilt" \
    '[[ $RC == 0 ]] && has "$ERR" "corrupted (bad magic number)" && [[ $(bad_count) == 2 ]]'
printf '\x63\x00\x00\x00' | dd of="$LEDGER" bs=1 seek=8 conv=notrunc status=none
run "$VRAM" top --once --json
check "a ledger of another layout version: detected and rebuilt" \
    '[[ $RC == 0 ]] && has "$ERR" "of another version (layout 99, this is 3)" && [[ $(bad_count) == 3 ]]'
printf '\x01' | dd of="$LEDGER" bs=1 seek=48 conv=notrunc status=none
run "$VRAM" top --once --json
check "a header byte changed: the checksum catches it" \
    '[[ $RC == 0 ]] && has "$ERR" "corrupted (bad header checksum)" && [[ $(bad_count) == 4 ]]'
head -c $((1024 * 168)) /dev/urandom | dd of="$LEDGER" bs=64 seek=1 conv=notrunc status=none
run "$VRAM" top --once --json
check "garbage in the slots (header intact): no crash, no garbage listed, the slots reclaimed" \
    '[[ $RC == 0 ]] && has "$OUT" "\"processes\": []" && ! has "$ERR" "rebuilt"'
run "$VRAM" top --once --json
check "... and the next read finds nothing left to reclaim" '[[ $RC == 0 ]] && has "$OUT" "\"reclaimed\": 0,"'
head -c 300 /dev/urandom >"$LEDGER"
hold v --log -- alloc 128 0
wait_held v
top_json
ERR=$(cat "$TMP/v.err")
check "the preload library rebuilds a corrupted ledger too and registers in the new one" \
    '[[ $(held v) == 0 ]] && has "$ERR" "was of 300 bytes, not $LEDGER_SIZE; moved aside" && has "$OUT" "\"pid\": ${HOLD_PID[v]},"'
release v

# A usage above the limit (written into the slot by hand: the shim itself never lets it pass) shows
# 0 free, not a wrapped number. The ledger is empty here, so the process takes slot 0 (offset 64;
# in_use at +24).
hold w --limit 1GiB -- alloc 128 0
wait_held w
printf '\x00\x00\x00\xc0\x00\x00\x00\x00' | dd of="$LEDGER" bs=1 seek=$((64 + 24)) conv=notrunc status=none
top_json
check "in use above the limit: free_bytes 0, no unsigned wrap" \
    'has "$OUT" "\"pid\": ${HOLD_PID[w]}," && has "$OUT" "\"limit_bytes\": $GiB, \"in_use_bytes\": 3221225472, \"peak_bytes\": $((128 * MiB)), \"free_bytes\": 0,"'
run "$VRAM" top --once
check "... and the table shows 0 free" \
    'grep -qE "^${HOLD_PID[w]} +vram_shim_app_d +0/$UUID0 +1.00 GiB +3.00 GiB +128.0 MiB +0.0 MiB " <<<"$OUT"'
release w

# ---- the ledger file damaged under running programs -------------------------------------------------------
hold cm --group gc --group-limit 1GiB -- alloc 768 0
wait_held cm
head -c 64 /dev/urandom | dd of="$LEDGER" conv=notrunc status=none   # the header corrupted, the slots whole
run "$VRAM" run --growth --group gc --group-limit 1GiB -- "$APP" dlsym fill alloc 256 0
check "a corrupted header is rebuilt keeping the running members' slots: the group still counts their 768 MiB" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=1 "'
release cm
# The ledger deleted, or replaced by another file, under a running member: the member keeps its mapping
# of the old file, which no one else sees; whoever makes the new file finds the old one through the
# member's open descriptor (/proc/PID/fd) and carries its live slots, so the group still counts it.
hold dm --group gd --group-limit 1GiB -- alloc 768 0
wait_held dm
rm "$LEDGER"
hold dn --group gd --group-limit 1GiB -- alloc 512 0
wait_held dn
OUT="dm=$(held dm) dn=$(held dn)"
check "the ledger deleted under a member holding 768 MiB of a 1 GiB group: the next one cannot take 512 MiB" \
    '[[ $OUT == "dm=0 dn=2" ]]'
release dn
top_json
check "... and vram top still lists the member that mapped the deleted file" 'has "$OUT" "\"pid\": ${HOLD_PID[dm]},"'
(umask 077; : >"$LEDGER.new"); mv "$LEDGER.new" "$LEDGER"     # replaced by an empty file
hold dn --group gd --group-limit 1GiB -- alloc 512 0
wait_held dn
OUT="dm=$(held dm) dn=$(held dn)"
check "the ledger replaced by an empty file: the member's 768 MiB still count (512 MiB refused)" '[[ $OUT == "dm=0 dn=2" ]]'
release dn
mkdir -m 700 "$TMP/run3"
XDG_RUNTIME_DIR=$TMP/run3 "$VRAM" top --once >/dev/null       # a valid, empty ledger made elsewhere
cp "$TMP/run3/vram/ledger" "$LEDGER.new"; mv "$LEDGER.new" "$LEDGER"
hold dn --group gd --group-limit 1GiB -- alloc 512 0
wait_held dn
OUT="dm=$(held dm) dn=$(held dn)"
check "the ledger replaced by a valid empty ledger: the member's 768 MiB still count (512 MiB refused)" '[[ $OUT == "dm=0 dn=2" ]]'
release dn
run "$VRAM" run --growth --group gd --group-limit 1GiB -- "$APP" dlsym fill alloc 128 0
check "... and the group's remaining 256 MiB can still be taken (the member is counted once, not twice)" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=2 "'
release dm
# Truncated to nothing: the slots are gone from the file itself (the same file, so no old one to read);
# each member keeps a shadow of its slots in a sealed memfd, found the same way.
hold tm --group gt --group-limit 1GiB -- alloc 768 0
wait_held tm
truncate -s 0 "$LEDGER"
hold tn --group gt --group-limit 1GiB -- alloc 512 0
wait_held tn
OUT="tm=$(held tm) tn=$(held tn)"
check "the ledger truncated to nothing under a member holding 768 MiB: 512 MiB more are refused (from its shadow)" \
    '[[ $OUT == "tm=0 tn=2" ]]'
release tn
release tm
hold tr --group gt --group-limit 1GiB -- alloc 256 0
wait_held tr
truncate -s 0 "$LEDGER"                       # its mapping now lies past the file's end
fd=${HOLD_FD[tr]}; exec {fd}>&-
set +e; wait "${HOLD_PID[tr]}"; RC=$?; set -e
unset "HOLD_PID[tr]" "HOLD_FD[tr]"
OUT=$(cat "$TMP/tr.out"); ERR=$(cat "$TMP/tr.err")
check "a ledger truncated under a program costs the ledger's view, not the program (no SIGBUS)" \
    '[[ $RC == 0 ]] && has "$OUT" "free_after" && has "$ERR" "the ledger file was truncated under this process"'
run "$VRAM" top --once
check "... and vram top rebuilds it" '[[ $RC == 0 ]]'
run env LD_PRELOAD="$TRUNC_LIB" TRUNCATE_ON_LOCK_PATH="$LEDGER" "$VRAM" top --once --json
check "the ledger truncated while vram top reads its slots: no SIGBUS; it says so and reads the file again" \
    '[[ $RC == 0 ]] && has "$ERR" "the ledger was truncated while it was read" && has "$OUT" "\"processes\": []" &&
     [[ $(stat -c %s "$LEDGER") == $LEDGER_SIZE ]]'

# A member that allocates after the ledger was replaced by something it cannot open safely: its old
# mapping may miss what the others hold now, so its group allocations are refused until the ledger can
# be opened again (never its own usage alone).
rm -f "$TMP/s.in"
mkfifo "$TMP/s.in"
"$VRAM" run --growth --group gs --group-limit 1GiB -- "$APP" dlsym script 0 <"$TMP/s.in" >"$TMP/s.out" 2>"$TMP/s.err" &
S_PID=$!
exec {SFD}>"$TMP/s.in"
S_LINES=0
say_s() {
    echo "$1" >&$SFD
    S_LINES=$((S_LINES + 1))
    for _ in $(seq 1000); do
        [[ $(wc -l <"$TMP/s.out") -ge $S_LINES ]] && break
        sleep 0.01
    done
    ANSWERS="$ANSWERS $(sed -n "${S_LINES}p" "$TMP/s.out")"
}
ANSWERS=
say_s "alloc 64"
rm "$LEDGER"
ln -s /dev/null "$LEDGER"                       # the path now a symlink: refused when opened
say_s "alloc 64"
rm "$LEDGER"
say_s "alloc 64"
exec {SFD}>&-
wait "$S_PID" || true
OUT=$ANSWERS ERR=$(cat "$TMP/s.err")
check "a member whose ledger was replaced by a symlink refuses its group allocations, and allocates again once the path is safe" \
    '[[ $OUT == " alloc=0 alloc=2 alloc=0" ]] && has "$ERR" "are refused until it can be"'

# The lock file deleted under a member: whoever comes next locks a new file at the path; the member must
# lock that one too (not its old, deleted one), so it waits while another process holds it.
rm -f "$TMP/s.in" "$TMP/s.out"
mkfifo "$TMP/s.in"
"$VRAM" run --growth --group gs --group-limit 1GiB -- "$APP" dlsym script 0 <"$TMP/s.in" >"$TMP/s.out" 2>"$TMP/s.err" &
S_PID=$!
exec {SFD}>"$TMP/s.in"
S_LINES=0 ANSWERS=
say_s "alloc 64"
rm "$LEDGER.lock"
(umask 077; exec flock "$LEDGER.lock" sleep 1.5) &
LOCKER=$!
sleep 0.3
T0=$(date +%s%N)
say_s "alloc 64"
T1=$(date +%s%N)
wait "$LOCKER" || true
exec {SFD}>&-
wait "$S_PID" || true
OUT="$ANSWERS waited=$(( (T1 - T0) / 1000000 ))ms"
check "the lock file deleted under a member: it then locks the new file at the path (waits for its holder, >= 1 s)" \
    '[[ $ANSWERS == " alloc=0 alloc=0" ]] && (( (T1 - T0) >= 1000000000 ))'

# ---- permissions ------------------------------------------------------------------------------------------
PRELOAD=$("$VRAM" run -- env | sed -n 's/^LD_PRELOAD=//p')
chmod 755 "$LEDGER_DIR"
run "$VRAM" top --once
check "a ledger directory open to others is refused" \
    '[[ $RC == 1 ]] && has "$ERR" "has mode 755; it must not be open to group or others"'
run env LD_PRELOAD="$PRELOAD" VRAM_GROWTH=1 VRAM_GROUP=gg VRAM_GROUP_LIMIT=1GiB "$APP" dlsym fill alloc 256 0
check "... the preload library alone (no vram run) runs on, its group limit failing closed on its own usage" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=4 " && has "$ERR" "the ledger is unavailable" &&
     has "$ERR" "its group limit holds for its own usage alone"'
chmod 750 "$LEDGER_DIR"
run "$VRAM" top --once
check "a ledger directory open to its group alone (750) is refused too" \
    '[[ $RC == 1 ]] && has "$ERR" "has mode 750; it must not be open to group or others"'
chmod 777 "$LEDGER_DIR"
hold um --group gg --group-limit 1GiB -- alloc 768 0
wait_held um
run "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym fill alloc 128 0
check "vram run --group-limit repairs a ledger directory of the user's at mode 777 (0700, said) and the group limit holds across processes" \
    '[[ $RC == 0 ]] && [[ $(stat -c %a "$LEDGER_DIR") == 700 ]] && has "$(cat $TMP/um.err)" "had mode 777 (open to group or others); set it to 0700" &&
     [[ $(held um) == 0 ]] && has "$OUT" "chunks=2 "'
release um
chmod 770 "$LEDGER_DIR"
run "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym info 0
check "... and one open to its group alone (770): set to 0700 too, said" \
    '[[ $RC == 0 ]] && [[ $(stat -c %a "$LEDGER_DIR") == 700 ]] && has "$ERR" "had mode 770 (open to group or others); set it to 0700"'
mkdir -m 700 "$TMP/run2" "$TMP/elsewhere"
ln -s "$TMP/elsewhere" "$TMP/run2/vram"
run env XDG_RUNTIME_DIR="$TMP/run2" "$VRAM" top --once
check "a ledger directory that is a symlink is refused" '[[ $RC == 1 ]] && has "$ERR" "is not a directory (a symlink"'
run env XDG_RUNTIME_DIR="$TMP/run2" "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym fill alloc 256 0
check "... and vram run --group-limit does not start the program, saying why" \
    '[[ $RC == 1 ]] && [[ -z $OUT ]] && has "$ERR" "not starting" && has "$ERR" "is not a directory (a symlink"'
mv "$LEDGER" "$TMP/elsewhere/ledger"
ln -s "$TMP/elsewhere/ledger" "$LEDGER"
run "$VRAM" top --once
check "a ledger file that is a symlink is refused" '[[ $RC == 1 ]] && has "$ERR" "cannot open $LEDGER"'
run "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym fill alloc 256 0
check "... and vram run --group-limit does not start the program, saying why" \
    '[[ $RC == 1 ]] && [[ -z $OUT ]] && has "$ERR" "not starting" && has "$ERR" "cannot open $LEDGER"'
rm "$LEDGER"
"$VRAM" top --once >/dev/null
chmod 666 "$LEDGER"
run "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym fill alloc 256 0
check "a world-writable ledger file: vram run --group-limit does not start the program, saying why" \
    '[[ $RC == 1 ]] && [[ -z $OUT ]] && has "$ERR" "not starting" && has "$ERR" "$LEDGER is not a regular file of this user with mode 0600"'
run env VRAM_GROUP=gg VRAM_GROUP_LIMIT=1GiB "$VRAM" run --growth -- "$APP" dlsym fill alloc 256 0
check "... and so for a group limit inherited from the environment (no --group)" \
    '[[ $RC == 1 ]] && [[ -z $OUT ]] && has "$ERR" "not starting"'
run "$VRAM" run --growth --group gg -- "$APP" dlsym fill alloc 8192 0
check "... without a group limit the program runs (the ledger only lists it)" '[[ $RC == 0 ]] && has "$OUT" "chunks=2 "'
rm "$LEDGER"
chmod 644 "$LEDGER.lock"
run "$VRAM" top --once
check "a lock file open to others is refused" '[[ $RC == 1 ]] && has "$ERR" "with mode 0600; refused"'
run "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym fill alloc 256 0
check "... and vram run --group-limit does not start the program, saying why" \
    '[[ $RC == 1 ]] && [[ -z $OUT ]] && has "$ERR" "not starting" && has "$ERR" "with mode 0600; refused"'
chmod 600 "$LEDGER.lock"

# ---- where the ledger is --------------------------------------------------------------------------------------
run env VRAM_LEDGER_DIR="$TMP/ld/" "$VRAM" top --once --json
check "VRAM_LEDGER_DIR (absolute) holds the ledger: made 0700, before XDG_RUNTIME_DIR" \
    '[[ $RC == 0 ]] && has "$OUT" "\"ledger\": \"$TMP/ld/ledger\"" && [[ $(stat -c %a "$TMP/ld") == 700 ]]'
run env VRAM_LEDGER_DIR=ld "$VRAM" run --growth --group gg --group-limit 1GiB -- "$APP" dlsym info 0
check "VRAM_LEDGER_DIR relative: refused by name (vram run --group-limit does not start the program)" \
    '[[ $RC == 1 && -z $OUT ]] && has "$ERR" "VRAM_LEDGER_DIR=ld is not an absolute path"'
run env XDG_RUNTIME_DIR="$TMP/missing" "$VRAM" top --once --json
check "an XDG_RUNTIME_DIR that does not exist here (exported from elsewhere) is passed over: /dev/shm/vram-<uid>" \
    '[[ $RC == 0 ]] && has "$OUT" "\"ledger\": \"/dev/shm/vram-$(id -u)/ledger\"" && [[ -z $ERR ]]'

# ---- a ledger directory squatted by another user ------------------------------------------------------------
# Without XDG_RUNTIME_DIR (or one that is not this user's) the ledger's default place is /dev/shm/vram-<uid>,
# a name any local user can take first. User A (made here) takes B's. B's vram run --group-limit and vram top
# still work, in a place only B can own (no logind directory /run/user/<uid> here, so under B's home from the
# password database, per host; HOME is set elsewhere to show it is not read), say so once, and B's processes
# share one budget there. Needs root (useradd); skipped without it outside CI.
if [[ $(id -u) == 0 ]] && command -v useradd >/dev/null && command -v setpriv >/dev/null; then
    SQ_A=vramsqa$$ SQ_B=vramsqb$$
    useradd -m -s /bin/bash "$SQ_A" && SQ_USERS+=("$SQ_A")
    useradd -m -s /bin/bash "$SQ_B" && SQ_USERS+=("$SQ_B")
    UA=$(id -u "$SQ_A") UB=$(id -u "$SQ_B")
    HB=$(getent passwd "$SQ_B" | cut -d: -f6)
    SQ_PLACE=$HB/.cache/vram/ledger-$(hostname | tr -c 'A-Za-z0-9._\n-' _)
    # the binaries where B can run them (the build tree may be closed to others, as under /root)
    SQ_BIN=$(mktemp -d /tmp/vram-ledger-bin.XXXXXX)
    chmod 755 "$SQ_BIN"
    mkdir -m 755 "$SQ_BIN/fake"
    cp "$VRAM" "$(dirname "$VRAM")/libvram_preload.so" "$APP" "$SQ_BIN/"
    cp -P "$FAKE"/lib* "$SQ_BIN/fake/"
    as_b=(setpriv --reuid="$SQ_B" --regid="$SQ_B" --init-groups env -u XDG_RUNTIME_DIR -u VRAM_LEDGER_DIR
          HOME=/nonexistent LD_LIBRARY_PATH="$SQ_BIN/fake")
    setpriv --reuid="$SQ_A" --regid="$SQ_A" --init-groups mkdir -m 700 "/dev/shm/vram-$UB"
    SQ_NOTE="/dev/shm/vram-$UB belongs to uid $UA, not to this user (uid $UB): the ledger is in $SQ_PLACE instead"
    run "${as_b[@]}" "$SQ_BIN/vram" top --once --json
    check "squatted: B's vram top works, in a place under B's home named for this host, and says why once" \
        '[[ $RC == 0 ]] && has "$OUT" "\"ledger\": \"$SQ_PLACE/ledger\"" && has "$ERR" "vram top: $SQ_NOTE" &&
         [[ $(grep -c . <<<"$ERR") == 1 && $(stat -c %U:%a "$SQ_PLACE") == $SQ_B:700 ]]'
    HOLD_PREFIX=("${as_b[@]}")
    VRAM_SAVED=$VRAM APP_SAVED=$APP
    VRAM=$SQ_BIN/vram APP=$SQ_BIN/$(basename "$APP")
    hold sq1 --group sq --group-limit 1GiB --log -- alloc 768 0
    wait_held sq1
    hold sq2 --group sq --group-limit 1GiB -- alloc 512 0
    wait_held sq2
    HOLD_PREFIX=()
    OUT="sq1=$(held sq1) sq2=$(held sq2)" ERR=$(cat "$TMP/sq1.err")
    check "squatted: B's vram run --group-limit starts (saying where the ledger is, as its program does with --log), and B's two processes share its 1 GiB (768 + 512 MiB: refused)" \
        '[[ $OUT == "sq1=0 sq2=2" ]] && has "$ERR" "vram run: $SQ_NOTE" && has "$ERR" "vram: $SQ_NOTE"'
    run "${as_b[@]}" "$VRAM" top --once --json
    check "squatted: B's vram top lists B's process under its group" \
        '[[ $RC == 0 ]] && has "$OUT" "\"pid\": ${HOLD_PID[sq1]}, " && has "$OUT" "\"group\": \"sq\""'
    release sq1
    release sq2
    # a ledger directory named outright (VRAM_LEDGER_DIR) that belongs to someone else: refused, even to root
    install -d -o "$SQ_A" -g "$SQ_A" -m 700 "$TMP/ledger-of-a"
    run env VRAM_LEDGER_DIR="$TMP/ledger-of-a" "$VRAM" top --once
    check "a ledger directory of another user (VRAM_LEDGER_DIR) is refused, naming its owner" \
        '[[ $RC == 1 ]] && has "$ERR" "$TMP/ledger-of-a belongs to uid $UA, not to this user (uid $(id -u)); refused" &&
         [[ ! -e $TMP/ledger-of-a/ledger ]]'
    if [[ -d /run/user && ! -e /run/user/$UB ]]; then
        install -d -o "$SQ_B" -g "$SQ_B" -m 700 "/run/user/$UB"     # as logind makes it at B's login
        SQ_DIRS+=("/run/user/$UB")
        run "${as_b[@]}" "$VRAM" top --once --json
        check "squatted, B logged in (logind's /run/user/<uid> of B's): the ledger is there, and said" \
            '[[ $RC == 0 ]] && has "$OUT" "\"ledger\": \"/run/user/$UB/vram/ledger\"" &&
             has "$ERR" "belongs to uid $UA, not to this user (uid $UB): the ledger is in /run/user/$UB/vram instead"'
    fi
    VRAM=$VRAM_SAVED APP=$APP_SAVED
elif [[ -n ${CI:-} ]]; then
    RC=1; OUT=; ERR="not root, or useradd/setpriv missing (CI runs as root)"
    check "a ledger directory squatted by another user" false
else
    echo "SKIP  a ledger directory squatted by another user: needs root (useradd, setpriv)"
fi

# ---- options ------------------------------------------------------------------------------------------------
run "$VRAM" run --growth --group g1 --group-limit 2GiB -- env
check "vram run --group/--group-limit set VRAM_GROUP and VRAM_GROUP_LIMIT" \
    '[[ $RC == 0 ]] && has "$OUT" "VRAM_GROUP=g1" && has "$OUT" "VRAM_GROUP_LIMIT=2147483648"'
run env VRAM_GROUP_LIMIT=5 "$VRAM" run --growth --group g1 -- env
check "--group without --group-limit clears an inherited VRAM_GROUP_LIMIT" \
    '[[ $RC == 0 ]] && has "$OUT" "VRAM_GROUP=g1" && ! has "$OUT" "VRAM_GROUP_LIMIT"'
run "$VRAM" run --group-limit 1GiB -- true
check "--group-limit without --group: usage error" '[[ $RC == 2 ]] && has "$ERR" "--group-limit needs --group"'
run "$VRAM" run --group "a b" -- true
check "bad group name: usage error" '[[ $RC == 2 ]] && has "$ERR" "--group: bad NAME"'
# a name fills the ledger's 32-byte field with its NUL: 31 characters at most
name31=$(printf 'g%.0s' {1..31})
run "$VRAM" run --growth --group "$name31" -- env
check "a group name of 31 characters is taken" '[[ $RC == 0 ]] && has "$OUT" "VRAM_GROUP=$name31"'
run "$VRAM" run --growth --group "${name31}g" -- true
check "a group name of 32 characters: usage error" '[[ $RC == 2 ]] && has "$ERR" "--group: bad NAME '"'"'${name31}g'"'"'"'
run "$VRAM" run --group g --group-limit 0 -- true
check "zero group limit: usage error" '[[ $RC == 2 ]] && has "$ERR" "--group-limit: bad size"'
run "$VRAM" top --frobnicate
check "vram top: unknown option is a usage error" '[[ $RC == 2 ]] && has "$ERR" "unknown option"'
run "$VRAM" top --help
check "vram top --help documents top and the group options" \
    '[[ $RC == 0 ]] && has "$OUT" "top [--json] [--once]" && has "$OUT" "--group-limit SIZE"'

echo "$PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
