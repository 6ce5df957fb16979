"""bench/workloads/transformer.py: the models of gpt2, gpt2_generate and bert_varlen in torch.nn:
Block (pre-norm as GPT-2 or post-norm as BERT, SDPA attention, an optional KV cache grown by
torch.cat), GPT (tied output embedding) and BERT (tied masked-LM decoder). Imports torch, so the
workload modules import it inside build(). No state, no locks.
"""
import torch

nn = torch.nn
F = torch.nn.functional


class Block(nn.Module):
    """A transformer block: pre-norm (GPT-2) or post-norm (BERT); SDPA attention, optional KV cache."""

    def __init__(self, d, heads, causal, pre_norm, dropout, gelu_approx):
        super().__init__()
        self.heads, self.causal, self.pre_norm, self.p = heads, causal, pre_norm, dropout
        self.gelu_approx = gelu_approx
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def attn(self, x, cache, use_cache):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        if use_cache:
            if cache is not None:  # the growing KV cache: a new, longer tensor every token
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache = (k, v)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                           is_causal=self.causal and t > 1)
        return self.proj(y.transpose(1, 2).reshape(b, t, c)), cache

    def mlp(self, x):
        return self.fc2(F.gelu(self.fc(x), approximate=self.gelu_approx))

    def forward(self, x, cache=None, use_cache=False):
        if self.pre_norm:
            a, cache = self.attn(self.ln1(x), cache, use_cache)
            x = x + self.drop(a)
            x = x + self.drop(self.mlp(self.ln2(x)))
        else:
            a, cache = self.attn(x, cache, use_cache)
            x = self.ln1(x + self.drop(a))
            x = self.ln2(x + self.drop(self.mlp(x)))
        return x, cache


class GPT(nn.Module):
    def __init__(self, layers, d, heads, vocab, ctx, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, True, True, dropout, "tanh") for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids, caches=None, pos0=0):
        t = ids.shape[1]
        pos = torch.arange(pos0, pos0 + t, device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        new = []
        for i, blk in enumerate(self.blocks):
            x, c = blk(x, None if caches is None else caches[i], use_cache=caches is not None)
            new.append(c)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output embedding, as GPT-2's
        return logits, (new if caches is not None else None)


class BERT(nn.Module):
    def __init__(self, layers, d, heads, vocab, max_len, dropout):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.typ = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, False, False, dropout, "none") for _ in range(layers))
        self.head_fc = nn.Linear(d, d)
        self.head_ln = nn.LayerNorm(d)
        self.head_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids):
        n = ids.shape[1]
        pos = torch.arange(n, device=ids.device)
        x = self.drop(self.ln(self.tok(ids) + self.pos(pos) + self.typ.weight[0]))
        for blk in self.blocks:
            x, _ = blk(x)
        h = self.head_ln(F.gelu(self.head_fc(x)))
        return F.linear(h, self.tok.weight, self.head_bias)  # tied decoder, as BERT's MLM head
