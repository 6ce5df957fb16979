#!/usr/bin/env bash
# limit_test.sh: limits that move under the preload library (issue 38), as real processes over the fake
# libcuda.so.1, without a GPU: `vram limit PID SIZE` lowering and raising a running process's limit
# (shrinking kills nothing; a preallocation gives the difference back to the card), its ceilings (the card,
# VRAM_LIMIT_MAX), who may change it, `vram limit --group`, overflow to host memory (`vram run --overflow
# host`: served, counted apart, freed, capped), and a group that rebalances between a guaranteed and an
# opportunistic member, with exact byte counts read from `vram top --json`.
#
#   tests/shim/limit_test.sh VRAM FAKE_CUDA_DIR APP_DRIVER
#
# Each process is app_driver's `script` scenario under vram run: commands on a fifo, one answer line each
# (alloc MIB -> alloc=E, free -> free=E (the newest block), info -> free= total=, held -> held=B host=H,
# the fake driver's device bytes of the process and its pinned host bytes). The ledger goes to a private
# VRAM_LEDGER_DIR. Prints each check with PASS/FAIL, then "N passed, N failed"; exits 1 when one failed.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 VRAM FAKE_CUDA_DIR APP_DRIVER" >&2
    exit 2
fi
VRAM=$1 FAKE=$2 APP=$3

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../procs.sh"   # procs_clean_env, vram_run_start, say, says, stop, slot
procs_clean_env
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

MiB=1048576
GiB=1073741824
TMP=$(mktemp -d)
export VRAM_LEDGER_DIR=$TMP/ledger
PASSED=0
FAILED=0

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"     # run, check, has
trap procs_cleanup EXIT

# start NAME [ENV=V ...] [VRAM RUN OPTIONS] -- DEV: a script process under vram run.
start() {
    local args=()
    while [[ $1 != -- ]]; do args+=("$1"); shift; done
    shift
    vram_run_start ${args[@]+"${args[@]}"} -- "$APP" dlsym script "$@"
}

# ---- vram limit PID: lowered under a running process, it kills nothing ----------------------------------
start a --growth --limit 1GiB -- 0
says a "alloc 512" "alloc 256"
run "$VRAM" limit "${PID[a]}" 512MiB
OUT1=$OUT RC1=$RC
OUT="$ANSWERS rc=$RC1 $(slot a limit_bytes in_use_bytes over_limit start_limit_bytes)"
check "vram limit lowers a running process's limit below what it holds: vram top shows the new limit and 'over limit'" \
    '[[ $RC1 == 0 && $OUT == "alloc=0 alloc=0 rc=0 limit_bytes=$((512 * MiB)) in_use_bytes=$((768 * MiB)) over_limit=true start_limit_bytes=$GiB" ]] &&
     has "$OUT1" "limit 512.00 MiB" && has "$OUT1" "over its limit"'
run "$VRAM" top --once
check "... the table says over limit" 'has "$OUT" "over limit"'
says a "alloc 1" "held" "info"
OUT=$ANSWERS
check "... its next allocation is refused, its live blocks stay (768 MiB held), cuMemGetInfo's total is the new limit" \
    '[[ $OUT == "alloc=2 held=$((768 * MiB)) host=0 free=0 total=$((512 * MiB)) err=0" ]]'
says a "free" "alloc 1" "free" "alloc 256"
OUT="$ANSWERS $(slot a in_use_bytes over_limit)"
check "... frees bring it under: at the limit still refused, under it allocations succeed again" \
    '[[ $OUT == "free=0 alloc=2 free=0 alloc=0 in_use_bytes=$((256 * MiB)) over_limit=false" ]]'
run "$VRAM" limit "${PID[a]}" 2GiB
says a "alloc 1536" "alloc 512"
OUT="rc=$RC $ANSWERS $(slot a limit_bytes in_use_bytes)"
check "vram limit raises it above the limit it started with (1 GiB -> 2 GiB: 1792 MiB fit, 2304 MiB do not)" \
    '[[ $OUT == "rc=0 alloc=0 alloc=2 limit_bytes=$((2 * GiB)) in_use_bytes=$((1792 * MiB))" ]]'
run "$VRAM" limit "${PID[a]}" 17GiB
check "... never above the card (16 GiB): refused by name, the limit unchanged" \
    '[[ $RC == 1 ]] && has "$ERR" "17.00 GiB is above the memory of the card" && [[ $(slot a limit_bytes) == "limit_bytes=$((2 * GiB))" ]]'
run "$VRAM" limit "${PID[a]}" none
says a "free"
OUT="rc=$RC $ANSWER $(slot a limit_bytes)"
check "vram limit PID none: back to the limit it started with" '[[ $OUT == "rc=0 free=0 limit_bytes=$GiB" ]]'
run "$VRAM" limit "${PID[a]}"
check "vram limit PID without SIZE prints its limits" \
    '[[ $RC == 0 ]] && has "$OUT" "pid ${PID[a]} device 0" && has "$OUT" "limit 1.00 GiB (started with 1.00 GiB, set from outside none)"'
run setpriv --reuid=65534 --regid=65534 --clear-groups "$VRAM" limit "${PID[a]}" 256MiB
check "another user may not change it (named), and nothing changes" \
    '[[ $RC == 1 ]] && has "$ERR" "process ${PID[a]} belongs to uid $(id -u), not to you" && [[ $(slot a limit_bytes) == "limit_bytes=$GiB" ]]'
stop a

sleep 30 &
SLEEPER=$!
run "$VRAM" limit "$SLEEPER" 1GiB
check "a process not under vram run: said" '[[ $RC == 1 ]] && has "$ERR" "process $SLEEPER has no ledger open"'
kill "$SLEEPER"
run "$VRAM" limit 2147483646 1GiB
check "no such process: said" '[[ $RC == 1 ]] && has "$ERR" "no process 2147483646"'
run "$VRAM" limit 1 0
check "SIZE 0: usage error naming it" '[[ $RC == 2 ]] && has "$ERR" "bad SIZE '"'"'0'"'"'"'
run "$VRAM" limit
check "no PID: usage error" '[[ $RC == 2 ]] && has "$ERR" "missing PID"'

# ---- a ceiling (the Slurm plugin's VRAM_LIMIT_MAX) --------------------------------------------------------
start b VRAM_LIMIT_MAX=1GiB --growth --limit 1GiB -- 0
says b "alloc 64"
run "$VRAM" limit "${PID[b]}" 2GiB
OUT1="rc=$RC"
ERR1=$ERR
run "$VRAM" limit "${PID[b]}" 512MiB
OUT="$OUT1 rc=$RC $(slot b limit_bytes)"
check "VRAM_LIMIT_MAX is a ceiling: raising above it is refused (said), lowering is not" \
    '[[ $OUT == "rc=1 rc=0 limit_bytes=$((512 * MiB))" ]] && has "$ERR1" "is above the ceiling of process ${PID[b]} on device 0"'
stop b

# ---- preallocation: the balloon gives the difference back to the card ------------------------------------
start c --limit 2GiB -- 0
says c "alloc 256" "held"
OUT1=$ANSWERS
run "$VRAM" limit "${PID[c]}" 1GiB
says c "info" "held"
OUT="$OUT1 | $ANSWERS"
check "with preallocation a lowered limit gives the reserved memory above it back to the card at the next call (2 GiB -> 1 GiB held)" \
    '[[ $OUT == "alloc=0 held=$((2 * GiB)) host=0 | free=$((768 * MiB)) total=$GiB err=0 held=$GiB host=0" ]]'
run "$VRAM" limit "${PID[c]}" 2GiB
says c "info" "held"
OUT=$ANSWERS
check "... and a raised one takes it again" '[[ $OUT == "free=$((1792 * MiB)) total=$((2 * GiB)) err=0 held=$((2 * GiB)) host=0" ]]'
stop c

# ---- vram limit --group ---------------------------------------------------------------------------------------
start g1 --growth --group gg --group-limit 1GiB -- 0
start g2 --growth --group gg --group-limit 1GiB -- 0
says g1 "alloc 512"
says g2 "alloc 256"
run "$VRAM" limit --group gg 512MiB
says g2 "alloc 1"
OUT="rc=$RC $ANSWER $(slot g1 group_limit_bytes) $(slot g2 group_limit_bytes)"
check "vram limit --group lowers the group's budget for every member (768 MiB held, 512 MiB budget: refused)" \
    '[[ $OUT == "rc=0 alloc=2 group_limit_bytes=$((512 * MiB)) group_limit_bytes=$((512 * MiB))" ]]'
start g3 --growth --group gg --group-limit 1GiB -- 0
says g3 "alloc 1"
OUT="$ANSWER $(slot g3 group_limit_bytes)"
check "... a member that joins later takes it" '[[ $OUT == "alloc=2 group_limit_bytes=$((512 * MiB))" ]]'
run "$VRAM" limit --group nosuch 1GiB
check "... a group with no running member: said" '[[ $RC == 1 ]] && has "$ERR" "no running process of group nosuch"'
stop g1; stop g2; stop g3

# ---- overflow to host memory -----------------------------------------------------------------------------------
start d --growth --limit 256MiB --overflow host --overflow-max 512MiB -- 0
says d "alloc 200" "alloc 100" "held"
OUT="$ANSWERS $(slot d in_use_bytes overflow_bytes)"
check "--overflow host: an allocation past the limit is served from host memory, counted apart" \
    '[[ $OUT == "alloc=0 alloc=0 held=$((200 * MiB)) host=$((100 * MiB)) in_use_bytes=$((200 * MiB)) overflow_bytes=$((100 * MiB))" ]]'
says d "alloc 300" "alloc 200" "held"
OUT=$ANSWERS
check "... up to its cap (--overflow-max 512 MiB: 400 MiB held, 200 MiB more refused)" \
    '[[ $OUT == "alloc=0 alloc=2 held=$((200 * MiB)) host=$((400 * MiB))" ]]'
run "$VRAM" top --once
check "... vram top shows it" 'has "$OUT" "400.0 MiB"'
says d "free" "held"
OUT="$ANSWERS $(slot d overflow_bytes)"
check "... the program's cuMemFree of an overflow block frees the host memory" \
    '[[ $OUT == "free=0 held=$((200 * MiB)) host=$((100 * MiB)) overflow_bytes=$((100 * MiB))" ]]'
says d "free" "free" "alloc 200" "held"
OUT=$ANSWERS
check "... once the device has room again, a new allocation goes to the device" \
    '[[ $OUT == "free=0 free=0 alloc=0 held=$((200 * MiB)) host=0" ]]'
stop d
start e FAKE_CUDA_MEM=1GiB --growth --overflow host -- 0
says e "alloc 1000" "alloc 100" "held"
OUT=$ANSWERS
check "--overflow host: an allocation the card itself refuses goes to host memory too (cap: the card)" \
    '[[ $OUT == "alloc=0 alloc=0 held=$((1000 * MiB)) host=$((100 * MiB))" ]]'
stop e
start f --growth --limit 256MiB -- 0
says f "alloc 200" "alloc 100" "held"
OUT=$ANSWERS
check "without --overflow an allocation past the limit is refused as before" '[[ $OUT == "alloc=0 alloc=2 held=$((200 * MiB)) host=0" ]]'
stop f
start p --growth --limit 256MiB --overflow host -- 0
says p "pitch 200" "pitch 100" "held"
OUT="$ANSWERS $(slot p in_use_bytes overflow_bytes)"
says p "free" "held"
OUT="$OUT | $ANSWERS"
check "--overflow host: a cuMemAllocPitch past the limit is served from host memory too (rows of 1 MiB), and freed there" \
    '[[ $OUT == "pitch=0 pitch=0 held=$((200 * MiB)) host=$((100 * MiB)) in_use_bytes=$((200 * MiB)) overflow_bytes=$((100 * MiB)) | free=0 held=$((200 * MiB)) host=0" ]]'
stop p

# ---- a group rebalances between a guaranteed and an opportunistic member ----------------------------------
start o --growth --group gr --group-limit 1GiB --priority opportunistic --overflow host -- 0
says o "alloc 768"
OUT="$ANSWER $(slot o limit_bytes priority)"
check "an opportunistic member alone uses the group's budget (768 MiB of 1 GiB; no limit of its own)" \
    '[[ $OUT == "alloc=0 limit_bytes=0 priority=\"opportunistic\"" ]]'
start m --growth --group gr --group-limit 1GiB --priority guaranteed -- 0
says m "alloc 512"
OUT="$ANSWER $(slot m in_use_bytes) $(slot o limit_bytes in_use_bytes over_limit)"
check "a guaranteed member gets its memory although the opportunistic one holds 768 MiB: the opportunistic limit is lowered to 1 GiB - 512 MiB" \
    '[[ $OUT == "alloc=0 in_use_bytes=$((512 * MiB)) limit_bytes=$((512 * MiB)) in_use_bytes=$((768 * MiB)) over_limit=true" ]]'
says o "alloc 64" "held"
OUT="$ANSWERS $(slot o overflow_bytes)"
check "... the opportunistic member, over its lowered limit, goes on in host memory (--overflow host)" \
    '[[ $OUT == "alloc=0 held=$((768 * MiB)) host=$((64 * MiB)) overflow_bytes=$((64 * MiB))" ]]'
says o "free" "free" "alloc 256" "alloc 300" "held"
OUT="$ANSWERS $(slot o limit_bytes in_use_bytes overflow_bytes)"
check "... after its frees it takes device memory up to what is left (256 MiB on the device, 300 MiB more to host)" \
    '[[ $OUT == "free=0 free=0 alloc=0 alloc=0 held=$((256 * MiB)) host=$((300 * MiB)) limit_bytes=$((512 * MiB)) in_use_bytes=$((256 * MiB)) overflow_bytes=$((300 * MiB))" ]]'
says m "alloc 256"
OUT="$ANSWER $(slot o limit_bytes over_limit)"
check "the guaranteed member takes 256 MiB more: the opportunistic limit falls to 1 GiB - 768 MiB" \
    '[[ $OUT == "alloc=0 limit_bytes=$((256 * MiB)) over_limit=false" ]]'
says m "alloc 300"
OUT=$ANSWER
check "... the guaranteed member itself stays within the budget (768 + 300 MiB > 1 GiB: refused)" '[[ $OUT == "alloc=2" ]]'
says m "free" "free"
says o "alloc 700" "held"
OUT="$ANSWERS $(slot o limit_bytes)"
check "the guaranteed member frees everything: the opportunistic limit is raised back (none), it takes 700 MiB more on the device" \
    '[[ $OUT == "alloc=0 held=$((956 * MiB)) host=$((300 * MiB)) limit_bytes=0" ]]'
stop m; stop o

echo "$PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
