"""bench/workloads/lightning_stats.py: the lightning_stats workload (DESCRIPTION), a framework
program: Lightning's Trainer runs the loop, DeviceStatsMonitor asks for torch.cuda.memory_stats()
every step, a Callback times each step. Skipped without lightning (or pytorch_lightning).
"""
import csv
import os
import tempfile

from .common import Driven, Skipped, StepClock, need

LIGHTNING = dict(layers=12, d=1024, heads=16, vocab=32000, batch=16, seq=512)
STEPS = (5, 25)  # (warmup, timed) steps a process by default
DESCRIPTION = ("Lightning Trainer of a LightningModule (nn.TransformerEncoder LM, %d layers, d=%d, batch %d x %d "
               "tokens), bf16-mixed, AdamW, DeviceStatsMonitor logging torch.cuda.memory_stats() every step "
               "to a CSVLogger; step timed by a Callback" % (LIGHTNING["layers"], LIGHTNING["d"],
                                                             LIGHTNING["batch"], LIGHTNING["seq"]))


def _module(torch, L):
    """The LightningModule class: the LM, its training step and its optimizer."""
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

    return LM


def build(torch, dev, total_steps):
    """(Driven, notes) of the workload: Lightning's Trainer runs the steps on one GPU."""
    try:
        L = need("lightning", "lightning")
        from lightning.pytorch.callbacks import Callback, DeviceStatsMonitor  # noqa: PLC0415
        from lightning.pytorch.loggers import CSVLogger  # noqa: PLC0415
    except Skipped:
        L = need("pytorch_lightning", "lightning or pytorch_lightning")
        from pytorch_lightning.callbacks import Callback, DeviceStatsMonitor  # noqa: PLC0415
        from pytorch_lightning.loggers import CSVLogger  # noqa: PLC0415
    c = LIGHTNING
    model = _module(torch, L)()

    def run(sync, warmup, steps, sample):
        clock = StepClock(sync, warmup, sample)

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
