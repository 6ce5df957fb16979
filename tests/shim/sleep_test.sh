#!/usr/bin/env bash
# sleep_test.sh: `vram sleep PID` / `vram wake PID` (and --group, --device) through the driver's process
# checkpoint API, as real processes over the fake libcuda.so.1 (tests/shim/fake_ckpt.c: a locked
# process's calls wait, a checkpoint takes its memory off the shared cards and keeps its contents word,
# a restore takes it back or fails with CUDA_ERROR_OUT_OF_MEMORY), without a GPU. What is checked: the
# memory leaves the card and the group budget while asleep, vram top shows it asleep with its host
# bytes, its calls wait, its contents come back, a wake without room on the card or in the group is
# refused and loses nothing, --device wakes it on another card, a process that dies asleep leaves
# nothing, a process not under vram run, a driver without the API (or refusing it), usage errors; and
# `vram run --idle-sleep DURATION`: its watcher puts the program to sleep after DURATION without a CUDA
# call and wakes it at its next one (a kernel launch, an allocation), and exits with the program.
#
#   tests/shim/sleep_test.sh VRAM FAKE_CUDA_DIR FAKE_CUDA_NOCKPT_DIR APP_DRIVER
#
# Processes are app_driver's `script` scenario (commands on a fifo this script holds open, one answer
# line each in a file). The fake cards are 1 GiB each (FAKE_CUDA_MEM), shared through FAKE_CUDA_SHARED;
# the ledger goes to a private XDG_RUNTIME_DIR. Prints each check with PASS/FAIL, then "N passed, N
# failed"; exits 1 when a check failed.
set -euo pipefail

if [[ $# -ne 4 ]]; then
    echo "usage: $0 VRAM FAKE_CUDA_DIR FAKE_CUDA_NOCKPT_DIR APP_DRIVER" >&2
    exit 2
fi
VRAM=$1 FAKE=$2 NOCKPT=$3 APP=$4

unset VRAM_LIMIT VRAM_LOG VRAM_GROWTH VRAM_GROUP VRAM_GROUP_LIMIT CUDA_VISIBLE_DEVICES LD_PRELOAD \
      VRAM_BACKEND VRAM_SIM_DEVICES FAKE_CUDA_DEVICES FAKE_CUDA_UUID_BASE FAKE_CUDA_CHECKPOINT VRAM_IDLE_WATCHER \
      VRAM_LEDGER_DIR
for v in $(compgen -e | grep '^VRAM_LIMIT_' || true); do unset "$v"; done
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

MiB=1048576
UUID0=GPU-fa4ec0da-0000-4000-8000-000000000000
UUID1=GPU-fa4ec0da-0000-4000-8000-000000000001
TMP=$(mktemp -d)
export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
export FAKE_CUDA_SHARED=$TMP/cards FAKE_CUDA_MEM=2x1GiB
PASSED=0
FAILED=0
declare -A PID FD

cleanup() {
    exec 2>/dev/null   # no notices of the processes killed here
    for n in "${!PID[@]}"; do kill -9 "${PID[$n]}" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # run, check, has

# start NAME [VRAM RUN OPTIONS | --plain]: app_driver's script scenario on device 0 under vram run
# --growth OPTIONS (--plain: not under vram run); its pid in PID[NAME].
start() {
    local name=$1
    shift
    rm -f "$TMP/$name.in" "$TMP/$name.out" "$TMP/$name.err"
    mkfifo "$TMP/$name.in"
    local cmd=("$VRAM" run --growth "$@" -- "$APP" dlsym script 0)
    [[ ${1:-} == --plain ]] && cmd=("$APP" dlsym script 0)
    (
        for f in "${FD[@]}"; do exec {f}>&-; done
        exec "${cmd[@]}" <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err"
    ) &
    PID[$name]=$!
    local fd
    exec {fd}>"$TMP/$name.in"
    FD[$name]=$fd
    : >"$TMP/$name.out"
}

# say NAME LINE: one command to NAME.
say() { echo "$2" >&"${FD[$1]}"; }

# answer NAME N [SECONDS]: NAME's Nth answer line, waiting for it at most SECONDS (default 10); "" if none.
answer() {
    local i
    for i in $(seq $((${3:-10} * 50))); do
        [[ $(wc -l <"$TMP/$1.out") -ge $2 ]] && break
        sleep 0.02
    done
    sed -n "${2}p" "$TMP/$1.out"
}

stop() {
    local fd=${FD[$1]}
    exec {fd}>&-
    wait "${PID[$1]}" 2>/dev/null || true
    unset "PID[$1]" "FD[$1]"
}

# top_field PID KEY: KEY of PID's first row in vram top --json ("" when not listed; strings unquoted)
top_field() {
    "$VRAM" top --once --json | grep -o "{\"pid\": $1, [^}]*}" | head -1 |
        sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" || true
}

# ---- sleep: the memory leaves the card and the group budget; vram top; its calls wait ------------------
start a --group g --group-limit 768MiB
say a "alloc 512"
say a "poke 0x1234"
A=${PID[a]}
OUT="$(answer a 1) $(answer a 2)"
check "A (group g, limit 768 MiB) holds 512 MiB on card 0 and writes its contents word" '[[ $OUT == "alloc=0 poke=0" ]]'

run "$VRAM" sleep "$A"
check "vram sleep PID: exit 0, one line naming the process, its 512 MiB and its card" \
    '[[ $RC == 0 ]] && has "$OUT" "PID $A (vram_shim_app_d) is asleep: its 512.00 MiB of device memory on $UUID0 moved to host memory" && [[ -z $ERR ]]'
OUT="$(top_field "$A" state) $(top_field "$A" in_use_bytes) $(top_field "$A" host_bytes)"
check "vram top --json: A asleep, in use 0, host bytes 512 MiB" '[[ $OUT == "asleep 0 $((512 * MiB))" ]]'
run "$VRAM" top --once
check "vram top: the STATE and HOST columns (then OVERFLOW: none)" 'has "$OUT" "STATE" && grep -E "^$A .* asleep +512.0 MiB +-$" <<<"$OUT" >/dev/null'
run "$VRAM" top --prometheus
check "vram top --prometheus: vram_process_asleep 1 and vram_process_host_bytes for A" \
    'grep -q "^vram_process_asleep{pid=\"$A\".*} 1$" <<<"$OUT" && grep -q "^vram_process_host_bytes{pid=\"$A\".*} $((512 * MiB))$" <<<"$OUT"'

run "$VRAM" sleep "$A"
check "vram sleep of a process asleep: exit 0, says so" '[[ $RC == 0 ]] && has "$OUT" "PID $A (vram_shim_app_d) is asleep already"'

say a "peek"
OUT=$(answer a 3 1)
check "A's driver calls wait while it sleeps (no answer in 1 s)" '[[ -z $OUT ]]'

start b --group g --group-limit 768MiB
say b "alloc 768"
OUT=$(answer b 1)
check "B (group g) takes 768 MiB: A's 512 MiB count neither on the 1 GiB card nor in the group's 768 MiB" '[[ $OUT == alloc=0 ]]'

# ---- wake refused: the group, then the card, has no room; nothing is lost ------------------------------
run "$VRAM" wake "$A"
check "vram wake refused by the group budget: exit 3, the reason (group, use, limit, card, what A holds)" \
    '[[ $RC == 3 ]] && has "$ERR" "vram wake: PID $A (vram_shim_app_d) stays asleep: its group g uses 768.00 MiB of its 768.00 MiB limit on $UUID0, and the 512.00 MiB it holds would pass it"'
OUT="$(top_field "$A" state) $(top_field "$A" host_bytes)"
check "... A stays asleep with its host bytes" '[[ $OUT == "asleep $((512 * MiB))" ]]'
say b "free"
OUT=$(answer b 2)
check "B frees its 768 MiB" '[[ $OUT == free=0 ]]'

start c
say c "alloc 768"
OUT=$(answer c 1)
check "C (no group) takes 768 MiB of card 0" '[[ $OUT == alloc=0 ]]'
run "$VRAM" wake "$A"
check "vram wake refused by the card (no room): exit 3, the driver's error by name" \
    '[[ $RC == 3 ]] && has "$ERR" "PID $A (vram_shim_app_d) stays asleep: its card has no room for its memory (cuCheckpointProcessRestore: CUDA_ERROR_OUT_OF_MEMORY"'
OUT="$(top_field "$A" state)"
check "... A stays asleep" '[[ $OUT == asleep ]]'
say c "free"
answer c 2 >/dev/null

run "$VRAM" wake "$A"
check "vram wake once there is room: exit 0, its 512 MiB back on its card" \
    '[[ $RC == 0 ]] && has "$OUT" "PID $A (vram_shim_app_d) is awake: its 512.00 MiB of device memory are back on $UUID0"'
OUT=$(answer a 3)
check "A's waiting call goes on, and its contents word came back" '[[ $OUT == peek=0x1234 ]]'
OUT="$(top_field "$A" state) $(top_field "$A" in_use_bytes) $(top_field "$A" host_bytes)"
check "vram top: A awake, 512 MiB in use again" '[[ $OUT == "awake $((512 * MiB)) 0" ]]'
say b "alloc 512"
OUT=$(answer b 3)
check "the group counts A again: B cannot take 512 MiB more of the 768 MiB" '[[ $OUT == alloc=2 ]]'
run "$VRAM" wake "$A"
check "vram wake of a process awake: exit 0, says so" '[[ $RC == 0 ]] && has "$OUT" "is awake already"'

# ---- --device: woken on the other card --------------------------------------------------------------
run "$VRAM" sleep "$A"
check "A asleep again" '[[ $RC == 0 ]]'
run "$VRAM" wake --device 1 "$A"
check "vram wake --device 1: A on card 1 ($UUID1)" '[[ $RC == 0 ]] && has "$OUT" "back on $UUID1"'
OUT=$(top_field "$A" uuid)
check "vram top lists A on card 1" '[[ $OUT == "$UUID1" ]]'
say a "peek"
OUT=$(answer a 4)
check "A runs on, its contents with it" '[[ $OUT == peek=0x1234 ]]'
run "$VRAM" wake --device 7 "$A"
check "vram wake --device of no card: exit 2, says which cards there are" '[[ $RC == 2 ]] && has "$ERR" "--device 7: no such card"'

# ---- --group ------------------------------------------------------------------------------------------
run "$VRAM" sleep --group g
check "vram sleep --group g: A and B asleep, one line each" \
    '[[ $RC == 0 ]] && has "$OUT" "PID $A " && has "$OUT" "PID ${PID[b]} " && [[ $(top_field "${PID[b]}" state) == asleep ]]'
run "$VRAM" wake --group g
check "vram wake --group g: both awake" \
    '[[ $RC == 0 ]] && [[ $(top_field "$A" state) == awake && $(top_field "${PID[b]}" state) == awake ]]'
run "$VRAM" sleep --group nosuch
check "vram sleep --group of no process: exit 1, says so" '[[ $RC == 1 ]] && has "$ERR" "group nosuch has no running process"'
stop b

# ---- a process that dies asleep -----------------------------------------------------------------------
run "$VRAM" sleep "$A"
exec {saved}>&2 2>/dev/null   # (no notice of the kill)
kill -9 "$A"
wait "$A" || true
exec 2>&"$saved" {saved}>&-
unset "PID[a]" "FD[a]"
run "$VRAM" top --once --json
check "A killed asleep: vram top no longer lists it" '[[ $RC == 0 ]] && ! has "$OUT" "\"pid\": $A,"'
start d
say d "alloc 1000"
OUT=$(answer d 1)
check "... and its memory is gone from the cards (D takes 1000 MiB of card 0)" '[[ $OUT == alloc=0 ]]'
stop d
run "$VRAM" wake "$A"
check "vram wake of a dead process: exit 1, no such process" '[[ $RC == 1 ]] && has "$ERR" "PID $A: no such process"'

# ---- a process not under vram run ---------------------------------------------------------------------
start p --plain
say p "alloc 256"
answer p 1 >/dev/null
P=${PID[p]}
run "$VRAM" sleep "$P"
check "vram sleep of a process not under vram run: asleep, and says what is not known" \
    '[[ $RC == 0 ]] && has "$OUT" "PID $P (vram_shim_app_d) is asleep (not under vram run"'
run "$VRAM" wake --device 1 "$P"
check "... vram wake --device refuses: which card it used is not known" '[[ $RC == 1 ]] && has "$ERR" "not under vram run"'
run "$VRAM" wake "$P"
check "... vram wake wakes it" '[[ $RC == 0 ]] && has "$OUT" "PID $P (vram_shim_app_d) is awake"'
say p "info"
OUT=$(answer p 2)
check "... and it runs on" 'has "$OUT" "err=0"'

# ---- no checkpoint API; a driver that refuses it; not a CUDA process ---------------------------------
run env LD_LIBRARY_PATH="$NOCKPT" "$VRAM" sleep "$P"
check "a driver without the checkpoint API: exit 1, one sentence naming what is missing" \
    '[[ $RC == 1 ]] && [[ $(wc -l <<<"$ERR") == 1 ]] && has "$ERR" "has no process checkpoint API (cuCheckpointProcessGetState and the rest of it come with the drivers of CUDA 12.8 and later)"'
run env FAKE_CUDA_CHECKPOINT=off "$VRAM" sleep "$P"
check "a driver that refuses the API: exit 1, its error by name" '[[ $RC == 1 ]] && has "$ERR" "CUDA_ERROR_NOT_SUPPORTED"'
run "$VRAM" sleep $$
check "vram sleep of a process that is not a CUDA process: exit 1, the driver's error by name" \
    '[[ $RC == 1 ]] && has "$ERR" "the driver does not know it as a CUDA process (cuCheckpointProcessGetState: CUDA_ERROR_INVALID_VALUE"'
stop p

# ---- another user's process (as root) ------------------------------------------------------------------
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
    start e
    say e "alloc 64"
    answer e 1 >/dev/null
    run setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_RUNTIME_DIR= HOME=/nonexistent "$VRAM" sleep "${PID[e]}"
    check "another user's process: refused, naming its owner" '[[ $RC == 1 ]] && has "$ERR" "belongs to root, not to you: only its owner or root may put it to sleep"'
    stop e
fi

# ---- vram run --idle-sleep: asleep after DURATION without a CUDA call, awake at the next one -----------
# until_state PID STATE: polls vram top until PID is in STATE (10 s at most); "ok" when it came.
until_state() {
    local i
    for i in $(seq 200); do
        [[ $(top_field "$1" state) == "$2" ]] && { echo ok; return; }
        sleep 0.05
    done
}
start i --idle-sleep 300ms
say i "alloc 256"
OUT=$(answer i 1)
I=${PID[i]}
W=$(tr '\0' '\n' <"/proc/$I/environ" | sed -n 's/^VRAM_IDLE_WATCHER=\([0-9]*\):.*/\1/p')
check "vram run --idle-sleep 300ms: the program runs, its watcher named in VRAM_IDLE_WATCHER" \
    '[[ $OUT == alloc=0 && -n $W ]] && kill -0 "$W"'
OUT=$(until_state "$I" asleep)
check "... idle for 300 ms: asleep (vram top), its 256 MiB in host memory, said on its stderr" \
    '[[ $OUT == ok && $(top_field "$I" host_bytes) == $((256 * MiB)) ]] &&
     has "$(cat "$TMP/i.err")" "vram: no CUDA call for 300ms: PID $I (vram_shim_app_d) is asleep: its 256.00 MiB"'
OUT=$(top_field "$I" idle_sleep_seconds)
check "vram top --json: idle_sleep_seconds 0.3" '[[ $OUT == 0.300 ]]'
say i "launch"
OUT=$(answer i 2 5)
check "its next call (a kernel launch) wakes it and goes on" \
    '[[ $OUT == launch=0 ]] && has "$(cat "$TMP/i.err")" "vram: a CUDA call: PID $I (vram_shim_app_d) is awake: its 256.00 MiB"'
OUT=$(until_state "$I" asleep)
check "... and idle again, it sleeps again" '[[ $OUT == ok ]]'
say i "alloc 64"
OUT=$(answer i 3 5)
check "an allocation wakes it too" '[[ $OUT == alloc=0 ]]'
run "$VRAM" sleep "$I"
check "vram sleep of a watched process (awake, or put to sleep by its watcher): asleep by hand" '[[ $RC == 0 ]]'
say i "launch"
OUT=$(answer i 4 1)
check "... its next call does not wake it: by hand, it sleeps until vram wake (no answer in 1 s)" '[[ -z $OUT ]]'
run "$VRAM" wake "$I"
OUT=$(answer i 4)
check "... vram wake wakes it and its call goes on" '[[ $RC == 0 && $OUT == launch=0 ]]'
stop i
for _ in $(seq 100); do kill -0 "$W" 2>/dev/null || break; sleep 0.05; done
check "the watcher exits once its program is gone" '! kill -0 "$W" 2>/dev/null'
run env LD_LIBRARY_PATH="$NOCKPT" "$VRAM" run --growth --idle-sleep 1s -- "$APP" dlsym hold alloc 64 0 </dev/null
check "vram run --idle-sleep over a driver without the checkpoint API: one line says it is off; the program runs" \
    '[[ $RC == 0 ]] && has "$OUT" "hold=0" && [[ $(grep -c "idle-sleep" <<<"$ERR") == 1 ]] &&
     has "$ERR" "vram run: --idle-sleep is off: the CUDA driver here (libcuda.so.1, CUDA 13.0) has no process checkpoint API"'
run "$VRAM" run --idle-sleep 0 -- true
check "vram run --idle-sleep 0: usage error naming it" '[[ $RC == 2 ]] && has "$ERR" "--idle-sleep: bad DURATION '"'"'0'"'"'"'
run "$VRAM" run --idle-sleep -- true
check "vram run --idle-sleep without a DURATION: usage error" '[[ $RC == 2 ]]'

# ---- usage errors -------------------------------------------------------------------------------------
run "$VRAM" sleep
check "vram sleep without a PID: usage error" '[[ $RC == 2 ]] && has "$ERR" "missing PID"'
run "$VRAM" sleep 12x
check "vram sleep 12x: usage error naming it" '[[ $RC == 2 ]] && has "$ERR" "'"'"'12x'"'"' is not a PID"'
run "$VRAM" sleep --group g 1
check "PIDs and --group together: usage error" '[[ $RC == 2 ]] && has "$ERR" "not both"'
run "$VRAM" sleep --timeout 0s 1
check "vram sleep --timeout 0s: usage error" '[[ $RC == 2 ]] && has "$ERR" "--timeout: bad DURATION '"'"'0s'"'"'"'
run "$VRAM" wake --timeout 1s 1
check "vram wake has no --timeout: usage error" '[[ $RC == 2 ]] && has "$ERR" "unknown option '"'"'--timeout'"'"'"'
run "$VRAM" help sleep
check "vram help sleep documents it" '[[ $RC == 0 ]] && has "$OUT" "sleep [--timeout DURATION] PID... | --group NAME"'
run "$VRAM" wake --help
check "vram wake --help documents it" '[[ $RC == 0 ]] && has "$OUT" "wake [--device DEV] PID... | --group NAME"'

echo "$PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
