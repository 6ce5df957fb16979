#!/usr/bin/env bash
# bench/plan_replay.sh: the repeating step's plan on every trace: vram replay --growth with
# VRAM_ALLOC_CONF=plan:false and plan:true, one pass and three, and prints one line per run:
# trace, plan, passes, peak reserved / peak live over the whole replay, tail_reserved_to_live (the
# first pass's last quarter), steps placed by a plan, plans ended, driver moves, the first pass's ns
# per call (cold: what mapping and moving memory cost) and the later passes' (warm: with three
# passes; what the detector and the plan cost a call once memory is mapped).
#
#   bash bench/plan_replay.sh [VRAM_BINARY]      (default build/vram)
#
# Environment: LIMIT (a --limit for every run, e.g. 30GiB: a chosen limit maps memory granule by
# granule), TRACES (default traces/*.trace.gz), CONF (more allocator options, e.g. extent_mb:2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
vram=${1:-build/vram}
[ -x "$vram" ] || { echo "bench/plan_replay.sh: $vram is not built" >&2; exit 2; }
limit=(); [ -n "${LIMIT:-}" ] && limit=(--limit "$LIMIT")
echo "# $(date -u +%Y-%m-%d) $(uname -n) limit=${LIMIT:-none} conf=${CONF:-}"
printf '%-20s %-5s %6s %8s %8s %6s %5s %7s %9s %8s\n' trace plan passes peak tail steps ends moves cold_ns warm_ns
for t in ${TRACES:-traces/*.trace.gz}; do
    for plan in false true; do
        for passes in 1 3; do
            VRAM_ALLOC_CONF="plan:$plan${CONF:+,$CONF}" "$vram" replay "$t" --growth --passes "$passes" \
                "${limit[@]}" --json 2>/dev/null |
                python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%-20s %-5s %6d %8.4f %8s %6s %5s %7s %9s %8s" % (sys.argv[1], sys.argv[2], d["passes"], d["reserved_to_live"],
      d["tail_reserved_to_live"], d["plan_steps"], d["plan_ends"], d["driver_moves"], d["cold_ns_per_op"],
      d["warm_ns_per_op"] if d["warm_ns_per_op"] is not None else "-"))' "$(basename "$t" .trace.gz)" "$plan"
        done
    done
done
