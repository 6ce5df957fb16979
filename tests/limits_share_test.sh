#!/usr/bin/env bash
# limits_share_test.sh: bench/limits_share.sh's counts (issue 38's bench, not its times): a guaranteed
# and an opportunistic `vram replay` of traces/resnet50_train share one simulated card under a group
# budget of 2.5 GiB, below their two peaks together; both complete, the guaranteed one with no failed
# allocation and no overflow, the opportunistic one with no failed allocation, its requests the budget
# could not hold served from host memory, and its card memory at most exactly the budget less the
# guaranteed job's pool.
#
#   tests/limits_share_test.sh VRAM
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # start_test, run, check
start_test "$@"
run bash "$SRC/bench/limits_share.sh" "$VRAM"
JSON=$(tail -1 <<<"$OUT")
FIGURES=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
g, o = d["jobs"]["g"], d["jobs"]["o"]
budget = 5 * 2**29
print("overlap=%s g_rc=%d g_failed=%d g_overflow=%d o_rc=%d o_failed=%d o_overflowed=%s o_within=%s o_share_exact=%s" % (
    d["overlap"], g["rc"], g["failed_allocs"], g["overflow_allocs"], o["rc"], o["failed_allocs"],
    o["overflow_allocs"] > 0 and o["overflow_peak_bytes"] > 0,
    o["peak_reserved_bytes"] <= budget - g["peak_reserved_bytes"],
    o["peak_reserved_bytes"] == budget - g["peak_reserved_bytes"]))' "$JSON" 2>&1 || echo "no figures")
OUT="$FIGURES
$OUT"
check "two replays share a card under a budget below their peaks: the guaranteed one neither fails nor overflows, the opportunistic one completes from host memory within its share" \
    '[[ $RC == 0 && $FIGURES == "overlap=True g_rc=0 g_failed=0 g_overflow=0 o_rc=0 o_failed=0 o_overflowed=True o_within=True o_share_exact=True" ]]'
echo "$PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
