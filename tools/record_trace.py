#!/usr/bin/env python3
"""record_trace.py: record a PyTorch program's GPU allocation trace for `vram replay`.

Record a whole script (it runs in this process through runpy, with the given arguments):

    python3 tools/record_trace.py -o OUT.trace.gz [--workload NAME] [--meta KEY=VALUE ...] \\
        -- script.py [args ...]

Record a part of a program:

    import record_trace                      # tools/ on sys.path
    with record_trace.recording("out.trace.gz", workload="my_job"):
        train()

Check a trace file (any producer; no torch needed):

    python3 tools/record_trace.py --check FILE [FILE ...]

Recording turns on PyTorch's allocation history
(torch.cuda.memory._record_memory_history(enabled="all", context=None, ...): no stack traces, so
it stays cheap), runs the program, takes torch.cuda.memory._snapshot() and converts the device's
trace entries into the text format of traces/README.md:

    a <id> <bytes> <stream> <time_us>      an 'alloc' entry, with a fresh id
    f <id> <time_us>                       the 'free_completed' entry at the same address

What the fields are:
  * bytes: the size the program asked the caching allocator for. PyTorch records the caller's
    request ('orig_size' in CUDACachingAllocator.cpp) in an 'alloc' entry, not the rounded block
    size it handed out (multiples of 512 bytes, 2 MiB or more for large requests). The header says
    bytes=requested.
  * the free is 'free_completed' by default: the moment the block returns to the allocator's pool
    and its address can be handed out again. 'free_requested' (the moment the program dropped the
    tensor) differs from it only for blocks used on another stream (record_stream), whose return
    waits for that stream's work; --free-event free_requested picks it instead.
  * stream is the cudaStream_t as an integer (0: the default stream); time_us the host clock (Unix
    microseconds) when the allocator handled the call.
An address is live once at a time, so each free is matched to the last allocation at its address.
Other entries (segment_alloc, segment_free, segment_map, segment_unmap, snapshot, oom) are skipped
(oom entries are counted in a comment). Frees of blocks allocated before recording started are
skipped and counted. Allocations still live when recording stops have no 'f' line.

Standard library and torch only; torch is imported only when recording.
"""

import argparse
import contextlib
import gzip
import os
import runpy
import sys

FORMAT_LINE = "# a <id> <bytes> <stream> <time_us> | f <id> <time_us>"
DEFAULT_MAX_ENTRIES = 10_000_000
FREE_EVENTS = ("free_completed", "free_requested")


# ---- conversion (no torch needed) ------------------------------------------------------------------

class Converted:
    """The result of converting one device's trace entries."""

    def __init__(self):
        self.lines = []          # 'a ...' / 'f ...' lines, without newlines
        self.allocs = 0
        self.frees = 0
        self.live_at_end = 0
        self.unmatched_frees = 0  # frees of addresses allocated before recording started
        self.reused_live = 0      # allocs at an address still live (a lost free): closed implicitly
        self.ooms = 0
        self.entries = 0
        self.peak_live_bytes = 0


def convert_entries(entries, free_event="free_completed"):
    """Converts a list of snapshot trace entries (dicts with 'action', 'addr', 'size', 'stream',
    'time_us') into trace lines. Returns a Converted."""
    if free_event not in FREE_EVENTS:
        raise ValueError("free_event must be one of %s" % (FREE_EVENTS,))
    out = Converted()
    live = {}        # addr -> (id, bytes)
    live_bytes = 0
    next_id = 0
    for e in entries:
        out.entries += 1
        action = e.get("action")
        if action == "alloc":
            addr = int(e["addr"])
            size = int(e["size"])
            t = int(e.get("time_us", 0))
            if addr in live:  # the free of the earlier block at this address was lost
                old_id, old_bytes = live.pop(addr)
                out.lines.append("f %d %d" % (old_id, t))
                out.frees += 1
                out.reused_live += 1
                live_bytes -= old_bytes
            out.lines.append("a %d %d %d %d" % (next_id, size, int(e.get("stream", 0)), t))
            live[addr] = (next_id, size)
            next_id += 1
            out.allocs += 1
            live_bytes += size
            if live_bytes > out.peak_live_bytes:
                out.peak_live_bytes = live_bytes
        elif action == free_event:
            addr = int(e["addr"])
            hit = live.pop(addr, None)
            if hit is None:
                out.unmatched_frees += 1
                continue
            out.lines.append("f %d %d" % (hit[0], int(e.get("time_us", 0))))
            out.frees += 1
            live_bytes -= hit[1]
        elif action == "oom":
            out.ooms += 1
        # everything else (the other free event, segment_*, snapshot) is skipped
    out.live_at_end = len(live)
    return out


def _header_value(text):
    """A header value: one line, no characters that would break 'key=value' reading at the end."""
    return " ".join(str(text).split())


def write_trace(path, conv, workload, source, device, meta=(), comments=()):
    """Writes a converted trace, gzip-compressed when path ends in .gz."""
    head = ["gpumem-trace v1", "workload=" + _header_value(workload), "source=" + _header_value(source)]
    for k, v in meta:
        head.append("%s=%s" % (_header_value(k), _header_value(v)))
    head.append("bytes=requested")
    # device last, as in the existing traces: its value has spaces.
    head.append("device=" + _header_value(device))
    text = ["# " + " ".join(head), FORMAT_LINE]
    for c in comments:
        text.append("# " + _header_value(c))
    text.extend(conv.lines)
    data = ("\n".join(text) + "\n").encode("ascii")
    tmp = path + ".tmp"
    if path.endswith(".gz"):
        # mtime=0: the same trace gives the same file
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9,
                                                   filename="", mtime=0) as gz:
            gz.write(data)
    else:
        with open(tmp, "wb") as f:
            f.write(data)
    os.replace(tmp, path)


# ---- recording (torch) -----------------------------------------------------------------------------

def _start_history(torch, max_entries, free_event):
    mem = torch.cuda.memory
    other = [a for a in ("free_requested", "free_completed") if a != free_event]
    skip = other + ["segment_alloc", "segment_free", "segment_map", "segment_unmap", "snapshot"]
    try:
        mem._record_memory_history(enabled="all", context=None, stacks="python",
                                   max_entries=max_entries, skip_actions=skip)
    except TypeError:  # a PyTorch without skip_actions
        mem._record_memory_history(enabled="all", context=None, stacks="python",
                                   max_entries=max_entries)


def _stop_history(torch):
    torch.cuda.memory._record_memory_history(enabled=None)


def _device_name(torch, dev):
    try:
        return torch.cuda.get_device_name(dev)
    except Exception:  # noqa: BLE001 - a name is only decoration
        return "unknown"


def _collect(torch, device, free_event, max_entries):
    """Takes the snapshot and converts the trace of `device` (None: the current device)."""
    if device is None:
        device = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    if torch.cuda.is_initialized():
        torch.cuda.synchronize(device)
    snap = torch.cuda.memory._snapshot()
    traces = snap.get("device_traces") or []
    entries = traces[device] if device < len(traces) else []
    conv = convert_entries(entries, free_event)
    if len(entries) >= max_entries:
        print("record_trace: warning: the history holds max_entries=%d entries; the earliest "
              "were dropped (raise --max-entries)" % max_entries, file=sys.stderr)
    return conv, device


def _comments(conv, free_event, device_index, extra=()):
    c = ["bytes: the size requested from PyTorch's caching allocator (torch.cuda.memory history "
         "'alloc' entries), not the rounded block size",
         "frees: '%s' entries matched to allocations by address; device index %d"
         % (free_event, device_index),
         "allocs %d, frees %d, live at the end %d, frees of earlier allocations skipped %d, "
         "ooms %d" % (conv.allocs, conv.frees, conv.live_at_end, conv.unmatched_frees, conv.ooms)]
    if conv.reused_live:
        c.append("%d frees were lost in the history and placed before the next alloc at the "
                 "same address" % conv.reused_live)
    c.extend(extra)
    return c


@contextlib.contextmanager
def recording(path, workload="unnamed", meta=(), device=None, free_event="free_completed",
              max_entries=DEFAULT_MAX_ENTRIES, comments=()):
    """Records the allocations made inside the `with` block into the trace file `path`.

    meta: (key, value) pairs added to the header line (e.g. [("steps", 5)]).
    device: the CUDA device index whose trace is written (default: the current device).
    Yields a dict that holds, after the block, 'allocs', 'frees', 'ops', 'peak_live_bytes'.
    The trace is written also when the block raises."""
    import torch  # noqa: PLC0415 - only recording needs torch

    if free_event not in FREE_EVENTS:
        raise ValueError("free_event must be one of %s" % (FREE_EVENTS,))
    result = {}
    _start_history(torch, max_entries, free_event)
    try:
        yield result
    finally:
        try:
            conv, dev = _collect(torch, device, free_event, max_entries)
        finally:
            _stop_history(torch)
        write_trace(path, conv, workload, "pytorch-" + torch.__version__, _device_name(torch, dev),
                    meta=list(meta), comments=_comments(conv, free_event, dev, comments))
        result.update(allocs=conv.allocs, frees=conv.frees, ops=conv.allocs + conv.frees,
                      peak_live_bytes=conv.peak_live_bytes, live_at_end=conv.live_at_end)


def run_script(script, args, out, workload, meta, device, free_event, max_entries):
    """Runs `script` with `args` as __main__ under recording(); returns its exit status."""
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status = 0
    note = []
    with recording(out, workload=workload, meta=meta, device=device, free_event=free_event,
                   max_entries=max_entries, comments=note) as res:
        try:
            globs = runpy.run_path(script, run_name="__main__")  # noqa: F841 - kept alive until the snapshot
        except SystemExit as e:
            if e.code is None or e.code == 0:
                status = 0
            elif isinstance(e.code, int):
                status = e.code
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException:  # noqa: BLE001 - the trace is still written; status says it failed
            import traceback  # noqa: PLC0415

            traceback.print_exc()
            status = 1
        if status:
            note.append("the recorded script exited with status %d: the trace is partial" % status)
    print("record_trace: %s: %d allocs, %d frees, %d ops, peak live %d bytes, %d live at the end"
          % (out, res["allocs"], res["frees"], res["ops"], res["peak_live_bytes"],
             res["live_at_end"]), file=sys.stderr)
    return status


# ---- checking (no torch needed) --------------------------------------------------------------------

class TraceError(Exception):
    pass


def check_trace(path):
    """Reads and validates a trace file. Returns a dict of counts; raises TraceError."""
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    live = {}
    seen = set()
    allocs = frees = 0
    live_bytes = peak = 0
    header = None
    try:
        with opener(path, "rt", encoding="ascii") as f:
            for lineno, line in enumerate(f, 1):
                tok = line.split()
                if not tok:
                    continue
                if tok[0].startswith("#"):
                    if header is None and "gpumem-trace" in line:
                        header = line.strip()
                    continue
                where = "%s:%d: " % (path, lineno)
                try:
                    if tok[0] == "a":
                        if len(tok) != 5:
                            raise ValueError
                        ident, size, _stream, _t = (int(x) for x in tok[1:])
                        if size < 0:
                            raise ValueError
                    elif tok[0] == "f":
                        if len(tok) != 3:
                            raise ValueError
                        ident, _t = int(tok[1]), int(tok[2])
                    else:
                        raise TraceError(where + "unknown event %r (expected 'a', 'f' or '#')" % tok[0])
                except ValueError:
                    raise TraceError(where + "malformed line: %r" % line.strip()) from None
                if tok[0] == "a":
                    if ident in seen:
                        raise TraceError(where + "id %d allocated twice" % ident)
                    seen.add(ident)
                    live[ident] = size
                    allocs += 1
                    live_bytes += size
                    peak = max(peak, live_bytes)
                else:
                    size = live.pop(ident, None)
                    if size is None:
                        raise TraceError(where + "free of id %d, which is not live" % ident)
                    frees += 1
                    live_bytes -= size
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TraceError("%s: %s" % (path, e)) from None
    return {"header": header, "allocs": allocs, "frees": frees, "ops": allocs + frees,
            "live_at_end": len(live), "live_bytes_at_end": live_bytes, "peak_live_bytes": peak}


def _check_main(paths):
    bad = 0
    for p in paths:
        try:
            r = check_trace(p)
        except TraceError as e:
            print("%s" % e, file=sys.stderr)
            bad += 1
            continue
        print("%s: ok" % p)
        if r["header"]:
            print("  header:          %s" % r["header"])
        print("  allocs:          {:,}".format(r["allocs"]))
        print("  frees:           {:,}".format(r["frees"]))
        print("  ops (a + f):     {:,}".format(r["ops"]))
        print("  live at the end: {:,} ({:,} bytes)".format(r["live_at_end"], r["live_bytes_at_end"]))
        print("  peak live bytes: {:,}".format(r["peak_live_bytes"]))
    return 1 if bad else 0


# ---- command line ----------------------------------------------------------------------------------

def _torch_problem():
    """Why recording cannot start here (one sentence), or None: PyTorch missing, or without CUDA."""
    try:
        import torch  # noqa: PLC0415 - only recording needs torch
    except ImportError as e:
        return ("recording needs PyTorch, and this Python (%s) cannot import it (%s); install torch here, "
                "or use --check FILE to validate a trace without it" % (sys.executable, e))
    if not torch.cuda.is_available():
        return ("PyTorch %s sees no CUDA device, so there is no GPU allocation to record "
                "(check CUDA_VISIBLE_DEVICES and the driver)" % torch.__version__)
    return None


def _parse_meta(items):
    meta = []
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k or any(c.isspace() for c in k):
            raise SystemExit("record_trace: --meta wants KEY=VALUE, got %r" % item)
        meta.append((k, v))
    return meta


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, script_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(
        prog="record_trace.py",
        description="Record a PyTorch script's GPU allocation trace (traces/README.md format), "
                    "or check trace files.",
        usage="%(prog)s -o OUT.trace.gz [--workload NAME] [options] -- script.py [args ...]\n"
              "       %(prog)s --check FILE [FILE ...]")
    ap.add_argument("-o", "--output", help="trace file to write (.gz: gzip-compressed)")
    ap.add_argument("--workload", help="workload name for the header (default: the script's name)")
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                    help="extra header field, e.g. steps=5 (repeatable)")
    ap.add_argument("--device", type=int, default=None,
                    help="CUDA device index whose allocations are written (default: current)")
    ap.add_argument("--free-event", choices=FREE_EVENTS, default="free_completed",
                    help="which history entry is the free (default: free_completed, when the "
                         "block is back in the allocator's pool)")
    ap.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES,
                    help="history ring-buffer size (default %d)" % DEFAULT_MAX_ENTRIES)
    ap.add_argument("--check", nargs="+", metavar="FILE", help="validate trace files and print counts")
    a = ap.parse_args(argv)
    if a.check:
        if script_args or a.output:
            ap.error("--check takes trace files only")
        return _check_main(a.check)
    if not a.output:
        ap.error("-o OUT is required (or --check FILE)")
    if not script_args:
        ap.error("name the script to record after '--'")
    if a.max_entries < 1:
        ap.error("--max-entries must be positive")
    script = script_args[0]
    if not os.path.isfile(script):
        ap.error("no such script: %s" % script)
    problem = _torch_problem()
    if problem:
        print("record_trace: %s" % problem, file=sys.stderr)
        return 1
    workload = a.workload or os.path.splitext(os.path.basename(script))[0]
    return run_script(script, script_args[1:], a.output, workload, _parse_meta(a.meta), a.device,
                      a.free_event, a.max_entries)


if __name__ == "__main__":
    sys.exit(main())
