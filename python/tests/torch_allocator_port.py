"""PyTorch's device-allocator tests, ported to run on PyTorch's own allocator or on vram's.

A port (rewritten, not copied) of the tests of PyTorch's test/test_cuda.py that exercise the CUDA
caching allocator as programs see it: memory statistics (test_memory_stats, the small and large pool
counts, peaks and resets), empty_cache, out-of-memory (test_out_of_memory, the retry after freeing
the cache, record_stream under memory pressure), record_stream, set_per_process_memory_fraction,
memory snapshots and history (test_memory_snapshot, stacks, _memory_viz), CUDA graphs and their
private pools (test_graph_memory_stats_and_use_result_after_destroy_graph, pool sharing,
test_graph_concurrent_replay, three successive graphs, the pool checkpointing that torch.compile's
CUDA graph trees use), MemPool, torch.compile(mode="reduce-overhead"), cuDNN's benchmark mode, and
sharing a tensor with another process. Timing is never relied on: where a test needs a stream still
busy (record_stream) it checks stream.query() after the fact and retries with a longer sleep.

    python3 python/tests/torch_allocator_port.py --allocator native [-v] [--json OUT.json] [-k NAME]
    VRAM_LIBRARY=build/libvram.so python3 python/tests/torch_allocator_port.py --allocator vram [-v]

With --allocator vram, memory growth is set on every GPU and vram.torch.install() runs before
anything touches CUDA, and vram.torch.mode must be "allocator" (exit 2 otherwise). Tests that assert
the native allocator's own layout (its segment sizes and counts, block splitting, rounding, its
messages, its settings strings) are in LAYOUT_ONLY with the reason, and are skipped under vram (the
list is printed at the end); everything else asserts behaviour a program relies on, so it must pass
on both. The last line is "N passed, M failed, K skipped"; --json writes every test's outcome (and is
rewritten after each test, so a watchdog exit, after 600 s in one test, keeps what was done). Exit
code 0 when nothing failed.

Needs: Python 3.8+, PyTorch with CUDA (2.11 was the target), one GPU with a few tens of GiB (the
memory-fraction and retry tests allocate up to 0.7 of the free memory); Triton for the
torch.compile tests and cuDNN for the cuDNN ones (skipped, saying so, without them). Only the
standard library and torch are used. Not part of the unittest suite (CI has no GPU and no PyTorch).
"""
import argparse
import contextlib
import copy
import faulthandler
import functools
import gc
import json
import os
import platform
import random
import sys
import threading
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
THIS_FILE = os.path.basename(__file__)           # torch_allocator_port.py
THIS_STEM = os.path.splitext(THIS_FILE)[0]
MiB = 1 << 20
GiB = 1 << 30
TEST_TIMEOUT_S = 600
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

ALLOCATOR = "native"      # set by main() from --allocator
VRAM_MODE = None
LAYOUT_ONLY = {}          # test name -> why it asserts the native allocator's own layout


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


def has_triton():
    try:
        from torch.utils._triton import has_triton as probe
        return probe()
    except Exception:
        return False


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
        faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True)
        fresh()

    def tearDown(self):
        faulthandler.cancel_dump_traceback_later()
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

CORE_STATS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
              "active_bytes", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "large_pool", "small_pool")
METRICS = ("current", "peak", "allocated", "freed")


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

    def test_memory_allocated_exact_1mib(self):
        base = torch.cuda.memory_allocated()
        t = torch.empty(262144, dtype=torch.float32, device="cuda")
        self.assertEqual(torch.cuda.memory_allocated() - base, 1048576)
        self.assertGreaterEqual(torch.cuda.max_memory_allocated(), base + 1048576)
        del t
        self.assertEqual(torch.cuda.memory_allocated(), base)

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

    def test_small_pool_512_bytes(self):
        s0 = stats()
        t = torch.empty(128, dtype=torch.float32, device="cuda")
        s1 = stats()
        self.assertEqual(s1["allocated_bytes.small_pool.current"] - s0["allocated_bytes.small_pool.current"], 512)
        self.assertEqual(s1["allocated_bytes.large_pool.current"] - s0["allocated_bytes.large_pool.current"], 0)
        self.assertEqual(s1["allocation.small_pool.current"] - s0["allocation.small_pool.current"], 1)
        del t
        self.assertEqual(stats()["allocated_bytes.small_pool.current"], s0["allocated_bytes.small_pool.current"])

    def test_large_pool_2mib(self):
        s0 = stats()
        t = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        s1 = stats()
        self.assertEqual(s1["allocated_bytes.large_pool.current"] - s0["allocated_bytes.large_pool.current"], 2 * MiB)
        self.assertEqual(s1["allocated_bytes.small_pool.current"] - s0["allocated_bytes.small_pool.current"], 0)
        self.assertEqual(s1["allocation.large_pool.current"] - s0["allocation.large_pool.current"], 1)
        del t
        self.assertEqual(stats()["allocated_bytes.large_pool.current"], s0["allocated_bytes.large_pool.current"])

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

    def test_reset_peak_memory_stats(self):
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        del x
        self.assertGreaterEqual(torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated() + 64 * MiB)
        torch.cuda.reset_peak_memory_stats()
        self.assertEqual(torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated())
        self.assertEqual(torch.cuda.max_memory_reserved(), torch.cuda.memory_reserved())
        s = stats()
        for name in CORE_STATS:
            for pool in POOLS:
                key = "%s.%s." % (name, pool)
                self.assertEqual(s[key + "peak"], s[key + "current"], key)

    def test_reset_accumulated_memory_stats(self):
        x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        del x
        self.assertGreater(stats()["allocated_bytes.all.allocated"], 0)
        torch.cuda.reset_accumulated_memory_stats()
        s = stats()
        for name in CORE_STATS:
            for pool in POOLS:
                for metric in ("allocated", "freed"):
                    key = "%s.%s.%s" % (name, pool, metric)
                    self.assertEqual(s[key], 0, key)
        self.assertEqual(s["num_alloc_retries"], 0)
        self.assertEqual(s["num_ooms"], 0)

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
    def test_empty_cache_releases_reserved(self):
        x = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        del x
        torch.cuda.synchronize()
        before = torch.cuda.memory_reserved()
        torch.cuda.empty_cache()
        self.assertLessEqual(torch.cuda.memory_reserved(), before - 256 * MiB)

    def test_empty_cache_returns_memory_to_driver(self):
        x = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        del x
        torch.cuda.synchronize()
        free_before = torch.cuda.mem_get_info()[0]
        torch.cuda.empty_cache()
        self.assertGreaterEqual(torch.cuda.mem_get_info()[0] - free_before, 128 * MiB)

    def test_empty_cache_keeps_live_tensors(self):
        keep = torch.full((4 * MiB,), 3.0, device="cuda")
        junk = [torch.empty(n, device="cuda") for n in (1000, MiB, 8 * MiB)]
        del junk
        torch.cuda.empty_cache()
        more = [torch.full((4 * MiB,), -1.0, device="cuda") for _ in range(4)]
        self.assertAllEqual(keep, 3.0)
        del more

    def test_mem_get_info(self):
        free, total = torch.cuda.mem_get_info()
        self.assertGreater(free, 0)
        self.assertLessEqual(free, total)
        self.assertEqual(torch.cuda.mem_get_info(0)[1], torch.cuda.mem_get_info(torch.device("cuda:0"))[1])

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

    def test_oom_counts_num_ooms(self):
        before = stats()
        allocated = torch.cuda.memory_allocated()
        with self.assertRaises(torch.OutOfMemoryError):
            torch.empty(4 * total_memory(), dtype=torch.uint8, device="cuda")
        self.assertEqual(stats()["num_ooms"], before["num_ooms"] + 1)
        self.assertEqual(torch.cuda.memory_allocated(), allocated)

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

    def test_record_stream_not_reused_while_busy(self):
        def scenario(cycles):
            side = torch.cuda.Stream()
            x = torch.ones(1 << 20, device="cuda")
            ptr = x.data_ptr()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
                x.add_(1.0)
            x.record_stream(side)
            del x
            y = torch.empty(1 << 20, device="cuda")
            if side.query():
                return False
            self.assertNotEqual(y.data_ptr(), ptr)
            side.synchronize()
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

    def test_memory_fraction_oom_past_fraction(self):
        total = total_memory()
        with memory_fraction(0.1):
            with self.assertRaises(torch.OutOfMemoryError):
                torch.empty(int(0.2 * total), dtype=torch.uint8, device="cuda")
            y = torch.empty(int(0.05 * total), dtype=torch.uint8, device="cuda")
            y[-1] = 3
            self.assertEqual(int(y[-1].item()), 3)
            del y

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

    def test_memory_history_frames_name_this_file(self):
        with recording(max_entries=1000, stacks="python"):
            kept = [torch.empty(1 << k, device="cuda") for k in (8, 14, 20)]
            ss = torch.cuda.memory._snapshot()
        self.assertIn("segments", ss)
        self.assertIn("device_traces", ss)
        found = any(e["action"] == "alloc" and any(os.path.basename(f["filename"]) == THIS_FILE
                                                   for f in e.get("frames", []))
                    for trace in ss["device_traces"] for e in trace)
        self.assertTrue(found, "no alloc entry has a frame in " + THIS_FILE)
        del kept

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

    def test_graph_private_pool_keeps_eager_tensors_intact(self):
        n = 1 << 20
        s = torch.cuda.Stream()
        x = torch.arange(n, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            out = x * 2 + 1            # x * 2 is freed inside the capture and stays the graph's
        eager = [torch.full((n,), 7.0, device="cuda") for _ in range(4)]
        with torch.cuda.stream(s):
            eager += [torch.full((n,), 7.0, device="cuda") for _ in range(4)]
        torch.cuda.current_stream().wait_stream(s)
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        for i, e in enumerate(eager):
            self.assertAllEqual(e, 7.0, "eager tensor %d was overwritten by a replay" % i)
        self.assertTrue(torch.equal(out, x * 2 + 1))

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

    def test_graph_concurrent_replay(self):
        size = 1000000
        s = torch.cuda.Stream()
        g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()
        a = torch.ones((size,), device="cuda")
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            g0.capture_begin()           # each graph its own private pool
            b = a.clone()
            for _ in range(5):
                b = func_with_temps(b, 1)
            g0.capture_end()
            g1.capture_begin()
            c = a.clone()
            for _ in range(5):
                c = func_with_temps(c, 2)
            g1.capture_end()
        want_b, want_c = torch.full_like(a, 94.0), torch.full_like(a, 156.0)
        for i in range(10):
            torch.cuda.synchronize()
            with torch.cuda.stream(s0):
                torch.cuda._sleep(1000000)       # lines the replays up on the GPU
                s1.wait_stream(s0)
                g0.replay()
            with torch.cuda.stream(s1):
                g1.replay()
            torch.cuda.current_stream().wait_stream(s0)
            torch.cuda.current_stream().wait_stream(s1)
            self.assertTrue(torch.equal(b, want_b), "replay %d" % i)
            self.assertTrue(torch.equal(c, want_c), "replay %d" % i)

    def test_graph_shared_pool_sequence(self):
        size = 1000
        pool = torch.cuda.graph_pool_handle()
        a = torch.ones(size, device="cuda")
        s = torch.cuda.Stream()
        g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(g0, pool=pool, stream=s):
            b = a.clone()
            for _ in range(5):
                b = func_with_temps(b, 1)
        with torch.cuda.graph(g1, pool=pool, stream=s):      # reads g0's output
            for _ in range(5):
                b = func_with_temps(b, 1)
        for _ in range(3):
            g0.replay()
            g1.replay()
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(b, torch.full_like(a, 3070.0)))

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

    def test_mempool_use_count(self):
        pool = torch.cuda.MemPool()
        outside = pool.use_count()
        self.assertGreaterEqual(outside, 1)
        with torch.cuda.use_mem_pool(pool):
            t = torch.full((1 << 20,), 3.0, device="cuda")
            self.assertEqual(pool.use_count(), outside + 1)
        self.assertEqual(pool.use_count(), outside)
        self.assertAllEqual(t, 3.0)
        del t

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


# ---- torch.compile(mode="reduce-overhead") ---------------------------------------------------

class TestCompileReduceOverhead(AllocatorTestCase):
    def setUp(self):
        super().setUp()
        if not has_triton():      # (asked here: it looks at the device, so not before vram's install)
            self.skipTest("torch.compile's Inductor needs Triton")
        import torch._dynamo
        torch._dynamo.reset()

    def test_compile_reduce_overhead_inference(self):
        from torch._dynamo.utils import counters
        skips = counters["inductor"]["cudagraph_skips"]
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).cuda().eval()
        compiled = torch.compile(model, mode="reduce-overhead")
        with torch.no_grad():
            for i in range(4):
                x = torch.randn(32, 64, device="cuda")
                torch.compiler.cudagraph_mark_step_begin()
                y = compiled(x).clone()
                torch.testing.assert_close(y, model(x), rtol=1e-3, atol=1e-3, msg="call %d" % i)
        self.assertEqual(counters["inductor"]["cudagraph_skips"], skips, "Inductor skipped CUDA graphs")

    def test_compile_reduce_overhead_training(self):
        import torch.nn.functional as F
        from torch._dynamo.utils import counters
        skips = counters["inductor"]["cudagraph_skips"]
        torch.manual_seed(0)
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
            self.assertAlmostEqual(loss.item(), loss_ref.item(), delta=1e-4 + 1e-3 * abs(loss_ref.item()),
                                   msg="step %d" % i)
        for p, q in zip(mine.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-4)
        self.assertEqual(counters["inductor"]["cudagraph_skips"], skips, "Inductor skipped CUDA graphs")


# ---- cuDNN -----------------------------------------------------------------------------------

class TestCudnn(AllocatorTestCase):
    def test_cudnn_benchmark_conv(self):
        import torch.nn.functional as F
        if not torch.backends.cudnn.is_available():
            self.skipTest("cuDNN is not available")
        old = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = True     # asks the allocator for its largest free block
        try:
            torch.manual_seed(0)
            conv = torch.nn.Conv2d(64, 64, 3).cuda()
            x = torch.randn(16, 64, 56, 56, device="cuda", requires_grad=True)
            for _ in range(2):                     # a second call takes the cached algorithm
                y = conv(x)
                gx, gw = torch.autograd.grad(y.sum(), (x, conv.weight))
        finally:
            torch.backends.cudnn.benchmark = old
        self.assertEqual(tuple(y.shape), (16, 64, 54, 54))
        torch.backends.cudnn.enabled = False
        try:
            y2 = F.conv2d(x, conv.weight, conv.bias)
            gx2, gw2 = torch.autograd.grad(y2.sum(), (x, conv.weight))
        finally:
            torch.backends.cudnn.enabled = True
        for name, a, b in (("output", y, y2), ("input grad", gx, gx2), ("weight grad", gw, gw2)):
            err = float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)
            self.assertLess(err, 2e-2, name)


# ---- streams and threads ---------------------------------------------------------------------

class TestStreams(AllocatorTestCase):
    def test_streams_alloc_free_two_threads(self):
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
        self.assertEqual(sorted(results), [1, 2])
        for k, (got, expected) in results.items():
            self.assertEqual(got, expected, "stream %d" % k)

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


# ---- another process -------------------------------------------------------------------------

def _ipc_receiver(payload, done, allocator):
    """The spawned process of test_ipc_share_cuda_tensor, on the same allocator as its parent."""
    try:
        _setup_allocator(allocator)
        import pickle
        t = pickle.loads(payload)
        ok = bool((t == 3.0).all().item())
        t.fill_(5.0)
        torch.cuda.synchronize()
        del t
        done.put(("ok", None) if ok else ("error", "the child did not see 3.0"))
    except BaseException as e:
        done.put(("error", "child: %s: %s" % (type(e).__name__, e)))


class TestIpc(AllocatorTestCase):
    def test_ipc_share_cuda_tensor(self):
        import queue
        import torch.multiprocessing as mp
        from multiprocessing.reduction import ForkingPickler
        t = torch.full((1 << 20,), 3.0, device="cuda")
        torch.cuda.synchronize()
        payload = bytes(ForkingPickler.dumps(t))   # (here, so that a refusal raises here)
        ctx = mp.get_context("spawn")
        done = ctx.Queue()
        p = ctx.Process(target=_ipc_receiver, args=(payload, done, ALLOCATOR))
        p.start()
        try:
            try:
                status, error = done.get(timeout=240)
            except queue.Empty:
                self.fail("the child did not answer in 240 s")
        finally:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
                p.join()
        self.assertEqual(status, "ok", error)
        self.assertAllEqual(t, 5.0, "the parent does not see the child's 5.0")


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
           TestMemorySnapshot, TestCudaGraphs, TestCheckpointPoolState, TestMemPool, TestCompileReduceOverhead,
           TestCudnn, TestStreams, TestIpc, TestZCaptureOom)


# ---- running ---------------------------------------------------------------------------------

def _setup_allocator(allocator):
    """Before anything touches CUDA: nothing for "native"; for "vram" memory growth on every GPU,
    vram.torch.install(), and mode "allocator" required (RuntimeError otherwise)."""
    global VRAM_MODE
    if allocator != "vram":
        return
    sys.path.insert(0, os.path.join(REPO, "python"))
    import vram
    gpus = vram.config.list_physical_devices("GPU")
    if not gpus:
        raise RuntimeError("vram lists no GPU (vram.diagnose() says why)")
    for gpu in gpus:
        vram.config.set_memory_growth(gpu, True)
    vram.torch.install()
    VRAM_MODE = vram.torch.mode
    if VRAM_MODE != "allocator":
        raise RuntimeError("vram.torch.mode is %r, not 'allocator'" % (VRAM_MODE,))


class RecordingResult(unittest.TextTestResult):
    """Keeps every test's outcome, and rewrites the JSON file after each one."""
    json_path = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}

    def _record(self, test, outcome, detail=""):
        self.outcomes[test.id()] = {"outcome": outcome, "detail": detail[-4000:]}
        self.counts[{"error": "failed"}.get(outcome, outcome)] += 1
        if self.json_path:
            write_json(self.json_path, self)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self.failures[-1][1])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self.errors[-1][1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "skipped", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def write_json(path, result):
    data = {"allocator": ALLOCATOR, "vram_mode": VRAM_MODE, "torch": torch.__version__,
            "counts": result.counts, "tests": result.outcomes, "layout_only": LAYOUT_ONLY}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    global ALLOCATOR
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allocator", choices=("native", "vram"), required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--json", metavar="OUT.json", help="write every test's outcome")
    ap.add_argument("-k", dest="patterns", action="append", default=[],
                    help="run only the tests whose id contains this (repeatable)")
    args = ap.parse_args(argv)
    ALLOCATOR = args.allocator
    if torch.cuda.is_initialized():
        print("CUDA was initialized before the allocator was chosen", file=sys.stderr)
        return 2
    try:
        _setup_allocator(ALLOCATOR)
    except Exception as e:
        print("vram could not be made PyTorch's allocator: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    print("allocator %s%s, torch %s, %s, %s" % (ALLOCATOR, " (vram.torch.mode %r)" % VRAM_MODE if VRAM_MODE else "",
                                               torch.__version__, torch.cuda.get_device_name(0),
                                               platform.python_version()), flush=True)

    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for cls in CLASSES:
        for test in loader.loadTestsFromTestCase(cls):
            if not args.patterns or any(p in test.id() for p in args.patterns):
                suite.addTest(test)
    RecordingResult.json_path = args.json
    runner = unittest.TextTestRunner(verbosity=2 if args.verbose else 1, resultclass=RecordingResult)
    result = runner.run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped) + len(result.expectedFailures)
    result.counts = {"passed": max(result.testsRun - failed - skipped, 0), "failed": failed, "skipped": skipped}
    if args.json:
        write_json(args.json, result)

    print("\nLayout-only tests (assert the native allocator's own layout; skipped under vram):")
    for name, reason in sorted(LAYOUT_ONLY.items()):
        print("  %-58s %s" % (name, reason))
    c = result.counts
    print("%d passed, %d failed, %d skipped" % (c["passed"], c["failed"], c["skipped"]))
    return 0 if c["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
