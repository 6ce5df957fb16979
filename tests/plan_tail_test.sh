#!/usr/bin/env bash
# plan_tail_test.sh: the repeating step's plan on the four fixed-shape traces of traces/, replayed on
# the simulated card with growth and no limit: with VRAM_ALLOC_CONF=plan:true, what the pool holds
# over pass 1's last quarter is at most 1.005 x the live bytes there (tail_reserved_to_live), the plan
# was in force and never ended, and the whole trace's peak reserved / peak live is no higher than
# with plan:false; over 3 passes (each starts the program again: the plan bends through the weights,
# or gives way where its zone and what the program holds outside it would take the pool past the
# most it held) no higher than plan:false's over 3 passes either.
#
#   tests/plan_tail_test.sh PATH/TO/vram
#
# Exit 1 when a check failed.
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # start_test(), run(), check(), field()
start_test "$@"                                  # VRAM, SRC, TMP, PASSED, FAILED

unset VRAM_BACKEND VRAM_SIM_DEVICES VRAM_FORCE_ALLOW_GROWTH VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION CUDA_VISIBLE_DEVICES

# le A B: A <= B (decimals)
le() { ${PYTHON:-python3} -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$1" "$2"; }

for t in gpt2_train resnet50_train train_gpt2 train_resnet50; do
    for conf in false true; do
        VRAM_ALLOC_CONF=plan:$conf "$VRAM" replay "$SRC/traces/$t.trace.gz" --growth --json \
            >"$TMP/$t-$conf.json" 2>/dev/null
    done
    for conf in false true; do
        VRAM_ALLOC_CONF=plan:$conf "$VRAM" replay "$SRC/traces/$t.trace.gz" --growth --passes 3 \
            --json >"$TMP/$t-3-$conf.json" 2>/dev/null
    done
    tail=$(field "$TMP/$t-true.json" tail_reserved_to_live)
    whole=$(field "$TMP/$t-true.json" reserved_to_live)
    whole_off=$(field "$TMP/$t-false.json" reserved_to_live)
    whole_3=$(field "$TMP/$t-3-true.json" reserved_to_live)
    whole_3_off=$(field "$TMP/$t-3-false.json" reserved_to_live)
    steps=$(field "$TMP/$t-true.json" plan_steps)
    ends=$(field "$TMP/$t-true.json" plan_ends)
    RC=0 OUT="tail $tail, whole $whole (plan:false $whole_off, 3 passes $whole_3 against $whole_3_off), steps $steps, ends $ends" ERR=
    check "$t: tail_reserved_to_live $tail <= 1.005 with the plan" 'le "$tail" 1.005'
    check "$t: the plan in force ($steps steps), never ended ($ends)" '[[ $steps -ge 1 && $ends -eq 0 ]]'
    check "$t: whole trace $whole <= $whole_off (plan:false)" 'le "$whole" "$whole_off"'
    check "$t: 3 passes $whole_3 <= $whole_3_off (plan:false)" 'le "$whole_3" "$whole_3_off"'
done
check "the comparison rejects what it should" '! le 1.0051 1.005 && le 1.005 1.005'

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
