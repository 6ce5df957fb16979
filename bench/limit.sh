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
#   BENCH_VRAM=PATH       this vram CLI instead of building one (CI's check uses the build's)
#
# Bisection mode, BENCH_BISECT=1: instead of one limit, finds per trace and allocator (vram growth and
# each of BENCH_PEERS) the largest fraction F = peak live / limit in [LO, HI] under which all
# BENCH_PASSES passes complete with no failed allocation, i.e. the smallest limit ceil(peak live / F).
# F runs over the grid LO, LO + STEP, ..., HI (bench/table.py bisect-grid): HI is probed first (it
# completes: HI is the answer), then the grid is bisected, LO last and only when nothing completed
# (it fails: "> 1/LO"); one process per probe, as above, at most 2 + ceil(log2((HI - LO) / STEP))
# probes (8 with the defaults). The bisection assumes a larger limit never fails where a smaller one
# completed. Writes limit-bisect.jsonl (meta, per trace a {"limit": ...} line with peak live, then
# every probe's line with bisect_fraction and bisect_limit_bytes) and limit-bisect.md: one table,
# per trace and allocator the smallest limit as limit / peak live, and the smallest allocator.
#   BENCH_BISECT_LO=F     lowest fraction (default 0.90; decimals only here)
#   BENCH_BISECT_HI=F     highest fraction (default 1.0)
#   BENCH_BISECT_STEP=D   the grid's step, the precision of F (default 0.0025)
#   BENCH_JOBS=N          bisections run at once (default 1), each (trace, allocator) its own; probes
#                         share the card, so allocators whose limit counts the whole card's memory
#                         run after the others, one at a time, when N > 1:
#   BENCH_EXCLUSIVE="..." those allocators (default "cumemalloc": it counts cuMemGetInfo's used bytes)
#   BENCH_CARD_BYTES=B    the card memory the bisections running at once may take together (default:
#                         card 0's free memory at the start; no cap without a GPU); a bisection starts
#                         when its footprint fits beside the running ones' (its largest limit, an
#                         eighth more and 1 GiB; one larger than B runs alone)
# A probe that fails because the card itself is full (the driver refused; bench/table.py card_full),
# not the limit, stops its bisection: with others running, its probes go to logs/limit/pair.N.full.jsonl
# and it is bisected again alone after them; alone, its cell says "not measured".
#
#   BENCH_BISECT=1 BENCH_JOBS=8 bash bench/limit.sh
#   PYTHON, CXX, CUDA_HOME   python3, g++, /usr/local/cuda
#
# Peak live (the most bytes the trace has live at once) comes from `vram replay TRACE --passes 1 --json`
# on the simulated backend (VRAM_BACKEND=sim: no GPU memory taken), or from the trace itself when vram
# did not build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FRACTION=${BENCH_FRACTION:-0.95}
PASSES=${BENCH_PASSES:-2}
BISECT=${BENCH_BISECT:-0}
LO=${BENCH_BISECT_LO:-0.90}
HI=${BENCH_BISECT_HI:-1.0}
STEP=${BENCH_BISECT_STEP:-0.0025}
NJOBS=${BENCH_JOBS:-1}
read -r -a EXCLUSIVE <<<"${BENCH_EXCLUSIVE-cumemalloc}"
case $NJOBS in ''|*[!0-9]*|0) echo "bench/limit.sh: BENCH_JOBS is a number above 0, not '$NJOBS'" >&2; exit 2 ;; esac
if ((NJOBS > 1 && BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
    echo "bench/limit.sh: BENCH_JOBS above 1 needs bash 5.1 or later (wait -n -p), not $BASH_VERSION" >&2; exit 2
fi
case ${BENCH_CARD_BYTES-1} in ''|*[!0-9]*|0)
    echo "bench/limit.sh: BENCH_CARD_BYTES is a number of bytes above 0, not '$BENCH_CARD_BYTES'" >&2; exit 2 ;; esac

# The machine, vram and bench/peers built, the commit, the folders: shared with bench/run.sh.
# shellcheck source=bench/build.sh
source bench/build.sh
mkdir -p "$OUT_DIR/logs/limit"
if [ "$BISECT" = 1 ]; then
    RESULTS=$OUT_DIR/limit-bisect.jsonl
    TABLE=$OUT_DIR/limit-bisect.md
    write_meta bench/limit.sh "passes=$PASSES" "bisect=$LO..$HI step $STEP" "jobs=$NJOBS" >"$RESULTS"
else
    RESULTS=$OUT_DIR/limit.jsonl
    TABLE=$OUT_DIR/limit.md
    write_meta bench/limit.sh "passes=$PASSES" "fraction=$FRACTION" >"$RESULTS"
fi

# row_command KEY TRACE LIMIT: sets CMD to the replay of TRACE through allocator KEY under LIMIT bytes.
row_command() {
    local key=$1 trace=$2 limit=$3
    if [ "$key" = "vram growth" ]; then
        if [ -z "$VRAM" ]; then CMD=("${FAIL[@]}" "vram did not build"); return; fi
        CMD=("$VRAM" replay "$trace" --policy growth --limit "$limit" --passes "$PASSES" --json --allow-failures)
    elif [ -z "$PEERS" ]; then
        CMD=("${FAIL[@]}" "bench/peers did not build")
    else                             # (bench/peers sets torch-expandable's PYTORCH_CUDA_ALLOC_CONF itself)
        CMD=("$PEERS" "$key" "$trace" --limit "$limit" --passes "$PASSES")
    fi
}

# run_row KEY TRACE LIMIT OUTPUT LOG [TAG OPTIONS...]: runs one replay in its own process (its stdout
# and stderr in logs/limit/TRACE.KEY.LOG.out and .err), appends its JSON line to OUTPUT.
run_row() {
    local key=$1 trace=$2 limit=$3 output=$4 log=$5; shift 5
    local rc=0 CMD
    log="$OUT_DIR/logs/limit/$(basename "$trace" .trace.gz).${key// /_}.$log"
    row_command "$key" "$trace" "$limit"
    say "$key: $trace: ${CMD[*]}"
    timeout "$TIMEOUT" "${CMD[@]}" >"$log.out" 2>"$log.err" || rc=$?
    "$PY" bench/table.py tag --allocator "$key" --trace "$trace" --rc "$rc" --stderr "$log.err" "$@" \
        <"$log.out" >>"$output"
}

# peak_json TRACE: the file of `vram replay TRACE --passes 1 --json` on the simulated backend (empty
# when vram did not build), for table.py's peak live.
peak_json() {
    local name
    name=$(basename "$1" .trace.gz)
    local file="$OUT_DIR/logs/limit/$name.peak.json"
    : >"$file"
    if [ -n "$VRAM" ]; then
        env -u VRAM_SIM_DEVICES -u VRAM_SIM_SHARED -u CUDA_VISIBLE_DEVICES VRAM_BACKEND=sim \
            "$VRAM" replay "$1" --passes 1 --json >"$file" 2>"$OUT_DIR/logs/limit/$name.peak.err" || true
    fi
    echo "$file"
}

# probe KEY TRACE GRID_LINE OUTPUT: one probe of a bisection ("FRACTION LIMIT"); prints ok, fail, full
# (the card itself out of memory, not the limit: bench/table.py card_full) or error.
probe() {
    local f l
    read -r f l <<<"$3"
    run_row "$1" "$2" "$l" "$4" "f$f" --fraction "$f" --limit "$l"
    tail -n 1 "$4" | "$PY" bench/table.py probe
}

# bisect_pair KEY TRACE GRID OUTPUT: the bisection of one allocator on one trace over GRID's lines
# (table.py bisect-grid); every probe's line goes to OUTPUT. Returns 3, the bisection stopped, where a
# probe found the card itself full (its answer is not the limit's).
bisect_pair() {
    local key=$1 trace=$2 output=$4 grid lo=0 hi mid lo_ok=0 out
    mapfile -t grid <"$3"
    hi=$((${#grid[@]} - 1))
    out=$(probe "$key" "$trace" "${grid[hi]}" "$output")
    if [ "$out" = full ]; then say "$key: $trace: the card itself full at ${grid[hi]%% *}"; return 3; fi
    if [ "$out" != fail ]; then                      # completes at HI, or cannot run at all
        say "$key: $trace: $out at ${grid[hi]%% *}"
        return 0
    fi
    while ((hi - lo > 1)); do
        mid=$(((lo + hi) / 2))
        out=$(probe "$key" "$trace" "${grid[mid]}" "$output")
        if [ "$out" = full ]; then say "$key: $trace: the card itself full at ${grid[mid]%% *}"; return 3; fi
        if [ "$out" = ok ]; then lo=$mid lo_ok=1; else hi=$mid; fi
    done
    if ((!lo_ok)); then
        out=$(probe "$key" "$trace" "${grid[0]}" "$output")
        if [ "$out" = full ]; then say "$key: $trace: the card itself full at ${grid[0]%% *}"; return 3; fi
        if [ "$out" = ok ]; then lo_ok=1; fi
    fi
    if ((lo_ok)); then
        say "$key: $trace: completes at ${grid[lo]%% *}, fails at ${grid[hi]%% *}"
    else
        say "$key: $trace: fails at ${grid[0]%% *}"
    fi
}

is_exclusive() { local a; for a in "${EXCLUSIVE[@]}"; do [ "$a" = "$1" ] && return 0; done; return 1; }

# run_pair I [alone]: pair I's bisection (pairs[I]) into logs/limit/pair.I.jsonl. Where a probe found the
# card itself full while others ran, its probes move to pair.I.full.jsonl and pair.I.retry asks for the
# bisection again, alone; alone, a full card is the answer (the cell says "not measured").
run_pair() {
    local i=$1 trace key grid rc=0 base="$OUT_DIR/logs/limit/pair.$1"
    IFS=$'\t' read -r trace key grid <<<"${pairs[i]}"
    say "$key: $trace: bisecting"
    bisect_pair "$key" "$trace" "$grid" "$base.jsonl" || rc=$?
    if ((rc == 3)) && [ "${2:-}" != alone ]; then
        cat "$base.jsonl" >>"$base.full.jsonl" && : >"$base.jsonl" && touch "$base.retry"
    fi
}

# footprint GRID: the most card memory a bisection over GRID may take: its largest limit (the grid's
# first line, LO's), an eighth more (cuMemAllocAsync's pool passes the limit by a block before its
# trim) and 1 GiB for the process's context.
footprint() { local f l; read -r f l <"$1"; echo $((l + l / 8 + (1 << 30))); }

# ---- bisection (BENCH_BISECT=1) ----------------------------------------------------------------
if [ "$BISECT" = 1 ]; then
    pairs=()                                          # "TRACE<TAB>KEY<TAB>GRID FILE", in table order
    for trace in "${TRACES[@]}"; do
        name=$(basename "$trace" .trace.gz)
        grid="$OUT_DIR/logs/limit/$name.grid"
        if ! "$PY" bench/table.py bisect-grid --trace "$trace" --lo "$LO" --hi "$HI" --step "$STEP" \
                --vram-json "$(peak_json "$trace")" --append "$RESULTS" >"$grid"; then
            say "$trace: no peak live or a bad grid, skipped"
            continue
        fi
        for key in "vram growth" "${PEER_ALLOCATORS[@]}"; do pairs+=("$trace"$'\t'"$key"$'\t'"$grid"); done
    done
    # the card's memory that bisections running at once may take (BENCH_CARD_BYTES, else card 0's free
    # memory now; none on a machine without a GPU, where vram's card is simulated and host takes none)
    CARD=${BENCH_CARD_BYTES:-}
    if [ -z "$CARD" ] && [ "$GPU_NAME" != "?" ] && ((NJOBS > 1)); then
        free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1 | xargs || true)
        if [[ $free =~ ^[0-9]+$ ]]; then CARD=$((free << 20)); fi
    fi
    say "${#pairs[@]} bisections over [$LO, $HI] to $STEP, $NJOBS at once${CARD:+, taking at most $CARD bytes of the card}"
    later=()
    declare -A held=()                                # running bisection's pid -> its footprint
    used=0
    for i in "${!pairs[@]}"; do
        IFS=$'\t' read -r trace key grid <<<"${pairs[i]}"
        if ((NJOBS == 1)); then run_pair "$i" alone; continue; fi
        if is_exclusive "$key"; then later+=("$i"); continue; fi
        fp=0
        [ -n "$CARD" ] && fp=$(footprint "$grid")
        # wait for a slot, and for room on the card (a bisection larger than the card runs alone)
        while ((${#held[@]} >= NJOBS)) || { [ -n "$CARD" ] && ((${#held[@]} > 0 && used + fp > CARD)); }; do
            done_pid="" wrc=0
            wait -n -p done_pid || wrc=$?
            if [ -n "$done_pid" ] && [ -n "${held[$done_pid]+x}" ]; then
                used=$((used - held[$done_pid])); unset "held[$done_pid]"
            elif ((wrc == 127)); then                 # no job left to wait for: none is running
                held=(); used=0
            fi
        done
        run_pair "$i" &
        held[$!]=$fp; used=$((used + fp))
    done
    wait
    for i in "${!pairs[@]}"; do                       # those that met the card full: again, alone
        [ -e "$OUT_DIR/logs/limit/pair.$i.retry" ] || continue
        rm -f "$OUT_DIR/logs/limit/pair.$i.retry"
        IFS=$'\t' read -r trace key grid <<<"${pairs[i]}"
        say "$key: $trace: bisected again, alone on the card"
        run_pair "$i" alone
    done
    for i in "${later[@]}"; do run_pair "$i" alone; done   # alone on the card, one after the other
    for i in "${!pairs[@]}"; do cat "$OUT_DIR/logs/limit/pair.$i.jsonl" >>"$RESULTS"; rm -f "$OUT_DIR/logs/limit/pair.$i.jsonl"; done
    "$PY" bench/table.py bisect "$RESULTS" >"$TABLE"
    say "results: $RESULTS; table: $TABLE"
    echo
    cat "$TABLE"
    exit 0
fi

# ---- replays under one limit -------------------------------------------------------------------
for trace in "${TRACES[@]}"; do
    if ! LIMIT=$("$PY" bench/table.py limit-for --trace "$trace" --fraction "$FRACTION" \
                     --vram-json "$(peak_json "$trace")" --append "$RESULTS"); then
        say "$trace: no peak live, skipped"
        continue
    fi
    say "$trace: limit $LIMIT bytes (peak live / $FRACTION)"
    for key in "vram growth" "${PEER_ALLOCATORS[@]}"; do
        run_row "$key" "$trace" "$LIMIT" "$RESULTS" "f$FRACTION"
        tail -n 1 "$RESULTS" >&2
    done
done

# ---- the table ---------------------------------------------------------------------------------
"$PY" bench/table.py limit "$RESULTS" >"$TABLE"
say "results: $RESULTS; table: $TABLE"
echo
cat "$TABLE"
