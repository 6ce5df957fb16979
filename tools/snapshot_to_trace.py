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

Time and memory grow with the pickle's size, never faster. The unpickler's memo is a dict (a memo
index far out costs one entry), its dicts and sets refuse keys that could share one hash (anything
but strings, bytes, None and whole numbers within +-2**60), and it reads from the pickle's bytes in
memory, so a length in the pickle allocates no more than the pickle holds. The conversion walks each
list once (a frames list or a blocks list shared by many entries or segments through pickle's memo is
looked up after its first walk) and the trace it writes may be at most OUTPUT_PER_BYTE (256) times the
pickle's size plus OUTPUT_ALLOWANCE (4 MiB): a real snapshot's is 10 to 60 times, one that refers to
the same long frames list from every entry is refused ("refused: its trace would be longer than ...").
Nothing is written before the whole trace is converted; it is written in chunks of 1 MiB.
Exit status 0, 1 on an unreadable, unsafe or malformed snapshot or an unwritable output (one line on
stderr, never a traceback), 2 on usage errors.
"""

import argparse
import gzip
import io
import pickle
import re
import reprlib
import struct
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


# ---- reading: plain data only, in time and memory that grow with the file ------------------------

KEY_INT = 2 ** 60                     # whole-number dict keys and set members: within +-2**60 (see below)
MEMO_INDEXES = 2 ** 32                # a memo index (PUT) below this (BINPUT and LONG_BINPUT are below it)


def _check_keys(keys):
    """Refuses a dict key or set member that could share its hash with many others. Strings and bytes
    hash with a per-process secret, and whole numbers within +-2**60 hash to themselves; but numbers
    beyond (k * (2**61 - 1) all hash alike), floats, tuples and frozensets can be made to share one hash,
    and a dict of n such keys takes n**2 steps to build (20,000 keys in 250 KB: seconds; 2 MB: minutes).
    A snapshot's keys are strings."""
    for k in keys:
        t = type(k)
        if t is str or t is bytes or k is None or ((t is int or t is bool) and -KEY_INT < k < KEY_INT):
            continue
        raise SnapshotError("refused: the pickle has a dict key or set member %s, and a snapshot's keys are "
                            "strings (keys like it can be made to share one hash and stall loading)" % _shown(k))


class _Dispatch(dict):
    """The opcode table; an unknown opcode is an UnpicklingError naming it (as the C unpickler says)."""

    def __missing__(self, code):
        raise pickle.UnpicklingError("invalid load key, %r." % chr(code))


class _PlainUnpickler(pickle._Unpickler):  # noqa: SLF001 - the pure-Python unpickler, to check as it builds
    """An unpickler that builds plain data only, in time and memory linear in the pickle's size.

    Dicts, lists, tuples, sets, strings, bytes, numbers, booleans and None have opcodes of their own;
    everything else (a class, a function) reaches the unpickler through find_class (GLOBAL, STACK_GLOBAL,
    INST, OBJ, EXT1/2/4) or persistent_load, which refuse it before anything is called.

    It is Python's own pure-Python unpickler (pickle._Unpickler), not the C one, for what the C one
    cannot be told: its memo is an array as long as the highest index asked for (LONG_BINPUT 2**31-1,
    9 bytes of pickle: 16 GiB zeroed), where this one's is a dict; and its dicts and sets take any key,
    where here a key that could share its hash with many others is refused (_check_keys). It reads
    from the pickle's bytes in memory (FRAME, only a hint for reading ahead, is skipped), so a length in
    the pickle never allocates more than the pickle holds (and a BYTEARRAY8, allocated before it is
    read, is refused when longer than the pickle). Each opcode then builds a few objects at most, and
    the memo holds one entry per PUT: memory and time are linear in the pickle's size. (It takes three
    to four times as long as the C one, and the conversion after it about as long again: 16 s in all for
    a snapshot of 35 MB and 300,000 entries, which took 73 s before each list was walked once.)"""

    dispatch = _Dispatch(pickle._Unpickler.dispatch)  # noqa: SLF001

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self._data = data

    def load(self):
        """pickle._Unpickler.load, reading from memory without its framing layer."""
        f = io.BytesIO(self._data)
        self.read, self.readline, self.readinto = f.read, f.readline, f.readinto
        self.metastack, self.stack = [], []
        self.append = self.stack.append
        self.proto = 0
        read, dispatch = self.read, self.dispatch
        try:
            while True:
                key = read(1)
                if not key:
                    raise EOFError
                dispatch[key[0]](self)
        except pickle._Stop as stop:  # noqa: SLF001
            return stop.value

    def find_class(self, module, name):
        raise SnapshotError("refused: the pickle asks for %s.%s, and a snapshot is plain data (dicts, lists, "
                            "strings, numbers); nothing in it is run" % (_cut(module), _cut(name)))

    def persistent_load(self, pid):
        raise SnapshotError("refused: the pickle asks for a persistent object %s, and a snapshot is plain "
                            "data (dicts, lists, strings, numbers)" % _shown(pid))

    def load_frame(self):
        if len(self.read(8)) != 8:
            raise pickle.UnpicklingError("pickle data was truncated")
    dispatch[pickle.FRAME[0]] = load_frame

    def load_setitem(self):
        stack = self.stack
        value, key = stack.pop(), stack.pop()
        if type(key) is not str:
            _check_keys((key,))
        stack[-1][key] = value
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        for i in range(0, len(items), 2):
            key = items[i]
            if type(key) is not str:
                _check_keys((key,))
            target[key] = items[i + 1]
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_dict(self):
        _check_keys(self.stack[::2])          # (the items after the mark: key, value, key, value, ...)
        super().load_dict()
    dispatch[pickle.DICT[0]] = load_dict

    def load_additems(self):
        _check_keys(self.stack)
        super().load_additems()
    dispatch[pickle.ADDITEMS[0]] = load_additems

    def load_frozenset(self):
        _check_keys(self.stack)
        super().load_frozenset()
    dispatch[pickle.FROZENSET[0]] = load_frozenset

    def load_put(self):
        i = int(self.readline()[:-1])
        if not 0 <= i < MEMO_INDEXES:
            raise SnapshotError("refused: the pickle puts an object at memo index %s, beyond 32 bits" % _shown(i))
        self.memo[i] = self.stack[-1]
    dispatch[pickle.PUT[0]] = load_put

    def load_bytearray8(self):
        n, = struct.unpack("<Q", self.read(8))
        if n > len(self._data):
            raise SnapshotError("refused: the pickle asks for a bytearray of %d bytes, more than its own %d"
                                % (n, len(self._data)))
        b = bytearray(n)
        self.readinto(b)
        self.append(b)
    dispatch[pickle.BYTEARRAY8[0]] = load_bytearray8


def load(path):
    """(the snapshot, the pickle's size in bytes)."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(4300)      # (protocol 0's decimal numbers: never a quadratic int())
    try:
        with open(path, "rb") as f:
            raw = f.read()
        data = _PlainUnpickler(raw).load()
    except OSError as e:
        raise SnapshotError("%s: cannot read: %s" % (path, e.strerror or e)) from None
    except SnapshotError as e:
        raise SnapshotError("%s: %s" % (path, e)) from None
    except Exception as e:  # noqa: BLE001 - unpickling errors of every kind: one sentence
        if isinstance(e, ValueError) and "extension code" in str(e):
            raise SnapshotError("%s: refused: the pickle asks for an object by extension code, and a snapshot "
                                "is plain data (dicts, lists, strings, numbers)" % path) from None
        raise SnapshotError("%s: not a snapshot pickle (%s: %s)" % (path, type(e).__name__, _cut(e, 200))) from None
    if not isinstance(data, dict) or "device_traces" not in data or "segments" not in data:
        raise SnapshotError("%s: not a PyTorch memory snapshot (no 'segments' and 'device_traces'); "
                            "write one with torch.cuda.memory._dump_snapshot()" % path)
    return data, len(raw)


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


# ---- the trace: bounded by the pickle's size ----------------------------------------------------

OUTPUT_PER_BYTE = 256                 # the trace may be this many times the pickle's size...
OUTPUT_ALLOWANCE = 4 << 20            # ...plus this many bytes, and no longer


class _Trace:
    """The trace as it is written: its text in pieces (each line ends with a newline), never longer than
    OUTPUT_PER_BYTE times the pickle's size plus OUTPUT_ALLOWANCE.

    A pickle's memo lets one object be referred to from many places for a few bytes each: a frames list
    of 2,000 references to one frame of 1 KB, shared by 2,000 allocations, is 10 KB of pickle and 4 GB of
    frames to write. A real snapshot is far from the bound: its frame dicts are shared by every stack that
    passes through them (PyTorch's py_symbolize makes one dict per distinct frame), which makes its trace
    about 10 to 60 times its pickle (60 only with stacks of long C++ names), never hundreds.

    The walk is linear in the pickle as well: each frames list is turned into text once (a list shared by
    a block and its allocation, or by a crafted pickle's thousands of entries, is looked up after that),
    each frame dict once; the text of a frame, charged before the next is taken, stops a list of a million
    references to one long frame after the bound, not after it is built."""

    def __init__(self, input_bytes):
        self.input_bytes = input_bytes
        self.limit = OUTPUT_PER_BYTE * input_bytes + OUTPUT_ALLOWANCE
        self.left = self.limit
        self.parts = []
        self._texts = {}             # id(frames list) -> its text (the lists live as long as the snapshot)
        self._pieces = {}            # id(frame dict) -> "file:line:function"

    def forget(self):
        """Drops what is kept by id(): the ids mean nothing once the snapshot is freed."""
        self._texts = self._pieces = None

    def _over(self):
        raise SnapshotError("refused: its trace would be longer than %d bytes (%d times the pickle's %d bytes, "
                            "plus %d MiB), and a real snapshot's is far shorter: the pickle refers to the same "
                            "lists (frames, entries) over and over" % (self.limit, OUTPUT_PER_BYTE,
                                                                       self.input_bytes, OUTPUT_ALLOWANCE >> 20))

    def line(self, text):
        """text: one line, with its newline."""
        self.left -= len(text)
        if self.left < 0:
            self._over()
        self.parts.append(text)

    def frames(self, i, frames, where):
        """The '# frames <i>' line of a frames list (none for None or an empty list)."""
        if frames is None:
            return
        text = self._texts.get(id(frames))
        if text is None:
            text = self._texts[id(frames)] = self._frames_text(frames, where)
        else:
            self.left -= len(text)
        if text:
            head = "# frames %d " % i
            self.left -= len(head) + 1
            if self.left < 0:
                self._over()
            self.parts += (head, text, "\n")

    def _frames_text(self, frames, where):
        out, pieces, left = [], self._pieces, self.left
        for k, f in enumerate(_list(frames, where)):
            piece = pieces.get(id(f))
            if piece is None:
                f = _dict(f, "%s[%d]" % (where, k))
                line = f.get("line", "?")
                if not isinstance(line, str):
                    _whole(line, "%s[%d]['line']" % (where, k), I64)
                piece = pieces[id(f)] = "%s:%s:%s" % (_text(f.get("filename", "?")), _text(line),
                                                      _text(f.get("name", "?")))
            left -= len(piece) + 1
            if left < 0:
                self._over()
            out.append(piece)
        self.left = left
        return "\t".join(out)


# ---- conversion ----------------------------------------------------------------------------------

def convert(data, input_bytes, device=None, free_event="free_completed"):
    """Returns (trace, stats): the trace's lines (a _Trace, bounded by input_bytes, the pickle's size)
    and counts for comments; SnapshotError naming the first field at fault, or the bound."""
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

    trace = _Trace(input_bytes)

    def reserved_line(value):
        if value > U64[1]:
            raise SnapshotError("the snapshot's reserved bytes (its segments' total_size, and segment_alloc and "
                                "segment_map sizes) add up beyond 64 bits: %d" % value)
        trace.line("# reserved %d\n" % value)

    # blocks live before the history: freed without an alloc, or allocated and never touched
    seen_alloc, pre = set(), {}
    for a, addr, size, _, _, frames, where in entries:
        if a == "alloc":
            seen_alloc.add(addr)
        elif a == free_event and addr not in seen_alloc and addr not in pre:
            pre[addr] = (size, frames, where)
    touched = {addr for _, addr, _, _, _, _, _ in entries}
    walked = set()                   # id() of the blocks lists walked: one shared by segments adds nothing more
    for s, where in segments:
        blocks = _list(s.get("blocks", ()), "%s['blocks']" % where)
        if id(blocks) in walked:
            continue
        walked.add(id(blocks))
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

    reserved_line(reserved)
    live = {}        # addr -> id
    next_id = 0
    stats = {"allocs": 0, "frees": 0, "before": len(pre), "ooms": 0, "entries": len(entries), "device": dev}

    def alloc(addr, size, stream, t, frames, where):
        nonlocal next_id
        i = next_id
        next_id += 1
        live[addr] = i
        trace.line("a %d %d %d %d\n" % (i, size, stream, t))
        trace.frames(i, frames, "%s['frames']" % where)
        stats["allocs"] += 1

    for addr, (size, frames, where) in sorted(pre.items()):
        alloc(addr, size, 0, t0, frames, where)
    for a, addr, size, stream, t, frames, where in entries:
        if a == "alloc":
            if addr in live:            # a lost free: close the old one here
                trace.line("f %d %d\n" % (live.pop(addr), t))
                stats["frees"] += 1
            alloc(addr, size, stream, t, frames, where)
        elif a == free_event and addr in live:
            trace.line("f %d %d\n" % (live.pop(addr), t))
            stats["frees"] += 1
        elif a in SEGMENT_GROW or a in SEGMENT_SHRINK:
            reserved += size * (1 if a in SEGMENT_GROW else -1)
            reserved_line(max(reserved, 0))
        elif a == "oom":
            stats["ooms"] += 1
    trace.forget()
    return trace, stats


def _encoded(parts, size=1 << 20):
    """The text of parts, UTF-8 whatever the locale (a lone surrogate from the pickle written as \\udXXX,
    not refused), in chunks of about `size` characters: never the whole trace twice in memory."""
    chunk, n = [], 0
    for p in parts:
        chunk.append(p)
        n += len(p)
        if n >= size:
            yield "".join(chunk).encode("utf-8", "backslashreplace")
            chunk, n = [], 0
    if chunk:
        yield "".join(chunk).encode("utf-8", "backslashreplace")


def write(out, trace, stats, source):
    head = ("# gpumem-trace v1 workload=snapshot source=%s bytes=requested device=cuda:%d\n"
            % (re.sub(r"\s", "_", _text(source)), stats["device"]) +
            "# a <id> <bytes> <stream> <time_us> | f <id> <time_us>\n"
            "# converted by tools/snapshot_to_trace.py from %d entries: %d allocs (%d live before the history), "
            "%d frees, %d oom entries\n" % (stats["entries"], stats["allocs"], stats["before"], stats["frees"],
                                            stats["ooms"]))
    parts = [head] + trace.parts
    if out == "-":
        for chunk in _encoded(parts):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        return
    try:
        with (gzip.open(out, "wb") if out.endswith(".gz") else open(out, "wb")) as f:
            for chunk in _encoded(parts):
                f.write(chunk)
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
        data, input_bytes = load(args.snapshot)
        try:
            trace, stats = convert(data, input_bytes, args.device, args.free_event)
        except SnapshotError as e:
            raise SnapshotError("%s: %s" % (args.snapshot, e)) from None
        del data                     # (the snapshot's objects, before the trace is written)
        write(args.output, trace, stats, args.snapshot.rsplit("/", 1)[-1])
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
