#!/usr/bin/env bash
# bench/gpu_final.sh: the GPU runs that the simulated card cannot prove, at one tree, on a machine with
# an NVIDIA GPU, PyTorch, JAX, CuPy, Lightning and transformers (the device machine of the project).
# Each part writes its output to OUT (default build-gpu/final) as PART.txt (and .json/.jsonl where the
# program writes one); parts run one after another so that timings do not share the card.
#
#   bash bench/gpu_final.sh compat fence pip        # correctness: PyTorch feature table and allocator
#                                                   # tests under both allocators, the fence, pip install
#   bash bench/gpu_final.sh plan stats              # the plan's cost and lightning_stats under vram
#   bash bench/gpu_final.sh                         # only builds (Release, build-gpu/lib)
#
# Parts:
#   compat  python/tests/torch_conformance.py: both parts (the feature table, PyTorch's allocator tests),
#           every row under the native allocator and under vram
#   fence   tests/gpu_fence.sh: every way of taking memory counted by vram run; PyTorch, JAX, CuPy;
#           a group budget across processes
#   pip     `pip install .` into a venv that sees the machine's PyTorch, with CUDA_HOME unset and nvcc
#           and ninja off the PATH; vram.torch.install() there and the mode it got; then with ninja on PATH
#   plan    bench/plan_train.py: the Llama loop (first five steps, per-step time, held/peak) with vram
#           default against plan:false and PyTorch's three allocators; bench/train.py gpt2_generate with
#           vram default against plan:false; first two unmeasured processes (PyTorch's, vram's) pay the
#           machine's cold start
#   sleep   bench/gpu_sleep.py: a generate-then-train loop with the engine's tagged memory slept between
#           phases, against the same loop undisturbed (identical tokens and losses); offload and wake
#           bandwidth against a plain pinned copy; a CUDA graph replayed after a wake
#   sleepproc  bench/gpu_sleep_proc.sh: vram sleep/wake PID of a PyTorch job and vram run --idle-sleep,
#           against undisturbed runs; whether the driver's checkpoint API answers
#   limits  bench/gpu_limits.sh: a job shrunk to 80% of its peak with --overflow host (at start and while it
#           runs), its slowdown; a guaranteed and an opportunistic job under one budget
#   stats   bench/train.py lightning_stats under torch and vram (default and plan:false), and the cost of
#           one torch.cuda.memory_stats() under each (bench/torch_stats_cost.py)
#   train   the README's training rows (bench/readme.py's SOURCES): gpt2, resnet50 and bert_varlen, then
#           gpt2_generate, under the four allocators (bench/train.py, CPUs 2-5); the Llama row is plan's
#   programs  the README's framework rows: llama_trainer, lightning_stats and timm_vit, one round in each order
#   limit   the README's tight-limit rows, vram's column (the peers' do not depend on vram's tree): every
#           trace at 95% and 99.5% full and the bisection (bench/limit.sh with BENCH_PEERS=none)
# At the end OUT is also packed as OUT.tgz (one file, for a machine that returns only so many files).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT_DIR:-build-gpu/final}
B=build-gpu/lib
mkdir -p "$OUT" "$B"
PY=${PYTHON:-python3}
{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: ${VRAM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    nproc
} >"$OUT/machine.txt" 2>&1
if [ -z "${GPU_FINAL_NO_BUILD:-}" ]; then   # set by a caller that built already and runs parts at once
    cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >"$OUT/build.log" 2>&1 &&
        cmake --build "$B" -j "$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
fi
export VRAM_LIBRARY=$PWD/$B/libvram.so PYTHONPATH=$PWD/python
rc=0
part() { echo "== $1 ($(date -u +%T))"; }

for p in "$@"; do
    case $p in
    compat)
        part compat   # its four lanes (each part under each allocator) three at once: they check behaviour, not time
        timeout 550 $PY python/tests/torch_conformance.py --jobs 3 --json "$OUT/compat.json" >"$OUT/compat.txt" 2>&1 ||
            rc=1
        grep -E '^install|^Details of|^  [a-z_0-9]+ \(|^    (native|vram) |probes match|^port under' "$OUT/compat.txt" ;;
    fence)
        part fence
        timeout 300 bash tests/gpu_fence.sh build-gpu/run >"$OUT/fence.txt" 2>&1 || rc=1
        grep -E '^\{|^==|FAIL|refused' "$OUT/fence.txt" ;;
    pip)
        part pip
        (
            set -e
            rm -rf build-gpu/venv build-gpu/src && mkdir -p build-gpu/src
            tar --exclude='./build*' --exclude=./.git -cf - . | tar -C build-gpu/src -xf -
            $PY -m venv --system-site-packages build-gpu/venv
            # the machine's PyTorch may live in a user site (~/.local), which a venv does not see: a .pth
            # names the folder that holds it (after the venv's own, so that the venv's vram wins)
            tsite=$($PY -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
            vsite=$(build-gpu/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
            build-gpu/venv/bin/python -c 'import torch' 2>/dev/null || echo "$tsite" >"$vsite/machine-torch.pth"
            echo "PyTorch from $tsite"
            cd build-gpu/src
            env -u CUDA_HOME PATH="$(dirname "$(command -v cmake)"):/usr/local/bin:/usr/bin:/bin" \
                ../venv/bin/pip install --no-build-isolation . 2>&1
            cd /tmp
            env -u CUDA_HOME -u VRAM_LIBRARY -u PYTHONPATH PATH=/usr/local/bin:/usr/bin:/bin "$OLDPWD/../venv/bin/python" -c '
import shutil, torch, vram, vram.torch
print("nvcc on PATH:", shutil.which("nvcc"))
vram.torch.install()
print("vram from", vram.__file__); print("vram.torch.mode", vram.torch.mode)
x = torch.randn(4096, 4096, device="cuda"); y = (x @ x).sum().item()
print("allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved())
assert vram.torch.mode == "allocator", vram.torch.mode'
            env -u CUDA_HOME PATH=/usr/local/bin:/usr/bin:/bin "$OLDPWD/../venv/bin/vram" ls
            # the same with the machine's ninja on PATH, where it has one (torch.utils.cpp_extension's build)
            if ninja=$(PATH=$PATH:$(dirname "$(command -v $PY)") command -v ninja); then
                env -u CUDA_HOME -u VRAM_LIBRARY -u PYTHONPATH PATH="$(dirname "$ninja"):/usr/bin:/bin" \
                    "$OLDPWD/../venv/bin/python" -c 'import shutil, vram.torch; vram.torch.install()
print("with ninja", shutil.which("ninja"), "vram.torch.mode", vram.torch.mode); assert vram.torch.mode == "allocator"'
            else
                echo "no ninja on this machine"
            fi
        ) >"$OUT/pip.txt" 2>&1 || rc=1
        tail -n 12 "$OUT/pip.txt" ;;
    plan)
        part plan
        # a first process pays a fresh machine's cold start (CUDA, the libraries' files, vram.torch's first
        # load): two unmeasured ones, PyTorch's and vram's (plan_train.py sums its first five steps)
        for conf in "--allocator torch" "--plan true"; do
            timeout 100 $PY bench/plan_train.py $conf --steps 5 >/dev/null 2>>"$OUT/plan-warmup.err" || rc=1
        done
        for conf in "--plan true" "--plan false" "--allocator torch" "--allocator torch-expandable" "--allocator cuda-async"; do
            timeout 200 $PY bench/plan_train.py $conf --steps 12 >>"$OUT/plan-llama.jsonl" 2>>"$OUT/plan-llama.err" || rc=1
        done
        $PY - "$OUT/plan-llama.jsonl" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: r.get(k) for k in ("allocator", "plan", "vram_torch_mode", "first_five_steps_ms", "step_ms_median_second_half",
                                 "peak_allocated_second_half", "reserved_max_second_half", "held_to_step_peak",
                                 "nvidia_smi_used_end")})
PYEOF
        timeout 300 $PY bench/train.py --workloads gpt2_generate --allocators vram --repeat 2 --out "$OUT/gen-plan" \
            >"$OUT/gen-plan.txt" 2>&1 || rc=1
        timeout 300 $PY bench/train.py --workloads gpt2_generate --allocators vram,torch --repeat 2 --vram-alloc-conf plan:false \
            --out "$OUT/gen-noplan" >"$OUT/gen-noplan.txt" 2>&1 || rc=1
        tail -n 12 "$OUT/gen-plan.txt" "$OUT/gen-noplan.txt" ;;
    stats)
        part stats
        timeout 200 $PY bench/torch_stats_cost.py >"$OUT/stats-cost.txt" 2>&1 || rc=1
        cat "$OUT/stats-cost.txt"
        timeout 400 $PY bench/train.py --workloads lightning_stats --allocators torch,vram --repeat 2 --out "$OUT/ls" \
            >"$OUT/lightning.txt" 2>&1 || rc=1
        timeout 300 $PY bench/train.py --workloads lightning_stats --allocators vram --repeat 2 --vram-alloc-conf plan:false \
            --out "$OUT/ls-noplan" >"$OUT/lightning-noplan.txt" 2>&1 || rc=1
        tail -n 12 "$OUT/lightning.txt" "$OUT/lightning-noplan.txt" ;;
    sleep)
        part sleep
        timeout 200 $PY bench/gpu_sleep.py loop --undisturbed >"$OUT/sleep-loop.jsonl" 2>"$OUT/sleep-loop.err" || rc=1
        timeout 200 $PY bench/gpu_sleep.py loop >>"$OUT/sleep-loop.jsonl" 2>>"$OUT/sleep-loop.err" || rc=1
        $PY - "$OUT/sleep-loop.jsonl" <<'PYEOF' || rc=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ref = [r for r in rows if r["undisturbed"]]; slept = [r for r in rows if not r["undisturbed"]]
assert ref and slept, "a run is missing"
same = ref[0]["tokens"] == slept[0]["tokens"] and ref[0]["losses"] == slept[0]["losses"]
print(json.dumps({"identical_to_undisturbed": same, "smi_used_mib": slept[0]["smi_used_mib"], "times": slept[0]["times"],
                  "engine_bytes": slept[0]["engine_bytes"], "vram_torch_mode": slept[0]["vram_torch_mode"]}))
sys.exit(0 if same else 1)
PYEOF
        timeout 300 $PY bench/gpu_sleep.py bandwidth --gib 8 >"$OUT/sleep-bandwidth.json" 2>"$OUT/sleep-bandwidth.err" || rc=1
        cat "$OUT/sleep-bandwidth.json"; tail -n 3 "$OUT/sleep-bandwidth.err" ;;
    sleepproc)
        part sleepproc
        timeout 300 bash bench/gpu_sleep_proc.sh build-gpu/run >"$OUT/sleep-proc.txt" 2>&1 || rc=1
        grep -E '^\{|^==' "$OUT/sleep-proc.txt" ;;
    limits)
        part limits
        timeout 400 bash bench/gpu_limits.sh build-gpu/run >"$OUT/limits.txt" 2>&1 || rc=1
        grep -E '^\{|^==|^peak' "$OUT/limits.txt" ;;
    train)
        part train
        timeout 420 $PY bench/train.py --workloads gpt2,resnet50,bert_varlen --repeat 2 --cpus 2-5 --out "$OUT/train" \
            >"$OUT/train.txt" 2>&1 || rc=1
        timeout 300 $PY bench/train.py --workloads gpt2_generate --allocators torch,torch-expandable,vram --repeat 2 \
            --cpus 2-5 --out "$OUT/train-generate" >"$OUT/train-generate.txt" 2>&1 || rc=1
        grep -hE '^== \[|verdict' "$OUT/train.txt" "$OUT/train-generate.txt" ;;
    programs)
        part programs
        timeout 280 $PY bench/train.py --workloads llama_trainer,lightning_stats,timm_vit --repeat 1 --cpus 2-5 \
            --out "$OUT/programs-1" >"$OUT/programs-1.txt" 2>&1 || rc=1
        timeout 280 $PY bench/train.py --workloads llama_trainer,lightning_stats,timm_vit --repeat 1 --cpus 2-5 \
            --allocators vram,torch-async,torch-expandable,torch --out "$OUT/programs-2" >"$OUT/programs-2.txt" 2>&1 || rc=1
        grep -hE '^== \[|verdict' "$OUT/programs-1.txt" "$OUT/programs-2.txt" ;;
    limit)
        part limit
        for f in 0.95 0.995; do
            BENCH_VRAM=$PWD/$B/vram BENCH_PEERS=none BENCH_FRACTION=$f BENCH_OUT="$OUT/limit-$f" timeout 200 \
                bash bench/limit.sh >"$OUT/limit-$f.txt" 2>&1 || rc=1
            grep -E '^Completed' "$OUT/limit-$f.txt"
        done
        BENCH_VRAM=$PWD/$B/vram BENCH_PEERS=none BENCH_BISECT=1 BENCH_JOBS=8 BENCH_OUT="$OUT/limit-bisect" timeout 300 \
            bash bench/limit.sh >"$OUT/limit-bisect.txt" 2>&1 || rc=1
        grep -E '^\| [a-z]' "$OUT/limit-bisect.txt" ;;
    *) echo "unknown part $p"; rc=2 ;;
    esac
done
[ $# -gt 0 ] && tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
exit $rc
