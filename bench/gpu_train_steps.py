#!/usr/bin/env python3
"""bench/gpu_train_steps.py: a small deterministic PyTorch training loop (an MLP of about 1.6 GiB of
weights, optimizer state and activations on the GPU, seeded, deterministic algorithms), used by
bench/gpu_sleep_proc.sh and bench/gpu_limits.sh to disturb a process from outside (sleep, wake, idle
sleep, a limit that moves) and compare its losses with an undisturbed run. Prints one JSON line:
{"losses": [...], "step_ms": [...], "allocated", "max_reserved", "reserved", "first_call_after_idle_ms"}.

    python3 bench/gpu_train_steps.py --steps 40 [--pause-at K --ready FILE --go FILE]
        [--idle-at K --idle-s S] [--width N] [--empty-cache-after-pause]

--pause-at K: after step K, write the PID to --ready FILE and wait until --go FILE exists (the caller
sleeps and wakes the process meanwhile). --idle-at K: after step K, make no CUDA call for --idle-s
seconds, then time the first step after it.
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--pause-at", type=int, default=None)
    ap.add_argument("--ready", default=None)
    ap.add_argument("--go", default=None)
    ap.add_argument("--idle-at", type=int, default=None)
    ap.add_argument("--idle-s", type=float, default=6.0)
    ap.add_argument("--empty-cache-after-pause", action="store_true",
                    help="torch.cuda.empty_cache() once the pause ends (a limit lowered meanwhile then bites)")
    a = ap.parse_args()
    if a.steps < 1 or a.width < 64 or (a.pause_at is not None and not (a.ready and a.go)):
        ap.error("--steps >= 1, --width >= 64, --pause-at needs --ready and --go")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch  # noqa: PLC0415
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    w = a.width
    model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.GELU(), torch.nn.Linear(w, w), torch.nn.GELU(),
                                torch.nn.Linear(w, w)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(256, w, device="cuda")
    losses, step_ms, after_idle = [], [], None
    for step in range(1, a.steps + 1):
        t_sync = time.perf_counter()
        torch.cuda.synchronize()   # after an idle spell, the call that wakes the process
        t = time.perf_counter()
        loss = (model(data) - data).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        step_ms.append(round((time.perf_counter() - t) * 1e3, 3))
        if a.idle_at is not None and step == a.idle_at + 1:   # the wake included: from the synchronize on
            after_idle = round((time.perf_counter() - t_sync) * 1e3, 3)
        if step == a.pause_at:
            with open(a.ready + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(a.ready + ".tmp", a.ready)
            while not os.path.exists(a.go):
                time.sleep(0.05)
            if a.empty_cache_after_pause:
                torch.cuda.empty_cache()
        if step == a.idle_at:
            if a.ready:
                with open(a.ready, "w") as f:
                    f.write(str(os.getpid()))
            time.sleep(a.idle_s)
    print(json.dumps({"losses": losses, "step_ms": step_ms, "allocated": torch.cuda.memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved(),
                      "reserved": torch.cuda.memory_reserved(), "first_call_after_idle_ms": after_idle}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
