#!/usr/bin/env bash
# bench/instructions.sh: instructions per warm alloc or free call, exact and noise-free, on the
# simulated card: callgrind counts `vram replay TRACE --passes 11` and `--passes 1`, and the
# difference over 10 x the trace's events is one warm call (the replay loop included).
#
#   bash bench/instructions.sh [VRAM_BINARY]     (default build/vram; needs valgrind)
#
# Environment: POLICIES (default "growth prealloc"), TRACES (default gpt2_train bert_varlen),
# CARD (the simulated card, default 24GiB: room under the limit as on a large GPU, and within what
# valgrind lets a process reserve).
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
for t in ${TRACES:-gpt2_train bert_varlen}; do
    for p in ${POLICIES:-growth prealloc}; do
        f=traces/$t.trace.gz
        n=$("$VRAM" replay "$f" --policy "$p" --passes 1 --json 2>/dev/null |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["trace_events"])')
        one=$(refs "$f" "$p" 1); eleven=$(refs "$f" "$p" 11)
        echo "$t $p: $(( (eleven - one) / (10 * n) ))"
    done
done
