#!/usr/bin/env bash
# The manual pages the build writes: vram.1 (from the help's tables, `vram --man`) and libvram.3 (from
# include/vram.h, vram_header_man). Checks that they are current, that groff renders them without a
# warning and man-db's lexgrog reads their NAME, that vram(1) names every command, option, variable,
# exit status and file that `vram --help` and `vram help COMMAND` do (and each command's options in
# that command's section), that the help names every option the commands' parsers compare against
# (tools/*.c), and that libvram(3) names every function, status and vram_memory_info field of vram.h.
# Needs groff (Debian: groff-base): skipped (77) without it, unless CI is set.
# Usage: man_test.sh VRAM VRAM_HEADER_MAN BUILD_DIR SOURCE_DIR
set -euo pipefail
vram=$1 header_man=$2 build=$3 src=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() {  # check NAME COMMAND...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then echo "ok      $name"; pass=$((pass + 1))
  else echo "FAILED  $name"; sed 's/^/  /' "$work/out" | head -40; fail=$((fail + 1)); fi
}
if ! command -v groff >/dev/null; then
  if [ -n "${CI:-}" ]; then echo "FAILED  groff is missing (CI is set: .ci/run installs it)"; exit 1; fi
  echo "skipped: no groff"; exit 77
fi

# both pages are what the build's sources say now
check "vram --man prints the manual page" bash -c '"$0" --man >"$1" && grep -q "^\.TH VRAM 1" "$1"' "$vram" "$work/vram.1"
check "build/vram.1 is what vram --man prints" cmp "$build/vram.1" "$work/vram.1"
version=$("$vram" --version | awk '{print $2}')
"$header_man" "$src/include/vram.h" "$version" >"$work/libvram.3"
check "build/libvram.3 is what vram_header_man makes of include/vram.h" cmp "$build/libvram.3" "$work/libvram.3"
for page in vram.1 libvram.3; do
  [ -f "$build/$page.gz" ] && check "$page.gz holds $page" cmp <(gzip -dc "$build/$page.gz") "$build/$page"
done

# groff renders them without a warning (-ww: all of them); lexgrog (whatis, apropos) reads their NAME
no_output() { local out; out=$("$@" 2>&1) || { echo "$out"; return 1; }; [ -z "$out" ] || { echo "$out"; return 1; }; }
for page in vram.1 libvram.3; do
  check "groff -man -ww renders $page without a warning" no_output groff -man -Tutf8 -ww -z "$build/$page"
done
if command -v lexgrog >/dev/null; then
  check "lexgrog reads vram.1's NAME" grep -q 'vram - GPU memory runtime' <(lexgrog "$build/vram.1")
  check "lexgrog reads libvram.3's NAME" grep -q 'libvram - ' <(lexgrog "$build/libvram.3")
fi

# the pages as text, one line per paragraph (very long lines), '-' for \-
render() { groff -man -Tascii -rLL=5000n -P-cbou "$1" 2>/dev/null; }
render "$build/vram.1" >"$work/vram.txt"
render "$build/libvram.3" >"$work/libvram.txt"
section() {  # section TITLE: the lines of vram(1)'s section TITLE, up to the next section
  awk -v t="$1" '$0 == t {on=1; next} on && /^[A-Z]/ {exit} on' "$work/vram.txt"
}
command_section() {  # command_section NAME: the lines of the subsection of COMMANDS about vram NAME
  awk -v t="   $1" '$0 == t {on=1; next} on && (/^[A-Z]/ || /^   [a-z]/) {exit} on' "$work/vram.txt"
}
has_all() {  # has_all FILE WORD...: every WORD is in FILE
  local file=$1 w missing=0; shift
  for w in "$@"; do grep -qF -- "$w" "$file" || { echo "missing: $w"; missing=1; }; done
  return $missing
}
options_of() { grep -oE '(^|[[ ,])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[[ ,]//' | sort -u; }

commands=$({ "$vram" 2>&1 || true; } | awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1}')
check "the short usage lists the commands" test -n "$commands"
for c in $commands; do
  "$vram" help "$c" >"$work/help_$c"
  command_section "$c" >"$work/man_$c"
  # shellcheck disable=SC2046   (the last line points to vram --help)
  check "vram(1)'s $c section names every option of 'vram help $c'" has_all "$work/man_$c" \
    $(head -n -1 "$work/help_$c" | options_of)
  check "vram(1)'s $c section gives the synopsis" grep -qF "vram $(head -1 "$work/help_$c" | sed 's/^Usage: vram //')" "$work/man_$c"
  codes=$(grep -A20 'Exit status:' "$work/help_$c" | tr ';' '\n' | grep -oE '(^|Exit status:) *[0-9]+:' | grep -oE '[0-9]+' | sort -u)
  # shellcheck disable=SC2086
  check "vram(1)'s $c section gives every exit status of 'vram help $c'" \
    bash -c 'for s in "$@"; do grep -qE "^ +$s( |$)" "$0" || { echo "missing: $s"; exit 1; }; done' "$work/man_$c" $codes
done

"$vram" --help >"$work/help_all"
vars=$(awk '/^Environment|^Other environment/ {on=1; next} /^$/ {on=0} on && /^  [A-Z]/ {split($1, a, "="); print a[1]}' "$work/help_all")
check "vram --help lists variables" test -n "$vars"
section ENVIRONMENT >"$work/man_env"
# shellcheck disable=SC2086
check "vram(1)'s ENVIRONMENT names every variable of vram --help" has_all "$work/man_env" $vars
general=$(awk '/^Options:/ {on=1; next} /^$/ {on=0} on' "$work/help_all" | options_of)
section OPTIONS >"$work/man_options"
# shellcheck disable=SC2086
check "vram(1)'s OPTIONS names every general option of vram --help" has_all "$work/man_options" $general
codes=$(awk '/^Exit status:/ {on=1; next} /^$/ {on=0} on && /^  [0-9]/ {print $1}' "$work/help_all")
section "EXIT STATUS" >"$work/man_exit"
check "vram --help lists exit statuses" test -n "$codes"
# shellcheck disable=SC2086
check "vram(1)'s EXIT STATUS gives every status of vram --help" \
  bash -c 'for s in "$@"; do grep -qE "^ +$s( |$)" "$0" || { echo "missing: $s"; exit 1; }; done' "$work/man_exit" $codes
files=$(awk '/^Files:/ {on=1; next} /^$/ {on=0} on && /^  [^ ]/ {print $1}' "$work/help_all" | tr -d ,)
section FILES >"$work/man_files"
# shellcheck disable=SC2086
check "vram(1)'s FILES names every file of vram --help" has_all "$work/man_files" $files
"$vram" help trace >"$work/help_trace"
section "TRACE FORMAT" >"$work/man_trace"
check "vram(1)'s TRACE FORMAT gives the events of 'vram help trace'" \
  has_all "$work/man_trace" "a ID BYTES STREAM TIME_US" "f ID TIME_US" "# gpumem-trace v1"
check "nothing points to traces/README.md, which an installation lacks" \
  bash -c '! grep -n "traces/README" "$@"' _ "$work/help_all" "$work/vram.txt"

# the help names every option that the commands' code compares against: "--json", "-o", ...
literals() { grep -ohE '"--?[a-zA-Z][a-zA-Z-]*"' "$@" | tr -d '"' | sort -u; }
# shellcheck disable=SC2046
check "vram help run names every option of tools/run.c" has_all "$work/help_run" $(literals "$src/tools/run.c")
# shellcheck disable=SC2046
check "vram help top names every option of tools/top.c" has_all "$work/help_top" $(literals "$src/tools/top.c")
# shellcheck disable=SC2046
check "vram --help names every option of tools/vram.c" has_all "$work/help_all" $(literals "$src/tools/vram.c")

# libvram(3): every public function, status and vram_memory_info field of vram.h
functions=$(grep -oE '^VRAM_API [^(]*\(' "$src/include/vram.h" | grep -oE '[a-z_0-9]+\($' | tr -d '(' | sort -u)
check "vram.h declares functions" test "$(echo "$functions" | wc -l)" -gt 30
# shellcheck disable=SC2086
check "libvram(3) names every function of vram.h" has_all "$work/libvram.txt" $functions
pairs_in() {  # pairs_in FILE FORMAT: every "A B" line of stdin, printed with FORMAT, is in FILE
  local file=$1 format=$2 a b missing=0 n=0
  while read -r a b; do
    n=$((n + 1))
    # shellcheck disable=SC2059
    grep -qF -- "$(printf "$format" "$a" "$b")" "$file" || { echo "missing: $(printf "$format" "$a" "$b")"; missing=1; }
  done
  [ "$n" -gt 0 ] && return $missing
}
check "libvram(3) gives every status of vram.h with its value" pairs_in "$work/libvram.txt" "VRAM_%s = %s" \
  < <(sed -nE 's/^ *X\((OK|ERR_[A-Z_]+), ([0-9]+),.*/\1 \2/p' "$src/include/vram.h")
check "libvram(3) gives every vram_memory_info field with its type" pairs_in "$work/libvram.txt" "%s %s;" \
  < <(sed -nE 's/^ *X\((size_t|uint64_t), ([a-z_0-9]+)\).*/\1 \2/p' "$src/include/vram.h")
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
