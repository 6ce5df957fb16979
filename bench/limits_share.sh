#!/usr/bin/env bash
# bench/limits_share.sh: two replayed traces share one simulated card under a group budget smaller than
# their two peaks together (issue 38): a guaranteed job and an opportunistic one, each `vram replay` under
# `vram run --growth --group G --group-limit BUDGET --priority ... --overflow host`, on a card both
# processes see (VRAM_SIM_SHARED), in a private ledger. vram replay allocates through libvram, which
# follows the group through the ledger (docs/DESIGN.md, "Limits that move"): the guaranteed job is held
# to the budget alone, the opportunistic one to what the guaranteed job leaves, and what it cannot hold
# goes to host memory instead of failing.
#
#   bash bench/limits_share.sh [VRAM_BINARY]     (default build/vram)
#
# The guaranteed job starts first and keeps its pool for its PASSES_G passes; the opportunistic one
# starts once the guaranteed job holds its pool (the same bytes for 100 ms), so the two overlap (the
# table says when they did not) and the opportunistic job's share is budget - the guaranteed job's.
# Prints a table (peaks, budget, failed allocations, overflow, wall time per job) and, last, one JSON
# line with the same figures (tests/limits_share_test.sh checks its counts).
#
# Environment: TRACE_G, TRACE_O (default traces/resnet50_train.trace.gz both), BUDGET (default 2.5GiB,
# under the two peaks together: 1.73 + 1.73 GiB reserved with growth), CARD (the simulated card, default
# 6GiB: room for both, so that only the budget stands in the way), PASSES_G (default 2000), PASSES_O
# (default 3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VRAM=$(realpath "${1:-build/vram}")
TRACE_G=${TRACE_G:-traces/resnet50_train.trace.gz}
TRACE_O=${TRACE_O:-traces/resnet50_train.trace.gz}
BUDGET=${BUDGET:-2.5GiB}
PASSES_G=${PASSES_G:-2000}
PASSES_O=${PASSES_O:-3}
TMP=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

unset VRAM_LIMIT VRAM_GROWTH VRAM_GROUP VRAM_GROUP_LIMIT VRAM_PRIORITY VRAM_OVERFLOW VRAM_OVERFLOW_MAX VRAM_ALLOC_CONF \
      VRAM_MEMORY_LIMIT VRAM_FORCE_ALLOW_GROWTH VRAM_LIMIT_MAX VRAM_GROUP_LIMIT_MAX LD_PRELOAD
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=${CARD:-6GiB} VRAM_SIM_SHARED=$TMP/card VRAM_LEDGER_DIR=$TMP/ledger

# job NAME PRIORITY TRACE PASSES: vram replay under vram run in the group, in the background.
job() {
    local name=$1 prio=$2 trace=$3 passes=$4
    (
        start=$(date +%s.%N)
        rc=0
        "$VRAM" run --growth --group share --group-limit "$BUDGET" --priority "$prio" --overflow host -- \
            "$VRAM" replay "$trace" --growth --passes "$passes" --json --allow-failures \
            >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
        end=$(date +%s.%N)
        echo "$rc $start $end" >"$TMP/$name.done"
    ) &
    pids+=($!)
}

job g guaranteed "$TRACE_G" "$PASSES_G"
# the opportunistic job once the guaranteed one holds its pool: the same bytes in five looks 20 ms apart
# (its first pass reached its peak; the pool keeps that memory to its last pass)
last=0 same=0
for _ in $(seq 1000); do
    [[ -e $TMP/g.done ]] && break
    now=$("$VRAM" top --once --json 2>/dev/null | grep -o '"in_use_bytes": [0-9]*' | head -1 | tr -dc 0-9 || true)
    if [[ ${now:-0} -gt 0 && $now == "$last" ]]; then same=$((same + 1)); else same=0; fi
    last=${now:-0}
    [[ $same -ge 5 ]] && break
    sleep 0.02
done
job o opportunistic "$TRACE_O" "$PASSES_O"
wait

python3 - "$TMP" "$BUDGET" "$VRAM_SIM_DEVICES" "$TRACE_G" "$TRACE_O" "$PASSES_G" "$PASSES_O" <<'PY'
import json, sys
tmp, budget, card, tg, to, pg, po = sys.argv[1:8]
jobs = {}
for name in ("g", "o"):
    rc, start, end = open(f"{tmp}/{name}.done").read().split()
    out = open(f"{tmp}/{name}.out").read().strip().splitlines()
    d = json.loads(out[-1]) if out and out[-1].startswith("{") else {}
    if not d:
        sys.exit(f"bench/limits_share.sh: job {name} printed no JSON (exit status {rc}): "
                 + open(f"{tmp}/{name}.err").read().strip()[-400:])
    jobs[name] = dict(rc=int(rc), start=float(start), end=float(end), **d)
g, o = jobs["g"], jobs["o"]
# the opportunistic job started while the guaranteed one held its pool (that it reached its peak then is
# what its share says: budget - the guaranteed pool, when it did)
overlap = o["start"] < g["end"]
gib = lambda b: "%.2f GiB" % (b / 2**30)
print("# two jobs on one simulated %s card, group budget %s (vram run --group-limit), overflow to host on" % (card, budget))
print("| job | trace | passes | peak live | peak reserved | failed allocs | overflow requests | overflow peak | wall s |")
print("|---|---|---|---|---|---|---|---|---|")
for name, label, trace, passes in (("g", "guaranteed", tg, pg), ("o", "opportunistic", to, po)):
    j = jobs[name]
    print("| %s | %s | %s | %s | %s | %d | %d | %s | %.2f |" % (
        label, trace.split("/")[-1], passes, gib(j["peak_live_bytes"]), gib(j["peak_reserved_bytes"]),
        j["failed_allocs"], j.get("overflow_allocs", 0), gib(j.get("overflow_peak_bytes", 0)), j["end"] - j["start"]))
print("the two peaks together: %s live, above the budget; the opportunistic job started while the guaranteed one "
      "held its pool: %s" % (gib(g["peak_live_bytes"] + o["peak_live_bytes"]), "yes" if overlap else "NO (raise PASSES_G)"))
print(json.dumps({"budget": budget, "card": card, "overlap": overlap,
                  "jobs": {k: {f: v[f] for f in ("rc", "peak_live_bytes", "peak_reserved_bytes", "failed_allocs",
                                                "overflow_allocs", "overflow_peak_bytes") if f in v}
                           | {"wall_s": round(v["end"] - v["start"], 3)} for k, v in jobs.items()}}))
PY
