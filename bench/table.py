#!/usr/bin/env python3
"""bench/table.py: the benchmark's JSON lines in, Markdown tables out (standard library only).

  table.py tag --allocator NAME --trace PATH --rc N [--stderr FILE] < one command's stdout
      prints one JSON line: the last JSON object the command printed, with "allocator" and "trace"
      set; or, when it printed none, {"allocator", "trace", "error"} with the exit status and the
      last line of its stderr.
  table.py meta KEY=VALUE ...
      prints {"meta": {KEY: VALUE, ...}}: the date, GPU, driver, ... for the table's heading.
  table.py table RESULTS.jsonl
      prints one Markdown table per trace: allocator | reserved/live | cold ns/op | warm ns/op |
      driver calls.
  table.py limit-for --trace PATH --fraction F [--vram-json FILE] [--append FILE]
      prints the limit for a trace under which its peak live bytes are the fraction F of it:
      ceil(peak live / F), exactly (F as written: 0.95 or 19/20, no float). Peak live and the trace's
      allocations per pass come from FILE, the output of `vram replay TRACE --passes 1 --json`, or,
      when it has none, from the trace itself. With --append, adds {"limit": {"trace",
      "peak_live_bytes", "trace_allocs", "fraction", "limit_bytes", "source"}} to FILE (bench/limit.sh).
  table.py limit LIMIT.jsonl
      prints the table of bench/limit.sh: per trace and allocator, the failed allocations (of how
      many), reserved/live and the first error, under the trace's limit.
  table.py bisect-grid --trace PATH --lo LO --hi HI --step STEP [--vram-json FILE] [--append FILE]
      prints the fractions bench/limit.sh's bisection may probe, one "FRACTION LIMIT" line each: LO,
      LO + STEP, ... and HI last (decimals, exact), each with its limit ceil(peak live / FRACTION);
      peak live as limit-for finds it. With --append, adds {"limit": {"trace", "peak_live_bytes",
      "trace_allocs", "bisect": {"lo", "hi", "step"}, "source"}} to FILE.
  table.py probe < one tagged JSON line
      prints ok (the replay ran and no allocation failed), fail (it ran and some failed under the
      limit), full (it ran and its first failure was the card itself out of memory, not the limit:
      the driver refused, another process held the card) or error (it did not run: the line has
      "error").
  table.py bisect RESULTS.jsonl
      prints the table of bench/limit.sh's bisection (BENCH_BISECT=1): per trace, per allocator, the
      smallest limit at which every pass completed, as limit / peak live, and the smallest allocator.
  table.py self-test
      checks the logic above on made-up rows (CI runs it).

Rows come from `vram replay --json` (keys cold_ns_per_op / warm_ns_per_op, or ns_per_op from a vram
without --passes; driver_allocs + driver_frees + driver_moves: pieces created, released, moved) and
from bench/peers (driver_calls; null where the
allocator does not let them be observed).
"""
import argparse
import decimal
import fractions
import json
import math
import os
import re
import sys
import tempfile

ORDER = [
    "vram prealloc", "vram growth", "vram growth-hold", "vram growth-keep", "vram growth-lean", "vram growth-plain",
    "cumemalloc", "cumemallocasync", "torch", "torch-expandable", "host",
]
LABEL = {
    "vram prealloc": "vram, preallocated (default)",
    "vram growth": "vram, growth (VMM)",
    "vram growth-hold": "vram, growth moving idle memory under large blocks",
    "vram growth-keep": "vram, growth never moving idle memory under large blocks (hold_large_mb:0)",  # results before 2026-11-29 late
    "vram growth-lean": "vram, growth holding its peak (hold_peak, 64 MiB extents)",
    "vram growth-plain": "vram, growth without VMM",
    "vram growth-shared": "vram, growth with every thread in one arena",
    "cumemalloc": "cuMemAlloc / cuMemFree per call",
    "cumemallocasync": "cuMemAllocAsync, release threshold max",
    "torch": "PyTorch caching allocator (native)",
    "torch-expandable": "PyTorch, expandable_segments:True",
    "host": "host malloc / free (loop floor)",
}


def last_json_object(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def cmd_tag(args):
    obj = last_json_object(sys.stdin.read())
    if obj is None or args.rc != 0:
        err = ""
        if args.stderr and os.path.exists(args.stderr):
            with open(args.stderr, errors="replace") as f:
                lines = [l.strip() for l in f if l.strip()]
            err = lines[-1] if lines else ""
        obj = {"error": "exit status %d%s" % (args.rc, ": " + err if err else "")}
    obj["allocator"] = args.allocator
    obj["trace"] = args.trace
    if args.run is not None:
        obj["run"] = args.run
    if args.fraction is not None:                # a bisection's probe (bench/limit.sh, BENCH_BISECT=1)
        obj["bisect_fraction"] = args.fraction
    if args.limit is not None:
        obj["bisect_limit_bytes"] = args.limit
    print(json.dumps(obj))


def cmd_meta(args):
    meta = {}
    for kv in args.pairs:
        k, _, v = kv.partition("=")
        meta[k] = v
    print(json.dumps({"meta": meta}))


def trace_name(path):
    base = os.path.basename(path or "?")
    for suffix in (".gz", ".trace", ".txt"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def fmt_int(v):
    return "{:,}".format(int(v))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def ns_cell(values):
    """Median of the runs, with their range when there are several."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return "n/a"
    cell = "{:,.1f}".format(median(values))
    if len(values) > 1:
        cell += " ({:,.0f}–{:,.0f})".format(min(values), max(values))
    return cell


def same_or_range(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return None
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else fmt(lo) + "–" + fmt(hi)


def driver_calls(r):
    if "driver_calls" in r:
        return r["driver_calls"]
    if "driver_allocs" in r and "driver_frees" in r:
        return r["driver_allocs"] + r["driver_frees"] + r.get("driver_moves", 0)
    return None


def row_cells(runs):
    """The cells of one allocator on one trace, over its runs (error rows dropped by the caller)."""
    ratio = same_or_range([r.get("reserved_to_live") for r in runs], lambda v: "%.3f" % float(v)) or "n/a"
    cold = ns_cell([r.get("cold_ns_per_op", r.get("ns_per_op")) for r in runs])
    warm = ns_cell([r.get("warm_ns_per_op") for r in runs])
    if warm == "n/a" and any("cold_ns_per_op" not in r and "ns_per_op" in r for r in runs):
        warm = "n/a (no --passes)"
    calls = same_or_range([driver_calls(r) for r in runs], fmt_int)
    if calls is None:
        calls = "n/a (not observable)" if any("driver_calls" in r for r in runs) else "n/a"
    return [ratio, cold, warm, calls]


def load_results(path):
    """A results file's {"meta": ...} lines merged, and its other JSON lines as rows."""
    meta, rows = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if "meta" in obj:
                meta.update(obj["meta"])
            else:
                rows.append(obj)
    return meta, rows


def paired(group, a, b, key):
    """a's figure over b's, one ratio per run number where both ran (rows of one run are close in
    time, so the host's slow and fast stretches cancel), median first, then every run's."""
    by_run = {}
    for r in group:
        if "error" not in r and r.get(key) is not None and r.get("allocator") in (a, b):
            by_run.setdefault(r.get("run", 1), {})[r["allocator"]] = float(r[key])
    ratios = [v[a] / v[b] for _, v in sorted(by_run.items()) if a in v and b in v and v[b] > 0]
    return (median(ratios), ratios) if ratios else (None, [])


def paired_lines(group):
    """The issue's two comparisons of one trace, as paired ratios over the runs."""
    lines = []
    for a, b, key, what, target in (
            ("vram growth", "vram prealloc", "warm_ns_per_op", "growth warm / preallocated warm", "<= 1.05"),
            ("vram growth", "torch", "cold_ns_per_op", "growth cold / PyTorch (native) cold", "<= 0.50")):
        m, ratios = paired(group, a, b, key)
        if m is not None:
            lines.append("- %s: %.3f (target %s; runs: %s)" % (what, m, target,
                                                              ", ".join("%.3f" % x for x in ratios)))
    others = sorted({r.get("allocator") for r in group if str(r.get("allocator", "")).startswith("vram growth")} -
                    {"vram growth"})
    for a in others:                            # the other growth rows' cold passes, paired the same way
        m, ratios = paired(group, a, "torch", "cold_ns_per_op")
        if m is not None:
            lines.append("- %s cold / PyTorch (native) cold: %.3f (runs: %s)" % (a, m, ", ".join("%.3f" % x
                                                                                            for x in ratios)))
    return lines + [""] if lines else []


def meta_lines(meta, what):
    """The lines that head a table: date, machine and software, `what` was run, the commit, the
    command that reproduces it."""
    parts = ["driver " + meta.get("driver", "?")]
    if meta.get("memory"):
        parts.append(meta["memory"])
    if meta.get("cuda"):
        parts.append("CUDA " + meta["cuda"])
    line = "%s, one %s (%s), PyTorch %s; %s" % (meta.get("date", "?"), meta.get("gpu", "?"), ", ".join(parts),
                                                meta.get("torch", "?"), what)
    if meta.get("commit") and meta["commit"] != "unknown":
        line += "; vram at %s" % meta["commit"]
    out = [line + "."]
    if meta.get("command"):
        out.append("Reproduce with `%s`." % meta["command"])
    return out + [""]


def cmd_table(args):
    meta, rows = load_results(args.results)

    out = []
    if meta:
        what = "%s passes per replay (pass 1 cold, the rest warm)" % meta.get("passes", "?")
        if meta.get("repeat") and meta["repeat"] != "1":
            what += ", every replay run %s times in its own process: ns/op is the median " \
                    "(min–max) of the runs" % meta["repeat"]
        out += meta_lines(meta, what)

    traces = []
    for r in rows:
        name = trace_name(r.get("trace"))
        if name not in traces:
            traces.append(name)
    for name in traces:
        group = [r for r in rows if trace_name(r.get("trace")) == name]
        allocators = []
        for r in group:
            if r.get("allocator") not in allocators:
                allocators.append(r.get("allocator"))
        allocators.sort(key=lambda a: ORDER.index(a) if a in ORDER else len(ORDER))
        ok = [r for r in group if "error" not in r]
        head = "### " + name
        if ok:
            events = ok[0].get("trace_events", ok[0].get("ops"))
            live = ok[0].get("peak_live_bytes")
            bits = []
            if events is not None:
                bits.append("%s alloc/free events a pass" % fmt_int(events))
            if live is not None:
                bits.append("peak live %s bytes" % fmt_int(live))
            if bits:
                head += " (" + ", ".join(bits) + ")"
        out += [head, "", "| allocator | reserved/live | cold ns/op | warm ns/op | driver calls |",
                "|---|---|---|---|---|"]
        for a in allocators:
            runs = [r for r in group if r.get("allocator") == a]
            good = [r for r in runs if "error" not in r]
            bad = [r for r in runs if "error" in r]
            label = LABEL.get(a, a or "?")
            confs = sorted({c for r in good for c in (r.get("policy_alloc_conf"), r.get("env_alloc_conf"))
                            if c and a != "vram growth " + c})   # (BENCH_CONFS rows name theirs already)
            if confs:                           # (rows of vram replay since bfe31bd say what they ran)
                label += " (" + ", ".join(confs) + ")"
            failed = max([r.get("failed_allocs") or 0 for r in good] or [0])
            if failed:
                label += " (%s failed allocs)" % fmt_int(failed)
            if not good:
                cells = ["failed", "", "", bad[0]["error"].replace("|", "\\|")]
            else:
                cells = row_cells(good)
                if bad:
                    label += " (%d of %d runs failed: %s)" % (len(bad), len(runs),
                                                             bad[0]["error"].replace("|", "\\|"))
            out.append("| " + " | ".join([label] + cells) + " |")
        out.append("")
        out += paired_lines(group)
    out.append("reserved/live: peak bytes held from the driver / peak bytes the trace had live (1.000 is "
               "perfect). cold: pass 1 from an empty pool, driver calls included; warm: the later passes. "
               "ns/op: the pass loop's wall time over its alloc + free calls. driver calls: allocation + "
               "free calls to the driver over the whole run (all passes; vram's preallocation is its 1). "
               "The ratios under a table pair the rows of the same run (replayed one after the other) and "
               "give the median over the runs: the host has slow and fast stretches of minutes that move "
               "whole processes by up to 1.7x, which a ratio of medians taken at different times would keep.")
    print("\n".join(out))


# ---- bench/limit.sh --------------------------------------------------------------------------------

def trace_peak_live(path):
    """(peak live bytes, allocations) of one pass over a trace file, from tools/record_trace.py's checker
    (traces/README.md's format; a malformed trace raises ValueError)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tools"))
    import record_trace                              # (imports no torch until it records)
    try:
        counts = record_trace.check_trace(path)
    except record_trace.TraceError as e:
        raise ValueError(str(e)) from None
    return counts["peak_live_bytes"], counts["allocs"]


def limit_for(peak, fraction):
    """ceil(peak / fraction), exactly: 0 < fraction <= 1, a decimal string ("0.95") or a ratio ("19/20")."""
    f = fractions.Fraction(fraction)
    if not 0 < f <= 1:
        raise ValueError("the fraction must be above 0 and at most 1, not %s" % fraction)
    return math.ceil(fractions.Fraction(peak) / f)


def find_peak(args, what):
    """(peak live, allocations of one pass, where they came from) for limit-for and bisect-grid."""
    peak = allocs = None
    source = "the trace"
    if args.vram_json and os.path.exists(args.vram_json):
        with open(args.vram_json, errors="replace") as f:
            obj = last_json_object(f.read())
        if obj and isinstance(obj.get("peak_live_bytes"), int) and obj.get("threads", 1) == 1:
            peak = obj["peak_live_bytes"]
            if obj.get("passes") == 1 and isinstance(obj.get("allocs"), int):
                allocs = obj["allocs"]
            source = "vram replay --passes 1 --json (backend %s)" % obj.get("backend", "?")
    if peak is None or allocs is None:
        try:
            peak_t, allocs_t = trace_peak_live(args.trace)
        except (OSError, ValueError, EOFError) as e:
            sys.exit("table.py %s: %s" % (what, e))
        peak = peak_t if peak is None else peak
        allocs = allocs_t if allocs is None else allocs
    return peak, allocs, source


def cmd_limit_for(args):
    peak, allocs, source = find_peak(args, "limit-for")
    try:
        limit = limit_for(peak, args.fraction)
    except (ValueError, ZeroDivisionError) as e:
        sys.exit("table.py limit-for: --fraction %s: %s" % (args.fraction, e))
    if args.append:
        with open(args.append, "a") as f:
            f.write(json.dumps({"limit": {"trace": args.trace, "peak_live_bytes": peak, "trace_allocs": allocs,
                                          "fraction": args.fraction, "limit_bytes": limit, "source": source}}) + "\n")
    print(limit)


def shorten(text, n=140):
    text = " ".join(str(text).split())
    if len(text) > n:
        text = text[: n - 1].rstrip() + "…"
    return text.replace("|", "\\|")


def limit_cells(r, rec):
    """failed allocations (of how many) | reserved/live | first error, for one process's row."""
    if "error" in r:
        return ["did not run", "", shorten(r["error"])]
    failed = r.get("failed_allocs")
    total = r.get("allocs")  # vram: every allocation tried, over all passes
    if total is None and rec and rec.get("trace_allocs") is not None and r.get("passes") is not None:
        total = rec["trace_allocs"] * r["passes"]
    cell = "n/a" if failed is None else fmt_int(failed)
    if failed is not None and total is not None:
        cell += " of " + fmt_int(total)
    ratio = r.get("reserved_to_live")
    ratio = "n/a" if ratio is None else "%.3f" % float(ratio)
    reserved, limit = r.get("peak_reserved_bytes"), r.get("limit_bytes")
    if reserved is not None and limit is not None and reserved > limit:
        ratio += " (peak above the limit)"
    err = r.get("first_error")
    return [cell, ratio, shorten(err) if err else "–"]


def limit_completed(rows):
    """{allocator: [traces it completed without a failed allocation, traces where it ran]} of
    bench/limit.sh's rows (the {"limit": ...} lines left out by the caller)."""
    completed = {}
    for r in rows:
        if "error" not in r and r.get("failed_allocs") is not None:
            c = completed.setdefault(r.get("allocator"), [0, 0])
            c[1] += 1
            c[0] += r["failed_allocs"] == 0
    return completed


def cmd_limit(args):
    meta, rows = load_results(args.results)
    limits = {}
    for r in rows:
        if "limit" in r:
            limits[trace_name(r["limit"].get("trace"))] = r["limit"]
    rows = [r for r in rows if "limit" not in r]

    out = []
    if meta:
        out += meta_lines(meta, "every trace replayed under a limit of ceil(peak live / %s) bytes, %s passes "
                                "in one process per allocator" % (meta.get("fraction", "?"), meta.get("passes", "?")))

    traces = list(limits)
    for r in rows:
        if trace_name(r.get("trace")) not in traces:
            traces.append(trace_name(r.get("trace")))
    out += ["| trace | limit (peak live / limit) | allocator | failed allocations | reserved/live | first error |",
            "|---|---|---|---|---|---|"]
    for name in traces:
        rec = limits.get(name)
        group = [r for r in rows if trace_name(r.get("trace")) == name]
        group.sort(key=lambda r: ORDER.index(r.get("allocator")) if r.get("allocator") in ORDER else len(ORDER))
        if rec:
            limit_cell = "%s (%.3f)" % (fmt_int(rec["limit_bytes"]), rec["peak_live_bytes"] / rec["limit_bytes"])
        else:
            limit_cell = "?"
        if not group:
            out.append("| %s | %s | | | | no rows |" % (name, limit_cell))
        for i, r in enumerate(group):
            a = r.get("allocator")
            label = LABEL.get(a, a or "?")
            if r.get("backend") not in (None, "cuda"):
                label += " (%s backend, not the GPU)" % r["backend"]
            first = [name, limit_cell] if i == 0 else ["", ""]
            out.append("| " + " | ".join(first + [label] + limit_cells(r, rec)) + " |")
    out.append("")
    completed = limit_completed(rows)
    if completed:
        out.append("Completed without a failed allocation: " + "; ".join(
            "%s on %d of %d traces" % (LABEL.get(a, a), c[0], c[1])
            for a, c in sorted(completed.items(),
                               key=lambda kv: ORDER.index(kv[0]) if kv[0] in ORDER else len(ORDER))) + ".")
        out.append("")
    out.append("limit: ceil(peak live / fraction) bytes, the same for every allocator; peak live is the most "
               "bytes the trace has live at once (requested sizes). failed allocations: refused by the "
               "allocator under the limit (out of memory), over all passes. reserved/live: the most held "
               "from the driver / peak live. What the limit caps: vram `replay --limit` (the card capped, "
               "growth policy); cuMemAlloc: the device's used bytes (cuMemGetInfo) above their value before "
               "the replay, checked after every allocation; cuMemAllocAsync: the pool's reserved bytes, "
               "checked after every allocation, the pool trimmed when over (its peak may pass the limit "
               "for a moment before the trim); PyTorch: setMemoryFraction, reserved segments; host: live "
               "bytes (a perfect allocator).")
    print("\n".join(out))


# ---- bench/limit.sh's bisection (BENCH_BISECT=1) --------------------------------------------------

def bisect_grid(lo, hi, step):
    """The fractions a bisection may probe: lo, lo + step, ... below hi, then hi (decimal strings, exact)."""
    try:
        a, b, d = decimal.Decimal(lo), decimal.Decimal(hi), decimal.Decimal(step)
    except decimal.InvalidOperation:
        raise ValueError("LO, HI and STEP are decimals (0.90, 1.0, 0.0025), not %s, %s, %s" % (lo, hi, step))
    if not (0 < a < b <= 1 and d > 0):
        raise ValueError("0 < LO < HI <= 1 and STEP > 0, not LO %s, HI %s, STEP %s" % (lo, hi, step))
    k = int(((b - a) / d).to_integral_value(rounding=decimal.ROUND_CEILING))
    if k > 100000:
        raise ValueError("(HI - LO) / STEP is %d steps; at most 100000" % k)
    grid = [a + i * d for i in range(k)] + [b]
    return ["{:f}".format(x) for x in grid]


def cmd_bisect_grid(args):
    peak, allocs, source = find_peak(args, "bisect-grid")
    try:
        grid = bisect_grid(args.lo, args.hi, args.step)
    except ValueError as e:
        sys.exit("table.py bisect-grid: %s" % e)
    if args.append:
        with open(args.append, "a") as f:
            f.write(json.dumps({"limit": {"trace": args.trace, "peak_live_bytes": peak, "trace_allocs": allocs,
                                          "bisect": {"lo": args.lo, "hi": args.hi, "step": args.step},
                                          "source": source}}) + "\n")
    for x in grid:
        print(x, limit_for(peak, x))


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
TORCH_OOM = re.compile(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB)\. GPU \d+ has a total capacity of [0-9.]+ "
                       r"(?:B|KiB|MiB|GiB) of which ([0-9.]+) (B|KiB|MiB|GiB) is free")


def card_full(err):
    """Whether a failed allocation's message says that the card itself had no memory for it (the driver
    refused: another process held it), not that the allocator's limit was reached: vram's "the card
    itself is full"; bench/peers' cuMemAlloc and cuMemAllocAsync rows name the driver's
    CUDA_ERROR_OUT_OF_MEMORY (their limits say "over the limit"); PyTorch's message is the same for
    both, but under its limit the card has more free than was asked for, and when full less."""
    if not err:
        return False
    if "the card itself is full" in err or "CUDA_ERROR_OUT_OF_MEMORY" in err:
        return True
    m = TORCH_OOM.search(err)
    return bool(m) and float(m.group(3)) * UNITS[m.group(4)] < float(m.group(1)) * UNITS[m.group(2)]


def probe_outcome(r):
    """ok: the replay ran and every allocation succeeded; fail: it ran and some failed under the limit;
    full: it ran and its first failure was the card itself out of memory (card_full); error: it did not
    run."""
    if r is None or "error" in r or not isinstance(r.get("failed_allocs"), int):
        return "error"
    if r["failed_allocs"] == 0:
        return "ok"
    return "full" if card_full(r.get("first_error")) else "fail"


def cmd_probe(args):
    print(probe_outcome(last_json_object(sys.stdin.read())))


def bisect_cell(probes, rec):
    """(cell, ratio or None) of one allocator on one trace: the smallest limit it completed under, as
    limit / peak live, from its probes (the largest fraction that completed)."""
    full = next((r for r in probes if probe_outcome(r) == "full"), None)
    if full:                                   # the bisection stopped there: what it found is not the limit's
        return "not measured (the card itself full at %s)" % full["bisect_fraction"], None
    ran = [r for r in probes if probe_outcome(r) in ("ok", "fail")]
    if not ran:
        err = next((r.get("error") for r in probes if r.get("error")), "no probe")
        return "did not run (%s)" % shorten(err, 60), None
    frac = lambda r: fractions.Fraction(r["bisect_fraction"])
    ok = [r for r in ran if probe_outcome(r) == "ok"]
    b = rec.get("bisect", {}) if rec else {}
    if not ok:
        lo = min(frac(r) for r in ran)
        return "> %.4f (fails at %s)" % (1 / lo, b.get("lo", "%.4f" % float(lo))), None
    best = max(ok, key=frac)
    peak = rec["peak_live_bytes"] if rec else best.get("peak_live_bytes")
    limit = best.get("bisect_limit_bytes") or limit_for(peak, best["bisect_fraction"])
    ratio = limit / peak
    above = [frac(r) for r in ran if probe_outcome(r) == "fail" and frac(r) > frac(best)]
    if not above:
        return "%.4f (completes at %s)" % (ratio, best["bisect_fraction"]), ratio
    return "%.4f" % ratio, ratio


LOG_LINE = re.compile(r"^== (?P<alloc>.+?): (?P<trace>\S+): (?:completes at (?P<ok>[0-9.]+)(?:, fails at (?P<fail>[0-9.]+))?"
                      r"|fails at (?P<lo>[0-9.]+))\s*$")


def log_probes(path):
    """Probe rows from bench/limit.sh's log lines "== ALLOC: TRACE: completes at F, fails at G" (or
    "completes at F", "fails at LO"): for a bisection whose results file lacks its rows (stopped before
    writing them)."""
    rows = []
    with open(path) as f:
        for line in f:
            m = LOG_LINE.match(line.strip())
            if not m:
                continue
            base = {"allocator": m["alloc"], "trace": m["trace"]}
            for frac, failed in ((m["ok"], 0), (m["fail"], 1), (m["lo"], 1)):
                if frac is not None:
                    rows.append(dict(base, bisect_fraction=frac, failed_allocs=failed))
    return rows


def bisect_results(path, log=None):
    """(meta, {"lo", "hi", "step"} of the grid, {trace: its {"limit": ...} record}, traces, allocators,
    {(trace, allocator): (cell, ratio or None)}, backends other than the GPU) of bench/limit.sh's
    bisection: the results file's rows, with the probes of its log's "completes at / fails at" lines
    that the file lacks."""
    meta, rows = load_results(path)
    if log:
        have = {(trace_name(r.get("trace")), r.get("allocator")) for r in rows if "bisect_fraction" in r}
        rows += [r for r in log_probes(log) if (trace_name(r["trace"]), r["allocator"]) not in have]
    limits = {trace_name(r["limit"].get("trace")): r["limit"] for r in rows if "limit" in r}
    probes = [r for r in rows if "limit" not in r and "bisect_fraction" in r]
    traces = list(limits)
    allocs = []
    for r in probes:
        if trace_name(r.get("trace")) not in traces:
            traces.append(trace_name(r.get("trace")))
        if r.get("allocator") not in allocs:
            allocs.append(r.get("allocator"))
    allocs.sort(key=lambda a: ORDER.index(a) if a in ORDER else len(ORDER))
    cells = {}
    for name in traces:
        for a in allocs:
            group = [r for r in probes if trace_name(r.get("trace")) == name and r.get("allocator") == a]
            cells[(name, a)] = bisect_cell(group, limits.get(name)) if group else ("–", None)
    b = next((l["bisect"] for l in limits.values() if l.get("bisect")), {})
    backends = sorted({r["backend"] for r in probes if r.get("backend") not in (None, "cuda")})
    return meta, b, limits, traces, allocs, cells, backends


def cmd_bisect(args):
    meta, b, limits, traces, allocs, cells, backends = bisect_results(args.results, getattr(args, "log", None))
    out = []
    if meta:
        out += meta_lines(meta, "per trace and allocator, the largest fraction F = peak live / limit in [%s, %s] "
                                "(to %s) under which %s passes complete with no failed allocation, found by "
                                "bisection, each probe in its own process" % (
                                    b.get("lo", "?"), b.get("hi", "?"), b.get("step", "?"), meta.get("passes", "?")))
    labels = [LABEL.get(a, a or "?") for a in allocs]
    out += ["| trace | peak live | " + " | ".join(labels) + " | smallest |",
            "|---|---|" + "---|" * len(allocs) + "---|"]
    for name in traces:
        rec = limits.get(name)
        ratios = {a: cells[(name, a)][1] for a in allocs if cells[(name, a)][1] is not None}
        best = min(ratios.values()) if ratios else None
        smallest = ", ".join(LABEL.get(a, a) for a in allocs if a in ratios and ratios[a] == best) or "–"
        peak = fmt_int(rec["peak_live_bytes"]) if rec else "?"
        out.append("| %s | %s | %s | %s |" % (name, peak, " | ".join(cells[(name, a)][0] for a in allocs), smallest))
    out.append("")
    out.append("Each cell: the smallest limit under which the allocator completed every pass, as limit / peak live "
               "(limit = ceil(peak live / F) bytes, F the largest fraction of the bisection's grid that completed; "
               "the next fraction up failed, unless the cell says it completes at the top). \"> X (fails at LO)\": "
               "it failed even at the lowest fraction, so its smallest limit is above X = 1 / LO. The bisection "
               "assumes that a larger limit never fails where a smaller one completed.%s" % (
                   " Backends other than the GPU: %s." % ", ".join(backends) if backends else ""))
    print("\n".join(out))


def cmd_self_test(args):
    """The tables' logic on made-up rows (no GPU): paired ratios, the limit and its table."""
    import contextlib
    import io
    import tempfile

    def check(cond, what):
        if not cond:
            raise AssertionError("self-test: " + what)

    def printed(fn, lines):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("".join(json.dumps(x) + "\n" for x in lines))
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                fn(argparse.Namespace(results=f.name))
        finally:
            os.unlink(f.name)
        return out.getvalue()

    n = 0
    check(limit_for(13594206920, "0.95") == 14309691495, "limit of gpt2_train at 0.95"); n += 1
    check(limit_for(19, "19/20") == 20 and limit_for(20, "1") == 20, "limit as a ratio, and at 1"); n += 1
    for bad in ("0", "1.5", "-0.5"):
        try:
            limit_for(100, bad)
            check(False, "fraction %s refused" % bad)
        except ValueError:
            n += 1
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write("# gpumem-trace v1\na 1 100 0 0\na 2 300 0 1\nf 1 2\na 3 250 0 3\nf 2 4\nf 3 5\n")
    try:
        check(trace_peak_live(f.name) == (550, 3), "peak live of a small trace"); n += 1
    finally:
        os.unlink(f.name)

    def row(alloc, run, cold, warm, **kw):
        r = {"allocator": alloc, "trace": "traces/t.trace.gz", "run": run, "cold_ns_per_op": cold,
             "warm_ns_per_op": warm, "reserved_to_live": 1.05, "trace_events": 10, "peak_live_bytes": 1000}
        r.update(kw)
        return r
    rows = [{"meta": {"date": "2026-12-01", "gpu": "Fake", "passes": "11", "repeat": "3", "commit": "abc",
                      "command": "bash bench/run.sh"}},
            row("vram prealloc", 1, 100, 100), row("vram growth", 1, 300, 103), row("torch", 1, 1000, 400),
            row("vram prealloc", 2, 150, 160), row("vram growth", 2, 450, 168), row("torch", 2, 1200, 500),
            row("vram prealloc", 3, 100, 70), row("vram growth", 3, 200, 140), row("torch", 3, 900, 380),
            row("vram growth-hold", 1, 500, 100, policy_alloc_conf="hold_large_mb:256,extent_mb:256"),
            row("vram growth-hold", 2, 600, 100, policy_alloc_conf="hold_large_mb:256,extent_mb:256"),
            row("vram growth hold_peak:true,extent_mb:32", 1, 700, 100, env_alloc_conf="hold_peak:true,extent_mb:32")]
    t = printed(cmd_table, rows)
    check("- vram growth-hold cold / PyTorch (native) cold: 0.500 (runs: 0.500, 0.500)" in t,
          "another growth row's paired cold ratio: " + t); n += 1
    check("| vram, growth moving idle memory under large blocks (hold_large_mb:256,extent_mb:256) |" in t,
          "a row's options in its label"); n += 1
    check("| vram growth hold_peak:true,extent_mb:32 | 1.050 |" in t, "a BENCH_CONFS row named once: " + t); n += 1
    check("- vram growth hold_peak:true,extent_mb:32 cold / PyTorch (native) cold: 0.700 (runs: 0.700)" in t,
          "a BENCH_CONFS row's paired cold ratio"); n += 1
    check("growth warm / preallocated warm: 1.050 (target <= 1.05; runs: 1.030, 1.050, 2.000)" in t,
          "paired warm ratio: " + t); n += 1
    check("growth cold / PyTorch (native) cold: 0.300 (target <= 0.50; runs: 0.300, 0.375, 0.222)" in t,
          "paired cold ratio"); n += 1
    check("| vram, growth (VMM) | 1.050 | 300.0 (200–450) | 140.0 (103–168) |" in t, "median cells"); n += 1
    check("vram at abc" in t and "Reproduce with `bash bench/run.sh`." in t, "heading"); n += 1

    lim = [{"meta": {"date": "2026-12-01", "gpu": "Fake", "passes": "2", "fraction": "0.95"}},
           {"limit": {"trace": "traces/t.trace.gz", "peak_live_bytes": 950, "trace_allocs": 5, "fraction": "0.95",
                      "limit_bytes": 1000, "source": "the trace"}},
           {"allocator": "vram growth", "trace": "traces/t.trace.gz", "failed_allocs": 0, "allocs": 10,
            "reserved_to_live": 1.02, "peak_reserved_bytes": 969, "limit_bytes": 1000, "passes": 2},
           {"allocator": "torch", "trace": "traces/t.trace.gz", "failed_allocs": 3, "passes": 2,
            "reserved_to_live": 1.1, "peak_reserved_bytes": 1045, "limit_bytes": 1000,
            "first_error": "raw_alloc(64): CUDA out of memory | x"},
           {"allocator": "cumemalloc", "trace": "traces/t.trace.gz", "error": "exit status 1: no GPU"}]
    t = printed(cmd_limit, lim)
    check("0 of 10 | 1.020 | – |" in t, "vram limit row: " + t); n += 1
    check("3 of 10 | 1.100 (peak above the limit) | raw_alloc(64): CUDA out of memory \\| x |" in t,
          "peer limit row (allocations from the trace x passes, the peak above the limit, | escaped)"); n += 1
    check("did not run |  | exit status 1: no GPU |" in t, "a row that did not run"); n += 1
    check("on 1 of 1 traces" in t and "on 0 of 1 traces" in t, "summary line"); n += 1

    g = bisect_grid("0.90", "1.0", "0.0025")
    check(len(g) == 41 and g[0] == "0.9000" and g[1] == "0.9025" and g[-2] == "0.9975" and g[-1] == "1.0",
          "the bisection's grid: " + repr(g[:2] + g[-2:])); n += 1
    check(bisect_grid("0.5", "0.6", "0.03") == ["0.50", "0.53", "0.56", "0.59", "0.6"], "a grid whose step does "
          "not divide HI - LO ends at HI"); n += 1
    for lo, hi, step in (("1.0", "0.9", "0.01"), ("0.9", "1.5", "0.01"), ("0.9", "1.0", "0"), ("19/20", "1", "0.01")):
        try:
            bisect_grid(lo, hi, step)
            check(False, "grid %s %s %s refused" % (lo, hi, step))
        except ValueError:
            n += 1
    check([probe_outcome(x) for x in ({"failed_allocs": 0}, {"failed_allocs": 2}, {"error": "exit status 1"},
                                       {"failed_allocs": 0, "error": "exit status 124"}, None)] ==
          ["ok", "fail", "error", "error", "error"], "probe outcomes"); n += 1
    # first errors of probes on an H100 (bench/limit.sh BENCH_BISECT=1 BENCH_JOBS=8, 2026-12-06): under the
    # limit, then with the card itself full of the other probes' memory, one pair per allocator
    under = ["pass 1, thread 0: event 74303, alloc of 1965128448 bytes: VRAM_ERR_OUT_OF_MEMORY: out of memory on "
             "/device:GPU:0: cannot allocate 1965128448 bytes: the memory limit of 12941578172 bytes is reached",
             "cuMemAlloc(1937780736): the device's used bytes went 13363052544 above their value before the replay, "
             "over the limit of 12941578172 (block freed again)",
             "cuMemAllocAsync(1937780736): the pool's reserved bytes went over the limit of 12941578172: 13220446208 "
             "after trimming the pool to 0 (block freed again)",
             "raw_alloc(1937780736): CUDA out of memory. Tried to allocate 1.81 GiB. GPU 0 has a total capacity of "
             "79.18 GiB of which 39.16 GiB is free. Process 2733 has 1.77 GiB memory in use."]
    full = ["pass 1, thread 0: event 465, alloc of 25690112 bytes: VRAM_ERR_OUT_OF_MEMORY: out of memory on "
            "/device:GPU:0: cannot allocate 25690112 bytes: the card itself is full: the driver refused more memory "
            "(cuMemCreate(2097152 bytes) on device 0: CUDA_ERROR_OUT_OF_MEMORY (out of memory))",
            "cuMemAllocAsync(73924608): CUDA_ERROR_OUT_OF_MEMORY (out of memory)",
            "raw_alloc(100663296): CUDA out of memory. Tried to allocate 96.00 MiB. GPU 0 has a total capacity of "
            "79.18 GiB of which 57.12 MiB is free. Process 3104 has 7.58 GiB memory in use.",
            "raw_alloc(2937925632): CUDA out of memory. Tried to allocate 2.74 GiB. GPU 0 has a total capacity of "
            "79.18 GiB of which 685.12 MiB is free."]
    check([probe_outcome({"failed_allocs": 3, "first_error": e}) for e in under + full] ==
          ["fail"] * len(under) + ["full"] * len(full), "under the limit (fail) against the card full (full)"); n += 1

    def probe_row(alloc, f, failed, **kw):
        r = {"allocator": alloc, "trace": "traces/t.trace.gz", "bisect_fraction": f,
             "bisect_limit_bytes": limit_for(1000, f), "failed_allocs": failed}
        r.update(kw)
        return r
    bis = [{"meta": {"date": "2026-12-02", "gpu": "Fake", "passes": "2"}},
           {"limit": {"trace": "traces/t.trace.gz", "peak_live_bytes": 1000, "trace_allocs": 5,
                      "bisect": {"lo": "0.90", "hi": "1.0", "step": "0.0025"}, "source": "the trace"}},
           probe_row("vram growth", "1.0", 1), probe_row("vram growth", "0.95", 0), probe_row("vram growth", "0.9750", 0),
           probe_row("vram growth", "0.9875", 1), probe_row("vram growth", "0.9800", 0),
           probe_row("host", "1.0", 0),
           probe_row("torch", "1.0", 4), probe_row("torch", "0.95", 3), probe_row("torch", "0.90", 1),
           {"allocator": "cumemalloc", "trace": "traces/t.trace.gz", "bisect_fraction": "1.0",
            "error": "exit status 1: no GPU"}]
    t = printed(cmd_bisect, bis)
    check("| trace | peak live | vram, growth (VMM) | cuMemAlloc / cuMemFree per call | PyTorch caching allocator "
          "(native) | host malloc / free (loop floor) | smallest |" in t, "bisect table heading: " + t); n += 1
    # vram: 0.98 completed, 0.9875 failed: ceil(1000 / 0.98) = 1021; host completes at 1.0: 1000 / 1000
    check("| t | 1,000 | 1.0210 | did not run (exit status 1: no GPU) | > 1.1111 (fails at 0.90) | "
          "1.0000 (completes at 1.0) | host malloc / free (loop floor) |" in t, "bisect table row: " + t); n += 1
    t = printed(cmd_bisect, bis[:11] + [probe_row("torch", "0.9750", 4, first_error=full[2])])
    check("| 1.0210 | not measured (the card itself full at 0.9750) | 1.0000 (completes at 1.0) |" in t,
          "a bisection that met the card full is not measured: " + t); n += 1
    bis[6]["failed_allocs"] = 0                      # host fails: vram is then the smallest
    bis[7]["failed_allocs"] = 1
    t = printed(cmd_bisect, bis + [probe_row("host", "0.9800", 0), probe_row("host", "0.99", 1)])
    check("| 1.0210 | did not run (exit status 1: no GPU) | > 1.1111 (fails at 0.90) | 1.0210 | vram, growth (VMM), "
          "host malloc / free (loop floor) |" in t, "a tie for the smallest: " + t); n += 1
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as lf:
        lf.write("== vram growth: traces/t.trace.gz: completes at 0.9800, fails at 0.9825\n"
                 "== torch: traces/t.trace.gz: fails at 0.9000\nother line\n")
    got = log_probes(lf.name)
    os.unlink(lf.name)
    check(got == [{"allocator": "vram growth", "trace": "traces/t.trace.gz", "bisect_fraction": "0.9800", "failed_allocs": 0},
                  {"allocator": "vram growth", "trace": "traces/t.trace.gz", "bisect_fraction": "0.9825", "failed_allocs": 1},
                  {"allocator": "torch", "trace": "traces/t.trace.gz", "bisect_fraction": "0.9000", "failed_allocs": 1}],
          "probes from a log: %r" % got); n += 1
    print("self-test: ok (%d checks)" % n)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tag")
    t.add_argument("--allocator", required=True)
    t.add_argument("--trace", required=True)
    t.add_argument("--rc", type=int, default=0)
    t.add_argument("--stderr")
    t.add_argument("--run", type=int)
    t.add_argument("--fraction")
    t.add_argument("--limit", type=int)
    m = sub.add_parser("meta")
    m.add_argument("pairs", nargs="*")
    tb = sub.add_parser("table")
    tb.add_argument("results")
    lf = sub.add_parser("limit-for")
    lf.add_argument("--trace", required=True)
    lf.add_argument("--fraction", required=True)
    lf.add_argument("--vram-json")
    lf.add_argument("--append")
    lt = sub.add_parser("limit")
    lt.add_argument("results")
    bg = sub.add_parser("bisect-grid")
    bg.add_argument("--trace", required=True)
    bg.add_argument("--lo", required=True)
    bg.add_argument("--hi", required=True)
    bg.add_argument("--step", required=True)
    bg.add_argument("--vram-json")
    bg.add_argument("--append")
    sub.add_parser("probe")
    bt = sub.add_parser("bisect")
    bt.add_argument("results")
    bt.add_argument("--log", help="bench/limit.sh's log: its 'completes at / fails at' lines for probes the results lack")
    sub.add_parser("self-test")
    args = p.parse_args()
    {"tag": cmd_tag, "meta": cmd_meta, "table": cmd_table, "limit-for": cmd_limit_for,
     "limit": cmd_limit, "bisect-grid": cmd_bisect_grid, "probe": cmd_probe, "bisect": cmd_bisect,
     "self-test": cmd_self_test}[args.cmd](args)


if __name__ == "__main__":
    main()
