#!/usr/bin/env python3
"""report_browser_test.py: a `vram report` page opened in a real browser (headless chromium).

    python3 tests/report_browser_test.py PATH/TO/vram [SCREENSHOT.png]

Writes the report of traces/resnet50_train.trace.gz (--growth), opens it with
`chromium --headless --dump-dom` (the DOM after the page's scripts ran) and checks that #status reads
"ok" (the page writes any script error there), that the peak live and peak reserved bytes the page
shows (data-bytes of #peak-live and #peak-reserved, computed by its script from the timeline) equal
`vram replay --json`'s for the same trace and options, and that a 1400x1000 screenshot is not blank
(the PNG decoded with zlib: enough pixels that are not the white background, and some of the
timeline's reserved-bytes orange); and that the page of a trace whose times span all of int64 labels
its time axis (data-time-axis of the timeline canvas: the labels the "by wall time" axis draws) from 0
to 584542 years, rising, as the data's microseconds give them. Exit 0 pass, 1 fail, 77 skipped:
chromium is absent and CI is not set (CI=1, as .ci/run sets it, makes its absence a failure).
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.path.join(ROOT, "traces", "resnet50_train.trace.gz")
OPTIONS = ["--growth"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(exe, profile, *args):
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--user-data-dir=" + profile] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "unexpected PNG type %d/%d" % (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        ftype, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                cur[i] = (cur[i] + a) & 255
            elif ftype == 2:
                cur[i] = (cur[i] + b) & 255
            elif ftype == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(cur))
        prev = cur
    return width, height, bpp, rows


def time_labels(span):
    """The page's time axis labels (report.html's xLabels/timeLabel) for a span of `span` us."""
    xm, out = float(span), []
    for k in range(6):
        s, sp = xm * k / 5 / 1e6, xm / 1e6
        out.append("%.2f s" % s if sp <= 5 else "%.0f s" % s if sp < 1e6 else
                   "%.0f d" % (s / 86400) if sp < 864e8 else "%.0f y" % (s / 31557600))
    return out


def extreme_times(exe, vram, env, tmp, profile):
    """The time axis of a trace from INT64_MIN to INT64_MAX us (its span overflowed int64: the axis was
    scrambled); failures, or []."""
    trace = os.path.join(tmp, "extreme.trace")
    with open(trace, "w") as f:
        f.write("a 1 1048576 0 %d\na 2 1048576 0 0\nf 1 %d\nf 2 %d\n" % (-(1 << 63), (1 << 63) - 2, (1 << 63) - 1))
    page = os.path.join(tmp, "extreme.html")
    r = subprocess.run([vram, "report", trace, "-o", page], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return ["vram report of the extreme-times trace: rc %d: %s" % (r.returncode, r.stderr)]
    dom = browser(exe, profile, "--dump-dom", "file://" + page).stdout
    status = re.search(r'<p id="status">([^<]*)</p>', dom)
    axis = re.search(r'id="timeline"[^>]* data-time-axis="([^"]*)"', dom)
    want = time_labels((1 << 64) - 1)
    if not status or status.group(1) != "ok":
        return ["extreme times: #status is %r, not 'ok'" % (status.group(1) if status else None)]
    if not axis or axis.group(1).split("|") != want:
        return ["extreme times: the time axis reads %r, not %r" % (axis.group(1) if axis else None, want)]
    print("ok: the time axis of int64's whole range reads %s" % " | ".join(want))
    return []


def main():
    vram = os.path.abspath(sys.argv[1])
    keep = sys.argv[2] if len(sys.argv) > 2 else None
    exe = chromium()
    if not exe:
        if os.environ.get("CI"):
            print("FAIL: chromium is not installed, and CI must run this test (.ci/run installs it)")
            return 1
        print("SKIP: chromium is not installed (apt-get install chromium); .ci/run installs it and runs this test")
        return 77
    env = dict(os.environ, VRAM_BACKEND="sim", VRAM_SIM_DEVICES="12GiB")
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "report.html")
        r = subprocess.run([vram, "report", TRACE, "-o", page] + OPTIONS, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print("FAIL: vram report: rc %d: %s" % (r.returncode, r.stderr))
            return 1
        j = subprocess.run([vram, "replay", TRACE, "--json"] + OPTIONS, capture_output=True, text=True, env=env)
        if j.returncode != 0:
            print("FAIL: vram replay --json: rc %d: %s" % (j.returncode, j.stderr))
            return 1
        want = json.loads(j.stdout)
        profile = os.path.join(tmp, "profile")
        d = browser(exe, profile, "--dump-dom", "file://" + page)
        dom = d.stdout
        failures = []
        status = re.search(r'<p id="status">([^<]*)</p>', dom)
        if not status or status.group(1) != "ok":
            failures.append("#status is %r, not 'ok' (rc %d, stderr tail %r)" % (
                status.group(1) if status else None, d.returncode, d.stderr[-400:]))
        for elem, key in (("peak-live", "peak_live_bytes"), ("peak-reserved", "peak_reserved_bytes")):
            m = re.search(r'id="%s" data-bytes="(\d+)"' % elem, dom)
            shown = int(m.group(1)) if m else None
            if shown != want[key]:
                failures.append("#%s shows %s bytes, vram replay --json's %s is %d" % (elem, shown, key, want[key]))
            else:
                print("ok: #%s = %d bytes = replay's %s" % (elem, shown, key))
        shot = os.path.join(tmp, "shot.png")
        s = browser(exe, profile, "--screenshot=" + shot, "--window-size=1400,1000", "--hide-scrollbars",
                    "file://" + page)
        if not os.path.exists(shot):
            failures.append("no screenshot (rc %d, stderr tail %r)" % (s.returncode, s.stderr[-400:]))
        else:
            w, h, bpp, rows = png_pixels(shot)
            inked = orange = 0
            for row in rows:
                for x in range(0, w * bpp, bpp):
                    r_, g_, b_ = row[x], row[x + 1], row[x + 2]
                    if r_ < 235 or g_ < 235 or b_ < 235:
                        inked += 1
                    if r_ > 200 and 60 < g_ < 120 and b_ < 60:
                        orange += 1
            share = inked / float(w * h)
            print("screenshot %dx%d: %.1f%% of pixels not background, %d orange" % (w, h, 100 * share, orange))
            if share < 0.05:
                failures.append("the screenshot is blank: %.2f%% of pixels not background" % (100 * share))
            if orange < 200:
                failures.append("no reserved-bytes line in the screenshot (%d orange pixels)" % orange)
            if keep:
                shutil.copyfile(shot, keep)
        failures += extreme_times(exe, vram, env, tmp, profile)
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("PASS: the page rendered in %s without a script error, its peaks are replay's" % os.path.basename(exe))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
