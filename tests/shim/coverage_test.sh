#!/usr/bin/env bash
# coverage_test.sh: the preload library's coverage table (shim/shim.h: SHIM_HOOKS and SHIM_UNCOVERED)
# is complete for the driver API vram builds against, and says what it does:
#   - every symbol libcuda.so.1 of CUDA 13.0 exports is classed in tests/shim/driver_symbols.txt, and
#     the classes agree with the table (hook: in SHIM_HOOKS; uncovered: in SHIM_UNCOVERED;
#     hook+uncovered: in both, an entry of role ACTIVITY, interposed only to see the process work);
#   - libvram_preload.so exports exactly the table's hooks (and NVML's and dlsym): nothing is
#     interposed outside the table;
#   - the docs (docs/reference.md, "What counts against a limit") name every entry point that is not covered;
#   - where a CUDA 13.0 stub library or a driver is on the machine, its exports are the file's (a
#     driver of another version: the differences are listed, not failed).
# The scenarios themselves (one per TAKES, HOLDS and GIVES entry) run in shim_test.sh.
#
#   tests/shim/coverage_test.sh APP_COVER PRELOAD_LIB DRIVER_SYMBOLS DOC
set -euo pipefail

if [[ $# -ne 4 ]]; then
    echo "usage: $0 APP_COVER PRELOAD_LIB DRIVER_SYMBOLS DOC" >&2
    exit 2
fi
COVER=$1 PRELOAD=$2 SYMBOLS=$3 README=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PASSED=0
FAILED=0
RC=0 OUT="" ERR=""   # check prints them on a failure
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # check

"$COVER" hooks | awk '{print $1}' | sort >"$TMP/hooks"
"$COVER" uncovered | sort >"$TMP/uncovered"
grep -v '^#' "$SYMBOLS" | awk 'NF' >"$TMP/classed"
awk '{print $1}' "$TMP/classed" | sort >"$TMP/symbols"
awk '$2 == "hook" || $2 == "hook+uncovered" {print $1}' "$TMP/classed" | sort >"$TMP/class_hook"
awk '$2 == "uncovered" || $2 == "hook+uncovered" {print $1}' "$TMP/classed" | sort >"$TMP/class_uncovered"
awk '$2 == "hook+uncovered" {print $1}' "$TMP/classed" | sort >"$TMP/class_both"
"$COVER" hooks | awk '$2 == "ACTIVITY" {print $1}' | sort >"$TMP/activity"

bad_classes=$(awk 'NF != 2 || ($2 != "hook" && $2 != "uncovered" && $2 != "hook+uncovered" && $2 != "none")' "$TMP/classed")
check "driver_symbols.txt: each line is 'SYMBOL hook|uncovered|hook+uncovered|none'" '[[ -z $bad_classes ]]'
dups=$(uniq -d "$TMP/symbols")
check "driver_symbols.txt: each symbol once" '[[ -z $dups ]]'
check "the hooks of SHIM_HOOKS are the symbols classed hook or hook+uncovered" 'diff "$TMP/hooks" "$TMP/class_hook"'
check "the entries of SHIM_UNCOVERED are the symbols classed uncovered or hook+uncovered" \
    'diff "$TMP/uncovered" "$TMP/class_uncovered"'
check "an entry point both interposed and listed as not covered is classed hook+uncovered" \
    'diff <(comm -12 "$TMP/hooks" "$TMP/uncovered") "$TMP/class_both"'
check "... and is interposed only to be seen (role ACTIVITY), never to count memory" \
    '[[ -z $(comm -23 "$TMP/class_both" "$TMP/activity") ]]'

nm -D --defined-only "$PRELOAD" | awk '$2 == "T" && $3 ~ /^cu/ {print $3}' | sort >"$TMP/exported"
check "libvram_preload.so exports exactly the driver symbols of SHIM_HOOKS" 'diff "$TMP/hooks" "$TMP/exported"'

missing=""
while read -r s; do grep -qw -- "$s" "$README" || missing+=" $s"; done <"$TMP/uncovered"
check "$(basename "$README") names every entry point that is not covered" '[[ -z $missing ]] || { echo "missing:$missing"; false; }'

# a driver or stub on this machine: its exports against the file
found=0
for lib in /usr/local/cuda*/lib64/stubs/libcuda.so /usr/local/cuda*/targets/*/lib/stubs/libcuda.so \
           $(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF}'); do
    [[ -f $lib ]] || continue
    found=1
    nm -D --defined-only "$lib" | awk '$2 == "T" && $3 ~ /^cu/ {print $3}' | sort -u >"$TMP/driver"
    if [[ $(readlink -f "$lib") == */cuda-13.0/* ]]; then
        check "the CUDA 13.0 stub ($lib) exports the symbols of driver_symbols.txt" 'diff "$TMP/driver" "$TMP/symbols"'
    else
        new=$(comm -23 "$TMP/driver" "$TMP/symbols" | tr '\n' ' ')
        echo "note: $lib (another version) exports symbols driver_symbols.txt does not class: ${new:-none}"
    fi
done
[[ $found == 1 ]] || echo "note: no CUDA driver or stub library here: the file is checked against the table only"

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
