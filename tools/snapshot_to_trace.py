#!/usr/bin/env python3
"""snapshot_to_trace.py: convert a PyTorch memory snapshot into a vram trace, for `vram report`.

    python3 tools/snapshot_to_trace.py SNAPSHOT.pickle -o OUT.trace[.gz] [--device N]
                                       [--free-event free_completed|free_requested]
    vram report SNAPSHOT.pickle -o report.html        # runs this converter itself

SNAPSHOT.pickle is what torch.cuda.memory._dump_snapshot(path) writes after
torch.cuda.memory._record_memory_history(): a dict with 'segments' (the allocator's segments at the
moment of the dump, each with 'address', 'total_size', 'blocks' of 'address', 'size',
'requested_size', 'state', 'frames') and 'device_traces' (one list per device of entries with
'action' (alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
segment_unmap, snapshot, oom), 'addr', 'size', 'stream', 'time_us', 'frames' (dicts of 'filename',
'line', 'name')). No torch needed: standard library only (pickle, gzip).

The trace (traces/README.md) gets:
  a <id> <bytes> <stream> <time_us> / f <id> <time_us>   each alloc, and its free (free_completed by
      default) matched by address to the last allocation there;
  # frames <id> F1<TAB>F2...    the allocation's stack, innermost first, "file:line:function";
  # reserved <bytes>            the recording allocator's reserved bytes from here on: its segments'
      bytes, counted back from the snapshot's segments through segment_alloc / segment_free /
      segment_map / segment_unmap, so that `vram report` draws it beside vram's.
Blocks live before the history starts (freed in it without an alloc, or allocated in the segments
and never touched by it) are allocated at the start, with the frames the segments give them.

A snapshot is untrusted data: it is read with an unpickler that builds plain data only (dicts, lists,
tuples, sets, strings, bytes, numbers, booleans and None; a real snapshot holds nothing else) and
refuses, before anything is run, every pickle that names a callable or a class (GLOBAL, STACK_GLOBAL,
INST, OBJ, an extension code) or a persistent id, naming what it asked for.
Exit status 0, 1 on an unreadable, unsafe or malformed snapshot (one line on stderr), 2 on usage errors.
"""

import argparse
import gzip
import pickle
import reprlib
import sys

FREE_EVENTS = ("free_completed", "free_requested")
SEGMENT_GROW = ("segment_alloc", "segment_map")
SEGMENT_SHRINK = ("segment_free", "segment_unmap")


class SnapshotError(Exception):
    """A snapshot that cannot be converted; the message is one sentence."""


def _frames_text(frames):
    out = []
    for f in frames or ():
        if isinstance(f, dict):
            name = str(f.get("name", "?"))
            fn = str(f.get("filename", "?"))
            out.append("%s:%s:%s" % (fn, f.get("line", "?"), name))
    return "\t".join(s.replace("\t", " ").replace("\n", " ") for s in out)


# ---- reading: plain data only ------------------------------------------------------------------

class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data only. Dicts, lists, tuples, sets, strings, bytes, numbers,
    booleans and None have opcodes of their own; everything else (a class, a function) reaches the
    unpickler through find_class (GLOBAL, STACK_GLOBAL, INST, OBJ, EXT1/2/4) or persistent_load, which
    refuse it before anything is called."""

    def find_class(self, module, name):
        raise SnapshotError("refused: the pickle asks for %s.%s, and a snapshot is plain data (dicts, lists, "
                            "strings, numbers); nothing in it is run" % (_cut(module), _cut(name)))

    def persistent_load(self, pid):
        raise SnapshotError("refused: the pickle asks for a persistent object %s, and a snapshot is plain "
                            "data (dicts, lists, strings, numbers)" % _shown(pid))


def load(path):
    try:
        with open(path, "rb") as f:
            data = _PlainUnpickler(f).load()
    except OSError as e:
        raise SnapshotError("%s: cannot read: %s" % (path, e.strerror or e)) from None
    except SnapshotError as e:
        raise SnapshotError("%s: %s" % (path, e)) from None
    except Exception as e:  # noqa: BLE001 - unpickling errors of every kind: one sentence
        if isinstance(e, ValueError) and "extension code" in str(e):
            raise SnapshotError("%s: refused: the pickle asks for an object by extension code, and a snapshot "
                                "is plain data (dicts, lists, strings, numbers)" % path) from None
        raise SnapshotError("%s: not a snapshot pickle (%s: %s)" % (path, type(e).__name__, e)) from None
    if not isinstance(data, dict) or "device_traces" not in data or "segments" not in data:
        raise SnapshotError("%s: not a PyTorch memory snapshot (no 'segments' and 'device_traces'); "
                            "write one with torch.cuda.memory._dump_snapshot()" % path)
    return data


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 2, 40, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def _shown(value):
    """A short, one-line picture of a value from the snapshot, for messages."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return "a %d-bit number" % value.bit_length()
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - (a huge number inside a list, say): the type is enough
        return "a %s" % type(value).__name__


def _cut(s, most=80):
    """s cut to `most` characters, for messages (main escapes what is not printable)."""
    s = str(s)
    return s if len(s) <= most else s[:most] + "..."


def _pick_device(data, device):
    traces = data["device_traces"]
    if device is not None:
        if device >= len(traces):
            raise SnapshotError("the snapshot has no device %d (it has %d)" % (device, len(traces)))
        return device
    busiest = max(range(len(traces)), key=lambda d: len(traces[d]), default=None)
    if busiest is None or not traces[busiest]:
        raise SnapshotError("the snapshot has no trace entries: record it after "
                            "torch.cuda.memory._record_memory_history()")
    return busiest


def convert(data, device=None, free_event="free_completed"):
    """Returns (lines, stats): the trace lines (without newlines) and counts for comments."""
    dev = _pick_device(data, device)
    entries = data["device_traces"][dev]
    segments = [s for s in data["segments"] if s.get("device", dev) == dev]
    t0 = entries[0].get("time_us", 0) if entries else 0

    # the recording allocator's reserved bytes before the first entry
    reserved = sum(int(s.get("total_size", 0)) for s in segments)
    for e in entries:
        if e.get("action") in SEGMENT_GROW:
            reserved -= int(e.get("size", 0))
        elif e.get("action") in SEGMENT_SHRINK:
            reserved += int(e.get("size", 0))
    reserved = max(reserved, 0)

    # blocks live before the history: freed without an alloc, or allocated and never touched
    seen_alloc, pre = set(), {}
    for e in entries:
        a = e.get("action")
        if a == "alloc":
            seen_alloc.add(e["addr"])
        elif a == free_event and e["addr"] not in seen_alloc and e["addr"] not in pre:
            pre[e["addr"]] = (int(e.get("size", 0)), e.get("frames"))
    touched = {e.get("addr") for e in entries}
    for s in segments:
        for b in s.get("blocks", ()):
            if b.get("state") == "active_allocated" and b["address"] not in touched and b["address"] not in pre:
                pre[b["address"]] = (int(b.get("requested_size", b.get("size", 0))), b.get("frames"))

    lines = ["# reserved %d" % reserved]
    live = {}        # addr -> id
    next_id = 0
    stats = {"allocs": 0, "frees": 0, "before": len(pre), "ooms": 0, "entries": len(entries), "device": dev}

    def alloc(addr, size, stream, t, frames):
        nonlocal next_id
        i = next_id
        next_id += 1
        live[addr] = i
        lines.append("a %d %d %d %d" % (i, size, int(stream or 0), t))
        text = _frames_text(frames)
        if text:
            lines.append("# frames %d %s" % (i, text))
        stats["allocs"] += 1

    for addr, (size, frames) in sorted(pre.items()):
        alloc(addr, size, 0, t0, frames)
    for e in entries:
        a = e.get("action")
        t = int(e.get("time_us", t0))
        if a == "alloc":
            if e["addr"] in live:            # a lost free: close the old one here
                lines.append("f %d %d" % (live.pop(e["addr"]), t))
                stats["frees"] += 1
            alloc(e["addr"], int(e.get("size", 0)), e.get("stream", 0), t, e.get("frames"))
        elif a == free_event and e["addr"] in live:
            lines.append("f %d %d" % (live.pop(e["addr"]), t))
            stats["frees"] += 1
        elif a in SEGMENT_GROW or a in SEGMENT_SHRINK:
            reserved += int(e.get("size", 0)) * (1 if a in SEGMENT_GROW else -1)
            lines.append("# reserved %d" % max(reserved, 0))
        elif a == "oom":
            stats["ooms"] += 1
    return lines, stats


def write(out, lines, stats, source):
    head = ["# gpumem-trace v1 workload=snapshot source=%s bytes=requested device=cuda:%d"
            % (source.replace(" ", "_"), stats["device"]),
            "# a <id> <bytes> <stream> <time_us> | f <id> <time_us>",
            "# converted by tools/snapshot_to_trace.py from %d entries: %d allocs (%d live before the history), "
            "%d frees, %d oom entries" % (stats["entries"], stats["allocs"], stats["before"], stats["frees"],
                                           stats["ooms"])]
    text = "\n".join(head + lines) + "\n"
    if out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    elif out.endswith(".gz"):
        with gzip.open(out, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Convert a PyTorch memory snapshot (pickle) into a vram trace.")
    ap.add_argument("snapshot")
    ap.add_argument("-o", "--output", required=True, help="the trace to write (.gz: compressed; -: stdout)")
    ap.add_argument("--device", type=int, default=None, help="device index (default: the one with most entries)")
    ap.add_argument("--free-event", choices=FREE_EVENTS, default="free_completed")
    args = ap.parse_args(argv)
    try:
        data = load(args.snapshot)
        lines, stats = convert(data, args.device, args.free_event)
        write(args.output, lines, stats, args.snapshot.rsplit("/", 1)[-1])
    except SnapshotError as e:
        print("snapshot_to_trace: %s" % e, file=sys.stderr)
        return 1
    except (KeyError, TypeError, ValueError) as e:
        print("snapshot_to_trace: %s: malformed snapshot entry (%s: %s)" % (args.snapshot, type(e).__name__, e),
              file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
