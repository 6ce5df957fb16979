#!/usr/bin/env bash
# bench/warm_ns.sh: wall time of one warm allocation or free through libvram.so, for one or more
# builds of the library side by side (before and after a change): bench/lib_loop.c replays TRACE
# PASSES times on the simulated card through each library in turn, ROUNDS rounds interleaved, and
# prints per library the lowest and the median of the rounds' ns per call (passes 2.. only).
#
#   bash bench/warm_ns.sh LIBVRAM_SO [LIBVRAM_SO...]
#
# Environment: TRACE (default traces/gpt2_train.trace.gz), PASSES (default 41), ROUNDS (default 7),
# MODE ("" for vram_malloc / vram_free, "plugin" for the entry points vram.torch.install() gives
# PyTorch), CPU (pin every run with taskset -c CPU; default 2 where the machine has more than 2),
# CC (default cc). Instruction counts, which do not move with the machine's load: bench/instructions.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -ge 1 ] || { sed -n 2,12p "$0" >&2; exit 2; }
TRACE=${TRACE:-traces/gpt2_train.trace.gz}
PASSES=${PASSES:-41}
ROUNDS=${ROUNDS:-7}
if [ -z "${CPU+x}" ]; then CPU=$([ "$(nproc)" -gt 2 ] && echo 2 || echo ""); fi
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=${CARD:-24GiB}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${CC:-cc}" -std=c11 -O2 -Iinclude bench/lib_loop.c -ldl -o "$tmp/lib_loop"
gzip -dc "$TRACE" >"$tmp/trace"
pin=(); [ -n "$CPU" ] && pin=(taskset -c "$CPU")
for r in $(seq "$ROUNDS"); do
    i=0
    for lib in "$@"; do
        i=$((i + 1))
        ns=$("${pin[@]}" "$tmp/lib_loop" "$(realpath "$lib")" "$PASSES" ${MODE:-} <"$tmp/trace" |
             awk '/^warm call:/ {print $3}')
        [ -n "$ns" ] || { echo "bench/warm_ns.sh: $lib gave no time" >&2; exit 1; }
        echo "$ns" >>"$tmp/lib$i"
    done
done
echo "# ns per warm call, $(basename "$TRACE"), $PASSES passes, $ROUNDS rounds, mode ${MODE:-malloc}${CPU:+, CPU $CPU}"
i=0
for lib in "$@"; do
    i=$((i + 1))
    sort -g "$tmp/lib$i" | awk -v lib="$lib" '{v[NR] = $1} END {printf "%s: lowest %.2f, median %.2f\n", lib, v[1], v[int((NR + 1) / 2)]}'
done
