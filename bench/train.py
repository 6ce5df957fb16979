#!/usr/bin/env python3
"""bench/train.py: real training (and generation) steps with PyTorch's allocators and with vram.

Every (workload, allocator) runs in its own process, so that PYTORCH_CUDA_ALLOC_CONF is read by a
fresh PyTorch and vram is installed before PyTorch's first CUDA allocation. Random weights and
data, nothing downloaded.

  python3 bench/train.py [--workloads gpt2,resnet50,bert_varlen,gpt2_generate]
                         [--allocators torch,torch-expandable,torch-async,vram]
                         [--steps N] [--warmup W] [--repeat K] [--out DIR] [--timeout S] [--cpus LIST]
      the driver (default): runs every child, K rounds interleaved, writes OUT/train.jsonl (a
      {"meta": ...} line first), OUT/table.md and OUT/logs/, prints one Markdown table per workload.
  python3 bench/train.py --worker WORKLOAD ALLOCATOR [--steps N] [--warmup W]
      one child: runs the workload under the allocator in this process, prints one JSON line.
  python3 bench/train.py --prepare [--vram]
      builds (or loads PyTorch's cached build of) vram.torch's allocator library (or its forwarder), prints versions as JSON.
  python3 bench/train.py --table OUT/train.jsonl
      prints the tables again from a results file.
  python3 bench/train.py --self-test
      checks argument parsing, statistics, the driver's order and failure handling, and the tables
      with fake numbers: no PyTorch, no GPU.

Allocators: torch (PYTORCH_CUDA_ALLOC_CONF unset), torch-expandable (expandable_segments:True),
torch-async (backend:cudaMallocAsync), vram (vram.torch.install() before the first CUDA allocation,
memory growth on GPU 0, no limit; libvram.so from VRAM_LIBRARY or the package's own search).

PyTorch is imported only by the worker and prepare modes; the driver, --table and --self-test need
only the standard library.
"""
import argparse
import datetime
import io
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import last_json_object, load_results  # noqa: E402  (bench/table.py)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = float(1 << 30)

ALLOCATORS = ["torch", "torch-expandable", "torch-async", "vram"]
TORCH_ALLOCATORS = ["torch", "torch-expandable", "torch-async"]
ALLOC_CONF = {
    "torch": None,
    "torch-expandable": "expandable_segments:True",
    "torch-async": "backend:cudaMallocAsync",
    "vram": None,
}
LABEL = {
    "torch": "PyTorch caching allocator (default)",
    "torch-expandable": "PyTorch, expandable_segments:True",
    "torch-async": "PyTorch, backend:cudaMallocAsync",
    "vram": "vram (growth, no limit)",
}

# ---- the workloads' sizes --------------------------------------------------------------------------
# Chosen for about 50-350 ms a step on one H200 and a few to tens of GiB (generation is small by nature).
GPT2 = dict(layers=12, d=768, heads=12, vocab=50257, ctx=1024, batch=16, seq=1024, dropout=0.1)
GEN = dict(batch=16, prompt=128, new_tokens=256)
BERT = dict(layers=12, d=768, heads=12, vocab=30522, max_len=512, batches=(16, 32, 48, 64),
            min_len=64, len_step=8, shapes=8, dropout=0.1, mask_prob=0.15, mask_id=103, seed=1234)
RESNET = dict(batch=128, size=224)
# The framework programs: the framework runs the loop, a callback of its own API times each step.
LLAMA = dict(layers=12, d=1024, ffn=2816, heads=16, vocab=32000, batch=8, seq=1024)
LIGHTNING = dict(layers=12, d=1024, heads=16, vocab=32000, batch=16, seq=512)
VIT = dict(model="vit_base_patch16_224", batch=128, size=224)

MODEL_WORKLOADS = ["gpt2", "resnet50", "bert_varlen", "gpt2_generate"]
PROGRAM_WORKLOADS = ["llama_trainer", "lightning_stats", "timm_vit"]
WORKLOADS = MODEL_WORKLOADS + PROGRAM_WORKLOADS
DEFAULT_STEPS = {"gpt2": (5, 25), "resnet50": (5, 30), "bert_varlen": (BERT["shapes"], 40), "gpt2_generate": (2, 8),
                 "llama_trainer": (5, 25), "lightning_stats": (5, 25), "timm_vit": (5, 25)}
DESCRIPTION = {
    "gpt2": "GPT-2 small (124M, %d layers, d=%d) training, batch %d x %d tokens, bf16 autocast, AdamW"
            % (GPT2["layers"], GPT2["d"], GPT2["batch"], GPT2["seq"]),
    "resnet50": "torchvision ResNet-50 training, batch %d at %dx%d, channels_last, bf16 autocast, SGD momentum"
                % (RESNET["batch"], RESNET["size"], RESNET["size"]),
    "bert_varlen": "BERT-base (%d layers, d=%d) masked-LM training, %d shapes of batch %s and length %d..%d "
                   "(multiples of %d, drawn once from a fixed seed) taken in turn, a new shape every step; "
                   "bf16 autocast, AdamW"
                   % (BERT["layers"], BERT["d"], BERT["shapes"], "/".join(str(b) for b in BERT["batches"]),
                      BERT["min_len"], BERT["max_len"], BERT["len_step"]),
    "gpt2_generate": "GPT-2 small greedy generation, bf16, batch %d, %d-token prompt, %d new tokens, KV cache grown "
                     "by torch.cat; one step = one whole generation" % (GEN["batch"], GEN["prompt"], GEN["new_tokens"]),
    "llama_trainer": "Hugging Face Trainer of a LlamaForCausalLM built from its config (%d layers, d=%d), batch %d x %d "
                     "tokens, bf16, AdamW, skip_memory_metrics=False (the Trainer reads and resets PyTorch's memory "
                     "statistics); step timed by a TrainerCallback" % (LLAMA["layers"], LLAMA["d"], LLAMA["batch"],
                                                                     LLAMA["seq"]),
    "lightning_stats": "Lightning Trainer of a LightningModule (nn.TransformerEncoder LM, %d layers, d=%d, batch %d x %d "
                       "tokens), bf16-mixed, AdamW, DeviceStatsMonitor logging torch.cuda.memory_stats() every step "
                       "to a CSVLogger; step timed by a Callback" % (LIGHTNING["layers"], LIGHTNING["d"],
                                                                     LIGHTNING["batch"], LIGHTNING["seq"]),
    "timm_vit": "timm %s training as timm's train script does it: cudnn.benchmark, Mixup/CutMix, "
                "SoftTargetCrossEntropy, create_optimizer_v2 AdamW, bf16 autocast, batch %d" % (VIT["model"], VIT["batch"]),
}


def say(msg):
    print("== " + msg, file=sys.stderr, flush=True)


# ---- statistics (no torch) -------------------------------------------------------------------------

def percentile(xs, q):
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    xs = sorted(xs)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def step_stats(times_ms):
    return {
        "step_ms_median": round(percentile(times_ms, 50), 4),
        "step_ms_mean": round(sum(times_ms) / len(times_ms), 4),
        "step_ms_p10": round(percentile(times_ms, 10), 4),
        "step_ms_p90": round(percentile(times_ms, 90), 4),
        "step_ms_min": round(min(times_ms), 4),
        "step_ms_max": round(max(times_ms), 4),
    }


def time_steps(step, sync, warmup, steps, sample=None, clock=time.perf_counter):
    """Runs warmup + steps calls of step(i); returns the timed steps' wall times in ms.

    Each step is bracketed by sync() (torch.cuda.synchronize) so that its time is the GPU's work
    too; sample() (the device-memory probe) runs after each step, outside the timed region."""
    times = []
    for i in range(warmup + steps):
        sync()
        t0 = clock()
        step(i)
        sync()
        t1 = clock()
        if sample is not None:
            sample()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times


def bert_shapes(n, seed=None):
    """The (batch, length) of BERT steps 0..n-1: the same for every allocator. BERT["shapes"] distinct
    shapes, drawn once, taken in turn: every step changes shape (what the allocator is tested on), and
    with as many warmup steps as shapes no timed step is a shape's first, whose one-time costs (kernel
    selection in cuBLAS and SDPA) made a round's median vary by 15-30% when nearly every step was new."""
    import random
    rng = random.Random(BERT["seed"] if seed is None else seed)
    lengths = list(range(BERT["min_len"], BERT["max_len"] + 1, BERT["len_step"]))
    cycle = []
    while len(cycle) < BERT["shapes"]:
        shape = (rng.choice(BERT["batches"]), rng.choice(lengths))
        if shape not in cycle:
            cycle.append(shape)
    return [cycle[i % len(cycle)] for i in range(n)]


# ---- the models (torch, imported by the worker only) -------------------------------------------

def _models(torch):
    """The model classes, defined once torch is imported."""
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

    return GPT, BERT


# ---- the workloads: each returns (step(i), notes) ------------------------------------------------

def build_gpt2(torch, dev):
    F = torch.nn.functional
    GPT, _ = _models(torch)
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


def build_gpt2_generate(torch, dev):
    GPT, _ = _models(torch)
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


def build_bert_varlen(torch, dev, total_steps):
    F = torch.nn.functional
    _, BERTModel = _models(torch)
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


class Skipped(Exception):
    """The workload cannot run here (a missing optional module); not a failure of the allocator."""


def build_resnet50(torch, dev):
    F = torch.nn.functional
    try:
        import torchvision
    except ImportError as e:
        raise Skipped("torchvision is not installed (%s)" % e)
    model = torchvision.models.resnet50(weights=None).to(dev, memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    r = RESNET

    def step(i):
        x = torch.randn(r["batch"], 3, r["size"], r["size"], device=dev).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (r["batch"],), device=dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, {"params": sum(p.numel() for p in model.parameters()), "torchvision": torchvision.__version__}


# ---- the framework programs: the framework owns the loop ------------------------------------------

class Driven:
    """A workload whose loop a framework runs: run(sync, warmup, steps, sample) trains warmup + steps
    steps and returns the timed steps' wall times in ms, measured by the framework's own callback API
    (synchronize at the step's start and end, sample() after it, as time_steps does)."""

    def __init__(self, run):
        self.run = run


class _StepClock:
    """The step timer the programs' callbacks call: begin() and end() around each step."""

    def __init__(self, sync, warmup, sample, clock=time.perf_counter):
        self.sync, self.warmup, self.sample, self.clock = sync, warmup, sample, clock
        self.n, self.t0, self.times = 0, None, []

    def begin(self):
        self.sync()
        self.t0 = self.clock()

    def end(self):
        if self.t0 is None:
            return
        self.sync()
        t1 = self.clock()
        if self.sample is not None:
            self.sample()
        if self.n >= self.warmup:
            self.times.append((t1 - self.t0) * 1e3)
        self.n += 1
        self.t0 = None


def _need(module, what):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Skipped("%s is not installed (%s)" % (what, e))


def build_llama_trainer(torch, dev):
    transformers = _need("transformers", "transformers")
    _need("accelerate", "accelerate (the Trainer needs it)")
    from transformers import (LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback,  # noqa: PLC0415
                              TrainingArguments)
    c = LLAMA
    cfg = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["d"], intermediate_size=c["ffn"],
                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["heads"],
                      max_position_embeddings=c["seq"])
    model = LlamaForCausalLM(cfg)

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, c["vocab"], (c["seq"],), generator=g)
            return {"input_ids": ids, "labels": ids}

    def run(sync, warmup, steps, sample):
        clock = _StepClock(sync, warmup, sample)

        class Timer(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                clock.begin()

            def on_step_end(self, args, state, control, **kw):
                clock.end()

        out = tempfile.mkdtemp(prefix="vram-llama-")
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=c["batch"], max_steps=warmup + steps,
                                 learning_rate=3e-4, weight_decay=0.1, bf16=True, logging_steps=10, report_to=[],
                                 save_strategy="no", dataloader_num_workers=0, skip_memory_metrics=False,
                                 disable_tqdm=True, seed=0)
        trainer = Trainer(model=model, args=args, train_dataset=Tokens(c["batch"] * (warmup + steps)),
                          callbacks=[Timer()])
        result = trainer.train()
        metrics = getattr(result, "metrics", {}) or {}
        info["trainer_memory_metrics"] = {k: v for k, v in metrics.items() if "mem" in k}
        return clock.times

    info = {"params": sum(p.numel() for p in model.parameters()), "transformers": transformers.__version__}
    return Driven(run), info


def build_lightning_stats(torch, dev):
    try:
        L = _need("lightning", "lightning")
        from lightning.pytorch.callbacks import Callback, DeviceStatsMonitor  # noqa: PLC0415
        from lightning.pytorch.loggers import CSVLogger  # noqa: PLC0415
    except Skipped:
        L = _need("pytorch_lightning", "lightning or pytorch_lightning")
        from pytorch_lightning.callbacks import Callback, DeviceStatsMonitor  # noqa: PLC0415
        from pytorch_lightning.loggers import CSVLogger  # noqa: PLC0415
    F = torch.nn.functional
    c = LIGHTNING

    class LM(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(c["vocab"], c["d"])
            layer = torch.nn.TransformerEncoderLayer(c["d"], c["heads"], 4 * c["d"], dropout=0.1, batch_first=True,
                                                     norm_first=True, activation="gelu")
            self.body = torch.nn.TransformerEncoder(layer, c["layers"], enable_nested_tensor=False)
            self.head = torch.nn.Linear(c["d"], c["vocab"])
            mask = torch.nn.Transformer.generate_square_subsequent_mask(c["seq"])
            self.register_buffer("mask", mask, persistent=False)

        def training_step(self, batch, i):
            ids = batch[0]
            x, y = ids[:, :-1], ids[:, 1:]
            h = self.body(self.emb(x), mask=self.mask[: x.shape[1], : x.shape[1]], is_causal=True)
            loss = F.cross_entropy(self.head(h).reshape(-1, c["vocab"]), y.reshape(-1))
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-4, weight_decay=0.1)

    model = LM()

    def run(sync, warmup, steps, sample):
        clock = _StepClock(sync, warmup, sample)

        class Timer(Callback):
            def on_train_batch_start(self, trainer, module, batch, i):
                clock.begin()

            def on_train_batch_end(self, trainer, module, outputs, batch, i):
                clock.end()

        n = warmup + steps
        g = torch.Generator().manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randint(0, c["vocab"], (c["batch"] * n, c["seq"] + 1), generator=g))
        loader = torch.utils.data.DataLoader(data, batch_size=c["batch"], shuffle=False, num_workers=0)
        out = tempfile.mkdtemp(prefix="vram-lightning-")
        trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=n, precision="bf16-mixed",
                            logger=CSVLogger(out), callbacks=[DeviceStatsMonitor(), Timer()],
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            log_every_n_steps=1, default_root_dir=out)
        trainer.fit(model, loader)
        import csv  # noqa: PLC0415
        path = os.path.join(trainer.logger.log_dir, "metrics.csv")
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        cols = sorted(k for k in (rows[0] if rows else {}) if k.endswith("allocated_bytes.all.peak"))
        if not cols:
            raise RuntimeError("DeviceStatsMonitor logged no allocated_bytes.all.peak to %s" % path)
        peaks = [float(r[k]) for r in rows for k in cols if r.get(k)]
        info["device_stats_monitor"] = {"columns": cols, "rows": len(rows), "allocated_peak_max": max(peaks)}
        return clock.times

    info = {"params": sum(p.numel() for p in model.parameters()), "lightning": L.__version__}
    return Driven(run), info


def build_timm_vit(torch, dev):
    timm = _need("timm", "timm")
    from timm.data import Mixup  # noqa: PLC0415
    from timm.loss import SoftTargetCrossEntropy  # noqa: PLC0415
    from timm.optim import create_optimizer_v2  # noqa: PLC0415
    torch.backends.cudnn.benchmark = True
    c = VIT
    model = timm.create_model(c["model"], pretrained=False, num_classes=1000).to(dev).train()
    opt = create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)
    mix = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=1000)
    loss_fn = SoftTargetCrossEntropy()

    def step(i):
        x = torch.randn(c["batch"], 3, c["size"], c["size"], device=dev)
        y = torch.randint(0, 1000, (c["batch"],), device=dev)
        x, y = mix(x, y)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, {"params": sum(p.numel() for p in model.parameters()), "timm": timm.__version__}


def build_workload(name, torch, dev, total_steps):
    if name == "gpt2":
        return build_gpt2(torch, dev)
    if name == "resnet50":
        return build_resnet50(torch, dev)
    if name == "bert_varlen":
        return build_bert_varlen(torch, dev, total_steps)
    if name == "gpt2_generate":
        return build_gpt2_generate(torch, dev)
    if name == "llama_trainer":
        return build_llama_trainer(torch, dev)
    if name == "lightning_stats":
        return build_lightning_stats(torch, dev)
    if name == "timm_vit":
        return build_timm_vit(torch, dev)
    raise ValueError("unknown workload %r" % name)


# ---- the worker ------------------------------------------------------------------------------------

def _import_vram():
    sys.path.insert(0, os.path.join(REPO, "python"))
    import vram  # noqa: PLC0415
    return vram


def _setup_vram():
    """vram as PyTorch's allocator, growth on GPU 0, no limit. Before PyTorch's CUDA start."""
    vram = _import_vram()
    gpus = vram.config.list_physical_devices("GPU")
    if not gpus:
        raise RuntimeError("vram sees no GPU: " + vram.diagnose())
    vram.config.experimental.set_memory_growth(gpus[0], True)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = vram.torch.install()
    notes = {"vram_version": vram.version(), "vram_library": vram._lib.path, "vram_allocator_library": path,
             "vram_torch_mode": vram.torch.mode}
    if caught:
        notes["vram_warning"] = str(caught[-1].message)[:300]
    if os.environ.get("VRAM_ALLOC_CONF"):
        notes["vram_alloc_conf"] = os.environ["VRAM_ALLOC_CONF"]
    return vram, notes


def _torch_stats(torch):
    try:
        s = torch.cuda.memory_stats(0)
    except Exception:  # noqa: BLE001 - a pluggable allocator may not report statistics
        return {}
    keys = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms")
    return {k: s[k] for k in keys if k in s}


def _segments(torch):
    """(segments, expandable segments) from the native allocator's snapshot: checks the setting took."""
    try:
        snap = torch.cuda.memory_snapshot()
    except Exception:  # noqa: BLE001 - cudaMallocAsync and pluggable allocators have no snapshot
        return None
    return len(snap), sum(1 for s in snap if s.get("is_expandable"))


def run_worker(workload, allocator, steps, warmup, device_type="cuda"):
    """One (workload, allocator) in this process; returns the result dict (with "error" or "skipped").

    device_type is "cuda" but for tests of the models on a machine without a GPU."""
    res = {"workload": workload, "allocator": allocator, "steps": steps, "warmup": warmup,
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    try:
        import torch
    except ImportError as e:
        res["error"] = "PyTorch is not installed for %s: %s" % (sys.executable, e)
        return res
    res["torch"] = torch.__version__
    res["cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        res["error"] = "CUDA is not available to PyTorch"
        return res
    vram = None
    if allocator == "vram":
        vram, notes = _setup_vram()  # before anything starts PyTorch's CUDA allocator
        res.update(notes)
    torch.cuda.init()
    torch.cuda.set_device(0)
    torch.cuda.synchronize()  # the context exists now
    res["gpu"] = torch.cuda.get_device_name(0)
    try:
        res["allocator_backend"] = torch.cuda.get_allocator_backend()
    except Exception:  # noqa: BLE001 - older PyTorch
        pass
    if allocator == "torch-async" and res.get("allocator_backend") not in (None, "cudaMallocAsync"):
        res["error"] = "PYTORCH_CUDA_ALLOC_CONF=%s did not take effect: the backend is %s" % (
            res["alloc_conf"], res["allocator_backend"])
        return res
    free0, total = torch.cuda.mem_get_info(0)
    baseline = total - free0
    res["device_total_bytes"] = total
    res["device_used_baseline_bytes"] = baseline
    used = [baseline]

    def sample():
        free, _ = torch.cuda.mem_get_info(0)
        used.append(total - free)

    torch.manual_seed(0)
    torch.cuda.manual_seed(0)
    dev = torch.device(device_type, 0)
    try:
        step, info = build_workload(workload, torch, dev, warmup + steps)
    except Skipped as e:
        res["skipped"] = str(e)
        return res
    res.update(info)
    torch.cuda.synchronize()
    sample()
    if isinstance(step, Driven):
        times = step.run(torch.cuda.synchronize, warmup, steps, sample)
        res.update(info)  # what the run added (the framework's own memory figures)
        if len(times) != steps:
            res["error"] = "the framework ran %d timed steps, not %d" % (len(times), steps)
            return res
    else:
        times = time_steps(step, torch.cuda.synchronize, warmup, steps, sample)
    res.update(step_stats(times))
    res["step_ms"] = [round(t, 3) for t in times]
    device_used_peak = max(used) - baseline
    res["device_used_peak_bytes"] = device_used_peak
    if allocator == "vram":
        info = vram.torch.memory_info(0)
        res["peak_reserved_bytes"] = info["peak_reserved"]
        res["peak_reserved_source"] = "vram_get_memory_info peak_reserved"
        res["peak_allocated_bytes"] = info["peak"]
        res["allocator_stats"] = {k: info[k] for k in ("num_allocs", "num_driver_allocs", "num_driver_frees",
                                                        "num_ooms", "reserved", "limit")}
        if not info["num_allocs"]:
            res["error"] = "vram served no allocation: vram.torch.install() did not take effect"
    else:
        reserved = torch.cuda.max_memory_reserved(0)
        res["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(0)
        res["allocator_stats"] = _torch_stats(torch)
        if allocator == "torch-async":
            if reserved:
                res["peak_reserved_source"] = "cudaMemPoolAttrReservedMemHigh (torch.cuda.max_memory_reserved)"
            else:
                reserved = device_used_peak
                res["peak_reserved_source"] = "device_used_peak (the pool reported 0)"
        else:
            res["peak_reserved_source"] = "torch.cuda.max_memory_reserved"
            seg = _segments(torch)
            if seg is not None:
                res["segments"], res["expandable_segments"] = seg
                if allocator == "torch-expandable" and seg[0] and not seg[1]:
                    res["warning"] = "no expandable segment: expandable_segments:True did not take effect"
        res["peak_reserved_bytes"] = reserved
    return res


def worker_main(workload, allocator, steps, warmup):
    try:
        res = run_worker(workload, allocator, steps, warmup)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a row with its reason
        import traceback
        traceback.print_exc()
        res = {"workload": workload, "allocator": allocator,
               "error": ("%s: %s" % (type(e).__name__, e)).strip()[:600]}
    print(json.dumps(res), flush=True)
    return 1 if "error" in res else 0


def prepare_main(with_vram):
    """Versions for the meta line; with_vram: builds vram.torch's allocator library (or its forwarder) once, before the timed children."""
    out = {}
    try:
        import torch
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
    except ImportError as e:
        out["error"] = "PyTorch is not installed for %s: %s" % (sys.executable, e)
        print(json.dumps(out), flush=True)
        return 1
    try:
        import torchvision
        out["torchvision"] = torchvision.__version__
    except ImportError:
        out["torchvision"] = None
    if with_vram:
        t0 = time.time()
        try:
            vram = _import_vram()
            out["vram_version"] = vram.version()
            out["vram_library"] = vram._lib.path
            import warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                path = vram.torch.install()  # compiles once; PyTorch caches the build
            out["vram_allocator_library"] = path
            out["vram_torch_mode"] = vram.torch.mode
            if caught:
                out["vram_warning"] = str(caught[-1].message)[:300]
        except Exception as e:  # noqa: BLE001
            out["vram_error"] = ("%s: %s" % (type(e).__name__, e))[:600]
        out["vram_prepare_s"] = round(time.time() - t0, 1)
    print(json.dumps(out), flush=True)
    return 0


# ---- the driver ------------------------------------------------------------------------------------


def last_line(text, limit=400):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:limit] if lines else ""


def child_env(allocator, base=None, vram_alloc_conf=None):
    env = dict(os.environ if base is None else base)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    conf = ALLOC_CONF[allocator]
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    if allocator == "vram" and vram_alloc_conf:
        env["VRAM_ALLOC_CONF"] = vram_alloc_conf
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(argv, env, timeout, log_base):
    """Runs one child in its own session, stdout/stderr to log_base.out/.err; kills its process group on
    timeout. Returns (rc, stdout, stderr, seconds); rc is None after a timeout."""
    t0 = time.time()
    with open(log_base + ".out", "w") as out, open(log_base + ".err", "w") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=REPO, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the child and what it started (the compiler in --prepare)
            except ProcessLookupError:
                pass
            p.wait()
            if isinstance(e, KeyboardInterrupt):  # the child has its own session: Ctrl-C reaches only us
                raise
            rc = None
    with open(log_base + ".out", errors="replace") as f:
        stdout = f.read()
    with open(log_base + ".err", errors="replace") as f:
        stderr = f.read()
    return rc, stdout, stderr, time.time() - t0


def row_from_child(workload, allocator, rnd, rc, stdout, stderr, seconds, timeout):
    obj = last_json_object(stdout)
    if rc is None:
        row = {"error": "timed out after %d s (--timeout)" % timeout}
    elif obj is None:
        row = {"error": "exit status %d, no result%s" % (rc, (": " + last_line(stderr)) if last_line(stderr) else "")}
    else:
        row = obj
        if rc != 0 and "error" not in row and "skipped" not in row:
            if row.get("step_ms_median") is not None:  # measured, then failed on the way out: keep the numbers
                row["warning"] = "exit status %d after its result: %s" % (rc, last_line(stderr))
            else:
                row["error"] = "exit status %d: %s" % (rc, last_line(stderr))
    row["workload"], row["allocator"], row["round"] = workload, allocator, rnd
    row["rc"] = rc
    row["wall_s"] = round(seconds, 1)
    return row


def plan(workloads, allocators, repeat):
    """The children in run order: per workload, round 1 of every allocator, then round 2 (in reverse
    order, so that drift and order effects fall on every allocator alike), ..."""
    order = []
    for w in workloads:
        for r in range(1, repeat + 1):
            seq = allocators if r % 2 == 1 else list(reversed(allocators))
            order.extend((w, a, r) for a in seq)
    return order


def nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader", "-i", "0"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    parts = [p.strip() for p in out.stdout.strip().split(",")]
    if out.returncode != 0 or len(parts) != 3:
        return {}
    return {"gpu": parts[0], "driver": parts[1], "memory": parts[2]}


def git_commit():
    """The commit of this tree (VRAM_COMMIT when it is a copy of the sources, not a checkout of its own)."""
    if os.environ.get("VRAM_COMMIT"):
        return os.environ["VRAM_COMMIT"]
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, cwd=REPO,
                             timeout=30).stdout.strip()
        if not top or os.path.realpath(top) != os.path.realpath(REPO):
            return "unknown"
        c = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO,
                           timeout=30).stdout.strip()
        if not c:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=REPO, timeout=30).stdout.strip()
        return c + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def steps_for(workload, args):
    warmup, steps = DEFAULT_STEPS[workload]
    return (args.warmup if args.warmup is not None else warmup), (args.steps if args.steps is not None else steps)


def run_driver(args, runner=run_child, machine=None, out_stream=None):
    """Runs every child (runner(argv, env, timeout, log_base) -> (rc, stdout, stderr, seconds)), writes
    OUT/train.jsonl and OUT/table.md, prints the tables. Returns 0; 1 when no child gave a result; 2 when
    the children's interpreter has no PyTorch (nothing is run)."""
    out_stream = out_stream or sys.stdout
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    results = os.path.join(args.out, "train.jsonl")
    py = args.python or sys.executable
    me = os.path.abspath(__file__)

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": os.environ.get("VRAM_TRAIN_COMMAND") or "python3 bench/train.py " + " ".join(args.argv),
            "commit": git_commit(),
            "repeat": args.repeat, "workloads": args.workloads, "allocators": args.allocators,
            "steps": {w: dict(zip(("warmup", "steps"), steps_for(w, args))) for w in args.workloads},
            "timeout_s": args.timeout, "vram_alloc_conf": args.vram_alloc_conf, "cpus": args.cpus,
            "vram_library_env": os.environ.get("VRAM_LIBRARY"),
            "step_time": "per process: median over the timed steps (torch.cuda.synchronize before and after each); "
                         "per row: the lowest of the rounds' medians; the verdict: pooled over the rounds, per "
                         "shape the median of all its steps, averaged over the shapes"}
    meta.update(nvidia_smi() if machine is None else machine)
    if os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
        meta["ignored_env"] = "PYTORCH_CUDA_ALLOC_CONF=%s (each child gets its allocator's own)" % (
            os.environ["PYTORCH_CUDA_ALLOC_CONF"])

    # One untimed child first: versions, and vram.torch's allocator library compiled (about a minute the first
    # time; PyTorch caches it) so that no timed child pays for the compiler.
    with_vram = "vram" in args.allocators
    say("preparing: versions%s" % (", building vram.torch's allocator library (cached after the first time)"
                                   if with_vram else ""))
    argv = [py, me, "--prepare"] + (["--vram"] if with_vram else [])
    rc, stdout, stderr, secs = runner(argv, child_env("vram" if with_vram else "torch",
                                                      vram_alloc_conf=args.vram_alloc_conf),
                                      args.timeout, os.path.join(args.out, "logs", "prepare"))
    prep = last_json_object(stdout) or {"error": "prepare: exit status %s: %s" % (rc, last_line(stderr))}
    meta.update({k: v for k, v in prep.items() if k not in ("error",)})
    meta["prepare_s"] = round(secs, 1)
    if "error" in prep:  # no PyTorch for the children's interpreter: every child would fail the same way
        meta["prepare_error"] = prep["error"]
        say("stopping: %s" % prep["error"])
        with open(results, "w") as f:
            f.write(json.dumps({"meta": meta}) + "\n")
        return 2
    if prep.get("vram_error"):
        say("vram could not be prepared: %s" % prep["vram_error"])
    elif prep.get("vram_warning"):
        say("vram: %s" % prep["vram_warning"])

    rows = []
    with open(results, "w") as f:
        f.write(json.dumps({"meta": meta}) + "\n")
    order = plan(args.workloads, args.allocators, args.repeat)
    skipped = {}
    t_start = time.time()
    for k, (w, a, r) in enumerate(order, 1):
        tag = "[%d/%d] %s %s round %d/%d" % (k, len(order), w, a, r, args.repeat)
        if w in skipped:
            row = {"workload": w, "allocator": a, "round": r, "skipped": skipped[w]}
        else:
            warmup, steps = steps_for(w, args)
            argv = (["taskset", "-c", args.cpus] if args.cpus else []) + [
                py, me, "--worker", w, a, "--steps", str(steps), "--warmup", str(warmup)]
            log = os.path.join(args.out, "logs", "%s.%s.r%d" % (w, a, r))
            rc, stdout, stderr, secs = runner(argv, child_env(a, vram_alloc_conf=args.vram_alloc_conf),
                                              args.timeout, log)
            row = row_from_child(w, a, r, rc, stdout, stderr, secs, args.timeout)
            if "skipped" in row:
                skipped[w] = row["skipped"]
        rows.append(row)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        if "skipped" in row:
            say("%s: skipped: %s" % (tag, row["skipped"]))
        elif "error" in row:
            say("%s: FAILED in %.0f s: %s" % (tag, row.get("wall_s", 0), one_line(row["error"])))
        else:
            say("%s: %.2f ms median, %.3f GiB peak reserved, %.3f GiB device used (%.0f s; %.0f s so far)" % (
                tag, row["step_ms_median"], row["peak_reserved_bytes"] / GIB, row["device_used_peak_bytes"] / GIB,
                row.get("wall_s", 0), time.time() - t_start))

    table = render(meta, rows)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    say("results: %s; table: %s" % (results, os.path.join(args.out, "table.md")))
    out_stream.write("\n" + table)
    out_stream.flush()
    return 0 if any("error" not in r and "skipped" not in r for r in rows) else 1


# ---- aggregation and the tables (no torch) -----------------------------------------------------

def aggregate(rows):
    """Per (workload, allocator): the rounds' results folded. Step times: the lowest of the rounds'
    medians (and means); memory: the highest of the rounds' peaks."""
    groups = {}
    for r in rows:
        groups.setdefault((r.get("workload"), r.get("allocator")), []).append(r)
    agg = {}
    for key, rs in groups.items():
        ok = [r for r in rs if "error" not in r and "skipped" not in r and r.get("step_ms_median") is not None]
        g = {"rounds": len(rs), "ok": len(ok),
             "errors": [r["error"] for r in rs if "error" in r],
             "skipped": next((r["skipped"] for r in rs if "skipped" in r), None)}
        if ok:
            medians = [r["step_ms_median"] for r in ok]
            g.update(median=min(medians), median_lo=min(medians), median_hi=max(medians),
                     mean=min(r.get("step_ms_mean", r["step_ms_median"]) for r in ok),
                     reserved=max(r.get("peak_reserved_bytes") or 0 for r in ok),
                     device_used=max(r.get("device_used_peak_bytes") or 0 for r in ok),
                     reserved_fallback=any(str(r.get("peak_reserved_source", "")).startswith("device_used")
                                           for r in ok),
                     warnings=sorted({r["warning"] for r in ok if r.get("warning")}))
        agg[key] = g
    return agg


def one_line(text):
    return " ".join(str(text).split())


def gib(b):
    return "%.3f" % (b / GIB)


def pct(x):
    return "%+.2f%%" % x


def _ordered(names, order):
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


def step_times(w, agg, allocs, pool):
    """({allocator: step ms} of the rows that finished, what they are): the pooled figures when every
    such row has its step list (pooled_by_shape), else the lowest of the rounds' medians."""
    ok = [a for a in allocs if agg[(w, a)]["ok"]]
    if pool and all(a in pool for a in ok):
        return {a: pool[a] for a in ok}, "pooled"
    return {a: agg[(w, a)]["median"] for a in ok}, "lowest median"


def verdict(w, agg, allocs, pool=None):
    """The verdict line of one workload (None without a vram row)."""
    if "vram" not in allocs:
        return None
    v = agg[(w, "vram")]
    if not v["ok"]:
        return "**verdict**: vram failed (%s)" % (one_line(v["errors"][0]) if v["errors"] else "no result")
    ms, how = step_times(w, agg, allocs, pool)
    torch_ok = [(t, a) for a, t in ms.items() if a in TORCH_ALLOCATORS]
    others = [(agg[(w, a)]["reserved"], a) for a in allocs if a != "vram" and agg[(w, a)]["ok"]]
    if not torch_ok:
        return "**verdict**: no PyTorch allocator finished: nothing to compare vram with"
    fastest_ms, fastest = min(torch_ok)
    d = (ms["vram"] / fastest_ms - 1.0) * 100.0
    if d > 0:
        time_part = "vram step time (%s) %.2f%% slower than the fastest PyTorch allocator (%s, %.2f ms; target " \
                    "within 1%%: %s)" % (how, d, fastest, fastest_ms, "met" if d <= 1.0 else "missed")
    else:
        time_part = "vram step time (%s) %.2f%% faster than the fastest PyTorch allocator (%s, %.2f ms; target " \
                    "within 1%%: met)" % (how, -d, fastest, fastest_ms)
    min_res, min_a = min(others)
    dev_min = min(agg[(w, a)]["device_used"] for _, a in others)
    mem_part = "reserved %s GiB vs min of others %s GiB (%s; target less: %s); device used %s vs %s GiB" % (
        gib(v["reserved"]), gib(min_res), min_a, "met" if v["reserved"] < min_res else "missed",
        gib(v["device_used"]), gib(dev_min))
    return "**verdict**: " + time_part + ", " + mem_part


def paired_by_round(w, rows):
    """vram's median step over the fastest PyTorch allocator's of the same round, per round where both
    ran (the rounds run close in time: the host's slow stretches, which move a round by up to 40% on
    gpt2_generate, hit both), as percentages, or [] when no round has both."""
    by_round = {}
    for r in rows:
        if (r.get("workload") == w and "error" not in r and "skipped" not in r
                and r.get("step_ms_median") is not None):
            by_round.setdefault(r.get("round", 1), {})[r.get("allocator")] = r["step_ms_median"]
    out = []
    for _, m in sorted(by_round.items(), key=lambda kv: kv[0]):
        torch_ms = [v for a, v in m.items() if a in TORCH_ALLOCATORS]
        if "vram" in m and torch_ms:
            out.append((m["vram"] / min(torch_ms) - 1.0) * 100.0)
    return out


def shape_medians(w, rows):
    """Per allocator: its steps pooled over every round, the median of each shape's steps (step i has
    shape i mod distinct_shapes; one shape unless the row says), in shape order. {} without step lists."""
    per = {}
    for r in rows:
        if r.get("workload") != w or "error" in r or "skipped" in r or not r.get("step_ms"):
            continue
        n = max(1, int(r.get("distinct_shapes") or 1))
        for i, t in enumerate(r["step_ms"]):
            per.setdefault(r.get("allocator"), {}).setdefault(i % n, []).append(t)
    return {a: [statistics.median(shapes[k]) for k in sorted(shapes)] for a, shapes in per.items()}


def pooled_by_shape(w, rows):
    """Per allocator: shape_medians averaged over the shapes: the time of one step of each shape,
    robust to a round's slow stretch and to which shape a process's own median lands on
    (bert_varlen's 40 steps are 8 shapes of 23 to 73 ms)."""
    return {a: sum(m) / len(m) for a, m in shape_medians(w, rows).items()}


def targets_met(w, agg, allocs, pool=None):
    """(step time met, memory met) for a workload with vram and at least one PyTorch row, else None."""
    if "vram" not in allocs or not agg[(w, "vram")]["ok"]:
        return None
    v = agg[(w, "vram")]
    ms, _ = step_times(w, agg, allocs, pool)
    torch_ok = [t for a, t in ms.items() if a in TORCH_ALLOCATORS]
    others = [agg[(w, a)]["reserved"] for a in allocs if a != "vram" and agg[(w, a)]["ok"]]
    if not torch_ok:
        return None
    return ms["vram"] <= min(torch_ok) * 1.01, v["reserved"] < min(others)


def render(meta, rows):
    agg = aggregate(rows)
    out = []
    if meta and not meta.get("gpu"):  # no nvidia-smi: the children's torch.cuda.get_device_name()
        meta = dict(meta, gpu=next((r["gpu"] for r in rows if r.get("gpu")), "?"))
    if meta:
        mem = (", " + meta["memory"]) if meta.get("memory") else ""
        head = "%s, one %s (driver %s%s), PyTorch %s (CUDA %s)" % (
            meta.get("date", "?"), meta.get("gpu", "?"), meta.get("driver", "?"), mem, meta.get("torch", "?"),
            meta.get("cuda", "?"))
        if meta.get("vram_version"):
            head += ", vram %s%s" % (meta["vram_version"], (" at " + meta["commit"]) if meta.get("commit") else "")
        rounds = meta.get("repeat", "?")
        head += "; every row %s process%s (rounds interleaved)" % (rounds, "" if rounds == 1 else "es")
        out += [head + ".", ""]
        if meta.get("command"):
            out += ["Reproduce with `%s`." % meta["command"], ""]
        mode = meta.get("vram_torch_mode") or ({False: "direct"}.get(meta.get("vram_forwarder")))  # (older files)
        if mode in ("forwarder", "direct"):
            out += ["vram.torch's allocator library did not build (%s): PyTorch called vram through "
                    "CUDAPluggableAllocator (vram.torch.mode %s)." % (meta.get("vram_warning", "?"), mode), ""]
    workloads = _ordered({r.get("workload") for r in rows}, WORKLOADS)
    met = []
    for w in workloads:
        allocs = _ordered({a for (ww, a) in agg if ww == w}, ALLOCATORS)
        out.append("### %s: %s" % (w, DESCRIPTION.get(w, "")))
        out.append("")
        if all(agg[(w, a)]["skipped"] and not agg[(w, a)]["ok"] for a in allocs):
            out += ["skipped: %s" % agg[(w, allocs[0])]["skipped"], ""]
            continue
        steps = (meta or {}).get("steps", {}).get(w)
        if steps:
            out += ["%s warmup + %s timed steps a process." % (steps["warmup"], steps["steps"]), ""]
        torch_ok = [(agg[(w, a)]["median"], a) for a in allocs if a in TORCH_ALLOCATORS and agg[(w, a)]["ok"]]
        all_ok = [(agg[(w, a)]["median"], a) for a in allocs if agg[(w, a)]["ok"]]
        ref = min(torch_ok) if torch_ok else (min(all_ok) if all_ok else None)
        out += ["| allocator | step ms (median) | vs fastest | step ms (mean) | peak reserved GiB | device used GiB |",
                "|---|---|---|---|---|---|"]
        notes = []
        for a in allocs:
            g = agg[(w, a)]
            label = LABEL.get(a, a)
            if not g["ok"]:
                why = g["errors"][0] if g["errors"] else ("skipped: %s" % g["skipped"] if g["skipped"] else "no result")
                out.append("| %s | failed: %s | | | | |" % (label, one_line(why).replace("|", "/")))
                continue
            cell = "%.2f" % g["median"]
            if g["ok"] > 1 and g["median_hi"] > g["median_lo"]:
                cell += " (%.2f–%.2f)" % (g["median_lo"], g["median_hi"])
            if ref is not None and a == ref[1]:
                vs = "**fastest PyTorch**" if a in TORCH_ALLOCATORS else "fastest"
            else:
                vs = pct((g["median"] / ref[0] - 1.0) * 100.0)
            reserved = gib(g["reserved"]) + ("*" if g["reserved_fallback"] else "")
            out.append("| %s | %s | %s | %.2f | %s | %s |" % (label, cell, vs, g["mean"], reserved,
                                                             gib(g["device_used"])))
            if g["ok"] < g["rounds"]:
                notes.append("%s: %d of %d rounds failed: %s" % (a, g["rounds"] - g["ok"], g["rounds"],
                                                                 one_line(g["errors"][0]) if g["errors"] else "?"))
            for warning in g["warnings"]:
                notes.append("%s: %s" % (a, warning))
            if g["reserved_fallback"]:
                notes.append("%s: * the pool reported no reserved memory; device used is shown instead" % a)
        out.append("")
        pool = pooled_by_shape(w, rows)
        v = verdict(w, agg, allocs, pool)
        if v:
            out += [v, ""]
        pairs = paired_by_round(w, rows)
        if len(pairs) > 1:
            out += ["paired by round (vram against the fastest PyTorch allocator of the same round): median %s "
                    "(rounds: %s)" % (pct(statistics.median(pairs)), ", ".join(pct(x) for x in pairs)), ""]
        torch_pool = [(ms, a) for a, ms in pool.items() if a in TORCH_ALLOCATORS]
        if pool:
            line = "pooled over the rounds (per shape the median of all its steps, averaged over the shapes): " + \
                   ", ".join("%s %.2f ms" % (a, pool[a]) for a in _ordered(pool, ALLOCATORS))
            if "vram" in pool and torch_pool:
                ms, a = min(torch_pool)
                line += "; vram against the fastest PyTorch allocator (%s): %s" % (
                    a, pct((pool["vram"] / ms - 1.0) * 100.0))
            out += [line, ""]
        shapes = shape_medians(w, rows)
        if any(len(m) > 1 for m in shapes.values()):
            out += ["per shape (pooled medians, ms, in the order the steps take them): " + "; ".join(
                "%s %s" % (a, " / ".join("%.2f" % x for x in shapes[a])) for a in _ordered(shapes, ALLOCATORS)), ""]
        out += ["- " + n for n in notes]
        if notes:
            out.append("")
        t = targets_met(w, agg, allocs, pool)
        if t is not None:
            met.append((w, t))
    if met:
        out.append("vram met the step-time target (within 1%% of the fastest PyTorch allocator) on %d of %d "
                   "workloads and the memory target (less peak reserved than every other allocator) on %d of %d." % (
                       sum(1 for _, t in met if t[0]), len(met), sum(1 for _, t in met if t[1]), len(met)))
        out.append("")
    out.append("The verdict's step time is the pooled figure (when every row has its steps), else the lowest median. "
               "step ms (median): per process the median of the timed steps (torch.cuda.synchronize() before and "
               "after each step, time.perf_counter()); the row shows the lowest of its rounds' medians, with the "
               "range over the rounds in parentheses. vs fastest: against the fastest PyTorch allocator's row. "
               "step ms (mean): the lowest of the rounds' means (for bert_varlen, whose steps differ in shape, the "
               "mean is the time of the same sequence of shapes). peak reserved: the highest over the rounds of what "
               "the allocator held from the driver at its peak (PyTorch: torch.cuda.max_memory_reserved(); "
               "cudaMallocAsync: the pool's cudaMemPoolAttrReservedMemHigh, which torch reports as reserved; vram: "
               "vram_get_memory_info's peak_reserved). device used: cuMemGetInfo's total - free sampled after every "
               "step, minus the value right after CUDA started and before the model was built (the same for every "
               "allocator; includes the CUDA libraries' own memory, e.g. lazily loaded kernels and cuBLAS/cuDNN "
               "state, and misses peaks inside a step).")
    out.append("")
    return "\n".join(out)


# ---- the command line ------------------------------------------------------------------------------

def _names(text, known, what):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError("unknown %s %s (choose from %s)" % (what, ", ".join(bad) or "(none)",
                                                                           ", ".join(known)))
    return list(dict.fromkeys(names))


def _positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1: %s" % text)
    return v


def _non_negative(text):
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError("must not be negative: %s" % text)
    return v


def _cpu_list(text):
    import re
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", text):
        raise argparse.ArgumentTypeError("a CPU list as taskset -c takes it, e.g. 2-5 or 2,4,6: %s" % text)
    return text


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="train.py",
        description="Training step time and peak memory of real workloads with PyTorch's allocators and vram. "
                    "The driver (default) runs every (workload, allocator) in its own process.")
    ap.add_argument("--workloads", type=lambda s: _names(s, WORKLOADS, "workload"), default=list(MODEL_WORKLOADS),
                    help="comma-separated, from %s (default: %s; the framework programs %s need transformers "
                         "with accelerate, lightning, timm)" % (",".join(WORKLOADS), ",".join(MODEL_WORKLOADS),
                                                               ",".join(PROGRAM_WORKLOADS)))
    ap.add_argument("--allocators", type=lambda s: _names(s, ALLOCATORS, "allocator"), default=list(ALLOCATORS),
                    help="comma-separated, from %s (default: all)" % ",".join(ALLOCATORS))
    ap.add_argument("--steps", type=_positive, default=None,
                    help="timed steps a process (default per workload: %s)" % ", ".join(
                        "%s %d" % (w, DEFAULT_STEPS[w][1]) for w in WORKLOADS))
    ap.add_argument("--warmup", type=_non_negative, default=None,
                    help="untimed steps first (default per workload: %s)" % ", ".join(
                        "%s %d" % (w, DEFAULT_STEPS[w][0]) for w in WORKLOADS))
    ap.add_argument("--repeat", type=_positive, default=2, help="processes per (workload, allocator), interleaved "
                                                                "(default 2)")
    ap.add_argument("--out", default=os.path.join(REPO, "build-bench", "train"),
                    help="where train.jsonl, table.md and logs/ go (default build-bench/train)")
    ap.add_argument("--timeout", type=_positive, default=900, help="limit for one child in seconds (default 900)")
    ap.add_argument("--vram-alloc-conf", default=None, help="VRAM_ALLOC_CONF for the vram children (default: none)")
    ap.add_argument("--python", default=None, help="interpreter for the children (default: this one)")
    ap.add_argument("--cpus", type=_cpu_list, default=None,
                    help="run each timed child under `taskset -c CPUS` (e.g. 2-5), so that a host-bound "
                         "workload (gpt2_generate) does not move between CPUs (default: not pinned)")
    ap.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "ALLOCATOR"),
                    help="run one (workload, allocator) in this process and print one JSON line")
    ap.add_argument("--prepare", action="store_true", help="print versions as JSON (and build vram's allocator library "
                                                           "with --vram)")
    ap.add_argument("--vram", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--table", metavar="JSONL", help="print the tables from a results file")
    ap.add_argument("--self-test", action="store_true", help="check this script without PyTorch or a GPU")
    args = ap.parse_args(argv)
    if args.worker:
        w, a = args.worker
        if w not in WORKLOADS:
            ap.error("unknown workload %r (choose from %s)" % (w, ", ".join(WORKLOADS)))
        if a not in ALLOCATORS:
            ap.error("unknown allocator %r (choose from %s)" % (a, ", ".join(ALLOCATORS)))
    args.argv = list(argv)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    if args.table:
        meta, rows = load_results(args.table)
        sys.stdout.write(render(meta, rows))
        return 0
    if args.prepare:
        return prepare_main(args.vram)
    if args.worker:
        w, a = args.worker
        warmup, steps = steps_for(w, args)
        return worker_main(w, a, steps, warmup)
    return run_driver(args)


# ---- self-test (no torch, no GPU) --------------------------------------------------------------------

def _fake_result(w, a, median, reserved_gib, used_gib=None, **extra):
    r = {"workload": w, "allocator": a, "steps": 10, "warmup": 2, "step_ms_median": median,
         "step_ms_mean": median * 1.01, "step_ms_p10": median * 0.99, "step_ms_p90": median * 1.02,
         "peak_reserved_bytes": int(reserved_gib * GIB), "peak_allocated_bytes": int(reserved_gib * GIB * 0.9),
         "device_used_peak_bytes": int((used_gib if used_gib is not None else reserved_gib + 0.5) * GIB),
         "peak_reserved_source": "torch.cuda.max_memory_reserved", "torch": "2.11.0", "gpu": "Fake H200"}
    r.update(extra)
    return r


def self_test():
    checks = 0

    def check(cond, what):
        nonlocal checks
        checks += 1
        if not cond:
            raise AssertionError("self-test: " + what)

    # argument parsing
    a = parse_args([])
    check(a.workloads == MODEL_WORKLOADS and a.allocators == ALLOCATORS and a.repeat == 2 and a.timeout == 900,
          "driver defaults")
    check(steps_for("gpt2", a) == DEFAULT_STEPS["gpt2"], "per-workload default steps")
    a = parse_args(["--workloads", "gpt2,bert_varlen,gpt2", "--allocators", "vram,torch", "--steps", "7",
                    "--warmup", "0", "--repeat", "3", "--out", "/tmp/x"])
    check(a.workloads == ["gpt2", "bert_varlen"] and a.allocators == ["vram", "torch"], "lists, duplicates dropped")
    check(steps_for("gpt2_generate", a) == (0, 7) and a.repeat == 3 and a.out == "/tmp/x", "overrides")
    a = parse_args(["--worker", "resnet50", "torch-async", "--steps", "3"])
    check(a.worker == ["resnet50", "torch-async"] and steps_for("resnet50", a) == (DEFAULT_STEPS["resnet50"][0], 3),
          "worker arguments")
    for bad in (["--workloads", "gpt3"], ["--allocators", "torch,cupy"], ["--worker", "gpt2", "jemalloc"],
                ["--steps", "0"], ["--repeat", "-1"], ["--warmup", "-2"]):
        saved = sys.stderr
        sys.stderr = io.StringIO()
        try:
            parse_args(bad)
            ok = False
        except SystemExit:
            ok = True
        finally:
            sys.stderr = saved
        check(ok, "rejects %s" % bad)

    # statistics and the timing loop
    check(percentile([3, 1, 2], 50) == 2 and percentile([1, 2, 3, 4], 50) == 2.5, "median")
    check(abs(percentile(list(range(11)), 10) - 1.0) < 1e-9 and percentile([5], 90) == 5.0, "percentiles")
    s = step_stats([10.0, 12.0, 11.0, 30.0])
    check(s["step_ms_median"] == 11.5 and s["step_ms_mean"] == 15.75 and s["step_ms_max"] == 30.0, "step_stats")
    clock_t = [0.0]
    calls = []

    def fake_step(i):
        calls.append(i)
        clock_t[0] += 0.010 if i >= 2 else 1.0  # slow warmup steps must not be counted

    times = time_steps(fake_step, lambda: calls.append("sync"), 2, 3, sample=lambda: calls.append("sample"),
                       clock=lambda: clock_t[0])
    check(len(times) == 3 and all(abs(t - 10.0) < 1e-6 for t in times), "warmup excluded, ms: %s" % times)
    check(calls[:4] == ["sync", 0, "sync", "sample"] and [c for c in calls if isinstance(c, int)] == [0, 1, 2, 3, 4],
          "sync around every step, sample after")
    # the framework programs' step clock: the same rules when a callback calls begin()/end()
    clock_t[0], calls[:] = 0.0, []
    sc = _StepClock(lambda: calls.append("sync"), 2, lambda: calls.append("sample"), clock=lambda: clock_t[0])
    sc.end()  # an end without a begin (a callback order the framework may have) counts nothing
    for i in range(5):
        sc.begin()
        clock_t[0] += 0.020 if i >= 2 else 1.0
        sc.end()
    check(len(sc.times) == 3 and all(abs(t - 20.0) < 1e-6 for t in sc.times), "step clock: warmup excluded: %s"
          % sc.times)
    check(calls[:3] == ["sync", "sync", "sample"] and calls.count("sample") == 5, "step clock: sync, sample after")
    check(set(PROGRAM_WORKLOADS) <= set(DEFAULT_STEPS) and set(PROGRAM_WORKLOADS) <= set(DESCRIPTION),
          "every program has steps and a description")
    a = parse_args(["--workloads", "llama_trainer,timm_vit"])
    check(a.workloads == ["llama_trainer", "timm_vit"] and steps_for("timm_vit", a) == DEFAULT_STEPS["timm_vit"],
          "programs chosen by name")
    sh = bert_shapes(50)
    k = BERT["shapes"]
    check(sh == bert_shapes(50) and len(set(sh)) == k and len(set(sh[:k])) == k, "bert shapes: fixed, all in a cycle")
    check(all(sh[i] == sh[i + k] and sh[i] != sh[i + 1] for i in range(len(sh) - k)), "bert shapes: cycled, never repeated")
    check(all(b in BERT["batches"] and BERT["min_len"] <= n <= BERT["max_len"] and n % BERT["len_step"] == 0
              for b, n in sh), "bert shapes in range")

    # child environments
    base = {"PATH": "/bin", "PYTORCH_CUDA_ALLOC_CONF": "garbage"}
    check("PYTORCH_CUDA_ALLOC_CONF" not in child_env("torch", base), "torch: conf unset")
    check("PYTORCH_CUDA_ALLOC_CONF" not in child_env("vram", base), "vram: conf unset")
    check(child_env("torch-expandable", base)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True", "expandable")
    check(child_env("torch-async", base)["PYTORCH_CUDA_ALLOC_CONF"] == "backend:cudaMallocAsync", "async")
    check(child_env("vram", base, "map_ahead_mb:0")["VRAM_ALLOC_CONF"] == "map_ahead_mb:0" and
          "VRAM_ALLOC_CONF" not in child_env("torch", base, "map_ahead_mb:0"), "VRAM_ALLOC_CONF for vram only")

    # child output
    check(last_json_object('noise\n{"a": 1}\n{"b": 2}\ntrailing text\n') == {"b": 2}, "last JSON line")
    check(last_json_object("no json\n{broken\n") is None, "no JSON")
    r = row_from_child("gpt2", "vram", 1, 1, "",
                       "Traceback\n  ...\ntorch.OutOfMemoryError: CUDA out of memory (vram)\n",
                       3.0, 900)
    check(r["error"].endswith("torch.OutOfMemoryError: CUDA out of memory (vram)") and r["round"] == 1, "crash row")
    r = row_from_child("gpt2", "torch", 2, None, "", "", 900.0, 900)
    check(r["error"].startswith("timed out") and r["rc"] is None, "timeout row")
    r = row_from_child("gpt2", "torch", 1, 1, json.dumps({"error": "RuntimeError: boom"}), "", 1.0, 900)
    check(r["error"] == "RuntimeError: boom", "worker's own error kept")
    r = row_from_child("gpt2", "vram", 1, -11, json.dumps(_fake_result("gpt2", "vram", 1.0, 1.0)), "Segfault\n",
                       1.0, 900)
    check("error" not in r and r["warning"] == "exit status -11 after its result: Segfault", "crash at exit")

    # the plan: per workload, rounds interleaved, even rounds reversed
    p = plan(["gpt2", "resnet50"], ["torch", "vram"], 2)
    check(p == [("gpt2", "torch", 1), ("gpt2", "vram", 1), ("gpt2", "vram", 2), ("gpt2", "torch", 2),
                ("resnet50", "torch", 1), ("resnet50", "vram", 1), ("resnet50", "vram", 2),
                ("resnet50", "torch", 2)], "plan %s" % p)

    # aggregation and tables with fake numbers
    rows = [
        _fake_result("gpt2", "torch", 120.0, 20.0, round=1), _fake_result("gpt2", "torch", 118.0, 20.5, round=2),
        _fake_result("gpt2", "torch-expandable", 119.0, 18.0, round=1),
        _fake_result("gpt2", "torch-expandable", 121.0, 18.0, round=2),
        _fake_result("gpt2", "torch-async", 125.0, 18.5, round=1),
        {"workload": "gpt2", "allocator": "torch-async", "round": 2, "error": "exit status 1: boom"},
        _fake_result("gpt2", "vram", 118.5, 17.0, round=1), _fake_result("gpt2", "vram", 119.5, 17.1, round=2),
        {"workload": "resnet50", "allocator": "torch", "round": 1, "skipped": "torchvision is not installed (x)"},
        {"workload": "resnet50", "allocator": "vram", "round": 1, "skipped": "torchvision is not installed (x)"},
        _fake_result("bert_varlen", "torch", 50.0, 15.0), _fake_result("bert_varlen", "torch-async", 52.0, 0.5, 0.5,
                                                                       peak_reserved_source="device_used_peak (x)"),
        _fake_result("bert_varlen", "vram", 51.0, 16.0),
        _fake_result("gpt2_generate", "torch", 300.0, 0.4),
        {"workload": "gpt2_generate", "allocator": "vram", "round": 1,
         "error": "OutOfMemoryError: CUDA out of memory |\nfragmentation"},
    ]
    agg = aggregate(rows)
    g = agg[("gpt2", "torch")]
    check(g["median"] == 118.0 and g["median_hi"] == 120.0 and abs(g["reserved"] - 20.5 * GIB) < 2, "best-of-rounds")
    check(agg[("gpt2", "torch-async")]["ok"] == 1 and agg[("gpt2", "torch-async")]["errors"], "partial failure")
    meta = {"date": "2026-12-01", "gpu": "Fake H200", "driver": "580", "torch": "2.11.0", "cuda": "13.0",
            "repeat": 2, "command": "python3 bench/train.py", "vram_version": "0.1.0", "commit": "abc1234",
            "steps": {"gpt2": {"warmup": 2, "steps": 10}}}
    t = render(meta, rows)
    check("### gpt2:" in t and "### resnet50:" in t and "### bert_varlen:" in t and "### gpt2_generate:" in t,
          "one table per workload")
    check(t.index("### gpt2:") < t.index("### resnet50:") < t.index("### bert_varlen:"), "workload order")
    check("skipped: torchvision is not installed" in t, "skipped workload")
    line = next(l for l in t.splitlines() if l.startswith("| PyTorch caching allocator") and "118.00" in l)
    check("**fastest PyTorch**" in line and "(118.00–120.00)" in line and "20.500" in line, "fastest row: " + line)
    line = next(l for l in t.splitlines() if l.startswith("| vram") and "118.50" in l)
    check("+0.42%" in line and "17.100" in line, "vram row: " + line)
    check("vram step time (lowest median) "
          "0.42% slower than the fastest PyTorch allocator (torch, 118.00 ms; target within "
          "1%: met)" in t,
          "gpt2 time verdict")
    check("reserved 17.100 GiB vs min of others 18.000 GiB (torch-expandable; target less: met)" in t,
          "gpt2 memory verdict")
    check("torch-async: 1 of 2 rounds failed: exit status 1: boom" in t, "partial failure note")
    # round 1: 118.5 / min(120, 119, 125) = -0.42%; round 2: 119.5 / min(118, 121) = +1.27%; median +0.43%
    check("paired by round (vram against the fastest PyTorch allocator of the same round): median +0.43% "
          "(rounds: -0.42%, +1.27%)" in t, "paired by round")
    check("vram step time (lowest median) "
          "2.00% slower than the fastest PyTorch allocator (torch, 50.00 ms; target within "
          "1%: missed)" in t,
          "bert time verdict")
    check("0.500*" in t and "vs min of others 0.500 GiB (torch-async" in t, "fallback reserved marked")
    check("failed: OutOfMemoryError: CUDA out of memory / fragmentation" in t and "**verdict**: vram failed" in t,
          "failed vram row")
    check("on 1 of 2 workloads and the memory target (less peak reserved than every other allocator) on 1 of 2" in t,
          "summary")
    faster = render({}, [_fake_result("gpt2", "torch", 100.0, 10.0), _fake_result("gpt2", "vram", 99.0, 9.0)])
    check("vram step time (lowest median) "
          "1.00% faster than the fastest PyTorch allocator (torch, 100.00 ms; target within "
          "1%: met)" in faster, "faster vram")
    shaped = [_fake_result("bert_varlen", "torch", 30.0, 10.0, distinct_shapes=2, step_ms=[10, 50, 12, 52], round=1),
              _fake_result("bert_varlen", "torch", 30.0, 10.0, distinct_shapes=2, step_ms=[14, 54, 99, 56], round=2),
              _fake_result("bert_varlen", "vram", 30.0, 9.0, distinct_shapes=2, step_ms=[11, 51, 11, 51], round=1)]
    # torch: shape 0 median of 10, 12, 14, 99 = 13, shape 1 of 50, 52, 54, 56 = 53: 33.0; vram (11 + 51) / 2 = 31
    check(pooled_by_shape("bert_varlen", shaped) == {"torch": 33.0, "vram": 31.0}, "pooled by shape")
    t = render({}, shaped)
    check("averaged over the shapes): torch 33.00 ms, vram 31.00 ms; vram against the fastest PyTorch allocator "
          "(torch): -6.06%" in t, "pooled line: " + t)
    check("per shape (pooled medians, ms, in the order the steps take them): torch 13.00 / 53.00; vram 11.00 / 51.00"
          in t, "per-shape line")
    check("vram step time (pooled) 6.06% faster than the fastest PyTorch allocator (torch, 33.00 ms" in
          render({}, shaped), "the verdict on the pooled figures when every row has its steps")
    only_vram = render({}, [_fake_result("gpt2", "vram", 99.0, 9.0)])
    check("| vram (growth, no limit) | 99.00 | fastest |" in only_vram, "vram alone")

    # the driver with a fake runner: order, skipped workloads, failures, files
    tmp = tempfile.mkdtemp(prefix="train-selftest-")
    ran = []

    def fake_runner(argv, env, timeout, log_base):
        if "--prepare" in argv:
            check("--vram" in argv, "prepare builds vram's allocator library")
            return 0, json.dumps({"torch": "2.11.0", "cuda": "13.0", "vram_version": "0.1.0",
                                  "vram_torch_mode": "allocator"}), "", 1.0
        w, al = argv[argv.index("--worker") + 1: argv.index("--worker") + 3]
        check(env.get("PYTORCH_CUDA_ALLOC_CONF") == ALLOC_CONF[al], "env of %s" % al)
        check(argv[argv.index("--steps") + 1] == "4", "steps passed on")
        ran.append((w, al))
        if w == "resnet50":
            return 0, json.dumps({"workload": w, "allocator": al, "skipped": "torchvision is not installed"}), "", 1.0
        if al == "torch-async":
            return 1, "", "Traceback (most recent call last):\nRuntimeError: CUDA error: boom\n", 2.0
        if al == "torch" and w == "gpt2_generate":
            return None, "", "", float(timeout)
        ms = {"torch": 100.0, "torch-expandable": 101.0, "vram": 100.5}[al]
        return 0, "warning on stdout\n" + json.dumps(_fake_result(w, al, ms, {"torch": 10, "torch-expandable": 9,
                                                                               "vram": 8.5}[al])), "", 5.0

    a = parse_args(["--out", tmp, "--repeat", "2", "--steps", "4"])
    buf = io.StringIO()
    saved = sys.stderr
    sys.stderr = io.StringIO()
    try:
        rc = run_driver(a, runner=fake_runner, machine={"gpu": "Fake H200", "driver": "580", "memory": "143771 MiB"},
                        out_stream=buf)
    finally:
        progress = sys.stderr.getvalue()
        sys.stderr = saved
    check(rc == 0, "driver status")
    check(ran.count(("resnet50", "torch")) == 1 and not any(w == "resnet50" and al != "torch" for w, al in ran),
          "a skipped workload runs once")
    check(len(ran) == 1 + 3 * 4 * 2, "every other child ran: %d" % len(ran))
    check(ran[:8] == [("gpt2", "torch"), ("gpt2", "torch-expandable"), ("gpt2", "torch-async"), ("gpt2", "vram"),
                      ("gpt2", "vram"), ("gpt2", "torch-async"), ("gpt2", "torch-expandable"), ("gpt2", "torch")],
          "interleaved rounds: %s" % ran[:8])
    meta2, rows2 = load_results(os.path.join(tmp, "train.jsonl"))
    check(meta2.get("gpu") == "Fake H200" and meta2.get("torch") == "2.11.0" and meta2.get("repeat") == 2,
          "meta line")
    check(len(rows2) == 4 * 4 * 2, "one line per child: %d" % len(rows2))
    check(all("round" in r and "workload" in r and "allocator" in r for r in rows2), "rows tagged")
    table = buf.getvalue()
    with open(os.path.join(tmp, "table.md")) as f:
        check(f.read().strip() == table.strip(), "table.md is what was printed")
    check("failed: exit status 1, no result: RuntimeError: CUDA error: boom" in table and
          "failed: timed out after 900 s" in table,
          "failed rows with reasons")
    check("vram step time (lowest median) "
          "0.50% slower than the fastest PyTorch allocator (torch, 100.00 ms; target within "
          "1%: met)" in table and
          "reserved 8.500 GiB vs min of others 9.000 GiB (torch-expandable; target less: met)" in table,
          "driver verdict")
    check("[1/32] gpt2 torch round 1/2" in progress and "FAILED" in progress and "skipped" in progress, "progress")
    check(render(meta2, rows2) == table.lstrip("\n"), "--table reprints the same table")
    for name in os.listdir(os.path.join(tmp, "logs")):
        os.remove(os.path.join(tmp, "logs", name))

    # --cpus: timed children under taskset, the untimed prepare child not
    pinned = []

    def pin_runner(argv, env, timeout, log_base):
        pinned.append(argv)
        if "--prepare" in argv:
            return 0, json.dumps({"torch": "2.11.0", "cuda": "13.0"}), "", 1.0
        return 0, json.dumps(_fake_result("gpt2", "torch", 100.0, 10)), "", 5.0

    a = parse_args(["--out", tmp, "--repeat", "1", "--workloads", "gpt2", "--allocators", "torch", "--cpus", "2-5"])
    saved = sys.stderr
    sys.stderr = io.StringIO()
    try:
        run_driver(a, runner=pin_runner, machine={"gpu": "Fake H200"}, out_stream=io.StringIO())
    finally:
        sys.stderr = saved
    check(len(pinned) == 2 and pinned[0][0] != "taskset" and pinned[1][:3] == ["taskset", "-c", "2-5"],
          "--cpus pins the timed child only: %s" % [p[:3] for p in pinned])
    check(load_results(os.path.join(tmp, "train.jsonl"))[0].get("cpus") == "2-5", "--cpus in the meta line")
    for bad in ("2-", "a", "1;2"):
        try:
            _cpu_list(bad)
            check(False, "--cpus %r refused" % bad)
        except argparse.ArgumentTypeError:
            pass
    for name in os.listdir(os.path.join(tmp, "logs")):
        os.remove(os.path.join(tmp, "logs", name))
    os.rmdir(os.path.join(tmp, "logs"))
    for name in os.listdir(tmp):
        os.remove(os.path.join(tmp, name))
    os.rmdir(tmp)

    print("self-test: ok (%d checks)" % checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
