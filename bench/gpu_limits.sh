#!/usr/bin/env bash
# bench/gpu_limits.sh: limits that move on a real GPU, with PyTorch under vram run (the preload library).
# Usage, from the repository root: bash bench/gpu_limits.sh [BUILD_DIR]
#
#  1. reference: bench/gpu_train_steps.py under vram run --growth, no limit: its peak (max reserved) P and
#     step times;
#  2. shrunk at start: the same job under --limit 0.8 P --overflow host: it completes, its losses equal the
#     reference's, the slowdown per step (median of the second half), the host bytes it used (vram top);
#  3. shrunk while it runs: the job paused after step 10, `vram limit PID 0.8 P`, PyTorch's cache emptied,
#     the job goes on with --overflow host and completes;
#  4. two jobs in one group with a budget of 1.5 P (less than their two peaks): an opportunistic one at its
#     peak first, then a guaranteed one, then both at once; both complete, the guaranteed one with its own
#     losses, the opportunistic one with its overflow bytes (vram top while both wait and while both run;
#     the step times include sharing the GPU's compute).
# One JSON line per part; exit 1 if a check failed.
set -uo pipefail
# shellcheck source=bench/gpu_proc.sh
source bench/gpu_proc.sh   # B, PY, V, T, fails; builds vram and the preload library
STEPS=30

echo "== 1. reference"
"$V" run --growth -- $PY bench/gpu_train_steps.py --steps $STEPS >"$T/ref.json" || fails=$((fails + 1))
P=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["max_reserved"])' "$T/ref.json")
L=$((P * 8 / 10))
echo "peak $P, 80%: $L"

echo "== 2. shrunk at start: --limit 0.8 P --overflow host"
"$V" run --growth --limit "$L" --overflow host -- $PY bench/gpu_train_steps.py --steps $STEPS --pause-at 15 \
    --ready "$T/r2" --go "$T/g2" >"$T/shrunk.json" &
pid=$!
for _ in $(seq 900); do [ -e "$T/r2" ] && break; sleep 0.1; done
"$V" top --once --json >"$T/top2.json"; touch "$T/g2"; wait $pid || fails=$((fails + 1))

echo "== 3. shrunk while it runs: vram limit PID 0.8 P after step 10"
"$V" run --growth --overflow host -- $PY bench/gpu_train_steps.py --steps $STEPS --pause-at 10 --ready "$T/r3" \
    --go "$T/g3" --empty-cache-after-pause >"$T/moved.json" &
pid=$!
for _ in $(seq 900); do [ -e "$T/r3" ] && break; sleep 0.1; done
"$V" limit "$(cat "$T/r3")" "$L"; rl=$?
"$V" top --once --json >"$T/top3a.json"
touch "$T/g3"
sleep 3; "$V" top --once --json >"$T/top3b.json"
wait $pid || fails=$((fails + 1))

echo "== 4. guaranteed and opportunistic under one budget of 1.5 P"
# The opportunistic job takes its peak first and waits; the guaranteed one starts and waits at step 1 (its
# limit is the budget less no other guaranteed member); both then run at once, and vram top is read while
# they do: the opportunistic job's limit has fallen to what the guaranteed one leaves, and it goes on in
# host memory.
G=$((P * 3 / 2))
"$V" run --growth --group share --group-limit "$G" --priority opportunistic --overflow host -- \
    $PY bench/gpu_train_steps.py --steps 60 --pause-at 5 --ready "$T/r4o" --go "$T/g4o" >"$T/opp.json" &
po=$!
for _ in $(seq 900); do [ -e "$T/r4o" ] && break; sleep 0.1; done
"$V" run --growth --group share --group-limit "$G" --priority guaranteed -- \
    $PY bench/gpu_train_steps.py --steps $STEPS --pause-at 1 --ready "$T/r4" --go "$T/g4" >"$T/gua.json" &
pg=$!
for _ in $(seq 900); do [ -e "$T/r4" ] && break; sleep 0.1; done
"$V" top --once --json >"$T/top4a.json"
touch "$T/g4" "$T/g4o"
sleep 3; "$V" top --once --json >"$T/top4.json"
wait $pg || fails=$((fails + 1))
wait $po || fails=$((fails + 1))

$PY - "$T" "$P" "$L" "$rl" <<'EOF' || fails=$((fails + 1))
import json, statistics, sys
T, P, L, rl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
j = lambda n: json.load(open("%s/%s" % (T, n)))
med = lambda r: statistics.median(r["step_ms"][len(r["step_ms"]) // 2:])
def procs(n):
    return [{k: p.get(k) for k in ("pid", "limit_bytes", "in_use_bytes", "overflow_bytes", "over_limit", "priority", "group")}
            for p in j(n).get("processes", [])]
ref, shrunk, moved, gua, opp = j("ref.json"), j("shrunk.json"), j("moved.json"), j("gua.json"), j("opp.json")
ok = True
r = {"part": "shrunk_at_start", "peak": P, "limit": L, "same_losses": shrunk["losses"] == ref["losses"],
     "step_ms_ref": med(ref), "step_ms_shrunk": med(shrunk), "slowdown": round(med(shrunk) / med(ref), 3),
     "top": procs("top2.json")}
print(json.dumps(r)); ok &= r["same_losses"]
r = {"part": "shrunk_while_running", "vram_limit_rc": rl, "same_losses": moved["losses"] == ref["losses"],
     "step_ms_after": med(moved), "slowdown": round(med(moved) / med(ref), 3),
     "top_after_limit": procs("top3a.json"), "top_running": procs("top3b.json")}
print(json.dumps(r)); ok &= r["same_losses"] and rl == 0
r = {"part": "guaranteed_opportunistic", "budget": P * 3 // 2, "guaranteed_step_ms": med(gua),
     "guaranteed_slowdown": round(med(gua) / med(ref), 3), "opportunistic_step_ms": med(opp),
     "guaranteed_same_losses": gua["losses"] == ref["losses"], "top_both_waiting": procs("top4a.json"),
     "top_both_running": procs("top4.json")}
print(json.dumps(r)); ok &= r["guaranteed_same_losses"]
sys.exit(0 if ok else 1)
EOF
echo "== $fails failed"
[ "$fails" -eq 0 ]
