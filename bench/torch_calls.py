#!/usr/bin/env python3
"""bench/torch_calls.py: what one allocation or free costs PyTorch, through each allocator.

  python3 bench/torch_calls.py [--trace traces/gpt2_generate.trace.gz] [--passes 12] [--rounds 3]
                               [--configs torch,torch-expandable,vram,vram-pluggable] [--threads N]
                               [--out FILE]
  python3 bench/torch_calls.py --table FILE

Replays an allocation trace (traces/README.md) through the allocator PyTorch itself calls for every
CUDA tensor, c10::cuda::CUDACachingAllocator::get()->allocate(size), and frees each block by
dropping its c10::DataPtr, as a tensor's storage does: a small C++ loop built with
torch.utils.cpp_extension (cached by PyTorch), timed per pass with std::chrono::steady_clock. The
first pass is cold (memory taken from the driver), the others warm. With --threads N, N threads
replay the trace at once on the current device and stream, each with blocks of its own, and a
call's ns is the pass's wall time over all their calls (what one mutex shared by every thread,
such as CUDAPluggableAllocator's table, costs shows there). Configurations, one process each,
rounds interleaved (round r runs every configuration once, in an order rotated by r):

  torch             PyTorch's caching allocator (default)
  torch-expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  torch-async       PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  vram              vram.torch.install(): vram's allocator library (vram.torch.mode "allocator")
  vram-pluggable    vram.torch.install(pluggable=True): CUDAPluggableAllocator over vram (its
                    table of blocks under a mutex), as vram.torch.install() did before 2026-11-30

Prints a Markdown table: per configuration the warm ns per call (median of each process's warm
passes; the row gives the lowest of the rounds and their range) and the cold ns per call, and
writes every process's JSON line to --out (default build-bench/torch_calls.jsonl). The
PyTorch calls are what a training step pays per tensor on top of the kernels; at 100,000 calls a
step (gpt2_generate) 100 ns a call is 10 ms. --self-test checks the table code without PyTorch.
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ["torch", "torch-expandable", "torch-async", "vram", "vram-pluggable"]
ALLOC_CONF = {"torch-expandable": "expandable_segments:True", "torch-async": "backend:cudaMallocAsync"}

_LOOP = r"""
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/core/Allocator.h>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

// ops: size >= 0 allocates `size` bytes into slot[i], -1 frees slot[i]; each of `threads` threads
// replays them with slots of its own. Returns the wall ns of each pass.
std::vector<double> replay(const std::vector<int64_t> &size, const std::vector<int64_t> &slot, int64_t nslots,
                           int64_t passes, int64_t threads) {
    c10::Allocator *a = c10::cuda::CUDACachingAllocator::get();
    std::vector<std::vector<c10::DataPtr>> live(static_cast<size_t>(threads));
    for (auto &l : live) l.resize(static_cast<size_t>(nslots));
    auto run = [&](int64_t t) {
        std::vector<c10::DataPtr> &mine = live[static_cast<size_t>(t)];
        for (size_t i = 0; i < size.size(); i++) {
            if (size[i] >= 0) mine[slot[i]] = a->allocate(static_cast<size_t>(size[i]));
            else mine[slot[i]].clear();
        }
    };
    std::vector<double> out;
    for (int64_t p = 0; p < passes; p++) {
        auto t0 = std::chrono::steady_clock::now();
        if (threads == 1) {
            run(0);
        } else {
            std::vector<std::thread> pool;
            for (int64_t t = 0; t < threads; t++) pool.emplace_back(run, t);
            for (auto &th : pool) th.join();
        }
        auto t1 = std::chrono::steady_clock::now();
        out.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
        for (auto &l : live) {
            for (auto &d : l) d.clear();   // what the trace leaves live, untimed
        }
    }
    return out;
}
"""


def read_trace(path):
    """(sizes, slots, nslots): the trace's events, each id mapped to a reusable slot."""
    sizes, slots, free_slots, slot_of, nslots = [], [], [], {}, 0
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"                  # gzip by its magic, as tools/trace.c
    with (gzip.open if gz else open)(path, "rt") as f:
        for line in f:
            part = line.split()
            if not part or part[0] not in ("a", "f"):
                continue
            if part[0] == "a":
                if free_slots:
                    s = free_slots.pop()
                else:
                    s, nslots = nslots, nslots + 1
                slot_of[part[1]] = s
                sizes.append(int(part[2]))
                slots.append(s)
            elif part[1] in slot_of:
                s = slot_of.pop(part[1])
                sizes.append(-1)
                slots.append(s)
                free_slots.append(s)
    return sizes, slots, nslots


def worker(config, trace, passes, threads=1):
    if config in ALLOC_CONF:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ALLOC_CONF[config]
    import torch
    from torch.utils.cpp_extension import load_inline
    res = {"config": config, "torch": torch.__version__}
    if config.startswith("vram"):
        sys.path.insert(0, os.path.join(REPO, "python"))
        import vram
        gpus = vram.config.list_physical_devices("GPU")
        vram.config.experimental.set_memory_growth(gpus[0], True)
        vram.torch.install(pluggable=config == "vram-pluggable")
        res["vram_torch_mode"] = vram.torch.mode
    loop = load_inline(name="vram_bench_torch_calls", cpp_sources=[_LOOP], functions=["replay"], with_cuda=True,
                       verbose=False)
    sizes, slots, nslots = read_trace(trace)
    torch.empty(1, device="cuda")   # CUDA and the allocator started, outside the timing
    ns = loop.replay(sizes, slots, nslots, passes, threads)
    calls = len(sizes) * threads          # with threads: wall time over every thread's calls
    res.update({"trace": os.path.basename(trace), "threads": threads, "calls": calls,
                "cold_ns_per_call": ns[0] / calls,
                "warm_ns_per_call": statistics.median(ns[1:]) / calls if len(ns) > 1 else None,
                "warm_passes_ns_per_call": [round(x / calls, 1) for x in ns[1:]]})
    if config.startswith("vram"):
        res["vram_memory_info"] = vram.torch.memory_info(0)
    return res


def table(rows):
    by = {}
    for r in rows:
        if r.get("warm_ns_per_call") is not None:
            by.setdefault(r["config"], []).append(r)
    out = ["| configuration | warm ns per call (lowest of rounds) | range over rounds | cold ns per call (lowest) "
           "| rounds |", "|---|---|---|---|---|"]
    for c in CONFIGS:
        rs = by.get(c)
        if not rs:
            continue
        warm = sorted(r["warm_ns_per_call"] for r in rs)
        cold = min(r["cold_ns_per_call"] for r in rs)
        out.append("| %s | %.1f | %.1f–%.1f | %.1f | %d |" % (c, warm[0], warm[0], warm[-1], cold, len(rs)))
    errors = [r for r in rows if r.get("error")]
    out += ["", *("%s round %s: %s" % (r["config"], r.get("round"), r["error"]) for r in errors)]
    return "\n".join(out).rstrip() + "\n"


def self_test():
    rows = [{"config": "torch", "warm_ns_per_call": 400.0, "cold_ns_per_call": 900.0},
            {"config": "torch", "warm_ns_per_call": 380.0, "cold_ns_per_call": 950.0},
            {"config": "vram", "warm_ns_per_call": 150.0, "cold_ns_per_call": 300.0},
            {"config": "vram-pluggable", "round": 1, "error": "boom"}]
    t = table(rows)
    assert "| torch | 380.0 | 380.0–400.0 | 900.0 | 2 |" in t, t
    assert "| vram | 150.0 | 150.0–150.0 | 300.0 | 1 |" in t, t
    assert "vram-pluggable round 1: boom" in t, t
    import tempfile
    text = "# x\na 1 100 0 0\na 2 200 0 1\nf 1 2\na 3 300 0 3\nf 9 4\nf 2 5\nf 3 6\n"
    for packed in (False, True):                     # plain, and gzip under a name that does not say so
        with tempfile.NamedTemporaryFile("wb", suffix=".trace", delete=False) as f:
            f.write(gzip.compress(text.encode()) if packed else text.encode())
        sizes, slots, n = read_trace(f.name)
        os.unlink(f.name)
        assert sizes == [100, 200, -1, 300, -1, -1], sizes
        assert slots == [0, 1, 0, 0, 1, 0] and n == 2, (slots, n)
    print("bench/torch_calls.py self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default=os.path.join(REPO, "traces", "gpt2_generate.trace.gz"))
    ap.add_argument("--passes", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="threads replaying the trace at once, each with its own "
                    "blocks (default 1); ns per call is then the pass's wall time over all their calls")
    ap.add_argument("--configs", default="torch,torch-expandable,vram,vram-pluggable")
    ap.add_argument("--out", default=os.path.join(REPO, "build-bench", "torch_calls.jsonl"),
                    help="JSON lines of every process (default build-bench/torch_calls.jsonl)")
    ap.add_argument("--table", metavar="JSONL", help="print the table of a results file again")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.table:
        with open(args.table) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        print(table(rows))
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.trace, args.passes, args.threads)), flush=True)
        return
    configs = args.configs.split(",")
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        ap.error("unknown configuration %s (known: %s)" % (", ".join(bad), ", ".join(CONFIGS)))
    rows = []
    for r in range(args.rounds):
        for c in configs[r % len(configs):] + configs[:r % len(configs)]:
            t0 = time.time()
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", c, "--trace", args.trace,
                                "--passes", str(args.passes), "--threads", str(args.threads)],
                               capture_output=True, text=True)
            line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
            try:
                row = json.loads(line)
            except ValueError:
                row = {"config": c, "error": (p.stderr.strip().splitlines() or ["rc %d" % p.returncode])[-1][:300]}
            row["round"] = r + 1
            rows.append(row)
            print("== %s round %d: %s (%.0f s)" % (c, r + 1, "%.1f ns warm" % row["warm_ns_per_call"]
                  if row.get("warm_ns_per_call") else row.get("error"), time.time() - t0), file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print("== results: %s (python3 bench/torch_calls.py --table %s prints this table again)" % (args.out, args.out),
          file=sys.stderr)
    print("%s, %s, trace %s, %d passes a process (1 cold), %d thread%s\n" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rows[0].get("torch", "?") if rows else "?",
        os.path.basename(args.trace), args.passes, args.threads, "" if args.threads == 1 else "s"))
    print(table(rows))


if __name__ == "__main__":
    main()
