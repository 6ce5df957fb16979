"""vram as PyTorch's and CuPy's allocator, on a GPU machine with both installed.

Run from the repository root after building: `VRAM_LIBRARY=build/libvram.so python3
python/tests/gpu_frameworks.py`. Not part of the unittest suite (CI has no GPU and no PyTorch).
Exits non-zero on the first failed check.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import vram  # noqa: E402

GiB = 1 << 30


def check(condition, what):
    print(("ok     " if condition else "FAILED ") + what, flush=True)
    if not condition:
        sys.exit(1)


def main():
    import torch
    gpus = vram.config.list_physical_devices("GPU")
    check(len(gpus) >= 1, "a GPU is listed: %s" % (gpus,))
    vram.config.experimental.set_memory_growth(gpus[0], True)
    vram.config.set_memory_limit(gpus[0], "8GiB")
    print("       PyTorch calls", vram.torch.install())
    check(vram.torch.mode == "allocator", "PyTorch calls vram's allocator library (mode %r)" % (vram.torch.mode,))

    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(5):
        x = torch.randn(512, 4096, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    check(torch.isfinite(loss).item(), "five AdamW steps of an MLP train on vram's memory")
    info = vram.torch.memory_info(0)
    print("       vram memory info:", info)
    check(info["current"] > 0 and info["reserved"] <= 8 * GiB and info["limit"] == 8 * GiB,
          "PyTorch's tensors are vram's blocks, within the 8 GiB limit")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.ones(1 << 20, device="cuda")
    y_ptr = y.data_ptr()
    torch.cuda.synchronize()
    # Both streams busy, so that a free on either stays pending on that stream: y is dropped while
    # the default stream is current, and vram frees it on the stream it was allocated on (side),
    # which may take it back at once. Freed on the default stream instead, side could not have it
    # before the default stream's sleep ends.
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)          # about 0.1 s of GPU time
    torch.cuda._sleep(200_000_000)
    before = vram.torch.memory_info(0)["current"]
    del y
    check(vram.torch.memory_info(0)["current"] <= before - (4 << 20), "a side stream's tensor is freed by the deleter")
    with torch.cuda.stream(side):
        z = torch.ones(1 << 20, device="cuda")
        check(z.data_ptr() == y_ptr, "its stream gets the block back at once (freed on the stream it was allocated on)")
        check(float(z.sum()) == float(1 << 20), "and computes on it")
        del z
    torch.cuda.synchronize()
    # record_stream: a block used on a busy side stream is not handed out again before that stream
    # passes its free, not even to the stream it was allocated on
    busy = torch.cuda.Stream()
    t = torch.empty(1 << 22, device="cuda")
    busy.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(busy):
        t.add_(1.0)
        torch.cuda._sleep(2_000_000_000)        # about 1 s of GPU time
    t.record_stream(busy)
    held = t.data_ptr()
    # (on the H200 a stream's first sleep was seen done at once, so the second is the one relied on)
    with torch.cuda.stream(busy):
        torch.cuda._sleep(2_000_000_000)
    check(not busy.query(), "(the side stream is still busy)")
    del t
    u = torch.empty(1 << 22, device="cuda")
    check(u.data_ptr() != held, "a block recorded on a busy side stream is not handed out again before it passes")
    busy.synchronize()
    del u
    try:
        torch.empty(9 * GiB, dtype=torch.uint8, device="cuda")
        check(False, "a 9 GiB tensor under an 8 GiB limit raises torch.OutOfMemoryError")
    except torch.OutOfMemoryError as e:
        check("limit" in str(e), "a 9 GiB tensor raises torch.OutOfMemoryError naming the cause: " + str(e)[:150])

    import cupy
    vram.cupy.install()
    before = vram.torch.memory_info(0)["current"]
    a = cupy.ones(10 ** 7, dtype=cupy.float32)
    check(float(a.sum()) == 1e7, "CuPy computes on vram's memory")
    check(vram.torch.memory_info(0)["current"] >= before + 4 * 10 ** 7, "CuPy's array is a vram block")
    del a
    check(vram.torch.memory_info(0)["current"] <= before + 4096, "dropping the array frees the block")
    print("0 failed", flush=True)


if __name__ == "__main__":
    main()
