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
#   BENCH_TIMEOUT=S      limit for one replay process in seconds (default 600)
#   BENCH_CPU=N          CPU every replay process is pinned to with taskset (default 2 when taskset
#                        exists and the machine has more than 2 CPUs; "none": not pinned). A process
#                        that migrates between CPUs mid-pass made warm figures vary 1.5x run to run
#   PYTHON, CXX, CUDA_HOME   python3, g++, /usr/local/cuda
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD=build-bench
OUT_DIR=${BENCH_OUT:-$BUILD}
PASSES=${BENCH_PASSES:-11}
REPEAT=${BENCH_REPEAT:-3}
TIMEOUT=${BENCH_TIMEOUT:-600}
PIN=()
CPU=${BENCH_CPU:-}
if [ -z "$CPU" ] && command -v taskset >/dev/null && [ "$(nproc 2>/dev/null || echo 1)" -gt 2 ]; then CPU=2; fi
if [ -n "$CPU" ] && [ "$CPU" != none ]; then PIN=(taskset -c "$CPU"); fi
PY=${PYTHON:-python3}
CXX=${CXX:-g++}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
JOBS=$(nproc 2>/dev/null || echo 4)
read -r -a TRACES <<<"${BENCH_TRACES:-$(echo traces/*.trace.gz)}"

mkdir -p "$BUILD" "$OUT_DIR/logs"
RESULTS=$OUT_DIR/results.jsonl
TABLE=$OUT_DIR/table.md
: >"$RESULTS"

say() { printf '== %s\n' "$*" >&2; }

# ---- the machine -----------------------------------------------------------------------------
say "machine"
GPU_LINE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0 2>/dev/null || true)
IFS=',' read -r GPU_NAME GPU_DRIVER GPU_MEM <<<"${GPU_LINE:-?,?,?}"
GPU_NAME=$(echo "$GPU_NAME" | xargs); GPU_DRIVER=$(echo "$GPU_DRIVER" | xargs); GPU_MEM=$(echo "$GPU_MEM" | xargs)
CUDA_DRIVER=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | awk '{print $3}' || true)
echo "gpu: ${GPU_NAME} (driver ${GPU_DRIVER}, ${GPU_MEM}, CUDA ${CUDA_DRIVER:-?})" >&2
echo "compiler: $($CXX --version 2>&1 | head -n1); cmake: $(cmake --version 2>&1 | head -n1)" >&2

# ---- vram, Release -----------------------------------------------------------------------------
say "building vram (Release)"
VRAM=$BUILD/vram/vram
if ! { cmake -S . -B "$BUILD/vram" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >"$OUT_DIR/logs/build-vram.log" 2>&1 &&
       cmake --build "$BUILD/vram" -j "$JOBS" --target vram >>"$OUT_DIR/logs/build-vram.log" 2>&1; }; then
    tail -n 30 "$OUT_DIR/logs/build-vram.log" >&2
    say "vram did not build: its rows will say so"
    VRAM=""
fi
[ -n "$VRAM" ] && echo "vram $("$VRAM" --version 2>&1 | head -n1)" >&2

# ---- peers, against the installed PyTorch ------------------------------------------------------
say "building bench/peers"
PEERS=$BUILD/peers
TORCH_DIR=$("$PY" -c 'import torch,os;print(os.path.dirname(torch.__file__))' 2>"$OUT_DIR/logs/torch.err" || true)
TORCH_VERSION="not installed"
if [ -n "$TORCH_DIR" ]; then
    TORCH_VERSION=$("$PY" -c 'import torch;print(torch.__version__)')
    TORCH_ABI=$("$PY" -c 'import torch;print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
    echo "torch $TORCH_VERSION at $TORCH_DIR (CXX11 ABI $TORCH_ABI, CUDA $("$PY" -c 'import torch;print(torch.version.cuda)'))" >&2
    if ! "$CXX" -std=c++17 -O2 -DNDEBUG -Wall -D_GLIBCXX_USE_CXX11_ABI="$TORCH_ABI" \
            -isystem "$CUDA_HOME/include" -isystem "$TORCH_DIR/include" \
            -isystem "$TORCH_DIR/include/torch/csrc/api/include" \
            bench/peers.cpp -o "$PEERS" \
            -L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" -lc10_cuda -lc10 \
            -L"$CUDA_HOME/lib64/stubs" -L"$CUDA_HOME/lib64" -lcuda \
            -Wl,--allow-shlib-undefined >"$OUT_DIR/logs/build-peers.log" 2>&1; then
        tail -n 40 "$OUT_DIR/logs/build-peers.log" >&2
        say "bench/peers did not build: its rows will say so"
        PEERS=""
    fi
else
    cat "$OUT_DIR/logs/torch.err" >&2
    say "no PyTorch for $PY: bench/peers rows will say so"
    PEERS=""
fi

# ---- replays -----------------------------------------------------------------------------------
# The commit of this tree only (a copy of the sources inside another checkout is not that checkout);
# VRAM_COMMIT names it when the tree is no checkout of its own.
COMMIT=unknown
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$PWD" ]; then COMMIT=$(git rev-parse --short HEAD); fi
COMMIT=${VRAM_COMMIT:-$COMMIT}
if [ -z "${VRAM_COMMIT:-}" ] && [ "$COMMIT" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    COMMIT="$COMMIT + uncommitted changes"
fi
"$PY" bench/table.py meta "date=$(date -u +%Y-%m-%d)" "gpu=$GPU_NAME" "driver=$GPU_DRIVER" \
    "memory=$GPU_MEM" "cuda=${CUDA_DRIVER:-?}" "torch=$TORCH_VERSION" "passes=$PASSES" "repeat=$REPEAT" \
    "cpu=${CPU:-none}" \
    "command=bash bench/run.sh" "commit=$COMMIT" >>"$RESULTS"

FAIL=(sh -c 'echo "$0" >&2; exit 1')  # FAIL MESSAGE: a row that failed before it could run

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

peer_row() {
    local trace=$1 alloc=$2
    if [ -z "$PEERS" ]; then run_row "$alloc" "$trace" "${FAIL[@]}" "bench/peers did not build"; return; fi
    if [ "$alloc" = torch-expandable ]; then
        run_row "$alloc" "$trace" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$PEERS" "$alloc" "$trace" --passes "$PASSES"
    else
        run_row "$alloc" "$trace" "$PEERS" "$alloc" "$trace" --passes "$PASSES"
    fi
}

for rep in $(seq 1 "$REPEAT"); do
    for trace in "${TRACES[@]}"; do
        for policy in prealloc growth growth-hold growth-lean growth-plain; do vram_row "$trace" "$policy"; done
        for alloc in cumemalloc cumemallocasync torch torch-expandable; do peer_row "$trace" "$alloc"; done
    done
done

# ---- the tables --------------------------------------------------------------------------------
"$PY" bench/table.py table "$RESULTS" >"$TABLE"
say "results: $RESULTS; table: $TABLE"
echo
cat "$TABLE"
