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
INST, OBJ, an extension code) or a persistent id, naming what it asked for. Every field the
conversion uses is checked for its type and range (sizes and addresses whole numbers from 0 to
2**64 - 1, streams and times signed 64-bit) and the first one at fault is named by its place
("device_traces[0][12]['size'] is inf, not a whole number ..."). Text from the snapshot (frames, the
file's name) is written with control characters turned into spaces, so each event stays one line.
Exit status 0, 1 on an unreadable, unsafe or malformed snapshot or an unwritable output (one line on
stderr, never a traceback), 2 on usage errors.
"""

import argparse
import gzip
import pickle
import re
import reprlib
import sys

FREE_EVENTS = ("free_completed", "free_requested")
SEGMENT_GROW = ("segment_alloc", "segment_map")
SEGMENT_SHRINK = ("segment_free", "segment_unmap")
U64 = (0, 2 ** 64 - 1)               # sizes, addresses: the trace's unsigned 64-bit fields
I64 = (-2 ** 63, 2 ** 63 - 1)        # streams, times, devices, frame lines: its signed ones
_REQUIRED = object()
_CONTROL = {c: " " for c in list(range(0x20)) + [0x7f, 0x85, 0x2028, 0x2029]}   # (what may end a line)


class SnapshotError(Exception):
    """A snapshot that cannot be converted; the message is one sentence."""


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


# ---- checking what the conversion uses ---------------------------------------------------------

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


def _text(s):
    """s (a string, else its short picture) with control characters as spaces: one line, one field."""
    return (s if isinstance(s, str) else _shown(s)).translate(_CONTROL)


def _list(value, where):
    if not isinstance(value, (list, tuple)):
        raise SnapshotError("%s is %s, not a list" % (where, _shown(value)))
    return value


def _dict(value, where):
    if not isinstance(value, dict):
        raise SnapshotError("%s is %s, not a dict" % (where, _shown(value)))
    return value


def _whole(value, where, bounds):
    """value, a whole number (an int, not a bool) within bounds."""
    if isinstance(value, bool) or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
        raise SnapshotError("%s is %s, not a whole number from %d to %d" % (where, _shown(value), bounds[0],
                                                                             bounds[1]))
    return value


def _field(d, key, where, bounds=U64, default=_REQUIRED, none_is_default=False):
    """d[key] checked by _whole; `default` when absent (and when None, with none_is_default)."""
    value = d.get(key, _REQUIRED)
    if value is _REQUIRED or (value is None and none_is_default):
        if default is _REQUIRED:
            raise SnapshotError("%s has no %r" % (where, key))
        return default
    return _whole(value, "%s[%r]" % (where, key), bounds)


def _frames_text(frames, where):
    if frames is None:
        return ""
    out = []
    for k, f in enumerate(_list(frames, where)):
        f = _dict(f, "%s[%d]" % (where, k))
        line = f.get("line", "?")
        if not isinstance(line, str):
            _whole(line, "%s[%d]['line']" % (where, k), I64)
        out.append("%s:%s:%s" % (_text(f.get("filename", "?")), _text(line), _text(f.get("name", "?"))))
    return "\t".join(out)


def _pick_device(traces, device):
    if device is not None:
        if device >= len(traces):
            raise SnapshotError("the snapshot has no device %d (it has %d)" % (device, len(traces)))
        return device
    busiest = max(range(len(traces)), key=lambda d: len(traces[d]), default=None)
    if busiest is None or not traces[busiest]:
        raise SnapshotError("the snapshot has no trace entries: record it after "
                            "torch.cuda.memory._record_memory_history()")
    return busiest


# ---- conversion ----------------------------------------------------------------------------------

def convert(data, device=None, free_event="free_completed"):
    """Returns (lines, stats): the trace lines (without newlines) and counts for comments; SnapshotError
    naming the first field at fault."""
    traces = _list(data["device_traces"], "'device_traces'")
    for d, t in enumerate(traces):
        _list(t, "device_traces[%d]" % d)
    all_segments = _list(data["segments"], "'segments'")
    dev = _pick_device(traces, device)

    # the entries of that device: (action, addr, size, stream, time_us, frames, where), checked
    entries = []
    t0 = None
    for k, e in enumerate(traces[dev]):
        where = "device_traces[%d][%d]" % (dev, k)
        e = _dict(e, where)
        a = e.get("action")
        uses_addr = a == "alloc" or a == free_event
        addr = _field(e, "addr", where, U64, _REQUIRED if uses_addr else None)
        size = _field(e, "size", where, U64, 0)
        stream = _field(e, "stream", where, I64, 0, none_is_default=True)   # (as before: None is 0)
        t = _field(e, "time_us", where, I64, t0 if t0 is not None else 0)
        if t0 is None:
            t0 = t
        entries.append((a, addr, size, stream, t, e.get("frames"), where))
    t0 = t0 or 0

    segments = []
    for k, s in enumerate(all_segments):
        where = "segments[%d]" % k
        s = _dict(s, where)
        if _field(s, "device", where, I64, dev) == dev:
            segments.append((s, where))

    # the recording allocator's reserved bytes before the first entry
    reserved = sum(_field(s, "total_size", where, U64, 0) for s, where in segments)
    for a, _, size, _, _, _, _ in entries:
        if a in SEGMENT_GROW:
            reserved -= size
        elif a in SEGMENT_SHRINK:
            reserved += size
    reserved = max(reserved, 0)

    def reserved_line(value):
        if value > U64[1]:
            raise SnapshotError("the snapshot's reserved bytes (its segments' total_size, and segment_alloc and "
                                "segment_map sizes) add up beyond 64 bits: %d" % value)
        return "# reserved %d" % value

    # blocks live before the history: freed without an alloc, or allocated and never touched
    seen_alloc, pre = set(), {}
    for a, addr, size, _, _, frames, where in entries:
        if a == "alloc":
            seen_alloc.add(addr)
        elif a == free_event and addr not in seen_alloc and addr not in pre:
            pre[addr] = (size, frames, where)
    touched = {addr for _, addr, _, _, _, _, _ in entries}
    for s, where in segments:
        blocks = _list(s.get("blocks", ()), "%s['blocks']" % where)
        for k, b in enumerate(blocks):
            bwhere = "%s['blocks'][%d]" % (where, k)
            b = _dict(b, bwhere)
            if b.get("state") != "active_allocated":
                continue
            address = _field(b, "address", bwhere, U64)
            size = _field(b, "requested_size", bwhere, U64, None)
            if size is None:
                size = _field(b, "size", bwhere, U64, 0)
            if address not in touched and address not in pre:
                pre[address] = (size, b.get("frames"), bwhere)

    lines = [reserved_line(reserved)]
    live = {}        # addr -> id
    next_id = 0
    stats = {"allocs": 0, "frees": 0, "before": len(pre), "ooms": 0, "entries": len(entries), "device": dev}

    def alloc(addr, size, stream, t, frames, where):
        nonlocal next_id
        i = next_id
        next_id += 1
        live[addr] = i
        lines.append("a %d %d %d %d" % (i, size, stream, t))
        text = _frames_text(frames, "%s['frames']" % where)
        if text:
            lines.append("# frames %d %s" % (i, text))
        stats["allocs"] += 1

    for addr, (size, frames, where) in sorted(pre.items()):
        alloc(addr, size, 0, t0, frames, where)
    for a, addr, size, stream, t, frames, where in entries:
        if a == "alloc":
            if addr in live:            # a lost free: close the old one here
                lines.append("f %d %d" % (live.pop(addr), t))
                stats["frees"] += 1
            alloc(addr, size, stream, t, frames, where)
        elif a == free_event and addr in live:
            lines.append("f %d %d" % (live.pop(addr), t))
            stats["frees"] += 1
        elif a in SEGMENT_GROW or a in SEGMENT_SHRINK:
            reserved += size * (1 if a in SEGMENT_GROW else -1)
            lines.append(reserved_line(max(reserved, 0)))
        elif a == "oom":
            stats["ooms"] += 1
    return lines, stats


def write(out, lines, stats, source):
    head = ["# gpumem-trace v1 workload=snapshot source=%s bytes=requested device=cuda:%d"
            % (re.sub(r"\s", "_", _text(source)), stats["device"]),
            "# a <id> <bytes> <stream> <time_us> | f <id> <time_us>",
            "# converted by tools/snapshot_to_trace.py from %d entries: %d allocs (%d live before the history), "
            "%d frees, %d oom entries" % (stats["entries"], stats["allocs"], stats["before"], stats["frees"],
                                           stats["ooms"])]
    # (UTF-8 whatever the locale; a lone surrogate from the pickle written as \udXXX, not refused)
    data = ("\n".join(head + lines) + "\n").encode("utf-8", "backslashreplace")
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        with (gzip.open(out, "wb") if out.endswith(".gz") else open(out, "wb")) as f:
            f.write(data)
    except OSError as e:
        raise SnapshotError("cannot write %s: %s" % (out, e.strerror or e)) from None


def _device_index(text):
    """--device: ASCII digits only (int() would take '+1', ' 1', '1_0' and other scripts' digits)."""
    if not re.fullmatch(r"[0-9]+", text):
        raise argparse.ArgumentTypeError("%r is not a device index (0, 1, ...)" % text)
    return int(text)


def _one_line(text):
    """text with every character that is not printable escaped (a path with a newline, say)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Convert a PyTorch memory snapshot (pickle) into a vram trace.")
    ap.add_argument("snapshot")
    ap.add_argument("-o", "--output", required=True, help="the trace to write (.gz: compressed; -: stdout)")
    ap.add_argument("--device", type=_device_index, default=None,
                    help="device index (default: the one with most entries)")
    ap.add_argument("--free-event", choices=FREE_EVENTS, default="free_completed")
    args = ap.parse_args(argv)
    try:
        data = load(args.snapshot)
        try:
            lines, stats = convert(data, args.device, args.free_event)
        except SnapshotError as e:
            raise SnapshotError("%s: %s" % (args.snapshot, e)) from None
        write(args.output, lines, stats, args.snapshot.rsplit("/", 1)[-1])
    except BrokenPipeError:
        return 1
    except SnapshotError as e:
        print("snapshot_to_trace: %s" % _one_line(str(e)), file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a snapshot convert() did not foresee: still one line
        print(_one_line("snapshot_to_trace: %s: malformed snapshot (%s: %s)" % (args.snapshot, type(e).__name__, e)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
