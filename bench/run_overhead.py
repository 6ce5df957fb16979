#!/usr/bin/env python3
"""bench/run_overhead.py: what `vram run` costs a PyTorch training step (issue 4: "within 1% of the
same step without vram, measured on the H200").

  python3 bench/run_overhead.py [--vram build-run/vram] [--rounds 5] [--steps 30] [--out FILE]

runs the same worker (this file with --worker) in three conditions, each in its own process:

  plain        python3 run_overhead.py --worker ...
  run          vram run -- python3 ...               (the shim loaded, no limit)
  run-limit    vram run --limit 40GiB -- python3 ... (preallocated: the 40 GiB are reserved at the
                                                      first allocation and handed out as PyTorch asks)

(--conditions adds `run-growth-limit`, vram run --growth --limit 40GiB). Rounds are interleaved:
round r runs every condition once, in an order rotated by r, so that drift of the GPU's clocks over
the run falls on every condition alike. Each worker builds a GPT-style transformer (12 layers, d 1024,
16 heads, vocabulary 32000, ~220M parameters; AdamW, bf16 autocast, random tokens; about 50-150 ms a
step on an H200) and times two variants in turn, after warmup steps:

  fixed   batch 16 x 1024 tokens every step; the caching allocator is warm, so the driver is not
          called in the timed steps: the shim's cost on a program that does not allocate.
  varlen  the sequence length drawn per step (256..1024 tokens, the same sequence in every process)
          and torch.cuda.empty_cache() every 5 steps, so that the caching allocator gives its
          segments back and takes them again from the driver (cudaFree / cudaMalloc) in the timed
          steps: the interposed calls and, under a limit, the balloon giving way and filling again.

and prints one JSON line: per variant the median and mean step ms, the segments PyTorch allocated
from the driver during the timed steps, the peak reserved; and cuMemGetInfo's total as PyTorch sees
it (the limit under --limit: a check that the condition was in force). The driver prints a Markdown
table: per variant and condition, the step time (best of the rounds and median of the rounds), the
overhead against plain, and a verdict against the 1% target. The statistic is the median step for
fixed and the mean step for varlen (whose driver calls fall in a few of the steps, which a median
would not see). --strict exits 3 when a verdict fails; --self-test checks the table code without torch
or a GPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import last_json_object  # noqa: E402  (bench/table.py)

TARGET_PCT = 1.0
LIMIT_GIB = 40
LIMIT = "%dGiB" % LIMIT_GIB
CONDITIONS = {
    "plain": [],
    "run": ["run", "--"],
    "run-limit": ["run", "--limit", LIMIT, "--"],
    "run-growth-limit": ["run", "--growth", "--limit", LIMIT, "--"],
}
LABEL = {
    "plain": "plain python3",
    "run": "vram run (no limit)",
    "run-limit": "vram run --limit " + LIMIT,
    "run-growth-limit": "vram run --growth --limit " + LIMIT,
}
VARIANTS = ("fixed", "varlen")
STAT = {"fixed": "median_ms", "varlen": "mean_ms"}   # the statistic compared, per variant


# ---- the worker (imports torch) ------------------------------------------------------------------

def worker(args):
    import random
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.proj = nn.Linear(d, d, bias=False)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d, bias=False)
            self.out = nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab, d, heads, layers, seq):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    free0, total0 = torch.cuda.mem_get_info()
    model = GPT(args.vocab, args.dim, args.heads, args.layers, args.seq).to(dev)
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(seq):
        x = torch.randint(0, args.vocab, (args.batch, seq), device=dev)
        y = torch.randint(0, args.vocab, (args.batch, seq), device=dev)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.view(-1))
        loss.backward()
        opt.step()

    def segments():
        return torch.cuda.memory_stats().get("segment.all.allocated", 0)

    lengths = list(range(256, args.seq + 1, 128)) or [args.seq]
    out = {"worker": args.condition, "pid": os.getpid(), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "mem_total_gib": round(total0 / 2**30, 3),
           "mem_free_gib_at_start": round(free0 / 2**30, 3), "batch": args.batch, "seq": args.seq,
           "layers": args.layers, "dim": args.dim,
           "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1), "variants": {}}
    for variant in args.variants.split(","):
        rng = random.Random(1234)   # the same lengths in every process
        varlen = variant == "varlen"
        times = []
        seg_before = None
        torch.cuda.reset_peak_memory_stats()
        for i in range(args.warmup + args.steps):
            if i == args.warmup:
                seg_before = segments()
            seq = rng.choice(lengths) if varlen else args.seq
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if varlen and i % args.empty_cache_every == 0:
                torch.cuda.empty_cache()
            step(seq)
            torch.cuda.synchronize()
            if i >= args.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
        out["variants"][variant] = {
            "median_ms": round(statistics.median(times), 3),
            "mean_ms": round(statistics.fmean(times), 3),
            "min_ms": round(min(times), 3),
            "steps": len(times),
            "segment_allocs": segments() - seg_before,
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
        }
    print(json.dumps(out), flush=True)
    return 0


# ---- the driver (standard library only) -------------------------------------------------------------

def clean_env():
    """The environment without vram's own variables or a preloaded shim (the plain condition must be
    plain even when this driver runs under vram run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAM_")}
    pre = [p for p in env.get("LD_PRELOAD", "").split(":") if p and "libvram_preload" not in p]
    if pre:
        env["LD_PRELOAD"] = ":".join(pre)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def worker_args(args, condition):
    a = [args.python, os.path.abspath(__file__), "--worker", "--condition", condition,
         "--steps", str(args.steps), "--warmup", str(args.warmup), "--variants", args.variants,
         "--batch", str(args.batch), "--seq", str(args.seq), "--layers", str(args.layers),
         "--dim", str(args.dim), "--heads", str(args.heads), "--vocab", str(args.vocab),
         "--empty-cache-every", str(args.empty_cache_every)]
    prefix = [args.vram] + CONDITIONS[condition] if CONDITIONS[condition] else []
    return prefix + a


def run_one(args, condition, log):
    cmd = worker_args(args, condition)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=args.timeout)
    r = last_json_object(p.stdout)
    if p.returncode != 0 or r is None:
        sys.stderr.write("run_overhead: %s failed (exit %d): %s\n%s\n" % (
            condition, p.returncode, " ".join(cmd), "\n".join(p.stderr.splitlines()[-25:])))
        raise SystemExit(1)
    r["condition"] = condition
    r["wall_s"] = round(time.monotonic() - t0, 1)
    if log:
        log.write(json.dumps(r) + "\n")
        log.flush()
    return r


def check_condition(r, card_gib):
    """The condition was in force: PyTorch saw the limit as the card's total under --limit, the card
    itself otherwise. Returns an error string or None."""
    total = r["mem_total_gib"]
    if "limit" in r["condition"]:
        return None if abs(total - LIMIT_GIB) < 0.01 else "%s: PyTorch saw %.3f GiB total, not the %d GiB limit" % (
            r["condition"], total, LIMIT_GIB)
    if card_gib is not None and abs(total - card_gib) > 0.01:
        return "%s: PyTorch saw %.3f GiB total, the card has %.3f" % (r["condition"], total, card_gib)
    return None


def summarize(results, conditions, variants):
    """rows: (variant, condition, best, median of rounds, rounds, overhead best %, overhead median %,
    segment allocs median)."""
    rows = []
    for v in variants:
        stat = STAT[v]
        base = {}
        for c in conditions:
            vals = [r["variants"][v][stat] for r in results if r["condition"] == c and v in r["variants"]]
            segs = [r["variants"][v].get("segment_allocs", 0) for r in results
                    if r["condition"] == c and v in r["variants"]]
            if not vals:
                continue
            best, med = min(vals), statistics.median(vals)
            if c == "plain":
                base = {"best": best, "med": med}
            ob = (best / base["best"] - 1) * 100 if base and c != "plain" else None
            om = (med / base["med"] - 1) * 100 if base and c != "plain" else None
            rows.append({"variant": v, "condition": c, "best": best, "median": med, "rounds": len(vals),
                         "over_best": ob, "over_median": om, "segments": statistics.median(segs)})
    return rows


def verdicts(rows, target=TARGET_PCT):
    """One line per (variant, condition other than plain): PASS when the overhead of the median of
    the rounds is at most the target."""
    out = []
    for r in rows:
        if r["over_median"] is None:
            continue
        ok = r["over_median"] <= target
        out.append((ok, "%s: %s, %s: %+.2f%% (median of %d rounds; best of rounds %+.2f%%) against the %.0f%% target"
                    % ("PASS" if ok else "FAIL", r["variant"], LABEL[r["condition"]], r["over_median"],
                       r["rounds"], r["over_best"], target)))
    return out


def fmt_pct(x):
    return "" if x is None else "%+.2f%%" % x


def table(rows):
    lines = ["| variant | condition | step ms, best of rounds | step ms, median of rounds | overhead vs plain "
             "(best / median) | driver segments per process |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        over = "-" if r["over_median"] is None else "%s / %s" % (fmt_pct(r["over_best"]), fmt_pct(r["over_median"]))
        lines.append("| %s (%s) | %s | %.2f | %.2f | %s | %g |" % (
            r["variant"], "median step" if STAT[r["variant"]] == "median_ms" else "mean step",
            LABEL[r["condition"]], r["best"], r["median"], over, r["segments"]))
    return "\n".join(lines)


def report(results, conditions, variants, meta):
    rows = summarize(results, conditions, variants)
    vs = verdicts(rows)
    head = "## vram run overhead: %s" % meta
    text = "\n".join([head, "", table(rows), ""] + [v[1] for v in vs])
    return text, all(ok for ok, _ in vs)


def driver(args):
    conditions = args.conditions.split(",")
    for c in conditions:
        if c not in CONDITIONS:
            raise SystemExit("run_overhead: unknown condition %r (known: %s)" % (c, ", ".join(CONDITIONS)))
    if "plain" not in conditions:
        conditions.insert(0, "plain")
    if any(CONDITIONS[c] for c in conditions) and not os.access(args.vram, os.X_OK):
        raise SystemExit("run_overhead: no vram binary at %s (build it, or pass --vram)" % args.vram)
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit("run_overhead: unknown variant %r" % v)
    log = open(args.out + ".jsonl", "w") if args.out else None
    results = []
    card_gib = None
    for rnd in range(args.rounds):
        order = conditions[rnd % len(conditions):] + conditions[:rnd % len(conditions)]
        for c in order:
            r = run_one(args, c, log)
            if c == "plain":
                card_gib = r["mem_total_gib"]
            results.append(r)
            print("round %d/%d %-17s %s (%.0f s)" % (
                rnd + 1, args.rounds, c, "  ".join("%s %s %.2f ms" % (v, STAT[v][:-3], r["variants"][v][STAT[v]])
                                                   for v in variants), r["wall_s"]), flush=True)
    errors = [e for e in (check_condition(r, card_gib) for r in results) if e]
    first = results[0]
    meta = "%s, torch %s, %.1fM parameters, batch %d x %d tokens, %d timed steps after %d warmup, %d rounds" % (
        first["device"], first["torch"], first["params_m"], args.batch, args.seq, args.steps, args.warmup,
        args.rounds)
    text, ok = report(results, conditions, variants, meta)
    if errors:
        text += "\n" + "\n".join("ERROR: the condition was not in force: " + e for e in errors)
        ok = False
    print(text, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        log.close()
    if errors:
        return 1
    return 3 if args.strict and not ok else 0


# ---- self-test (no torch, no GPU) ---------------------------------------------------------------------

def self_test():
    def res(cond, fixed, varlen, segs=0):
        return {"condition": cond, "mem_total_gib": 40.0 if "limit" in cond else 139.8,
                "variants": {"fixed": {"median_ms": fixed, "mean_ms": fixed + 5},
                             "varlen": {"median_ms": varlen - 3, "mean_ms": varlen, "segment_allocs": segs}}}
    results = []
    for fixed in ((100.0, 100.2, 100.5), (101.0, 100.9, 101.4), (100.4, 100.6, 100.8)):
        for cond, ms in zip(("plain", "run", "run-limit"), fixed):
            results.append(res(cond, ms, 2 * ms, segs=12 if cond == "run-limit" else 10))
    conds = ["plain", "run", "run-limit"]
    rows = summarize(results, conds, VARIANTS)
    by = {(r["variant"], r["condition"]): r for r in rows}
    assert len(rows) == 6, rows
    p, l = by["fixed", "plain"], by["fixed", "run-limit"]
    assert p["best"] == 100.0 and p["median"] == 100.4 and p["over_median"] is None, p
    assert abs(l["best"] - 100.5) < 1e-9 and abs(l["median"] - 100.8) < 1e-9, l
    assert abs(l["over_best"] - 0.5) < 1e-9 and abs(l["over_median"] - (100.8 / 100.4 - 1) * 100) < 1e-9, l
    v = by["varlen", "run-limit"]
    assert v["median"] == 201.6 and v["segments"] == 12, v   # the mean step (2 x fixed) is compared
    text, ok = report(results, conds, VARIANTS, "test")
    assert ok, text
    assert "| fixed (median step) | vram run --limit 40GiB | 100.50 | 100.80 | +0.50% / +0.40% | 0 |" in text, text
    assert "| fixed (median step) | plain python3 | 100.00 | 100.40 | - | 0 |" in text, text
    assert "| varlen (mean step) | vram run (no limit) | 200.40 | 201.20 |" in text, text
    assert "PASS: fixed, vram run --limit 40GiB: +0.40% (median of 3 rounds; best of rounds +0.50%)" in text, text
    results += [res("run-limit", 103.0, 206.0) for _ in range(4)]   # limit rounds: median 103.0
    text, ok = report(results, conds, VARIANTS, "test")
    assert not ok and "FAIL: fixed, vram run --limit 40GiB: +2.59% (median of 7 rounds" in text, text
    assert "PASS: fixed, vram run (no limit): +0.20%" in text, text
    assert check_condition(res("run-limit", 1, 1), 139.8) is None
    assert "not the 40 GiB limit" in check_condition(dict(res("run-limit", 1, 1), mem_total_gib=139.8), 139.8)
    assert "the card has" in check_condition(dict(res("run", 1, 1), mem_total_gib=40.0), 139.8)
    cmd = worker_args(argparse.Namespace(
        python="python3", steps=30, warmup=10, variants="fixed", batch=16, seq=1024, layers=12, dim=1024,
        heads=16, vocab=32000, empty_cache_every=5, vram="build-run/vram"), "run-limit")
    assert cmd[:6] == ["build-run/vram", "run", "--limit", "40GiB", "--", "python3"], cmd
    assert worker_args(argparse.Namespace(
        python="python3", steps=1, warmup=1, variants="fixed", batch=1, seq=8, layers=1, dim=8, heads=1,
        vocab=8, empty_cache_every=5, vram="v"), "plain")[0] == "python3"
    saved = dict(os.environ)
    try:
        os.environ["LD_PRELOAD"] = "/x/libvram_preload.so:libm.so.6"
        os.environ["VRAM_LIMIT"] = "1"
        env = clean_env()
        assert env["LD_PRELOAD"] == "libm.so.6" and "VRAM_LIMIT" not in env, env
    finally:
        os.environ.clear()
        os.environ.update(saved)
    print("run_overhead self-test: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vram", default="build-run/vram", help="the vram CLI (default build-run/vram)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of every condition, interleaved (5)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per variant and process (30)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (10)")
    ap.add_argument("--out", help="also write the table to FILE and every process's JSON line to FILE.jsonl")
    ap.add_argument("--conditions", default="plain,run,run-limit",
                    help="comma-separated, of: " + ", ".join(CONDITIONS) + " (plain,run,run-limit)")
    ap.add_argument("--variants", default="fixed,varlen", help="fixed, varlen or both (fixed,varlen)")
    ap.add_argument("--python", default=sys.executable, help="the Python of the workers (this one)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds one worker may take (600)")
    ap.add_argument("--strict", action="store_true", help="exit 3 when a verdict fails")
    ap.add_argument("--self-test", action="store_true", help="check the table code (no torch, no GPU)")
    for name, default in (("batch", 16), ("seq", 1024), ("layers", 12), ("dim", 1024), ("heads", 16),
                          ("vocab", 32000), ("empty-cache-every", 5)):
        ap.add_argument("--" + name, type=int, default=default, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--condition", default="plain", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.worker:
        return worker(args)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
