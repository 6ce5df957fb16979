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

Rows come from `vram replay --json` (keys cold_ns_per_op / warm_ns_per_op, or ns_per_op from a vram
without --passes; driver_allocs + driver_frees) and from bench/peers (driver_calls; null where the
allocator does not let them be observed).
"""
import argparse
import json
import os
import sys

ORDER = [
    "vram prealloc", "vram growth", "vram growth-hold", "vram growth-keep", "vram growth-lean", "vram growth-plain",
    "cumemalloc", "cumemallocasync", "torch", "torch-expandable", "host",
]
LABEL = {
    "vram prealloc": "vram, preallocated (default)",
    "vram growth": "vram, growth (VMM)",
    "vram growth-hold": "vram, growth moving idle memory under large blocks (hold_large_mb:256)",
    "vram growth-keep": "vram, growth never moving idle memory under large blocks (hold_large_mb:0)",  # results before 2026-11-29 late
    "vram growth-lean": "vram, growth holding its peak (hold_peak, 64 MiB extents)",
    "vram growth-plain": "vram, growth without VMM",
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
        return r["driver_allocs"] + r["driver_frees"]
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


def cmd_table(args):
    meta, rows = load_results(args.results)

    out = []
    if meta:
        gpu = meta.get("gpu", "?")
        parts = ["driver " + meta.get("driver", "?")]
        if meta.get("memory"):
            parts.append(meta["memory"])
        if meta.get("cuda"):
            parts.append("CUDA " + meta["cuda"])
        line = "%s, one %s (%s), PyTorch %s; %s passes per replay (pass 1 cold, the rest warm)" % (
            meta.get("date", "?"), gpu, ", ".join(parts), meta.get("torch", "?"), meta.get("passes", "?"))
        if meta.get("repeat") and meta["repeat"] != "1":
            line += ", every replay run %s times in its own process: ns/op is the median " \
                    "(min–max) of the runs" % meta["repeat"]
        if meta.get("commit") and meta["commit"] != "unknown":
            line += "; vram at %s" % meta["commit"]
        out.append(line + ".")
        if meta.get("command"):
            out.append("Reproduce with `%s`." % meta["command"])
        out.append("")

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
    out.append("reserved/live: peak bytes held from the driver / peak bytes the trace had live (1.000 is "
               "perfect). cold: pass 1 from an empty pool, driver calls included; warm: the later passes. "
               "ns/op: the pass loop's wall time over its alloc + free calls. driver calls: allocation + "
               "free calls to the driver over the whole run (all passes; vram's preallocation is its 1).")
    print("\n".join(out))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tag")
    t.add_argument("--allocator", required=True)
    t.add_argument("--trace", required=True)
    t.add_argument("--rc", type=int, default=0)
    t.add_argument("--stderr")
    t.add_argument("--run", type=int)
    m = sub.add_parser("meta")
    m.add_argument("pairs", nargs="*")
    tb = sub.add_parser("table")
    tb.add_argument("results")
    args = p.parse_args()
    {"tag": cmd_tag, "meta": cmd_meta, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    main()
