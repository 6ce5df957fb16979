"""bench/workloads/timm_vit.py: the timm_vit workload (DESCRIPTION): timm's ViT-B/16 trained the way
timm's train script does it. Skipped without timm.
"""
from .common import need

VIT = dict(model="vit_base_patch16_224", batch=128, size=224)
STEPS = (5, 25)  # (warmup, timed) steps a process by default
DESCRIPTION = ("timm %s training as timm's train script does it: cudnn.benchmark, Mixup/CutMix, "
               "SoftTargetCrossEntropy, create_optimizer_v2 AdamW, bf16 autocast, batch %d" % (VIT["model"], VIT["batch"]))


def build(torch, dev, total_steps):
    """(step(i), notes) of the workload on dev."""
    timm = need("timm", "timm")
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
