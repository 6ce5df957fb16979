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
