#!/usr/bin/env bash
# bench/run.sh: on a machine with an NVIDIA GPU and PyTorch installed, builds vram (Release) and
# bench/peers, replays every trace in traces/ through every allocator (each in its own process),
# collects the JSON lines and prints one Markdown table per trace. See bench/README.md.
#
#   bash bench/run.sh
#
# Environment (all optional):
#   BENCH_OUT=DIR        where results.jsonl, table.md and logs/ go (default build-bench/)
#   BENCH_PASSES=N       replays per allocator: 1 cold + N-1 warm (default 11: a warm pass of a
#                        trace lasts 1-10 ms, too short alone against clock ramps and noise)
#   BENCH_REPEAT=K       runs of every row, interleaved; the table shows the median and the
#                        range of the K runs (default 3)
#   BENCH_TRACES="..."   trace files (default traces/*.trace.gz)
#   BENCH_POLICIES="..." vram replay policies (default "prealloc growth growth-hold growth-lean
#                        growth-plain")
#   BENCH_CONFS="..."    more vram rows: growth with each of these allocator options (VRAM_ALLOC_CONF,
#                        e.g. "hold_peak:true,extent_mb:32"; default none)
#   BENCH_PEERS="..."    bench/peers allocators (default "cumemalloc cumemallocasync torch
#                        torch-expandable"; "none": vram alone; cumemalloc is the slow one: about 35 s
#                        a bert_varlen run)
#   BENCH_TIMEOUT=S      limit for one replay process in seconds (default 600)
#   BENCH_CPU=N          CPU every replay process is pinned to with taskset (default 2 when taskset
#                        exists and the machine has more than 2 CPUs; "none": not pinned). A process
#                        that migrates between CPUs mid-pass made warm figures vary 1.5x run to run
#   PYTHON, CXX, CUDA_HOME   python3, g++, /usr/local/cuda
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PASSES=${BENCH_PASSES:-11}
REPEAT=${BENCH_REPEAT:-3}
PIN=()
CPU=${BENCH_CPU:-}
if [ -z "$CPU" ] && command -v taskset >/dev/null && [ "$(nproc 2>/dev/null || echo 1)" -gt 2 ]; then CPU=2; fi
if [ -n "$CPU" ] && [ "$CPU" != none ]; then PIN=(taskset -c "$CPU"); fi
read -r -a POLICIES <<<"${BENCH_POLICIES:-prealloc growth growth-hold growth-lean growth-plain}"
read -r -a CONFS <<<"${BENCH_CONFS:-}"

# The machine, vram and bench/peers built, the commit, the folders: shared with bench/limit.sh.
# shellcheck source=bench/build.sh
source bench/build.sh
RESULTS=$OUT_DIR/results.jsonl
TABLE=$OUT_DIR/table.md

# ---- replays -----------------------------------------------------------------------------------
write_meta bench/run.sh "passes=$PASSES" "repeat=$REPEAT" "cpu=${CPU:-none}" >"$RESULTS"

# run_row KEY TRACE COMMAND...: runs one replay in its own process, appends its JSON line.
run_row() {
    local key=$1 trace=$2; shift 2
    local log
    log="$OUT_DIR/logs/$(basename "$trace" .trace.gz).${key// /_}.run$rep"
    local rc=0
    say "run $rep/$REPEAT: $key: $trace: $*"
    timeout "$TIMEOUT" "${PIN[@]}" "$@" >"$log.out" 2>"$log.err" || rc=$?
    "$PY" bench/table.py tag --allocator "$key" --trace "$trace" --rc "$rc" --stderr "$log.err" \
        --run "$rep" <"$log.out" | tee -a "$RESULTS" >&2
}

vram_row() {
    local trace=$1 policy=$2
    if [ -z "$VRAM" ]; then run_row "vram $policy" "$trace" "${FAIL[@]}" "vram did not build"; return; fi
    run_row "vram $policy" "$trace" "$VRAM" replay "$trace" --policy "$policy" --passes "$PASSES" --json
}

conf_row() {   # growth with allocator options of the row's own
    local trace=$1 conf=$2
    if [ -z "$VRAM" ]; then run_row "vram growth $conf" "$trace" "${FAIL[@]}" "vram did not build"; return; fi
    run_row "vram growth $conf" "$trace" env VRAM_ALLOC_CONF="$conf" "$VRAM" replay "$trace" --policy growth \
        --passes "$PASSES" --json
}

peer_row() {
    local trace=$1 alloc=$2
    if [ -z "$PEERS" ]; then run_row "$alloc" "$trace" "${FAIL[@]}" "bench/peers did not build"; return; fi
    run_row "$alloc" "$trace" "$PEERS" "$alloc" "$trace" --passes "$PASSES"   # (peers sets expandable's conf)
}

for rep in $(seq 1 "$REPEAT"); do
    for trace in "${TRACES[@]}"; do
        for policy in "${POLICIES[@]}"; do vram_row "$trace" "$policy"; done
        for conf in "${CONFS[@]}"; do conf_row "$trace" "$conf"; done
        for alloc in "${PEER_ALLOCATORS[@]}"; do peer_row "$trace" "$alloc"; done
    done
done

# ---- the tables --------------------------------------------------------------------------------
"$PY" bench/table.py table "$RESULTS" >"$TABLE"
say "results: $RESULTS; table: $TABLE"
echo
cat "$TABLE"
