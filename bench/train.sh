#!/usr/bin/env bash
# bench/train.sh: on a machine with an NVIDIA GPU and PyTorch (torchvision for resnet50) installed,
# builds libvram.so (Release) and runs bench/train.py: real training and generation steps with
# PyTorch's allocators and with vram, one table of step time and peak memory per workload.
# See bench/README.md. Arguments go to bench/train.py, e.g.
#
#   bash bench/train.sh                                   # everything, about 6-8 minutes on an H200
#   bash bench/train.sh --workloads gpt2 --repeat 3
#
# Environment (optional): PYTHON (default python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD=build-bench
PY=${PYTHON:-python3}
mkdir -p "$BUILD/train"
LOG=$BUILD/train/build-vram.log

echo "== building libvram.so (Release) in $BUILD/vram" >&2
if ! { cmake -S . -B "$BUILD/vram" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >"$LOG" 2>&1 &&
       cmake --build "$BUILD/vram" -j "$(nproc 2>/dev/null || echo 4)" --target vram_shared >>"$LOG" 2>&1; }; then
    tail -n 30 "$LOG" >&2
    echo "== libvram.so did not build: the vram rows will say so" >&2
fi
export VRAM_LIBRARY=$PWD/$BUILD/vram/libvram.so
export VRAM_TRAIN_COMMAND="bash bench/train.sh${*:+ $*}"  # for the table's "Reproduce with"

exec "$PY" bench/train.py --out "$BUILD/train" "$@"
