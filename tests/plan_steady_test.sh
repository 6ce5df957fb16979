#!/usr/bin/env bash
# plan_steady_test.sh: what the repeating step's plan (on by default) may not cost, counted in driver
# calls (creates, releases, moves) by `vram replay --growth --passes 5 --json` on the simulated card
# with no limit (issue 40's table, bench/plan_cost.sh):
#   - a program that repeats itself and forms no plan (the five traces of traces/ whose shapes vary)
#     makes no driver call in passes 3-5 with the plan on, as with plan:false;
#   - a model's load (480 blocks of 128 MiB, none freed: tests/load_60g.trace) makes at most 1.1 x the
#     driver calls of plan:false in its cold pass (backing.c: a load's large blocks get plan:false's
#     extents; granule by granule it made 30,720 against 480), and none in passes 3-5.
#   - a program that repeats itself with a plan in force: on the GPT-2 training traces each pass starts
#     the program again and the plan bends through it (never ends); the second pass learns which of the
#     first step's requests only looked like the plan's (evicted), the third moves back under the zone
#     what the second lent, and passes 4 and 5 make no driver call.
# The ResNet traces, where the plan gives way at the restart (its zone and the weights would take the
# pool past its high-water mark), still make driver calls in passes 3-5 under the hold (bench/README.md,
# "What the plan costs"): not checked here.
#
#   tests/plan_steady_test.sh PATH/TO/vram
#
# Exit 1 when a check failed.
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # start_test(), run(), check(), field()
start_test "$@"                                  # VRAM, SRC, TMP, PASSED, FAILED

unset VRAM_ALLOC_CONF VRAM_FORCE_ALLOW_GROWTH VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION CUDA_VISIBLE_DEVICES
export VRAM_BACKEND=sim VRAM_SIM_DEVICES=141GiB

# calls FILE FIRST LAST: the driver calls of passes FIRST..LAST (from 1) of a replay's JSON
calls() {
    ${PYTHON:-python3} -c '
import json, sys
p = json.load(open(sys.argv[1]))["per_pass"][int(sys.argv[2]) - 1:int(sys.argv[3])]
print(sum(x["driver_allocs"] + x["driver_frees"] + x["driver_moves"] for x in p))' "$1" "$2" "$3"
}

# replay TRACE CONF NAME: 5 passes into $TMP/NAME.json (CONF "" is the default)
replay() {
    VRAM_ALLOC_CONF=$2 "$VRAM" replay "$1" --growth --passes 5 --json >"$TMP/$3.json" 2>"$TMP/$3.err" ||
        { cat "$TMP/$3.err" >&2; return 1; }
}

for t in bert_varlen gpt2_generate train_bert_varlen train_gpt2_generate transformer_varlen; do
    replay "$SRC/traces/$t.trace.gz" "" "$t"
    steady=$(calls "$TMP/$t.json" 3 5)
    RC=0 OUT="passes 3-5: $steady driver calls, plan steps $(field "$TMP/$t.json" plan_steps)" ERR=
    check "$t: no driver call in passes 3-5 with the plan on" '[[ $steady -eq 0 ]]'
done

for t in gpt2_train train_gpt2; do
    replay "$SRC/traces/$t.trace.gz" "" "$t"
    settled=$(calls "$TMP/$t.json" 4 5)
    ends=$(field "$TMP/$t.json" plan_ends)
    RC=0 OUT="passes 3-5: $(calls "$TMP/$t.json" 3 5) driver calls, 4-5: $settled; plan steps $(field "$TMP/$t.json" plan_steps), ends $ends" ERR=
    check "$t: the plan bends through every restart (never ends)" '[[ $ends -eq 0 ]]'
    check "$t: no driver call in passes 4-5" '[[ $settled -eq 0 ]]'
done

replay "$SRC/tests/load_60g.trace" "" load
replay "$SRC/tests/load_60g.trace" plan:false load-off
on=$(calls "$TMP/load.json" 1 1)
off=$(calls "$TMP/load-off.json" 1 1)
steady=$(calls "$TMP/load.json" 3 5)
RC=0 OUT="cold pass: $on driver calls, plan:false $off; passes 3-5: $steady" ERR=
check "a 60 GiB load: cold calls $on <= 1.1 x plan:false's $off" '[[ $((on * 10)) -le $((off * 11)) ]]'
check "a 60 GiB load: no driver call in passes 3-5" '[[ $steady -eq 0 ]]'
check "the load was replayed whole" '[[ $(field "$TMP/load.json" failed_allocs) -eq 0 && $off -ge 480 ]]'

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
