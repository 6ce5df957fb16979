#!/usr/bin/env bash
# The preload library's fence on the real driver (a GPU machine with nvcc's cuda.h; not part of ctest:
# CI has no GPU; tests/shim/ checks the same entry points over the fake driver in CI).
# Usage, from the repository root: bash tests/gpu_fence.sh [BUILD_DIR]   (default build-run)
# For each way of taking memory (tests/gpu_fence.c: cuMemAlloc, the VMM release-after-map idiom, CUDA
# arrays, graph memory nodes, cuCtxSetLimit's heap): 256 MiB pieces under `vram run --limit 1GiB
# --growth`, then without vram (the control: the card serves all 8). Then a group budget across two
# processes, then PyTorch, JAX and CuPy under vram run. One JSON line per run; exit 1 if any failed.
set -uo pipefail
B=${1:-build-run}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >/dev/null &&
    cmake --build "$B" -j "$(nproc)" --target vram vram_preload >/dev/null || exit 1
CUDA_INC=${CUDA_HOME:-/usr/local/cuda}/include
cc -O2 -std=c11 -I"$CUDA_INC" -o "$B/gpu_fence" tests/gpu_fence.c -lcuda || exit 1
fails=0
check() { if ! "$@"; then echo "FAIL: $*"; fails=$((fails + 1)); fi; }

for sc in alloc vmm_release array graph heap; do
    echo "== $sc under vram run --limit 1GiB --growth"
    check "$B/vram" run --limit 1GiB --growth -- "$B/gpu_fence" $sc 8
    echo "== $sc without vram (control)"
    check "$B/gpu_fence" $sc 8
done

echo "== a group budget of 1 GiB across two processes: the first holds 3 x 256 MiB, the second gets one piece"
export VRAM_LEDGER_DIR=$(mktemp -d)
"$B/vram" run --growth --group fence --group-limit 1GiB -- "$B/gpu_fence" alloc 3 8 >"$B/fence_first.json" &
first=$!
sleep 4
"$B/vram" run --growth --group fence --group-limit 1GiB -- "$B/gpu_fence" alloc 8 >"$B/fence_second.json"
wait $first
cat "$B/fence_first.json" "$B/fence_second.json"
check grep -q '"taken": 3,' "$B/fence_first.json"
check grep -q '"taken": 1,.*"refused_by": "CUDA_ERROR_OUT_OF_MEMORY"' "$B/fence_second.json"

echo "== CuPy under vram run --limit 2GiB --growth"
check "$B/vram" run --limit 2GiB --growth -- python3 -c '
import cupy as cp
free, total = cp.cuda.runtime.memGetInfo(); print("CuPy memGetInfo total GiB", total / 2**30)
assert total == 2 << 30, total
a = cp.ones((1 << 28,), dtype=cp.float32); print("1 GiB ok", float(a[:10].sum()))
try:
    b = cp.empty((3 << 28,), dtype=cp.float32)
    raise SystemExit("3 GiB more: NOT refused")
except cp.cuda.memory.OutOfMemoryError as e:
    print("3 GiB more: refused:", str(e)[:120])'

echo "== PyTorch under vram run --limit 8GiB --growth"
check "$B/vram" run --limit 8GiB --growth -- python3 -c '
import torch
free, total = torch.cuda.mem_get_info(); assert total == 8 << 30, total
x = torch.empty(6 << 30, dtype=torch.uint8, device="cuda"); print("6 GiB ok")
try:
    y = torch.empty(3 << 30, dtype=torch.uint8, device="cuda"); raise SystemExit("3 GiB more: NOT refused")
except torch.OutOfMemoryError as e:
    print("3 GiB more: torch.OutOfMemoryError:", str(e)[:120])'

echo "== JAX (preallocates 75% of what it sees) under vram run --limit 8GiB"
check "$B/vram" run --limit 8GiB -- python3 -c '
import jax, jax.numpy as jnp
x = jnp.ones((1 << 28,), dtype=jnp.float32); x.block_until_ready()
limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit", 0)
print("JAX bytes_limit GiB", round(limit / 2**30, 2)); assert 0 < limit <= 8 << 30, limit'

echo "== $fails failed"
[ "$fails" -eq 0 ]
