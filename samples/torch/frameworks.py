#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""frameworks.py: real frameworks, unmodified, natively and under gpubuddy.

    frameworks.py [--out DIR] [--steps N]
    frameworks.py --one hf|lightning --mode native|gpubuddy [--steps N]

hf: a Hugging Face Trainer run (a 2-layer GPT-2 from its configuration,
random tokens) with its memory metrics on (skip_memory_metrics=False).
lightning: a PyTorch Lightning run of a small MLP with DeviceStatsMonitor
logging torch.cuda.memory_stats through a CSV logger. Each run is a fresh
process; the losses must equal the native run's, and the logs must carry
gpubuddy's numbers (Trainer's GPU memory metrics; Lightning's
allocated_bytes and gpubuddy.* columns). Writes DIR/frameworks.json and
prints "N passed, N failed".
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile


def hf(steps):
    import torch
    import transformers as tf
    tf.set_seed(0)
    cfg = tf.GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=1000,
                        n_positions=128)
    model = tf.GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1000, (64, 128), generator=g)
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = tf.TrainingArguments(
        output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=8,
        logging_steps=1, report_to=[], skip_memory_metrics=False, seed=0,
        save_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    trainer = tf.Trainer(model=model, args=args, train_dataset=data)
    st = trainer.train().metrics
    mem = {k: v for k, v in st.items() if "mem_gpu" in k}
    assert mem, "no GPU memory metrics in %s" % sorted(st)
    assert st.get("train_mem_gpu_peaked_delta", 0) > 0 or \
        st.get("train_mem_gpu_alloc_delta", 0) > 0, mem
    losses = [round(h["loss"], 6) for h in trainer.state.log_history
              if "loss" in h]
    return {"losses": losses, "mem_metrics": mem, "transformers": tf.__version__}


def lightning(steps):
    import torch
    try:
        import lightning.pytorch as pl
    except ImportError:  # the older package name
        import pytorch_lightning as pl
    DeviceStatsMonitor = pl.callbacks.DeviceStatsMonitor
    CSVLogger = pl.loggers.CSVLogger

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                           torch.nn.Linear(256, 1))

        def training_step(self, batch, i):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    pl.seed_everything(0)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(512, 64, generator=g), torch.randn(512, 1, generator=g)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                     batch_size=32)
    where = tempfile.mkdtemp()
    t = pl.Trainer(max_steps=steps, accelerator="gpu", devices=1, log_every_n_steps=1,
                   callbacks=[DeviceStatsMonitor()], logger=CSVLogger(where),
                   enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False)
    t.fit(Net(), dl)
    rows = list(csv.DictReader(open(glob.glob(where + "/**/metrics.csv",
                                              recursive=True)[0])))
    cols = sorted(rows[0]) if rows else []
    losses = [round(float(r["loss"]), 6) for r in rows if r.get("loss")]
    alloc = [c for c in cols if "allocated_bytes.all.current" in c]
    assert alloc, "no allocated_bytes column in %s" % cols[:20]
    vals = [float(r[alloc[0]]) for r in rows if r.get(alloc[0])]
    assert vals and max(vals) > 0, "allocated_bytes all zero"
    return {"losses": losses, "allocated_col": alloc[0],
            "gpubuddy_cols": sorted(c for c in cols if "gpubuddy." in c),
            "lightning": pl.__version__}


def one(name, mode, steps):
    if mode == "gpubuddy":
        import gpubuddy.torch as gt
        gt.enable()
    try:
        out = {"ok": True, **{"hf": hf, "lightning": lightning}[name](steps)}
    except Exception as e:
        out = {"ok": False, "error": "%s: %s" % (type(e).__name__,
                                                 str(e).splitlines()[0][:300])}
    print(json.dumps(out), flush=True)


def spawn(name, mode, steps):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name,
                        "--mode", mode, "--steps", str(steps)],
                       capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr.strip().splitlines() or ["?"])[-1]
    return {"ok": False, "error": "exit %d: %s" % (p.returncode, tail[:300])}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", choices=["hf", "lightning"])
    ap.add_argument("--mode", default="native", choices=["native", "gpubuddy"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    if a.one:
        one(a.one, a.mode, a.steps)
        return 0
    res, fails = {}, 0
    for name in ("hf", "lightning"):
        n, g = spawn(name, "native", a.steps), spawn(name, "gpubuddy", a.steps)
        same = n["ok"] and g["ok"] and n["losses"] == g["losses"]
        shows = name != "lightning" or bool(g.get("gpubuddy_cols"))
        res[name] = {"native": n, "gpubuddy": g, "losses_equal": same,
                     "logs_show_gpubuddy": shows}
        fails += not (same and shows)
        print(name, json.dumps(res[name]), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "frameworks.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("%d passed, %d failed" % (2 - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
