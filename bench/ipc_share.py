"""bench/ipc_share.py: 700 CUDA tensors of 4 MiB shared with a spawned process (torch.multiprocessing)
under vram.torch with memory growth: the exporter keeps a file descriptor per 2 MiB piece (1,400 here),
more than a soft RLIMIT_NOFILE of 1024 allows; vram_ipc_export raises the soft limit. Prints the limits
before and after, what the child and the parent see (each tensor's last element, 700.0 when every one
arrived), and what vram holds.

    ulimit -Sn 1024; VRAM_FORCE_ALLOW_GROWTH=true VRAM_LIBRARY=build/libvram.so PYTHONPATH=python \
        python3 bench/ipc_share.py
"""
import resource
import time

import vram.torch

vram.torch.install()   # (in the spawned child too: it imports this module again)
import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def child(q, done):
    ts = q.get()
    for t in ts:
        t.add_(1)
    torch.cuda.synchronize()
    done.put(sum(float(t[-1].item()) for t in ts))


if __name__ == "__main__":
    print("soft/hard before", resource.getrlimit(resource.RLIMIT_NOFILE), flush=True)
    ts = [torch.zeros(1 << 20, dtype=torch.float32, device="cuda") for _ in range(700)]   # 4 MiB each
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(q, done))
    p.start()
    t0 = time.perf_counter()
    q.put(ts)
    r = done.get(timeout=240)
    p.join(60)
    print("child saw", r, "parent sees", sum(float(x[-1].item()) for x in ts),
          "in %.1f s" % (time.perf_counter() - t0))
    print("soft/hard after", resource.getrlimit(resource.RLIMIT_NOFILE), "reserved", torch.cuda.memory_reserved(),
          flush=True)
