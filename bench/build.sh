# bench/build.sh: the part that bench/run.sh and bench/limit.sh share, sourced by them (not run on its
# own): describes the machine, builds vram (Release, the `vram` CLI) and bench/peers against the
# installed PyTorch, and names the commit measured. See bench/README.md.
#
# Sets the settings both read from the environment (BUILD=build-bench, OUT_DIR from BENCH_OUT,
# TIMEOUT from BENCH_TIMEOUT, PY, CXX, CUDA_HOME, JOBS, TRACES from BENCH_TRACES, PEER_ALLOCATORS from
# BENCH_PEERS), makes BUILD and OUT_DIR/logs, defines say, FAIL and write_meta (below), and sets:
#   GPU_NAME GPU_DRIVER GPU_MEM CUDA_DRIVER   card 0 as nvidia-smi names it ("?" without one)
#   VRAM                                      the vram CLI (BENCH_VRAM when set: not built), "" when it
#                                             did not build
#   PEERS                                     bench/peers ("host" alone where there is no PyTorch), "" when
#                                             it did not build
#   TORCH_VERSION                             PyTorch's version, "not installed" without it
#   COMMIT                                    the commit of this tree (VRAM_COMMIT overrides), "unknown"
# shellcheck shell=bash
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "bench/build.sh is sourced by bench/run.sh and bench/limit.sh; run one of those" >&2
    exit 2
fi

BUILD=build-bench
OUT_DIR=${BENCH_OUT:-$BUILD}
TIMEOUT=${BENCH_TIMEOUT:-600}
mkdir -p "$BUILD" "$OUT_DIR/logs"
PY=${PYTHON:-python3}
CXX=${CXX:-g++}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
JOBS=$(nproc 2>/dev/null || echo 4)
read -r -a TRACES <<<"${BENCH_TRACES:-$(echo traces/*.trace.gz)}"
read -r -a PEER_ALLOCATORS <<<"${BENCH_PEERS:-cumemalloc cumemallocasync torch torch-expandable}"
[ "${PEER_ALLOCATORS[*]}" = none ] && PEER_ALLOCATORS=()   # BENCH_PEERS=none: vram alone
say() { printf '== %s\n' "$*" >&2; }
# bench_command SCRIPT: the command that reproduces this run, with the BENCH_* settings it was given
bench_command() {
    local cmd="bash $1" v
    for v in BENCH_FRACTION BENCH_PASSES BENCH_REPEAT BENCH_CPU BENCH_POLICIES BENCH_CONFS BENCH_PEERS BENCH_TRACES \
             BENCH_BISECT BENCH_BISECT_LO BENCH_BISECT_HI BENCH_BISECT_STEP BENCH_JOBS BENCH_EXCLUSIVE \
             BENCH_CARD_BYTES; do
        if [ -n "${!v:-}" ]; then cmd="$v=\"${!v}\" $cmd"; fi
    done
    echo "$cmd"
}
FAIL=(sh -c 'echo "$0" >&2; exit 1')  # FAIL MESSAGE: a row that failed before it could run
# write_meta SCRIPT [KEY=VALUE...]: the results file's first line (bench/table.py meta): the machine,
# PyTorch, the command and commit, and the script's own settings. Call after sourcing.
write_meta() {
    local script=$1; shift
    "$PY" bench/table.py meta "date=$(date -u +%Y-%m-%d)" "gpu=$GPU_NAME" "driver=$GPU_DRIVER" \
        "memory=$GPU_MEM" "cuda=${CUDA_DRIVER:-?}" "torch=$TORCH_VERSION" "$@" \
        "command=$(bench_command "$script")" "commit=$COMMIT"
}

# ---- the machine -----------------------------------------------------------------------------
say "machine"
GPU_LINE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0 2>/dev/null || true)
IFS=',' read -r GPU_NAME GPU_DRIVER GPU_MEM <<<"${GPU_LINE:-?,?,?}"
GPU_NAME=$(echo "$GPU_NAME" | xargs); GPU_DRIVER=$(echo "$GPU_DRIVER" | xargs); GPU_MEM=$(echo "$GPU_MEM" | xargs)
CUDA_DRIVER=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | awk '{print $3}' || true)
echo "gpu: ${GPU_NAME} (driver ${GPU_DRIVER}, ${GPU_MEM}, CUDA ${CUDA_DRIVER:-?})" >&2
echo "compiler: $($CXX --version 2>&1 | head -n1); cmake: $(cmake --version 2>&1 | head -n1)" >&2

# ---- vram, Release -----------------------------------------------------------------------------
VRAM=$BUILD/vram/vram
if [ -n "${BENCH_VRAM:-}" ]; then                 # a vram CLI built elsewhere (CI's check of limit.sh)
    say "vram: $BENCH_VRAM (BENCH_VRAM, not built here)"
    VRAM=$BENCH_VRAM
elif say "building vram (Release)" &&
     ! { cmake -S . -B "$BUILD/vram" -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >"$OUT_DIR/logs/build-vram.log" 2>&1 &&
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
else                        # host alone (-DPEERS_HOST_ONLY); the other allocators' rows say why they failed
    cat "$OUT_DIR/logs/torch.err" >&2
    say "no PyTorch for $PY: bench/peers built for host alone"
    if ! "$CXX" -std=c++17 -O2 -DNDEBUG -Wall -DPEERS_HOST_ONLY bench/peers.cpp -o "$PEERS" \
            >"$OUT_DIR/logs/build-peers.log" 2>&1; then
        tail -n 40 "$OUT_DIR/logs/build-peers.log" >&2
        say "bench/peers did not build: its rows will say so"
        PEERS=""
    fi
fi

# ---- the commit measured -----------------------------------------------------------------------
# The commit of this tree only (a copy of the sources inside another checkout is not that checkout);
# VRAM_COMMIT names it when the tree is no checkout of its own.
COMMIT=unknown
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$PWD" ]; then COMMIT=$(git rev-parse --short HEAD); fi
COMMIT=${VRAM_COMMIT:-$COMMIT}
if [ -z "${VRAM_COMMIT:-}" ] && [ "$COMMIT" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    COMMIT="$COMMIT + uncommitted changes"
fi
