"""bench/workloads/bert_varlen.py: the bert_varlen workload (DESCRIPTION), BERT-base in torch.nn
(transformer.py) with random weights, a new shape every step from 8 drawn once and taken in turn;
traces/train_bert_varlen.trace.gz is its allocation stream. Not transformer_varlen.py's workload:
that one is PyTorch's nn.TransformerEncoder (pre-norm, untied head, no masking) with a fresh shape
every step that never repeats, an allocation stream to replay; this one is timed, so its shapes
repeat and no timed step is a shape's first (with nearly every step new, a round's median varied by
15-30% for every allocator).
"""
import random

BERT = dict(layers=12, d=768, heads=12, vocab=30522, max_len=512, batches=(16, 32, 48, 64),
            min_len=64, len_step=8, shapes=8, dropout=0.1, mask_prob=0.15, mask_id=103, seed=1234)
STEPS = (BERT["shapes"], 40)  # (warmup, timed) steps a process by default: a warmup step per shape
DESCRIPTION = ("BERT-base (%d layers, d=%d) masked-LM training, %d shapes of batch %s and length %d..%d "
               "(multiples of %d, drawn once from a fixed seed) taken in turn, a new shape every step; "
               "bf16 autocast, AdamW"
               % (BERT["layers"], BERT["d"], BERT["shapes"], "/".join(str(b) for b in BERT["batches"]),
                  BERT["min_len"], BERT["max_len"], BERT["len_step"]))


def bert_shapes(n, seed=None):
    """The (batch, length) of BERT steps 0..n-1: the same for every allocator. BERT["shapes"] distinct
    shapes, drawn once, taken in turn: every step changes shape (what the allocator is tested on), and
    with as many warmup steps as shapes no timed step is a shape's first, whose one-time costs (kernel
    selection in cuBLAS and SDPA) made a round's median vary by 15-30% when nearly every step was new."""
    rng = random.Random(BERT["seed"] if seed is None else seed)
    lengths = list(range(BERT["min_len"], BERT["max_len"] + 1, BERT["len_step"]))
    cycle = []
    while len(cycle) < BERT["shapes"]:
        shape = (rng.choice(BERT["batches"]), rng.choice(lengths))
        if shape not in cycle:
            cycle.append(shape)
    return [cycle[i % len(cycle)] for i in range(n)]


def build(torch, dev, total_steps):
    """(step(i), notes) of the workload on dev; total_steps (warmup + timed) shapes are drawn."""
    from .transformer import BERT as BERTModel
    F = torch.nn.functional
    c = BERT
    model = BERTModel(c["layers"], c["d"], c["heads"], c["vocab"], c["max_len"], c["dropout"]).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    shapes = bert_shapes(total_steps)

    def step(i):
        b, n = shapes[i]
        ids = torch.randint(0, c["vocab"], (b, n), device=dev)
        masked = torch.rand(b, n, device=dev) < c["mask_prob"]
        inputs = torch.where(masked, torch.full_like(ids, c["mask_id"]), ids)
        labels = torch.where(masked, ids, torch.full_like(ids, -100))  # no host sync, unlike labels[mask] = ...
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    tokens = [b * n for b, n in shapes]
    return step, {"params": sum(p.numel() for p in model.parameters()), "distinct_shapes": len(set(shapes)),
                  "tokens_min": min(tokens), "tokens_max": max(tokens)}
