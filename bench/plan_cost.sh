#!/usr/bin/env bash
# bench/plan_cost.sh: what the repeating step's plan costs, default allocator options against
# VRAM_ALLOC_CONF=plan:false (issue 40's table), on the simulated card: one line per trace and
# configuration, exact counts (driver calls, instructions), not times.
#
#   bash bench/plan_cost.sh [VRAM_BINARY]        (default build/vram)
#
# Columns, from `vram replay TRACE --growth --passes 5 --json`:
#   cold      driver calls of pass 1 (creates + releases + moves)
#   p3_5      driver calls of passes 3-5 (a program that repeats itself: 0 once settled)
#   tail      reserved / live over pass 1's last quarter (tail_reserved_to_live)
#   peak      peak reserved / peak live over the five passes
#   steps     steps placed by a plan, ends: plans ended early
# The last row, load_60g, is a model's load: 480 blocks of 128 MiB (60 GiB) taken one after another
# and none freed (tests/load_60g.trace; its passes end with the replay's cleanup). INSTR and LIMIT
# leave it out ("-": INSTR's card is smaller than the load).
# With INSTR=1 (needs valgrind; minutes), two more, through libvram.so next to VRAM_BINARY loaded by
# bench/lib_loop.c (built here with cc) as PyTorch loads it, on a simulated card of INSTR_CARD (default
# 24GiB: valgrind lets a process reserve less address space than twice an H200):
#   instr     instructions per warm call: callgrind's count of 3 passes less 1 pass, over 2 passes' events
#   stats     instructions one vram_get_allocator_stats (what torch.cuda.memory_stats() calls) costs the
#             program: 4 passes with LIB_LOOP_STATS=300 (a query every 300 events of the last pass) less 4
#             passes without, over the queries: the query and what the calls after it pay for it
# With LIMIT=1 (minutes), one more:
#   limit     the smallest limit as limit / peak live: the largest fraction F of peak live / limit on the
#             grid 0.95, 0.9525, ... 1.0 under which 2 passes complete with no failed allocation
#             (bisected; "> 1.053" when 0.95 fails), as bench/limit.sh's BENCH_BISECT on vram alone
#
# Environment: TRACES (trace files, default traces/*.trace.gz and ../shared/traces/*.trace.gz not in
# traces/, then load_60g), CARD (the simulated card, default 141GiB: an H200's memory), CONFS (default "default
# plan:false"; "default" is no VRAM_ALLOC_CONF), CC (default cc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VRAM=$(realpath "${1:-build/vram}")
[ -x "$VRAM" ] || { echo "bench/plan_cost.sh: $VRAM is not built" >&2; exit 2; }
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=${CARD:-141GiB}
unset VRAM_ALLOC_CONF
traces=${TRACES:-}
if [ -z "$traces" ]; then
    traces=$(ls traces/*.trace.gz)
    for t in ../shared/traces/*.trace.gz; do
        [ -e "$t" ] && [ ! -e "traces/$(basename "$t")" ] && traces="$traces $t"
    done
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -z "${TRACES:-}" ] && traces="$traces tests/load_60g.trace"
LIB=$(dirname "$VRAM")/libvram.so
if [ "${INSTR:-0}" = 1 ]; then
    command -v valgrind >/dev/null || { echo "bench/plan_cost.sh: INSTR=1 needs valgrind" >&2; exit 2; }
    [ -e "$LIB" ] || { echo "bench/plan_cost.sh: INSTR=1 needs $LIB" >&2; exit 2; }
    "${CC:-cc}" -std=c11 -O2 -Iinclude bench/lib_loop.c -ldl -o "$tmp/lib_loop"
fi

# conf_env CONF: the VRAM_ALLOC_CONF value of a configuration ("default": none)
conf_env() { [ "$1" = default ] && echo "" || echo "$1"; }

# replay_json TRACE CONF PASSES [ARGS...]: the replay's JSON (failures allowed)
replay_json() {
    local t=$1 c=$2 n=$3
    shift 3
    VRAM_ALLOC_CONF=$(conf_env "$c") "$VRAM" replay "$t" --growth --passes "$n" --json --allow-failures "$@" 2>/dev/null
}

# callgrind_refs CONF TRACE PASSES: instructions lib_loop ran
callgrind_refs() {
    local c=$1 t=$2 n=$3
    gzip -dc "$t" | VRAM_SIM_DEVICES=${INSTR_CARD:-24GiB} VRAM_ALLOC_CONF=$(conf_env "$c") valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$tmp/lib_loop" "$LIB" "$n" 2>&1 >"$tmp/lib_out" |
        awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}

# smallest_limit TRACE CONF PEAK: the bisection of the column `limit`
smallest_limit() {
    local t=$1 c=$2 peak=$3 lo=0 hi=20 mid   # grid index k: F = 0.95 + k * 0.0025
    fits() {
        local f limit
        f=$(python3 -c "print(0.95 + $1 * 0.0025)")
        limit=$(python3 -c "import math; print(math.ceil($peak / $f))")
        replay_json "$t" "$c" 2 --limit "$limit" | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["failed_allocs"] != 0)'
    }
    if fits $hi; then echo "1.0000"; return; fi
    if ! fits $lo; then echo "> 1.053"; return; fi
    while [ $((hi - lo)) -gt 1 ]; do        # lo fits, hi fails
        mid=$(((lo + hi) / 2))
        if fits $mid; then lo=$mid; else hi=$mid; fi
    done
    python3 -c "print('%.4f' % (1 / (0.95 + $lo * 0.0025)))"
}

echo "# $(date -u +%Y-%m-%d) $(uname -n), $("$VRAM" --version | head -1), simulated ${VRAM_SIM_DEVICES} card"
printf '%-20s %-11s %6s %6s %7s %7s %5s %4s' trace conf cold p3_5 tail peak steps ends
[ "${INSTR:-0}" = 1 ] && printf ' %6s %8s' instr stats
[ "${LIMIT:-0}" = 1 ] && printf ' %7s' limit
echo
for t in $traces; do
    name=$(basename "$(basename "$t" .gz)" .trace)
    for c in ${CONFS:-default plan:false}; do
        replay_json "$t" "$c" 5 >"$tmp/r.json"
        python3 - "$tmp/r.json" "$name" "$c" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
calls = [p["driver_allocs"] + p["driver_frees"] + p["driver_moves"] for p in d["per_pass"]]
print("%-20s %-11s %6d %6d %7s %7.4f %5s %4s" % (sys.argv[2], sys.argv[3], calls[0], sum(calls[2:5]),
      d["tail_reserved_to_live"], d["reserved_to_live"], d["plan_steps"], d["plan_ends"]), end="")
EOF
        if [ "$name" = load_60g ]; then
            [ "${INSTR:-0}" = 1 ] && printf ' %6s %8s' - -
            [ "${LIMIT:-0}" = 1 ] && printf ' %7s' -
        elif [ "${INSTR:-0}" = 1 ]; then
            n=$(gzip -dc "$t" | grep -c '^[af] ')
            one=$(callgrind_refs "$c" "$t" 1); three=$(callgrind_refs "$c" "$t" 3)
            with=$(LIB_LOOP_STATS=300 callgrind_refs "$c" "$t" 4)
            calls=$(awk '/stats calls:/ {print $3}' "$tmp/lib_out")
            without=$(callgrind_refs "$c" "$t" 4)
            printf ' %6d %8d' $(((three - one) / (2 * n))) $(((with - without) / calls))
        fi
        if [ "${LIMIT:-0}" = 1 ] && [ "$name" != load_60g ]; then
            peak=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["peak_live_bytes"])' "$tmp/r.json")
            printf ' %7s' "$(smallest_limit "$t" "$c" "$peak")"
        fi
        echo
    done
done
