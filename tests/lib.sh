# tests/lib.sh: what the shell tests share; sourced after they set TMP (a scratch directory).

# run CMD...: runs CMD, keeping its exit status in RC and its stdout/stderr in OUT/ERR.
run() {
    set +e
    "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    set -e
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}
