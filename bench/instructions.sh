#!/usr/bin/env bash
# bench/instructions.sh: instructions per warm alloc or free call, exact and noise-free, on the
# simulated card: callgrind counts `vram replay TRACE --passes 11` and `--passes 1`, and the
# difference over 10 x the trace's events is one warm call (the replay loop included).
#
#   bash bench/instructions.sh [VRAM_BINARY]     (default build/vram; needs valgrind)
#
# Then, when libvram.so lies next to VRAM_BINARY (or LIBVRAM names one), the same for growth through
# the shared library loaded with dlopen, as PyTorch and Python call it (bench/lib_loop.c, built here
# with cc): no inlining into the caller's loop, thread-locals through __tls_get_addr; once through
# vram_malloc / vram_free, once through the plugin entry points vram.torch.install() gives PyTorch.
#
# Environment: POLICIES (default "growth prealloc"), TRACES (default gpt2_train bert_varlen),
# CARD (the simulated card, default 24GiB: room under the limit as on a large GPU, and within what
# valgrind lets a process reserve), LIBVRAM, CC (default cc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VRAM=$(realpath "${1:-build/vram}")
command -v valgrind >/dev/null || { echo "bench/instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=${CARD:-24GiB}
refs() {   # refs TRACE POLICY PASSES: the instructions callgrind counted
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$VRAM" replay "$1" --policy "$2" --passes "$3" 2>&1 |
        awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
echo "# instructions per warm call, $("$VRAM" --version | head -1), simulated ${VRAM_SIM_DEVICES} card"
events() {   # events TRACE: its alloc and free lines (what a pass calls)
    gzip -dc "$1" | grep -c '^[af] '
}
for t in ${TRACES:-gpt2_train bert_varlen}; do
    f=traces/$t.trace.gz
    n=$(events "$f")
    for p in ${POLICIES:-growth prealloc}; do
        one=$(refs "$f" "$p" 1); eleven=$(refs "$f" "$p" 11)
        echo "$t $p: $(( (eleven - one) / (10 * n) ))"
    done
done
LIB=${LIBVRAM:-$(dirname "$VRAM")/libvram.so}
[ -e "$LIB" ] || exit 0
LIB=$(realpath "$LIB")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${CC:-cc}" -std=c11 -O2 -Iinclude bench/lib_loop.c -ldl -o "$tmp/lib_loop"
lib_refs() {   # lib_refs TRACE PASSES [plugin]
    gzip -dc "$1" | valgrind --tool=callgrind --callgrind-out-file=/dev/null "$tmp/lib_loop" "$LIB" "$2" ${3:-} 2>&1 |
        awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
for t in ${TRACES:-gpt2_train bert_varlen}; do
    f=traces/$t.trace.gz
    n=$(events "$f")
    one=$(lib_refs "$f" 1); eleven=$(lib_refs "$f" 11)
    echo "$t growth, through libvram.so: $(( (eleven - one) / (10 * n) ))"
    one=$(lib_refs "$f" 1 plugin); eleven=$(lib_refs "$f" 11 plugin)
    echo "$t growth, through libvram.so's plugin entry points (PyTorch's path, one stream): $(( (eleven - one) / (10 * n) ))"
done
