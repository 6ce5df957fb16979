"""ResNet-50 training on random data (torchvision, random weights): batch 32 at 224x224, bf16
autocast, SGD with momentum. Record with:

    python3 tools/record_trace.py -o traces/resnet50_train.trace.gz --meta steps=5 \
        -- tools/workloads/resnet50_train.py --steps 5
"""
import argparse

import torch
import torch.nn.functional as F
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torchvision.models.resnet50(weights=None).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    for _ in range(a.steps):
        x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
        y = torch.randint(0, 1000, (a.batch,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    print("resnet50_train: %d steps, last loss %.4f" % (a.steps, loss.item()))


if __name__ == "__main__":
    main()
