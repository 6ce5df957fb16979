"""bench/workloads/transformer_varlen.py: transformer encoder training with a different batch size and
sequence length each step, the workload of traces/transformer_varlen.trace.gz (a script of its own,
not one of bench/train.py's workloads). A BERT-base-sized torch.nn.TransformerEncoder (12 layers,
d_model 768, 12 heads, FFN 3072, vocab 30522, random weights) with a token-prediction head, bf16
autocast, AdamW. Batch size is drawn from 4..32 and sequence length from 16..512 per step (seeded).
Record with:

    python3 tools/record_trace.py -o traces/transformer_varlen.trace.gz --meta steps=20 \
        -- bench/workloads/transformer_varlen.py --steps 20

Not the same workload as bench/workloads/bert_varlen.py, which stays beside it: this one is PyTorch's
own nn.TransformerEncoder (pre-norm, untied head, no masking) and draws a fresh shape every step from a
wide range, shapes that never repeat, as a job without bucketing does: an allocation stream to replay
(what no plan can settle on). bert_varlen is a timed benchmark, so its 8 shapes repeat in turn and no
timed step is a shape's first.
"""
import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, vocab=30522, d=768, heads=12, ffn=3072, layers=12, max_len=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.tok(ids) + self.pos(pos)[None]
        return self.head(self.norm(self.enc(h)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--min-batch", type=int, default=4)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    dev = torch.device("cuda")
    model = Model(max_len=a.max_len).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    shapes = []
    for _ in range(a.steps):
        b = rng.randint(a.min_batch, a.max_batch)
        n = rng.randint(a.min_len, a.max_len)
        shapes.append((b, n))
        ids = torch.randint(0, 30522, (b, n), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), ids.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    print("transformer_varlen: %d steps, shapes %s, last loss %.4f" % (a.steps, shapes, loss.item()))


if __name__ == "__main__":
    main()
