#!/usr/bin/env bash
# limit_bisect_test.sh: bench/limit.sh's bisection mode (BENCH_BISECT=1) end to end on the simulated
# card: one small trace (traces/resnet50_train.trace.gz), vram growth and the host row (bench/peers,
# built for host alone where there is no PyTorch), two bisections at once with host kept for after
# (BENCH_JOBS=2, BENCH_EXCLUSIVE=host), the given vram CLI instead of a build (BENCH_VRAM).
#
#   tests/limit_bisect_test.sh PATH/TO/vram
#
# Checks that the table is printed with the trace's row, that vram's cell is a ratio limit / peak live
# in [1, 1/LO] (LO = 0.90: at most 1.1111), that host's counting limit completes at the top (1.0000:
# limit = peak live) when its row ran, and that the results file has the probes a bisection makes
# (2 to 8 for vram on the default grid). The cell check is shown to reject wrong cells. Exit 1 when a
# check failed.
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # start_test(), run(), check(), field()
start_test "$@"                                  # VRAM, SRC, TMP, PASSED, FAILED

unset VRAM_BACKEND VRAM_SIM_DEVICES VRAM_ALLOC_CONF VRAM_FORCE_ALLOW_GROWTH VRAM_MEMORY_LIMIT CUDA_VISIBLE_DEVICES
run env BENCH_BISECT=1 BENCH_VRAM="$VRAM" BENCH_PEERS=host BENCH_TRACES=traces/resnet50_train.trace.gz \
    BENCH_JOBS=2 BENCH_EXCLUSIVE=host BENCH_OUT="$TMP/bench" bash "$SRC/bench/limit.sh"

# cell N: the Nth cell (1-based, after the leading |) of the table's resnet50_train row in $OUT
cell() { grep '^| resnet50_train |' <<<"$OUT" | awk -F' [|] ' -v n="$1" '{ gsub(/^[|] | [|]$/, ""); print $n }' |
         sed -E 's/^\| //; s/ \|$//'; }
# ratio_ok CELL: CELL is a plain ratio (4 decimals) in [1, 1/0.90]
ratio_ok() { [[ $1 =~ ^[0-9]\.[0-9]{4}( \(completes at 1\.0\))?$ ]] && awk -v r="${1%% *}" 'BEGIN { exit !(r >= 1 && r <= 1 / 0.90) }'; }
host_ok() { [[ $1 == "1.0000 (completes at 1.0)" || $1 == "did not run ("* ]]; }

check "limit.sh BENCH_BISECT=1 exits 0 and prints the table" \
    '[[ $RC -eq 0 && $OUT == *"| trace | peak live | vram, growth (VMM) | host malloc / free (loop floor) | smallest |"* ]]'
check "the table is also in limit-bisect.md" '[[ -s $TMP/bench/limit-bisect.md && $OUT == *"$(cat "$TMP/bench/limit-bisect.md")"* ]]'
check "the trace's row: its peak live, from vram's replay on the simulated card" \
    '[[ $(cell 2) == "1,846,041,060" ]]'
check "vram's cell is limit / peak live in [1, 1/LO]: '$(cell 3)'" 'ratio_ok "$(cell 3)"'
check "host's counting limit completes at limit = peak live (or its row says why it did not run): '$(cell 4)'" \
    'host_ok "$(cell 4)"'
check "the smallest allocator is named" '[[ $(cell 5) == "vram, growth (VMM)"* || $(cell 5) == "host malloc"* ]]'
N=$(grep -c '"allocator": "vram growth".*"bisect_fraction"' "$TMP/bench/limit-bisect.jsonl" || true)
check "the results file: meta, the trace's limit line, 2 to 8 vram probes (got $N)" \
    '[[ $(head -n 1 "$TMP/bench/limit-bisect.jsonl") == "{\"meta\": "* && $(grep -c "\"bisect\": {\"lo\": \"0.90\"" "$TMP/bench/limit-bisect.jsonl") -eq 1 && $N -ge 2 && $N -le 8 ]]'
check "the cell checks reject wrong cells" \
    '! ratio_ok "> 1.1111 (fails at 0.90)" && ! ratio_ok 0.9990 && ! ratio_ok 1.2000 && ! ratio_ok "did not run (x)" &&
     ratio_ok 1.0050 && ! host_ok 1.0050 && ! host_ok "> 1.1111 (fails at 0.90)"'

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
