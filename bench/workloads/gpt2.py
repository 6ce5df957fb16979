"""bench/workloads/gpt2.py: the gpt2 workload (DESCRIPTION), GPT-2 small in torch.nn (transformer.py)
with random weights and tokens. traces/train_gpt2.trace.gz is its allocation stream.
"""

GPT2 = dict(layers=12, d=768, heads=12, vocab=50257, ctx=1024, batch=16, seq=1024, dropout=0.1)
STEPS = (5, 25)  # (warmup, timed) steps a process by default
DESCRIPTION = "GPT-2 small (124M, %d layers, d=%d) training, batch %d x %d tokens, bf16 autocast, AdamW" % (
    GPT2["layers"], GPT2["d"], GPT2["batch"], GPT2["seq"])


def build(torch, dev, total_steps):
    """(step(i), notes) of the workload on dev."""
    from .transformer import GPT
    F = torch.nn.functional
    c = GPT2
    model = GPT(c["layers"], c["d"], c["heads"], c["vocab"], c["ctx"], c["dropout"]).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def step(i):
        ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"] + 1), device=dev)
        x, y = ids[:, :-1], ids[:, 1:]
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits, _ = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, {"params": sum(p.numel() for p in model.parameters())}
