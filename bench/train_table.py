"""bench/train_table.py: bench/train.py's result rows folded into figures, verdicts and Markdown
tables (`--table`, the driver; bench/readme.py takes the README's training figures from here).
Standard library only; no state, no locks.
"""
import statistics

from workloads import DESCRIPTION, WORKLOADS

GIB = float(1 << 30)
ALLOCATORS = ["torch", "torch-expandable", "torch-async", "vram"]
TORCH_ALLOCATORS = ["torch", "torch-expandable", "torch-async"]
LABEL = {
    "torch": "PyTorch caching allocator (default)",
    "torch-expandable": "PyTorch, expandable_segments:True",
    "torch-async": "PyTorch, backend:cudaMallocAsync",
    "vram": "vram (growth, no limit)",
}
# The note under every table: how each column was measured.
COLUMNS = ("The verdict's step time is the pooled figure (when every row has its steps), else the lowest median. "
           "step ms (median): per process the median of the timed steps (torch.cuda.synchronize() before and "
           "after each step, time.perf_counter()); the row shows the lowest of its rounds' medians, with the "
           "range over the rounds in parentheses. vs fastest: against the fastest PyTorch allocator's row. "
           "step ms (mean): the lowest of the rounds' means (for bert_varlen, whose steps differ in shape, the "
           "mean is the time of the same sequence of shapes). peak reserved: the highest over the rounds of what "
           "the allocator held from the driver at its peak (PyTorch: torch.cuda.max_memory_reserved(); "
           "cudaMallocAsync: the pool's cudaMemPoolAttrReservedMemHigh, which torch reports as reserved; vram: "
           "vram_get_memory_info's peak_reserved). device used: cuMemGetInfo's total - free sampled after every "
           "step, minus the value right after CUDA started and before the model was built (the same for every "
           "allocator; includes the CUDA libraries' own memory, e.g. lazily loaded kernels and cuBLAS/cuDNN "
           "state, and misses peaks inside a step).")


def aggregate(rows):
    """Per (workload, allocator): the rounds' results folded. Step times: the lowest of the rounds'
    medians (and means); memory: the highest of the rounds' peaks."""
    groups = {}
    for r in rows:
        groups.setdefault((r.get("workload"), r.get("allocator")), []).append(r)
    agg = {}
    for key, rs in groups.items():
        ok = [r for r in rs if "error" not in r and "skipped" not in r and r.get("step_ms_median") is not None]
        g = {"rounds": len(rs), "ok": len(ok),
             "errors": [r["error"] for r in rs if "error" in r],
             "skipped": next((r["skipped"] for r in rs if "skipped" in r), None)}
        if ok:
            medians = [r["step_ms_median"] for r in ok]
            g.update(median=min(medians), median_lo=min(medians), median_hi=max(medians),
                     mean=min(r.get("step_ms_mean", r["step_ms_median"]) for r in ok),
                     reserved=max(r.get("peak_reserved_bytes") or 0 for r in ok),
                     device_used=max(r.get("device_used_peak_bytes") or 0 for r in ok),
                     reserved_fallback=any(str(r.get("peak_reserved_source", "")).startswith("device_used")
                                           for r in ok),
                     warnings=sorted({r["warning"] for r in ok if r.get("warning")}))
        agg[key] = g
    return agg


def one_line(text):
    return " ".join(str(text).split())


def gib(b):
    return "%.3f" % (b / GIB)


def pct(x):
    return "%+.2f%%" % x


def _ordered(names, order):
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


def step_times(w, agg, allocs, pool):
    """({allocator: step ms} of the rows that finished, what they are): the pooled figures when every
    such row has its step list (pooled_by_shape), else the lowest of the rounds' medians."""
    ok = [a for a in allocs if agg[(w, a)]["ok"]]
    if pool and all(a in pool for a in ok):
        return {a: pool[a] for a in ok}, "pooled"
    return {a: agg[(w, a)]["median"] for a in ok}, "lowest median"


def verdict(w, agg, allocs, pool=None):
    """The verdict line of one workload (None without a vram row)."""
    if "vram" not in allocs:
        return None
    v = agg[(w, "vram")]
    if not v["ok"]:
        return "**verdict**: vram failed (%s)" % (one_line(v["errors"][0]) if v["errors"] else "no result")
    ms, how = step_times(w, agg, allocs, pool)
    torch_ok = [(t, a) for a, t in ms.items() if a in TORCH_ALLOCATORS]
    others = [(agg[(w, a)]["reserved"], a) for a in allocs if a != "vram" and agg[(w, a)]["ok"]]
    if not torch_ok:
        return "**verdict**: no PyTorch allocator finished: nothing to compare vram with"
    fastest_ms, fastest = min(torch_ok)
    d = (ms["vram"] / fastest_ms - 1.0) * 100.0
    if d > 0:
        time_part = "vram step time (%s) %.2f%% slower than the fastest PyTorch allocator (%s, %.2f ms; target " \
                    "within 1%%: %s)" % (how, d, fastest, fastest_ms, "met" if d <= 1.0 else "missed")
    else:
        time_part = "vram step time (%s) %.2f%% faster than the fastest PyTorch allocator (%s, %.2f ms; target " \
                    "within 1%%: met)" % (how, -d, fastest, fastest_ms)
    min_res, min_a = min(others)
    dev_min = min(agg[(w, a)]["device_used"] for _, a in others)
    mem_part = "reserved %s GiB vs min of others %s GiB (%s; target less: %s); device used %s vs %s GiB" % (
        gib(v["reserved"]), gib(min_res), min_a, "met" if v["reserved"] < min_res else "missed",
        gib(v["device_used"]), gib(dev_min))
    return "**verdict**: " + time_part + ", " + mem_part


def paired_by_round(w, rows):
    """vram's median step over the fastest PyTorch allocator's of the same round, per round where both
    ran (the rounds run close in time: the host's slow stretches, which move a round by up to 40% on
    gpt2_generate, hit both), as percentages, or [] when no round has both."""
    by_round = {}
    for r in rows:
        if (r.get("workload") == w and "error" not in r and "skipped" not in r
                and r.get("step_ms_median") is not None):
            by_round.setdefault(r.get("round", 1), {})[r.get("allocator")] = r["step_ms_median"]
    out = []
    for _, m in sorted(by_round.items(), key=lambda kv: kv[0]):
        torch_ms = [v for a, v in m.items() if a in TORCH_ALLOCATORS]
        if "vram" in m and torch_ms:
            out.append((m["vram"] / min(torch_ms) - 1.0) * 100.0)
    return out


def shape_medians(w, rows):
    """Per allocator: its steps pooled over every round, the median of each shape's steps (step i has
    shape i mod distinct_shapes; one shape unless the row says), in shape order. {} without step lists."""
    per = {}
    for r in rows:
        if r.get("workload") != w or "error" in r or "skipped" in r or not r.get("step_ms"):
            continue
        n = max(1, int(r.get("distinct_shapes") or 1))
        for i, t in enumerate(r["step_ms"]):
            per.setdefault(r.get("allocator"), {}).setdefault(i % n, []).append(t)
    return {a: [statistics.median(shapes[k]) for k in sorted(shapes)] for a, shapes in per.items()}


def pooled_by_shape(w, rows):
    """Per allocator: shape_medians averaged over the shapes: the time of one step of each shape,
    robust to a round's slow stretch and to which shape a process's own median lands on
    (bert_varlen's 40 steps are 8 shapes of 23 to 73 ms)."""
    return {a: sum(m) / len(m) for a, m in shape_medians(w, rows).items()}


def targets_met(w, agg, allocs, pool=None):
    """(step time met, memory met) for a workload with vram and at least one PyTorch row, else None."""
    if "vram" not in allocs or not agg[(w, "vram")]["ok"]:
        return None
    v = agg[(w, "vram")]
    ms, _ = step_times(w, agg, allocs, pool)
    torch_ok = [t for a, t in ms.items() if a in TORCH_ALLOCATORS]
    others = [agg[(w, a)]["reserved"] for a in allocs if a != "vram" and agg[(w, a)]["ok"]]
    if not torch_ok:
        return None
    return ms["vram"] <= min(torch_ok) * 1.01, v["reserved"] < min(others)


def _head(meta, rows):
    """The lines above the tables: date, machine, versions, rounds, the command, a fallback mode."""
    out = []
    if meta and not meta.get("gpu"):  # no nvidia-smi: the children's torch.cuda.get_device_name()
        meta = dict(meta, gpu=next((r["gpu"] for r in rows if r.get("gpu")), "?"))
    if meta:
        mem = (", " + meta["memory"]) if meta.get("memory") else ""
        head = "%s, one %s (driver %s%s), PyTorch %s (CUDA %s)" % (
            meta.get("date", "?"), meta.get("gpu", "?"), meta.get("driver", "?"), mem, meta.get("torch", "?"),
            meta.get("cuda", "?"))
        if meta.get("vram_version"):
            head += ", vram %s%s" % (meta["vram_version"], (" at " + meta["commit"]) if meta.get("commit") else "")
        rounds = meta.get("repeat", "?")
        head += "; every row %s process%s (rounds interleaved)" % (rounds, "" if rounds == 1 else "es")
        out += [head + ".", ""]
        if meta.get("command"):
            out += ["Reproduce with `%s`." % meta["command"], ""]
        mode = meta.get("vram_torch_mode") or ({False: "direct"}.get(meta.get("vram_forwarder")))  # (older files)
        if mode in ("forwarder", "direct"):
            out += ["vram.torch's allocator library did not build (%s): PyTorch called vram through "
                    "CUDAPluggableAllocator (vram.torch.mode %s)." % (meta.get("vram_warning", "?"), mode), ""]
    return out


def _rows(w, agg, allocs):
    """(the table of one workload, its notes): a row per allocator, failures with their reasons."""
    torch_ok = [(agg[(w, a)]["median"], a) for a in allocs if a in TORCH_ALLOCATORS and agg[(w, a)]["ok"]]
    all_ok = [(agg[(w, a)]["median"], a) for a in allocs if agg[(w, a)]["ok"]]
    ref = min(torch_ok) if torch_ok else (min(all_ok) if all_ok else None)
    out = ["| allocator | step ms (median) | vs fastest | step ms (mean) | peak reserved GiB | device used GiB |",
           "|---|---|---|---|---|---|"]
    notes = []
    for a in allocs:
        g = agg[(w, a)]
        label = LABEL.get(a, a)
        if not g["ok"]:
            why = g["errors"][0] if g["errors"] else ("skipped: %s" % g["skipped"] if g["skipped"] else "no result")
            out.append("| %s | failed: %s | | | | |" % (label, one_line(why).replace("|", "/")))
            continue
        cell = "%.2f" % g["median"]
        if g["ok"] > 1 and g["median_hi"] > g["median_lo"]:
            cell += " (%.2f–%.2f)" % (g["median_lo"], g["median_hi"])
        if ref is not None and a == ref[1]:
            vs = "**fastest PyTorch**" if a in TORCH_ALLOCATORS else "fastest"
        else:
            vs = pct((g["median"] / ref[0] - 1.0) * 100.0)
        reserved = gib(g["reserved"]) + ("*" if g["reserved_fallback"] else "")
        out.append("| %s | %s | %s | %.2f | %s | %s |" % (label, cell, vs, g["mean"], reserved,
                                                         gib(g["device_used"])))
        if g["ok"] < g["rounds"]:
            notes.append("%s: %d of %d rounds failed: %s" % (a, g["rounds"] - g["ok"], g["rounds"],
                                                             one_line(g["errors"][0]) if g["errors"] else "?"))
        for warning in g["warnings"]:
            notes.append("%s: %s" % (a, warning))
        if g["reserved_fallback"]:
            notes.append("%s: * the pool reported no reserved memory; device used is shown instead" % a)
    out.append("")
    return out, notes


def _figures(w, agg, allocs, rows):
    """The lines under one workload's table: the verdict, paired rounds, pooled and per-shape figures."""
    out = []
    pool = pooled_by_shape(w, rows)
    v = verdict(w, agg, allocs, pool)
    if v:
        out += [v, ""]
    pairs = paired_by_round(w, rows)
    if len(pairs) > 1:
        out += ["paired by round (vram against the fastest PyTorch allocator of the same round): median %s "
                "(rounds: %s)" % (pct(statistics.median(pairs)), ", ".join(pct(x) for x in pairs)), ""]
    torch_pool = [(ms, a) for a, ms in pool.items() if a in TORCH_ALLOCATORS]
    if pool:
        line = "pooled over the rounds (per shape the median of all its steps, averaged over the shapes): " + \
               ", ".join("%s %.2f ms" % (a, pool[a]) for a in _ordered(pool, ALLOCATORS))
        if "vram" in pool and torch_pool:
            ms, a = min(torch_pool)
            line += "; vram against the fastest PyTorch allocator (%s): %s" % (
                a, pct((pool["vram"] / ms - 1.0) * 100.0))
        out += [line, ""]
    shapes = shape_medians(w, rows)
    if any(len(m) > 1 for m in shapes.values()):
        out += ["per shape (pooled medians, ms, in the order the steps take them): " + "; ".join(
            "%s %s" % (a, " / ".join("%.2f" % x for x in shapes[a])) for a in _ordered(shapes, ALLOCATORS)), ""]
    return out


def _workload(w, agg, allocs, rows, meta):
    """(the lines of one workload, (step time met, memory met) or None)."""
    out = ["### %s: %s" % (w, DESCRIPTION.get(w, "")), ""]
    if all(agg[(w, a)]["skipped"] and not agg[(w, a)]["ok"] for a in allocs):
        return out + ["skipped: %s" % agg[(w, allocs[0])]["skipped"], ""], None
    steps = (meta or {}).get("steps", {}).get(w)
    if steps:
        out += ["%s warmup + %s timed steps a process." % (steps["warmup"], steps["steps"]), ""]
    table, notes = _rows(w, agg, allocs)
    out += table + _figures(w, agg, allocs, rows)
    out += ["- " + n for n in notes]
    if notes:
        out.append("")
    return out, targets_met(w, agg, allocs, pooled_by_shape(w, rows))


def render(meta, rows):
    """The tables of a results file (its meta line and rows) as Markdown."""
    agg = aggregate(rows)
    out = _head(meta, rows)
    met = []
    for w in _ordered({r.get("workload") for r in rows}, WORKLOADS):
        lines, t = _workload(w, agg, _ordered({a for (ww, a) in agg if ww == w}, ALLOCATORS), rows, meta)
        out += lines
        if t is not None:
            met.append((w, t))
    if met:
        out.append("vram met the step-time target (within 1%% of the fastest PyTorch allocator) on %d of %d "
                   "workloads and the memory target (less peak reserved than every other allocator) on %d of %d." % (
                       sum(1 for _, t in met if t[0]), len(met), sum(1 for _, t in met if t[1]), len(met)))
        out.append("")
    out += [COLUMNS, ""]
    return "\n".join(out)
