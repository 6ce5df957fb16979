#!/usr/bin/env bash
# bench/threads.sh: threads on one logical device (issue 3, target 5). Each of N threads replays the
# whole trace on logical device 0 (`vram replay --threads N --passes P`, P = BENCH_PASSES, default 11; growth, no limit beyond the
# card), with the default (threads spread over arenas), with `arenas:1` (one arena, its thread
# caches) and with `arenas:1,thread_cache_mb:0` (one lock for everything); prints warm ops/s, the
# speed-up over one thread, and reserved / live. Median of BENCH_REPEAT runs (default 3);
# BENCH_CONFS="default arenas:1" picks the configurations, BENCH_TRACES the traces.
#
#   bash bench/threads.sh [VRAM_BINARY]      (default build-bench/vram/vram, built by bench/run.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VRAM=${1:-build-bench/vram/vram}
REPEAT=${BENCH_REPEAT:-3}
PASSES=${BENCH_PASSES:-11}
read -r -a CONFS <<<"${BENCH_CONFS:-default arenas:1 arenas:1,thread_cache_mb:0}"
read -r -a TRACES <<<"${BENCH_TRACES:-$(echo traces/*.trace.gz)}"
[ -x "$VRAM" ] || { cmake -S . -B build-bench/vram -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF >/dev/null &&
                    cmake --build build-bench/vram -j "$(nproc)" --target vram >/dev/null; VRAM=build-bench/vram/vram; }
echo "# vram replay --threads N --passes $PASSES --policy growth, $(date -u +%F), $(nproc) CPUs, $("$VRAM" --version 2>&1 | head -1)"
for t in "${TRACES[@]}"; do
  for conf in "${CONFS[@]}"; do
    for n in 1 2 4 8; do
      for _ in $(seq "$REPEAT"); do
        if [ "$conf" = default ]; then env -u VRAM_ALLOC_CONF "$VRAM" replay "$t" --policy growth --passes "$PASSES" --threads "$n" --json
        else VRAM_ALLOC_CONF=$conf "$VRAM" replay "$t" --policy growth --passes "$PASSES" --threads "$n" --json; fi
      done 2>/dev/null | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
if not rows:
    sys.exit("bench/threads.sh: no replay of %s (%s, %s threads) succeeded; run `vram replay` by hand to see why"
             % tuple(sys.argv[1:4]))
ops = statistics.median(r["warm_ops_per_sec"] for r in rows)
print(json.dumps({"trace": sys.argv[1], "conf": sys.argv[2], "threads": int(sys.argv[3]), "warm_ops_per_sec": ops,
                  "warm_ns_per_op": statistics.median(r["warm_ns_per_op"] for r in rows),
                  "reserved_to_live": statistics.median(r["reserved_to_live"] for r in rows),
                  "failed_allocs": max(r["failed_allocs"] for r in rows), "runs": len(rows)}))' "$(basename "$t" .trace.gz)" "$conf" "$n"
    done
  done
done | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
one = {(r["trace"], r["conf"]): r["warm_ops_per_sec"] for r in rows if r["threads"] == 1}
print("| trace | alloc conf | 1 thread | 2 | 4 | 8 | 8 threads / 1 | reserved/live at 8 |")
print("|---|---|---|---|---|---|---|---|")
for key in dict.fromkeys((r["trace"], r["conf"]) for r in rows):
    rs = {r["threads"]: r for r in rows if (r["trace"], r["conf"]) == key}
    cells = ["%.2f M" % (rs[n]["warm_ops_per_sec"] / 1e6) if n in rs else "-" for n in (1, 2, 4, 8)]
    ratio = rs[8]["warm_ops_per_sec"] / one[key] if 8 in rs and one.get(key) else float("nan")
    print("| %s | %s | %s | %.2fx | %.3f |" % (key[0], "(default)" if key[1] == "default" else key[1], " | ".join(cells),
          ratio, rs[8]["reserved_to_live"] if 8 in rs else float("nan")))
'
