#!/usr/bin/env python3
"""bench/gpu_sleep.py: sleep and wake on a real GPU, inside the process (vram.tag / vram.sleep / vram.wake under
vram.torch.install()). Two parts, each printing one JSON line:

  loop       a generate-then-train loop on one card, as an RL job runs it: an engine (a Hugging Face Llama
             built from its config, random weights, seeded) generates greedily with its weights and KV cache
             made inside `with vram.tag("engine")`; the engine's memory is slept (offload) while a second model
             trains, then woken, and the engine generates again. The tokens and the trained model's losses are
             compared with the same loop run with no sleep in a separate process (--undisturbed): they must be
             identical. nvidia-smi's used memory is read before the sleep, while asleep and after the wake.
  bandwidth  N GiB of tensors made under a tag, slept with offload and woken, timed, against a plain copy of
             the same bytes to pinned host memory and back (torch's copy_ with non_blocking on one stream);
             the offload and wake rates as a fraction of the plain copy's; then the same tensors slept with
             offload=False (discard): the memory goes and comes back, the time of each; then a CUDA graph
             captured under a tag, slept and woken, replays with the right result.

    VRAM_LIBRARY=build/libvram.so PYTHONPATH=python python3 bench/gpu_sleep.py loop [--undisturbed]
    VRAM_LIBRARY=build/libvram.so PYTHONPATH=python python3 bench/gpu_sleep.py bandwidth [--gib 8]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def smi_used_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        return int(out[0]) if out else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def setup():
    os.environ.setdefault("VRAM_FORCE_ALLOW_GROWTH", "true")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import vram.torch  # noqa: PLC0415  (before torch touches the GPU)
    vram.torch.install()
    import torch  # noqa: PLC0415
    torch.use_deterministic_algorithms(True)
    return vram, torch


def loop(undisturbed):
    vram, torch = setup()
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=2048)
    with vram.tag("engine"):
        engine = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    learner = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 4096)).cuda()
    opt = torch.optim.AdamW(learner.parameters(), lr=1e-4)
    prompt = torch.randint(0, cfg.vocab_size, (8, 128), device="cuda")
    data = torch.randn(64, 4096, device="cuda")
    tokens, losses, smi, times = [], [], {}, {}
    for rnd in range(3):
        with torch.no_grad(), vram.tag("engine"):
            out = engine.generate(prompt, max_new_tokens=64, do_sample=False, pad_token_id=0)
        tokens.append(out[:, -64:].tolist())
        torch.cuda.synchronize()
        if not undisturbed:
            smi.setdefault("awake", smi_used_mib())
            t = time.perf_counter()
            vram.sleep(0, "engine", offload=True)
            times.setdefault("sleep_s", []).append(round(time.perf_counter() - t, 4))
            smi.setdefault("asleep", smi_used_mib())
        for _ in range(20):
            loss = (learner(data) - data).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
        if not undisturbed:
            t = time.perf_counter()
            vram.wake(0, "engine")
            times.setdefault("wake_s", []).append(round(time.perf_counter() - t, 4))
            smi.setdefault("woken", smi_used_mib())
    info = vram.config.get_memory_info_full(0)
    return {"part": "loop", "undisturbed": undisturbed, "tokens": tokens, "losses": losses, "smi_used_mib": smi,
            "times": times, "engine_bytes": sum(p.numel() * p.element_size() for p in engine.parameters()),
            "asleep_bytes_end": info.get("asleep_bytes"), "vram_torch_mode": vram.torch.mode}


def bandwidth(gib):
    vram, torch = setup()
    n = gib << 30
    with vram.tag("bulk"):
        x = torch.empty(n, dtype=torch.uint8, device="cuda")
    x.random_(0, 256)
    check = x[:: 1 << 20].clone()  # one byte per MiB, outside the tag
    torch.cuda.synchronize()
    res = {"part": "bandwidth", "bytes": n, "smi_awake": smi_used_mib()}
    offload, wake = [], []
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        vram.sleep(0, "bulk", offload=True)
        offload.append(time.perf_counter() - t)
        res.setdefault("smi_asleep", smi_used_mib())
        t = time.perf_counter()
        vram.wake(0, "bulk")
        torch.cuda.synchronize()
        wake.append(time.perf_counter() - t)
    res["same_bytes"] = bool(torch.equal(x[:: 1 << 20], check))
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d2h, h2d = [], []
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        host.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        d2h.append(time.perf_counter() - t)
        t = time.perf_counter()
        x.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        h2d.append(time.perf_counter() - t)
    best = min
    res.update({"offload_gbps": round(n / best(offload) / 1e9, 2), "wake_gbps": round(n / best(wake) / 1e9, 2),
                "plain_d2h_gbps": round(n / best(d2h) / 1e9, 2), "plain_h2d_gbps": round(n / best(h2d) / 1e9, 2)})
    res["offload_vs_plain"] = round(res["offload_gbps"] / res["plain_d2h_gbps"], 3)
    res["wake_vs_plain"] = round(res["wake_gbps"] / res["plain_h2d_gbps"], 3)
    # discard: the memory goes and comes back without copies
    t = time.perf_counter()
    vram.sleep(0, "bulk", offload=False)
    res["discard_sleep_s"] = round(time.perf_counter() - t, 4)
    res["smi_discarded"] = smi_used_mib()
    t = time.perf_counter()
    vram.wake(0, "bulk")
    res["discard_wake_s"] = round(time.perf_counter() - t, 4)
    del x, host
    res["graph_replay_after_wake"] = graph_after_wake(vram, torch)
    return res


def graph_after_wake(vram, torch):
    """A CUDA graph captured (its private pool made under the tag) before a sleep replays after the wake."""
    with vram.tag("graph"):
        a = torch.randn(1 << 22, device="cuda")
        b = torch.empty_like(a)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            b.copy_(a * 2 + 1)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            b.copy_(a * 2 + 1)
    want = (a * 2 + 1).clone()
    torch.cuda.synchronize()
    vram.sleep(0, "graph", offload=True)
    vram.wake(0, "graph")
    b.zero_()
    g.replay()
    torch.cuda.synchronize()
    return bool(torch.equal(b, want))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("loop", "bandwidth"))
    ap.add_argument("--undisturbed", action="store_true", help="loop: no sleep (the reference run)")
    ap.add_argument("--gib", type=int, default=8)
    a = ap.parse_args()
    if a.gib < 1:
        ap.error("--gib >= 1")
    print(json.dumps(loop(a.undisturbed) if a.part == "loop" else bandwidth(a.gib)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
