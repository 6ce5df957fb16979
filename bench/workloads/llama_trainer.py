"""bench/workloads/llama_trainer.py: the llama_trainer workload (DESCRIPTION), a framework program:
Hugging Face's Trainer runs the loop (and reads and resets PyTorch's memory statistics), a
TrainerCallback times each step. Skipped without transformers and accelerate. bench/plan_train.py's
Llama loop is another workload: one step repeated by a loop of its own, for vram's plan.
"""
import tempfile

from .common import Driven, StepClock, need

LLAMA = dict(layers=12, d=1024, ffn=2816, heads=16, vocab=32000, batch=8, seq=1024)
STEPS = (5, 25)  # (warmup, timed) steps a process by default
DESCRIPTION = ("Hugging Face Trainer of a LlamaForCausalLM built from its config (%d layers, d=%d), batch %d x %d "
               "tokens, bf16, AdamW, skip_memory_metrics=False (the Trainer reads and resets PyTorch's memory "
               "statistics); step timed by a TrainerCallback" % (LLAMA["layers"], LLAMA["d"], LLAMA["batch"],
                                                               LLAMA["seq"]))


def build(torch, dev, total_steps):
    """(Driven, notes) of the workload: the Trainer runs the steps on the current CUDA device."""
    transformers = need("transformers", "transformers")
    need("accelerate", "accelerate (the Trainer needs it)")
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
        clock = StepClock(sync, warmup, sample)

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
