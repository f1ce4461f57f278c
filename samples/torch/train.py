#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""train.py: train a small model with gpubuddy as PyTorch's CUDA allocator.

    python3 samples/torch/train.py --lib .libs/libgpubuddy.so --steps 300
    python3 samples/torch/train.py --lib ... --compare   # the GPU check

One run (--allocator gpubuddy, the default) routes every CUDA allocation
through torch.cuda.memory.CUDAPluggableAllocator(lib, 'gpb_torch_malloc',
'gpb_torch_free') before any CUDA use, trains a small CNN + MLP on
synthetic data with deterministic settings, and prints one loss per step.
With --publish NAME the pool is published live as NAME.0: watch it with
`gpubuddy-view NAME.0` (add --sleep to slow the steps down for a person).
At the end it frees everything, waits for the pending stream-ordered frees
(gpb_torch_drain) and checks that the pool's event counts agree with the
calls the allocator received: allocs == mallocs, frees == frees, nothing
left live that PyTorch did not keep.

--compare runs the same seed twice in separate processes, once with
PyTorch's default allocator and once with gpubuddy, and requires the two
loss sequences to be bit-identical (exit 1 otherwise). It writes a JSON
summary with --json.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time


def find_lib(path):
    cands = [path] if path else []
    env = os.environ.get("GPB_LIB")
    if env:
        cands.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (".libs", os.path.join(here, "..", "..", ".libs"),
              "/usr/local/lib", "/usr/lib"):
        cands.append(os.path.join(d, "libgpubuddy.so"))
    for c in cands:
        if c and os.path.exists(c):
            return os.path.abspath(c)
    sys.exit("train.py: libgpubuddy.so not found; pass --lib or set GPB_LIB")


class Stats(ctypes.Structure):
    """gpb_stats_t from include/gpubuddy.h (GPB_STATS_VERSION 2)."""
    _fields_ = [
        ("version", ctypes.c_uint32), ("num_orders", ctypes.c_uint32),
        ("managed_bytes", ctypes.c_uint64), ("min_block", ctypes.c_uint64),
        ("seq", ctypes.c_uint64),
        ("requested_bytes", ctypes.c_uint64), ("requested_peak", ctypes.c_uint64),
        ("block_bytes", ctypes.c_uint64), ("block_peak", ctypes.c_uint64),
        ("free_bytes", ctypes.c_uint64), ("free_peak", ctypes.c_uint64),
        ("allocs", ctypes.c_uint64), ("frees", ctypes.c_uint64),
        ("failures", ctypes.c_uint64), ("splits", ctypes.c_uint64),
        ("merges", ctypes.c_uint64), ("live_allocs", ctypes.c_uint64),
        ("free_blocks", ctypes.c_uint64 * 48),
        ("largest_free", ctypes.c_uint64), ("internal_frag_bytes", ctypes.c_uint64),
        ("unusable_index", ctypes.c_double * 48), ("external_frag", ctypes.c_double),
        ("tag_bytes", ctypes.c_uint64 * 64),
        ("last_failed_request", ctypes.c_uint64),
    ]


def make_model(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            # Strided convolutions, not max-pooling: every op here has a
            # deterministic CUDA kernel, so two runs must agree bit for bit.
            self.conv = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU())
            self.mlp = nn.Sequential(
                nn.Flatten(), nn.Linear(64 * 8 * 8, 512), nn.ReLU(),
                nn.Dropout(0.1), nn.Linear(512, 10))

        def forward(self, x):
            return self.mlp(self.conv(x))

    return Net()


def train(args):
    """One training run in this process; returns (losses, summary)."""
    lib = None
    if args.allocator == "gpubuddy":
        libpath = find_lib(args.lib)
        if args.publish:
            os.environ["GPB_TORCH_PUBLISH"] = args.publish
        os.environ.setdefault("GPB_TORCH_POOL_SIZE", args.pool_size)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    if args.allocator == "gpubuddy":
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            libpath, "gpb_torch_malloc", "gpb_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
        lib = ctypes.CDLL(libpath)  # the same instance PyTorch dlopen()ed
        lib.gpb_torch_stats.argtypes = [ctypes.c_int, ctypes.POINTER(Stats)]
        lib.gpb_torch_calls.argtypes = [ctypes.c_int] + [ctypes.POINTER(ctypes.c_uint64)] * 3
        lib.gpb_torch_drain.argtypes = [ctypes.c_int]
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda", 0)

    model = make_model(torch).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    # Synthetic data: labels depend on the pixels, so the loss falls.
    n = 4096
    xs = torch.randn(n, 3, 32, 32, generator=g)
    w = torch.randn(3 * 32 * 32, 10, generator=g)
    ys = (xs.flatten(1) @ w).argmax(1)
    # One-hot targets: cross-entropy through nll_loss/gather would use
    # atomics in its backward pass.
    ys = torch.nn.functional.one_hot(ys, 10).float()
    xs, ys = xs.to(dev), ys.to(dev)
    losses = []
    t0 = time.time()
    for step in range(args.steps):
        # Varying batch sizes make the allocator see varying shapes.
        bs = 64 + 32 * (step % 4)
        idx = torch.randint(0, n, (bs,), generator=g).to(dev)
        out = model(xs[idx])
        logp = torch.nn.functional.log_softmax(out, dim=1)
        loss = -(logp * ys[idx]).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == args.steps - 1:
            print(f"[{args.allocator}] step {step} loss {losses[-1]:.6f}",
                  file=sys.stderr, flush=True)
        if args.sleep:
            time.sleep(args.sleep)
    torch.cuda.synchronize()
    summary = {"allocator": args.allocator, "steps": args.steps,
               "seconds": round(time.time() - t0, 3),
               "final_loss": losses[-1]}
    if lib is not None:
        st = Stats()
        rc = lib.gpb_torch_stats(0, ctypes.byref(st))
        summary["peak_requested"] = st.requested_peak if rc == 0 else None
        summary["peak_block_bytes"] = st.block_peak if rc == 0 else None
        # Free everything PyTorch holds, then let the pending frees land.
        del model, opt, xs, ys, out, loss, idx, logp
        import gc
        gc.collect()
        if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
            torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.synchronize()
        rc = lib.gpb_torch_drain(0)
        m, f, fr = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        lib.gpb_torch_calls(0, ctypes.byref(m), ctypes.byref(f), ctypes.byref(fr))
        rc2 = lib.gpb_torch_stats(0, ctypes.byref(st))
        checks = {
            "drain_ok": rc == 0 and rc2 == 0,
            "stats_version": st.version == 2,
            "allocs_eq_mallocs": st.allocs == m.value,
            "frees_eq_frees": st.frees == fr.value,
            "live_eq_mallocs_minus_frees": st.live_allocs == m.value - fr.value,
            "no_malloc_failures": f.value == 0 and st.failures == 0,
        }
        summary.update({"mallocs": m.value, "malloc_failures": f.value,
                        "frees": fr.value, "pool_allocs": st.allocs,
                        "pool_frees": st.frees, "pool_live": st.live_allocs,
                        "pool_live_bytes": st.block_bytes,
                        "pool_splits": st.splits, "pool_merges": st.merges,
                        "checks": checks})
        print(f"[gpubuddy] mallocs {m.value} frees {fr.value} failures {f.value}; "
              f"pool allocs {st.allocs} frees {st.frees} live {st.live_allocs} "
              f"({st.block_bytes} bytes still held by PyTorch)", file=sys.stderr)
    return losses, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="path to libgpubuddy.so (default: GPB_LIB, ./.libs)")
    ap.add_argument("--allocator", choices=["gpubuddy", "default"], default="gpubuddy")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--pool-size", default="4G",
                    help="GPB_TORCH_POOL_SIZE when not set (default 4G)")
    ap.add_argument("--publish", metavar="NAME",
                    help="publish the pool live as NAME.0 for gpubuddy-view")
    ap.add_argument("--sleep", type=float, default=0.0,
                    help="seconds to sleep per step (to watch it live)")
    ap.add_argument("--compare", action="store_true",
                    help="run default and gpubuddy in two processes and compare")
    ap.add_argument("--losses-out", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write a JSON summary here")
    args = ap.parse_args()

    if not args.compare:
        losses, summary = train(args)
        if args.losses_out:
            with open(args.losses_out, "w") as f:
                json.dump({"losses": losses, "summary": summary}, f)
        ok = all(summary.get("checks", {}).values())
        if not ok:
            print("train.py: allocator checks failed: "
                  f"{summary.get('checks')}", file=sys.stderr)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
        return 0 if ok else 1

    import tempfile
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for which in ("default", "gpubuddy"):
            out = os.path.join(tmp, which + ".json")
            cmd = [sys.executable, os.path.abspath(__file__), "--allocator", which,
                   "--steps", str(args.steps), "--seed", str(args.seed),
                   "--pool-size", args.pool_size, "--losses-out", out]
            if which == "gpubuddy":
                cmd += ["--lib", find_lib(args.lib)]
                if args.publish:
                    cmd += ["--publish", args.publish]
            rc = subprocess.call(cmd)
            if rc != 0 or not os.path.exists(out):
                print(f"train.py: the {which} run failed (exit {rc})", file=sys.stderr)
                return 1
            with open(out) as f:
                results[which] = json.load(f)
    a, b = results["default"]["losses"], results["gpubuddy"]["losses"]
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    maxrel = max((abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b)),
                 default=0.0)
    same = len(a) == len(b) and not diff
    summary = {
        "steps": args.steps, "seed": args.seed,
        "losses_identical": same,
        "first_difference": diff[0] if diff else None,
        "max_relative_difference": maxrel,
        "final_loss_default": a[-1], "final_loss_gpubuddy": b[-1],
        "default": results["default"]["summary"],
        "gpubuddy": results["gpubuddy"]["summary"],
    }
    checks = summary["gpubuddy"].get("checks", {})
    ok = same and checks and all(checks.values())
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"train.py: losses {'identical' if same else 'DIFFER'} over "
          f"{len(a)} steps; allocator checks "
          f"{'pass' if checks and all(checks.values()) else 'FAIL'}",
          file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
