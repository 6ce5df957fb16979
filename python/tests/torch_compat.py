"""PyTorch on vram: a compatibility table of PyTorch's CUDA memory features.

Each probe below is a small function that exercises one feature of PyTorch's CUDA allocator as a
program sees it (statistics, empty_cache, memory fraction, out-of-memory, record_stream, CUDA graphs'
private pools, torch.compile's reduce-overhead mode, memory history, IPC, MemPool, ...). It returns a
short string naming what it checked (the values it compared, or a property such as "reserved
dropped" where the numbers legitimately differ between allocators) or raises. Every probe runs in a
fresh process twice: once with PyTorch's own (native) allocator, once after vram.torch.install()
(memory growth on, mode "allocator" required), and the table says, per probe, what each gave and
MATCH / DIFFER (one raised and the other did not, or the results differ) / FAILED (both raised: the
probe itself, or the machine, is at fault).

Run from the repository root on a GPU machine with PyTorch (built libvram.so):

    VRAM_LIBRARY=build/libvram.so python3 python/tests/torch_compat.py [--json OUT.json] [--only NAME,...]

--json writes a list of {name, native, vram, match}. The exit code is 0 only when every row is a
MATCH (1 otherwise, 2 for bad arguments). Needs: Python 3.8+, PyTorch with CUDA (2.11 was the
target), one GPU; the compile_reduce_overhead probe needs Triton (PyTorch's Inductor); cuDNN for
cudnn_benchmark. vram is imported from this repository's python/ folder (it finds libvram.so itself
or through VRAM_LIBRARY); its first install() builds a small C++ extension with
torch.utils.cpp_extension, done once up front here ("install" line) so that no probe pays for it.
Each probe has 300 s; a failing child's stderr tail is printed under the table. Not part of the
unittest suite (CI has no GPU and no PyTorch). Only the standard library and torch are used.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MARK = "@@TORCH_COMPAT_RESULT@@ "
PROBE_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 900
MiB = 1 << 20

PROBES = []          # (name, function, same(native_result, vram_result))
_ALLOCATOR = None    # in a child: "native" or "vram"


def probe(name, same=None):
    """Registers a probe; `same` compares the two result strings (default: equality)."""
    def register(fn):
        PROBES.append((name, fn, same or (lambda a, b: a == b)))
        return fn
    return register


def _check(condition, what):
    if not condition:
        raise AssertionError(what)


def _setup_allocator(allocator):
    """In a child, before anything touches CUDA: nothing for "native"; for "vram" memory growth on
    every GPU, vram.torch.install(), and mode "allocator" required. Returns the mode."""
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
    print("vram.torch.mode = %r" % (vram.torch.mode,), file=sys.stderr, flush=True)
    if vram.torch.mode != "allocator":
        raise RuntimeError("vram.torch.mode is %r, not 'allocator' (see the install warning above)"
                           % (vram.torch.mode,))
    return vram.torch.mode


def _warm():
    """Initializes CUDA with one tiny tensor, so that later deltas count only the probe's tensors."""
    import torch
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()


# ---- the probes -----------------------------------------------------------------------------

STATS_KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.peak", "active_bytes.large_pool.current",
              "requested_bytes.all.current", "num_alloc_retries", "num_ooms")


@probe("stats")
def probe_stats():
    import torch
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


@probe("small_large")
def probe_small_large():
    import torch
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
    del a, b
    return "small_pool +512, large_pool +2097152"


@probe("reset_peak")
def probe_reset_peak():
    import torch
    _warm()
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
    del x
    _check(torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated() + 64 * MiB,
           "max_memory_allocated did not see the 64 MiB tensor")
    torch.cuda.reset_peak_memory_stats()
    peak, current = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    _check(peak == current, "after reset_peak_memory_stats: max %d != current %d" % (peak, current))
    torch.cuda.reset_accumulated_memory_stats()
    total = torch.cuda.memory_stats()["allocated_bytes.all.allocated"]
    _check(total == 0, "after reset_accumulated_memory_stats: allocated_bytes.all.allocated = %d" % total)
    return "peak == current after reset, accumulated allocated 0"


@probe("empty_cache")
def probe_empty_cache():
    import torch
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
    _check(reserved_after < reserved_before,
           "memory_reserved %d -> %d over empty_cache" % (reserved_before, reserved_after))
    _check(free_after - free_before >= 128 * MiB,
           "the driver's free memory rose by %d bytes over empty_cache" % (free_after - free_before))
    return "reserved dropped, driver free rose"


@probe("cudnn_benchmark")
def probe_cudnn_benchmark():
    # cuDNN's benchmark mode asks the allocator for its largest free block (cacheInfo)
    import torch
    import torch.nn.functional as F
    _check(torch.backends.cudnn.is_available(), "cuDNN is not available")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(64, 64, 3).cuda()
    x = torch.randn(16, 64, 56, 56, device="cuda", requires_grad=True)
    y = conv(x)
    gx, gw = torch.autograd.grad(y.sum(), (x, conv.weight))
    torch.cuda.synchronize()
    torch.backends.cudnn.enabled = False      # the reference: PyTorch's own convolution
    try:
        y2 = F.conv2d(x, conv.weight, conv.bias)
        gx2, gw2 = torch.autograd.grad(y2.sum(), (x, conv.weight))
    finally:
        torch.backends.cudnn.enabled = True
    for name, a, b in (("output", y, y2), ("input grad", gx, gx2), ("weight grad", gw, gw2)):
        err = float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)
        _check(err < 2e-2, "cuDNN's %s differs from the non-cuDNN path by %.3g (relative)" % (name, err))
    return "ok, output %s, matches the non-cuDNN path" % (tuple(y.shape),)


@probe("memory_fraction")
def probe_memory_fraction():
    import torch
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


@probe("oom_message")
def probe_oom_message():
    import torch
    _warm()
    total = torch.cuda.get_device_properties(0).total_memory
    x = torch.ones(1024, device="cuda")
    message = None
    try:
        torch.empty(4 * total, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as e:
        message = str(e)
    _check(message is not None, "4x the card's memory did not raise torch.OutOfMemoryError")
    _check(message.strip() != "", "the OutOfMemoryError's message is empty")
    x.fill_(2.0)
    _check(bool((x == 2.0).all().item()), "a kernel after the OOM did not run")
    return "OutOfMemoryError, message non-empty, kernels run after"


@probe("mem_get_info")
def probe_mem_get_info():
    import torch
    _warm()
    free, total = torch.cuda.mem_get_info()
    _check(0 < free <= total, "mem_get_info() = (%d, %d)" % (free, total))
    return "0 < free <= total"


# cycles of torch.cuda._sleep (about 0.1 s to 2 s on an H200); a longer one when the stream was
# already done before the check (a first sleep has been seen to finish at once)
SLEEP_CYCLES = (200_000_000, 1_000_000_000, 2_000_000_000, 4_000_000_000)


@probe("record_stream")
def probe_record_stream():
    import torch
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


@probe("streams")
def probe_streams():
    import threading
    import torch
    _warm()
    results, errors = {}, []

    def work(k):
        try:
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
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for k, (got, expected) in sorted(results.items()):
        _check(got == expected, "stream %d: sum %r, expected %r" % (k, got, expected))
    _check(len(results) == 2, "a worker gave no result")
    return "sums correct"


@probe("cuda_graph_private_pool")
def probe_cuda_graph_private_pool():
    import torch
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


@probe("graph_forked_stream")
def probe_graph_forked_stream():
    """A capture that forks a side stream (it joins the capture through wait_stream), allocates and
    frees there and on the capture stream: every request goes to the graph's private pool, replays give
    the right values, and eager tensors allocated afterwards on both streams are left alone."""
    import torch
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


def _func_with_temps(t, val):
    x = t.clone() + val
    y = t.clone() + val
    return x + y


@probe("two_graph_pools")
def probe_two_graph_pools():
    import torch
    _warm()
    size = 1_000_000
    a = torch.ones(size, device="cuda")
    s = torch.cuda.Stream()
    g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g0, stream=s):
        b = a.clone()
        for _ in range(5):
            b = _func_with_temps(b, 1)
    with torch.cuda.graph(g1, stream=s):
        c = a.clone()
        for _ in range(5):
            c = _func_with_temps(c, 2)
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


@probe("graph_shared_pool")
def probe_graph_shared_pool():
    import torch
    _warm()
    size = 1000
    pool = torch.cuda.graph_pool_handle()
    a = torch.ones(size, device="cuda")
    s = torch.cuda.Stream()
    g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g0, pool=pool, stream=s):
        b = a.clone()
        for _ in range(5):
            b = _func_with_temps(b, 1)
    with torch.cuda.graph(g1, pool=pool, stream=s):   # uses g0's output
        for _ in range(5):
            b = _func_with_temps(b, 1)
    for round_ in range(3):
        c = a.clone()
        for _ in range(2):
            c = _func_with_temps(c, 3)
        g0.replay()
        for _ in range(2):
            c = _func_with_temps(c, 3)
        g1.replay()
        for _ in range(2):
            c = _func_with_temps(c, 3)
        torch.cuda.synchronize()
        _check(torch.equal(b, torch.full_like(a, 3070.0)), "round %d: the graphs' result is wrong" % round_)
        _check(torch.equal(c, torch.full_like(a, 442.0)), "round %d: the eager result is wrong" % round_)
    return "result correct"


@probe("compile_reduce_overhead")
def probe_compile_reduce_overhead():
    import copy
    import torch
    import torch.nn.functional as F
    from torch._dynamo.utils import counters
    _warm()
    skips = counters["inductor"]["cudagraph_skips"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for i in range(3):
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
    for i in range(4):
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


@probe("memory_history")
def probe_memory_history():
    import torch
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


@probe("ipc")
def probe_ipc():
    import queue
    import torch
    import torch.multiprocessing as mp
    from multiprocessing.reduction import ForkingPickler
    _warm()
    t = torch.full((1 << 20,), 3.0, device="cuda")
    torch.cuda.synchronize()
    # pickled here (as Queue.put would in its feeder thread), so that a refusal raises here
    payload = bytes(ForkingPickler.dumps(t))
    ctx = mp.get_context("spawn")
    done = ctx.Queue()
    p = ctx.Process(target=_ipc_receiver, args=(payload, done, _ALLOCATOR))
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


@probe("mempool")
def probe_mempool():
    import torch
    _warm()
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        t = torch.full((1 << 20,), 3.0, device="cuda")
        inside = pool.use_count()
    _check(bool((t == 3.0).all().item()), "the pool's tensor does not hold its values")
    _check(inside >= 1 and pool.use_count() >= 1, "use_count %d inside, %d after" % (inside, pool.use_count()))
    del t
    return "mempool ok"


# ---- running -------------------------------------------------------------------------------

def _child(name, allocator):
    global _ALLOCATOR
    _ALLOCATOR = allocator
    try:
        mode = _setup_allocator(allocator)
        import torch
        if name == "__install__":
            result = "mode %s" % mode
        else:
            result = {n: fn for n, fn, _ in PROBES}[name]()
        torch.cuda.synchronize()   # and CUDA still works after the probe
        out = {"ok": True, "result": str(result)}
    except BaseException as e:
        traceback.print_exc()
        lines = str(e).strip().splitlines()
        out = {"ok": False, "error": ("%s: %s" % (type(e).__name__, lines[0] if lines else ""))[:400]}
    sys.stderr.flush()
    print(MARK + json.dumps(out), flush=True)
    return 0


def _run_child(name, allocator, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--allocator", allocator]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, errors="replace", start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    if timed_out or p.returncode is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # the child and what it started (its own session)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    res = None
    for line in out.splitlines():
        if line.startswith(MARK):
            res = json.loads(line[len(MARK):])
    if timed_out:
        res = {"ok": False, "error": "timed out after %d s" % timeout}
    elif res is None:
        res = {"ok": False, "error": "no result (exit code %s)" % p.returncode}
    elif p.returncode != 0:
        res = {"ok": False, "error": "exit code %s after %s" % (p.returncode, res.get("result") or res.get("error"))}
    res["stderr"] = err
    return res


def _cell(res):
    return res["result"] if res["ok"] else "raised: " + res["error"]


def _short(text, width):
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="OUT.json", help="write a list of {name, native, vram, match}")
    ap.add_argument("--only", metavar="NAME,...", help="run only these probes")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--allocator", choices=("native", "vram"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child, args.allocator or "native")

    probes = PROBES
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {n for n, _, _ in PROBES})
        if unknown:
            print("unknown probes: %s (known: %s)" % (", ".join(unknown), ", ".join(n for n, _, _ in PROBES)),
                  file=sys.stderr)
            return 2
        probes = [p for p in PROBES if p[0] in wanted]

    print("PyTorch on vram: each probe with PyTorch's allocator (native), then after vram.torch.install()",
          flush=True)
    install = _run_child("__install__", "vram", INSTALL_TIMEOUT_S)
    print("install: %s" % _cell(install), flush=True)
    if not install["ok"]:
        print(_tail(install["stderr"], 25), flush=True)

    rows = []
    for name, fn, same in probes:
        native = _run_child(name, "native", PROBE_TIMEOUT_S)
        vram = _run_child(name, "vram", PROBE_TIMEOUT_S)
        if native["ok"] and vram["ok"]:
            status = "MATCH" if same(native["result"], vram["result"]) else "DIFFER"
        elif native["ok"] != vram["ok"]:
            status = "DIFFER"
        else:
            status = "FAILED"
        rows.append((name, native, vram, status))
        print("  %-24s %s" % (name, status), flush=True)

    width = 46
    name_w = max([len("probe")] + [len(r[0]) for r in rows])
    header = "%-*s  %-*s  %-*s  %s" % (name_w, "probe", width, "native", width, "vram", "")
    print()
    print(header)
    print("-" * len(header.rstrip()))
    for name, native, vram, status in rows:
        print("%-*s  %-*s  %-*s  %s" % (name_w, name, width, _short(_cell(native), width),
                                        width, _short(_cell(vram), width), status))
    bad = [r for r in rows if r[3] != "MATCH"]
    if bad:
        print("\nDetails of the rows that do not match:")
    for name, native, vram, status in bad:
        print("  %s (%s)" % (name, status))
        for label, res in (("native", native), ("vram", vram)):
            print("    %-6s %s" % (label, _cell(res)))
            if not res["ok"] and res["stderr"].strip():
                print(_tail(res["stderr"]))
    print("\n%d of %d probes match" % (len(rows) - len(bad), len(rows)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"name": name, "native": _cell(native), "vram": _cell(vram), "match": status == "MATCH"}
                       for name, native, vram, status in rows], f, indent=1)
            f.write("\n")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
