#!/usr/bin/env python3
"""tests/torch_conformance_test.py: python/tests/torch_conformance.py's own logic, without PyTorch or a GPU.

    tests/torch_conformance_test.py [REPO]

--list with an `import torch` that fails: both parts list their rows (a few named rows of each, a
layout-only test with its reason), the counts in the part lines are the rows listed, and no name is
listed twice. An unknown --only row is a one-line error naming it (exit 2). Then the runner against a
fake `torch` module (written here): a probe that passes is PASS; a probe that hangs fails "timed out"
with its Python stack (the watchdog's SIGABRT) in the details; a port test that crashes its child
fails "died in this row" and the next test of its batch still runs, in a fresh child; --json holds
every row. Exit 0 when all hold, 1 with the first that does not.
"""
import json
import os
import subprocess
import sys
import tempfile

REPO = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, "python", "tests", "torch_conformance.py")
POISON = 'raise ImportError("torch must not be imported here")\n'
FAKE = '''import os, time
__version__ = "0.fake"
class _Cuda:
    def is_available(self): return True
    def synchronize(self): pass
    def get_device_name(self, i): return "fake card"
    def empty_cache(self): pass
    def mem_get_info(self, *a):
        if os.environ.get("FAKE_TORCH") == "hang":
            time.sleep(600)
        return (5, 10)
cuda = _Cuda()
def ones(*a, **k): return None
def device(x): return x
def full(*a, **k): os.abort()
'''


def run(torch_source, *args, env=None):
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "torch"))
        with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
            f.write(torch_source)
        env = dict(os.environ, PYTHONPATH=d, **(env or {}))
        p = subprocess.run([sys.executable, PROGRAM] + list(args), env=env, capture_output=True, text=True,
                           timeout=120)
    return p.returncode, p.stdout, p.stderr


def expect(condition, what, output=""):
    if not condition:
        print("FAIL: %s\n%s" % (what, output))
        sys.exit(1)


def check_list():
    rc, out, err = run(POISON, "--list")
    expect(rc == 0, "--list exit status %d" % rc, out + err)
    parts, part = {}, None
    for line in out.splitlines():
        if not line.startswith(" "):
            part, count = line.split(" (")[0], int(line.split("(")[1].split()[0])
            parts[part] = (count, [])
        else:
            parts[part][1].append(line.split()[0])
    expect(sorted(parts) == ["features", "port"], "parts listed: %s" % sorted(parts), out)
    for part, (count, names) in parts.items():
        expect(count == len(names), "%s says %d rows, lists %d" % (part, count, len(names)), out)
    names = parts["port"][1] + parts["features"][1]
    expect(len(set(names)) == len(names), "a row name is listed twice", out)
    for part, wanted in (("port", ("test_memory_stats", "test_graph_capture_oom", "test_checkpoint_restores_segments",
                                   "test_set_per_process_memory_fraction", "test_round_up_to_512_layout")),
                         ("features", ("stats", "graph_forked_stream", "compile_reduce_overhead", "ipc", "mempool"))):
        for name in wanted:
            expect(name in parts[part][1], "%s does not list %s" % (part, name), out)
    expect("test_round_up_to_512_layout" in out and "layout-only: asserts the native allocator's rounding" in out,
           "the layout-only test's reason is not listed", out)
    rc, out, err = run(POISON, "--only", "stats,no_such_row")
    expect(rc == 2 and len(err.strip().splitlines()) == 1 and "no_such_row" in err,
           "--only no_such_row: exit %d, stderr %r" % (rc, err))


def check_runner():
    with tempfile.TemporaryDirectory() as d:
        out_json = os.path.join(d, "out.json")
        rc, out, err = run(FAKE, "--allocator", "native", "--only", "mem_get_info", "--json", out_json)
        expect(rc == 0 and "mem_get_info  0 < free <= total" in out and "PASS" in out, "a passing probe", out + err)
        rc, out, err = run(FAKE, "--allocator", "native", "--only", "mem_get_info", env={
            "FAKE_TORCH": "hang", "TORCH_CONFORMANCE_LIMIT_S": "3"})
        expect(rc == 1 and "raised: timed out after 3 s" in out and "in probe_mem_get_info" in out,
               "a probe that hangs", out + err)
        rc, out, err = run(FAKE, "--allocator", "native", "-k", "TestEmptyCache", "--json", out_json)
        rows = {r["name"]: r for r in json.load(open(out_json))["rows"]}
    crashed = (rows["test_empty_cache_keeps_live_tensors"]["native"] or {}).get("error", "")
    expect(rc == 1 and crashed.startswith("the child died in this row"), "a crash: %r" % crashed, out + err)
    after = (rows["test_mem_get_info_reflects_allocation"]["native"] or {}).get("error", "")
    expect(after.startswith("AttributeError"), "the test after a crash: %r" % after, out + err)
    expect(len(rows) == 2 and all(r["status"] == "FAIL" for r in rows.values()), "the JSON's rows: %s" % rows)


if __name__ == "__main__":
    check_list()
    check_runner()
    print("ok")
