"""GPT-2 small inference with a growing KV cache: transformers' GPT2LMHeadModel built from
GPT2Config() (random weights, nothing downloaded), bf16, greedy generation of 256 new tokens for a
batch of 8 prompts of 32 random tokens, use_cache=True. Record with:

    python3 tools/record_trace.py -o traces/gpt2_generate.trace.gz --meta new_tokens=256 \
        -- tools/workloads/gpt2_generate.py --new-tokens 256
"""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = GPT2Config()
    model = GPT2LMHeadModel(cfg).to(device=dev, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device=dev)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=a.new_tokens,
                             min_new_tokens=a.new_tokens, do_sample=False, use_cache=True,
                             pad_token_id=cfg.eos_token_id)
    torch.cuda.synchronize()
    print("gpt2_generate: output shape %s" % (tuple(out.shape),))


if __name__ == "__main__":
    main()
