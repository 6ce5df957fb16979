#!/usr/bin/env bash
# `vram run` on a GPU machine with PyTorch and nvcc (not part of ctest: CI has no GPU).
# Usage, from the repository root: bash tests/gpu_run_check.sh
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
    y = torch.empty(3 << 30, dtype=torch.uint8, device="cuda"); print("3 GiB more: NOT refused")
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
wait "$one" && wait "$two" && echo "both finished"
