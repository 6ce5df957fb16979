#!/usr/bin/env bash
# tests/symbols_test.sh: the names each built artefact gives the programs it is linked or loaded into
# (issue 39: an internal prefix on every cross-file name that is not public API).
#   libvram.a            every defined global is vram_ (public API) or vram__ (internal)
#   libvram.so           exports vram_ and nothing internal (vram__ stays hidden)
#   libvram_preload.so   exports the interposed driver and NVML entry points (cu*, nvml*), dlsym and vram_
#   the Slurm plugin     exports what Slurm looks up (slurm_spank_*, plugin_*, spank_*) and nothing else
# Usage: symbols_test.sh LIBVRAM_A LIBVRAM_SO PRELOAD_SO [SPANK_SO]; lists every offender, exits 1 on any.
set -uo pipefail
command -v nm >/dev/null || { echo "symbols_test.sh: needs nm (binutils)"; exit 77; }
fails=0
check() {   # what, file, nm flags, allowed regular expression
    local bad
    # (names a sanitizer or coverage build adds, __odr_asan.X and the like, are the compiler's, not ours)
    bad=$(nm $3 --defined-only "$2" 2>/dev/null | awk 'NF==3 && $2 ~ /[A-Z]/ {print $3}' |
        grep -Ev '^__(odr_asan|asan|ubsan|tsan|sanitizer|sancov|gcov|llvm)' | grep -Ev "$4" | sort -u)
    if [[ -n $bad ]]; then
        echo "FAIL  $1 ($2) gives names outside /$4/:"; sed 's/^/        /' <<<"$bad"
        fails=$((fails + 1))
    else
        echo "ok    $1: every name matches /$4/"
    fi
}
check "libvram.a globals" "$1" -g '^vram_'
check "libvram.so exports" "$2" -D '^vram_[a-z]'
check "libvram_preload.so exports" "$3" -D '^(cu[A-Z]|nvml[A-Z]|vram_[a-z]|dlsym$)'
if [[ -n ${4:-} && -e ${4:-} ]]; then
    check "the Slurm plugin's exports" "$4" -D '^(slurm_spank_|plugin_|spank_)'
fi
[[ $fails -eq 0 ]]
