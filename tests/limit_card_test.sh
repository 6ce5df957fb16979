#!/usr/bin/env bash
# limit_card_test.sh: bench/limit.sh's bisections sharing one card (BENCH_BISECT=1, BENCH_JOBS=2), on
# the simulated card: one trace (traces/resnet50_train.trace.gz), vram growth and the host row, host
# not kept for after (BENCH_EXCLUSIVE=""), the given vram CLI (BENCH_VRAM).
#
#   tests/limit_card_test.sh PATH/TO/vram PATH/TO/vram_ledger_app
#
# 1. The card cap, BENCH_CARD_BYTES: a bisection starts only when its footprint (its largest limit,
#    ceil(peak live / 0.90), an eighth more and 1 GiB: about 3.4 GB here) fits beside the running
#    ones'. Under 4 GiB the two bisections run one after the other (host starts after vram's ends);
#    under 8 GiB at once (host starts before vram's ends: vram's takes 6 to 8 probes, host's one).
# 2. A card full of another process's memory: tests/ledger_app.c holds 3 GiB of a 4 GiB simulated
#    card shared between processes (VRAM_SIM_SHARED), so vram's first probe (a limit of peak live,
#    1.85 GB) fails with the card itself full, not the limit. Its bisection stops, its probe goes to
#    logs/limit/pair.0.full.jsonl, and it is bisected again alone after the others; full again, its
#    cell says "not measured (the card itself full at 1.0)" and the results keep the second probe
#    alone. host, which takes no card memory, completes at 1.0 as ever.
# bench/peers needs a C++ compiler ($CXX, default g++): without one the test is skipped (77) outside
# CI and fails in CI. Exit 1 when a check failed.
set -euo pipefail
if [[ $# -ne 2 ]]; then
    echo "usage: $0 VRAM_BINARY LEDGER_APP" >&2
    exit 2
fi
APP=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # start_test(), run(), check(), has()
start_test "$1"                                  # VRAM, SRC, TMP, PASSED, FAILED
if ! command -v "${CXX:-g++}" >/dev/null; then
    echo "no C++ compiler (${CXX:-g++}) for bench/peers' host row"
    [[ -n ${CI:-} ]] && exit 1
    exit 77
fi
unset VRAM_BACKEND VRAM_SIM_DEVICES VRAM_SIM_SHARED VRAM_ALLOC_CONF VRAM_FORCE_ALLOW_GROWTH VRAM_MEMORY_LIMIT \
      CUDA_VISIBLE_DEVICES VRAM_LIMIT
TRACE=traces/resnet50_train.trace.gz
GiB=1073741824
bisect() {   # bisect OUT_NAME [ENV=V ...]: limit.sh's bisection of TRACE, vram and host, two at once
    local out=$1
    shift
    run env "$@" BENCH_BISECT=1 BENCH_VRAM="$VRAM" BENCH_PEERS=host BENCH_TRACES="$TRACE" BENCH_JOBS=2 \
        BENCH_EXCLUSIVE="" BENCH_OUT="$TMP/$out" bash "$SRC/bench/limit.sh"
}
# line_of TEXT: the number of the first line of ERR that contains TEXT (0: none)
line_of() { grep -nF -- "$1" <<<"$ERR" | head -n 1 | cut -d: -f1 || true; }
VSTART="== vram growth: $TRACE: bisecting"
VEND="== vram growth: $TRACE: completes at"
HSTART="== host: $TRACE: bisecting"
# cell N: the Nth cell (1-based, after the leading |) of the table's resnet50_train row in OUT
cell() { grep '^| resnet50_train |' <<<"$OUT" | awk -F' [|] ' -v n="$1" '{ gsub(/^[|] | [|]$/, ""); print $n }' |
         sed -E 's/^\| //; s/ \|$//'; }

# ---- 1. the cap --------------------------------------------------------------------------------
bisect cap4 BENCH_CARD_BYTES=$((4 * GiB))
check "under a 4 GiB cap: limit.sh exits 0 and says the cap" \
    '[[ $RC -eq 0 ]] && has "$ERR" "2 at once, taking at most $((4 * GiB)) bytes of the card"'
check "under a 4 GiB cap: host's bisection starts after vram's ends (lines $(line_of "$VEND") < $(line_of "$HSTART"))" \
    '(( $(line_of "$VSTART") > 0 && $(line_of "$VEND") > 0 && $(line_of "$VEND") < $(line_of "$HSTART") ))'
CAP4_CELLS="$(cell 3) / $(cell 4)"
bisect cap8 BENCH_CARD_BYTES=$((8 * GiB))
check "under an 8 GiB cap: both at once, host's starts before vram's ends (lines $(line_of "$HSTART") < $(line_of "$VEND"))" \
    '[[ $RC -eq 0 ]] && (( $(line_of "$HSTART") > 0 && $(line_of "$HSTART") < $(line_of "$VEND") ))'
check "the same cells either way: $CAP4_CELLS" '[[ "$(cell 3) / $(cell 4)" == "$CAP4_CELLS" && $(cell 4) == "1.0000 (completes at 1.0)" ]]'
bisect badcap BENCH_CARD_BYTES=4GiB
check "BENCH_CARD_BYTES=4GiB refused: a number of bytes" '[[ $RC -eq 2 ]] && has "$ERR" "BENCH_CARD_BYTES is a number of bytes"'

# ---- 2. the card full of another process's memory ---------------------------------------------
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=4GiB VRAM_SIM_SHARED=$TMP/card
coproc HOLDER { VRAM_ALLOC_CONF=map_ahead_mb:0 VRAM_LIMIT=3GiB exec "$APP"; }
HOLDER_IN=${HOLDER[1]} HOLDER_OUT=${HOLDER[0]} HOLDER_PROC=$HOLDER_PID   # (bash unsets HOLDER_* when it ends)
trap '{ echo quit >&"$HOLDER_IN"; } 2>/dev/null || true; rm -rf "$TMP"' EXIT
echo "alloc 3072" >&"$HOLDER_IN"
read -r -t 20 HELD <&"$HOLDER_OUT" || HELD="no answer"
check "another process holds 3 GiB of the shared 4 GiB card: '$HELD'" '[[ $HELD == "alloc=OK" ]]'
bisect full
RESULTS=$TMP/full/limit-bisect.jsonl
FULLS=$TMP/full/logs/limit/pair.0.full.jsonl
check "limit.sh exits 0; vram's first probe found the card itself full and was bisected again alone" \
    '[[ $RC -eq 0 ]] && has "$ERR" "== vram growth: $TRACE: the card itself full at 1.0" &&
     has "$ERR" "== vram growth: $TRACE: bisected again, alone on the card"'
check "the first probe kept in logs/limit/pair.0.full.jsonl, its error the card's" \
    '[[ $(wc -l <"$FULLS") -eq 1 ]] && grep -q "the card itself is full" "$FULLS" && grep -q "\"bisect_fraction\": \"1.0\"" "$FULLS"'
check "the results keep the second probe alone ($(grep -c "\"allocator\": \"vram growth\"" "$RESULTS") vram lines)" \
    '[[ $(grep -c "\"allocator\": \"vram growth\"" "$RESULTS") -eq 1 ]]'
check "vram's cell: not measured, full at 1.0: '$(cell 3)'" '[[ $(cell 3) == "not measured (the card itself full at 1.0)" ]]'
check "host's cell: completes at 1.0: '$(cell 4)'" '[[ $(cell 4) == "1.0000 (completes at 1.0)" ]]'
{ echo quit >&"$HOLDER_IN"; } 2>/dev/null || true
wait "$HOLDER_PROC" 2>/dev/null || true

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
