#!/usr/bin/env python3
"""report_test.py: `vram report` and tools/snapshot_to_trace.py, without a browser.

    python3 tests/report_test.py PATH/TO/vram

Reads the data the page embeds (the JSON in <script id="vram-data">) and checks it against what the
inputs imply: a hand-made trace (peak, timeline, map, largest blocks with frames, failed allocations
under --limit with vram's message, the driver figures worked out by hand and equal to vram replay's),
a PyTorch snapshot pickle built here with the standard library in torch.cuda.memory._dump_snapshot()'s
format (converted, the recording allocator's reserved bytes and frames kept), the size of the report
of traces/gpt2_train.trace.gz, and that the page fetches nothing; and tools/record_trace.py where
PyTorch cannot be imported (a sentence, not a traceback).

SnapshotSafety: a snapshot pickle is untrusted data. A pickle that asks for code (os.system, eval, by
GLOBAL, STACK_GLOBAL, INST, OBJ, an extension code or a persistent id, protocols 0 to 5) runs nothing
and gets one line naming what it asked for; a snapshot of the wrong shape (an entry that is no dict,
'segments' or 'device_traces' of the wrong type, a size that is inf, nan, negative, a bool or beyond
64 bits, ...) gets one line naming the field, exit 1, no traceback; a real snapshot's plain types
(tuples, bools, floats, None) in every protocol still convert. A pickle that would outgrow itself
(a frames list shared by every entry, 9 KB for 4 GB of trace; segments sharing one blocks list; dict
keys that all hash alike; a far memo index; a bytearray longer than the file) is converted or refused
in one line within seconds in 2 GiB of address space.
"""

import gzip
import json
import os
import pickle
import re
import resource
import shlex
import struct
import subprocess
import sys
import tempfile
import time
import unittest

VRAM = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERTER = os.path.join(ROOT, "tools", "snapshot_to_trace.py")
MiB = 1 << 20


def page_data(path):
    with open(path, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script id="vram-data" type="application/json">(.*?)</script>', html, re.S)
    assert m, "no data element in the page"
    return html, json.loads(m.group(1))


def report(args, env=None):
    e = dict(os.environ, VRAM_BACKEND="sim", VRAM_SIM_DEVICES="4GiB")
    e.update(env or {})
    return subprocess.run([VRAM, "report"] + args, capture_output=True, text=True, env=e, timeout=120)


def frame(fn, line, name):
    return {"filename": fn, "line": line, "name": name}


def make_snapshot():
    """Two segments of 20 MiB at the end; the history: a block live before it (freed in it), two
    allocations with frames, a segment_alloc before them, one free. Reserved: 20 MiB before the
    history (the segment of the block allocated before), 40 MiB after the segment_alloc."""
    f1 = [frame("/src/model.py", 42, "forward"), frame("/src/train.py", 7, "main")]
    f2 = [frame("/src/opt.py", 3, "step")]
    t0 = 1_700_000_000_000_000
    traces = [
        {"action": "segment_alloc", "addr": 0x7f0001400000, "size": 20 * MiB, "stream": 0, "time_us": t0 + 1, "frames": []},
        {"action": "alloc", "addr": 0x7f0001400000, "size": 12 * MiB, "stream": 0, "time_us": t0 + 2, "frames": f1},
        {"action": "alloc", "addr": 0x7f0002000000, "size": 3 * MiB, "stream": 0, "time_us": t0 + 3, "frames": f2},
        {"action": "free_requested", "addr": 0x7f0000000000, "size": 4 * MiB, "stream": 0, "time_us": t0 + 4, "frames": []},
        {"action": "free_completed", "addr": 0x7f0000000000, "size": 4 * MiB, "stream": 0, "time_us": t0 + 5, "frames": []},
        {"action": "free_requested", "addr": 0x7f0002000000, "size": 3 * MiB, "stream": 0, "time_us": t0 + 6, "frames": f2},
        {"action": "free_completed", "addr": 0x7f0002000000, "size": 3 * MiB, "stream": 0, "time_us": t0 + 7, "frames": f2},
    ]
    segments = [
        {"device": 0, "address": 0x7f0000000000, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
         "allocated_size": 0, "active_size": 0, "blocks": [{"address": 0x7f0000000000, "size": 20 * MiB,
                                                             "requested_size": 0, "state": "inactive", "frames": []}]},
        {"device": 0, "address": 0x7f0001400000, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
         "allocated_size": 12 * MiB, "active_size": 12 * MiB,
         "blocks": [{"address": 0x7f0001400000, "size": 12 * MiB, "requested_size": 12 * MiB,
                     "state": "active_allocated", "frames": f1},
                    {"address": 0x7f0002000000, "size": 8 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [traces], "allocator_settings": {}}


class Report(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_hand_trace(self):
        """Peak, map and largest blocks of a small trace; frames from '# frames' lines."""
        tr = self.path("t.trace")
        with open(tr, "w") as f:
            f.write("# gpumem-trace v1 workload=t\n"
                    "a 1 1048576 0 100\n# frames 1 a.py:1:f\tb.py:2:g\n"
                    "a 2 3145728 0 200\na 3 2097152 0 300\nf 1 400\nf 2 500\na 4 524288 0 600\n")
        r = report([tr, "-o", self.path("r.html"), "--growth"])
        self.assertEqual(r.returncode, 0, r.stderr)
        html, d = page_data(self.path("r.html"))
        self.assertEqual(d["peak_live_bytes"], 6 * MiB)
        self.assertEqual(max(d["timeline"]["live"]), 6 * MiB)
        self.assertEqual(d["peak_event"], 2)            # after the third event
        self.assertTrue(d["has_time"])
        self.assertEqual(d["timeline"]["time_us"][:2], [0, 100])
        peak = d["snapshots"][d["peak_snapshot"]]
        self.assertEqual(peak["event"], 2)
        blocks = [b for s in peak["segments"] for b in s[4] if b > 0]
        self.assertEqual(sorted(blocks), [MiB, 2 * MiB, 3 * MiB])    # sizes are 256-byte multiples here
        for s in peak["segments"]:                                    # blocks tile each segment
            self.assertEqual(sum(abs(b) for b in s[4]), s[1])
        self.assertEqual([b["bytes"] for b in d["top"]], [3 * MiB, 2 * MiB, MiB])
        self.assertEqual(d["top"][2]["frames"], "a.py:1:f\tb.py:2:g")
        self.assertEqual(d["failed_allocs"], 0)
        self.assertFalse(d["recorded"])

    def test_extreme_times(self):
        """Times at both ends of int64 (2^64 - 1 us apart) and out of order: the timeline's times are
        the microseconds after the earliest, exact, with no signed overflow (the ASan+UBSan build aborted)."""
        lo, hi = -(1 << 63), (1 << 63) - 1
        tr = self.path("t.trace")
        with open(tr, "w") as f:
            f.write("a 1 1048576 0 %d\na 2 1048576 0 %d\nf 1 0\na 3 1048576 0 %d\nf 2 %d\n" %
                    (lo, lo + 1, hi - 1, hi))
        r = report([tr, "-o", self.path("r.html"), "--growth"])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertTrue(d["has_time"])
        self.assertEqual(d["time0_us"], lo)
        self.assertEqual(d["timeline"]["event"], [0, 1, 2, 3, 4])
        self.assertEqual(d["timeline"]["time_us"], [0, 1, 1 << 63, (1 << 64) - 2, (1 << 64) - 1])
        with open(tr, "w") as f:            # not in order: from the earliest (the second event)
            f.write("a 1 1048576 0 %d\na 2 1048576 0 %d\nf 1 %d\n" % (hi, lo, 0))
        r = report([tr, "-o", self.path("r.html")])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertEqual(d["time0_us"], lo)
        self.assertEqual(d["timeline"]["time_us"], [(1 << 64) - 1, 0, 1 << 63])
        with open(tr, "w") as f:            # one time throughout: no time axis
            f.write("a 1 1048576 0 %d\nf 1 %d\n" % (lo, lo))
        r = report([tr, "-o", self.path("r.html")])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertFalse(d["has_time"])
        self.assertEqual(d["timeline"]["time_us"], [0, 0])

    def test_latin1_names(self):
        """A Latin-1 file name and Latin-1 frames (bytes, not UTF-8): the page is valid UTF-8 and its
        data valid JSON, with U+FFFD for each ill-formed part (as Python's errors="replace"); '<' of a
        frame cannot end the script element."""
        name = os.path.join(os.fsencode(self.dir), b"caf\xe9.trace")
        frames = b"m\xfcller.py:1:f\t</script><b>x.py:2:g\t\xc3\xa9t\xc3\xa9.py:3:h \xed\xa0\x80 \x1b[1m"
        with open(name, "wb") as f:
            f.write(b"a 1 1048576 0 1\n# frames 1 " + frames + b"\nf 1 2\n")
        r = subprocess.run([VRAM, "report", name, "-o", self.path("r.html")], capture_output=True,
                           env=dict(os.environ, VRAM_BACKEND="sim", VRAM_SIM_DEVICES="4GiB"), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("r.html"), "rb") as f:
            raw = f.read()
        raw.decode("utf-8")                           # strict: raises on any ill-formed byte
        self.assertEqual(raw.count(b"</script>"), 2)  # the data's and the page script's own
        _, d = page_data(self.path("r.html"))
        self.assertEqual(d["input"], name.decode("utf-8", "replace"))
        self.assertTrue(d["input"].endswith("/caf\ufffd.trace"))
        self.assertEqual(d["top"][0]["frames"], frames.decode("utf-8", "replace"))

    def test_stdin(self):
        """INPUT '-': the trace from standard input (gzip sniffed from the stream)."""
        gz = gzip.compress(b"a 1 1048576 0 1\na 2 1048576 0 2\nf 1 3\n")
        e = dict(os.environ, VRAM_BACKEND="sim", VRAM_SIM_DEVICES="1GiB")
        r = subprocess.run([VRAM, "report", "-", "-o", self.path("r.html")], input=gz, capture_output=True, env=e,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertEqual(d["input"], "-")
        self.assertEqual(d["peak_live_bytes"], 2 * MiB)

    def test_limit_ooms(self):
        """Failed allocations under --limit, each with vram's message; the page still written."""
        tr = self.path("t.trace")
        with open(tr, "w") as f:
            f.write("a 1 6291456 0 1\na 2 6291456 0 2\nf 1 3\na 3 1048576 0 4\n")
        r = report([tr, "-o", self.path("r.html"), "--growth", "--limit", "8MiB"])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertEqual(d["failed_allocs"], 1)
        self.assertEqual(d["ooms"][0]["event"], 1)
        self.assertIn("VRAM_ERR_OUT_OF_MEMORY", d["ooms"][0]["message"])
        self.assertIn("limit", d["ooms"][0]["message"])
        self.assertEqual(d["limit_bytes"], 8 * MiB)

    def test_overflow_figure(self):
        """With overflow to host memory (VRAM_OVERFLOW=host, what vram run --overflow host sets), the
        request the limit refused is served there: no failed allocation, and the page has the host
        memory's curve and its peak."""
        tr = self.path("t.trace")
        with open(tr, "w") as f:
            f.write("a 1 6291456 0 1\na 2 6291456 0 2\nf 2 3\nf 1 4\n")
        r = report([tr, "-o", self.path("r.html"), "--growth", "--limit", "8MiB"], {"VRAM_OVERFLOW": "host"})
        self.assertEqual(r.returncode, 0, r.stderr)
        html, d = page_data(self.path("r.html"))
        self.assertEqual(d["failed_allocs"], 0)
        self.assertTrue(d["overflow"])
        self.assertEqual(d["overflow_allocs"], 1)
        self.assertEqual(d["overflow_peak_bytes"], 6 * MiB)
        self.assertEqual(max(d["timeline"]["overflow"]), 6 * MiB)
        self.assertEqual(d["timeline"]["overflow"][-1], 0)
        r = report([tr, "-o", self.path("n.html"), "--growth", "--limit", "8MiB"])
        _, d = page_data(self.path("n.html"))
        self.assertEqual((d["failed_allocs"], d["overflow"], d["timeline"]["overflow"]), (1, False, []))

    def test_driver_figures(self):
        """The page's driver allocs / frees / moves, worked out by hand, and equal to vram replay's for the
        same trace and options: three different numbers, so that no two can be swapped unseen."""
        tr = self.path("t.trace")
        with open(tr, "w") as f:
            f.write("a 1 2097152 0 1\na 2 2097152 0 2\nf 1 3\na 3 4194304 0 4\nf 2 5\nf 3 6\n")
        # Growth under a 6 MiB limit: extents are one 2 MiB granule of the sim, mapped as blocks need them.
        # a1 maps [0, 2) and a2 [2, 4) (2 created); a1's free leaves [0, 2) mapped and idle. a3 (4 MiB) fits
        # in no free chunk but the unmapped rest: [4, 8), two granules, with 4 of the 6 MiB reserved. One is
        # created (3 created), the other is the idle granule moved from [0, 2) (1 move), since a third
        # new one would pass the limit. Nothing is released: 3 / 0 / 1, peak reserved 6 MiB.
        args = [tr, "--growth", "--limit", "6MiB"]
        r = report(args[:1] + ["-o", self.path("r.html")] + args[1:])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertEqual((d["driver_allocs"], d["driver_frees"], d["driver_moves"]), (3, 0, 1))
        self.assertEqual(d["peak_reserved_bytes"], 6 * MiB)
        rp = subprocess.run([VRAM, "replay"] + args + ["--json"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, VRAM_BACKEND="sim", VRAM_SIM_DEVICES="4GiB"))
        self.assertEqual(rp.returncode, 0, rp.stderr)
        j = json.loads(rp.stdout)
        for k in ("driver_allocs", "driver_frees", "driver_moves", "peak_reserved_bytes", "peak_in_use_bytes"):
            self.assertEqual(d[k], j[k], k)

    def test_snapshot_pickle(self):
        """A snapshot converted (by hand and by vram report itself): frames, blocks live before the
        history, the recording allocator's reserved bytes over time."""
        snap = self.path("s.pickle")
        with open(snap, "wb") as f:
            pickle.dump(make_snapshot(), f)
        out = self.path("s.trace.gz")
        c = subprocess.run([sys.executable, CONVERTER, snap, "-o", out], capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stderr)
        with gzip.open(out, "rt") as f:
            lines = [l for l in f.read().splitlines() if not l.startswith("# gpumem") and not l.startswith("# a ")
                     and not l.startswith("# converted")]
        self.assertEqual(lines, [
            "# reserved %d" % (20 * MiB),
            "a 0 %d 0 1700000000000001" % (4 * MiB),          # live before the history, freed in it
            "# reserved %d" % (40 * MiB),
            "a 1 %d 0 1700000000000002" % (12 * MiB),
            "# frames 1 /src/model.py:42:forward\t/src/train.py:7:main",
            "a 2 %d 0 1700000000000003" % (3 * MiB),
            "# frames 2 /src/opt.py:3:step",
            "f 0 1700000000000005",
            "f 2 1700000000000007",
        ])
        r = report([snap, "-o", self.path("r.html"), "--growth"])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, d = page_data(self.path("r.html"))
        self.assertTrue(d["recorded"])
        self.assertEqual(d["recorded_peak_reserved_bytes"], 40 * MiB)
        self.assertEqual(d["timeline"]["recorded"][0], 20 * MiB)
        self.assertEqual(d["peak_live_bytes"], 19 * MiB)
        self.assertEqual(d["top"][0]["frames"], "/src/model.py:42:forward\t/src/train.py:7:main")

    def test_converter_output_unreadable(self):
        """The converter's trace failing to read (here a bad line early in a long output): the reader's
        error is said, not only 'the conversion failed' (the converter fails too, its pipe closed)."""
        fake = self.path("fake_converter.py")
        with open(fake, "w") as f:
            f.write("import sys\nsys.stdout.write('a 1 100 0 1\\nbogus line\\n')\n"
                    "for i in range(300000):\n    sys.stdout.write('a %d 100 0 1\\n' % (i + 10))\n")
        snap = self.path("s.pickle")
        with open(snap, "wb") as f:
            pickle.dump(make_snapshot(), f)
        r = report([snap, "-o", self.path("r.html")], env={"VRAM_SNAPSHOT_TO_TRACE": fake})
        self.assertEqual(r.returncode, 1)
        self.assertIn(":2: unknown event 'bogus' (expected 'a', 'f' or '#') (converted from %s)" % snap, r.stderr)
        self.assertFalse(os.path.exists(self.path("r.html")))

    def test_bad_snapshot(self):
        """A pickle that is not a snapshot, and a file that is no pickle: one sentence, exit 1."""
        bad = self.path("bad.pickle")
        with open(bad, "wb") as f:
            pickle.dump({"hello": 1}, f)
        r = report([bad, "-o", self.path("r.html")])
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a PyTorch memory snapshot", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        with open(bad, "wb") as f:
            f.write(b"\x00\x01garbage")
        r = report([bad, "-o", self.path("r.html")])
        self.assertEqual(r.returncode, 1)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(self.path("r.html")))

    def test_real_trace_size_and_no_fetch(self):
        """gpt2_train's report: a few MB at most, map snapshots bounded, nothing fetched."""
        r = report([os.path.join(ROOT, "traces", "gpt2_train.trace.gz"), "-o", self.path("r.html"), "--growth"],
                   env={"VRAM_SIM_DEVICES": "24GiB"})
        self.assertEqual(r.returncode, 0, r.stderr)
        size = os.path.getsize(self.path("r.html"))
        self.assertLess(size, 3 * MiB)
        html, d = page_data(self.path("r.html"))
        self.assertEqual(d["peak_live_bytes"], 13594206920)
        self.assertLessEqual(len(d["timeline"]["live"]), 3000)
        self.assertLessEqual(len(d["snapshots"]), 121)
        self.assertIsNone(re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html))
        self.assertNotIn("@import", html)
        self.assertNotIn("fetch(", html)

    def test_record_trace_without_torch(self):
        """tools/record_trace.py where PyTorch cannot be imported: one sentence, exit 1, no traceback."""
        fake = self.path("fake")
        os.makedirs(os.path.join(fake, "torch"))
        with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
            f.write("raise ImportError('No module named torch (hidden by report_test.py)')\n")
        script = self.path("job.py")
        with open(script, "w") as f:
            f.write("print('hi')\n")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "record_trace.py"), "-o",
                            self.path("o.trace.gz"), "--", script], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=fake))
        self.assertEqual(r.returncode, 1)
        self.assertNotIn("Traceback", r.stderr)
        self.assertIn("record_trace: recording needs PyTorch", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_usage(self):
        r = report([os.path.join(ROOT, "traces", "gpt2_train.trace.gz")])
        self.assertEqual(r.returncode, 2)
        self.assertIn("-o", r.stderr)


def convert(snapshot_path, *extra):
    return subprocess.run([sys.executable, CONVERTER, snapshot_path, "-o", "-"] + list(extra), capture_output=True,
                          text=True, timeout=60)


class _Call:
    """Pickles as a call of fn(arg) (what a crafted snapshot uses to run code)."""

    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return self.fn, (self.arg,)


def pickle_global_name(fn, protocol):
    """module.name as the pickle of `fn` spells it (protocols 0-2 write Python 2's module names)."""
    module = fn.__module__
    if protocol < 3 and module == "builtins":
        module = "__builtin__"
    return "%s.%s" % (module, fn.__name__)


class SnapshotSafety(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.marker = os.path.join(self.dir, "MARKER")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def assert_one_line_refusal(self, r, *needles):
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("snapshot_to_trace: "), r.stderr)
        for needle in needles:
            self.assertIn(needle, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_code_in_a_pickle_is_never_run(self):
        """os.system and eval by __reduce__ (GLOBAL in protocols 0-3, STACK_GLOBAL in 4-5), alone and
        inside an otherwise good snapshot: nothing runs, one line names the refused global."""
        touch = "touch " + shlex.quote(self.marker)
        calls = [(os.system, touch), (eval, "open(%r, 'w').close()" % self.marker)]
        for protocol in range(6):
            for fn, arg in calls:
                snap = make_snapshot()
                snap["device_traces"][0][1]["frames"].append(_Call(fn, arg))
                for what, obj in (("alone", _Call(fn, arg)), ("inside", snap)):
                    with self.subTest(protocol=protocol, fn=fn.__name__, where=what):
                        if os.path.exists(self.marker):
                            os.unlink(self.marker)
                        path = self.write("evil.pickle", pickle.dumps(obj, protocol=protocol))
                        r = convert(path)
                        self.assertFalse(os.path.exists(self.marker), "the pickle ran its code")
                        self.assert_one_line_refusal(r, pickle_global_name(fn, protocol), "plain data")

    def test_code_by_hand_made_opcodes_is_never_run(self):
        """The other ways a pickle names a callable: GLOBAL + REDUCE, INST, OBJ, STACK_GLOBAL written by
        hand, an extension code and a persistent id."""
        touch = ("touch " + self.marker).encode()
        cases = [
            (b"cos\nsystem\n(S'" + touch + b"'\ntR.", "os.system"),                      # GLOBAL, REDUCE
            (b"(S'" + touch + b"'\nios\nsystem\n.", "os.system"),                        # INST
            (b"(cos\nsystem\nS'" + touch + b"'\no.", "os.system"),                       # OBJ
            (b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c" + bytes([len(touch)]) + touch + b"\x85R.",
             "os.system"),                                                                # STACK_GLOBAL
            (b"\x80\x04\x8c\x08builtins\x8c\x04exec\x93\x8c\x1cimport os; os.system('true')\x85R.",
             "builtins.exec"),
            (b"\x80\x02\x82\x01.", "extension code"),                                    # EXT1
            (b"P1\n.", "persistent"),                                                    # PERSID
        ]
        for data, needle in cases:
            with self.subTest(data=data):
                if os.path.exists(self.marker):
                    os.unlink(self.marker)
                r = convert(self.write("evil.pickle", data))
                self.assertFalse(os.path.exists(self.marker), "the pickle ran its code")
                self.assert_one_line_refusal(r, needle)

    def test_vram_report_runs_no_code(self):
        """Through `vram report` itself: nothing runs, no page, the converter's line, no traceback."""
        path = self.write("evil.pickle", pickle.dumps(_Call(os.system, "touch " + shlex.quote(self.marker))))
        r = report([path, "-o", os.path.join(self.dir, "r.html")])
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(self.marker), "the pickle ran its code")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "r.html")))
        self.assertNotIn("Traceback", r.stderr)
        self.assertIn("snapshot_to_trace: %s: " % path, r.stderr)
        self.assertIn("posix.system", r.stderr)

    def test_real_snapshot_types_in_every_protocol(self):
        """What torch.cuda.memory._snapshot() holds beyond dicts, lists, strings and ints (the tuple
        segment_pool_id, the bool is_expandable, float and None settings, extra string fields) in
        every pickle protocol: converted, to the same trace as the plain snapshot."""
        want = convert(self.write("plain.pickle", pickle.dumps(make_snapshot())))
        self.assertEqual(want.returncode, 0, want.stderr)
        snap = make_snapshot()
        for s in snap["segments"]:
            s.update(segment_pool_id=(0, 0), is_expandable=False, requested_size=0)
        for e in snap["device_traces"][0]:
            e.update(compile_context="N/A", user_metadata="")
        snap["device_traces"].append([])
        snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": -1,
                                      "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                      "roundup_power2_divisions": [1, 0, 0, 0]}
        for protocol in range(6):
            with self.subTest(protocol=protocol):
                r = convert(self.write("s.pickle", pickle.dumps(snap, protocol=protocol)))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, want.stdout.replace("plain.pickle", "s.pickle"))

    def test_bad_shapes(self):
        """Each gets one line naming the field at fault, exit 1, no traceback."""
        def entry(i):
            return lambda s: s["device_traces"][0][i]

        def setter(get, key, value):
            def mutate(s):
                get(s)[key] = value
                return s
            return mutate

        def put(key, value):
            return setter(lambda s: s, key, value)

        size_field = "device_traces[0][1]['size']"
        cases = [
            ("snapshot is a list", lambda s: [s], "not a PyTorch memory snapshot"),
            ("segments is a dict", put("segments", {"a": 1}), "'segments' is {'a': 1}, not a list"),
            ("segments is None", put("segments", None), "'segments' is None, not a list"),
            ("device_traces is a dict", put("device_traces", {0: []}), "'device_traces' is {0: []}, not a list"),
            ("device_traces is a string", put("device_traces", "abc"), "'device_traces' is 'abc', not a list"),
            ("a device's trace is an int", setter(lambda s: s["device_traces"], 0, 7),
             "device_traces[0] is 7, not a list"),
            ("an entry is an int", setter(lambda s: s["device_traces"][0], 2, 5), "device_traces[0][2] is 5, not a dict"),
            ("an entry is a string", setter(lambda s: s["device_traces"][0], 0, "alloc"),
             "device_traces[0][0] is 'alloc', not a dict"),
            ("a segment is a list", setter(lambda s: s["segments"], 1, [1]), "segments[1] is [1], not a dict"),
            ("blocks is an int", setter(lambda s: s["segments"][1], "blocks", 3), "segments[1]['blocks'] is 3, not a list"),
            ("a block is a string", setter(lambda s: s["segments"][1]["blocks"], 0, "b"),
             "segments[1]['blocks'][0] is 'b', not a dict"),
            ("size inf", setter(entry(1), "size", float("inf")), size_field + " is inf, not a whole number"),
            ("size nan", setter(entry(1), "size", float("nan")), size_field + " is nan, not a whole number"),
            ("size -1", setter(entry(1), "size", -1), size_field + " is -1, not a whole number"),
            ("size True", setter(entry(1), "size", True), size_field + " is True, not a whole number"),
            ("size 2**64", setter(entry(1), "size", 2 ** 64), size_field + " is 18446744073709551616, not a whole"),
            ("size 10**5000", setter(entry(1), "size", 10 ** 5000), size_field + " is a 16610-bit number, not a whole"),
            ("size 1.5", setter(entry(1), "size", 1.5), size_field + " is 1.5, not a whole number"),
            ("size a string", setter(entry(1), "size", "12"), size_field + " is '12', not a whole number"),
            ("a freed size inf", setter(entry(4), "size", float("inf")), "device_traces[0][4]['size'] is inf"),
            ("a segment's size inf", setter(entry(0), "size", float("inf")), "device_traces[0][0]['size'] is inf"),
            ("total_size inf", setter(lambda s: s["segments"][0], "total_size", float("inf")),
             "segments[0]['total_size'] is inf"),
            ("requested_size -5", setter(lambda s: s["segments"][1]["blocks"][0], "requested_size", -5),
             "segments[1]['blocks'][0]['requested_size'] is -5"),
            ("addr a list", setter(entry(1), "addr", [1]), "device_traces[0][1]['addr'] is [1], not a whole number"),
            ("addr missing", lambda s: entry(1)(s).pop("addr") and s, "device_traces[0][1] has no 'addr'"),
            ("block address None", setter(lambda s: s["segments"][1]["blocks"][0], "address", None),
             "segments[1]['blocks'][0]['address'] is None"),
            ("stream 2**64", setter(entry(1), "stream", 2 ** 64), "device_traces[0][1]['stream'] is 18446744073709551616"),
            ("time_us inf", setter(entry(2), "time_us", float("inf")), "device_traces[0][2]['time_us'] is inf"),
            ("time_us 2**63", setter(entry(2), "time_us", 2 ** 63), "device_traces[0][2]['time_us'] is 9223372036854775808"),
            ("device a string", setter(lambda s: s["segments"][0], "device", "cuda:0"),
             "segments[0]['device'] is 'cuda:0', not a whole number"),
            ("frames an int", setter(entry(1), "frames", 5), "device_traces[0][1]['frames'] is 5, not a list"),
            ("a frame a string", setter(entry(1), "frames", ["x"]), "device_traces[0][1]['frames'][0] is 'x', not a dict"),
            ("a frame's line huge", setter(entry(1), "frames", [frame("a.py", 10 ** 5000, "f")]),
             "device_traces[0][1]['frames'][0]['line'] is a 16610-bit number"),
            ("reserved beyond 64 bits", lambda s: [seg.update(total_size=2 ** 63) for seg in s["segments"]] and s,
             "reserved bytes"),
        ]
        for name, mutate, needle in cases:
            with self.subTest(name):
                path = self.write("bad.pickle", pickle.dumps(mutate(make_snapshot())))
                self.assert_one_line_refusal(convert(path), needle)

    def test_bad_device_and_output(self):
        """--device beyond the snapshot, negative or not ASCII digits; an output that cannot be written."""
        path = self.write("s.pickle", pickle.dumps(make_snapshot()))
        self.assert_one_line_refusal(convert(path, "--device", "1"), "no device 1")
        for text in ("-1", "\u0660", "\uff10", "0\n", "+0"):       # (a usage error: exit 2)
            with self.subTest(device=text):
                r = convert(path, "--device", text)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                self.assertIn("not a device index", r.stderr)
        r = subprocess.run([sys.executable, CONVERTER, path, "-o", os.path.join(self.dir, "no", "such", "t.trace")],
                           capture_output=True, text=True, timeout=60)
        self.assert_one_line_refusal(r, "cannot write")

    def test_odd_names_stay_on_one_line(self):
        """A snapshot file name and frame strings with newlines, tabs and NULs: the trace keeps one
        event a line and the messages one line."""
        odd = os.path.join(self.dir, "a b\nc.pickle")
        snap = make_snapshot()
        snap["device_traces"][0][1]["frames"] = [frame("/x\n/y\r.py", 1, "f\tg\x00h")]
        with open(odd, "wb") as f:
            pickle.dump(snap, f)
        r = convert(odd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("# frames 1 /x /y .py:1:f g h\n", r.stdout)
        self.assertIn("source=a_b_c.pickle ", r.stdout)
        with open(odd, "wb") as f:
            f.write(b"junk")
        self.assert_one_line_refusal(convert(odd), "not a snapshot pickle")

    # -- a pickle whose conversion or loading would outgrow it: bounded by its size ---------------------

    def bounded(self, path, *extra):
        """The converter on path in 2 GiB of address space and 10 s: (result, seconds); a failure past
        10 s (the old converter took minutes, or the memory of the machine)."""
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        start = time.monotonic()
        try:
            r = subprocess.run([sys.executable, CONVERTER, path, "-o", "-"] + list(extra), capture_output=True,
                               text=True, timeout=10, preexec_fn=limit)
        except subprocess.TimeoutExpired:
            self.fail("the converter ran past 10 s on %s" % os.path.basename(path))
        return r, time.monotonic() - start

    def assert_quick_refusal(self, path, *needles):
        r, seconds = self.bounded(path)
        self.assert_one_line_refusal(r, "snapshot_to_trace: %s: refused: " % path, *needles)
        self.assertLess(seconds, 3, "refused, but after %.1f s" % seconds)

    def test_shared_lists_do_not_multiply(self):
        """A pickle's memo lets one frames list be shared by every entry, and one frame by a whole list,
        for a few bytes each: 9 KB of pickle that would be 4 GB of trace, and 200 KB that would be 4 GB of
        one frames line. Each is refused within a second or two in one line naming the bound (the trace's
        length against the pickle's), converter and `vram report` alike; a snapshot whose stacks share
        their frame dicts as PyTorch's do (long C++ names, 40 frames) still converts."""
        big = frame("/" + "x" * 1000, 1, "f")
        entry = {"action": "alloc", "addr": 0x7f0000000000, "size": 512, "stream": 0, "time_us": 1,
                 "frames": [big] * 2000}
        many = self.write("many.pickle", pickle.dumps({"segments": [], "device_traces": [[entry] * 2000]}, 4))
        self.assertLess(os.path.getsize(many), 12 << 10)
        long_frame = frame("/" + "y" * 65536, 1, "g")
        entry = dict(entry, frames=[long_frame] * 65536)
        one = self.write("one.pickle", pickle.dumps({"segments": [], "device_traces": [[entry]]}, 4))
        self.assertLess(os.path.getsize(one), 256 << 10)
        for path in (many, one):          # (no subTest: `vram report` below only once the converter refuses)
            self.assert_quick_refusal(path, "trace would be longer than", "times the pickle's %d bytes"
                                      % os.path.getsize(path))
        r = report([many, "-o", os.path.join(self.dir, "r.html")])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertIn("snapshot_to_trace: %s: refused: its trace would be longer than" % many, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "r.html")))

        # PyTorch's: one dict per distinct frame, shared by every stack through it; one list per stack,
        # shared by the allocation and its frees. Its trace is ~35 times its pickle.
        pool = [frame("/opt/conda/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", 0,
                      "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
                      "c10::CompileTimeFunctionPointer<at::Tensor (c10::DispatchKeySet, at::Tensor const&), "
                      "&torch::autograd::VariableType::op_%d>>>::call(c10::OperatorKernel*)" % k)
                for k in range(400)]
        traces, t = [], 1_700_000_000_000_000
        for i in range(2000):
            stack = [pool[(i * 7 + j * 13) % 400] for j in range(40)]
            for n, action in enumerate(("alloc", "free_requested", "free_completed")):
                traces.append({"action": action, "addr": 0x7f0000000000 + 512 * i, "size": 512, "stream": 0,
                               "time_us": t + 3 * i + n, "frames": stack})
        real = self.write("real.pickle", pickle.dumps({"segments": [], "device_traces": [traces]}, 4))
        r, _ = self.bounded(real)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("\n# frames "), 2000)
        self.assertGreater(len(r.stdout), 20 * os.path.getsize(real))   # (well past the fixed allowance)

    def test_shared_blocks_are_walked_once(self):
        """6,000 segments sharing one list of 6,000 blocks (24 KB of pickle, 36 million blocks to a
        naive walk): converted in a second or two, to the trace the snapshot has without them."""
        want = convert(self.write("plain.pickle", pickle.dumps(make_snapshot())))
        self.assertEqual(want.returncode, 0, want.stderr)
        snap = make_snapshot()
        blocks = [{"address": 0x7e0000000000, "size": 512, "requested_size": 0, "state": "inactive", "frames": []}]
        shared = {"device": 0, "address": 0x7e0000000000, "total_size": 0, "blocks": blocks * 6000}
        snap["segments"] += [shared] * 6000
        path = self.write("blocks.pickle", pickle.dumps(snap, 4))
        self.assertLess(os.path.getsize(path), 32 << 10)
        r, seconds = self.bounded(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, want.stdout.replace("plain.pickle", "blocks.pickle"))
        self.assertLess(seconds, 3)

    def test_keys_that_share_a_hash_are_refused(self):
        """A dict (or set) of 100,000 whole numbers k * (2**61 - 1), which all hash alike (1.2 MB of pickle,
        minutes of loading): refused at the first in one line; a float key too. A dict with small
        whole-number keys still gets the shape's message."""
        def long1(v):
            b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            return b"\x8a" + bytes([len(b)]) + b

        keys = [long1(k * (2 ** 61 - 1)) for k in range(1, 100001)]
        cases = [
            ("dict", b"\x80\x04}(" + b"N".join(keys) + b"Nu.", "2305843009213693951"),
            ("set", b"\x80\x04\x8f(" + b"".join(keys) + b"\x90.", "2305843009213693951"),
            ("float key", b"\x80\x04}(G?\xf8\x00\x00\x00\x00\x00\x00Nu.", "1.5"),
        ]
        for name, data, shown in cases:
            with self.subTest(name):
                self.assert_quick_refusal(self.write("keys.pickle", data), "a dict key or set member " + shown,
                                          "a snapshot's keys are strings")
        path = self.write("s.pickle", pickle.dumps(dict(make_snapshot(), device_traces={0: []})))
        self.assert_one_line_refusal(convert(path), "'device_traces' is {0: []}, not a list")

    def test_memo_and_lengths_stay_within_the_pickle(self):
        """A snapshot whose pickle puts an object at memo index 2**31 - 1 (the C unpickler zeroes a 16 GiB
        memo for it) converts, to the same trace, in 2 GiB; a memo index beyond 32 bits (protocol 0's PUT)
        and a BYTEARRAY8 longer than the pickle are refused in one line."""
        data = pickle.dumps(make_snapshot(), 2)
        want = convert(self.write("plain.pickle", data))
        self.assertEqual(want.returncode, 0, want.stderr)
        path = self.write("memo.pickle", data[:-1] + b"r" + struct.pack("<I", 2 ** 31 - 1) + b".")
        r, seconds = self.bounded(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, want.stdout.replace("plain.pickle", "memo.pickle"))
        self.assertLess(seconds, 3)
        self.assert_quick_refusal(self.write("put.pickle", b"(lp%d\n." % 2 ** 32), "memo index 4294967296")
        self.assert_quick_refusal(self.write("ba.pickle", b"\x80\x05\x96" + struct.pack("<Q", 1 << 40) + b"."),
                                  "a bytearray of 1099511627776 bytes, more than its own 12")


if __name__ == "__main__":
    VRAM = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
