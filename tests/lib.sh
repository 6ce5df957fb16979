# tests/lib.sh: what the shell tests share; sourced after they set TMP (a scratch directory), or
# before start_test, which sets it.

# start_test ARGS...: the start of a test whose one argument is the vram binary: VRAM (its absolute
# path), SRC (the source tree), TMP (a scratch directory, removed at exit), PASSED and FAILED (0); a
# usage line and exit 2 for any other arguments.
start_test() {
    if [[ $# -ne 1 ]]; then
        echo "usage: $0 VRAM_BINARY" >&2
        exit 2
    fi
    VRAM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT
    PASSED=0
    FAILED=0
}

# run CMD...: runs CMD, keeping its exit status in RC and its stdout/stderr in OUT/ERR.
run() {
    set +e
    "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    set -e
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# check NAME CONDITION...: evaluates CONDITION (a bash expression over RC, OUT, ERR), prints PASS or
# FAIL with the output, and counts it in PASSED / FAILED.
check() {
    local name=$1
    shift
    if eval "$@"; then
        echo "PASS  $name"
        PASSED=$((PASSED + 1))
    else
        echo "FAIL  $name  [$*]"
        echo "  rc=$RC"
        sed 's/^/  out: /' <<<"$OUT"
        sed 's/^/  err: /' <<<"$ERR"
        FAILED=$((FAILED + 1))
    fi
}

# has TEXT NEEDLE: whether TEXT contains NEEDLE.
has() { grep -qF -- "$2" <<<"$1"; }

# field FILE KEY: a top-level value of the JSON object in FILE (a replay's --json)
field() { ${PYTHON:-python3} -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print(v)' "$1" "$2"; }
