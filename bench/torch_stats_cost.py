#!/usr/bin/env python3
"""bench/torch_stats_cost.py: what one torch.cuda.memory_stats() costs (the call Lightning's
DeviceStatsMonitor makes at every batch's start and end) under PyTorch's allocator and under
vram.torch.install() with the plan on (default) and off (VRAM_ALLOC_CONF=plan:false).

Each configuration runs in its own process: it takes a heap like a small training step's (2,000 tensors
of 4 KiB to 8 MiB, every other one freed, then 20 rounds of 200 allocations and frees so that vram's plan
detector has seen a repeating sequence), then times 2,000 calls of torch.cuda.memory_stats(), 5 rounds,
and prints the median microseconds per call. One JSON line per configuration.

    VRAM_LIBRARY=build/libvram.so PYTHONPATH=python python3 bench/torch_stats_cost.py
"""
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = {"torch": None, "vram": "", "vram-plan-false": "plan:false"}


def child(name):
    import torch
    mode = None
    if CONFIGS[name] is not None:
        import vram.torch
        vram.torch.install()
        mode = vram.torch.mode
    dev = torch.device("cuda")
    sizes = [4096 << (i % 12) for i in range(2000)]
    keep = [torch.empty(s, dtype=torch.uint8, device=dev) for s in sizes]
    del keep[::2]
    for _ in range(20):
        step = [torch.empty(4096 << (i % 10), dtype=torch.uint8, device=dev) for i in range(200)]
        del step
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(2000):
            torch.cuda.memory_stats()
        rounds.append((time.perf_counter() - t) / 2000 * 1e6)
    print(json.dumps({"config": name, "vram_torch_mode": mode, "us_per_memory_stats": round(statistics.median(rounds), 2),
                      "rounds_us": [round(r, 2) for r in rounds], "keys": len(torch.cuda.memory_stats())}))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    for name, conf in CONFIGS.items():
        env = dict(os.environ)
        if conf:
            env["VRAM_ALLOC_CONF"] = conf
        out = subprocess.run([sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True,
                             timeout=300)
        sys.stdout.write(out.stdout or "")
        if out.returncode:
            print(json.dumps({"config": name, "error": (out.stderr or "").strip().splitlines()[-1:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
