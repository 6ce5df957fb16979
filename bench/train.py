#!/usr/bin/env python3
"""bench/train.py: real training (and generation) steps with PyTorch's allocators and with vram.

Every (workload, allocator) runs in its own process, so that PYTORCH_CUDA_ALLOC_CONF is read by a
fresh PyTorch and vram is installed before PyTorch's first CUDA allocation. Random weights and
data, nothing downloaded.

  python3 bench/train.py [--workloads gpt2,resnet50,bert_varlen,gpt2_generate]
                         [--allocators torch,torch-expandable,torch-async,vram]
                         [--steps N] [--warmup W] [--repeat K] [--out DIR] [--timeout S] [--cpus LIST]
      the driver (default): runs every child, K rounds interleaved, writes OUT/train.jsonl (a
      {"meta": ...} line first), OUT/table.md and OUT/logs/, prints one Markdown table per workload.
  python3 bench/train.py --worker WORKLOAD ALLOCATOR [--steps N] [--warmup W]
      one child: runs the workload under the allocator in this process, prints one JSON line.
  python3 bench/train.py --prepare [--vram]
      builds (or loads PyTorch's cached build of) vram.torch's allocator library (or its forwarder), prints versions as JSON.
  python3 bench/train.py --table OUT/train.jsonl
      prints the tables again from a results file.
  python3 bench/train.py --self-test
      checks argument parsing, statistics, the driver's order and failure handling, and the tables
      with fake numbers: no PyTorch, no GPU.

Allocators: torch (PYTORCH_CUDA_ALLOC_CONF unset), torch-expandable (expandable_segments:True),
torch-async (backend:cudaMallocAsync), vram (vram.torch.install() before the first CUDA allocation,
memory growth on GPU 0, no limit; libvram.so from VRAM_LIBRARY or the package's own search).

The workloads are bench/workloads (a module each), the child bench/train_worker.py, the tables
bench/train_table.py, the self-test bench/train_selftest.py; this file holds the command line and the
driver. PyTorch is imported only by the worker and prepare modes; the driver, --table and --self-test
need only the standard library. The driver runs one child at a time: no threads, no locks.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from table import last_json_object, load_results  # noqa: E402  (bench/table.py)
from train_table import ALLOCATORS, GIB, one_line, render  # noqa: E402  (bench/train_table.py)
from train_worker import prepare_main, worker_main  # noqa: E402  (bench/train_worker.py)
from workloads import DEFAULT_STEPS, MODEL_WORKLOADS, PROGRAM_WORKLOADS, WORKLOADS  # noqa: E402  (bench/workloads)

ALLOC_CONF = {
    "torch": None,
    "torch-expandable": "expandable_segments:True",
    "torch-async": "backend:cudaMallocAsync",
    "vram": None,
}


def say(msg):
    print("== " + msg, file=sys.stderr, flush=True)


# ---- the driver ------------------------------------------------------------------------------------

def last_line(text, limit=400):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:limit] if lines else ""


def child_env(allocator, base=None, vram_alloc_conf=None):
    env = dict(os.environ if base is None else base)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    conf = ALLOC_CONF[allocator]
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    if allocator == "vram" and vram_alloc_conf:
        env["VRAM_ALLOC_CONF"] = vram_alloc_conf
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(argv, env, timeout, log_base):
    """Runs one child in its own session, stdout/stderr to log_base.out/.err; kills its process group on
    timeout. Returns (rc, stdout, stderr, seconds); rc is None after a timeout."""
    t0 = time.time()
    with open(log_base + ".out", "w") as out, open(log_base + ".err", "w") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=REPO, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the child and what it started (the compiler in --prepare)
            except ProcessLookupError:
                pass
            p.wait()
            if isinstance(e, KeyboardInterrupt):  # the child has its own session: Ctrl-C reaches only us
                raise
            rc = None
    with open(log_base + ".out", errors="replace") as f:
        stdout = f.read()
    with open(log_base + ".err", errors="replace") as f:
        stderr = f.read()
    return rc, stdout, stderr, time.time() - t0


def row_from_child(workload, allocator, rnd, rc, stdout, stderr, seconds, timeout):
    obj = last_json_object(stdout)
    if rc is None:
        row = {"error": "timed out after %d s (--timeout)" % timeout}
    elif obj is None:
        row = {"error": "exit status %d, no result%s" % (rc, (": " + last_line(stderr)) if last_line(stderr) else "")}
    else:
        row = obj
        if rc != 0 and "error" not in row and "skipped" not in row:
            if row.get("step_ms_median") is not None:  # measured, then failed on the way out: keep the numbers
                row["warning"] = "exit status %d after its result: %s" % (rc, last_line(stderr))
            else:
                row["error"] = "exit status %d: %s" % (rc, last_line(stderr))
    row["workload"], row["allocator"], row["round"] = workload, allocator, rnd
    row["rc"] = rc
    row["wall_s"] = round(seconds, 1)
    return row


def plan(workloads, allocators, repeat):
    """The children in run order: per workload, round 1 of every allocator, then round 2 (in reverse
    order, so that drift and order effects fall on every allocator alike), ..."""
    order = []
    for w in workloads:
        for r in range(1, repeat + 1):
            seq = allocators if r % 2 == 1 else list(reversed(allocators))
            order.extend((w, a, r) for a in seq)
    return order


def nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader", "-i", "0"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    parts = [p.strip() for p in out.stdout.strip().split(",")]
    if out.returncode != 0 or len(parts) != 3:
        return {}
    return {"gpu": parts[0], "driver": parts[1], "memory": parts[2]}


def git_commit():
    """The commit of this tree (VRAM_COMMIT when it is a copy of the sources, not a checkout of its own)."""
    if os.environ.get("VRAM_COMMIT"):
        return os.environ["VRAM_COMMIT"]
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, cwd=REPO,
                             timeout=30).stdout.strip()
        if not top or os.path.realpath(top) != os.path.realpath(REPO):
            return "unknown"
        c = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO,
                           timeout=30).stdout.strip()
        if not c:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=REPO, timeout=30).stdout.strip()
        return c + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def steps_for(workload, args):
    warmup, steps = DEFAULT_STEPS[workload]
    return (args.warmup if args.warmup is not None else warmup), (args.steps if args.steps is not None else steps)


def _meta(args, machine):
    """The results file's {"meta": ...}: date, command, commit, the run's arguments, the machine."""
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": os.environ.get("VRAM_TRAIN_COMMAND") or "python3 bench/train.py " + " ".join(args.argv),
            "commit": git_commit(),
            "repeat": args.repeat, "workloads": args.workloads, "allocators": args.allocators,
            "steps": {w: dict(zip(("warmup", "steps"), steps_for(w, args))) for w in args.workloads},
            "timeout_s": args.timeout, "vram_alloc_conf": args.vram_alloc_conf, "cpus": args.cpus,
            "vram_library_env": os.environ.get("VRAM_LIBRARY"),
            "step_time": "per process: median over the timed steps (torch.cuda.synchronize before and after each); "
                         "per row: the lowest of the rounds' medians; the verdict: pooled over the rounds, per "
                         "shape the median of all its steps, averaged over the shapes"}
    meta.update(nvidia_smi() if machine is None else machine)
    if os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
        meta["ignored_env"] = "PYTORCH_CUDA_ALLOC_CONF=%s (each child gets its allocator's own)" % (
            os.environ["PYTORCH_CUDA_ALLOC_CONF"])
    return meta


def _prepare(args, runner, py, me, meta, results):
    """Runs the untimed --prepare child and adds its versions to meta; returns 2 (after writing the meta
    line) when the children's interpreter has no PyTorch, else None."""
    # One untimed child first: versions, and vram.torch's allocator library compiled (about a minute the first
    # time; PyTorch caches it) so that no timed child pays for the compiler.
    with_vram = "vram" in args.allocators
    say("preparing: versions%s" % (", building vram.torch's allocator library (cached after the first time)"
                                   if with_vram else ""))
    argv = [py, me, "--prepare"] + (["--vram"] if with_vram else [])
    rc, stdout, stderr, secs = runner(argv, child_env("vram" if with_vram else "torch",
                                                      vram_alloc_conf=args.vram_alloc_conf),
                                      args.timeout, os.path.join(args.out, "logs", "prepare"))
    prep = last_json_object(stdout) or {"error": "prepare: exit status %s: %s" % (rc, last_line(stderr))}
    meta.update({k: v for k, v in prep.items() if k not in ("error",)})
    meta["prepare_s"] = round(secs, 1)
    if "error" in prep:  # no PyTorch for the children's interpreter: every child would fail the same way
        meta["prepare_error"] = prep["error"]
        say("stopping: %s" % prep["error"])
        with open(results, "w") as f:
            f.write(json.dumps({"meta": meta}) + "\n")
        return 2
    if prep.get("vram_error"):
        say("vram could not be prepared: %s" % prep["vram_error"])
    elif prep.get("vram_warning"):
        say("vram: %s" % prep["vram_warning"])
    return None


def _run_children(args, runner, py, me, results):
    """Runs the timed children in plan order, appending each one's row to results (after its meta line);
    returns the rows."""
    rows = []
    order = plan(args.workloads, args.allocators, args.repeat)
    skipped = {}
    t_start = time.time()
    for k, (w, a, r) in enumerate(order, 1):
        tag = "[%d/%d] %s %s round %d/%d" % (k, len(order), w, a, r, args.repeat)
        if w in skipped:
            row = {"workload": w, "allocator": a, "round": r, "skipped": skipped[w]}
        else:
            warmup, steps = steps_for(w, args)
            argv = (["taskset", "-c", args.cpus] if args.cpus else []) + [
                py, me, "--worker", w, a, "--steps", str(steps), "--warmup", str(warmup)]
            log = os.path.join(args.out, "logs", "%s.%s.r%d" % (w, a, r))
            rc, stdout, stderr, secs = runner(argv, child_env(a, vram_alloc_conf=args.vram_alloc_conf),
                                              args.timeout, log)
            row = row_from_child(w, a, r, rc, stdout, stderr, secs, args.timeout)
            if "skipped" in row:
                skipped[w] = row["skipped"]
        rows.append(row)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        if "skipped" in row:
            say("%s: skipped: %s" % (tag, row["skipped"]))
        elif "error" in row:
            say("%s: FAILED in %.0f s: %s" % (tag, row.get("wall_s", 0), one_line(row["error"])))
        else:
            say("%s: %.2f ms median, %.3f GiB peak reserved, %.3f GiB device used (%.0f s; %.0f s so far)" % (
                tag, row["step_ms_median"], row["peak_reserved_bytes"] / GIB, row["device_used_peak_bytes"] / GIB,
                row.get("wall_s", 0), time.time() - t_start))
    return rows


def run_driver(args, runner=run_child, machine=None, out_stream=None):
    """Runs every child (runner(argv, env, timeout, log_base) -> (rc, stdout, stderr, seconds)), writes
    OUT/train.jsonl and OUT/table.md, prints the tables. Returns 0; 1 when no child gave a result; 2 when
    the children's interpreter has no PyTorch (nothing is run)."""
    out_stream = out_stream or sys.stdout
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    results = os.path.join(args.out, "train.jsonl")
    py = args.python or sys.executable
    me = os.path.abspath(__file__)
    meta = _meta(args, machine)
    rc = _prepare(args, runner, py, me, meta, results)
    if rc is not None:
        return rc
    with open(results, "w") as f:
        f.write(json.dumps({"meta": meta}) + "\n")
    rows = _run_children(args, runner, py, me, results)
    table = render(meta, rows)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    say("results: %s; table: %s" % (results, os.path.join(args.out, "table.md")))
    out_stream.write("\n" + table)
    out_stream.flush()
    return 0 if any("error" not in r and "skipped" not in r for r in rows) else 1


# ---- the command line ------------------------------------------------------------------------------

def _names(text, known, what):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError("unknown %s %s (choose from %s)" % (what, ", ".join(bad) or "(none)",
                                                                           ", ".join(known)))
    return list(dict.fromkeys(names))


def _positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1: %s" % text)
    return v


def _non_negative(text):
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError("must not be negative: %s" % text)
    return v


def _cpu_list(text):
    import re
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", text):
        raise argparse.ArgumentTypeError("a CPU list as taskset -c takes it, e.g. 2-5 or 2,4,6: %s" % text)
    return text


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="train.py",
        description="Training step time and peak memory of real workloads with PyTorch's allocators and vram. "
                    "The driver (default) runs every (workload, allocator) in its own process.")
    ap.add_argument("--workloads", type=lambda s: _names(s, WORKLOADS, "workload"), default=list(MODEL_WORKLOADS),
                    help="comma-separated, from %s (default: %s; the framework programs %s need transformers "
                         "with accelerate, lightning, timm)" % (",".join(WORKLOADS), ",".join(MODEL_WORKLOADS),
                                                               ",".join(PROGRAM_WORKLOADS)))
    ap.add_argument("--allocators", type=lambda s: _names(s, ALLOCATORS, "allocator"), default=list(ALLOCATORS),
                    help="comma-separated, from %s (default: all)" % ",".join(ALLOCATORS))
    ap.add_argument("--steps", type=_positive, default=None,
                    help="timed steps a process (default per workload: %s)" % ", ".join(
                        "%s %d" % (w, DEFAULT_STEPS[w][1]) for w in WORKLOADS))
    ap.add_argument("--warmup", type=_non_negative, default=None,
                    help="untimed steps first (default per workload: %s)" % ", ".join(
                        "%s %d" % (w, DEFAULT_STEPS[w][0]) for w in WORKLOADS))
    ap.add_argument("--repeat", type=_positive, default=2, help="processes per (workload, allocator), interleaved "
                                                                "(default 2)")
    ap.add_argument("--out", default=os.path.join(REPO, "build-bench", "train"),
                    help="where train.jsonl, table.md and logs/ go (default build-bench/train)")
    ap.add_argument("--timeout", type=_positive, default=900, help="limit for one child in seconds (default 900)")
    ap.add_argument("--vram-alloc-conf", default=None, help="VRAM_ALLOC_CONF for the vram children (default: none)")
    ap.add_argument("--python", default=None, help="interpreter for the children (default: this one)")
    ap.add_argument("--cpus", type=_cpu_list, default=None,
                    help="run each timed child under `taskset -c CPUS` (e.g. 2-5), so that a host-bound "
                         "workload (gpt2_generate) does not move between CPUs (default: not pinned)")
    ap.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "ALLOCATOR"),
                    help="run one (workload, allocator) in this process and print one JSON line")
    ap.add_argument("--prepare", action="store_true", help="print versions as JSON (and build vram's allocator library "
                                                           "with --vram)")
    ap.add_argument("--vram", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--table", metavar="JSONL", help="print the tables from a results file")
    ap.add_argument("--self-test", action="store_true", help="check this script without PyTorch or a GPU "
                                                             "(runs bench/train_selftest.py)")
    args = ap.parse_args(argv)
    if args.worker:
        w, a = args.worker
        if w not in WORKLOADS:
            ap.error("unknown workload %r (choose from %s)" % (w, ", ".join(WORKLOADS)))
        if a not in ALLOCATORS:
            ap.error("unknown allocator %r (choose from %s)" % (a, ", ".join(ALLOCATORS)))
    args.argv = list(argv)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.self_test:  # a program of its own, which imports this one
        return subprocess.call([sys.executable, os.path.join(HERE, "train_selftest.py")])
    if args.table:
        meta, rows = load_results(args.table)
        sys.stdout.write(render(meta, rows))
        return 0
    if args.prepare:
        return prepare_main(args.vram)
    if args.worker:
        w, a = args.worker
        warmup, steps = steps_for(w, args)
        return worker_main(w, a, steps, warmup)
    return run_driver(args)


if __name__ == "__main__":
    sys.exit(main())
