# tests/procs.sh: programs under `vram run` that a shell test drives line by line, as real processes
# (tests/ledger_lib_test.sh, tests/shim/limit_test.sh). Its functions use TMP (a scratch directory) and
# VRAM, set by the test before it calls them. Each process has a NAME: its pid in PID[NAME], the write end of its input fifo in FD[NAME],
# the answer lines read so far in LINES[NAME]; its output in $TMP/NAME.out, its errors in $TMP/NAME.err.
# The test calls procs_cleanup at exit (every process left is killed, TMP removed).

declare -A PID FD LINES

# procs_clean_env: none of the caller's own vram, CUDA or fake-driver settings reaches the processes (the
# test sets what it wants after this).
procs_clean_env() {
    unset VRAM_LIMIT VRAM_LOG VRAM_GROWTH VRAM_GROUP VRAM_GROUP_LIMIT CUDA_VISIBLE_DEVICES LD_PRELOAD VRAM_PRIORITY \
          VRAM_OVERFLOW VRAM_OVERFLOW_MAX VRAM_LIMIT_MAX VRAM_GROUP_LIMIT_MAX VRAM_MEMORY_LIMIT VRAM_FORCE_ALLOW_GROWTH \
          VRAM_ALLOC_CONF VRAM_MEMORY_FRACTION FAKE_CUDA_DEVICES FAKE_CUDA_MEM FAKE_CUDA_SHARED
    local v
    for v in $(compgen -e | grep -E '^VRAM_(MEMORY_)?LIMIT_' || true); do unset "$v"; done
}

procs_cleanup() {
    for name in "${!PID[@]}"; do kill -9 "${PID[$name]}" 2>/dev/null || true; done
    rm -rf "$TMP"
}

# vram_run_start NAME [ENV=V ...] [VRAM RUN OPTIONS] -- PROGRAM [ARGS...]: PROGRAM under vram run (which
# execs it: the same pid), reading its commands from a fifo. Each process closes the fifos of the others,
# so that one's stop is seen by that one alone.
vram_run_start() {
    local name=$1 envs=() opts=()
    shift
    while [[ $1 == *=* ]]; do envs+=("$1"); shift; done
    while [[ $1 != -- ]]; do opts+=("$1"); shift; done
    shift
    rm -f "$TMP/$name.in" "$TMP/$name.out" "$TMP/$name.err"
    mkfifo "$TMP/$name.in"
    (
        for f in "${FD[@]}"; do exec {f}>&-; done
        exec env ${envs[@]+"${envs[@]}"} "$VRAM" run ${opts[@]+"${opts[@]}"} -- "$@" \
            <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err"
    ) &
    PID[$name]=$!
    local fd
    exec {fd}>"$TMP/$name.in"
    FD[$name]=$fd
    LINES[$name]=0
}

# say NAME CMD: sends CMD, waits for its answer (10 s at most); the answer in ANSWER.
say() {
    local name=$1 fd=${FD[$1]}
    echo "$2" >&"$fd"
    LINES[$name]=$((LINES[$name] + 1))
    for _ in $(seq 1000); do
        [[ $(wc -l <"$TMP/$name.out") -ge ${LINES[$name]} ]] && break
        sleep 0.01
    done
    ANSWER=$(sed -n "${LINES[$name]}p" "$TMP/$name.out")
}

# says NAME CMD...: each in turn; their answers space-separated in ANSWERS, each cut to its first word
# when ANSWER_FIRST_WORD=1 (a program whose answers go on with a message).
says() {
    local name=$1
    shift
    ANSWERS=
    for c in "$@"; do
        say "$name" "$c"
        if [[ ${ANSWER_FIRST_WORD:-0} == 1 ]]; then ANSWERS="$ANSWERS${ANSWERS:+ }${ANSWER%% *}"
        else ANSWERS="$ANSWERS${ANSWERS:+ }$ANSWER"; fi
    done
}

# stop NAME: closes its input (the program ends at end of file) and waits for it.
stop() {
    local name=$1 fd=${FD[$1]}
    exec {fd}>&-
    wait "${PID[$name]}" 2>/dev/null || true
    unset "PID[$name]" "FD[$name]"
}

# slot NAME KEYS...: "KEY=VALUE ..." of NAME's ledger slot of device 0, its row in vram top --json
# ("KEY=none" each: no row; "no vram top" when vram top failed).
slot() {
    local name=$1
    shift
    "$VRAM" top --once --json 2>/dev/null | python3 -c '
import json, sys
rows = [p for p in json.load(sys.stdin)["processes"] if p["pid"] == int(sys.argv[1]) and p["device"] == 0]
print(" ".join("%s=%s" % (k, json.dumps(rows[0].get(k, "absent")) if rows else "none") for k in sys.argv[2:]))' \
        "${PID[$name]}" "$@" || echo "no vram top"
}
