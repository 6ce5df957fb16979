#!/usr/bin/env python3
"""bench/plan_train.py: a training loop that repeats one step, under vram.torch.install() with the
allocator option plan:true or plan:false (VRAM_ALLOC_CONF; the script sets it from --plan), or under
one of PyTorch's allocators (--allocator torch, torch-expandable, cuda-async: PYTORCH_CUDA_ALLOC_CONF
empty, expandable_segments:True, backend:cudaMallocAsync).

A Hugging Face LlamaForCausalLM built from its LlamaConfig (random weights, nothing downloaded),
fixed batch and sequence length, bf16 autocast, AdamW. For every step: its time (CUDA-synchronized
around the step), the step's peak allocated bytes (torch.cuda.max_memory_allocated after
reset_peak_memory_stats at the step's start), what vram holds from the driver at the step's end
(torch.cuda.memory_reserved, vram's figure under vram.torch), and vram's plan figures
(vram.config.get_memory_info_full: plan_bytes, plan_steps, plan_slot_steps, plan_ends, plan_given_back; zeros under
PyTorch's allocators). At the end, what another process sees used on the card (nvidia-smi, run as a
child process) and the first five steps' time together (what mapping and a plan's first step cost,
once). One JSON line on stdout.

    VRAM_LIBRARY=build/libvram.so PYTHONPATH=python python3 bench/plan_train.py --plan true \
        --steps 30 --limit 40GiB
    PYTHONPATH=python python3 bench/plan_train.py --allocator torch-expandable

--limit sets VRAM_MEMORY_LIMIT (vram only; a limit you choose maps memory granule by granule: see
README, extent_mb). The figures of the docs are printed by this command; bench/README.md gives the
date and the machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PYTORCH_CONF = {"torch": "", "torch-expandable": "expandable_segments:True", "cuda-async": "backend:cudaMallocAsync"}
PLAN_KEYS = ("plan_bytes", "plan_steps", "plan_ends", "plan_given_back", "plan_slot_steps")
DRIVER_KEYS = ("num_driver_allocs", "num_driver_frees", "num_driver_moves")  # vram's driver calls, cumulative


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allocator", choices=("vram",) + tuple(PYTORCH_CONF), default="vram")
    ap.add_argument("--plan", choices=("true", "false"), default="true", help="vram's plan (default true)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--limit", default=None, help="VRAM_MEMORY_LIMIT, e.g. 40GiB")
    a = ap.parse_args()
    if a.steps < 5 or a.layers < 1 or a.d < 64 or a.batch < 1 or a.seq < 16:
        ap.error("--steps >= 5 (the first five are summed), --layers >= 1, --d >= 64, --batch >= 1, --seq >= 16")
    if a.limit and a.allocator != "vram":
        ap.error("--limit is vram's (VRAM_MEMORY_LIMIT)")
    vram_mode = None
    if a.allocator == "vram":
        conf = os.environ.get("VRAM_ALLOC_CONF", "")
        os.environ["VRAM_ALLOC_CONF"] = (conf + "," if conf else "") + "plan:" + a.plan
        if a.limit:
            os.environ["VRAM_MEMORY_LIMIT"] = a.limit
        os.environ["VRAM_FORCE_ALLOW_GROWTH"] = "true"
        import vram.torch  # noqa: PLC0415  (before torch touches the GPU)
        vram.torch.install()
        import vram.config  # noqa: PLC0415
        vram_mode = vram.torch.mode
    else:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = PYTORCH_CONF[a.allocator]
    import torch  # noqa: PLC0415
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=a.d, intermediate_size=4 * a.d, num_hidden_layers=a.layers,
                      num_attention_heads=max(1, a.d // 64), num_key_value_heads=max(1, a.d // 64),
                      max_position_embeddings=a.seq)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
    rows = []
    for step in range(a.steps):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        info = vram.config.get_memory_info_full(0) if vram_mode else dict.fromkeys(PLAN_KEYS + DRIVER_KEYS, 0)
        rows.append({"step": step + 1, "ms": round(ms, 3), "peak_allocated": torch.cuda.max_memory_allocated(),
                     "reserved": torch.cuda.memory_reserved(), "allocated": torch.cuda.memory_allocated(),
                     "plan_bytes": info["plan_bytes"], "plan_steps": info["plan_steps"],
                     "plan_ends": info["plan_ends"], "plan_given_back": info["plan_given_back"],
                     "plan_slot_steps": info["plan_slot_steps"],
                     "driver_calls": sum(info.get(k, 0) for k in DRIVER_KEYS)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    used = None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
        used = int(out.splitlines()[0]) * (1 << 20) if out else None
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    tail = rows[a.steps // 2:]
    peak_step = max(r["peak_allocated"] for r in tail)
    res = {"allocator": a.allocator, "plan": a.plan if vram_mode else None, "limit": a.limit, "steps": a.steps,
           "layers": a.layers, "d": a.d, "batch": a.batch, "seq": a.seq, "torch": torch.__version__,
           "vram_torch_mode": vram_mode, "first_five_steps_ms": round(sum(r["ms"] for r in rows[:5]), 3),
           "driver_calls_first_five": rows[4]["driver_calls"],
           "driver_calls_after_five": rows[-1]["driver_calls"] - rows[4]["driver_calls"],
           "step_ms_median_second_half": statistics.median(r["ms"] for r in tail),
           "peak_allocated_second_half": peak_step,
           "reserved_end": rows[-1]["reserved"],
           "reserved_max_second_half": max(r["reserved"] for r in tail),
           "held_to_step_peak": round(max(r["reserved"] for r in tail) / peak_step, 4),
           "plan_steps": rows[-1]["plan_steps"], "plan_slot_steps": rows[-1]["plan_slot_steps"],
           "plan_ends": rows[-1]["plan_ends"],
           "plan_bytes": rows[-1]["plan_bytes"], "plan_given_back": rows[-1]["plan_given_back"],
           "nvidia_smi_used_end": used, "rows": rows}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
