"""bench/workloads/resnet50.py: the resnet50 workload (DESCRIPTION), its one definition: bench/train.py
times it and traces/train_resnet50.trace.gz was recorded from it (`bench/train.py --worker resnet50
torch`). traces/resnet50_train.trace.gz is the same training at batch 32 in the default memory format,
by the script this file replaced (traces/README.md). Skipped without torchvision.
"""
from .common import Skipped

RESNET = dict(batch=128, size=224)
STEPS = (5, 30)  # (warmup, timed) steps a process by default
DESCRIPTION = ("torchvision ResNet-50 training, batch %d at %dx%d, channels_last, bf16 autocast, SGD momentum"
               % (RESNET["batch"], RESNET["size"], RESNET["size"]))


def build(torch, dev, total_steps):
    """(step(i), notes) of the workload on dev."""
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
