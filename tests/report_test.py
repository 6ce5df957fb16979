#!/usr/bin/env python3
"""report_test.py: `vram report` and tools/snapshot_to_trace.py, without a browser.

    python3 tests/report_test.py PATH/TO/vram

Reads the data the page embeds (the JSON in <script id="vram-data">) and checks it against what the
inputs imply: a hand-made trace (peak, timeline, map, largest blocks with frames, failed allocations
under --limit with vram's message), a PyTorch snapshot pickle built here with the standard library in
torch.cuda.memory._dump_snapshot()'s format (converted, the recording allocator's reserved bytes and
frames kept), the size of the report of traces/gpt2_train.trace.gz, and that the page fetches nothing;
and tools/record_trace.py where PyTorch cannot be imported (a sentence, not a traceback).
"""

import gzip
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
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


if __name__ == "__main__":
    VRAM = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
