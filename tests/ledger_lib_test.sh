#!/usr/bin/env bash
# ledger_lib_test.sh: the library in the ledger (issue 38): programs that allocate through libvram
# (tests/ledger_app.c) under `vram run`, as real processes sharing one simulated card (VRAM_SIM_SHARED):
# `vram limit PID` lowered while the program holds memory (nothing live freed, cached memory given back,
# refusals or overflow to host memory until frees bring it under) and raised back; a group with a
# guaranteed and an opportunistic member rebalancing with exact byte counts; `vram top --json` showing it;
# one vocabulary of variables (VRAM_LIMIT read by the library); and the faults: a damaged ledger, a
# truncated one, a missing slot, a ledger directory that cannot be used (open to others, another user's):
# no crash, no hang, no limit lifted.
#
#   tests/ledger_lib_test.sh VRAM LEDGER_APP FAKE_CUDA_DIR
#
# The last part runs the program on libvram's CUDA backend over tests/shim's fake libcuda.so.1, where the
# preload library counts libvram's driver calls: libvram follows the preload library's slot (one row in
# vram top, nothing counted twice) and both hold the same limit.
#
# ledger_app answers one line per command (start, alloc MIB, free, info, quit). map_ahead_mb:0 keeps the
# bytes each process holds on the card equal to its blocks' (exact counts). The ledger goes to a private
# VRAM_LEDGER_DIR. Prints each check with PASS/FAIL, then "N passed, N failed"; exits 1 when one failed.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 VRAM LEDGER_APP FAKE_CUDA_DIR" >&2
    exit 2
fi
VRAM=$1 APP=$2 FAKE=$3

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/procs.sh"   # procs_clean_env, vram_run_start, say, says, stop, slot
procs_clean_env

MiB=1048576
GiB=1073741824
TMP=$(mktemp -d)
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=4GiB VRAM_SIM_SHARED=$TMP/card VRAM_LEDGER_DIR=$TMP/ledger
export VRAM_ALLOC_CONF=map_ahead_mb:0
PASSED=0
RC=0 OUT= ERR=
FAILED=0
ANSWER_FIRST_WORD=1   # ledger_app's answers: "alloc=OK", or "alloc=ERR" and the message

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"     # run, check, has
trap procs_cleanup EXIT

# start NAME [ENV=V ...] [VRAM RUN OPTIONS]: ledger_app under vram run.
start() { vram_run_start "$@" -- "$APP"; }

# info NAME KEYS...: "KEY=VALUE ..." of NAME's vram_get_memory_info (the keys ledger_app prints) into INFO
# (not in a subshell: say counts the answer lines).
info() {
    local name=$1
    shift
    say "$name" info
    local out=() kv
    for k in "$@"; do
        for kv in $ANSWER; do [[ ${kv%%=*} == "$k" ]] && out+=("$kv"); done
    done
    INFO="${out[*]}"
}

# until_info NAME WANT KEYS...: info NAME KEYS until INFO is WANT (5 s at most: the watcher posts a limit
# set from outside at once, the next call applies it).
until_info() {
    local name=$1 want=$2
    shift 2
    for _ in $(seq 100); do
        info "$name" "$@"
        [[ $INFO == "$want" ]] && break
        sleep 0.05
    done
}

# until_slot NAME WANT KEYS...: slot NAME KEYS until it is WANT (5 s at most).
until_slot() {
    local name=$1 want=$2 got=
    shift 2
    for _ in $(seq 100); do
        got=$(slot "$name" "$@")
        [[ $got == "$want" ]] && break
        sleep 0.05
    done
    echo "$got"
}

# ---- vram limit PID on a libvram program: lowered under it, it kills nothing -------------------------------
start a --growth --limit 1GiB --overflow host
says a start "alloc 256" "alloc 256" "alloc 256" free
info a current reserved limit; I0=$INFO
OUT="$ANSWERS | $I0 | $(slot a in_use_bytes limit_bytes start_limit_bytes)"
check "a libvram program under vram run takes VRAM_LIMIT as its limit and is listed by vram top with what its pools hold" \
    '[[ $OUT == "start=OK alloc=OK alloc=OK alloc=OK free=OK | current=$((512 * MiB)) reserved=$((768 * MiB)) limit=$GiB | in_use_bytes=$((768 * MiB)) limit_bytes=$GiB start_limit_bytes=$GiB" ]]'
run "$VRAM" limit "${PID[a]}" 600MiB
until_info a "live_limit=$((600 * MiB)) reserved=$((600 * MiB)) current=$((512 * MiB))" live_limit reserved current
OUT="rc=$RC | $INFO | $(slot a in_use_bytes limit_bytes over_limit)"
check "vram limit PID 600MiB: the cached memory above it (168 of 256 MiB) goes back at the next call, nothing live is freed" \
    '[[ $OUT == "rc=0 | live_limit=$((600 * MiB)) reserved=$((600 * MiB)) current=$((512 * MiB)) | in_use_bytes=$((600 * MiB)) limit_bytes=$((600 * MiB)) over_limit=false" ]]'
run "$VRAM" limit "${PID[a]}" 400MiB
until_info a "live_limit=$((400 * MiB)) over_limit=$((112 * MiB)) current=$((512 * MiB))" live_limit over_limit current
OUT="rc=$RC | $INFO | $(slot a in_use_bytes limit_bytes over_limit)"
check "vram limit PID 400MiB below what it holds: over its limit by 112 MiB, its live blocks stay; vram top says over limit" \
    '[[ $OUT == "rc=0 | live_limit=$((400 * MiB)) over_limit=$((112 * MiB)) current=$((512 * MiB)) | in_use_bytes=$((512 * MiB)) limit_bytes=$((400 * MiB)) over_limit=true" ]]'
says a "alloc 64"
info a current overflow overflows; I0=$INFO
OUT="$ANSWERS | $I0 | $(slot a in_use_bytes overflow_bytes)"
check "... a request it cannot hold goes to host memory (overflow: 64 MiB), counted apart from the card and listed by vram top" \
    '[[ $OUT == "alloc=OK | current=$((512 * MiB)) overflow=$((64 * MiB)) overflows=1 | in_use_bytes=$((512 * MiB)) overflow_bytes=$((64 * MiB))" ]]'
says a free free "alloc 64"
info a current reserved overflow over_limit; I0=$INFO
OUT="$ANSWERS | $I0 | $(slot a in_use_bytes overflow_bytes over_limit)"
check "... frees bring it under (256 MiB live): the next request is device memory again, the cache kept up to the limit" \
    '[[ $OUT == "free=OK free=OK alloc=OK | current=$((320 * MiB)) reserved=$((400 * MiB)) overflow=0 over_limit=0 | in_use_bytes=$((400 * MiB)) overflow_bytes=0 over_limit=false" ]]'
run "$VRAM" limit "${PID[a]}" none
until_info a "live_limit=$GiB" live_limit
OUT="rc=$RC | $INFO"
says a "alloc 512"
info a current overflow; I0=$INFO
OUT="$OUT $ANSWERS | $I0 | $(slot a limit_bytes in_use_bytes)"
check "vram limit PID none: raised back to the limit it started with, and used again" \
    '[[ $OUT == "rc=0 | live_limit=$GiB alloc=OK | current=$((832 * MiB)) overflow=0 | limit_bytes=$GiB in_use_bytes=$((832 * MiB))" ]]'
run "$VRAM" limit "${PID[a]}" 2GiB
check "... never above the limit a libvram program started with (its pools are sized for it): refused by name, unchanged" \
    '[[ $RC == 1 ]] && has "$ERR" "is above the ceiling of process ${PID[a]} on device 0" && [[ $(slot a limit_bytes) == "limit_bytes=$GiB" ]]'
say a quit
OUT=$ANSWER
stop a
check "... it ends cleanly, its slot freed" '[[ $OUT == "quit=OK" && $(slot a pid 2>/dev/null) != *pid=* ]]'

# ---- without vram run: VRAM_GROUP or VRAM_LEDGER_DIR lists it; nothing lists it otherwise ------------------
run env VRAM_LIMIT=256MiB VRAM_GROWTH=1 sh -c "printf 'alloc 300\ninfo\nquit\n' | \"$APP\""
check "VRAM_LIMIT and VRAM_GROWTH are the library's too (one vocabulary): a 300 MiB request under 256 MiB is refused" \
    'has "$OUT" "alloc=ERR" && has "$OUT" "limit=$((256 * MiB))" && has "$OUT" "reserved=0"'
run env VRAM_LIMIT=256MiB VRAM_MEMORY_LIMIT=512MiB "$APP" <<<"start"
check "... VRAM_LIMIT and its older name VRAM_MEMORY_LIMIT set to different sizes: refused by name" \
    'has "$OUT" "start=ERR" && has "$OUT" "VRAM_LIMIT='"'"'256MiB'"'"' and VRAM_MEMORY_LIMIT='"'"'512MiB'"'"' disagree"'

# ---- a group: a guaranteed and an opportunistic libvram member rebalance --------------------------------
start o VRAM_GROUP=g1 --growth --group g1 --group-limit 1GiB --priority opportunistic --overflow host
start g --growth --group g1 --group-limit 1GiB --priority guaranteed
says o start "alloc 256" "alloc 256" "alloc 256"
says g start
OUT="$ANSWERS | $(slot o in_use_bytes limit_bytes group_limit_bytes priority)"
check "the opportunistic member takes 768 MiB of the group's 1 GiB while the guaranteed one uses nothing" \
    '[[ $OUT == "start=OK | in_use_bytes=$((768 * MiB)) limit_bytes=0 group_limit_bytes=$GiB priority=\"opportunistic\"" ]]'
says g "alloc 512"
OUT="$ANSWERS | $(until_slot o "limit_bytes=$((512 * MiB)) in_use_bytes=$((768 * MiB)) over_limit=true" limit_bytes in_use_bytes over_limit)"
until_info o "live_limit=$((512 * MiB)) over_limit=$((256 * MiB))" live_limit over_limit
OUT="$OUT | $INFO | $(slot g in_use_bytes priority)"
check "the guaranteed member takes 512 MiB: the opportunistic one's limit drops to exactly 1 GiB - 512 MiB, over it by 256 MiB, nothing of it freed" \
    '[[ $OUT == "alloc=OK | limit_bytes=$((512 * MiB)) in_use_bytes=$((768 * MiB)) over_limit=true | live_limit=$((512 * MiB)) over_limit=$((256 * MiB)) | in_use_bytes=$((512 * MiB)) priority=\"guaranteed\"" ]]'
says o "alloc 128"
info o current overflow; I0=$INFO
OUT="$ANSWERS | $I0 | $(slot o in_use_bytes overflow_bytes)"
check "... the opportunistic member's next request overflows to host memory (128 MiB), its card bytes unchanged" \
    '[[ $OUT == "alloc=OK | current=$((768 * MiB)) overflow=$((128 * MiB)) | in_use_bytes=$((768 * MiB)) overflow_bytes=$((128 * MiB))" ]]'
says g "alloc 512"
OUT="$ANSWERS | $(slot g in_use_bytes)"
check "... the guaranteed member is never held back by it: 512 MiB more (1 GiB, the whole budget)" \
    '[[ $OUT == "alloc=OK | in_use_bytes=$GiB" ]]'
says o free free
until_info o "current=$((512 * MiB)) reserved=$((512 * MiB)) overflow=0" current reserved overflow
OUT="$ANSWERS | $INFO | $(until_slot o "in_use_bytes=$((512 * MiB)) limit_bytes=1" in_use_bytes limit_bytes)"
check "... its frees give the card back down to its cap of 1 byte (the guaranteed members use the whole budget)" \
    '[[ $OUT == "free=OK free=OK | current=$((512 * MiB)) reserved=$((512 * MiB)) overflow=0 | in_use_bytes=$((512 * MiB)) limit_bytes=1" ]]'
says g free free trim
OUT="$ANSWERS | $(until_slot o "limit_bytes=0" limit_bytes)"
info o limit
until_info o "live_limit=${INFO#limit=}" live_limit   # (its own limit: the card's free memory at its start)
OUT="$OUT | ${INFO#live_limit=}"
says o "alloc 256"
info o limit
OUT="$OUT | $ANSWERS $(slot o in_use_bytes over_limit) ${INFO#limit=}"
check "the guaranteed member frees everything and gives its cache back: the opportunistic one's limit is lifted again and it takes 256 MiB more" \
    '[[ $OUT == "free=OK free=OK trim=OK | limit_bytes=0 | ${OUT##* } | alloc=OK in_use_bytes=$((768 * MiB)) over_limit=false ${OUT##* }" ]]'
run "$VRAM" limit --group g1 512MiB
OUT="rc=$RC | $(until_slot o "group_limit_bytes=$((512 * MiB))" group_limit_bytes)"
says o "alloc 1"
info o overflow
OUT="$OUT | $ANSWERS $INFO"
check "vram limit --group lowers the budget: the opportunistic member (768 MiB held) is refused on the card, overflows" \
    '[[ $OUT == "rc=0 | group_limit_bytes=$((512 * MiB)) | alloc=OK overflow=$MiB" ]]'
says g "alloc 256" "alloc 512"
OUT="$ANSWERS | $(slot g in_use_bytes)"
check "... and holds the guaranteed member: 256 MiB fit its 512 MiB budget, 512 MiB more do not (named)" \
    '[[ $OUT == "alloc=OK alloc=ERR | in_use_bytes=$((256 * MiB))" ]] && has "$ANSWER" "the budget of its group g1 on the card"'
say o quit; say g quit
stop o; stop g

# ---- faults: a damaged ledger, a truncated one, a missing slot ----------------------------------------------
start f --growth --limit 1GiB
says f start "alloc 256"
L=$VRAM_LEDGER_DIR/ledger
printf 'garbage garbage garbage garbage garbage garbage garbage garbage' | dd of="$L" conv=notrunc status=none
run "$VRAM" top --once --json
OUT="rc=$RC $(slot f in_use_bytes)"
check "a ledger with a damaged header is rebuilt by the next reader, the libvram member's slot carried over" \
    '[[ $OUT == "rc=0 in_use_bytes=$((256 * MiB))" ]] && has "$ERR" "rebuilt"'
run "$VRAM" limit "${PID[f]}" 128MiB
until_info f "live_limit=$((128 * MiB)) over_limit=$((128 * MiB))" live_limit over_limit
OUT="rc=$RC | $INFO"
says f "alloc 64"
OUT="$OUT | $ANSWERS"
check "... the member follows the rebuilt file: vram limit reaches it, its request is refused (no overflow asked), alive" \
    '[[ $OUT == "rc=0 | live_limit=$((128 * MiB)) over_limit=$((128 * MiB)) | alloc=ERR" ]] && has "$ANSWER" "vram limit"'
truncate -s 0 "$L"
OUT="$(until_slot f "in_use_bytes=$((256 * MiB)) limit_bytes=$((128 * MiB))" in_use_bytes limit_bytes)"
info f current live_limit
OUT="$OUT | $INFO"
check "a ledger truncated to nothing under it: no crash, it claims a slot again, the limit set from outside kept there" \
    '[[ $OUT == "in_use_bytes=$((256 * MiB)) limit_bytes=$((128 * MiB)) | current=$((256 * MiB)) live_limit=$((128 * MiB))" ]]'
python3 - "$L" "${PID[f]}" <<'PY'
import mmap, struct, sys
path, pid = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    for i in range(1024):
        off = 64 + 320 * i
        state, spid = struct.unpack_from("<Ii", m, off)
        if state == 0x45564c53 and spid == pid:
            struct.pack_into("<I", m, off, 0)   # the slot freed under its owner
    m.close()
PY
SLOT="$(until_slot f "in_use_bytes=$((256 * MiB)) limit_bytes=$((128 * MiB))" in_use_bytes limit_bytes)"
run "$VRAM" limit "${PID[f]}" none
until_info f "live_limit=$GiB" live_limit
OUT="$SLOT | rc=$RC | $INFO"
check "a slot freed under its owner: it claims one again, and vram limit reaches it there" \
    '[[ $OUT == "in_use_bytes=$((256 * MiB)) limit_bytes=$((128 * MiB)) | rc=0 | live_limit=$GiB" ]]'
say f quit
stop f
start h --growth --group g4 --group-limit 1GiB
says h start "alloc 256"
rm -f "$L"
ln -s "$TMP/card" "$L"
says h "alloc 256"
OUT="$ANSWERS"
ERR1=$ANSWER
rm -f "$L"
says h "alloc 256"
OUT="$OUT $ANSWERS $(slot h in_use_bytes)"
check "a group member whose ledger was replaced by a file it cannot open refuses to grow (its group's use unknown), and goes on once it can" \
    '[[ $OUT == "alloc=ERR alloc=OK in_use_bytes=$((512 * MiB))" ]] && has "$ERR1" "the ledger was replaced and the new one cannot be opened"'
say h quit
stop h

# ---- the CUDA backend under the preload library: libvram follows its slot -------------------------------------
start c VRAM_BACKEND=cuda LD_LIBRARY_PATH="$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" --growth --limit 1GiB
says c start "alloc 256" "alloc 256"
OUT="$ANSWERS | $("$VRAM" top --once --json | python3 -c 'import json, sys; print(len([p for p in json.load(sys.stdin)["processes"] if p["pid"] == int(sys.argv[1])]))' "${PID[c]}") $(slot c in_use_bytes limit_bytes)"
check "libvram on the CUDA backend under vram run: one slot, the preload library's, counting what libvram's pools took from the driver" \
    '[[ $OUT == "start=OK alloc=OK alloc=OK | 1 in_use_bytes=$((512 * MiB)) limit_bytes=$GiB" ]]'
run "$VRAM" limit "${PID[c]}" 256MiB
until_info c "live_limit=$((256 * MiB)) over_limit=$((256 * MiB))" live_limit over_limit
OUT="rc=$RC | $INFO"
says c "alloc 64"
OUT="$OUT | $ANSWERS"
check "... vram limit PID reaches libvram's pools through that slot: over its limit, its request refused by libvram naming vram limit (not a full card)" \
    '[[ $OUT == "rc=0 | live_limit=$((256 * MiB)) over_limit=$((256 * MiB)) | alloc=ERR" ]] && has "$ANSWER" "from outside it (vram limit)"'
says c free info
OUT="$ANSWERS $(slot c in_use_bytes over_limit)"
check "... a free brings it under (the next call gives the freed memory back to the driver), the preload library's count follows" \
    '[[ $OUT == "free=OK current=$((256 * MiB)) in_use_bytes=$((256 * MiB)) over_limit=false" ]]'
run "$VRAM" limit "${PID[c]}" none
until_info c "live_limit=$GiB" live_limit
says c "alloc 512" "alloc 512"
OUT="rc=$RC $INFO $ANSWERS $(slot c in_use_bytes)"
check "... vram limit PID none: both back at 1 GiB (768 MiB fit, 1280 MiB do not)" \
    '[[ $OUT == "rc=0 live_limit=$GiB alloc=OK alloc=ERR in_use_bytes=$((768 * MiB))" ]]'
say c quit
stop c

# ---- outside vram run, a ledger directory that cannot be used: unlisted, no limit lifted ----------------------
# (vram run refuses to start a group under such a ledger; a libvram program given VRAM_GROUP by hand is listed
# by the library alone)
mkdir -m 0700 "$TMP/real"
ln -s "$TMP/real" "$TMP/link"
run env VRAM_LEDGER_DIR="$TMP/link" VRAM_GROUP=g2 VRAM_GROUP_LIMIT=512MiB VRAM_GROWTH=1 "$APP" \
    <<<$'start\nalloc 256\nalloc 256\nalloc 1\nquit'
check "a ledger directory that is a symlink is refused by name: the process runs unlisted, its group's budget held for its own use" \
    '[[ $(grep -o "^[a-z]*=[A-Z]*" <<<"$OUT" | tr "\n" " ") == "start=OK alloc=OK alloc=OK alloc=ERR quit=OK " ]] &&
     has "$OUT" "the budget of its group g2 (536870912 bytes, VRAM_GROUP_LIMIT) is reached by this process alone" &&
     has "$ERR" "is not a directory (a symlink or another file); refused"'
if [[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1; then
    mkdir -m 0700 "$TMP/theirs"
    chown nobody "$TMP/theirs"
    run env VRAM_LEDGER_DIR="$TMP/theirs" VRAM_GROUP=g3 VRAM_GROUP_LIMIT=256MiB VRAM_GROWTH=1 "$APP" \
        <<<$'start\nalloc 256\nalloc 1\nquit'
    check "another user's ledger directory is refused by name: unlisted, its group's budget held for its own use" \
        '[[ $(grep -o "^[a-z]*=[A-Z]*" <<<"$OUT" | tr "\n" " ") == "start=OK alloc=OK alloc=ERR quit=OK " ]] &&
         has "$ERR" "belongs to uid"'
else
    echo "SKIP  another user's ledger directory (needs root and the user nobody)"
fi

echo "$PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
