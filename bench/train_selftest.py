#!/usr/bin/env python3
"""bench/train_selftest.py: the self-test of bench/train.py and its modules with fake clocks, rows
and children: no PyTorch, no GPU (`python3 bench/train.py --self-test` runs it; ctest
bench_train_selftest). Writes only a temporary directory.
"""
import argparse
import io
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import last_json_object, load_results  # noqa: E402  (bench/table.py)
from train import (ALLOC_CONF, _cpu_list, child_env, parse_args, plan, row_from_child,  # noqa: E402
                   run_driver, steps_for)
from train_table import ALLOCATORS, GIB, aggregate, pooled_by_shape, render  # noqa: E402
from train_worker import percentile, step_stats, time_steps  # noqa: E402
from workloads import DEFAULT_STEPS, DESCRIPTION, MODEL_WORKLOADS, PROGRAM_WORKLOADS  # noqa: E402
from workloads.bert_varlen import BERT, bert_shapes  # noqa: E402
from workloads.common import StepClock  # noqa: E402


class Checks:
    """check(cond, what): counts the checks; the first that fails raises AssertionError naming it."""
    n = 0

    def __call__(self, cond, what):
        self.n += 1
        if not cond:
            raise AssertionError("self-test: " + what)


def _fake_result(w, a, median, reserved_gib, used_gib=None, **extra):
    r = {"workload": w, "allocator": a, "steps": 10, "warmup": 2, "step_ms_median": median,
         "step_ms_mean": median * 1.01, "step_ms_p10": median * 0.99, "step_ms_p90": median * 1.02,
         "peak_reserved_bytes": int(reserved_gib * GIB), "peak_allocated_bytes": int(reserved_gib * GIB * 0.9),
         "device_used_peak_bytes": int((used_gib if used_gib is not None else reserved_gib + 0.5) * GIB),
         "peak_reserved_source": "torch.cuda.max_memory_reserved", "torch": "2.11.0", "gpu": "Fake H200"}
    r.update(extra)
    return r


def arguments(check):
    # argument parsing
    a = parse_args([])
    check(a.workloads == MODEL_WORKLOADS and a.allocators == ALLOCATORS and a.repeat == 2 and a.timeout == 900,
          "driver defaults")
    check(steps_for("gpt2", a) == DEFAULT_STEPS["gpt2"], "per-workload default steps")
    a = parse_args(["--workloads", "gpt2,bert_varlen,gpt2", "--allocators", "vram,torch", "--steps", "7",
                    "--warmup", "0", "--repeat", "3", "--out", "/tmp/x"])
    check(a.workloads == ["gpt2", "bert_varlen"] and a.allocators == ["vram", "torch"], "lists, duplicates dropped")
    check(steps_for("gpt2_generate", a) == (0, 7) and a.repeat == 3 and a.out == "/tmp/x", "overrides")
    a = parse_args(["--worker", "resnet50", "torch-async", "--steps", "3"])
    check(a.worker == ["resnet50", "torch-async"] and steps_for("resnet50", a) == (DEFAULT_STEPS["resnet50"][0], 3),
          "worker arguments")
    for bad in (["--workloads", "gpt3"], ["--allocators", "torch,cupy"], ["--worker", "gpt2", "jemalloc"],
                ["--steps", "0"], ["--repeat", "-1"], ["--warmup", "-2"]):
        saved = sys.stderr
        sys.stderr = io.StringIO()
        try:
            parse_args(bad)
            ok = False
        except SystemExit:
            ok = True
        finally:
            sys.stderr = saved
        check(ok, "rejects %s" % bad)


def timing(check):
    # statistics and the timing loop
    check(percentile([3, 1, 2], 50) == 2 and percentile([1, 2, 3, 4], 50) == 2.5, "median")
    check(abs(percentile(list(range(11)), 10) - 1.0) < 1e-9 and percentile([5], 90) == 5.0, "percentiles")
    s = step_stats([10.0, 12.0, 11.0, 30.0])
    check(s["step_ms_median"] == 11.5 and s["step_ms_mean"] == 15.75 and s["step_ms_max"] == 30.0, "step_stats")
    clock_t = [0.0]
    calls = []

    def fake_step(i):
        calls.append(i)
        clock_t[0] += 0.010 if i >= 2 else 1.0  # slow warmup steps must not be counted

    times = time_steps(fake_step, lambda: calls.append("sync"), 2, 3, sample=lambda: calls.append("sample"),
                       clock=lambda: clock_t[0])
    check(len(times) == 3 and all(abs(t - 10.0) < 1e-6 for t in times), "warmup excluded, ms: %s" % times)
    check(calls[:4] == ["sync", 0, "sync", "sample"] and [c for c in calls if isinstance(c, int)] == [0, 1, 2, 3, 4],
          "sync around every step, sample after")
    # the framework programs' step clock: the same rules when a callback calls begin()/end()
    clock_t[0], calls[:] = 0.0, []
    sc = StepClock(lambda: calls.append("sync"), 2, lambda: calls.append("sample"), clock=lambda: clock_t[0])
    sc.end()  # an end without a begin (a callback order the framework may have) counts nothing
    for i in range(5):
        sc.begin()
        clock_t[0] += 0.020 if i >= 2 else 1.0
        sc.end()
    check(len(sc.times) == 3 and all(abs(t - 20.0) < 1e-6 for t in sc.times), "step clock: warmup excluded: %s"
          % sc.times)
    check(calls[:3] == ["sync", "sync", "sample"] and calls.count("sample") == 5, "step clock: sync, sample after")
    check(set(PROGRAM_WORKLOADS) <= set(DEFAULT_STEPS) and set(PROGRAM_WORKLOADS) <= set(DESCRIPTION),
          "every program has steps and a description")
    a = parse_args(["--workloads", "llama_trainer,timm_vit"])
    check(a.workloads == ["llama_trainer", "timm_vit"] and steps_for("timm_vit", a) == DEFAULT_STEPS["timm_vit"],
          "programs chosen by name")
    sh = bert_shapes(50)
    k = BERT["shapes"]
    check(sh == bert_shapes(50) and len(set(sh)) == k and len(set(sh[:k])) == k, "bert shapes: fixed, all in a cycle")
    check(all(sh[i] == sh[i + k] and sh[i] != sh[i + 1] for i in range(len(sh) - k)), "bert shapes: cycled, never repeated")
    check(all(b in BERT["batches"] and BERT["min_len"] <= n <= BERT["max_len"] and n % BERT["len_step"] == 0
              for b, n in sh), "bert shapes in range")


def children(check):
    # child environments
    base = {"PATH": "/bin", "PYTORCH_CUDA_ALLOC_CONF": "garbage"}
    check("PYTORCH_CUDA_ALLOC_CONF" not in child_env("torch", base), "torch: conf unset")
    check("PYTORCH_CUDA_ALLOC_CONF" not in child_env("vram", base), "vram: conf unset")
    check(child_env("torch-expandable", base)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True", "expandable")
    check(child_env("torch-async", base)["PYTORCH_CUDA_ALLOC_CONF"] == "backend:cudaMallocAsync", "async")
    check(child_env("vram", base, "map_ahead_mb:0")["VRAM_ALLOC_CONF"] == "map_ahead_mb:0" and
          "VRAM_ALLOC_CONF" not in child_env("torch", base, "map_ahead_mb:0"), "VRAM_ALLOC_CONF for vram only")

    # child output
    check(last_json_object('noise\n{"a": 1}\n{"b": 2}\ntrailing text\n') == {"b": 2}, "last JSON line")
    check(last_json_object("no json\n{broken\n") is None, "no JSON")
    r = row_from_child("gpt2", "vram", 1, 1, "",
                       "Traceback\n  ...\ntorch.OutOfMemoryError: CUDA out of memory (vram)\n",
                       3.0, 900)
    check(r["error"].endswith("torch.OutOfMemoryError: CUDA out of memory (vram)") and r["round"] == 1, "crash row")
    r = row_from_child("gpt2", "torch", 2, None, "", "", 900.0, 900)
    check(r["error"].startswith("timed out") and r["rc"] is None, "timeout row")
    r = row_from_child("gpt2", "torch", 1, 1, json.dumps({"error": "RuntimeError: boom"}), "", 1.0, 900)
    check(r["error"] == "RuntimeError: boom", "worker's own error kept")
    r = row_from_child("gpt2", "vram", 1, -11, json.dumps(_fake_result("gpt2", "vram", 1.0, 1.0)), "Segfault\n",
                       1.0, 900)
    check("error" not in r and r["warning"] == "exit status -11 after its result: Segfault", "crash at exit")

    # the plan: per workload, rounds interleaved, even rounds reversed
    p = plan(["gpt2", "resnet50"], ["torch", "vram"], 2)
    check(p == [("gpt2", "torch", 1), ("gpt2", "vram", 1), ("gpt2", "vram", 2), ("gpt2", "torch", 2),
                ("resnet50", "torch", 1), ("resnet50", "vram", 1), ("resnet50", "vram", 2),
                ("resnet50", "torch", 2)], "plan %s" % p)


def _fake_rows():
    return [
        _fake_result("gpt2", "torch", 120.0, 20.0, round=1), _fake_result("gpt2", "torch", 118.0, 20.5, round=2),
        _fake_result("gpt2", "torch-expandable", 119.0, 18.0, round=1),
        _fake_result("gpt2", "torch-expandable", 121.0, 18.0, round=2),
        _fake_result("gpt2", "torch-async", 125.0, 18.5, round=1),
        {"workload": "gpt2", "allocator": "torch-async", "round": 2, "error": "exit status 1: boom"},
        _fake_result("gpt2", "vram", 118.5, 17.0, round=1), _fake_result("gpt2", "vram", 119.5, 17.1, round=2),
        {"workload": "resnet50", "allocator": "torch", "round": 1, "skipped": "torchvision is not installed (x)"},
        {"workload": "resnet50", "allocator": "vram", "round": 1, "skipped": "torchvision is not installed (x)"},
        _fake_result("bert_varlen", "torch", 50.0, 15.0), _fake_result("bert_varlen", "torch-async", 52.0, 0.5, 0.5,
                                                                       peak_reserved_source="device_used_peak (x)"),
        _fake_result("bert_varlen", "vram", 51.0, 16.0),
        _fake_result("gpt2_generate", "torch", 300.0, 0.4),
        {"workload": "gpt2_generate", "allocator": "vram", "round": 1,
         "error": "OutOfMemoryError: CUDA out of memory |\nfragmentation"},
    ]


def tables(check):
    # aggregation and tables with fake numbers
    rows = _fake_rows()
    agg = aggregate(rows)
    g = agg[("gpt2", "torch")]
    check(g["median"] == 118.0 and g["median_hi"] == 120.0 and abs(g["reserved"] - 20.5 * GIB) < 2, "best-of-rounds")
    check(agg[("gpt2", "torch-async")]["ok"] == 1 and agg[("gpt2", "torch-async")]["errors"], "partial failure")
    meta = {"date": "2026-12-01", "gpu": "Fake H200", "driver": "580", "torch": "2.11.0", "cuda": "13.0",
            "repeat": 2, "command": "python3 bench/train.py", "vram_version": "0.1.0", "commit": "abc1234",
            "steps": {"gpt2": {"warmup": 2, "steps": 10}}}
    t = render(meta, rows)
    check("### gpt2:" in t and "### resnet50:" in t and "### bert_varlen:" in t and "### gpt2_generate:" in t,
          "one table per workload")
    check(t.index("### gpt2:") < t.index("### resnet50:") < t.index("### bert_varlen:"), "workload order")
    check("skipped: torchvision is not installed" in t, "skipped workload")
    line = next(l for l in t.splitlines() if l.startswith("| PyTorch caching allocator") and "118.00" in l)
    check("**fastest PyTorch**" in line and "(118.00–120.00)" in line and "20.500" in line, "fastest row: " + line)
    line = next(l for l in t.splitlines() if l.startswith("| vram") and "118.50" in l)
    check("+0.42%" in line and "17.100" in line, "vram row: " + line)
    check("vram step time (lowest median) "
          "0.42% slower than the fastest PyTorch allocator (torch, 118.00 ms; target within "
          "1%: met)" in t,
          "gpt2 time verdict")
    check("reserved 17.100 GiB vs min of others 18.000 GiB (torch-expandable; target less: met)" in t,
          "gpt2 memory verdict")
    check("torch-async: 1 of 2 rounds failed: exit status 1: boom" in t, "partial failure note")
    # round 1: 118.5 / min(120, 119, 125) = -0.42%; round 2: 119.5 / min(118, 121) = +1.27%; median +0.43%
    check("paired by round (vram against the fastest PyTorch allocator of the same round): median +0.43% "
          "(rounds: -0.42%, +1.27%)" in t, "paired by round")
    check("vram step time (lowest median) "
          "2.00% slower than the fastest PyTorch allocator (torch, 50.00 ms; target within "
          "1%: missed)" in t,
          "bert time verdict")
    check("0.500*" in t and "vs min of others 0.500 GiB (torch-async" in t, "fallback reserved marked")
    check("failed: OutOfMemoryError: CUDA out of memory / fragmentation" in t and "**verdict**: vram failed" in t,
          "failed vram row")
    check("on 1 of 2 workloads and the memory target (less peak reserved than every other allocator) on 1 of 2" in t,
          "summary")


def pooled(check):
    faster = render({}, [_fake_result("gpt2", "torch", 100.0, 10.0), _fake_result("gpt2", "vram", 99.0, 9.0)])
    check("vram step time (lowest median) "
          "1.00% faster than the fastest PyTorch allocator (torch, 100.00 ms; target within "
          "1%: met)" in faster, "faster vram")
    shaped = [_fake_result("bert_varlen", "torch", 30.0, 10.0, distinct_shapes=2, step_ms=[10, 50, 12, 52], round=1),
              _fake_result("bert_varlen", "torch", 30.0, 10.0, distinct_shapes=2, step_ms=[14, 54, 99, 56], round=2),
              _fake_result("bert_varlen", "vram", 30.0, 9.0, distinct_shapes=2, step_ms=[11, 51, 11, 51], round=1)]
    # torch: shape 0 median of 10, 12, 14, 99 = 13, shape 1 of 50, 52, 54, 56 = 53: 33.0; vram (11 + 51) / 2 = 31
    check(pooled_by_shape("bert_varlen", shaped) == {"torch": 33.0, "vram": 31.0}, "pooled by shape")
    t = render({}, shaped)
    check("averaged over the shapes): torch 33.00 ms, vram 31.00 ms; vram against the fastest PyTorch allocator "
          "(torch): -6.06%" in t, "pooled line: " + t)
    check("per shape (pooled medians, ms, in the order the steps take them): torch 13.00 / 53.00; vram 11.00 / 51.00"
          in t, "per-shape line")
    check("vram step time (pooled) 6.06% faster than the fastest PyTorch allocator (torch, 33.00 ms" in
          render({}, shaped), "the verdict on the pooled figures when every row has its steps")
    only_vram = render({}, [_fake_result("gpt2", "vram", 99.0, 9.0)])
    check("| vram (growth, no limit) | 99.00 | fastest |" in only_vram, "vram alone")


def _fake_runner(check, ran):
    def fake_runner(argv, env, timeout, log_base):
        if "--prepare" in argv:
            check("--vram" in argv, "prepare builds vram's allocator library")
            return 0, json.dumps({"torch": "2.11.0", "cuda": "13.0", "vram_version": "0.1.0",
                                  "vram_torch_mode": "allocator"}), "", 1.0
        w, al = argv[argv.index("--worker") + 1: argv.index("--worker") + 3]
        check(env.get("PYTORCH_CUDA_ALLOC_CONF") == ALLOC_CONF[al], "env of %s" % al)
        check(argv[argv.index("--steps") + 1] == "4", "steps passed on")
        ran.append((w, al))
        if w == "resnet50":
            return 0, json.dumps({"workload": w, "allocator": al, "skipped": "torchvision is not installed"}), "", 1.0
        if al == "torch-async":
            return 1, "", "Traceback (most recent call last):\nRuntimeError: CUDA error: boom\n", 2.0
        if al == "torch" and w == "gpt2_generate":
            return None, "", "", float(timeout)
        ms = {"torch": 100.0, "torch-expandable": 101.0, "vram": 100.5}[al]
        return 0, "warning on stdout\n" + json.dumps(_fake_result(w, al, ms, {"torch": 10, "torch-expandable": 9,
                                                                               "vram": 8.5}[al])), "", 5.0

    return fake_runner


def driver(check, tmp):
    # the driver with a fake runner: order, skipped workloads, failures, files
    ran = []
    fake_runner = _fake_runner(check, ran)
    a = parse_args(["--out", tmp, "--repeat", "2", "--steps", "4"])
    buf = io.StringIO()
    saved = sys.stderr
    sys.stderr = io.StringIO()
    try:
        rc = run_driver(a, runner=fake_runner, machine={"gpu": "Fake H200", "driver": "580", "memory": "143771 MiB"},
                        out_stream=buf)
    finally:
        progress = sys.stderr.getvalue()
        sys.stderr = saved
    check(rc == 0, "driver status")
    check(ran.count(("resnet50", "torch")) == 1 and not any(w == "resnet50" and al != "torch" for w, al in ran),
          "a skipped workload runs once")
    check(len(ran) == 1 + 3 * 4 * 2, "every other child ran: %d" % len(ran))
    check(ran[:8] == [("gpt2", "torch"), ("gpt2", "torch-expandable"), ("gpt2", "torch-async"), ("gpt2", "vram"),
                      ("gpt2", "vram"), ("gpt2", "torch-async"), ("gpt2", "torch-expandable"), ("gpt2", "torch")],
          "interleaved rounds: %s" % ran[:8])
    meta2, rows2 = load_results(os.path.join(tmp, "train.jsonl"))
    check(meta2.get("gpu") == "Fake H200" and meta2.get("torch") == "2.11.0" and meta2.get("repeat") == 2,
          "meta line")
    check(len(rows2) == 4 * 4 * 2, "one line per child: %d" % len(rows2))
    check(all("round" in r and "workload" in r and "allocator" in r for r in rows2), "rows tagged")
    table = buf.getvalue()
    with open(os.path.join(tmp, "table.md")) as f:
        check(f.read().strip() == table.strip(), "table.md is what was printed")
    check("failed: exit status 1, no result: RuntimeError: CUDA error: boom" in table and
          "failed: timed out after 900 s" in table,
          "failed rows with reasons")
    check("vram step time (lowest median) "
          "0.50% slower than the fastest PyTorch allocator (torch, 100.00 ms; target within "
          "1%: met)" in table and
          "reserved 8.500 GiB vs min of others 9.000 GiB (torch-expandable; target less: met)" in table,
          "driver verdict")
    check("[1/32] gpt2 torch round 1/2" in progress and "FAILED" in progress and "skipped" in progress, "progress")
    check(render(meta2, rows2) == table.lstrip("\n"), "--table reprints the same table")
    for name in os.listdir(os.path.join(tmp, "logs")):
        os.remove(os.path.join(tmp, "logs", name))


def cpus(check, tmp):
    # --cpus: timed children under taskset, the untimed prepare child not
    pinned = []

    def pin_runner(argv, env, timeout, log_base):
        pinned.append(argv)
        if "--prepare" in argv:
            return 0, json.dumps({"torch": "2.11.0", "cuda": "13.0"}), "", 1.0
        return 0, json.dumps(_fake_result("gpt2", "torch", 100.0, 10)), "", 5.0

    a = parse_args(["--out", tmp, "--repeat", "1", "--workloads", "gpt2", "--allocators", "torch", "--cpus", "2-5"])
    saved = sys.stderr
    sys.stderr = io.StringIO()
    try:
        run_driver(a, runner=pin_runner, machine={"gpu": "Fake H200"}, out_stream=io.StringIO())
    finally:
        sys.stderr = saved
    check(len(pinned) == 2 and pinned[0][0] != "taskset" and pinned[1][:3] == ["taskset", "-c", "2-5"],
          "--cpus pins the timed child only: %s" % [p[:3] for p in pinned])
    check(load_results(os.path.join(tmp, "train.jsonl"))[0].get("cpus") == "2-5", "--cpus in the meta line")
    for bad in ("2-", "a", "1;2"):
        try:
            _cpu_list(bad)
            check(False, "--cpus %r refused" % bad)
        except argparse.ArgumentTypeError:
            pass


def main():
    check = Checks()
    arguments(check)
    timing(check)
    children(check)
    tables(check)
    pooled(check)
    tmp = tempfile.mkdtemp(prefix="train-selftest-")
    try:
        driver(check, tmp)
        cpus(check, tmp)
    finally:
        shutil.rmtree(tmp)
    print("self-test: ok (%d checks)" % check.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
