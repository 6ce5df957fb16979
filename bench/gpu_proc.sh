# bench/gpu_proc.sh: the part that bench/gpu_limits.sh and bench/gpu_sleep_proc.sh share, sourced by them
# (not run on its own): builds `vram` and the preload library (Release, no tests) into BUILD_DIR (their
# first argument, default build-run) and sets
#   B    the build directory
#   PY   the Python that runs the PyTorch job (PYTHON, default python3)
#   V    the vram CLI built there
#   T    a fresh temporary directory for the run's files
#   fails  0, the count of failed checks the caller adds to
# and exports VRAM_LEDGER_DIR=$T/ledger (a ledger of the run's own, so vram top lists only its jobs) and
# CUBLAS_WORKSPACE_CONFIG=:4096:8 (cuBLAS deterministic: the losses of two runs compare exactly).
# Exits 1 when the build fails.
# shellcheck shell=bash
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "bench/gpu_proc.sh is sourced by bench/gpu_limits.sh and bench/gpu_sleep_proc.sh; run one of those" >&2
    exit 2
fi
B=${1:-build-run}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >/dev/null &&
    cmake --build "$B" -j "$(nproc)" --target vram vram_preload >/dev/null || exit 1
PY=${PYTHON:-python3}
V=$B/vram
T=$(mktemp -d)
export VRAM_LEDGER_DIR=$T/ledger CUBLAS_WORKSPACE_CONFIG=:4096:8
fails=0
