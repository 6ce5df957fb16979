#!/usr/bin/env bash
# shim_test.sh: end-to-end checks of `vram run` and libvram_preload.so over the fake libcuda.so.1,
# as real processes, without a GPU.
#
#   tests/shim/shim_test.sh VRAM PRELOAD_LIB FAKE_CUDA_DIR APP_DRIVER APP_LINKED APP_NVML_LINKED APP_COVER
#
# FAKE_CUDA_DIR (holding the fake libcuda.so.1: 2 devices of 16 GiB, and the fake libnvidia-ml.so.1
# of the same cards) goes first on LD_LIBRARY_PATH.
# The preallocation checks run processes side by side on shared fake cards (FAKE_CUDA_SHARED).
# Prints each check with PASS/FAIL (and the captured output of a failure), then "N passed, N failed";
# exits 1 when a check failed, 2 on bad usage.
set -euo pipefail

if [[ $# -ne 7 ]]; then
    echo "usage: $0 VRAM PRELOAD_LIB FAKE_CUDA_DIR APP_DRIVER APP_LINKED APP_NVML_LINKED APP_COVER" >&2
    exit 2
fi
VRAM=$1 PRELOAD=$2 FAKE=$3 APP=$4 LINKED=$5 NVML_LINKED=$6 COVER=$7

unset VRAM_LIMIT VRAM_LOG VRAM_GROWTH VRAM_GROUP VRAM_GROUP_LIMIT CUDA_VISIBLE_DEVICES LD_PRELOAD VRAM_BACKEND VRAM_SIM_DEVICES \
      FAKE_CUDA_DEVICES
for v in $(compgen -e | grep '^VRAM_LIMIT_' || true); do unset "$v"; done
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

GiB=1073741824
CARD=$((16 * GiB))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The processes under vram run register in the per-machine ledger: a private one (ledger_test.sh tests it).
export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
PASSED=0
FAILED=0

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # run, check, has



limited() { "$VRAM" run --limit 1GiB --growth -- "$@"; }

# ---- the fake driver alone: the full 16 GiB ------------------------------------------------------
run "$APP" dlsym info
check "no shim: cuMemGetInfo/cuDeviceTotalMem show 16 GiB" \
    '[[ $RC == 0 ]] && has "$OUT" "total=$CARD free=$CARD devtotal=$CARD"'
run "$APP" dlsym fill alloc 256
check "no shim: allocations go up to the 16 GiB card" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=64 bytes=$CARD err=2"'
run "$LINKED"
check "no shim: linked program gets 16 GiB" '[[ $RC == 0 ]] && has "$OUT" "chunks=64 bytes=$CARD err=2"'

# ---- under vram run --limit 1GiB --growth ----------------------------------------------------------
for path in dlsym proc proc_v2 proc_ptsz; do
    run limited "$APP" $path info
    check "$path: cuMemGetInfo total/free and cuDeviceTotalMem show 1 GiB" \
        '[[ $RC == 0 ]] && has "$OUT" "total=$GiB free=$GiB devtotal=$GiB"'
    for kind in alloc pitch managed create async pool; do
        run limited "$APP" $path fill $kind 256
        check "$path $kind: 4 x 256 MiB fit, the 5th is CUDA_ERROR_OUT_OF_MEMORY, a free gives room back" \
            '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2" && has "$OUT" "refill=0" &&
             has "$OUT" "free_after=$GiB total=$GiB"'
    done
done
for path in proc proc_v2 proc_ptsz; do
    for kind in alloc async; do
        run limited env FAKE_CUDA_PROC=internal "$APP" $path fill $kind 256
        check "$path $kind, driver hands out internal entry points: still limited" \
            '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2" && has "$OUT" "refill=0" &&
             has "$OUT" "free_after=$GiB total=$GiB"'
    done
done
run limited "$APP" dlsym fill alloc 300
check "300 MiB blocks: 3 fit in 1 GiB" '[[ $RC == 0 ]] && has "$OUT" "chunks=3 bytes=943718400 err=2"'
# cuMemAllocPitch is counted as pitch x height (the fake driver pads each row to 512 bytes): rows of 1000
# bytes take 1024 each, so 2^20 of them are 1 GiB (width x height, 1000 MiB, would leave 24 MiB free), and
# 1060000 of them (1060000000 bytes as width x height, under the limit) are 1085440000 bytes, past it.
run limited "$APP" dlsym pitch 1000 1048576
check "cuMemAllocPitch: 2^20 rows of 1000 bytes at a pitch of 1024 count 1 GiB, none left" \
    '[[ $RC == 0 ]] && has "$OUT" "pitch_alloc=0 pitch=1024" && has "$OUT" "held=0 total=$GiB" &&
     has "$OUT" "free_after=$GiB total=$GiB"'
run limited "$APP" dlsym pitch 1000 1060000
check "cuMemAllocPitch: rows whose width fits the limit but whose pitch does not: refused, nothing kept" \
    '[[ $RC == 0 ]] && has "$OUT" "pitch_alloc=2 pitch=0" && has "$OUT" "held=$GiB total=$GiB" &&
     has "$OUT" "free_after=$GiB total=$GiB"'
run limited "$APP" dlsym threads
check "8 threads filling at once take exactly the limit, then all comes back" \
    '[[ $RC == 0 ]] && has "$OUT" "threads_bytes=$GiB" && has "$OUT" "free_after=$GiB total=$GiB"'
run limited "$APP" dlsym mixed
check "allocated through dlsym, freed through cuGetProcAddress: counted back; a double free changes nothing" \
    '[[ $RC == 0 ]] && has "$OUT" "alloc=0" && has "$OUT" "free=0" && has "$OUT" "double_free=1" && has "$OUT" "free_after=$GiB total=$GiB"'
run limited "$APP" dlsym many
check "20000 live blocks freed in a scrambled order: every byte counted back" \
    '[[ $RC == 0 ]] && has "$OUT" "many=20000" && has "$OUT" "free_after=$GiB total=$GiB"'
run limited "$LINKED"
check "program linked against libcuda: limited through the exported symbols" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2" && has "$OUT" "total=$GiB free=$GiB"'
check "dlsym(RTLD_NEXT) from a later library still finds the next definition" 'has "$OUT" "rtld_next=ok"'

if command -v python3 >/dev/null; then
    run limited python3 "$(dirname "$0")/app_ctypes.py"
    check "Python ctypes (dlopen + dlsym): 1 GiB total, 2 GiB refused, 512 MiB fits" \
        '[[ $RC == 0 ]] && has "$OUT" "total=$GiB" && has "$OUT" "alloc_2GiB=2" && has "$OUT" "alloc_512MiB=0" &&
         has "$OUT" "free_after=$GiB"'
fi

# ---- a free the driver refuses gives nothing back (FAKE_CUDA_FAIL makes the fake driver refuse the free of
# a live block, CUDA_ERROR_LAUNCH_FAILED = 719): the 768 MiB stay counted, the same block again is refused
# past the 1 GiB limit, and the free that the driver makes gives everything back
refused_ok='[[ $RC == 0 ]] && has "$OUT" "take=0" && has "$OUT" "before=268435456 total=$GiB" && has "$OUT" "free=719" &&
            has "$OUT" "after=268435456 total=$GiB" && has "$OUT" "again=2" && has "$OUT" "free_again=0" &&
            has "$OUT" "free_after=$GiB total=$GiB"'
for case in alloc:cuMemFree_v2 pitch:cuMemFree_v2 managed:cuMemFree_v2 create:cuMemRelease map:cuMemUnmap \
            async:cuMemFreeAsync pool:cuMemFreeAsync; do
    kind=${case%%:*} sym=${case#*:}
    run limited env FAKE_CUDA_FAIL="$sym:1:CUDA_ERROR_LAUNCH_FAILED" "$APP" dlsym refused $kind 768
    check "$kind: $sym refused by the driver: the block stays counted, nothing more fits, its real free counts" "$refused_ok"
done
run limited env FAKE_CUDA_FAIL="cuMemFreeAsync_ptsz:1:CUDA_ERROR_LAUNCH_FAILED" "$APP" proc_ptsz refused async 768
check "async through cuGetProcAddress (per-thread stream): cuMemFreeAsync_ptsz refused, the block stays counted" "$refused_ok"
for case in alloc:cuMemFree_v2 map:cuMemUnmap; do
    kind=${case%%:*} sym=${case#*:}
    run "$VRAM" run --limit 1GiB -- env FAKE_CUDA_FAIL="$sym:1:CUDA_ERROR_LAUNCH_FAILED" "$APP" dlsym refused $kind 768
    check "preallocation, $kind: $sym refused by the driver: the block stays counted, nothing more fits" "$refused_ok"
done

# ---- every entry point of the coverage table (shim/shim.h), by its scenario in app_cover.c --------------
# Each TAKES, HOLDS or GIVES entry point, found through dlsym and through cuGetProcAddress: without vram
# the fake driver serves it up to its card; under a 1 GiB limit, with growth and with preallocation, the
# driver never holds more than the limit, vram counts what it holds, the take past the limit is
# refused, and everything comes back.
cover_failed=""
while read -r sym role; do
    for route in dlsym proc; do
        run "$COVER" $route "$sym"
        [[ $RC == 0 ]] && has "$OUT" "cover $sym ok" || cover_failed+=" $sym/$route/no-vram"
        run limited "$COVER" $route "$sym"
        [[ $RC == 0 ]] && has "$OUT" "cover $sym ok" || cover_failed+=" $sym/$route/growth"
        [[ $RC == 0 ]] || { echo "  $sym $route under vram run --growth:"; sed 's/^/    /' <<<"$OUT$ERR" | tail -5; }
    done
    run "$VRAM" run --limit 1GiB -- "$COVER" dlsym "$sym"
    [[ $RC == 0 ]] && has "$OUT" "cover $sym ok" || cover_failed+=" $sym/dlsym/prealloc"
    [[ $RC == 0 ]] || { echo "  $sym under vram run (preallocation):"; sed 's/^/    /' <<<"$OUT$ERR" | tail -5; }
done < <("$COVER" list)
ncover=$("$COVER" list | wc -l)
check "all $ncover scenarios of the coverage table: counted, refused past the limit, given back (dlsym, proc; growth, preallocation)" \
    '[[ -z $cover_failed ]] || { echo "failed:$cover_failed"; false; }'

# ---- the entries of role ACTIVITY (kernel launches, copies, sets, synchronisations): interposed only so that an
# idle watcher sees the process work. Each, through dlsym and through cuGetProcAddress, reaches the driver's
# function of its own name (a failure planned on that name comes back) and, under vram run with a watcher
# named, is counted on the process's activity page.
for route in dlsym proc; do
    run "$COVER" activity $route
    check "$route: every ACTIVITY entry reaches the driver's function of its name (no vram)" \
        '[[ $RC == 0 ]] && ! has "$OUT" FAIL && has "$OUT" "activity_page=0"'
    run "$VRAM" run --growth -- env VRAM_IDLE_WATCHER=$$:1:60000000000 "$COVER" activity $route
    check "$route: under vram run each ACTIVITY entry passes to its own driver function and is counted" \
        '[[ $RC == 0 ]] && ! has "$OUT" FAIL && has "$OUT" "activity_page=1" && [[ $(grep -c " ok$" <<<"$OUT") -ge 30 ]]'
done

# ---- NVML: nvmlDeviceGetMemoryInfo / _v2 (the fake libnvidia-ml.so.1 enumerates both 16 GiB cards) ----
M256=268435456 M512=536870912
run "$APP" dlsym nvml 256
check "no shim: NVML shows both 16 GiB cards unchanged" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml_alloc=0" &&
     has "$OUT" "nvml 0 total=$CARD free=$CARD used=0" && has "$OUT" "nvml 1 total=$CARD free=$CARD used=0" &&
     has "$OUT" "nvml_v2 0 total=$CARD reserved=$M512 free=$((CARD - M512)) used=0" &&
     has "$OUT" "nvml_v2 1 total=$CARD reserved=$M512 free=$((CARD - M512)) used=0"'
run limited "$APP" dlsym nvml 256
check "--limit 1GiB: NVML shows the limit, 256 MiB of the process used, 768 MiB free on the device in use" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml_alloc=0" &&
     has "$OUT" "nvml 0 total=$GiB free=$((GiB - M256)) used=$M256" &&
     has "$OUT" "nvml_v2 0 total=$GiB reserved=0 free=$((GiB - M256)) used=$M256"'
check "--limit 1GiB: the other device (also limited) shows 1 GiB free" \
    'has "$OUT" "nvml 1 total=$GiB free=$GiB used=0" && has "$OUT" "nvml_v2 1 total=$GiB reserved=0 free=$GiB used=0"'
run "$VRAM" run --devices 1 --limit 1GiB --growth -- "$APP" dlsym nvml 256
check "--devices 1: the limit applies to NVML device 1 (CUDA device 0 by UUID), NVML device 0 passes through" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml_alloc=0" &&
     has "$OUT" "nvml 1 total=$GiB free=$((GiB - M256)) used=$M256" &&
     has "$OUT" "nvml_v2 1 total=$GiB reserved=0 free=$((GiB - M256)) used=$M256" &&
     has "$OUT" "nvml 0 total=$CARD free=$CARD used=0" &&
     has "$OUT" "nvml_v2 0 total=$CARD reserved=$M512 free=$((CARD - M512)) used=0"'
run limited "$NVML_LINKED"
check "program linked against libnvidia-ml: limited through the exported symbols" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml_alloc=0" &&
     has "$OUT" "nvml 0 total=$GiB free=$((GiB - M256)) used=$M256" &&
     has "$OUT" "nvml_v2 0 total=$GiB reserved=0 free=$((GiB - M256)) used=$M256"'
run "$NVML_LINKED"
check "no shim: linked NVML program sees the 16 GiB cards" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml 0 total=$CARD free=$CARD used=0"'
run "$VRAM" run --limit 1GiB -- "$APP" dlsym nvml 256
check "preallocation (no --growth): NVML shows the same limited view" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml 0 total=$GiB free=$((GiB - M256)) used=$M256"'
run "$VRAM" run --growth -- "$APP" dlsym nvml 256
check "vram run without a limit: NVML passes through" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml 0 total=$CARD free=$CARD used=0" &&
     has "$OUT" "nvml_v2 0 total=$CARD reserved=$M512 free=$((CARD - M512)) used=0"'
run "$VRAM" run --limit 2GiB --growth -- env VRAM_LIMIT_1=$GiB "$APP" dlsym nvml 512
check "VRAM_LIMIT_1 on NVML device 1, VRAM_LIMIT on device 0" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml 0 total=$((2 * GiB)) free=$((2 * GiB - M512)) used=$M512" &&
     has "$OUT" "nvml 1 total=$GiB free=$GiB used=0"'
run "$VRAM" run --limit 32GiB --growth -- "$APP" dlsym nvml 256
check "a limit above the card: NVML total is the card" \
    '[[ $RC == 0 ]] && has "$OUT" "nvml 0 total=$CARD free=$((CARD - M256)) used=$M256"'

# NVML in a program that never loads CUDA (as nvidia-smi): the devices are told from CUDA_VISIBLE_DEVICES.
nvml_card() {   # nvml_card I: both lines of NVML device I passed through
    has "$OUT" "nvml $1 total=$CARD free=$CARD used=0" &&
        has "$OUT" "nvml_v2 $1 total=$CARD reserved=$M512 free=$((CARD - M512)) used=0"
}
nvml_limited() {   # nvml_limited I BYTES: both lines of NVML device I under a limit of BYTES, nothing used
    has "$OUT" "nvml $1 total=$2 free=$2 used=0" && has "$OUT" "nvml_v2 $1 total=$2 reserved=0 free=$2 used=0"
}
run "$APP" nvml_only
check "NVML alone, no shim: both cards, CUDA not loaded" '[[ $RC == 0 ]] && nvml_card 0 && nvml_card 1 && has "$OUT" "cuda_loaded=0"'
run limited "$APP" nvml_only
check "NVML alone under --limit 1GiB: both cards show the limit, all free; the shim did not load CUDA" \
    '[[ $RC == 0 ]] && nvml_limited 0 $GiB && nvml_limited 1 $GiB && has "$OUT" "cuda_loaded=0"'
run "$VRAM" run --limit 1GiB -- "$APP" nvml_only
check "NVML alone, preallocation (no --growth): the same, nothing reserved without CUDA" \
    '[[ $RC == 0 ]] && nvml_limited 0 $GiB && nvml_limited 1 $GiB && has "$OUT" "cuda_loaded=0"'
run "$VRAM" run --devices 1 --limit 1GiB --growth -- "$APP" nvml_only
check "NVML alone, --devices 1: card 1 limited, card 0 (not the program's) passes through" \
    '[[ $RC == 0 ]] && nvml_limited 1 $GiB && nvml_card 0'
run "$VRAM" run --devices 1,0 --growth -- env VRAM_LIMIT_0=$GiB VRAM_LIMIT_1=$((2 * GiB)) "$APP" nvml_only
check "NVML alone, --devices 1,0: the program's device 0 (card 1) has VRAM_LIMIT_0, card 0 VRAM_LIMIT_1" \
    '[[ $RC == 0 ]] && nvml_limited 1 $GiB && nvml_limited 0 $((2 * GiB))'
run "$VRAM" run --devices GPU-fa4ec0da-0000-4000-8000-000000000001 --limit 1GiB --growth -- "$APP" nvml_only
check "NVML alone, a UUID in CUDA_VISIBLE_DEVICES: that card limited, the other passes through" \
    '[[ $RC == 0 ]] && nvml_limited 1 $GiB && nvml_card 0'
run "$VRAM" run --devices GPU-fa4ec0da --limit 1GiB --growth -- "$APP" nvml_only
check "NVML alone, an ambiguous UUID prefix names no card: both pass through" '[[ $RC == 0 ]] && nvml_card 0 && nvml_card 1'
run "$VRAM" run --devices 2,1 --limit 1GiB --growth -- "$APP" nvml_only
check "NVML alone, CUDA_VISIBLE_DEVICES=2,1 (no card 2): the list ends there, both pass through" \
    '[[ $RC == 0 ]] && nvml_card 0 && nvml_card 1'
run "$VRAM" run --devices 1 --limit 1GiB --growth -- env FAKE_NVML_MIXED=1 "$APP" nvml_only
check "NVML alone, cards of different models, an index: CUDA's order is unknown, both pass through" \
    '[[ $RC == 0 ]] && nvml_card 0 && nvml_card 1'
run "$VRAM" run --devices 1 --limit 1GiB --growth -- env FAKE_NVML_MIXED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID "$APP" nvml_only
check "NVML alone, cards of different models, CUDA_DEVICE_ORDER=PCI_BUS_ID: card 1 limited" \
    '[[ $RC == 0 ]] && nvml_limited 1 $GiB && nvml_card 0'
run "$VRAM" run --limit 1GiB --growth -- env FAKE_NVML_MIXED=1 "$APP" nvml_only
check "NVML alone, cards of different models, every card visible with one limit: both limited" \
    '[[ $RC == 0 ]] && nvml_limited 0 $GiB && nvml_limited 1 $GiB'
run "$VRAM" run --limit 1GiB --growth -- env FAKE_NVML_MIXED=1 VRAM_LIMIT_1=$((2 * GiB)) "$APP" nvml_only
check "NVML alone, cards of different models with different limits: both pass through" \
    '[[ $RC == 0 ]] && nvml_card 0 && nvml_card 1'
run "$VRAM" run --limit 1GiB --growth -- env CUDA_VISIBLE_DEVICES= "$APP" nvml_only
check "NVML alone, CUDA_VISIBLE_DEVICES empty (no CUDA device): both pass through" \
    '[[ $RC == 0 ]] && nvml_card 0 && nvml_card 1'

# ---- VRAM_LOG --------------------------------------------------------------------------------------
run limited "$APP" dlsym fill alloc 256
check "without --log the shim is silent" '[[ $RC == 0 ]] && ! has "$ERR" "vram"'
run "$VRAM" run --limit 1GiB --growth --log -- "$APP" dlsym fill alloc 256
check "--log: one line says the vram limit refused, with the numbers" \
    '[[ $RC == 0 ]] && has "$ERR" "vram: cuMemAlloc of 256.00 MiB (268435456 bytes) on device 0 refused: the vram limit would be exceeded (in use 1.00 GiB = 1073741824 bytes, limit 1.00 GiB = 1073741824 bytes, from VRAM_LIMIT); returning CUDA_ERROR_OUT_OF_MEMORY" &&
     [[ $(grep -c "refused" <<<"$ERR") == 1 ]]'

# ---- per-device limits, no limit ---------------------------------------------------------------------
run "$VRAM" run --growth -- env VRAM_LIMIT=$GiB VRAM_LIMIT_1=536870912 "$APP" proc_v2 info 1
check "VRAM_LIMIT_1 wins on device 1" '[[ $RC == 0 ]] && has "$OUT" "total=536870912 free=536870912 devtotal=536870912"'
run "$VRAM" run --growth -- env VRAM_LIMIT=$GiB VRAM_LIMIT_1=536870912 "$APP" proc_v2 info 0
check "VRAM_LIMIT on the other devices" '[[ $RC == 0 ]] && has "$OUT" "total=$GiB free=$GiB devtotal=$GiB"'
run "$VRAM" run --growth -- env VRAM_LIMIT_1=536870912 "$APP" dlsym fill create 256 1
check "cuMemCreate counted on the device its properties name" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=2 bytes=536870912 err=2"'
run "$VRAM" run --growth -- "$APP" dlsym fill alloc 256
check "vram run without a limit: the whole card" '[[ $RC == 0 ]] && has "$OUT" "chunks=64 bytes=$CARD err=2"'
run "$VRAM" run --growth -- env VRAM_LIMIT=$((32 * GiB)) "$APP" dlsym info
check "a limit above the card reports the card" '[[ $RC == 0 ]] && has "$OUT" "total=$CARD free=$CARD devtotal=$CARD"'
run "$VRAM" run --growth -- env VRAM_LIMIT=12x "$APP" dlsym fill alloc 256
check "a malformed VRAM_LIMIT fails closed: every allocation refused, said by name" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=0 bytes=0 err=2" && has "$ERR" "VRAM_LIMIT='"'"'12x'"'"' is not a size"'
for zero in 0.4 0.5B 0 0K; do
    run env LD_PRELOAD="$PRELOAD" VRAM_LIMIT=$zero "$APP" dlsym fill alloc 256
    check "VRAM_LIMIT=$zero rounds to nothing: every allocation refused, said by name (never no limit)" \
        '[[ $RC == 0 ]] && has "$OUT" "chunks=0 bytes=0 err=2" && has "$ERR" "VRAM_LIMIT='"'"'$zero'"'"' is 0 bytes"'
    run env LD_PRELOAD="$PRELOAD" VRAM_LIMIT_0=$zero "$APP" dlsym fill alloc 256
    check "VRAM_LIMIT_0=$zero: the same" \
        '[[ $RC == 0 ]] && has "$OUT" "chunks=0 bytes=0 err=2" && has "$ERR" "VRAM_LIMIT_0='"'"'$zero'"'"' is 0 bytes"'
    run env LD_PRELOAD="$PRELOAD" VRAM_GROUP=g0 VRAM_GROUP_LIMIT=$zero "$APP" dlsym fill alloc 256
    check "VRAM_GROUP_LIMIT=$zero: the same" \
        '[[ $RC == 0 ]] && has "$OUT" "chunks=0 bytes=0 err=2" && has "$ERR" "VRAM_GROUP_LIMIT='"'"'$zero'"'"' is 0 bytes"'
done
run env LD_PRELOAD="$PRELOAD" VRAM_LIMIT=1G "$APP" dlsym fill alloc 256
check "LD_PRELOAD alone: VRAM_LIMIT takes a size as everywhere in vram (1G)" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2"'
run env LD_PRELOAD="$PRELOAD" VRAM_LIMIT_1=0.5GiB "$APP" dlsym fill alloc 256 1
check "... and VRAM_LIMIT_<i> (0.5GiB)" '[[ $RC == 0 ]] && has "$OUT" "chunks=2 bytes=536870912 err=2"'
run "$VRAM" run --devices x -- true
check "vram run --devices x is refused (indices or GPU-/MIG- UUIDs)" '[[ $RC == 2 ]] && has "$ERR" "--devices: bad LIST"'
run "$VRAM" run --devices GPU-1234-abcd,1 --growth -- env
check "... a UUID and an index are taken" '[[ $RC == 0 ]] && has "$OUT" "CUDA_VISIBLE_DEVICES=GPU-1234-abcd,1"'

# ---- what vram run sets --------------------------------------------------------------------------------
REAL_PRELOAD=$(realpath "$PRELOAD")
run "$VRAM" run --devices 1,0 --limit 1.5GiB --growth --log -- env
check "vram run sets CUDA_VISIBLE_DEVICES, VRAM_LIMIT, VRAM_GROWTH, VRAM_LOG, LD_PRELOAD" \
    '[[ $RC == 0 ]] && has "$OUT" "CUDA_VISIBLE_DEVICES=1,0" && has "$OUT" "VRAM_LIMIT=1610612736" &&
     has "$OUT" "VRAM_GROWTH=1" && has "$OUT" "VRAM_LOG=1" && has "$OUT" "LD_PRELOAD=$REAL_PRELOAD"'
run env LD_PRELOAD="$REAL_PRELOAD" VRAM_LIMIT_3=5 "$VRAM" run --limit 1GiB --growth -- env
check "LD_PRELOAD not repeated; inherited VRAM_LIMIT_<i> cleared by --limit" \
    '[[ $RC == 0 ]] && [[ $(grep "^LD_PRELOAD=" <<<"$OUT") == "LD_PRELOAD=$REAL_PRELOAD" ]] && ! has "$OUT" "VRAM_LIMIT_3"'
run env LD_PRELOAD=libm.so.6 "$VRAM" run --growth -- env
check "an existing LD_PRELOAD is kept after the shim" \
    '[[ $RC == 0 ]] && has "$OUT" "LD_PRELOAD=$REAL_PRELOAD:libm.so.6"'
run env VRAM_BACKEND=sim VRAM_SIM_DEVICES=16GiB "$VRAM" run --fraction 0.25 --growth -- env
check "--fraction: F x the card's memory" '[[ $RC == 0 ]] && has "$OUT" "VRAM_LIMIT_0=4294967296"'
run env VRAM_BACKEND=sim VRAM_SIM_DEVICES=16GiB "$VRAM" run --fraction 0.25 --limit 1GiB --growth -- env
check "--fraction with --limit: the smaller wins" \
    '[[ $RC == 0 ]] && has "$OUT" "VRAM_LIMIT_0=$GiB" && has "$OUT" "VRAM_LIMIT=$GiB"'
run "$VRAM" run --limit 1GiB -- "$APP" dlsym fill alloc 256
check "without --growth: no note, still limited" \
    '[[ $RC == 0 ]] && ! has "$ERR" "vram" && has "$OUT" "chunks=4 bytes=$GiB err=2"'
run "$VRAM" run --limit 1GiB -- env
check "without --growth: VRAM_GROWTH=0" '[[ $RC == 0 ]] && has "$OUT" "VRAM_GROWTH=0"'
run "$VRAM" run --growth -- sh -c 'exit 7'
check "the exit status is the command'\''s" '[[ $RC == 7 ]]'

# ---- preallocation (no --growth): the limit is reserved on the card ---------------------------------
# A: app_driver's script scenario under vram run, fed through a fifo; say CMD sends one command and
# waits for its answer line (in ANSWER).
start_a() {
    rm -f "$TMP/a.in"
    mkfifo "$TMP/a.in"
    "$VRAM" run "$@" -- "$APP" dlsym script 0 <"$TMP/a.in" >"$TMP/a.out" 2>"$TMP/a.err" &
    A_PID=$!
    exec 7>"$TMP/a.in"
    A_LINES=0
}
say() {
    echo "$1" >&7
    A_LINES=$((A_LINES + 1))
    for _ in $(seq 1 1000); do
        [[ $(wc -l <"$TMP/a.out") -ge $A_LINES ]] && break
        sleep 0.01
    done
    ANSWER=$(sed -n "${A_LINES}p" "$TMP/a.out")
}
stop_a() {
    exec 7>&-
    wait "$A_PID" || true
}
# a_check NAME EXPECTED: the last answer of A
a_check() {
    RC=0 OUT=$ANSWER ERR=$(cat "$TMP/a.err") EXPECTED=$2
    check "$1" '[[ "$ANSWER" == "$EXPECTED" ]]'
}
SIX=$((6 * GiB)) TEN=$((10 * GiB))
# From here on the fake driver's cards are shared by the processes (FAKE_CUDA_SHARED).
export FAKE_CUDA_SHARED=$TMP/cards

start_a --limit 6GiB
say "alloc 1024"; a_check "prealloc A (--limit 6GiB): a first 1 GiB block" "alloc=0"
run "$APP" dlsym info
check "prealloc A holds its 6 GiB: a plain process sees 10 GiB free" \
    '[[ $RC == 0 ]] && has "$OUT" "total=$CARD free=$TEN devtotal=$CARD"'
run "$APP" dlsym fill alloc 256
check "prealloc A: a plain process gets only 10 GiB" '[[ $RC == 0 ]] && has "$OUT" "chunks=40 bytes=$TEN err=2"'
run "$VRAM" run --growth --limit 12GiB -- "$APP" dlsym fill alloc 256
check "prealloc A: a process under --growth --limit 12GiB gets only 10 GiB" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=40 bytes=$TEN err=2"'
say "info"; a_check "prealloc A: its own view is 5 GiB free of 6 (the balloon is free to it)" "free=$((5 * GiB)) total=$SIX err=0"
for i in 2 3 4 5 6; do say "alloc 1024"; done
a_check "prealloc A: its allocations up to 6 GiB succeed (the balloon gives way)" "alloc=0"
say "alloc 2"; a_check "prealloc A: beyond 6 GiB, CUDA_ERROR_OUT_OF_MEMORY" "alloc=2"
say "info"; a_check "prealloc A: 0 free of 6 GiB" "free=0 total=$SIX err=0"
run "$APP" dlsym info
check "prealloc A at its limit: still 10 GiB free to others" '[[ $RC == 0 ]] && has "$OUT" "free=$TEN"'
say "free"; say "free"; a_check "prealloc A frees 2 GiB" "free=0"
run "$APP" dlsym info
check "prealloc A freed: the balloon took it back (others still see 10 GiB free)" \
    '[[ $RC == 0 ]] && has "$OUT" "free=$TEN"'
say "info"; a_check "prealloc A after the frees: 2 GiB free of 6" "free=$((2 * GiB)) total=$SIX err=0"
say "alloc 2048"; a_check "prealloc A: the freed 2 GiB are its again" "alloc=0"
stop_a

start_a --growth --limit 6GiB
say "info"; a_check "growth A (--growth --limit 6GiB) before allocating: 6 GiB free" "free=$SIX total=$SIX err=0"
run "$APP" dlsym fill alloc 256
check "growth A holds nothing up front: another process gets 16 GiB" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=64 bytes=$CARD err=2"'
say "alloc 1024"; a_check "growth A: a 1 GiB block" "alloc=0"
run "$APP" dlsym fill alloc 256
check "growth A holding 1 GiB: another process gets 15 GiB" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=60 bytes=$((15 * GiB)) err=2"'
stop_a

# A's threads race for its limit while another process holds the other 10 GiB of the card: any
# moment of balloon + blocks above 6 GiB would make the fake driver refuse an allocation.
start_a
say "alloc 10240"; a_check "another process holds 10 GiB" "alloc=0"
run "$APP" dlsym fill alloc 256
check "(no limit, no --growth: it reserves nothing beyond its 10 GiB)" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=24 bytes=$SIX err=2"'
run "$VRAM" run --limit 6GiB -- "$APP" dlsym threads
check "prealloc, 8 threads racing: exactly the 6 GiB limit, all of it back" \
    '[[ $RC == 0 ]] && has "$OUT" "threads_bytes=$SIX" && has "$OUT" "free_after=$SIX total=$SIX"'
run "$VRAM" run --limit 8GiB --log -- "$APP" dlsym fill alloc 256
check "prealloc with less free on the card than the limit: reserves what there is, says so, 6 GiB usable" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=24 bytes=$SIX err=2" && has "$ERR" "reserved only 6.00 GiB"'
stop_a

for kind in alloc pitch managed create async pool; do
    run "$VRAM" run --limit 1GiB -- "$APP" proc_v2 fill $kind 256
    check "prealloc $kind: 4 x 256 MiB fit, the 5th is CUDA_ERROR_OUT_OF_MEMORY, a free gives room back" \
        '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2" && has "$OUT" "refill=0" &&
         has "$OUT" "free_after=$GiB total=$GiB"'
done
run "$VRAM" run --limit 1GiB -- "$APP" dlsym many
check "prealloc: 20000 small blocks, every byte back" \
    '[[ $RC == 0 ]] && has "$OUT" "many=20000" && has "$OUT" "free_after=$GiB total=$GiB"'
run "$VRAM" run --limit 1GiB -- env FAKE_CUDA_VMM=off "$APP" dlsym fill alloc 256
check "prealloc where cuMemCreate fails: one note, memory on demand, still limited" \
    '[[ $RC == 0 ]] && has "$OUT" "chunks=4 bytes=$GiB err=2" && [[ $(grep -c "vram" <<<"$ERR") == 1 ]] &&
     has "$ERR" "vram: preallocation is not available on device 0 (cuMemCreate failed: CUDA_ERROR_NOT_SUPPORTED (operation not supported)); memory is taken on demand"'
run "$VRAM" run --limit 1GiB --log -- "$APP" dlsym info
check "--log says preallocation is on" '[[ $RC == 0 ]] && has "$ERR" "preallocation (the limit is reserved"'

unset FAKE_CUDA_SHARED

# ---- errors ---------------------------------------------------------------------------------------------
run "$VRAM" run --growth
check "missing CMD: usage error" '[[ $RC == 2 ]] && has "$ERR" "missing CMD"'
run "$VRAM" run --growth --
check "missing CMD after --: usage error" '[[ $RC == 2 ]] && has "$ERR" "missing CMD"'
run "$VRAM" run --limit lots -- true
check "bad size: usage error" '[[ $RC == 2 ]] && has "$ERR" "--limit: bad size '\''lots'\''"'
run "$VRAM" run --limit 0 -- true
check "zero limit: usage error" '[[ $RC == 2 ]] && has "$ERR" "--limit: bad size"'
run "$VRAM" run --fraction 1.5 -- true
check "bad fraction: usage error" '[[ $RC == 2 ]] && has "$ERR" "--fraction: bad number"'
run "$VRAM" run --fraction 0 -- true
check "zero fraction: usage error (a limit never turns into no limit)" '[[ $RC == 2 ]] && has "$ERR" "--fraction: bad number"'
run "$VRAM" run --devices "0;1" -- true
check "bad device list: usage error" '[[ $RC == 2 ]] && has "$ERR" "--devices: bad LIST"'
run "$VRAM" run --frobnicate -- true
check "unknown option: usage error" '[[ $RC == 2 ]] && has "$ERR" "unknown option '\''--frobnicate'\''"'
run "$VRAM" run --growth -- /nonexistent/program
check "command not found: 127 and why" '[[ $RC == 127 ]] && has "$ERR" "cannot run '\''/nonexistent/program'\''"'
run env -u VRAM_BACKEND FAKE_CUDA_DEVICES=0 "$VRAM" run --fraction 0.5 --growth -- true
check "--fraction without a readable device: error 1 with the reason" \
    '[[ $RC == 1 ]] && has "$ERR" "--fraction needs the devices'\'' memory" &&
     has "$ERR" "the NVIDIA driver reports no CUDA device"'
run env -u VRAM_BACKEND FAKE_CUDA_MEM=16GiB,8GiB "$VRAM" run --fraction 0.25 --growth -- env
check "--fraction over the CUDA driver (the fake's 16 and 8 GiB cards): F x each card's memory" \
    '[[ $RC == 0 ]] && has "$OUT" "VRAM_LIMIT_0=4294967296" && has "$OUT" "VRAM_LIMIT_1=2147483648"'
run env -u VRAM_BACKEND FAKE_CUDA_FAIL=cuDeviceTotalMem_v2:2:CUDA_ERROR_ILLEGAL_ADDRESS "$VRAM" run --fraction 0.25 --growth -- true
check "--fraction when the driver fails: error 1 naming the call and the driver's error" \
    '[[ $RC == 1 ]] && has "$ERR" "cuDeviceTotalMem on device 1: CUDA_ERROR_ILLEGAL_ADDRESS"'
mkdir -p "$TMP/lonely"
cp "$VRAM" "$TMP/lonely/vram"
run "$TMP/lonely/vram" run --growth -- true
check "missing preload library: error 1 naming it" '[[ $RC == 1 ]] && has "$ERR" "cannot find libvram_preload.so"'
run "$VRAM" run --help
check "vram run --help" '[[ $RC == 0 ]] && has "$OUT" "run [--devices LIST] [--growth] [--limit SIZE]"'

# ---- the library exports only the interposed symbols -------------------------------------------------
if command -v nm >/dev/null; then
    run nm -D --defined-only "$PRELOAD"
    exported=$(awk '$2 ~ /^[TtWw]$/ {print $3}' <<<"$OUT" | grep -v -e '^_init$' -e '^_fini$' | sort | tr '\n' ' ')
    # the driver symbols of shim.h's coverage table (app_cover prints it), dlsym and NVML's two
    expected=$({ "$COVER" hooks | awk '{print $1}'; echo dlsym; echo nvmlDeviceGetMemoryInfo; echo nvmlDeviceGetMemoryInfo_v2; } |
               sort | tr '\n' ' ')
    OUT="exported: $exported"
    check "libvram_preload.so exports only the interposed symbols" '[[ "$exported" == "$expected" ]]'
fi

echo "$PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
