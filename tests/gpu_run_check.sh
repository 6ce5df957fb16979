#!/usr/bin/env bash
# `vram run` on a GPU machine with PyTorch and nvcc (not part of ctest: CI has no GPU).
# Usage, from the repository root: bash tests/gpu_run_check.sh
# Every check fails the script (set -e, Python asserts) and prints what it saw. At the end
# bench/run_overhead.py measures a training step with and without vram run (OVERHEAD_ROUNDS=N rounds,
# default 5, about 3 minutes; OVERHEAD_ROUNDS=0 skips it); its table goes to build-run/run_overhead.md.
set -euo pipefail
B=build-run
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >/dev/null
cmake --build "$B" -j "$(nproc)" --target vram vram_preload >/dev/null

echo "== PyTorch under vram run --limit 8GiB --growth --log"
"$B/vram" run --limit 8GiB --growth --log -- python3 -c '
import torch
free, total = torch.cuda.mem_get_info(); print("mem_get_info total GiB", total / 2**30, "free GiB", round(free / 2**30, 2))
x = torch.empty(6 << 30, dtype=torch.uint8, device="cuda"); print("6 GiB ok")
try:
    y = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    raise SystemExit("3 GiB more: NOT refused")
except torch.OutOfMemoryError as e:
    print("3 GiB more: torch.OutOfMemoryError:", str(e)[:160])'

echo "== a CUDA runtime program (cudaMalloc, cudaMallocAsync) under vram run --limit 1GiB, then without"
nvcc -O2 -o "$B/gpu_runtime_app" tests/gpu_runtime_app.cu
"$B/vram" run --limit 1GiB --growth -- "$B/gpu_runtime_app"
"$B/gpu_runtime_app"

echo "== JAX with its default preallocation (75% of what it is told the card holds) under --limit 8GiB"
"$B/vram" run --limit 8GiB --log -- python3 -c '
import jax, jax.numpy as jnp
x = jnp.ones((1 << 28,), dtype=jnp.float32); x.block_until_ready()
stats = jax.devices()[0].memory_stats() or {}
limit = stats.get("bytes_limit", 0)
print("JAX bytes_limit GiB", round(limit / 2**30, 2), "(75% of the 8 GiB it sees)")
assert 0 < limit <= 8 << 30, limit'

echo "== two PyTorch processes with --growth share the card and both finish"
step='import torch
x = torch.randn(8192, 8192, device="cuda")
for _ in range(20): x = (x @ x).clamp_(-1, 1)
torch.cuda.synchronize(); print("done, peak GiB", round(torch.cuda.max_memory_reserved() / 2**30, 2))'
"$B/vram" run --growth --limit 40GiB -- python3 -c "$step" & one=$!
"$B/vram" run --growth --limit 40GiB -- python3 -c "$step" & two=$!
wait "$one"; wait "$two"; echo "both finished"   # (set -e stops at a failed wait)

# ---- preallocation (no --growth): the limit is reserved on the card at the first allocation ----------
# The program watches the card from outside: observe() runs a separate plain process (no shim, no
# VRAM_*) that reads the card's free memory with cuMemGetInfo through libcuda. "drop" is how much less
# the card has free than before the program touched CUDA (the program's CUDA context included).
# Run twice: with --growth (nothing reserved: the drop is the context) and without (the 8 GiB limit
# taken at the first, tiny allocation and held whatever the program does with it).
cat >"$B/prealloc_check.py" <<'PY'
import os, subprocess, sys
import torch

GiB, MiB = 1 << 30, 1 << 20
mode = sys.argv[1]   # growth | prealloc
OBSERVER = r"""
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx, free, total = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
print(free.value)
"""


def observe():
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("VRAM_")}
    return int(subprocess.run([sys.executable, "-c", OBSERVER], env=env, check=True, capture_output=True,
                              text=True).stdout)


def gib(b):
    return "%.3f GiB" % (b / GiB)


base = observe()                                          # before this process touched CUDA
torch.zeros(1, device="cuda"); torch.cuda.synchronize()   # the first allocation (a 2 MiB segment)
drop_start = base - observe()
free, total = torch.cuda.mem_get_info()
print(f"[{mode}] after a first 2 MiB allocation: the card has {gib(drop_start)} less free (context included);"
      f" the program sees total {gib(total)}, free {gib(free)}")
assert total == 8 * GiB, total
assert free >= 8 * GiB - 4 * MiB, free                    # the reservation is free to the program
blocks = [torch.empty(512 * MiB, dtype=torch.uint8, device="cuda") for _ in range(15)]   # 7.5 GiB
torch.cuda.synchronize()
drop_full = base - observe()
print(f"[{mode}] holding 15 x 512 MiB = 7.5 GiB of tensors: the card has {gib(drop_full)} less free")
try:
    more = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    raise SystemExit(f"[{mode}] 1 GiB more than 7.5 GiB under the 8 GiB limit was NOT refused")
except torch.OutOfMemoryError as e:
    print(f"[{mode}] 1 GiB more: torch.OutOfMemoryError: {str(e)[:150]}")
del blocks
torch.cuda.empty_cache(); torch.cuda.synchronize()
drop_freed = base - observe()
print(f"[{mode}] after freeing them (empty_cache): the card has {gib(drop_freed)} less free")
if mode == "prealloc":
    assert 8 * GiB <= drop_start <= 10 * GiB, "the 8 GiB were not reserved at the start"
    assert abs(drop_full - drop_start) <= 256 * MiB, "the program's 7.5 GiB did not come out of its reservation"
    assert abs(drop_freed - drop_start) <= 256 * MiB, "the reservation was not taken back after the frees"
else:
    assert drop_start < 2 * GiB, "--growth reserved memory up front"
    assert abs((drop_full - drop_start) - 15 * 512 * MiB) <= 256 * MiB, "--growth: 7.5 GiB of tensors not seen"
print(f"[{mode}] drop at start {gib(drop_start)}")
PY
echo "== preallocation: vram run --limit 8GiB (and --growth to compare), the card watched from another process"
growth_out=$("$B/vram" run --growth --limit 8GiB -- python3 "$B/prealloc_check.py" growth)
echo "$growth_out"
prealloc_out=$("$B/vram" run --limit 8GiB -- python3 "$B/prealloc_check.py" prealloc)
echo "$prealloc_out"
python3 - "$growth_out" "$prealloc_out" <<'PY'
import re, sys
g, p = (float(re.search(r"drop at start ([0-9.]+) GiB", s).group(1)) for s in sys.argv[1:3])
print("reserved at the start by preallocation beyond the CUDA context (prealloc drop - growth drop): %.3f GiB" % (p - g))
assert abs((p - g) - 8.0) <= 0.25, "expected 8 GiB"
PY

# ---- NVML: the limit is the card's total for NVML queries and nvidia-smi ---------------------------------
echo "== NVML in a program that never loads CUDA (ctypes libnvidia-ml) under vram run --limit 8GiB"
"$B/vram" run --limit 8GiB -- python3 -c '
import ctypes
ml = ctypes.CDLL("libnvidia-ml.so.1")
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
n, seen = ctypes.c_uint(), []
assert ml.nvmlInit_v2() == 0 and ml.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0
for i in range(n.value):
    h, m = ctypes.c_void_p(), Mem()
    assert ml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0 and ml.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0
    print("NVML device %d: total %d MiB, used %d MiB, free %d MiB" % (i, m.total >> 20, m.used >> 20, m.free >> 20))
    seen.append(m.total)
assert not any("libcuda.so" in l for l in open("/proc/self/maps")), "the shim loaded libcuda for NVML"
assert 8 << 30 in seen, "no NVML device showed the 8 GiB limit as its total"'

if command -v nvidia-smi >/dev/null; then
    echo "== nvidia-smi under vram run --limit 8GiB (then without)"
    smi=$("$B/vram" run --limit 8GiB -- nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader)
    echo "under vram run: $smi"
    echo "without:        $(nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader | head -1)"
    if [[ $(head -1 <<<"$smi") != "8192 MiB, "* ]]; then
        echo "FAIL: nvidia-smi did not show 8192 MiB total under vram run --limit 8GiB (if the ctypes NVML check" \
             "above passed, nvidia-smi does not reach nvmlDeviceGetMemoryInfo/_v2 through dlsym)" >&2
        exit 1
    fi
else
    echo "== nvidia-smi: not installed here, skipped"
fi

echo "== NVML inside a PyTorch program under vram run --limit 8GiB, holding 1 GiB: the numbers of cuMemGetInfo"
"$B/vram" run --limit 8GiB -- python3 -c '
import ctypes, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
ml = ctypes.CDLL("libnvidia-ml.so.1")
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
assert ml.nvmlInit_v2() == 0
h, m = ctypes.c_void_p(), Mem()
uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
if uuid is None or ml.nvmlDeviceGetHandleByUUID(("GPU-%s" % uuid).encode(), ctypes.byref(h)) != 0:
    assert ml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
assert ml.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0
free, total = torch.cuda.mem_get_info()
print("NVML: total %d MiB, used %d MiB, free %d MiB; cuMemGetInfo: total %d MiB, free %d MiB; PyTorch reserved %d MiB"
      % (m.total >> 20, m.used >> 20, m.free >> 20, total >> 20, free >> 20, torch.cuda.memory_reserved() >> 20))
if hasattr(torch.cuda, "device_memory_used"):
    try:
        print("torch.cuda.device_memory_used():", torch.cuda.device_memory_used() >> 20, "MiB")
    except Exception as e:
        print("torch.cuda.device_memory_used() unavailable:", e)
assert m.total == 8 << 30 and total == 8 << 30
assert m.free == free, "NVML free differs from cuMemGetInfo free"
assert m.used == m.total - m.free and (1 << 30) <= m.used <= (1 << 30) + (64 << 20), "NVML used is not the program use"'

# ---- the overhead of vram run on a training step (issue 4: within 1%) -------------------------------------
if [[ ${OVERHEAD_ROUNDS:-5} != 0 ]]; then
    echo "== overhead: a PyTorch training step, plain vs vram run vs vram run --limit 40GiB (bench/run_overhead.py)"
    python3 bench/run_overhead.py --vram "$B/vram" --rounds "${OVERHEAD_ROUNDS:-5}" --out "$B/run_overhead.md"
fi
