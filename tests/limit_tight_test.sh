#!/usr/bin/env bash
# limit_tight_test.sh: every trace of traces/ at limit = ceil(peak live / 0.995) bytes (the limit 99.5%
# full of bench/limit.sh's BENCH_FRACTION=0.995), replayed with growth and the default options (the plan
# on), two passes. Peak live is read from the trace itself (awk: the most requested bytes live at once),
# not from vram.
#
# What holds on every trace, from the limit: vram never reserves more than the limit (peak reserved <=
# limit), and an allocation that fails fails as out of memory (VRAM_ERR_OUT_OF_MEMORY), nothing else; a
# plan refused under the limit is never followed (the detector stops: plan_steps 0).
# What is the target, issue 31's: no failed allocation. Six traces meet it and must keep meeting it;
# gpt2_generate, train_gpt2_generate and transformer_varlen do not yet (bench/README.md, "What does not
# fit at 99.5%"): their failures are printed, not checked.
# Which plans are refused (resnet50_train, train_resnet50 and train_gpt2: the plan's zone does not fit
# beside the memory the blocks from before its step hold; gpt2_train's fits and is followed) is pinned as
# vram decides it today, not derived: the rule (src/pool/plan_arena.c, plan_arm_locked) counts the
# granules under those blocks as best fit placed them, and on resnet50_train the zone (the detector's
# top, 1,555,204,608 bytes, rounded to granules, plus one) and the bytes of those blocks (at least
# 292,133,376) come within 5 MB of the 1,855,317,649-byte limit, less than the granules their placement
# adds; the trace alone does not decide it.
#
#   tests/limit_tight_test.sh PATH/TO/vram
#
# Exit 1 when a check failed.
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # start_test(), run(), check(), field()
start_test "$@"                                  # VRAM, SRC, TMP, PASSED, FAILED

unset VRAM_BACKEND VRAM_SIM_DEVICES VRAM_ALLOC_CONF VRAM_FORCE_ALLOW_GROWTH VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION \
      CUDA_VISIBLE_DEVICES

# peak_live TRACE: the most requested bytes live at once over the trace's a/f lines (awk's numbers are
# doubles: exact for these sums, far below 2^53)
peak_live() {
    gzip -dc "$1" | awk '$1 == "a" { size[$2] = $3; live += $3; if (live > peak) peak = live }
                         $1 == "f" && ($2 in size) { live -= size[$2]; delete size[$2] }
                         END { printf "%.0f\n", peak }'
}

for t in bert_varlen gpt2_generate gpt2_train resnet50_train train_bert_varlen train_gpt2 train_gpt2_generate \
         train_resnet50 transformer_varlen; do
    peak=$(peak_live "$SRC/traces/$t.trace.gz")
    limit=$(( (peak * 1000 + 994) / 995 ))                      # ceil(peak / 0.995)
    set +e
    "$VRAM" replay "$SRC/traces/$t.trace.gz" --growth --limit "$limit" --passes 2 --json --allow-failures \
        >"$TMP/$t.json" 2>"$TMP/$t.err"
    rc=$?
    set -e
    read -r live reserved failed refused steps first < <(${PYTHON:-python3} -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(*(d[k] for k in ("peak_live_bytes", "peak_reserved_bytes", "failed_allocs", "plan_refused", "plan_steps",
                       "first_error")))' "$TMP/$t.json")
    RC=$rc OUT="limit $limit (peak live $peak): peak reserved $reserved, failed $failed, plan_refused $refused, plan_steps $steps" ERR=$(grep -m1 "first failure" "$TMP/$t.err" || true)
    check "$t: the replay ran (exit $rc) and saw the trace's peak live ($live = $peak)" '[[ $rc -eq 0 && $live -eq $peak ]]'
    check "$t: peak reserved $reserved <= the limit $limit" '[[ $reserved -le $limit ]]'
    check "$t: every failure is out of memory" '[[ $failed -eq 0 || $first == *VRAM_ERR_OUT_OF_MEMORY* ]]'
    check "$t: a refused plan is not followed (refused $refused, steps $steps)" '[[ $refused -eq 0 || $steps -eq 0 ]]'
    case $t in
        gpt2_generate|train_gpt2_generate|transformer_varlen)
            echo "      $t at peak live / 0.995: $failed failed allocations (not yet the target)" ;;
        *)
            check "$t at peak live / 0.995: no failed allocation ($failed)" '[[ $failed -eq 0 ]]' ;;
    esac
    case $t in
        resnet50_train|train_resnet50|train_gpt2)
            check "$t: the plan refused ($refused), none followed ($steps)" '[[ $refused -ge 1 && $steps -eq 0 ]]' ;;
        gpt2_train)
            check "$t: the plan followed ($steps steps), not refused ($refused)" '[[ $steps -ge 1 && $refused -eq 0 ]]' ;;
    esac
done

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
