#!/usr/bin/env bash
# bench/gpu_sleep_proc.sh: sleep and wake from outside the process on a real GPU (the driver's process
# checkpoint API), with PyTorch. Usage, from the repository root: bash bench/gpu_sleep_proc.sh [BUILD_DIR]
#
#  1. the driver: does cuCheckpointProcessGetState answer for this process (the API exists and is allowed)?
#  2. vram sleep PID / vram wake PID: a deterministic PyTorch training process (bench/gpu_train_steps.py) is
#     put to sleep between its steps, nvidia-smi's used memory read while it sleeps, then woken; its losses
#     must equal those of the same program run undisturbed; the times of vram sleep and vram wake.
#  3. vram run --idle-sleep 2s: a process that is idle for 12 s between two phases is put to sleep by the
#     watcher and woken by its next call: nvidia-smi while idle, the latency of that first call, the
#     results identical to an undisturbed run.
# One JSON line per part; exit 1 if a check failed.
set -uo pipefail
# shellcheck source=bench/gpu_proc.sh
source bench/gpu_proc.sh   # B, PY, V, T, fails; builds vram and the preload library
smi() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0; }
ms() { date +%s%3N; }

echo "== the driver's checkpoint API"
$PY - <<'EOF'
import ctypes, json, os
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)
ver = ctypes.c_int(); cuda.cuDriverGetVersion(ctypes.byref(ver))
fn = getattr(cuda, "cuCheckpointProcessGetState", None)
st = ctypes.c_int(-1); rc = fn(os.getpid(), ctypes.byref(st)) if fn else None
print(json.dumps({"part": "checkpoint_api", "driver_version": ver.value, "has_symbol": fn is not None,
                  "get_state_rc": rc, "state": st.value}))
EOF

echo "== vram sleep PID / vram wake PID of a PyTorch training process"
$PY bench/gpu_train_steps.py --steps 40 >"$T/ref.json"
"$V" run --growth -- $PY bench/gpu_train_steps.py --steps 40 --pause-at 20 --ready "$T/ready" --go "$T/go" \
    >"$T/slept.json" &
pid=$!
for _ in $(seq 600); do [ -e "$T/ready" ] && break; sleep 0.1; done
child=$(cat "$T/ready")
awake=$(smi)
t0=$(ms); "$V" sleep "$child"; rs=$?; t1=$(ms)
asleep=$(smi)
"$V" top --once --json >"$T/top.json"
t2=$(ms); "$V" wake "$child"; rw=$?; t3=$(ms)
woken=$(smi)
touch "$T/go"
wait $pid
$PY - "$T/ref.json" "$T/slept.json" "$T/top.json" "$rs" "$rw" "$awake" "$asleep" "$woken" "$((t1 - t0))" "$((t3 - t2))" <<'EOF' || fails=$((fails + 1))
import json, sys
ref, slept = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
top = json.load(open(sys.argv[3]))
rs, rw, awake, asleep, woken, sleep_ms, wake_ms = sys.argv[4:11]
same = ref["losses"] == slept["losses"]
states = [(p.get("state"), p.get("host_bytes")) for p in top.get("processes", [])]
print(json.dumps({"part": "sleep_pid", "identical_to_undisturbed": same, "sleep_rc": int(rs), "wake_rc": int(rw),
                  "smi_used_mib": {"awake": int(awake), "asleep": int(asleep), "woken": int(woken)},
                  "sleep_ms": int(sleep_ms), "wake_ms": int(wake_ms), "top_state_host_bytes": states,
                  "torch_allocated": slept.get("allocated")}))
sys.exit(0 if same and rs == "0" and rw == "0" and int(asleep) < int(awake) else 1)
EOF

echo "== vram run --idle-sleep 2s: asleep while idle, woken by the next call"
$PY bench/gpu_train_steps.py --steps 20 --idle-at 10 --idle-s 12 >"$T/ref2.json"
"$V" run --growth --idle-sleep 2s -- $PY bench/gpu_train_steps.py --steps 20 --idle-at 10 --idle-s 12 \
    --ready "$T/ready2" >"$T/idle.json" &
pid=$!
for _ in $(seq 600); do [ -e "$T/ready2" ] && break; sleep 0.1; done
t0=$(ms)   # the watcher starts the sleep 2 s into the idle phase; moving ~4 GiB out takes seconds more
for _ in $(seq 100); do
    "$V" top --once --json >"$T/top2.json"
    grep -q '"state": *"asleep"' "$T/top2.json" && break
    sleep 0.1
done
echo "asleep (or given up) $(( $(ms) - t0 )) ms after the idle phase began"
idle_used=$(smi)
wait $pid
$PY - "$T/ref2.json" "$T/idle.json" "$T/top2.json" "$idle_used" <<'EOF' || fails=$((fails + 1))
import json, sys
ref, idle = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
top = json.load(open(sys.argv[3]))
same = ref["losses"] == idle["losses"]
states = [(p.get("state"), p.get("host_bytes")) for p in top.get("processes", [])]
print(json.dumps({"part": "idle_sleep", "identical_to_undisturbed": same, "smi_used_mib_while_idle": int(sys.argv[4]),
                  "first_call_after_idle_ms": idle.get("first_call_after_idle_ms"),
                  "same_call_undisturbed_ms": ref.get("first_call_after_idle_ms"), "top_state_host_bytes": states}))
sys.exit(0 if same and any(s == "asleep" for s, _ in states) else 1)
EOF
echo "== $fails failed"
[ "$fails" -eq 0 ]
