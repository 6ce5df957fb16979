#!/usr/bin/env bash
# bench/limit.sh: under a tight limit. On a machine with an NVIDIA GPU and PyTorch installed, builds vram
# (Release) and bench/peers as bench/run.sh does (bench/build.sh), then for every trace sets
# limit = ceil(peak live / BENCH_FRACTION) bytes, so that the trace's peak live is 95% of the limit, and
# replays the trace under that limit through `vram replay --policy growth --limit L` and through each peer
# with `bench/peers ALLOCATOR TRACE --limit L` (each in its own process), collects the JSON lines and prints
# one Markdown table: per trace and allocator, the failed allocations (of how many), reserved/live and the
# first error. The target: vram completes every trace without an out-of-memory error. See bench/README.md.
#
#   bash bench/limit.sh
#
# Environment (all optional):
#   BENCH_OUT=DIR         where limit.jsonl, limit.md and logs/ go (default build-bench/)
#   BENCH_FRACTION=F      peak live / limit, 0 < F <= 1 (default 0.95; a decimal or a ratio like 19/20;
#                         the limit is ceil(peak live / F), not rounded further)
#   BENCH_PASSES=N        replays of the trace in each process (default 2: the second pass starts from
#                         what the allocator kept of the first)
#   BENCH_TRACES="..."    trace files (default traces/*.trace.gz)
#   BENCH_PEERS="..."     the bench/peers allocators (default "cumemalloc cumemallocasync torch
#                         torch-expandable"; "host", listed with them or alone, is the counting limit on
#                         the host, no GPU needed;
#                         "none": vram alone)
#   BENCH_TIMEOUT=S       limit for one replay process in seconds (default 600)
#   PYTHON, CXX, CUDA_HOME   python3, g++, /usr/local/cuda
#
# Peak live (the most bytes the trace has live at once) comes from `vram replay TRACE --passes 1 --json`
# on the simulated backend (VRAM_BACKEND=sim: no GPU memory taken), or from the trace itself when vram
# did not build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FRACTION=${BENCH_FRACTION:-0.95}
PASSES=${BENCH_PASSES:-2}

# The machine, vram and bench/peers built, the commit, the folders: shared with bench/run.sh.
# shellcheck source=bench/build.sh
source bench/build.sh
mkdir -p "$OUT_DIR/logs/limit"
RESULTS=$OUT_DIR/limit.jsonl
TABLE=$OUT_DIR/limit.md

# ---- replays under the limit -------------------------------------------------------------------
write_meta bench/limit.sh "passes=$PASSES" "fraction=$FRACTION" >"$RESULTS"

# run_row KEY TRACE COMMAND...: runs one replay in its own process, appends its JSON line.
run_row() {
    local key=$1 trace=$2; shift 2
    local log
    log="$OUT_DIR/logs/limit/$(basename "$trace" .trace.gz).${key// /_}"
    local rc=0
    say "$key: $trace: $*"
    timeout "$TIMEOUT" "$@" >"$log.out" 2>"$log.err" || rc=$?
    "$PY" bench/table.py tag --allocator "$key" --trace "$trace" --rc "$rc" --stderr "$log.err" \
        <"$log.out" | tee -a "$RESULTS" >&2
}

for trace in "${TRACES[@]}"; do
    name=$(basename "$trace" .trace.gz)
    peak_json="$OUT_DIR/logs/limit/$name.peak.json"
    : >"$peak_json"
    if [ -n "$VRAM" ]; then
        env -u VRAM_SIM_DEVICES -u CUDA_VISIBLE_DEVICES VRAM_BACKEND=sim \
            "$VRAM" replay "$trace" --passes 1 --json >"$peak_json" 2>"$OUT_DIR/logs/limit/$name.peak.err" || true
    fi
    if ! LIMIT=$("$PY" bench/table.py limit-for --trace "$trace" --fraction "$FRACTION" \
                     --vram-json "$peak_json" --append "$RESULTS"); then
        say "$trace: no peak live, skipped"
        continue
    fi
    say "$trace: limit $LIMIT bytes (peak live / $FRACTION)"

    if [ -z "$VRAM" ]; then
        run_row "vram growth" "$trace" "${FAIL[@]}" "vram did not build"
    else
        run_row "vram growth" "$trace" "$VRAM" replay "$trace" --policy growth --limit "$LIMIT" --passes "$PASSES" --json \
            --allow-failures
    fi
    for alloc in "${PEER_ALLOCATORS[@]}"; do
        if [ -z "$PEERS" ]; then
            run_row "$alloc" "$trace" "${FAIL[@]}" "bench/peers did not build"
        else                         # (bench/peers sets torch-expandable's PYTORCH_CUDA_ALLOC_CONF itself)
            run_row "$alloc" "$trace" "$PEERS" "$alloc" "$trace" --limit "$LIMIT" --passes "$PASSES"
        fi
    done
done

# ---- the table ---------------------------------------------------------------------------------
"$PY" bench/table.py limit "$RESULTS" >"$TABLE"
say "results: $RESULTS; table: $TABLE"
echo
cat "$TABLE"
