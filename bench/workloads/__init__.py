"""bench/workloads: bench/train.py's workloads, a module each, and their registry. A module holds
its sizes, STEPS (default warmup and timed steps), DESCRIPTION and build(torch, dev, total_steps) ->
(step, notes): step(i) is one step the worker times, or a common.Driven whose framework runs the loop;
build() raises common.Skipped where an optional module is missing. Only the standard library at
import (torch is passed in), so the driver and the tables run without PyTorch. Calls run one way:
this registry -> the workload modules -> transformer.py, common.py. transformer_varlen.py is a trace's
script, not in the registry.
"""
from . import bert_varlen, gpt2, gpt2_generate, lightning_stats, llama_trainer, resnet50, timm_vit
from .common import Driven, Skipped  # noqa: F401  (the worker's names for what build() returns)

MODULES = {"gpt2": gpt2, "resnet50": resnet50, "bert_varlen": bert_varlen, "gpt2_generate": gpt2_generate,
           "llama_trainer": llama_trainer, "lightning_stats": lightning_stats, "timm_vit": timm_vit}
# The model workloads (the worker runs the loop) run by default; the framework programs (the framework
# runs the loop, a callback of its own API times each step) when named.
MODEL_WORKLOADS = ["gpt2", "resnet50", "bert_varlen", "gpt2_generate"]
PROGRAM_WORKLOADS = ["llama_trainer", "lightning_stats", "timm_vit"]
WORKLOADS = MODEL_WORKLOADS + PROGRAM_WORKLOADS
DEFAULT_STEPS = {w: MODULES[w].STEPS for w in WORKLOADS}
DESCRIPTION = {w: MODULES[w].DESCRIPTION for w in WORKLOADS}


def build_workload(name, torch, dev, total_steps):
    """(step, notes) of the named workload on dev (ValueError for an unknown name)."""
    if name not in MODULES:
        raise ValueError("unknown workload %r" % name)
    return MODULES[name].build(torch, dev, total_steps)
