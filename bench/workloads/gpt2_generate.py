"""bench/workloads/gpt2_generate.py: the gpt2_generate workload (DESCRIPTION), its one definition:
bench/train.py times it and traces/train_gpt2_generate.trace.gz was recorded from it (`bench/train.py
--worker gpt2_generate torch`). gpt2.py's model with random weights; the KV cache grows by torch.cat,
a new and longer tensor every token and layer. traces/gpt2_generate.trace.gz is older: transformers'
generate() at batch 8 with 32-token prompts, by the script this file replaced (traces/README.md).
"""
from .gpt2 import GPT2

GEN = dict(batch=16, prompt=128, new_tokens=256)
STEPS = (2, 8)  # (warmup, timed) generations a process by default
DESCRIPTION = ("GPT-2 small greedy generation, bf16, batch %d, %d-token prompt, %d new tokens, KV cache grown "
               "by torch.cat; one step = one whole generation" % (GEN["batch"], GEN["prompt"], GEN["new_tokens"]))


def build(torch, dev, total_steps):
    """(step(i), notes) of the workload on dev."""
    from .transformer import GPT
    c = GPT2
    model = GPT(c["layers"], c["d"], c["heads"], c["vocab"], c["ctx"], 0.0).to(dev, torch.bfloat16).eval()
    g = GEN

    def step(i):
        with torch.inference_mode():
            ids = torch.randint(0, c["vocab"], (g["batch"], g["prompt"]), device=dev)
            logits, caches = model(ids, [None] * c["layers"], 0)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out = [nxt]
            for t in range(g["new_tokens"] - 1):
                logits, caches = model(nxt, caches, g["prompt"] + t)
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                out.append(nxt)
            return torch.cat(out, dim=1)

    return step, {"params": sum(p.numel() for p in model.parameters())}
