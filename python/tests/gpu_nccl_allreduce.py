"""NCCL all-reduce between two GPUs whose buffers come from vram (vram.torch.install() in each rank).

Run on a machine with two or more GPUs: `VRAM_LIBRARY=build/libvram.so python3 python/tests/gpu_nccl_allreduce.py`.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Prints one line per rank and exits non-zero on a wrong sum.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")


def rank_main(rank, world):
    import torch
    import torch.distributed as dist
    import vram
    gpus = vram.config.list_physical_devices("GPU")
    vram.config.set_visible_devices(gpus[rank], "GPU")      # each rank takes only its own card,
    vram.config.experimental.set_memory_growth(gpus[rank], True)   # and only what it uses
    vram.torch.install()
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", rank=rank, world_size=world)
    t = torch.full((1 << 24,), float(rank + 1), device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    want = float(sum(range(1, world + 1)))
    info = vram.torch.memory_info(rank)
    ok = bool((t == want).all().item()) and info["current"] >= t.numel() * t.element_size()   # t is vram's
    print("rank %d: all-reduce sum %s (want %s) on vram memory: current %d bytes -> %s"
          % (rank, t[0].item(), want, info["current"], "ok" if ok else "FAILED"), flush=True)
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    import torch.multiprocessing as mp
    world = 2
    mp.spawn(rank_main, args=(world,), nprocs=world, join=True)
    print("0 failed")
