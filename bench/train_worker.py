"""bench/train_worker.py: the children of bench/train.py: `--worker WORKLOAD ALLOCATOR` (the workload
under the allocator, each step timed between torch.cuda.synchronize() calls, cuMemGetInfo sampled
after it, the peaks read, one JSON line printed) and `--prepare` (versions; vram.torch's allocator
library built once before the timed children). vram is installed before PyTorch's first CUDA
allocation. torch is imported inside the functions. One process, one run: no locks.
"""
import json
import math
import os
import sys
import time

from workloads import Driven, Skipped, build_workload

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- statistics and the timing loop (no torch) -----------------------------------------------------

def percentile(xs, q):
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    xs = sorted(xs)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def step_stats(times_ms):
    return {
        "step_ms_median": round(percentile(times_ms, 50), 4),
        "step_ms_mean": round(sum(times_ms) / len(times_ms), 4),
        "step_ms_p10": round(percentile(times_ms, 10), 4),
        "step_ms_p90": round(percentile(times_ms, 90), 4),
        "step_ms_min": round(min(times_ms), 4),
        "step_ms_max": round(max(times_ms), 4),
    }


def time_steps(step, sync, warmup, steps, sample=None, clock=time.perf_counter):
    """Runs warmup + steps calls of step(i); returns the timed steps' wall times in ms.

    Each step is bracketed by sync() (torch.cuda.synchronize) so that its time is the GPU's work
    too; sample() (the device-memory probe) runs after each step, outside the timed region."""
    times = []
    for i in range(warmup + steps):
        sync()
        t0 = clock()
        step(i)
        sync()
        t1 = clock()
        if sample is not None:
            sample()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times


# ---- vram and PyTorch's own figures ----------------------------------------------------------------

def _import_vram():
    sys.path.insert(0, os.path.join(REPO, "python"))
    import vram  # noqa: PLC0415
    return vram


def _setup_vram():
    """vram as PyTorch's allocator, growth on GPU 0, no limit. Before PyTorch's CUDA start."""
    vram = _import_vram()
    gpus = vram.config.list_physical_devices("GPU")
    if not gpus:
        raise RuntimeError("vram sees no GPU: " + vram.diagnose())
    vram.config.experimental.set_memory_growth(gpus[0], True)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = vram.torch.install()
    notes = {"vram_version": vram.version(), "vram_library": vram._lib.path, "vram_allocator_library": path,
             "vram_torch_mode": vram.torch.mode}
    if caught:
        notes["vram_warning"] = str(caught[-1].message)[:300]
    if os.environ.get("VRAM_ALLOC_CONF"):
        notes["vram_alloc_conf"] = os.environ["VRAM_ALLOC_CONF"]
    return vram, notes


def _torch_stats(torch):
    try:
        s = torch.cuda.memory_stats(0)
    except Exception:  # noqa: BLE001 - a pluggable allocator may not report statistics
        return {}
    keys = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms")
    return {k: s[k] for k in keys if k in s}


def _segments(torch):
    """(segments, expandable segments) from the native allocator's snapshot: checks the setting took."""
    try:
        snap = torch.cuda.memory_snapshot()
    except Exception:  # noqa: BLE001 - cudaMallocAsync and pluggable allocators have no snapshot
        return None
    return len(snap), sum(1 for s in snap if s.get("is_expandable"))


def _start(res, allocator):
    """PyTorch imported and CUDA started on GPU 0 under the allocator (vram installed first): (torch,
    vram or None), or None with res["error"] saying why not."""
    try:
        import torch
    except ImportError as e:
        res["error"] = "PyTorch is not installed for %s: %s" % (sys.executable, e)
        return None
    res["torch"] = torch.__version__
    res["cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        res["error"] = "CUDA is not available to PyTorch"
        return None
    vram = None
    if allocator == "vram":
        vram, notes = _setup_vram()  # before anything starts PyTorch's CUDA allocator
        res.update(notes)
    torch.cuda.init()
    torch.cuda.set_device(0)
    torch.cuda.synchronize()  # the context exists now
    res["gpu"] = torch.cuda.get_device_name(0)
    try:
        res["allocator_backend"] = torch.cuda.get_allocator_backend()
    except Exception:  # noqa: BLE001 - older PyTorch
        pass
    if allocator == "torch-async" and res.get("allocator_backend") not in (None, "cudaMallocAsync"):
        res["error"] = "PYTORCH_CUDA_ALLOC_CONF=%s did not take effect: the backend is %s" % (
            res["alloc_conf"], res["allocator_backend"])
        return None
    return torch, vram


def run_worker(workload, allocator, steps, warmup, device_type="cuda"):
    """One (workload, allocator) in this process; returns the result dict (with "error" or "skipped").

    device_type is "cuda" but for tests of the models on a machine without a GPU."""
    res = {"workload": workload, "allocator": allocator, "steps": steps, "warmup": warmup,
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    started = _start(res, allocator)
    if started is None:
        return res
    torch, vram = started
    free0, total = torch.cuda.mem_get_info(0)
    baseline = total - free0
    res["device_total_bytes"] = total
    res["device_used_baseline_bytes"] = baseline
    used = [baseline]

    def sample():
        free, _ = torch.cuda.mem_get_info(0)
        used.append(total - free)

    torch.manual_seed(0)
    torch.cuda.manual_seed(0)
    dev = torch.device(device_type, 0)
    try:
        step, info = build_workload(workload, torch, dev, warmup + steps)
    except Skipped as e:
        res["skipped"] = str(e)
        return res
    res.update(info)
    torch.cuda.synchronize()
    sample()
    if isinstance(step, Driven):
        times = step.run(torch.cuda.synchronize, warmup, steps, sample)
        res.update(info)  # what the run added (the framework's own memory figures)
        if len(times) != steps:
            res["error"] = "the framework ran %d timed steps, not %d" % (len(times), steps)
            return res
    else:
        times = time_steps(step, torch.cuda.synchronize, warmup, steps, sample)
    res.update(step_stats(times))
    res["step_ms"] = [round(t, 3) for t in times]
    device_used_peak = max(used) - baseline
    res["device_used_peak_bytes"] = device_used_peak
    _peaks(res, torch, vram, allocator, device_used_peak)
    return res


def _peaks(res, torch, vram, allocator, device_used_peak):
    """The allocator's peak reserved and allocated bytes and its statistics into res."""
    if allocator == "vram":
        info = vram.torch.memory_info(0)
        res["peak_reserved_bytes"] = info["peak_reserved"]
        res["peak_reserved_source"] = "vram_get_memory_info peak_reserved"
        res["peak_allocated_bytes"] = info["peak"]
        res["allocator_stats"] = {k: info[k] for k in ("num_allocs", "num_driver_allocs", "num_driver_frees",
                                                        "num_driver_moves", "num_ooms", "reserved", "limit",
                                                        "plan_steps", "plan_slot_steps", "plan_ends") if k in info}
        if not info["num_allocs"]:
            res["error"] = "vram served no allocation: vram.torch.install() did not take effect"
    else:
        reserved = torch.cuda.max_memory_reserved(0)
        res["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(0)
        res["allocator_stats"] = _torch_stats(torch)
        if allocator == "torch-async":
            if reserved:
                res["peak_reserved_source"] = "cudaMemPoolAttrReservedMemHigh (torch.cuda.max_memory_reserved)"
            else:
                reserved = device_used_peak
                res["peak_reserved_source"] = "device_used_peak (the pool reported 0)"
        else:
            res["peak_reserved_source"] = "torch.cuda.max_memory_reserved"
            seg = _segments(torch)
            if seg is not None:
                res["segments"], res["expandable_segments"] = seg
                if allocator == "torch-expandable" and seg[0] and not seg[1]:
                    res["warning"] = "no expandable segment: expandable_segments:True did not take effect"
        res["peak_reserved_bytes"] = reserved


def worker_main(workload, allocator, steps, warmup):
    try:
        res = run_worker(workload, allocator, steps, warmup)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a row with its reason
        import traceback
        traceback.print_exc()
        res = {"workload": workload, "allocator": allocator,
               "error": ("%s: %s" % (type(e).__name__, e)).strip()[:600]}
    print(json.dumps(res), flush=True)
    return 1 if "error" in res else 0


def prepare_main(with_vram):
    """Versions for the meta line; with_vram: builds vram.torch's allocator library (or its forwarder) once, before the timed children."""
    out = {}
    try:
        import torch
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
    except ImportError as e:
        out["error"] = "PyTorch is not installed for %s: %s" % (sys.executable, e)
        print(json.dumps(out), flush=True)
        return 1
    try:
        import torchvision
        out["torchvision"] = torchvision.__version__
    except ImportError:
        out["torchvision"] = None
    if with_vram:
        t0 = time.time()
        try:
            vram = _import_vram()
            out["vram_version"] = vram.version()
            out["vram_library"] = vram._lib.path
            import warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                path = vram.torch.install()  # compiles once; PyTorch caches the build
            out["vram_allocator_library"] = path
            out["vram_torch_mode"] = vram.torch.mode
            if caught:
                out["vram_warning"] = str(caught[-1].message)[:300]
        except Exception as e:  # noqa: BLE001
            out["vram_error"] = ("%s: %s" % (type(e).__name__, e))[:600]
        out["vram_prepare_s"] = round(time.time() - t0, 1)
    print(json.dumps(out), flush=True)
    return 0
