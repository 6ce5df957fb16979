#!/usr/bin/env python3
"""bench/readme.py: the README's Results section (and bench/README.md's notes on it), printed from the
results files in bench/results/.

  python3 bench/readme.py [--results DIR]
      prints the README's section (what follows its "## Results" heading): the table and the sentences
      around it, each figure computed from the committed results files named in SOURCES below, with the
      command that measured it, its date and its machine.
  python3 bench/readme.py --notes
      prints bench/README.md's "Notes on the README's table" (the sentences behind the table's figures:
      the plan's share, what moves between runs, the plan's cost), computed the same way.
  python3 bench/readme.py --check README.md bench/README.md
      exits 1, with a diff, when a file's part (README.md's Results, bench/README.md's notes) is not
      exactly what the first two forms print (ctest bench_readme): a figure edited by hand on either side
      fails.
  python3 bench/readme.py --write README.md bench/README.md
      replaces those parts with what is printed.
  python3 bench/readme.py --self-test
      checks the readers and the figures' arithmetic on made-up files (ctest bench_readme_selftest).

Step times and peaks come from bench/train.py's own figures (pooled over the rounds, peak reserved:
the same functions as `bench/train.py --table`), limits from bench/table.py's (`table.py limit`,
`table.py bisect`). The wording lives here, so that the README's figures change only with a file.
Standard library only; imports train_table.py and table.py (which import nothing of this file).
"""
import argparse
import decimal
import difflib
import json
import os
import re
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import table  # noqa: E402  (bench/table.py)
import train_table  # noqa: E402  (bench/train_table.py)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
WIDTH = 110                      # the README's line width for prose (tables are one line a row)

# The results files each part of the section reads (in bench/results/).
SOURCES = {
    "train": [
        ("gpt2", "gpt2 (124M, batch 16 x 1024)", "2026-12-06-h100-d344de9-train.jsonl"),
        ("resnet50", "resnet50 (batch 128)", "2026-12-06-h100-d344de9-train.jsonl"),
        ("bert_varlen", "bert_varlen (8 shapes)", "2026-12-06-h100-d344de9-train.jsonl"),
        ("gpt2_generate", "gpt2_generate (KV cache)", "2026-12-06-h100-d344de9-train-generate.jsonl"),
        ("llama_trainer", "llama_trainer (Hugging Face `Trainer`)", "2026-12-06-h100-d344de9-train-programs.jsonl"),
        ("lightning_stats", "lightning_stats (Lightning, `DeviceStatsMonitor`)",
         "2026-12-06-h100-d344de9-train-programs.jsonl"),
        ("timm_vit", "timm_vit (ViT-B/16, `cudnn.benchmark`)", "2026-12-06-h100-d344de9-train-programs.jsonl"),
    ],
    # commands for files whose meta line says it in prose or without the environment (bench/results/README.md)
    "commands": {
        "2026-12-06-h100-d344de9-train-programs.jsonl":
            "`python3 bench/train.py --workloads llama_trainer,lightning_stats,timm_vit --repeat 1 --cpus 2-5`, "
            "then the same with `--allocators vram,torch-async,torch-expandable,torch` (the reverse order)",
        "2026-11-29-h200-limit-639263a-vram.jsonl": "BENCH_PEERS=host bash bench/limit.sh",
    },
    "llama": "2026-12-06-h100-d344de9-plan-llama.jsonl",          # bench/plan_train.py, a process each
    "first_steps": "2026-12-06-h100-d344de9-plan-first-step.txt",  # bench/plan_train.py --steps 12
    "detect": "2026-12-02-h200-plan-default-detect.jsonl",        # bench/plan_detect.c
    # (peers' file, vram's file: the same file where one run measured both)
    "limit": [("2026-12-06-h100-d344de9-limit-095.jsonl", "2026-12-06-h100-d344de9-limit-095.jsonl"),
              ("2026-12-06-h100-d344de9-limit-0995.jsonl", "2026-12-06-h100-d344de9-limit-0995.jsonl")],
    # (peers' file, its log of a bisection stopped early or None, vram's file)
    "bisect": ("2026-12-06-h100-553a5dd-limit-bisect.jsonl", None, "2026-12-06-h100-553a5dd-limit-bisect.jsonl"),
}
# The table's columns: (heading, bench/train.py's allocator, bench/table.py's allocator, plan_train.py's)
COLUMNS = [("PyTorch default", "torch", "torch", "torch"),
           ("expandable segments", "torch-expandable", "torch-expandable", "torch-expandable"),
           ("cudaMallocAsync", "torch-async", "cumemallocasync", "cuda-async"),
           ("vram", "vram", "vram growth", "vram")]
COUNT = {n: w for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}


class ResultsError(Exception):
    """A results file that cannot be read as this script expects (named in the message)."""


# ---- readers ------------------------------------------------------------------------------------

def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ResultsError("%s: %s" % (path, e)) from None


def header(path, text):
    """{"machine", "date", "command"} of a file whose first line is "# MACHINE, DATE[, ...]: COMMAND",
    the command going on in lines "#   MORE" (not a parenthesis) right after it."""
    lines = text.splitlines()
    m = re.match(r"^# ([^,]+), (\d{4}-\d{2}-\d{2})[^:]*: (.+)$", lines[0] if lines else "")
    if not m:
        raise ResultsError("%s: line 1 is not '# MACHINE, DATE: COMMAND'" % path)
    command = m.group(3).strip()
    for line in lines[1:]:
        c = re.match(r"^#\s{2,}([^(\s].*)$", line)
        if not c:
            break
        command += " " + c.group(1).strip()
    return {"machine": m.group(1).strip(), "date": m.group(2), "command": command}


def json_lines(path):
    """(header, objects) of a file of '#' comment lines and JSON objects, one a line."""
    text = read_text(path)
    objs = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            raise ResultsError("%s:%d: %s" % (path, i, e)) from None
    return header(path, text), objs


def table_meta(path):
    """{"machine", "date", "command"} from a results file's {"meta": ...} line (bench/train.sh's or
    bench/limit.sh's)."""
    try:
        meta, _ = table.load_results(path)
    except (OSError, ValueError) as e:
        raise ResultsError("%s: %s" % (path, e)) from None
    command = SOURCES["commands"].get(os.path.basename(path), meta.get("command"))
    if not meta.get("date") or not meta.get("gpu") or not command:
        raise ResultsError("%s: its meta line lacks the date, the GPU or the command" % path)
    return {"machine": meta["gpu"], "date": str(meta["date"])[:10], "command": command}


def limit_log(path):
    """(meta, rows) of bench/limit.sh's output kept as a log: every "== ALLOCATOR: TRACE: COMMAND"
    line's row is the JSON line that follows it (tagged with that allocator and trace); the meta from
    the table's heading ("DATE, one GPU (...); ..." and "Reproduce with `COMMAND`.")."""
    rows, meta, pending = [], {}, None
    for i, line in enumerate(read_text(path).splitlines(), 1):
        m = re.match(r"^== (.+?): (traces/\S+): ", line)
        if m:
            pending = (m.group(1), m.group(2))
            continue
        if line.startswith("{") and pending:
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ResultsError("%s:%d: %s" % (path, i, e)) from None
            rows.append(dict(row, allocator=pending[0], trace=pending[1]))
            pending = None
            continue
        h = re.match(r"^(\d{4}-\d{2}-\d{2}), one (.+?) \(", line)
        if h and "date" not in meta:
            meta.update(date=h.group(1), machine=h.group(2))
        r = re.match(r"^Reproduce with `(.+)`\.$", line)
        if r:
            meta["command"] = r.group(1)
    if set(meta) != {"date", "machine", "command"} or not rows:
        raise ResultsError("%s: not bench/limit.sh's output (no heading, command or rows)" % path)
    return meta, rows


def first_steps(path):
    """(header, {conf: the first five steps' ms}) of the first steps file's lines (SOURCES["first_steps"]):
    "CONF RATIO [MS, ...] first5 N"; a conf run twice keeps its last process (the file's first pays
    the machine's cold start)."""
    text = read_text(path)
    out = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^(\S+) [0-9.]+ \[([^\]]*)\] first5 (\d+)$", line)
        if not m:
            raise ResultsError("%s:%d: not 'CONF RATIO [MS, ...] first5 N'" % (path, i))
        out[m.group(1)] = int(m.group(3))
    return header(path, text), out


# ---- the figures --------------------------------------------------------------------------------

def fmt_ms(x):
    return "{:,.2f}".format(x)


def fraction_pct(fraction):
    """'0.995' -> '99.5%'."""
    return "{:f}".format((decimal.Decimal(str(fraction)) * 100).normalize()) + "%"


def code(command):
    """A command as Markdown code: "A, then B (C)" as `A`, then `B` (C); one with backticks as it is."""
    if "`" in command:
        return command
    out = []
    for part in command.split(", then "):
        cmd, paren, rest = part.partition(" (")
        out.append("`%s`%s%s" % (cmd, paren, rest))
    return ", then ".join(out)


def ran(meta):
    """`COMMAND`, DATE: a row's run."""
    return "%s, %s" % (code(meta["command"]), meta["date"])


def train_figures(results):
    """Per workload of SOURCES["train"]: (workload, label, {allocator: (pooled ms, peak reserved
    bytes)}, the meta of its file, {allocator: (lowest, highest) of its rounds' medians}, vram's step
    against the fastest PyTorch allocator's in each round, in %)."""
    out, cache = [], {}
    for w, label, name in SOURCES["train"]:
        path = os.path.join(results, name)
        if path not in cache:
            try:
                cache[path] = table.load_results(path)
            except (OSError, ValueError) as e:
                raise ResultsError("%s: %s" % (path, e)) from None
        meta, rows = cache[path]
        rows = [r for r in rows if r.get("workload") == w]
        if not rows:
            raise ResultsError("%s: no rows of %s" % (path, w))
        agg = train_table.aggregate(rows)
        pool = train_table.pooled_by_shape(w, rows)
        figs, spread = {}, {}
        for _, a, _, _ in COLUMNS:
            g = agg.get((w, a))
            if g and g["ok"]:
                if a not in pool:
                    raise ResultsError("%s: %s's %s rows have no step lists to pool" % (path, w, a))
                figs[a] = (pool[a], g["reserved"])
                spread[a] = (g["median_lo"], g["median_hi"])
        out.append((w, label, figs, table_meta(path), spread, train_table.paired_by_round(w, rows)))
    return out


def train_row(figs):
    """One table row: pooled ms and peak GiB per column, vram's against the fastest PyTorch allocator,
    bold where vram holds the least."""
    torch_ms = [figs[a][0] for _, a, _, _ in COLUMNS[:3] if a in figs]
    others = [figs[a][1] for a in figs if a != "vram"]
    cells = []
    for _, a, _, _ in COLUMNS:
        if a not in figs:
            cells.append("not run")
            continue
        ms, reserved = figs[a]
        if a != "vram":
            cells.append("%s ms, %s GiB" % (fmt_ms(ms), train_table.gib(reserved)))
            continue
        gib = train_table.gib(reserved) + " GiB"
        if others and reserved < min(others):
            gib = "**" + gib + "**"
        vs = " (%s)" % train_table.pct((ms / min(torch_ms) - 1.0) * 100.0) if torch_ms else ""
        cells.append("%s ms%s, %s" % (fmt_ms(ms), vs, gib))
    return cells


def llama_figures(results):
    """The llama_plan loop (bench/plan_train.py, one process per allocator): {column allocator: row},
    vram's plan:false row, the file's header."""
    path = os.path.join(results, SOURCES["llama"])
    head, objs = json_lines(path)
    by = {}
    for o in objs:
        key = "vram-false" if o.get("allocator") == "vram" and o.get("plan") == "false" else o.get("allocator")
        by[key] = o
    for _, _, _, a in COLUMNS:
        if a not in by:
            raise ResultsError("%s: no %s row" % (path, a))
    if "vram-false" not in by or by["vram"].get("plan") != "true":
        raise ResultsError("%s: vram needs a plan:true and a plan:false row" % path)
    return by, head


def held(o):
    """What the process held at most over the second half, over the step's peak allocated there."""
    return o["reserved_max_second_half"] / o["peak_allocated_second_half"]


def llama_row(by):
    torch_ms = [by[a]["step_ms_median_second_half"] for _, _, _, a in COLUMNS[:3]]
    cells = []
    for _, _, _, a in COLUMNS:
        o = by[a]
        fig = "%.3f (%s GiB)" % (held(o), train_table.gib(o["reserved_max_second_half"]))
        if a != "vram":
            cells.append("%s ms, %s" % (fmt_ms(o["step_ms_median_second_half"]), fig))
            continue
        if all(held(o) < held(by[b]) for _, _, _, b in COLUMNS[:3]):
            fig = "**" + fig + "**"
        vs = train_table.pct((o["step_ms_median_second_half"] / min(torch_ms) - 1) * 100)
        cells.append("%s ms (%s), %s" % (fmt_ms(o["step_ms_median_second_half"]), vs, fig))
    return cells


def limit_figures(results, peers_name, vram_name):
    """(fraction, {column allocator: (completed, ran)}, peers' meta, vram's meta) of one tight-limit run."""
    peers_path, vram_path = os.path.join(results, peers_name), os.path.join(results, vram_name)
    try:
        pmeta, prows = table.load_results(peers_path)
    except (OSError, ValueError) as e:
        raise ResultsError("%s: %s" % (peers_path, e)) from None
    if vram_name.endswith(".txt"):
        vmeta, vrows = limit_log(vram_path)
        vfraction = re.search(r"BENCH_FRACTION=\"?([0-9.]+)", vmeta["command"])
        vfraction = vfraction.group(1) if vfraction else "0.95"
    else:
        try:
            vm, vrows = table.load_results(vram_path)
        except (OSError, ValueError) as e:
            raise ResultsError("%s: %s" % (vram_path, e)) from None
        vmeta, vfraction = table_meta(vram_path), vm.get("fraction")
    if vfraction != pmeta.get("fraction"):
        raise ResultsError("%s and %s: limits at different fractions (%s, %s)" % (peers_path, vram_path,
                                                                                 pmeta.get("fraction"), vfraction))
    done = table.limit_completed([r for r in prows if "limit" not in r])
    vdone = table.limit_completed([r for r in vrows if "limit" not in r])
    if "vram growth" not in vdone:
        raise ResultsError("%s: no vram growth rows" % vram_path)
    done["vram growth"] = vdone["vram growth"]
    return pmeta["fraction"], done, table_meta(peers_path), vmeta


def limit_row(done, first):
    cells = []
    best = max(c[0] for c in done.values())
    for _, _, a, _ in COLUMNS:
        c = done.get(a)
        cell = "%d of %d" % tuple(c) if c else "not run"
        if a == "cumemallocasync" and first:
            cell += " (cuMemAllocAsync pool)"
        if a == "vram growth" and c and c[0] == best and all(v[0] < best for k, v in done.items() if k != a):
            cell = "**" + cell + "**"
        cells.append(cell)
    return cells


def bisect_range(cells, traces, alloc):
    """'LO to HI' of one allocator's smallest limits over the traces (4 decimals, as `table.py bisect`),
    HI '> X' when it failed at the grid's lowest fraction on some trace; None when it ran on none."""
    mine = [cells.get((t, alloc), ("–", None)) for t in traces]
    ratios = [ratio for _, ratio in mine if ratio is not None]
    above = [cell.split(" (")[0] for cell, _ in mine if cell.startswith("> ")]
    if not ratios and not above:
        return None
    lo = "%.4f" % min(ratios) if ratios else above[0]
    hi = above[0] if above else "%.4f" % max(ratios)
    return lo if lo == hi else "%s to %s" % (lo, hi)


def bisect_figures(results):
    peers, log, vram = (n and os.path.join(results, n) for n in SOURCES["bisect"])
    try:
        pmeta, grid, limits, traces, _, pcells, _ = table.bisect_results(peers, log)
        _, vgrid, _, vtraces, _, vcells, _ = table.bisect_results(vram)
    except (OSError, ValueError) as e:
        raise ResultsError("%s: %s" % (peers, e)) from None
    if grid != vgrid or sorted(traces) != sorted(vtraces):
        raise ResultsError("%s and %s: different grids or traces" % (peers, vram))
    cells = dict(pcells)
    for t in traces:
        cells[(t, "vram growth")] = vcells[(t, "vram growth")]
    return grid, traces, cells, table_meta(peers), table_meta(vram)


def bisect_row(grid, traces, cells):
    out = []
    for _, _, a, _ in COLUMNS:
        r = bisect_range(cells, traces, a) or "not run"
        if a == "vram growth":
            v = {t: cells.get((t, a), ("–", None))[1] for t in traces}
            # the smallest on a trace: below every other allocator's limit there (a '> X' peer is above
            # X, which is above the whole grid; a peer that did not run there does not count)
            smallest = all(v[t] is not None and all(
                cells.get((t, b), ("–", None))[1] is None or v[t] < cells[(t, b)][1]
                for b in {k[1] for k in cells} - {a}) for t in traces)
            if smallest:
                r = "**%s, the smallest on every trace**" % r
        out.append(r)
    return out


def detect_figures(results):
    """(header, (lo, hi) ns an event where no plan forms, (lo, hi) where one does, their counts)."""
    head, objs = json_lines(os.path.join(results, SOURCES["detect"]))
    none = [o["ns_per_event_median"] for o in objs if o["plans_placed"] == 0]
    some = [o["ns_per_event_median"] for o in objs if o["plans_placed"] > 0]
    if not none or not some:
        raise ResultsError("%s: needs traces with and without a plan" % SOURCES["detect"])
    return head, (min(none), max(none)), (min(some), max(some)), len(none), len(some)


def one_machine(metas, what):
    """The one card a group of runs ran on ("H100 80GB HBM3"), however each file names it ("H100",
    "NVIDIA H100 80GB HBM3"): the longest name of the group; ResultsError where the group spans cards."""
    names = {m["machine"].replace("NVIDIA ", "").strip() for m in metas}
    cards = {n.split()[0] for n in names}
    if len(cards) != 1:
        raise ResultsError("the %s runs are on several machines: %s" % (what, ", ".join(sorted(names))))
    return max(names, key=len)


def listing(items):
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def spread_pct(lo_hi):
    lo, hi = lo_hi
    return (hi / lo - 1.0) * 100.0


# ---- the section --------------------------------------------------------------------------------

def para(text):
    """One paragraph wrapped at WIDTH; a line that Markdown would read as a list item, a heading or a
    quote ("- x", "+ x", "1. x", "# x", "> x") gives its first word to the line before."""
    lines = textwrap.wrap(" ".join(text.split()), WIDTH, break_long_words=False, break_on_hyphens=False)
    for i in range(1, len(lines)):
        while re.match(r"^([-+*>#]|\d+[.)])(\s|$)", lines[i]):
            word, _, rest = lines[i].partition(" ")
            lines[i - 1] += " " + word
            lines[i] = rest
    return "\n".join(l for l in lines if l)


def section(results=RESULTS):
    """The README's Results section after its heading, as a string (no trailing newline)."""
    return build(results)[0]


def notes(results=RESULTS):
    """bench/README.md's section on the README's table (NOTES) after its heading (no trailing newline)."""
    return build(results)[1]


def build(results):
    """(the README's Results section, bench/README.md's notes on it): the table and the sentences."""
    train_rows = train_figures(results)
    by, lhead = llama_figures(results)
    limits = [limit_figures(results, *spec) for spec in SOURCES["limit"]]
    grid, traces, bcells, bpeers, bvram = bisect_figures(results)
    fhead, five = first_steps(os.path.join(results, SOURCES["first_steps"]))
    dhead, d_none, d_some, n_none, n_some = detect_figures(results)

    trained = one_machine([t[3] for t in train_rows] + [lhead, fhead], "training and llama_plan")
    limited = one_machine([bpeers, bvram] + [x for l in limits for x in l[2:]], "tight-limit")
    nine = COUNT.get(len(traces), str(len(traces)))

    where = ("On one NVIDIA %s" % trained if trained == limited else
             "Training and llama_plan on one NVIDIA %s, the tight limits on one NVIDIA %s" % (trained, limited))
    out = [para("%s; `python3 bench/readme.py` prints this section from "
                "[`bench/results/`](bench/results/README.md) (ctest `bench_readme` checks it). Training: step time "
                "(pooled over the rounds; vram against the fastest PyTorch allocator) and peak reserved, vram with "
                "growth and no limit. Tight limit: traces completed at a limit %s and %s full, and the smallest "
                "limit (to %s) each trace completes under. Bold: vram where it is the best of its row." % (
                    where, fraction_pct(limits[0][0]), fraction_pct(limits[1][0]), fraction_pct(grid["step"]))), ""]
    out.append("| workload | " + " | ".join(c[0] for c in COLUMNS) + " | command, date |")
    out.append("|---" * (len(COLUMNS) + 2) + "|")
    last = None
    for w, label, figs, meta, _, _ in train_rows:
        run = ran(meta)
        out.append("| %s | %s | %s |" % (label, " | ".join(train_row(figs)), "the same" if run == last else run))
        last = run
    out.append("| llama_plan (`LlamaForCausalLM` loop, one shape): held once settled, / the step's peak allocated | "
               "%s | %s, a process each |" % (" | ".join(llama_row(by)), ran(lhead)))
    for i, (fraction, done, pmeta, vmeta) in enumerate(limits):
        run = ran(pmeta) + ("" if vmeta == pmeta else "; vram: " + ran(vmeta))
        out.append("| %s traces under a limit %s full | %s | %s |" % (
            nine, fraction_pct(fraction), " | ".join(limit_row(done, i == 0)), run))
    out.append("| smallest limit a trace runs under, / its peak live (%s traces) | %s | %s |" % (
        nine, " | ".join(bisect_row(grid, traces, bcells)),
        ran(bpeers) + ("" if bvram == bpeers else "; vram: " + ran(bvram))))
    out.append("")
    out.append(para(
        "The plan's share, what moves between runs and the plan's cost: [notes](bench/README.md#notes-on-the-readmes-table); "
        "every other measurement and the method: [`bench/README.md`](bench/README.md)."))

    notes = []
    v, vf = by["vram"], by["vram-false"]
    peaks = sorted(o["peak_allocated_second_half"] for o in by.values())
    lo, hi = train_table.gib(peaks[0]), train_table.gib(peaks[-1])
    peak = lo + ("" if lo == hi else "-" + hi)
    notes += [para(
        "llama_plan is a Hugging Face `LlamaForCausalLM` training loop (%d layers, d=%d, batch %d x %d, bf16, AdamW, "
        "%d steps) whose step's peak allocated is %s GiB under every allocator. vram's plan of the repeating "
        "step (allocator option `plan`, on by default) is in force on %d of the %d steps; over the second half "
        "the process holds %.4f x the step's peak and gives the rest back to the driver (%.4f with "
        "`plan:false`). Its step takes %s ms (%s ms with `plan:false`), one process each." % (
            v["layers"], v["d"], v["batch"], v["seq"], v["steps"], peak, v["plan_steps"], v["steps"], held(v),
            held(vf), fmt_ms(v["step_ms_median_second_half"]), fmt_ms(vf["step_ms_median_second_half"]))), ""]

    rounds = {w: len(p) for w, _, _, _, _, p in train_rows}
    spreads = {w: max(spread_pct(x) for x in spread.values()) for w, _, _, _, spread, _ in train_rows
               if rounds[w] > 1}
    paired = {w: p for w, _, _, _, _, p in train_rows if len(p) > 1}
    if not spreads or not paired:
        raise ResultsError("no training row has two rounds: nothing to say of what moves between them")
    cumem = [l[1].get("cumemalloc") for l in limits]
    notes += [para(
        "The host moves host-bound steps between processes of the same allocator: where a workload ran two "
        "rounds, an allocator's slowest round (its median step) against its fastest is at most %s. vram "
        "against the fastest PyTorch allocator of the same round: %s. "
        "cudaMallocAsync's peak on timm_vit is its pool's high-water mark after cuDNN's benchmark tried its "
        "largest workspaces. Under the tight limits, plain cuMemAlloc completes %s." % (
            listing(["+%.1f%% on %s" % (spreads[w], w) for w in spreads]),
            listing(["%s on %s" % (" and ".join(train_table.pct(x) for x in p), w) for w, p in paired.items()]),
            " and ".join("%d of %d traces at %s" % (c[0], c[1], fraction_pct(l[0])) for c, l in zip(cumem, limits)))), ""]

    true5 = five.get("plan:true")
    false5 = five.get("plan:false")
    if true5 is None or false5 is None:
        raise ResultsError("%s: needs plan:true and plan:false lines" % SOURCES["first_steps"])
    notes += [para(
        "What the plan costs: memory is mapped granule by granule and moved into the plan's range once, so "
        "the llama_plan loop's first five steps take {:,} ms with it against {:,} ms with `plan:false` "
        "({}, {}, each a fresh process); watching for the repeating step costs {:.2f}-{:.2f} ns an event on "
        "the {} traces of `traces/` that form no plan and {:.2f}-{:.2f} ns on the {} that do, placing the "
        "plan included ({}, {}, the {}'s host: the detector alone).".format(
            true5, false5, code(fhead["command"]), fhead["date"], d_none[0], d_none[1], COUNT.get(n_none, n_none),
            d_some[0], d_some[1], COUNT.get(n_some, n_some), code(dhead["command"]), dhead["date"],
            dhead["machine"])), ""]
    return "\n".join(out), "\n".join(notes).rstrip("\n")


# ---- the README and bench/README.md -------------------------------------------------------------

# Each printed part and the heading it stands under: the README's Results section, and bench/README.md's
# notes on its table. A file is checked (or written) for each of these headings it holds.
PARTS = [("## Results", section), ("### Notes on the README's table", notes)]


def part_of(text, heading):
    """(text before the part's body, the body, text after it), or None where text lacks the heading: the
    body runs to the next heading of the same level or above."""
    m = re.search(r"^%s\n\n" % re.escape(heading), text, re.M)
    if not m:
        return None
    level = len(heading) - len(heading.lstrip("#"))
    end = re.search(r"^#{1,%d} " % level, text[m.end():], re.M)
    stop = m.end() + end.start() if end else len(text)
    return text[:m.end()], text[m.end():stop], text[stop:]


def readme_section(path, parts=None):
    """[(heading, printer, (before, body, after))] for each part the file holds; at least one."""
    text = read_text(path)
    found = [(h, fn, part_of(text, h)) for h, fn in (parts or PARTS)]
    found = [x for x in found if x[2]]
    if not found:
        raise ResultsError("%s: none of the headings %s followed by a blank line" % (
            path, ", ".join("'%s'" % h for h, _ in (parts or PARTS))))
    return found


def check(path, results):
    rc = 0
    for heading, fn, (_, body, _) in readme_section(path):
        want = fn(results)
        if body.rstrip("\n") == want:
            print("%s: '%s' is what bench/readme.py prints" % (path, heading))
            continue
        sys.stdout.writelines(difflib.unified_diff((body.rstrip("\n") + "\n").splitlines(True),
                                                   (want + "\n").splitlines(True),
                                                   "%s (%s)" % (path, heading), "bench/readme.py", n=1))
        print("\n%s: '%s' differs from what bench/readme.py prints from bench/results/ (above: - the file, + "
              "the results); fix the side that is wrong (python3 bench/readme.py --write %s writes the printed "
              "one)" % (path, heading, path))
        rc = 1
    return rc


def write(path, results):
    for heading, fn, _ in readme_section(path):
        before, body, after = part_of(read_text(path), heading)
        want = fn(results) + "\n" + ("\n" if after else "")
        with open(path, "w", encoding="utf-8") as f:
            f.write(before + want + after)
        print("%s: '%s' written" % (path, heading))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=RESULTS, help="the results files' folder (default bench/results/)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", metavar="FILE", nargs="+",
                   help="exit 1 when a part (README.md's Results, bench/README.md's notes) is not what is printed")
    g.add_argument("--write", metavar="FILE", nargs="+", help="replace each file's parts with what is printed")
    g.add_argument("--notes", action="store_true", help="print bench/README.md's notes on the table instead")
    g.add_argument("--self-test", action="store_true", help="check the readers and the arithmetic on made-up files")
    args = ap.parse_args(argv)
    try:
        if args.self_test:
            return self_test()
        if args.check:
            return max(check(f, args.results) for f in args.check)
        if args.write:
            return max(write(f, args.results) for f in args.write)
        print(notes(args.results) if args.notes else section(args.results))
        return 0
    except ResultsError as e:
        print("bench/readme.py: %s" % e, file=sys.stderr)
        return 1


def self_test():
    """The readers, the cells' arithmetic and --check on made-up inputs (and --check on the real files)."""
    import contextlib
    import io

    n = 0

    def ok(cond, what):
        nonlocal n
        if not cond:
            raise AssertionError("self-test: " + what)
        n += 1

    def refused(fn, *a):
        try:
            fn(*a)
        except ResultsError:
            return True
        return False

    tmp = tempfile.mkdtemp()

    def made(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    try:
        h = header("f", "# H200, 2026-12-02, a tree: python3 x.py --a\n#   --b 1\n#   (a note)\nrow\n")
        ok(h == {"machine": "H200", "date": "2026-12-02", "command": "python3 x.py --a --b 1"}, "header: %r" % h)
        ok(refused(header, "f", "H200, 2026-12-02: x\n") and refused(header, "f", ""), "a file without its header")
        path = made("d.jsonl", "# H200, 2026-12-02: run\n{\"a\": 1}\n\n{\"a\": 2}\n")
        ok(json_lines(path)[1] == [{"a": 1}, {"a": 2}], "json lines after a header")
        ok(refused(json_lines, made("bad.jsonl", "# H200, 2026-12-02: run\n{\"a\": \n")), "a broken JSON line")

        log = made("l.txt", "== machine\n== traces/t.trace.gz: limit 10 bytes\n"
                            "== vram growth: traces/t.trace.gz: vram replay ...\n{\"failed_allocs\": 0}\n"
                            "== vram growth: traces/u.trace.gz: vram replay ...\n{\"failed_allocs\": 3}\n\n"
                            "2026-12-03, one NVIDIA H200 (driver 1), PyTorch 2; every trace ...\n"
                            "Reproduce with `BENCH_FRACTION=\"0.995\" bash bench/limit.sh`.\n")
        meta, rows = limit_log(log)
        ok(meta == {"date": "2026-12-03", "machine": "NVIDIA H200",
                    "command": "BENCH_FRACTION=\"0.995\" bash bench/limit.sh"}, "a limit log's meta: %r" % meta)
        ok(rows == [{"failed_allocs": 0, "allocator": "vram growth", "trace": "traces/t.trace.gz"},
                    {"failed_allocs": 3, "allocator": "vram growth", "trace": "traces/u.trace.gz"}],
           "a limit log's rows: %r" % rows)
        ok(table.limit_completed(rows) == {"vram growth": [1, 2]}, "completed counts")
        ok(refused(limit_log, made("e.txt", "== vram growth: traces/t.trace.gz: x\n{\"failed_allocs\": 0}\n")),
           "a log without its heading")

        h100 = [{"machine": "NVIDIA H100 80GB HBM3"}, {"machine": "H100"}]
        ok(one_machine(h100, "x") == "H100 80GB HBM3", "one card however each file names it")
        ok(refused(one_machine, h100 + [{"machine": "H200"}], "x"), "a group of runs on two cards")
        ok(listing(["a"]) == "a" and listing(["a", "b", "c"]) == "a, b and c", "a listing")
        fs = made("f.txt", "# H200, 2026-12-02: plan_train.py\nplan:true 1.0038 [2645.6, 84.4] first5 3090\n"
                           "plan:false 1.1026 [623.3] first5 804\nplan:true 1.0038 [1004.6] first5 1473\n")
        ok(first_steps(fs)[1] == {"plan:true": 1473, "plan:false": 804}, "first steps: the last process of a conf")

        ok([fraction_pct(x) for x in ("0.95", "0.995", "0.0025", "1")] == ["95%", "99.5%", "0.25%", "100%"],
           "fractions as percentages")
        ok(code("a --b, then c (d)") == "`a --b`, then `c` (d)" and code("`x` y") == "`x` y", "commands as code")

        figs = {"torch": (100.0, 3 << 30), "torch-expandable": (99.0, 2 << 30), "vram": (99.99, (2 << 30) - 1)}
        ok(train_row(figs) == ["100.00 ms, 3.000 GiB", "99.00 ms, 2.000 GiB", "not run",
                                    "99.99 ms (+1.00%), **2.000 GiB**"], "a training row: %r" % train_row(figs))
        figs["vram"] = (98.0, 2 << 30)
        ok(train_row(figs)[3] == "98.00 ms (-1.01%), 2.000 GiB", "no bold at a tie: %r" % train_row(figs))

        ok(limit_row({"torch": [2, 9], "cumemallocasync": [2, 9], "vram growth": [9, 9], "cumemalloc": [6, 9]}, True)
           == ["2 of 9", "not run", "2 of 9 (cuMemAllocAsync pool)", "**9 of 9**"], "a limit row")
        ok(limit_row({"torch": [9, 9], "vram growth": [9, 9]}, False)[3] == "9 of 9", "no bold at a tie")

        fails = ("> 1.1111 (fails at 0.90)", None)
        cells = {("a", "torch"): (("1.0230", 1.023)), ("b", "torch"): fails, ("c", "torch"): ("–", None),
                 ("a", "vram growth"): ("1.0025", 1.0025), ("b", "vram growth"): ("1.0390", 1.039),
                 ("c", "vram growth"): ("1.0050 (completes at 0.995)", 1.005),
                 ("a", "cumemalloc"): ("did not run (no GPU)", None), ("b", "cumemalloc"): ("1.0390", 1.039),
                 ("c", "cumemalloc"): ("–", None)}
        t = ["a", "b", "c"]
        ok(bisect_range(cells, t, "torch") == "1.0230 to > 1.1111", "a range with a failure at LO")
        ok(bisect_range(cells, t, "vram growth") == "1.0025 to 1.0390", "a range")
        ok(bisect_range(cells, ["a"], "vram growth") == "1.0025" and bisect_range(cells, ["c"], "torch") is None,
           "one trace; none")
        ok(bisect_row({}, t, {**cells, ("b", "cumemalloc"): ("1.0400", 1.04)})[3] ==
           "**1.0025 to 1.0390, the smallest on every trace**", "vram the smallest on every trace")
        ok(bisect_row({}, t, cells)[3] == "1.0025 to 1.0390", "a tie on one trace: not the smallest")
        ok(bisect_row({}, t, cells)[0] == "1.0230 to > 1.1111", "a peer's range in the row")

        # --check: the real section passes; one figure changed in the README, or in what is printed, fails
        body = section(RESULTS)
        good = made("README.md", "# x\n\n## Results\n\n" + body + "\n\n## After\n\ntext\n")
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet):
            ok(check(good, RESULTS) == 0, "the section as printed passes --check")
            wrong = made("README2.md", open(good).read().replace("**9 of 9**", "**8 of 9**", 1))
            ok(check(wrong, RESULTS) == 1, "a figure typed into the README fails --check")
            ok("-| nine traces under a limit 95% full" in quiet.getvalue(), "--check shows the line")
            bench = made("BENCH.md", "# b\n\n## Figures\n\n### Notes on the README's table\n\n" + notes(RESULTS) +
                         "\n\n### Next\n\ntext\n")
            ok(check(bench, RESULTS) == 0, "bench/README.md's notes as printed pass --check")
            wrong = made("BENCH2.md", open(bench).read().replace(" x the step's peak", "1 x the step's peak", 1))
            ok(check(wrong, RESULTS) == 1, "a figure in a sentence of the notes fails --check")
            ok(write(wrong, RESULTS) == 0 and open(wrong).read() == open(bench).read(),
               "--write restores the notes and keeps the next section")
            moved = made("README4.md", open(good).read().replace("## After", "more\n\n## After", 1))
            ok(check(moved, RESULTS) == 1, "a sentence added to the section fails --check")
            ok(write(moved, RESULTS) == 0 and check(moved, RESULTS) == 0 and
               open(moved).read().endswith("\n\n## After\n\ntext\n"), "--write restores the section")
        ok(refused(readme_section, made("README5.md", "# x\n## Result\n")), "a README without the section")
        text = "x " * 55 + "- y " + "z " * 60 + "1. w"   # plain wrapping starts a line with "- y"
        wrapped = para(text)
        ok(re.search(r"^- y", textwrap.fill(text, WIDTH), re.M) and wrapped.split() == text.split() and
           not re.search(r"^(- |1\. )", wrapped, re.M), "no line starts a list: %r" % wrapped)
        ok(refused(section, tmp), "a results folder without the files")
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    print("self-test: ok (%d checks)" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
