#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""record_traces.py: record PyTorch memory snapshots of small real workloads.

    python3 samples/torch/record_traces.py --out traces/ [--workloads resnet,gpt,infer]

Each workload runs in its own process with PyTorch's default CUDA caching
allocator and torch.cuda.memory._record_memory_history() on, then writes
torch.cuda.memory._dump_snapshot() to OUT/torch-<workload>.pickle. The
snapshots hold the allocator's trace (every cudaMalloc-level segment and
every block alloc/free with sizes, addresses and streams);
tools/gpubuddy-import-torch converts them to gpubuddy traces for
samples/traces/. Stack traces are not recorded, to keep the files small.

Workloads (models defined here; nothing is downloaded, torchvision is not
needed):
  resnet  ResNet-style CNN (basic residual blocks), a few training steps
  gpt     GPT-2-like decoder (causal self-attention + MLP), training steps
  infer   the decoder in inference with varying batch sizes and lengths
"""
import argparse
import json
import os
import subprocess
import sys
import time

WORKLOADS = ("resnet", "gpt", "infer")


def start_recording(torch, max_entries):
    rec = torch.cuda.memory._record_memory_history
    # Python frames of each allocation: gpubuddy-import-torch turns them
    # into the traces' call sites, so `gpubuddy-replay --top-sites` and
    # the viewer's site panel have something to show on the samples.
    try:  # PyTorch >= 2.1
        rec(enabled="all", context="alloc", stacks="python",
            max_entries=max_entries)
    except TypeError:
        rec(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True)


def resnet(torch, dev, steps):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        nn.BatchNorm2d(cout))
                          if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(y)) + self.short(x))

    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1),
                         (512, 2), (512, 1)):
        layers.append(Block(cin, cout, stride))
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        x = torch.randn(64, 3, 64, 64, device=dev)
        y = torch.randint(0, 100, (64,), device=dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()


def make_gpt(torch, vocab=8192, d=384, heads=6, layers=6, ctx=512):
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.out = nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(ctx, d)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            for layer in self.layers:
                x = layer(x)
            return self.head(self.ln(x))

    return GPT(), vocab, ctx


def gpt(torch, dev, steps):
    model, vocab, ctx = make_gpt(torch)
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(steps):
        idx = torch.randint(0, vocab, (8, ctx), device=dev)
        logits = model(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                                 idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()


def infer(torch, dev, steps):
    model, vocab, ctx = make_gpt(torch)
    model = model.to(dev).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for _ in range(steps * 4):
            b = int(torch.randint(1, 17, (1,), generator=g))
            t = int(torch.randint(16, ctx + 1, (1,), generator=g))
            idx = torch.randint(0, vocab, (b, t), device=dev)
            model(idx).argmax(-1)
    torch.cuda.synchronize()


def run_one(args):
    import torch
    if not torch.cuda.is_available():
        print("record_traces.py: no CUDA device", file=sys.stderr)
        return 77
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    torch.zeros(1, device=dev)  # CUDA context before recording
    start_recording(torch, args.max_entries)
    t0 = time.time()
    {"resnet": resnet, "gpt": gpt, "infer": infer}[args.workload](torch, dev, args.steps)
    path = os.path.join(args.out, f"torch-{args.workload}.pickle")
    torch.cuda.memory._dump_snapshot(path)
    snap = torch.cuda.memory._snapshot()
    nevents = sum(len(t) for t in snap.get("device_traces", []))
    info = {"workload": args.workload, "steps": args.steps, "file": path,
            "bytes": os.path.getsize(path), "trace_events": nevents,
            "segments": len(snap.get("segments", [])),
            "peak_reserved": torch.cuda.max_memory_reserved(dev),
            "peak_allocated": torch.cuda.max_memory_allocated(dev),
            "seconds": round(time.time() - t0, 2),
            "device": torch.cuda.get_device_name(dev), "torch": torch.__version__}
    print(json.dumps(info))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the pickles")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of " + ",".join(WORKLOADS))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--max-entries", type=int, default=200000)
    ap.add_argument("--workload", help=argparse.SUPPRESS)  # child process
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.workload:
        return run_one(args)
    failed = 0
    for w in args.workloads.split(","):
        if w not in WORKLOADS:
            sys.exit(f"record_traces.py: unknown workload {w!r}")
        print(f"record_traces.py: {w}...", file=sys.stderr, flush=True)
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--out",
                              args.out, "--workload", w, "--steps", str(args.steps),
                              "--max-entries", str(args.max_entries)])
        if rc == 77:
            return 77
        if rc:
            print(f"record_traces.py: {w} failed (exit {rc})", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
