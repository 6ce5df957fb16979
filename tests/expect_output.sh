#!/usr/bin/env bash
# expect_output.sh: a check for ctest that needs both the exit status and the output of a program.
# CTest ignores a test's exit status once PASS_REGULAR_EXPRESSION is set, so a program that failed
# after printing what the expression looks for passed; registered through this script instead, it
# must exit 0 and its output (stdout and stderr together, printed as they came) must match REGEX.
#
#   tests/expect_output.sh REGEX CMD [ARGS...]
#
# REGEX is a POSIX extended regular expression (bash's =~), matched anywhere in the output, '.'
# matching newlines too, as CTest's expressions do. Exits 0 when both hold, else 1 saying which did
# not (2 on bad usage).
set -uo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 REGEX CMD [ARGS...]" >&2
    exit 2
fi
re=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [[ $rc -ne 0 ]]; then
    echo "expect_output: '$1' exited with status $rc"
    exit 1
fi
if ! [[ $out =~ $re ]]; then
    echo "expect_output: the output of '$1' does not match: $re"
    exit 1
fi
