"""PyTorch on vram: the GPU conformance program, two parts run by one runner under both allocators.

Part "features" is the feature table: one probe per feature of PyTorch's CUDA allocator as a program
sees it (statistics, empty_cache, memory fraction, out-of-memory, record_stream, CUDA graphs' private
pools, torch.compile's reduce-overhead mode, memory history, IPC, MemPool, ...). A probe returns a short
string naming what it checked (the values it compared, or a property such as "reserved dropped" where
the numbers legitimately differ between allocators) or raises. Each probe runs in a fresh process.

Part "port" is a port (rewritten, not copied) of the tests of PyTorch's test/test_cuda.py that exercise
the CUDA caching allocator: memory statistics, empty_cache, out-of-memory (the retry after freeing the
cache, record_stream under memory pressure), record_stream, set_per_process_memory_fraction, snapshots
and history, CUDA graphs and their private pools (pool sharing, three successive graphs, the pool
checkpointing that torch.compile's CUDA graph trees use), MemPool, streams. They are unittest cases, run
one after another in one process. A test that asserts the native allocator's own layout (its segment
sizes and counts, block splitting, rounding, messages, settings strings) is layout-only, with its
reason: skipped under vram. A port test that ran the same check as a probe is that probe (the probe
took its assertions). Timing is never relied on: where a check needs a stream still busy it checks
stream.query() after the fact and retries with a longer sleep.

    python3 python/tests/torch_conformance.py --list [--part P]
    VRAM_LIBRARY=build/libvram.so python3 python/tests/torch_conformance.py [--part port|features|all]
        [--allocator native|vram|both] [--only NAME,...] [-k TEXT] [--jobs N] [--json OUT.json]

Defaults: every part, both allocators. Under vram, memory growth is set on every GPU and
vram.torch.install() runs before anything touches CUDA; vram.torch.mode must be "allocator". An
"install" child per allocator runs first (it builds vram's extension once, so that no row pays for it;
if it fails under vram, no row runs under vram). The table gives each row's result under each allocator
and its status: MATCH (both passed, same result), LAYOUT (layout-only: passed natively, skipped under
vram), SKIPPED (skipped under both), DIFFER (one raised and the other did not, or the results differ),
FAILED (both raised: the check itself or the machine is at fault); under one allocator PASS, FAIL or
SKIPPED. Each row that is none of MATCH, LAYOUT, SKIPPED, PASS is detailed under the table with its
source line, each allocator's error and its stderr tail; then "N of M probes match" for the features
and "port under A: N passed, M failed, K skipped" per allocator.

One watchdog, in the parent: a child that gives no result for a row within the row's limit (probe
300 s, port test 600 s, install 900 s) gets SIGABRT (faulthandler writes its Python stack into that
row's stderr), then SIGKILL, and the row fails "timed out"; a child that dies in a row fails that row;
either way a fresh child runs the rest of its batch (TORCH_CONFORMANCE_LIMIT_S=N sets every limit to N).
SIGTERM or SIGINT to the run kills its children and prints what was done. --jobs N runs up to N lanes (a part under one
allocator) at once (default 1: the memory-fraction and out-of-memory checks expect the card to
themselves; bench/gpu_final.sh uses 3, as it ran the two programs this one replaced). --json writes
{allocators, install: {A: {outcome, result}}, rows: [{name, part, line, status, layout_only, native:
{outcome, result | error}, vram: {...}}]} (the install's result names torch, the card and Python),
rewritten after each row, so that a run killed from outside keeps what was done. Exit status 0 when
every row is MATCH, LAYOUT, SKIPPED or PASS, 1 otherwise, 2 for bad arguments.

Invariants: row names are unique across parts (--list checks it; ctest torch_conformance_list runs it);
the parent never imports torch (--list works without PyTorch); a child chooses its allocator before it
imports torch. Locks: the lanes' threads record results under Results.lock. Needs: Python 3.8+, PyTorch with CUDA (2.11 was the target), one GPU with a few tens of
GiB (the memory-fraction and retry checks allocate up to 0.7 of the free memory), Triton (Inductor) for
compile_reduce_overhead, cuDNN for cudnn_benchmark; vram from this repository's python/ folder (it
finds libvram.so itself or through VRAM_LIBRARY). Only the standard library and torch are used. Not
part of the unittest suite (CI has no GPU and no PyTorch).
"""
import argparse
import concurrent.futures
import contextlib
import copy
import faulthandler
import functools
import gc
import inspect
import json
import os
import platform
import random
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest

torch = None              # a child imports it (global) once its allocator is set up; the parent never does

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
THIS_FILE = os.path.basename(__file__)           # torch_conformance.py
THIS_STEM = os.path.splitext(THIS_FILE)[0]
MARK = b"@@TORCH_CONFORMANCE@@ "                 # a child's result lines on its stdout
ROW_MARK = "@@ROW %s@@"                           # a child's stderr line before each row's output
MiB = 1 << 20
GiB = 1 << 30
# the watchdog's limits; TORCH_CONFORMANCE_LIMIT_S sets them all (ctest torch_conformance tries the watchdog)
_LIMIT = int(os.environ.get("TORCH_CONFORMANCE_LIMIT_S", "0") or 0)
PROBE_TIMEOUT_S = _LIMIT or 300
TEST_TIMEOUT_S = _LIMIT or 600
INSTALL_TIMEOUT_S = _LIMIT or 900   # also the limit of a child's setup before its first row
ABORT_GRACE_S = 10        # from SIGABRT (the stack dump) to SIGKILL
# torch.cuda._sleep cycles, about 0.1 s to 2 s on an H200: a longer sleep when the stream that had
# to be busy was already done when checked (a first sleep has been seen to finish at once)
SLEEP_CYCLES = (200_000_000, 1_000_000_000, 2_000_000_000, 4_000_000_000)
# PyTorch's constants (c10/cuda/CUDACachingAllocator.cpp)
kMinBlockSize = 512
kSmallSize = 1048576
kSmallBuffer = 2097152
kLargeBuffer = 20971520
kMinLargeAlloc = 10485760
kRoundLarge = 2097152
CORE_STATS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
              "active_bytes", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "large_pool", "small_pool")
METRICS = ("current", "peak", "allocated", "freed")
OK = ("MATCH", "LAYOUT", "SKIPPED", "PASS")

ALLOCATOR = "native"      # in a child: the allocator it runs under
VRAM_MODE = None          # in a child under vram: vram.torch.mode
LAYOUT_ONLY = {}          # port test name -> why it asserts the native allocator's own layout
FEATURES = []             # the feature table's rows, in order
CHILDREN = set()          # in the parent: the children running now (the lanes' threads add and remove)
STOPPING = False          # in the parent: set by SIGTERM or SIGINT


class Row:
    """One check: a feature probe (fn() returns a string) or a port test (method `name` of cls)."""

    def __init__(self, name, part, fn, same=None, cls=None):
        self.name, self.part, self.fn, self.cls = name, part, fn, cls
        self.same = same or (lambda a, b: a == b)
        self.timeout = TEST_TIMEOUT_S if part == "port" else PROBE_TIMEOUT_S
        self.line = inspect.unwrap(fn).__code__.co_firstlineno

    @property
    def layout_only(self):
        return LAYOUT_ONLY.get(self.name) if self.part == "port" else None

    def where(self):
        return "%s:%d%s" % (THIS_FILE, self.line, " (%s)" % self.cls.__name__ if self.cls else "")


def feature(name, same=None):
    """Registers a probe of the feature table; `same` compares the two result strings (default: equality)."""
    def register(fn):
        FEATURES.append(Row(name, "features", fn, same))
        return fn
    return register


# ---- shared by both parts --------------------------------------------------------------------

def _setup_allocator(allocator):
    """In a child (or the ipc checks' receiver), before anything touches CUDA: nothing for "native";
    for "vram" memory growth on every GPU, vram.torch.install(), and mode "allocator" required."""
    global VRAM_MODE
    if allocator != "vram":
        return "native"
    sys.path.insert(0, os.path.join(REPO, "python"))
    import vram
    gpus = vram.config.list_physical_devices("GPU")
    if not gpus:
        raise RuntimeError("vram lists no GPU (vram.diagnose() says why)")
    for gpu in gpus:
        vram.config.set_memory_growth(gpu, True)
    vram.torch.install()
    VRAM_MODE = vram.torch.mode
    print("vram.torch.mode = %r" % (VRAM_MODE,), file=sys.stderr, flush=True)
    if VRAM_MODE != "allocator":
        raise RuntimeError("vram.torch.mode is %r, not 'allocator' (see the install warning above)" % (VRAM_MODE,))
    return VRAM_MODE


def _check(condition, what):
    if not condition:
        raise AssertionError(what)


def _warm():
    """Initializes CUDA with one tiny tensor, so that later deltas count only the probe's tensors."""
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()


# ---- part "features": the feature table --------------------------------------------------------

STATS_KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.peak", "active_bytes.large_pool.current",
              "requested_bytes.all.current", "num_alloc_retries", "num_ooms")


@feature("stats")
def probe_stats():
    _warm()
    base = torch.cuda.memory_allocated()
    t = torch.empty(262144, dtype=torch.float32, device="cuda")   # 1 MiB
    up = torch.cuda.memory_allocated() - base
    _check(up == 1048576, "memory_allocated rose by %d for a 1 MiB tensor, not 1048576" % up)
    _check(torch.cuda.max_memory_allocated() >= base + 1048576, "max_memory_allocated below the tensor")
    _check(torch.cuda.memory_reserved() >= torch.cuda.memory_allocated(), "memory_reserved < memory_allocated")
    del t
    down = torch.cuda.memory_allocated() - base
    _check(down == 0, "memory_allocated is %+d after del, not back to before" % down)
    stats = torch.cuda.memory_stats()
    missing = [k for k in STATS_KEYS if k not in stats]
    _check(not missing, "memory_stats() lacks %s" % missing)
    summary = torch.cuda.memory_summary()
    _check(isinstance(summary, str) and "Allocated memory" in summary, "memory_summary() lacks 'Allocated memory'")
    return "allocated +%d then %d, max>=, reserved>=allocated, keys, summary" % (up, down)


@feature("small_large")
def probe_small_large():
    _warm()
    small, large = "allocated_bytes.small_pool.current", "allocated_bytes.large_pool.current"
    s0 = torch.cuda.memory_stats()
    a = torch.empty(128, dtype=torch.float32, device="cuda")   # 512 bytes
    s1 = torch.cuda.memory_stats()
    b = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
    s2 = torch.cuda.memory_stats()
    d_small, d_large = s1[small] - s0[small], s1[large] - s0[large]
    _check((d_small, d_large) == (512, 0), "512 bytes: small_pool %+d, large_pool %+d" % (d_small, d_large))
    d_small, d_large = s2[small] - s1[small], s2[large] - s1[large]
    _check((d_small, d_large) == (0, 2 * MiB), "2 MiB: small_pool %+d, large_pool %+d" % (d_small, d_large))
    for pool, before, after in (("small_pool", s0, s1), ("large_pool", s1, s2)):
        key = "allocation.%s.current" % pool
        _check(after[key] - before[key] == 1, "%s rose by %d for one tensor" % (key, after[key] - before[key]))
    del a, b
    s3 = torch.cuda.memory_stats()
    _check((s3[small], s3[large]) == (s0[small], s0[large]), "small_pool/large_pool not back after del")
    return "small_pool +512, large_pool +2097152"


@feature("reset_peak")
def probe_reset_peak():
    _warm()
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
    del x
    _check(torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated() + 64 * MiB,
           "max_memory_allocated did not see the 64 MiB tensor")
    torch.cuda.reset_peak_memory_stats()
    peak, current = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    _check(peak == current, "after reset_peak_memory_stats: max %d != current %d" % (peak, current))
    _check(torch.cuda.max_memory_reserved() == torch.cuda.memory_reserved(), "max_memory_reserved != reserved")
    s = torch.cuda.memory_stats()
    for key in ("%s.%s." % (name, pool) for name in CORE_STATS for pool in POOLS):
        _check(s[key + "peak"] == s[key + "current"], "after reset_peak_memory_stats: %speak != current" % key)
    _check(s["allocated_bytes.all.allocated"] > 0, "allocated_bytes.all.allocated is 0 before the reset")
    torch.cuda.reset_accumulated_memory_stats()
    s = torch.cuda.memory_stats()
    total = s["allocated_bytes.all.allocated"]
    _check(total == 0, "after reset_accumulated_memory_stats: allocated_bytes.all.allocated = %d" % total)
    for key in ["%s.%s.%s" % (n, p, m) for n in CORE_STATS for p in POOLS for m in ("allocated", "freed")] + \
            ["num_alloc_retries", "num_ooms"]:
        _check(s[key] == 0, "after reset_accumulated_memory_stats: %s = %d" % (key, s[key]))
    return "peak == current after reset, accumulated allocated 0"


@feature("empty_cache")
def probe_empty_cache():
    _warm()
    torch.cuda.empty_cache()
    x = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    del x
    torch.cuda.synchronize()
    reserved_before = torch.cuda.memory_reserved()
    free_before = torch.cuda.mem_get_info()[0]
    torch.cuda.empty_cache()
    reserved_after = torch.cuda.memory_reserved()
    free_after = torch.cuda.mem_get_info()[0]
    _check(reserved_after <= reserved_before - 256 * MiB,
           "memory_reserved %d -> %d over empty_cache, not 256 MiB less" % (reserved_before, reserved_after))
    _check(free_after - free_before >= 128 * MiB,
           "the driver's free memory rose by %d bytes over empty_cache" % (free_after - free_before))
    return "reserved dropped, driver free rose"


@feature("cudnn_benchmark")
def probe_cudnn_benchmark():
    # cuDNN's benchmark mode asks the allocator for its largest free block (cacheInfo)
    import torch.nn.functional as F
    _check(torch.backends.cudnn.is_available(), "cuDNN is not available")
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        torch.manual_seed(0)
        conv = torch.nn.Conv2d(64, 64, 3).cuda()
        x = torch.randn(16, 64, 56, 56, device="cuda", requires_grad=True)
        for _ in range(2):                     # a second call takes the cached algorithm
            y = conv(x)
            gx, gw = torch.autograd.grad(y.sum(), (x, conv.weight))
        torch.cuda.synchronize()
    finally:
        torch.backends.cudnn.benchmark = old
    _check(tuple(y.shape) == (16, 64, 54, 54), "cuDNN's output has shape %s" % (tuple(y.shape),))
    torch.backends.cudnn.enabled = False      # the reference: PyTorch's own convolution
    try:
        y2 = F.conv2d(x, conv.weight, conv.bias)
        gx2, gw2 = torch.autograd.grad(y2.sum(), (x, conv.weight))
    finally:
        torch.backends.cudnn.enabled = True
    for name, a, b in (("output", y, y2), ("input grad", gx, gx2), ("weight grad", gw, gw2)):
        err = float((a - b).detach().abs().max()) / max(float(b.detach().abs().max()), 1e-30)
        _check(err < 2e-2, "cuDNN's %s differs from the non-cuDNN path by %.3g (relative)" % (name, err))
    return "ok, output %s, matches the non-cuDNN path" % (tuple(y.shape),)


@feature("memory_fraction")
def probe_memory_fraction():
    _warm()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(0.1)
    try:
        fraction = torch.cuda.get_per_process_memory_fraction()
        _check(abs(fraction - 0.1) < 1e-6, "get_per_process_memory_fraction() = %r" % (fraction,))
        try:
            torch.empty(int(0.2 * total), dtype=torch.uint8, device="cuda")
            raise AssertionError("0.2 of the card was allocated under a 0.1 fraction")
        except torch.OutOfMemoryError:
            pass
        y = torch.empty(int(0.05 * total), dtype=torch.uint8, device="cuda")
        y[-1] = 9
        _check(int(y[-1].item()) == 9, "the 0.05 tensor does not hold a value")
        del y
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    return "fraction 0.1, OOM past fraction, 0.05 of the card ok"


@feature("oom_message")
def probe_oom_message():
    _warm()
    total = torch.cuda.get_device_properties(0).total_memory
    x = torch.ones(1024, device="cuda")
    ooms, allocated = torch.cuda.memory_stats()["num_ooms"], torch.cuda.memory_allocated()
    message = None
    try:
        torch.empty(4 * total, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as e:
        message = str(e)
    _check(message is not None, "4x the card's memory did not raise torch.OutOfMemoryError")
    _check(message.strip() != "", "the OutOfMemoryError's message is empty")
    _check(torch.cuda.memory_stats()["num_ooms"] == ooms + 1, "num_ooms did not rise by one")
    _check(torch.cuda.memory_allocated() == allocated, "memory_allocated changed over the failed allocation")
    x.fill_(2.0)
    _check(bool((x == 2.0).all().item()), "a kernel after the OOM did not run")
    return "OutOfMemoryError, message non-empty, kernels run after"


@feature("mem_get_info")
def probe_mem_get_info():
    _warm()
    free, total = torch.cuda.mem_get_info()
    _check(0 < free <= total, "mem_get_info() = (%d, %d)" % (free, total))
    by_index, by_device = torch.cuda.mem_get_info(0)[1], torch.cuda.mem_get_info(torch.device("cuda:0"))[1]
    _check(by_index == by_device, "mem_get_info(0) total %d, (cuda:0) total %d" % (by_index, by_device))
    return "0 < free <= total"


@feature("record_stream")
def probe_record_stream():
    _warm()
    side = torch.cuda.Stream()
    current = torch.cuda.current_stream()
    n = 1 << 20
    for cycles in SLEEP_CYCLES:
        torch.cuda.synchronize()
        x = torch.ones(n, device="cuda")
        ptr = x.data_ptr()
        side.wait_stream(current)
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
            x.add_(1.0)
        x.record_stream(side)
        del x
        y = torch.empty(n, device="cuda")
        # still busy after y was allocated, so it was busy when y was: the check is valid
        if not side.query():
            reused = y.data_ptr() == ptr
            side.synchronize()
            _check(not reused, "a block recorded on a busy stream was handed out again")
            return "not reused while busy"
        del y
    raise RuntimeError("the side stream was never still busy after %d cycles" % SLEEP_CYCLES[-1])


@feature("streams")
def probe_streams():
    _warm()
    results = {}

    def work(k):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            acc = torch.zeros((), dtype=torch.float64, device="cuda")
            expected = 0
            for i in range(300):
                n = 1000 + 997 * i
                t = torch.full((n,), float(k), device="cuda")
                u = t * 2.0
                acc += u.sum(dtype=torch.float64)
                expected += 2 * k * n
                del t, u
            stream.synchronize()
            results[k] = (float(acc.item()), float(expected))

    run_in_threads(work, [(1,), (2,)])
    _check(len(results) == 2, "a worker gave no result")
    for k, (got, expected) in sorted(results.items()):
        _check(got == expected, "stream %d: sum %r, expected %r" % (k, got, expected))
    return "sums correct"


@feature("cuda_graph_private_pool")
def probe_cuda_graph_private_pool():
    _warm()
    n = 1 << 20
    s = torch.cuda.Stream()
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = x * 2 + 1        # (x * 2 is freed inside the capture: it stays the graph's)
    eager = [torch.full((n,), 7.0, device="cuda") for _ in range(4)]
    with torch.cuda.stream(s):
        eager += [torch.full((n,), 7.0, device="cuda") for _ in range(4)]
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    for i, e in enumerate(eager):
        _check(bool((e == 7.0).all().item()), "eager tensor %d was overwritten by the graph's replay" % i)
    _check(torch.equal(out, x * 2 + 1), "the graph's output is not x * 2 + 1")
    return "eager tensor intact"


@feature("graph_forked_stream")
def probe_graph_forked_stream():
    """A capture that forks a side stream (it joins the capture through wait_stream), allocates and
    frees there and on the capture stream: every request goes to the graph's private pool, replays give
    the right values, and eager tensors allocated afterwards on both streams are left alone."""
    _warm()
    n = 1 << 20
    s, side = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        side.wait_stream(s)               # fork: side is captured into the same graph from here
        with torch.cuda.stream(side):
            a = x * 3                     # allocated on the forked stream
            b = a + 1                     # 3x + 1
            del a                         # freed on the forked stream inside the capture
        s.wait_stream(side)               # join
        c = b * 2                         # 6x + 2, on the capture stream
        b.record_stream(s)
        del b
        out = c + x                       # 7x + 2: may take memory freed inside the capture
        del c
    eager = [torch.full((n,), 5.0, device="cuda") for _ in range(3)]
    with torch.cuda.stream(side):
        eager += [torch.full((n,), 5.0, device="cuda") for _ in range(3)]
    torch.cuda.current_stream().wait_stream(side)
    want = x * 7 + 2
    for i in range(10):
        g.replay()
        torch.cuda.synchronize()
        _check(torch.equal(out, want), "replay %d: the graph's output is not 7x + 2" % i)
    for i, e in enumerate(eager):
        _check(bool((e == 5.0).all().item()), "eager tensor %d was overwritten by the graph's replay" % i)
    return "10 replays correct, eager tensors intact"


@feature("two_graph_pools")
def probe_two_graph_pools():
    _warm()
    size = 1_000_000
    a = torch.ones(size, device="cuda")
    s = torch.cuda.Stream()
    g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g0, stream=s):
        b = a.clone()
        for _ in range(5):
            b = func_with_temps(b, 1)
    with torch.cuda.graph(g1, stream=s):
        c = a.clone()
        for _ in range(5):
            c = func_with_temps(c, 2)
    s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()
    current = torch.cuda.current_stream()
    want_b, want_c = torch.full_like(a, 94.0), torch.full_like(a, 156.0)
    for i in range(20):
        torch.cuda.synchronize()
        with torch.cuda.stream(s0):
            torch.cuda._sleep(1_000_000)     # lines the two replays up on the GPU
            s1.wait_stream(s0)
            g0.replay()
        with torch.cuda.stream(s1):
            g1.replay()
        current.wait_stream(s0)
        current.wait_stream(s1)
        _check(torch.equal(b, want_b), "replay %d: graph 0's result is wrong" % i)
        _check(torch.equal(c, want_c), "replay %d: graph 1's result is wrong" % i)
    return "both correct over 20 concurrent replays"


@feature("graph_shared_pool")
def probe_graph_shared_pool():
    _warm()
    size = 1000
    pool = torch.cuda.graph_pool_handle()
    a = torch.ones(size, device="cuda")
    s = torch.cuda.Stream()
    g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g0, pool=pool, stream=s):
        b = a.clone()
        for _ in range(5):
            b = func_with_temps(b, 1)
    with torch.cuda.graph(g1, pool=pool, stream=s):   # uses g0's output
        for _ in range(5):
            b = func_with_temps(b, 1)
    for round_ in range(3):
        c = a.clone()
        for _ in range(2):
            c = func_with_temps(c, 3)
        g0.replay()
        for _ in range(2):
            c = func_with_temps(c, 3)
        g1.replay()
        for _ in range(2):
            c = func_with_temps(c, 3)
        torch.cuda.synchronize()
        _check(torch.equal(b, torch.full_like(a, 3070.0)), "round %d: the graphs' result is wrong" % round_)
        _check(torch.equal(c, torch.full_like(a, 442.0)), "round %d: the eager result is wrong" % round_)
    return "result correct"


@feature("compile_reduce_overhead")
def probe_compile_reduce_overhead():
    import copy
    import torch.nn.functional as F
    from torch._dynamo.utils import counters
    _warm()
    skips = counters["inductor"]["cudagraph_skips"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for i in range(4):
            x = torch.randn(32, 64, device="cuda")
            torch.compiler.cudagraph_mark_step_begin()
            y = compiled(x).clone()
            _check(torch.allclose(y, model(x), rtol=1e-3, atol=1e-3), "inference call %d differs from eager" % i)
    ref = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).cuda()
    mine = copy.deepcopy(ref)
    step = torch.compile(mine, mode="reduce-overhead")
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt_mine = torch.optim.SGD(mine.parameters(), lr=0.05)
    x, target = torch.randn(32, 64, device="cuda"), torch.randn(32, 1, device="cuda")
    for i in range(5):
        torch.compiler.cudagraph_mark_step_begin()
        loss = F.mse_loss(step(x), target)
        loss.backward()
        opt_mine.step()
        opt_mine.zero_grad()
        loss_ref = F.mse_loss(ref(x), target)
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
        _check(abs(loss.item() - loss_ref.item()) <= 1e-4 + 1e-3 * abs(loss_ref.item()),
               "training step %d: loss %r, eager %r" % (i, loss.item(), loss_ref.item()))
    for p, q in zip(mine.parameters(), ref.parameters()):
        _check(torch.allclose(p, q, rtol=1e-3, atol=1e-4), "the trained parameters differ from eager")
    skipped = counters["inductor"]["cudagraph_skips"] - skips
    _check(skipped == 0, "Inductor skipped CUDA graphs %d times (see the log)" % skipped)
    return "matches eager"


@feature("memory_history")
def probe_memory_history():
    from torch.cuda._memory_viz import segment_plot, trace_plot
    _warm()
    torch.cuda.memory._record_memory_history(max_entries=1000, stacks="python")
    try:
        kept = [torch.empty(1 << k, device="cuda") for k in (8, 14, 20)]
        del kept[0]
        s = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    _check("segments" in s and "device_traces" in s, "the snapshot lacks segments or device_traces")
    me = os.path.basename(__file__)
    found = any(e.get("action") == "alloc"
                and any(os.path.basename(f.get("filename", "")) == me for f in e.get("frames", []))
                for trace in s["device_traces"] for e in trace)
    _check(found, "no 'alloc' trace entry has a frame in %s" % me)
    for plot in (trace_plot, segment_plot):
        html = plot(s)
        _check(isinstance(html, str) and html, "%s() gave nothing" % plot.__name__)
    return "history ok"


def _ipc_receiver(payload, done, allocator):
    """The spawned process of probe_ipc: the same allocator as its parent."""
    try:
        _setup_allocator(allocator)
        import pickle
        import torch
        t = pickle.loads(payload)
        ok = bool((t == 3.0).all().item())
        t.fill_(5.0)
        torch.cuda.synchronize()
        del t
        done.put(("ok", None) if ok else ("error", "the child did not see 3.0"))
    except BaseException as e:
        done.put(("error", "child: %s: %s" % (type(e).__name__, e)))


@feature("ipc")
def probe_ipc():
    import queue
    import torch.multiprocessing as mp
    from multiprocessing.reduction import ForkingPickler
    _warm()
    t = torch.full((1 << 20,), 3.0, device="cuda")
    torch.cuda.synchronize()
    # pickled here (as Queue.put would in its feeder thread), so that a refusal raises here
    payload = bytes(ForkingPickler.dumps(t))
    ctx = mp.get_context("spawn")
    done = ctx.Queue()
    p = ctx.Process(target=_ipc_receiver, args=(payload, done, ALLOCATOR))
    p.start()
    try:
        try:
            status, error = done.get(timeout=240)
        except queue.Empty:
            raise RuntimeError("the child did not answer in 240 s (alive: %s)" % p.is_alive())
    finally:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
            p.join()
    _check(status == "ok", error)
    _check(bool((t == 5.0).all().item()), "the parent does not see the child's 5.0")
    return "shared"


@feature("mempool")
def probe_mempool():
    _warm()
    pool = torch.cuda.MemPool()
    outside = pool.use_count()
    _check(outside >= 1, "use_count %d before use_mem_pool" % outside)
    with torch.cuda.use_mem_pool(pool):
        t = torch.full((1 << 20,), 3.0, device="cuda")
        inside = pool.use_count()
    after = pool.use_count()
    _check(bool((t == 3.0).all().item()), "the pool's tensor does not hold its values")
    _check((inside, after) == (outside + 1, outside), "use_count %d before, %d inside, %d after" % (outside, inside, after))
    del t
    return "mempool ok"


# ---- part "port": PyTorch's allocator tests ----------------------------------------------------

def _alloc_conf():
    return ",".join(os.environ.get(v, "") for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))


EXPANDABLE = "expandable_segments:true" in _alloc_conf().replace(" ", "").lower()


def layout_only(reason):
    """Marks a test that asserts the native allocator's own layout: skipped under vram, saying why."""
    def mark(fn):
        assert fn.__name__ not in LAYOUT_ONLY, fn.__name__
        LAYOUT_ONLY[fn.__name__] = reason

        @functools.wraps(fn)
        def run(self, *args, **kwargs):
            if ALLOCATOR != "native":
                raise unittest.SkipTest("layout-only: " + reason)
            if EXPANDABLE:
                raise unittest.SkipTest("layout-only, written for expandable_segments off")
            return fn(self, *args, **kwargs)
        return run
    return mark


def fresh():
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()


def stats():
    return torch.cuda.memory_stats()


def total_memory():
    return torch.cuda.get_device_properties(0).total_memory


def func_with_temps(t, val):
    x = t.clone() + val
    y = t.clone() + val
    return x + y


def set_allocator_settings(text):
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None:
        setter = torch.cuda.memory._set_allocator_settings
    setter(text)


def segments_of_pool(pool_id):
    return [s for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) == tuple(pool_id)]


def address_in_segments(ptr, segments):
    return any(s["address"] <= ptr < s["address"] + s["total_size"] for s in segments)


def live_blocks(pool_id):
    return sum(b["state"] == "active_allocated" for s in segments_of_pool(pool_id) for b in s["blocks"])


def cudagraphify(fn, inputs, pool=None):
    """Warms fn up on a side stream, then captures it into a graph (as PyTorch's tests do)."""
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(*inputs)
    stream.synchronize()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream, pool=pool):
        outputs = fn(*inputs)
    return graph, outputs


def uint8_ones(size):
    return torch.ones([size], device="cuda", dtype=torch.uint8)


@contextlib.contextmanager
def memory_fraction(fraction):
    orig = torch.cuda.get_per_process_memory_fraction(0)
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(orig, 0)


@contextlib.contextmanager
def recording(*args, **kwargs):
    torch.cuda.memory._record_memory_history(*args, **kwargs)
    try:
        yield
    finally:
        torch.cuda.memory._record_memory_history(None)


def run_in_threads(fn, args_list):
    errors = []

    def wrapped(*args):
        try:
            fn(*args)
        except BaseException as e:  # re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class AllocatorTestCase(unittest.TestCase):
    def setUp(self):
        fresh()

    def tearDown(self):
        try:
            fresh()
        except Exception:
            pass

    def assertAllEqual(self, t, value, msg=None):
        self.assertTrue(bool((t == value).all().item()), msg or "not all %r" % (value,))

    def while_busy(self, scenario):
        """Runs scenario(cycles) with longer sleeps until it reports that its stream was still busy
        when it checked (scenario returns True once it asserted); fails if it never was."""
        for cycles in SLEEP_CYCLES:
            if scenario(cycles):
                return
            torch.cuda.synchronize()
        self.fail("the stream was never still busy after %d cycles of torch.cuda._sleep" % SLEEP_CYCLES[-1])


# ---- memory statistics -----------------------------------------------------------------------


class TestMemoryStats(AllocatorTestCase):
    def test_memory_allocation(self):
        prev = torch.cuda.memory_allocated()
        mem = torch.cuda.caching_allocator_alloc(1)
        try:
            self.assertGreater(torch.cuda.memory_allocated(), prev)
        finally:
            torch.cuda.caching_allocator_delete(mem)
        self.assertEqual(torch.cuda.memory_allocated(), prev)

    def test_memory_stats(self):
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.reset_accumulated_memory_stats()
        prev_allocated, prev_reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        prev_max_allocated, prev_max_reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        self.assertEqual(prev_allocated, prev_max_allocated)
        self.assertEqual(prev_reserved, prev_max_reserved)
        prev_active = stats()["active_bytes.all.current"]
        tmp = torch.randn(256, device="cuda")      # 1 KiB
        self.assertEqual(stats()["active_bytes.all.current"], prev_active + 1024)
        self.assertEqual(stats()["active_bytes.all.freed"], 0)
        del tmp
        gc.collect()
        torch.cuda.empty_cache()
        self.assertEqual(stats()["active_bytes.all.current"], prev_active)
        self.assertEqual(stats()["active_bytes.all.freed"], 1024)
        torch.cuda.reset_peak_memory_stats()
        self.assertEqual(torch.cuda.max_memory_allocated(), prev_max_allocated)
        self.assertEqual(torch.cuda.max_memory_reserved(), prev_max_reserved)

    def test_max_memory_allocated_tracks_peak(self):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        a = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
        b = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
        del a, b
        self.assertGreaterEqual(torch.cuda.max_memory_allocated(), base + 16 * MiB)
        self.assertEqual(torch.cuda.memory_allocated(), base)
        self.assertGreaterEqual(torch.cuda.max_memory_reserved(), torch.cuda.memory_reserved())

    def test_memory_reserved_covers_allocated(self):
        tensors = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (100, 5000, 3 * MiB, 30 * MiB)]
        self.assertGreaterEqual(torch.cuda.memory_reserved(), torch.cuda.memory_allocated())
        self.assertGreaterEqual(torch.cuda.memory_reserved(), sum(t.numel() for t in tensors))
        s = stats()
        for pool in POOLS:
            self.assertGreaterEqual(s["reserved_bytes.%s.current" % pool], s["allocated_bytes.%s.current" % pool])
        del tensors

    def test_requested_bytes_exact(self):
        s0 = stats()
        t = torch.empty(1000, dtype=torch.uint8, device="cuda")
        s1 = stats()
        self.assertEqual(s1["requested_bytes.all.current"] - s0["requested_bytes.all.current"], 1000)
        self.assertGreaterEqual(s1["allocated_bytes.all.current"] - s0["allocated_bytes.all.current"], 1000)
        del t
        s2 = stats()
        self.assertEqual(s2["requested_bytes.all.current"], s0["requested_bytes.all.current"])
        self.assertEqual(s2["allocated_bytes.all.current"], s0["allocated_bytes.all.current"])

    def test_allocation_and_active_counts(self):
        s0 = stats()
        ts = [torch.empty(1000, dtype=torch.uint8, device="cuda") for _ in range(5)]
        s1 = stats()
        for key in ("allocation.all.current", "active.all.current", "allocation.all.allocated", "active.all.allocated"):
            self.assertEqual(s1[key] - s0[key], 5, key)
        del ts
        s2 = stats()
        for key in ("allocation.all.current", "active.all.current"):
            self.assertEqual(s2[key], s0[key], key)
        self.assertEqual(s2["allocation.all.freed"] - s0["allocation.all.freed"], 5)

    def test_memory_stats_nested_dict(self):
        t = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        nested = torch.cuda.memory_stats_as_nested_dict()
        flat = stats()
        self.assertEqual(nested["allocated_bytes"]["all"]["current"], flat["allocated_bytes.all.current"])
        self.assertEqual(nested["reserved_bytes"]["large_pool"]["peak"], flat["reserved_bytes.large_pool.peak"])
        self.assertEqual(nested["num_ooms"], flat["num_ooms"])
        del t

    def test_memory_stats_keys(self):
        s = stats()
        for name in CORE_STATS:
            for pool in POOLS:
                for metric in METRICS:
                    key = "%s.%s.%s" % (name, pool, metric)
                    self.assertIn(key, s)
                    self.assertIsInstance(s[key], int, key)
                    self.assertGreaterEqual(s[key], 0, key)
        for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free"):
            self.assertIn(key, s)
            self.assertGreaterEqual(s[key], 0, key)
        for name in ("oversize_allocations", "oversize_segments"):
            for metric in METRICS:
                self.assertIn("%s.%s" % (name, metric), s)
        self.assertIn("max_split_size", s)

    def test_memory_summary(self):
        t = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        full = torch.cuda.memory_summary()
        short = torch.cuda.memory_summary(abbreviated=True)
        for text in (full, short):
            self.assertIn("Allocated memory", text)
            self.assertIn("GPU reserved memory", text)
            self.assertIn("CUDA OOMs", text)
        self.assertIn("from large pool", full)
        self.assertNotIn("from large pool", short)
        del t

    def test_caching_allocator_alloc_on_stream(self):
        side = torch.cuda.Stream()
        r0 = stats()["requested_bytes.all.current"]
        ptr = torch.cuda.caching_allocator_alloc(1000, stream=side)
        try:
            self.assertEqual(stats()["requested_bytes.all.current"] - r0, 1000)
        finally:
            torch.cuda.caching_allocator_delete(ptr)
        self.assertEqual(stats()["requested_bytes.all.current"], r0)

    def test_matmul_memory_use(self):
        def max_used():
            torch.cuda.synchronize()
            value = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            return value

        a = torch.rand(1, 32, 32, device="cuda")
        b = torch.rand(24, 32, 1, device="cuda")
        torch.matmul(a, b)
        torch.bmm(a.expand(24, 32, 32), b)       # (cuBLAS workspaces made before the baseline)
        max_used()
        torch.matmul(a, b)
        matmul_mem = max_used()
        a = a.expand(24, 32, 32)
        torch.matmul(a, b)
        matmul_expand_mem = max_used()
        torch.bmm(a, b)
        bmm_mem = max_used()
        self.assertEqual(matmul_expand_mem, matmul_mem)
        self.assertEqual(bmm_mem, matmul_mem)

    def test_autocast_cache_leak(self):
        linear = torch.nn.Linear(10, 10).to("cuda")
        data = torch.randn(1, 10, device="cuda")
        with torch.autocast("cuda"):
            with torch.no_grad():
                out = linear(data)
                first_iter_mem = torch.cuda.memory_allocated()
                for _ in range(3):
                    out = linear(data)
                self.assertEqual(first_iter_mem, torch.cuda.memory_allocated())
        del out

    @layout_only("asserts the native allocator's rounding of every block to a multiple of 512 bytes")
    def test_round_up_to_512_layout(self):
        s0 = stats()
        t = torch.empty(1, dtype=torch.uint8, device="cuda")
        s1 = stats()
        self.assertEqual(s1["allocated_bytes.all.current"] - s0["allocated_bytes.all.current"], kMinBlockSize)
        self.assertEqual(s1["requested_bytes.all.current"] - s0["requested_bytes.all.current"], 1)
        u = torch.empty(513, dtype=torch.uint8, device="cuda")
        s2 = stats()
        self.assertEqual(s2["allocated_bytes.all.current"] - s1["allocated_bytes.all.current"], 2 * kMinBlockSize)
        del t, u

    @layout_only("asserts that a small block gets a new 2 MiB segment of the small pool")
    def test_small_segment_2mib_layout(self):
        torch._C._cuda_clearCublasWorkspaces()
        fresh()
        stream = torch.cuda.Stream()     # a stream of its own: no cached segment can serve it
        s0 = stats()
        with torch.cuda.stream(stream):
            t = torch.empty(512, dtype=torch.uint8, device="cuda")
        s1 = stats()
        self.assertEqual(s1["segment.small_pool.current"] - s0["segment.small_pool.current"], 1)
        key = "reserved_bytes.small_pool.current"
        self.assertEqual(s1[key] - s0[key], kSmallBuffer)
        del t
        torch.cuda.empty_cache()
        s2 = stats()
        self.assertEqual(s2["segment.small_pool.current"], s0["segment.small_pool.current"])
        self.assertEqual(s2["reserved_bytes.small_pool.current"], s0["reserved_bytes.small_pool.current"])

    @layout_only("asserts the native segment sizes: 20 MiB under 10 MiB, else rounded to 2 MiB")
    def test_large_segment_sizes_layout(self):
        torch._C._cuda_clearCublasWorkspaces()
        fresh()
        stream = torch.cuda.Stream()
        s0 = stats()
        with torch.cuda.stream(stream):
            a = torch.empty(12 * MiB, dtype=torch.uint8, device="cuda")
        s1 = stats()
        with torch.cuda.stream(stream):
            b = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        s2 = stats()
        self.assertEqual(s1["reserved_bytes.large_pool.current"] - s0["reserved_bytes.large_pool.current"], 12 * MiB)
        key = "reserved_bytes.large_pool.current"
        self.assertEqual(s2[key] - s1[key], kLargeBuffer)
        self.assertEqual(s2["segment.large_pool.current"] - s0["segment.large_pool.current"], 2)
        del a, b

    @layout_only("asserts the native block splitting: a 2 MiB block leaves an 18 MiB split remainder")
    def test_inactive_split_layout(self):
        torch._C._cuda_clearCublasWorkspaces()
        fresh()
        stream = torch.cuda.Stream()
        s0 = stats()
        with torch.cuda.stream(stream):
            a = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        s1 = stats()
        key_bytes, key_count = "inactive_split_bytes.large_pool.current", "inactive_split.large_pool.current"
        self.assertEqual(s1[key_bytes] - s0[key_bytes], kLargeBuffer - 2 * MiB)
        self.assertEqual(s1[key_count] - s0[key_count], 1)
        del a
        s2 = stats()
        self.assertEqual(s2[key_bytes], s0[key_bytes])
        self.assertEqual(s2[key_count], s0[key_count])

    @layout_only("caching_allocator_enable(False) is a switch of the native caching allocator")
    def test_caching_allocator_enable_raw_alloc_layout(self):
        def requested(size, stream):
            start = stats()["requested_bytes.all.allocated"]
            ptr = torch._C._cuda_cudaCachingAllocator_raw_alloc(size, stream)
            finish = stats()["requested_bytes.all.allocated"]
            torch._C._cuda_cudaCachingAllocator_raw_delete(ptr)
            return finish - start

        device = torch._C._cuda_getDevice()
        stream = torch._C._cuda_getCurrentRawStream(device)
        torch._C._cuda_resetAccumulatedMemoryStats(device)
        try:
            torch.cuda.caching_allocator_enable(False)
            self.assertEqual(requested(MiB, stream), 0)
        finally:
            torch.cuda.caching_allocator_enable(True)
        self.assertEqual(requested(MiB, stream), MiB)

    @layout_only("sets the native allocator's roundup_power2_divisions (an allocator settings string)")
    def test_allocator_settings_roundup_power2_layout(self):
        def power2_div(size, div_factor):
            pow2 = 1
            while pow2 < size:
                pow2 *= 2
            if pow2 == size:
                return pow2
            step = pow2 // 2 // div_factor
            ret = pow2 // 2
            while ret < size:
                ret += step
            return ret

        nelems = 21 * MiB
        nbytes = 4 * nelems
        key_allocated, key_requested = "active_bytes.all.allocated", "requested_bytes.all.allocated"
        try:
            set_allocator_settings("")
            torch.cuda.empty_cache()
            start = stats()[key_allocated]
            x = torch.rand(nelems, device="cuda")
            plain = stats()[key_allocated]
            start_requested = stats()[key_requested]
            set_allocator_settings("roundup_power2_divisions:4")
            y = torch.rand(nelems, device="cuda")
            rounded = stats()[key_allocated]
            requested = stats()[key_requested]
            self.assertEqual(plain - start, nbytes)
            self.assertEqual(rounded - plain, power2_div(nbytes, 4))
            self.assertEqual(requested - start_requested, nbytes)
            del x, y
        finally:
            set_allocator_settings("")


# ---- empty_cache and the driver's view -------------------------------------------------------

class TestEmptyCache(AllocatorTestCase):
    def test_empty_cache_keeps_live_tensors(self):
        keep = torch.full((4 * MiB,), 3.0, device="cuda")
        junk = [torch.empty(n, device="cuda") for n in (1000, MiB, 8 * MiB)]
        del junk
        torch.cuda.empty_cache()
        more = [torch.full((4 * MiB,), -1.0, device="cuda") for _ in range(4)]
        self.assertAllEqual(keep, 3.0)
        del more

    def test_mem_get_info_reflects_allocation(self):
        free_before = torch.cuda.mem_get_info()[0]
        x = torch.empty(GiB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        self.assertLessEqual(torch.cuda.mem_get_info()[0], free_before - GiB // 2)
        del x


# ---- out of memory ---------------------------------------------------------------------------

class TestOutOfMemory(AllocatorTestCase):
    def test_out_of_memory(self):
        tensor = torch.zeros(1024, device="cuda")
        with self.assertRaises(torch.OutOfMemoryError) as cm:
            torch.empty(1024 * 1024 * 1024 * 800000000, dtype=torch.int8, device="cuda")
        self.assertIsInstance(cm.exception, RuntimeError)
        self.assertIn("out of memory", str(cm.exception).lower())
        with self.assertRaises(RuntimeError) as cm:       # more than 1 EiB
            torch.empty(1024 * 1024 * 1024 * 8000000000, dtype=torch.int8, device="cuda")
        self.assertIn("out of memory", str(cm.exception).lower())
        tensor.fill_(1)                                    # the OOM does not disturb later kernels
        self.assertAllEqual(tensor, 1)

    @layout_only("asserts the wording of the native allocator's out-of-memory message")
    def test_out_of_memory_message_layout(self):
        with self.assertRaisesRegex(torch.OutOfMemoryError,
                                    r"Tried to allocate 800000000\.00 GiB\. GPU 0 has a total capacity of"):
            torch.empty(1024 * 1024 * 1024 * 800000000, dtype=torch.int8, device="cuda")
        with self.assertRaisesRegex(RuntimeError, "Tried to allocate more than 1EB memory"):
            torch.empty(1024 * 1024 * 1024 * 8000000000, dtype=torch.int8, device="cuda")

    def test_out_of_memory_retry(self):
        size = int(total_memory() * 0.5)
        a = torch.empty(size, dtype=torch.int8, device="cuda")
        with self.assertRaises(torch.OutOfMemoryError):
            torch.empty(size, dtype=torch.int8, device="cuda")
        del a
        b = torch.empty(size, dtype=torch.int8, device="cuda")
        b[-1] = 7
        self.assertEqual(int(b[-1].item()), 7)
        del b

    def test_notifies_oom(self):
        calls = []

        def observer(device, allocated, device_total, device_free):
            calls.append((device, device_total))

        torch._C._cuda_attach_out_of_memory_observer(observer)
        with self.assertRaises(torch.OutOfMemoryError):
            torch.empty(1024 * 1024 * 1024 * 1024, device="cuda")
        self.assertTrue(calls)
        self.assertEqual(calls[-1][0], 0)

    def _fill_cache_then_need_it(self):
        """Leaves 0.4 of the free memory cached but unused, then needs 0.7 of it."""
        free = torch.cuda.mem_get_info()[0]
        a = torch.empty(int(free * 0.4), dtype=torch.uint8, device="cuda")
        del a
        b = torch.empty(int(free * 0.7), dtype=torch.uint8, device="cuda")
        b[-1] = 5
        self.assertEqual(int(b[-1].item()), 5)
        del b

    def test_oom_retry_frees_cache(self):
        self._fill_cache_then_need_it()

    @layout_only("a retry is the native allocator freeing its cache after cudaMalloc failed; vram maps the "
                 "rest of the request beside the cached memory and reuses it in place, with no retry")
    def test_oom_retry_counts_num_alloc_retries(self):
        before = stats()["num_alloc_retries"]
        self._fill_cache_then_need_it()
        self.assertGreaterEqual(stats()["num_alloc_retries"], before + 1)

    def test_caching_allocator_record_stream_oom(self):
        """Blocks whose reuse waits on record_stream are still freed when memory runs out."""
        stream = torch.cuda.Stream()
        limit = (torch.cuda.memory_reserved() + GiB) / total_memory()
        with memory_fraction(min(1.0, limit)):
            with torch.cuda.stream(stream):
                y = torch.zeros(40 * MiB, device="cuda")
            for _ in range(50):
                x = torch.empty(40 * MiB, device="cuda")
                with torch.cuda.stream(stream):
                    y += x
                x.record_stream(stream)
                del x
            torch.cuda.synchronize()
            del y
        torch.cuda.empty_cache()


# ---- record_stream ---------------------------------------------------------------------------

class TestRecordStream(AllocatorTestCase):
    def _record_stream_scenario(self, cycles, check_reuse_after):
        t = torch.tensor([1.0, 2.0, 3.0, 4.0]).pin_memory()
        result = torch.empty(4, device="cuda")
        stream = torch.cuda.Stream()
        current = torch.cuda.current_stream()
        with torch.cuda.stream(stream):
            tmp = t.cuda(non_blocking=True)
            ptr = tmp.data_ptr()
        current.wait_stream(stream)
        tmp.record_stream(current)
        torch.cuda._sleep(cycles)        # delays the copy below on the current stream
        result.copy_(tmp)
        del tmp
        with torch.cuda.stream(stream):
            tmp2 = torch.empty(4, device="cuda")
            tmp2.zero_()
        if current.query():              # the current stream was not busy through tmp2's allocation
            return False
        self.assertNotEqual(tmp2.data_ptr(), ptr, "allocation reused too soon")
        current.synchronize()
        self.assertEqual(result.tolist(), [1.0, 2.0, 3.0, 4.0])
        if check_reuse_after:
            with torch.cuda.stream(stream):
                tmp3 = torch.empty(4, device="cuda")
                self.assertEqual(tmp3.data_ptr(), ptr, "allocation not reused")
        return True

    def test_record_stream(self):
        self.while_busy(lambda cycles: self._record_stream_scenario(cycles, False))

    @layout_only("asserts that the native allocator hands the very block back to the stream it came from")
    def test_record_stream_block_reused_after_sync_layout(self):
        self.while_busy(lambda cycles: self._record_stream_scenario(cycles, True))

    def test_record_stream_on_shifted_view(self):
        def scenario(cycles):
            stream_alloc = torch.cuda.Stream()
            with torch.cuda.stream(stream_alloc):
                base = torch.full((10,), 10.0, device="cuda")
            view = base[5:]
            self.assertGreater(view.storage_offset(), 0)
            stream_record = torch.cuda.Stream()
            with torch.cuda.stream(stream_record):
                torch.cuda._sleep(cycles)
            view.record_stream(stream_record)
            data_ptr = base.data_ptr()
            del base, view
            stream_alloc.synchronize()
            with torch.cuda.stream(stream_alloc):
                try_realloc = torch.full((10,), 10.0, device="cuda")
            if stream_record.query():
                return False
            self.assertNotEqual(try_realloc.data_ptr(), data_ptr)
            stream_record.synchronize()
            return True
        self.while_busy(scenario)

    def test_record_stream_active_until_stream_done(self):
        def scenario(cycles):
            side = torch.cuda.Stream()
            x = torch.ones(1 << 20, device="cuda")       # 4 MiB
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
                x.add_(1.0)
            x.record_stream(side)
            s0 = stats()
            del x
            s1 = stats()
            if side.query():
                return False
            self.assertEqual(s0["allocated_bytes.all.current"] - s1["allocated_bytes.all.current"], 4 * MiB)
            self.assertEqual(s1["active_bytes.all.current"], s0["active_bytes.all.current"],
                             "the block stops being active before the recorded stream passed its free")
            side.synchronize()
            torch.cuda.empty_cache()
            self.assertEqual(s0["active_bytes.all.current"] - stats()["active_bytes.all.current"], 4 * MiB)
            return True
        self.while_busy(scenario)

    def test_record_stream_values_correct(self):
        n = 1 << 20
        side = torch.cuda.Stream()
        current = torch.cuda.current_stream()
        results = []
        for i in range(20):
            x = torch.full((n,), float(i), device="cuda")
            side.wait_stream(current)
            with torch.cuda.stream(side):
                torch.cuda._sleep(10_000_000)
                results.append(x * 2)
            x.record_stream(side)
            del x
            garbage = torch.full((n,), -1.0, device="cuda")    # would land on x's block if it were reused
            del garbage
        current.wait_stream(side)
        torch.cuda.synchronize()
        for i, r in enumerate(results):
            self.assertAllEqual(r, 2.0 * i, "iteration %d read memory reused too soon" % i)


# ---- set_per_process_memory_fraction ---------------------------------------------------------

class TestMemoryFraction(AllocatorTestCase):
    def test_set_per_process_memory_fraction(self):
        orig = torch.cuda.get_per_process_memory_fraction(0)
        torch.cuda.reset_peak_memory_stats(0)
        try:
            with self.assertRaisesRegex(TypeError, "Invalid type"):
                torch.cuda.set_per_process_memory_fraction(1)
            with self.assertRaisesRegex(ValueError, "Invalid fraction value"):
                torch.cuda.set_per_process_memory_fraction(-0.1)
            with self.assertRaisesRegex(ValueError, "Invalid fraction value"):
                torch.cuda.set_per_process_memory_fraction(2.0)
            tensor = torch.zeros(1024, device="cuda")
            torch.cuda.empty_cache()
            total = total_memory()
            torch.cuda.set_per_process_memory_fraction(0.5, 0)
            application = int(total * 0.499) - torch.cuda.max_memory_reserved()
            tmp = torch.empty(application, dtype=torch.int8, device="cuda")   # 0.499 is fine
            del tmp
            torch.cuda.empty_cache()
            with self.assertRaises(torch.OutOfMemoryError) as cm:           # 0.5 is too much
                torch.empty(int(total * 0.5), dtype=torch.int8, device="cuda")
            self.assertIn("out of memory", str(cm.exception).lower())
            tensor.fill_(1)
            self.assertAllEqual(tensor, 1)
        finally:
            torch.cuda.set_per_process_memory_fraction(orig, 0)

    def test_get_per_process_memory_fraction(self):
        init = torch.cuda.get_per_process_memory_fraction()
        try:
            for value in (1.0, 0.0, 0.25, 0.731, 0.5):
                torch.cuda.set_per_process_memory_fraction(value)
                self.assertAlmostEqual(torch.cuda.get_per_process_memory_fraction(), value, places=6)
        finally:
            torch.cuda.set_per_process_memory_fraction(init)

    def test_memory_fraction_reset_allows_allocation(self):
        total = total_memory()
        with memory_fraction(0.1):
            with self.assertRaises(torch.OutOfMemoryError):
                torch.empty(int(0.2 * total), dtype=torch.uint8, device="cuda")
            torch.cuda.set_per_process_memory_fraction(1.0)
            y = torch.empty(int(0.2 * total), dtype=torch.uint8, device="cuda")
            y[-1] = 4
            self.assertEqual(int(y[-1].item()), 4)
            del y


# ---- memory snapshots and history ------------------------------------------------------------

class TestMemorySnapshot(AllocatorTestCase):
    def test_memory_snapshot(self):
        rng = random.Random(0)
        with recording("state", stacks="python", clear_history=True):
            torch.rand(2 * 311, 411, device="cuda")        # x becomes the second block of a segment
            unused = torch.rand(310, 410, device="cuda")
            x = torch.rand(311, 411, device="cuda")
            tensors = [torch.rand(128, device="cuda") for _ in range(1000)]
            while tensors:
                del tensors[rng.randint(0, len(tensors) - 1)]
            torch.rand(128 * 5, device="cuda")
            ss = torch.cuda.memory._snapshot()
            found = False
            for seg in ss["segments"]:
                self.assertIn("frames", seg)
                for b in seg["blocks"]:
                    if b["requested_size"] == 311 * 411 * 4:
                        self.assertIn(THIS_STEM, b["frames"][0]["filename"])
                        self.assertEqual(x.untyped_storage().data_ptr(), b["address"])
                        found = True
            self.assertTrue(found)
            del unused, x
            torch.cuda.empty_cache()
            ss = torch.cuda.memory._snapshot()
            self.assertIn(ss["device_traces"][0][-1]["action"], ("segment_free", "segment_unmap"))

    def test_memory_snapshot_trace_alloc_free(self):
        with recording("all", stacks="python", clear_history=True):
            x = torch.empty(MiB, device="cuda")
            addr = x.data_ptr()
            del x
            ss = torch.cuda.memory._snapshot()
        entries = ss["device_traces"][0]
        self.assertTrue([e for e in entries if e["action"] == "alloc" and e["addr"] == addr and e["size"] == 4 * MiB])
        self.assertTrue([e for e in entries
                         if e["action"] in ("free_requested", "free_completed") and e["addr"] == addr])

    def test_memory_plots(self):
        from torch.cuda._memory_viz import segment_plot, trace_plot
        for context in ("all", None):
            with recording("all", context=context, stacks="python", clear_history=True):
                def run():
                    x = torch.rand(128, 128, device="cuda")
                    x * x + x * x
                run()
                ss = torch.cuda.memory._snapshot()
            for html in (trace_plot(ss), trace_plot(copy.deepcopy(ss), filter_freed=True), segment_plot(ss)):
                self.assertIsInstance(html, str)
                self.assertTrue(html)
            text = json.dumps(ss)
            self.assertEqual(context is not None, "test_memory_plots" in text, context)
            self.assertIn(str(128 * 128 * 4), text)

    def test_memory_plots_free_stack(self):
        for context in ("alloc", "all", "state"):
            with recording(context=context, stacks="python", clear_history=True):
                x = None

                def thealloc():
                    nonlocal x
                    x = torch.rand(3, 4, device="cuda")

                def thefree():
                    nonlocal x
                    del x

                thealloc()
                thefree()
                ss = json.dumps(torch.cuda.memory._snapshot())
            self.assertEqual("thefree" in ss, context == "all", context)
            self.assertEqual("thealloc" in ss, context != "state", context)

    def test_memory_plots_history_context(self):
        x = None

        def should_capture1():
            nonlocal x
            x = torch.rand(4, 4, device="cuda")

        def should_not_capture():
            nonlocal x
            x = torch.rand(3, 4, device="cuda")

        def should_capture2():
            nonlocal x
            x = torch.rand(4, 4, device="cuda")

        try:
            torch.cuda.memory._record_memory_history(context="all", stacks="python", clear_history=True)
            should_capture1()
            torch.cuda.memory._record_memory_history(context=None)
            should_not_capture()
            torch.cuda.memory._record_memory_history(context="all", stacks="python")
            should_capture2()
            ss = json.dumps(torch.cuda.memory._snapshot())
        finally:
            torch.cuda.memory._record_memory_history(None)
        self.assertIn("should_capture1", ss)
        self.assertNotIn("should_not_capture", ss)
        self.assertIn("should_capture2", ss)

    def test_memory_plots_metadata(self):
        for context in ("alloc", "all", "state"):
            torch._C._cuda_clearCublasWorkspaces()
            torch.cuda.empty_cache()
            try:
                torch.cuda.memory._set_memory_metadata("metadata test")
                with recording(context=context, stacks="python", clear_history=True):
                    x = torch.rand(3, 4, device="cuda")
                    del x
                    torch.cuda.empty_cache()
                    torch.cuda.memory._set_memory_metadata("")
                    ss = torch.cuda.memory._snapshot()
            finally:
                torch.cuda.memory._set_memory_metadata("")
            self.assertTrue(ss["device_traces"][0], context)
            for event in ss["device_traces"][0]:
                self.assertEqual(event["user_metadata"], "metadata test", (context, event["action"]))

    def test_memory_snapshot_skip_actions(self):
        for skip in (["free_requested"], ["free_requested", "free_completed"], ["alloc"], []):
            with recording(context="all", stacks="python", skip_actions=skip, clear_history=True):
                x = torch.rand(128, 128, device="cuda")
                del x
                torch.cuda.synchronize()
                ss = torch.cuda.memory._snapshot()
            trace = ss["device_traces"][0]
            self.assertGreater(len(trace), 0, skip)
            actions = {e["action"] for e in trace}
            for action in skip:
                self.assertNotIn(action, actions, skip)
            self.assertTrue(actions - set(skip), skip)

    def test_memory_snapshot_matches_stats(self):
        keep = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (700, 3 * MiB, 25 * MiB)]
        torch.cuda.synchronize()
        segments = torch.cuda.memory_snapshot()
        self.assertEqual(sum(s["total_size"] for s in segments), torch.cuda.memory_reserved())
        self.assertEqual(sum(s["allocated_size"] for s in segments), torch.cuda.memory_allocated())
        for t in keep:
            self.assertTrue(address_in_segments(t.data_ptr(), segments))
        del keep

    def test_memory_viz_segsum_and_trace(self):
        from torch.cuda import _memory_viz
        with recording("all", stacks="python", clear_history=True):
            x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
            y = torch.empty(1000, dtype=torch.uint8, device="cuda")
            del x
            ss = torch.cuda.memory._snapshot()
        summary = _memory_viz.segsum(ss)          # (asserts its own accounting of every segment)
        self.assertIn("segments:", summary)
        self.assertIn("total_reserved:", summary)
        text = _memory_viz.trace(ss)
        self.assertIn("Device 0", text)
        self.assertIn("del ", text)
        del y


# ---- CUDA graphs and their private pools -----------------------------------------------------

class TestCudaGraphs(AllocatorTestCase):
    def test_graph_capture_simple(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            a = torch.full((1000,), 1, device="cuda")
            g = torch.cuda.CUDAGraph()
            g.capture_begin()
            b = a
            for _ in range(10):
                b = b + 1
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        g.replay()
        self.assertEqual(b.sum().item(), 11000.0)

    def test_graph_capture_reset_recapture(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            a = torch.full((1000,), 1, device="cuda")
            g = torch.cuda.CUDAGraph()
            g.capture_begin()
            b = a
            for _ in range(10):
                b = b + 1
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        g.replay()
        self.assertEqual(b.sum().item(), 11000.0)
        g.reset()
        with torch.cuda.stream(s):
            g.capture_begin()
            b.fill_(2.0)
            for _ in range(10):
                b = b + 2
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        g.replay()
        self.assertEqual(b.sum().item(), 22000.0)
        g.reset()

    def test_graph_empty_cache_and_eager_churn_keep_graph_memory(self):
        n = 1 << 20
        s = torch.cuda.Stream()
        x = torch.arange(n, dtype=torch.float32, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            y = x * 3
            z = y + 1
            del y
        torch.cuda.empty_cache()
        junk = [torch.full((n,), -5.0, device="cuda") for _ in range(16)]
        with torch.cuda.stream(s):
            junk += [torch.full((n,), -5.0, device="cuda") for _ in range(16)]
        torch.cuda.current_stream().wait_stream(s)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(z, x * 3 + 1))
        for i, j in enumerate(junk):
            self.assertAllEqual(j, -5.0, "eager tensor %d was overwritten by a replay" % i)

    def _two_successive(self, check_reserved):
        size = 1000
        s = torch.cuda.Stream()
        reserved_no_sharing = None
        for share_mem in ("Don't share", "via pool()", "via graph_pool_handle()"):
            g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
            a = torch.ones((size,), device="cuda")
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                g0_args = (torch.cuda.graph_pool_handle(),) if share_mem == "via graph_pool_handle()" else ()
                g0.capture_begin(*g0_args)
                b = a.clone()
                for _ in range(5):
                    b = func_with_temps(b, 1)
                g0.capture_end()
                g1_args = (g0.pool(),) if share_mem == "via pool()" else g0_args
                g1.capture_begin(*g1_args)
                for _ in range(5):
                    b = func_with_temps(b, 1)
                g1.capture_end()
            torch.cuda.current_stream().wait_stream(s)
            c = a.clone()                 # unrelated eager work between the replays
            for _ in range(2):
                c = func_with_temps(c, 3)
            g0.replay()
            for _ in range(2):
                c = func_with_temps(c, 3)
            g1.replay()
            for _ in range(2):
                c = func_with_temps(c, 3)
            self.assertEqual(b.sum().item(), size * 3070, share_mem)
            self.assertEqual(c.sum().item(), size * 442, share_mem)
            if check_reserved:
                reserved = stats()["reserved_bytes.all.current"]
                if share_mem == "Don't share":
                    reserved_no_sharing = reserved
                else:
                    self.assertEqual(reserved_no_sharing - reserved, kSmallBuffer, share_mem)
            del a, b, c, g0, g1
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def test_graph_two_successive(self):
        self._two_successive(False)

    @layout_only("asserts that sharing a pool saves exactly one 2 MiB small-pool segment")
    def test_graph_two_successive_reserved_layout(self):
        self._two_successive(True)

    def _three_successive(self, check_aliasing):
        size = 1000
        s = torch.cuda.Stream()
        for share_mem in ("Don't share", "via pool()", "via graph_pool_handle()"):
            a = torch.ones((size,), device="cuda")
            g0, g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                g0_args = (torch.cuda.graph_pool_handle(),) if share_mem == "via graph_pool_handle()" else ()
                g0.capture_begin(*g0_args)
                b = a.clone()
                c = b + 1
                d = b + 2
                g0.capture_end()
                args = (g0.pool(),) if share_mem == "via pool()" else g0_args
                g1.capture_begin(*args)
                e = c + 3
                del c
                g1.capture_end()
                g2.capture_begin(*args)
                f = d + 4
                g2.capture_end()
            torch.cuda.current_stream().wait_stream(s)
            g0.replay()                    # in capture order: valid whatever the sharing
            g1.replay()
            g2.replay()
            self.assertEqual(e.sum().item(), size * 5, share_mem)
            self.assertEqual(f.sum().item(), size * 7, share_mem)
            if check_aliasing:
                # out of capture order: with a shared pool g2's capture reused c's memory for f, so
                # g1's "e = c + 3" reads f's values
                g0.replay()
                g2.replay()
                g1.replay()
                shared = share_mem != "Don't share"
                self.assertEqual(e.sum().item(), size * (7 + 3) if shared else size * 5, share_mem)
                self.assertEqual(f.sum().item(), size * 7, share_mem)
            del a, b, d, e, f, g0, g1, g2
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def test_graph_three_successive(self):
        self._three_successive(False)

    @layout_only("asserts that the native shared pool gives g2 the block g1 reads (replayed out of order)")
    def test_graph_three_successive_shared_pool_aliasing_layout(self):
        self._three_successive(True)

    @layout_only("asserts the native segment, reserved and active counts of a graph's private pool")
    def test_graph_memory_stats_and_use_result_after_destroy_graph(self):
        elem = 4
        round_large = kRoundLarge * ((kMinLargeAlloc + 512 + kRoundLarge - 1) // kRoundLarge)
        # (numel, new segments, their bytes, bytes left after the graph is gone, pool)
        cases = (
            (512 // elem, 1, kSmallBuffer, kSmallBuffer, "small_pool"),
            (kSmallSize // elem, 2, 2 * kSmallBuffer, kSmallBuffer, "small_pool"),
            ((kSmallSize + 512) // elem, 1, kLargeBuffer, kLargeBuffer, "large_pool"),
            ((kMinLargeAlloc - 512) // elem, 2, 2 * kLargeBuffer, kLargeBuffer, "large_pool"),
            ((kMinLargeAlloc + 512) // elem, 3, 3 * round_large, round_large, "large_pool"),
        )
        stats_to_check = ("segment.", "reserved_bytes.", "active.", "active_bytes.")
        s = torch.cuda.Stream()
        for numel, delta_segments, delta_bytes, delta_bytes_after, pool in cases:
            if pool == "small_pool":
                delta_active_blocks = 3                 # b, and the graph's rng seed and offset holders
                delta_active_bytes = numel * elem + 1024
            else:
                delta_active_blocks = 1
                delta_active_bytes = numel * elem
            g = torch.cuda.CUDAGraph()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                a = torch.ones((numel,), device="cuda")
                precapture = stats()
                g.capture_begin()
                b = a.clone()
                for _ in range(5):
                    b = b.clone() + 1
                g.capture_end()
            torch.cuda.current_stream().wait_stream(s)
            gc.collect()
            postcapture = stats()
            expecteds = (delta_segments, delta_bytes, delta_active_blocks, delta_active_bytes)
            for i in range(2):           # before and after an empty_cache
                for stat, expected in zip(stats_to_check, expecteds):
                    key = stat + pool + ".current"
                    self.assertEqual(postcapture[key] - precapture[key], expected, "%s numel %d" % (key, numel))
                g.replay()
                self.assertEqual(b.sum().item(), 6 * numel)
                if i == 0:
                    torch.cuda.empty_cache()
            del g
            gc.collect()
            torch.cuda.empty_cache()
            postdel = stats()
            self.assertEqual(b.sum().item(), 6 * numel)       # b outlives its graph
            expecteds = (1, delta_bytes_after, 1, numel * elem)
            for stat, expected in zip(stats_to_check, expecteds):
                key = stat + pool + ".current"
                self.assertEqual(postdel[key] - precapture[key], expected, "after del: %s numel %d" % (key, numel))
            del a, b
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def test_graph_use_result_after_destroy_graph(self):
        for numel in (512 // 4, (kSmallSize + 512) // 4, (kMinLargeAlloc + 512) // 4):
            s = torch.cuda.Stream()
            g = torch.cuda.CUDAGraph()
            a = torch.ones((numel,), device="cuda")
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                g.capture_begin()
                b = a.clone()
                for _ in range(5):
                    b = b.clone() + 1
                g.capture_end()
            torch.cuda.current_stream().wait_stream(s)
            g.replay()
            torch.cuda.synchronize()
            del g
            gc.collect()
            torch.cuda.empty_cache()
            junk = [torch.full((numel,), -1.0, device="cuda") for _ in range(8)]
            self.assertTrue(torch.equal(b, torch.full_like(a, 6.0)), "numel %d" % numel)
            del a, b, junk

    def test_graph_record_stream(self):
        potential_problem = torch.zeros((3,), device="cuda")
        a = torch.zeros((3,), device="cuda")
        s0, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.stream(s0):
            potential_problem.record_stream(s0)
            torch.cuda._sleep(50_000_000)
            potential_problem.fill_(1.0)
        del potential_problem
        with torch.cuda.stream(s1):
            g.capture_begin()
            b = a.clone()
            s2.wait_stream(s1)
            with torch.cuda.stream(s2):
                b.fill_(1.0)
                b.record_stream(s2)      # a record_stream during the capture
                del b
            s1.wait_stream(s2)
            g.capture_end()
        torch.cuda.synchronize()
        c = torch.zeros((3,), device="cuda")   # processes the end-of-life events
        g.replay()
        torch.cuda.synchronize()
        self.assertAllEqual(c, 0.0)

    def test_make_graphed_callables_same_pool(self):
        torch.manual_seed(5)
        models = [torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128)).cuda()
                  for _ in range(3)]
        mempool = torch.cuda.graph_pool_handle()
        graphed_models = []
        for model in models:
            x = torch.randn([64, 32], device="cuda")
            graphed_models.append(torch.cuda.make_graphed_callables(copy.deepcopy(model), (x,), pool=mempool))
        for model, graphed in zip(models, graphed_models):
            x = torch.randn([64, 32], device="cuda")
            y, yg = model(x), graphed(x)
            loss, loss_g = y.norm(), yg.norm()
            loss.backward()
            loss_g.backward()
            torch.testing.assert_close(y, yg)
            torch.testing.assert_close(loss, loss_g)
            for p, pg in zip(model.parameters(), graphed.parameters()):
                torch.testing.assert_close(p, pg)
                torch.testing.assert_close(p.grad, pg.grad)
                self.assertNotEqual(p.data_ptr(), pg.data_ptr())
                self.assertNotEqual(p.grad.data_ptr(), pg.grad.data_ptr())

    def test_graph_optimizer_capturable(self):
        steps_warmup, steps_train = 3, 2
        for graphs in (True, False):
            params = [torch.randn((i + 5, i + 5), device="cuda") for i in range(2)] + [torch.randn((), device="cuda")]
            control = [p.clone().requires_grad_() for p in params]
            graphed = [p.clone().requires_grad_() for p in params]
            grads = [[torch.randn_like(p) for p in params] for _ in range(steps_warmup + steps_train)]
            opt = torch.optim.Adam(control, lr=0.1, capturable=False)
            for i in range(steps_warmup + steps_train):
                for j, p in enumerate(control):
                    p.grad = grads[i][j]
                opt.step()
            opt = torch.optim.Adam(graphed, lr=0.1, capturable=True)
            for i in range(steps_warmup):
                for j, p in enumerate(graphed):
                    p.grad = grads[i][j]
                opt.step()
            if graphs:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    opt.step()
            for i in range(steps_train):
                if graphs:
                    for j, p in enumerate(graphed):
                        p.grad.copy_(grads[i + steps_warmup][j])
                    g.replay()
                else:
                    for j, p in enumerate(graphed):
                        p.grad = grads[i + steps_warmup][j]
                    opt.step()
            for p_control, p_graphed in zip(control, graphed):
                torch.testing.assert_close(p_control, p_graphed)


# ---- checkpointing a graph pool's state (what torch.compile's CUDA graph trees use) ----------

class TestCheckpointPoolState(AllocatorTestCase):
    @staticmethod
    def set_checkpoint_pool_state(device, state, stale, deleters):
        torch._C._cuda_setCheckpointPoolState(device, state, [t.untyped_storage()._cdata for t in stale],
                                              [t.untyped_storage()._cdata for t in deleters])

    def test_checkpoint_restores_segments(self):
        def foo():
            x = torch.zeros([kSmallSize * 8], device="cuda", dtype=torch.uint8)
            x = x + x
            x1 = uint8_ones(kSmallSize) + uint8_ones(kSmallSize) + uint8_ones(kSmallSize)
            y = uint8_ones(kSmallSize) + x1
            z = uint8_ones(kSmallSize)
            return x, y, z

        graph, outputs = cudagraphify(foo, [])
        pool_id = graph.pool()
        device = outputs[0].device.index
        before = segments_of_pool(pool_id)
        self.assertTrue(before)
        state = torch._C._cuda_getCheckpointState(device, pool_id)
        self.set_checkpoint_pool_state(device, state, [], [])
        after = {s["address"]: s for s in segments_of_pool(pool_id)}
        for seg in before:
            self.assertIn(seg["address"], after)
            other = after[seg["address"]]
            for field in ("device", "total_size", "allocated_size", "active_size", "segment_type"):
                self.assertEqual(seg[field], other[field], field)
            self.assertEqual([(b["size"], b["state"]) for b in seg["blocks"]],
                             [(b["size"], b["state"]) for b in other["blocks"]])
        del graph, outputs

    def test_checkpoint_tensor_dies_after_checkpoint(self):
        def foo():
            return uint8_ones(kMinBlockSize), uint8_ones(kMinBlockSize)

        graph, outputs = cudagraphify(foo, [])
        pool_id = graph.pool()
        device = outputs[0].device.index
        state = torch._C._cuda_getCheckpointState(device, pool_id)
        ptrs = [o.data_ptr() for o in outputs]
        del outputs
        self.set_checkpoint_pool_state(device, state, [], [])
        self.assertEqual(live_blocks(pool_id), 2)
        torch._C._cuda_cudaCachingAllocator_raw_delete(ptrs[0])
        self.assertEqual(live_blocks(pool_id), 1)
        torch._C._cuda_cudaCachingAllocator_raw_delete(ptrs[1])
        self.assertEqual(live_blocks(pool_id), 0)
        del graph

    def test_check_pool_live_allocations(self):
        def foo():
            return torch.ones([4], device="cuda")

        pool = torch.cuda.graph_pool_handle()
        graph, outputs = cudagraphify(foo, [], pool=pool)
        index = outputs[0].device.index

        def check(live):
            return torch._C._cuda_checkPoolLiveAllocations(index, pool, live)

        self.assertTrue(check({outputs[0].data_ptr()}))
        self.assertFalse(check({outputs[0].data_ptr(), 0}))
        self.assertFalse(check(set()))
        del outputs
        self.assertTrue(check(set()))
        del graph


# ---- MemPool ---------------------------------------------------------------------------------

class TestMemPool(AllocatorTestCase):
    def test_mempool_id(self):
        pool1 = torch.cuda.graph_pool_handle()
        pool2 = torch.cuda.MemPool().id
        self.assertEqual(pool1[0] == 0, pool2[0] == 0)
        self.assertGreater(pool2[1] - pool1[1], 0)

    def test_mempool_routes_allocations(self):
        pool = torch.cuda.MemPool()
        outside = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        with torch.cuda.use_mem_pool(pool):
            inside = torch.full((MiB,), 2.0, device="cuda")
        segments = pool.snapshot()
        self.assertTrue(segments)
        for seg in segments:
            self.assertEqual(tuple(seg["segment_pool_id"]), tuple(pool.id))
        self.assertTrue(address_in_segments(inside.data_ptr(), segments))
        self.assertFalse(address_in_segments(outside.data_ptr(), segments))
        self.assertAllEqual(inside, 2.0)
        del inside, outside

    def test_nested_mempool_routing(self):
        pools = [torch.cuda.MemPool() for _ in range(3)]
        placed = []

        def allocate(pool):
            placed.append((torch.empty(20 * MiB // 4, device="cuda"), pool))

        with torch.cuda.use_mem_pool(pools[0]):
            allocate(pools[0])
            with torch.cuda.use_mem_pool(pools[1]):
                allocate(pools[1])
                with torch.cuda.use_mem_pool(pools[2]):
                    allocate(pools[2])
                allocate(pools[1])
            allocate(pools[0])
        for i, (t, pool) in enumerate(placed):
            self.assertTrue(address_in_segments(t.data_ptr(), torch.cuda.memory.memory_snapshot(pool.id)),
                            "tensor %d is not in its pool" % i)
        del placed

    def test_mempool_multithread(self):
        ids = []
        run_in_threads(lambda: ids.append(torch.cuda.MemPool().id), [()] * 4)
        self.assertEqual(len(set(ids)), 4)


# ---- streams and threads ---------------------------------------------------------------------

class TestStreams(AllocatorTestCase):
    def test_free_on_another_stream_then_reuse(self):
        side = torch.cuda.Stream()
        current = torch.cuda.current_stream()
        for i in range(50):
            with torch.cuda.stream(side):
                t = torch.full((1 << 18,), float(i), device="cuda")
            current.wait_stream(side)
            self.assertEqual(t.sum().item(), float(i) * (1 << 18))
            t.record_stream(current)
            del t                               # freed from the current stream's context
            with torch.cuda.stream(side):
                u = torch.full((1 << 18,), -1.0, device="cuda")
                self.assertEqual(u.sum().item(), -float(1 << 18))
                del u

    def test_allocator_fuzz(self):
        rng = random.Random(123)
        mem, total, counter = [], 0, 0

        def alloc():
            nonlocal total, counter
            n = rng.randrange(2 * MiB // 4, 20 * MiB // 4)
            mem.append((counter, torch.full((n,), counter, dtype=torch.int32, device="cuda")))
            counter += 1
            total += n

        def free():
            nonlocal total
            value, x = mem.pop(rng.randrange(0, len(mem)))
            self.assertTrue(bool(torch.all(x == value).item()), "tensor %d lost its values" % value)
            total -= x.numel()

        for _ in range(4000):
            while total >= GiB / (4 * 10):
                free()
            (action,) = rng.choices([alloc, free, torch.cuda.empty_cache], weights=[1, 1 if mem else 0, 0.1])
            action()
        while mem:
            free()


# ---- last: a failed capture -----------------------------------------------------------------

class TestZCaptureOom(AllocatorTestCase):
    def test_graph_capture_oom(self):
        with self.assertRaises(RuntimeError) as cm:
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                torch.zeros(2 ** 40, device="cuda")
        self.assertIn("out of memory", str(cm.exception).lower())
        x = torch.ones(1000, device="cuda")           # CUDA still works after it
        self.assertEqual(x.sum().item(), 1000.0)

CLASSES = (TestMemoryStats, TestEmptyCache, TestOutOfMemory, TestRecordStream, TestMemoryFraction,
           TestMemorySnapshot, TestCudaGraphs, TestCheckpointPoolState, TestMemPool, TestStreams, TestZCaptureOom)


# ---- the rows --------------------------------------------------------------------------------

INSTALL = Row("install", "install", lambda: "mode %s, torch %s, %s, Python %s" % (
    VRAM_MODE or "native", torch.__version__, torch.cuda.get_device_name(0), platform.python_version()))
INSTALL.timeout = INSTALL_TIMEOUT_S


def all_rows():
    """Every row: the port's tests (in unittest's order, class by class), then the feature table."""
    loader = unittest.TestLoader()
    port = [Row(m, "port", getattr(cls, m), cls=cls) for cls in CLASSES for m in loader.getTestCaseNames(cls)]
    return port + FEATURES


# ---- in a child: run rows under one allocator ------------------------------------------------

def _emit(message):
    sys.stderr.flush()
    sys.stdout.buffer.write(MARK + json.dumps(message).encode() + b"\n")
    sys.stdout.flush()


def _short(e):
    lines = str(e).strip().splitlines()
    return ("%s: %s" % (type(e).__name__, lines[0] if lines else ""))[:400]


def _run_test(row):
    """A port test through unittest: passed, skipped (with the reason) or failed (its last line)."""
    result = unittest.TestResult()
    row.cls(row.name).run(result)
    if result.skipped:
        return {"outcome": "skipped", "result": result.skipped[0][1]}
    bad = result.failures + result.errors + [(t, "unexpected success") for t in result.unexpectedSuccesses]
    if bad:
        text = bad[0][1]
        print(text, file=sys.stderr)
        return {"outcome": "failed", "error": text.strip().splitlines()[-1][:400]}
    return {"outcome": "passed", "result": "passed"}


def _run_row(row):
    try:
        if row.part == "port":
            return _run_test(row)
        result = row.fn()
        torch.cuda.synchronize()   # and CUDA still works after the probe
        return {"outcome": "passed", "result": str(result)}
    except BaseException as e:
        traceback.print_exc()
        return {"outcome": "failed", "error": _short(e)}


def _child(names, allocator):
    global ALLOCATOR, torch
    ALLOCATOR = allocator
    faulthandler.enable()          # a crash, or the watchdog's SIGABRT, prints the Python stack
    try:
        _setup_allocator(allocator)
        import torch               # (the global: after the allocator was chosen)
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
    except BaseException as e:
        traceback.print_exc()
        _emit({"setup_error": _short(e)})
        return 0
    by_name = {r.name: r for r in all_rows() + [INSTALL]}
    for name in names:
        print(ROW_MARK % name, file=sys.stderr, flush=True)
        _emit({"start": name})
        _emit(dict(_run_row(by_name[name]), row=name))
    return 0


# ---- in the parent: children, and the one watchdog -------------------------------------------

def _messages(p, deadline):
    """The child's result messages as they come; None (and the end) once time.monotonic() passes
    deadline() with no message."""
    fd, buf = p.stdout.fileno(), b""
    while True:
        wait = deadline() - time.monotonic()
        if wait <= 0:
            yield None
            return
        if not select.select([fd], [], [], wait)[0]:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            if line.startswith(MARK):
                yield json.loads(line[len(MARK):])


def _abort(p):
    """SIGABRT (faulthandler prints the stack), then SIGKILL to the child's whole session."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(p.pid, signal.SIGABRT)
    try:
        p.wait(timeout=ABORT_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)


def _split_stderr(text):
    """The child's stderr by row (the part before the first row is "")."""
    parts, name = {"": []}, ""
    for line in text.splitlines():
        if line.startswith("@@ROW ") and line.endswith("@@"):
            name = line[6:-2]
            parts[name] = []
        else:
            parts[name].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def _watch(p, rows):
    """Follows one child: (results by name, the row it stopped in or None, why, setup error)."""
    state = {"row": None, "since": time.monotonic()}
    limit = {r.name: r.timeout for r in rows}
    done, why, setup_error = {}, None, None
    for msg in _messages(p, lambda: state["since"] + limit.get(state["row"], INSTALL_TIMEOUT_S)):
        if msg is None:
            why = "timed out after %d s" % limit.get(state["row"], INSTALL_TIMEOUT_S)
            _abort(p)
            break
        if "setup_error" in msg:
            setup_error = msg["setup_error"]
        elif "start" in msg:
            state["row"], state["since"] = msg["start"], time.monotonic()
        else:
            done[msg.pop("row")] = msg
            state["row"] = None
    p.stdout.close()
    rc = p.wait()
    if why is None and state["row"] is not None:
        why = ("stopped (the run got SIGTERM or SIGINT)" if STOPPING
               else "the child died in this row (exit status %s)" % rc)
    if state["row"] is None and setup_error is None:
        setup_error = "%s before this row" % (why or "the child ended (exit status %s)" % rc)
    return done, state["row"], why, setup_error


def _run_child(rows, allocator, record):
    """Runs rows in order in one child; records each result; returns the rows left after one it
    stopped in (timed out or crashed), which a fresh child runs."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", ",".join(r.name for r in rows),
           "--allocator", allocator]
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                             stderr=err, start_new_session=True)
        CHILDREN.add(p)
        done, stopped, why, setup_error = _watch(p, rows)
        CHILDREN.discard(p)
        err.seek(0)
        stderr = _split_stderr(err.read().decode(errors="replace"))
    for i, row in enumerate(rows):
        if row.name in done:
            record(row, allocator, dict(done[row.name], stderr=stderr.get(row.name, "")))
        elif row.name == stopped:
            record(row, allocator, {"outcome": "failed", "error": why, "stderr": stderr.get(row.name, "")})
            return rows[i + 1:]
        else:   # the child never ran it: its setup failed, or it ended before
            first = stderr[""] if i == len(done) else ""
            record(row, allocator, {"outcome": "failed", "error": "setup: " + setup_error, "stderr": first})
    return []


def run_lane(batches, allocator, record):
    for batch in batches:
        while batch and not STOPPING:
            batch = _run_child(batch, allocator, record)


def _stop(signum, frame):
    """SIGTERM or SIGINT in the parent: no new child; the running ones (own sessions) killed, so that
    the table of what was done still prints."""
    global STOPPING
    STOPPING = True
    for p in list(CHILDREN):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)


# ---- in the parent: the results, the table, the JSON -----------------------------------------

class Results:
    """Every row's outcome under each allocator, filled by the lanes' threads (under self.lock)."""

    def __init__(self, rows, allocators, json_path):
        self.rows, self.allocators, self.json_path = rows, allocators, json_path
        self.outcomes = {}          # (row name, allocator) -> {outcome, result | error, stderr}
        self.install = {}           # allocator -> the install row's outcome
        self.lock = threading.Lock()

    def record(self, row, allocator, res):
        with self.lock:
            if row is INSTALL:
                self.install[allocator] = res
                return
            self.outcomes[(row.name, allocator)] = res
            print("  %-24s %-6s %s" % (row.name, allocator, _cell(res)[:90]), flush=True)
            if self.json_path:
                self.write_json()

    def status(self, row):
        outs = [self.outcomes.get((row.name, a)) for a in self.allocators]
        if None in outs:
            return None
        kinds = tuple(o["outcome"] for o in outs)
        if len(kinds) == 1:
            return {"passed": "PASS", "failed": "FAIL", "skipped": "SKIPPED"}[kinds[0]]
        if kinds == ("passed", "passed"):
            return "MATCH" if row.same(outs[0]["result"], outs[1]["result"]) else "DIFFER"
        if kinds == ("passed", "skipped") and row.layout_only:
            return "LAYOUT"
        return {("skipped", "skipped"): "SKIPPED", ("failed", "failed"): "FAILED"}.get(kinds, "DIFFER")

    def write_json(self):
        rows = [{"name": r.name, "part": r.part, "line": r.line, "status": self.status(r),
                 "layout_only": r.layout_only,
                 **{a: _public(self.outcomes.get((r.name, a))) for a in self.allocators}} for r in self.rows]
        data = {"allocators": self.allocators, "rows": rows,
                "install": {a: _public(res) for a, res in self.install.items()}}
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.json_path)


def _public(res):
    return None if res is None else {k: v for k, v in res.items() if k != "stderr"}


def _cell(res):
    if res is None:
        return "not run"
    return {"passed": "", "skipped": "skipped: ", "failed": "raised: "}[res["outcome"]] + \
        res.get("result", res.get("error", ""))


def _fit(text, width):
    return text if len(text) <= width else text[:width - 3] + "..."


def _tail(text, lines=15):
    """The last lines of a child's stderr, after the message of an abort (a C++ exception's
    "terminate called ..." and "what(): ..." lines come before its long backtrace)."""
    all_lines = text.rstrip().splitlines()
    last = all_lines[-lines:]
    head = [line for line in all_lines[:-lines] if "terminate called" in line or "what():" in line][:4]
    if head:
        head.append("...")
    return "\n".join("      | " + line for line in head + last)


def print_table(results, part, width=46):
    rows = [r for r in results.rows if r.part == part]
    if not rows:
        return
    first = "probe" if part == "features" else "test"
    name_w = max([len(first)] + [len(r.name) for r in rows])
    header = "%-*s  %s  %s" % (name_w, first, "  ".join("%-*s" % (width, a) for a in results.allocators), "")
    print("\n%s\n%s" % (header, "-" * len(header.rstrip())))
    for r in rows:
        cells = "  ".join("%-*s" % (width, _fit(_cell(results.outcomes.get((r.name, a))), width))
                          for a in results.allocators)
        print("%-*s  %s  %s" % (name_w, r.name, cells, results.status(r)))


def print_details(results):
    bad = [r for r in results.rows if results.status(r) not in OK]
    if bad:
        print("\nDetails of the rows that do not match:")
    for r in bad:
        print("  %s (%s, part %s) at %s" % (r.name, results.status(r), r.part, r.where()))
        for a in results.allocators:
            res = results.outcomes.get((r.name, a))
            print("    %-6s %s" % (a, _cell(res)))
            if res and res["outcome"] == "failed" and res.get("stderr", "").strip():
                print(_tail(res["stderr"]))
    return len(bad)


def print_summary(results):
    features = [r for r in results.rows if r.part == "features"]
    if features:
        ok = sum(results.status(r) in OK for r in features)
        print("\n%d of %d probes match" % (ok, len(features)))
    port = [r for r in results.rows if r.part == "port"]
    if port and "vram" in results.allocators:
        print("\nLayout-only tests (assert the native allocator's own layout; skipped under vram):")
        for r in port:
            if r.layout_only:
                print("  %-58s %s" % (r.name, r.layout_only))
    for a in results.allocators if port else ():
        kinds = [(results.outcomes.get((r.name, a)) or {"outcome": "failed"})["outcome"] for r in port]
        print("port under %s: %d passed, %d failed, %d skipped"
              % (a, kinds.count("passed"), kinds.count("failed"), kinds.count("skipped")))


# ---- main ------------------------------------------------------------------------------------

def list_rows(rows):
    """--list: every part and its rows, with the source line (and the reason of a layout-only test)."""
    names = [r.name for r in rows]
    dup = sorted({n for n in names if names.count(n) > 1})
    for part in ("port", "features"):
        mine = [r for r in rows if r.part == part]
        if mine:
            print("%s (%d rows):" % (part, len(mine)))
        for r in mine:
            print("  %-58s %s%s" % (r.name, r.where(), "  layout-only: " + r.layout_only if r.layout_only else ""))
    if dup:
        print("%s: duplicate row names: %s" % (THIS_FILE, ", ".join(dup)), file=sys.stderr)
        return 1
    return 0


def select_rows(args):
    """The rows that --part, --only and -k select; (rows, None) or (None, a one-line error)."""
    parts = ("port", "features") if args.part == "all" else (args.part,)
    rows = [r for r in all_rows() if r.part in parts]
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in {r.name for r in rows}]
        if unknown:
            return None, "--only: no row %s in part %s (--list shows them)" % (", ".join(unknown), args.part)
        rows = [r for r in rows if r.name in wanted]
    if args.patterns:
        rows = [r for r in rows if any(p in r.name or (r.cls and p in r.cls.__name__) for p in args.patterns)]
    if not rows:
        return None, "-k %s: no row matches in part %s" % (" ".join(args.patterns), args.part)
    return rows, None


def lanes(rows, allocators):
    """(batches, allocator) per part and allocator: the port's tests in one child, each probe in its own;
    the features first, as they take longest (a child per probe)."""
    out = []
    for part in ("features", "port"):
        mine = [r for r in rows if r.part == part]
        for a in allocators if mine else ():
            out.append(([mine] if part == "port" else [[r] for r in mine], a))
    return out


def install(results):
    """The install row per allocator; returns the allocators whose install worked."""
    working = []
    for a in results.allocators:
        run_lane([[INSTALL]], a, results.record)
        res = results.install[a]
        print("install%s: %s" % ("" if a == "vram" else " (" + a + ")", _cell(res)), flush=True)
        if res["outcome"] == "passed":
            working.append(a)
        elif res.get("stderr", "").strip():
            print(_tail(res["stderr"], 25), flush=True)
    return working


def run(rows, allocators, jobs, json_path):
    results = Results(rows, allocators, json_path)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print("PyTorch on vram: each row with PyTorch's allocator (native), then after vram.torch.install()",
          flush=True)
    working = install(results)
    for a in set(allocators) - set(working):
        results.outcomes.update({(r.name, a): {"outcome": "failed", "error": "not run: the install under %s failed"
                                               % a} for r in rows})
    todo = [lane for lane in lanes(rows, allocators) if lane[1] in working]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(run_lane, batches, a, results.record) for batches, a in todo]:
            f.result()
    for part in ("port", "features"):
        print_table(results, part)
    bad = print_details(results)
    print_summary(results)
    if json_path:
        results.write_json()
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("port", "features", "all"), default="all")
    ap.add_argument("--allocator", choices=("native", "vram", "both"), default="both")
    ap.add_argument("--list", action="store_true", help="print the parts and their rows (needs no PyTorch)")
    ap.add_argument("--only", metavar="NAME,...", help="run only these rows")
    ap.add_argument("-k", dest="patterns", action="append", default=[], metavar="TEXT",
                    help="run only the rows whose name (or a port test's class) contains TEXT (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, metavar="N", help="lanes at once (default 1)")
    ap.add_argument("--json", metavar="OUT.json", help="write every row's outcome (after each row)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child.split(","), args.allocator)
    if args.jobs < 1:
        ap.error("--jobs %d: at least 1" % args.jobs)
    rows, error = select_rows(args)
    if error:
        print("%s: %s" % (THIS_FILE, error), file=sys.stderr)
        return 2
    if args.list:
        return list_rows(rows)
    allocators = ["native", "vram"] if args.allocator == "both" else [args.allocator]
    return run(rows, allocators, args.jobs, args.json)


if __name__ == "__main__":
    sys.exit(main())
