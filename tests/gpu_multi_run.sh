#!/usr/bin/env bash
# Issue 6 in one command, on a machine with two or more GPUs (not part of ctest: CI has none).
# Usage, from the repository root: bash tests/gpu_multi_run.sh
# Builds Release into build-multi, then runs every check the issue lists and stops at the first failure.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=build-multi
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j "$(nproc)" --target vram vram_shared vram_preload gpu_multi_test >/dev/null
say() { printf '\n== %s\n' "$*"; }

say "vram ls, and CUDA_VISIBLE_DEVICES=1 renumbering"
"$B/vram" ls
CUDA_VISIBLE_DEVICES=1 "$B/vram" ls

say "gpu_multi_test: split card next to a preallocated one, a limit on one card only"
"$B/tests/gpu_multi_test"

say "vram run --devices 1 --limit 8GiB: PyTorch sees one card of 8 GiB"
"$B/vram" run --devices 1 --limit 8GiB --growth -- python3 -c '
import torch
f, t = torch.cuda.mem_get_info(0)
assert torch.cuda.device_count() == 1 and t == 8 << 30, (torch.cuda.device_count(), t)
print("device_count 1, total 8 GiB: ok")'

say "group budget: the same card, then different cards"
hold='import sys, time, torch
x = torch.empty(6 << 30, dtype=torch.uint8, device="cuda"); print("first: 6 GiB held", flush=True); time.sleep(20)'
try='import sys, torch
want = sys.argv[1] == "ok"
try:
    x = torch.empty(6 << 30, dtype=torch.uint8, device="cuda"); got = True
except torch.OutOfMemoryError:
    got = False
print("second: 6 GiB", "allocated" if got else "refused", "(expected %s)" % ("allocated" if want else "refused"))
sys.exit(0 if got == want else 1)'
"$B/vram" run --devices 0 --growth --group g --group-limit 10GiB -- python3 -c "$hold" & first=$!
sleep 10
"$B/vram" top --once
"$B/vram" run --devices 0 --growth --group g --group-limit 10GiB --log -- python3 -c "$try" refused
"$B/vram" run --devices 1 --growth --group g --group-limit 10GiB -- python3 -c "$try" ok
wait "$first"

say "NCCL all-reduce on vram memory"
VRAM_LIBRARY="$PWD/$B/libvram.so" python3 python/tests/gpu_nccl_allreduce.py
echo "0 failed"
