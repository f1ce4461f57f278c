#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""workloads.py: one run of a real PyTorch workload under one allocator, as
one JSON line on stdout. scripts/torch-dropin.sh (base, caps, steps) runs
it many times, each in a fresh process, to compare allocators side by side
on one GPU.

    workloads.py WORKLOAD ALLOCATOR [--cap BYTES] [--steps N] [--trace PATH]
                 [--plan PATH]
    workloads.py WORKLOAD --alternate A,B,... --rounds N [--steps N]

WORKLOAD: resnet (ResNet-50 training, batch 64, 224x224, SGD), gpt
(GPT-2 124M training, batch 8 x 1024 tokens, AdamW), infer (GPT-2 fp16
inference, random batch 1-16 x length 16-1024: 60 shapes, then the same
shapes again past step 60), ops (no model: each step makes and drops
OPS_PER_STEP tensors of 4 KiB to 16 MiB, for what one allocation and
free cost through each allocator). Models are built from their
configurations with random weights: nothing is downloaded.

ALLOCATOR: default (PyTorch's caching allocator), expandable (the same
with expandable_segments:True), gpubuddy (gpubuddy.torch.enable() with its
defaults: PyTorch's allocator interface over a VMM pool, memory mapped
only under live blocks), gpubuddy-plain (the same over one plain range,
vmm=False), gpubuddy-null (torch's pluggable allocator over the plain C
entry points, which return NULL on exhaustion). --cap is PyTorch's
per-process cap (set_per_process_memory_fraction) or gpubuddy's pool
size (a VMM pool's memory budget).

--alternate runs the workload under each allocator in turn, --rounds
times, each run in a child forked from one process that has imported
torch (and transformers) but not touched CUDA: one JSON line per run,
with its round. Children of one parent share its Python heap and
imports, so that runs differ by the allocator more than by the process
(fresh processes of the inference workload ran fast or slow as a
whole; docs/GPU.md).

The JSON: ok (ran every step), error (the first line of what stopped
it), losses (one number per step: the training loss, or a checksum of
the logits), step_ms (wall time per step, after a synchronize),
peak_live and peak_reserved (torch.cuda.max_memory_allocated and
max_memory_reserved; not under gpubuddy-null), allocs (allocations made)
and gpubuddy's stats at the end (its allocs among them).
"""
import argparse
import json
import os
import sys
import time

INFER_SHAPES = 60
OPS_PER_STEP = 10000


def build(torch, name, dev):
    if name == "ops":
        sizes = [4 << 10, 64 << 10, 1 << 20, 16 << 20]

        def step(i):
            for j in range(OPS_PER_STEP):
                x = torch.empty(sizes[j & 3], dtype=torch.uint8, device=dev)
                del x
            return 0.0
        return step
    if name == "resnet":
        import torchvision
        m = torchvision.models.resnet50(weights=None).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        g = torch.Generator(device="cpu").manual_seed(2)
        x = torch.randn(64, 3, 224, 224, generator=g).to(dev)
        y = torch.randint(0, 1000, (64,), generator=g).to(dev)

        def step(i):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss.item()
        return step
    import transformers
    cfg = transformers.GPT2Config()
    if name == "gpt":
        m = transformers.GPT2LMHeadModel(cfg).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        g = torch.Generator(device="cpu").manual_seed(3)
        ids = torch.randint(0, cfg.vocab_size, (8, 1024), generator=g).to(dev)

        def step(i):
            opt.zero_grad(set_to_none=True)
            loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            return loss.item()
        return step
    m = transformers.GPT2LMHeadModel(cfg).half().to(dev).eval()
    g = torch.Generator(device="cpu").manual_seed(4)

    shapes = []

    def step(i):
        # 60 shapes drawn, then the same shapes again: a second pass times
        # steps whose kernels are loaded, without first-use noise.
        if i < INFER_SHAPES:
            b = int(torch.randint(1, 17, (1,), generator=g))
            t = int(torch.randint(16, 1025, (1,), generator=g))
            shapes.append((b, t))
        else:
            b, t = shapes[i % INFER_SHAPES]
        ids = torch.randint(0, cfg.vocab_size, (b, t), generator=g).to(dev)
        with torch.no_grad():
            return m(input_ids=ids).logits.float().mean().item()
    return step


ALLOCATORS = ["default", "expandable", "gpubuddy", "gpubuddy-plain",
              "gpubuddy-null"]


def one(a, steps):
    """One run under a.allocator, before which nothing touched CUDA."""
    if a.allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    out = {"workload": a.workload, "allocator": a.allocator, "cap": a.cap,
           "steps": steps, "ok": False, "error": None, "losses": [], "step_ms": []}
    if a.allocator.startswith("gpubuddy"):
        import gpubuddy.torch as gt
        gt.enable(pool_size=a.cap or "90%", policy=a.policy, trace=a.trace,
                  oom_error=a.allocator != "gpubuddy-null",
                  vmm=a.allocator != "gpubuddy-plain", plan=a.plan,
                  plan_cache=a.plan_cache)
    dev = torch.device("cuda", 0)
    if a.cap and not a.allocator.startswith("gpubuddy"):
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.cap / total), 0)
    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    try:
        step = build(torch, a.workload, dev)
        for i in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out["losses"].append(step(i))
            torch.cuda.synchronize()
            out["step_ms"].append(round((time.perf_counter() - t0) * 1e3, 3))
        out["ok"] = True
    except Exception as e:  # an OOM of any kind ends the try: say which
        out["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
    if a.allocator.startswith("gpubuddy"):
        try:
            import gpubuddy.torch as gt
            s = gt.stats(0)
            out["gpubuddy"] = {k: s[k] for k in ("requested_peak", "used_peak",
                                                 "failures", "allocs")}
            if "plan" in s:
                out["gpubuddy"]["plan"] = s["plan"]
            if a.trace:
                gt.stop_trace(0)
        except Exception as e:
            out["gpubuddy"] = {"error": str(e)}
    if a.allocator != "gpubuddy-null":
        out["peak_live"] = torch.cuda.max_memory_allocated(0)
        out["peak_reserved"] = torch.cuda.max_memory_reserved(0)
        out["allocs"] = torch.cuda.memory_stats(0).get("allocation.all.allocated", 0)
    return out


def alternate(a, steps):
    import torch  # noqa: F401  imported once, here, for every child
    if a.workload in ("gpt", "infer"):
        import transformers  # noqa: F401
    if any(x.startswith("gpubuddy") for x in a.alternate):
        import gpubuddy.torch  # noqa: F401
    n = len(a.alternate)
    for r in range(a.rounds):
        for k in range(n):
            a.allocator = a.alternate[(k + r) % n]  # each goes first in turn
            rd, wr = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(rd)
                try:
                    out = one(a, steps)
                except BaseException as e:  # said in the line, never lost
                    out = {"workload": a.workload, "allocator": a.allocator,
                           "ok": False, "error": "%s: %s" % (type(e).__name__, e)}
                out["round"] = r
                os.write(wr, (json.dumps(out) + "\n").encode())
                os._exit(0)
            os.close(wr)
            with os.fdopen(rd) as f:
                line = f.read().strip()
            _, status = os.waitpid(pid, 0)
            if not line:
                line = json.dumps({"workload": a.workload, "allocator": a.allocator,
                                   "round": r, "ok": False, "error":
                                   "child exited with status %d" % status})
            print(line, flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=["resnet", "gpt", "infer", "ops"])
    ap.add_argument("allocator", nargs="?", choices=ALLOCATORS)
    ap.add_argument("--cap", type=int, default=0, help="bytes (0: none)")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--trace", help="gpubuddy: record the pool's trace here")
    ap.add_argument("--policy", default=None, help="gpubuddy policy")
    ap.add_argument("--plan", default=None,
                    help="gpubuddy: follow this placement plan "
                    "(gpubuddy-replay --plan-out)")
    ap.add_argument("--plan-cache", default=None,
                    help="gpubuddy: follow PATH.0 if an earlier run left it, "
                    "else record this run and write its plan there at exit")
    ap.add_argument("--alternate", help="A,B,...: these allocators in turn, "
                    "each run a child of this process")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    if bool(a.allocator) == bool(a.alternate):
        ap.error("give one ALLOCATOR, or --alternate A,B,...")
    if a.alternate:
        a.alternate = a.alternate.split(",")
        bad = [x for x in a.alternate if x not in ALLOCATORS]
        if bad:
            ap.error("--alternate: unknown allocator %s (one of %s)"
                     % (bad[0], ", ".join(ALLOCATORS)))
        if a.trace:
            ap.error("--trace names one run's file: not with --alternate")
    steps = a.steps or {"resnet": 6, "gpt": 6, "infer": 60, "ops": 20}[a.workload]
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if a.alternate:
        return alternate(a, steps)
    print(json.dumps(one(a, steps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
