#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cupy_torch_mix.py: PyTorch and CuPy in one process, on a real GPU
(scripts/cupy-check.sh runs it).

    cupy_torch_mix.py run gpubuddy --pool BYTES [--steps N]
    cupy_torch_mix.py run native [--torch-cap BYTES] [--cupy-cap BYTES] [--steps N]
    cupy_torch_mix.py search --out DIR [--grid MIB] [--steps N] [--parallel K]

Each step preprocesses a batch of images in CuPy (uint8 to float,
per-channel normalization, an FFT low-pass filter, random flips), hands
it to PyTorch through DLPack, and trains a small CNN on it for one step.
Batch sizes cycle so that blocks of several sizes come and go.

run gpubuddy: gpubuddy.torch and gpubuddy.cupy both enabled with a pool
of BYTES per device. It asserts that the two libraries use one pool (the
same gpubuddy pool address, and a step where the pool's stats hold blocks
of both tags). run native: PyTorch's caching allocator capped at
--torch-cap (set_per_process_memory_fraction) and CuPy's memory pool at
--cupy-cap (MemoryPool.set_limit). Either prints one JSON line.

search: the smallest budget with which the workload runs, on a grid of
--grid MiB, each try a fresh process: for gpubuddy the pool size; for
the two libraries' own pools the smallest PyTorch cap plus the smallest
CuPy limit (two pools cannot lend each other memory, so each needs its
own peak). Writes DIR/cupy.json and DIR/cupy.md; exits 1 when a run
fails its assertions or no budget runs.
"""
import argparse
import json
import os
import subprocess
import sys

MIB = 1 << 20


def workload(steps, check_shared):
    import cupy as cp
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    cp.random.seed(0)
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(64, 2)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    side = 96
    fy = cp.fft.fftfreq(side)[:, None]
    fx = cp.fft.rfftfreq(side)[None, :]
    lowpass = (fy * fy + fx * fx < 0.1).astype(cp.float32)
    both, losses = 0, []
    for i in range(steps):
        n = (64, 96, 128, 80)[i % 4]
        raw = cp.random.randint(0, 256, (n, 3, side, side), dtype=cp.uint8)
        x = raw.astype(cp.float32) / 255
        x = (x - x.mean(axis=(0, 2, 3), keepdims=True)) / (
            x.std(axis=(0, 2, 3), keepdims=True) + 1e-5)
        x = cp.fft.irfft2(cp.fft.rfft2(x) * lowpass, s=(side, side))
        flip = cp.random.rand(n) < 0.5
        x[flip] = x[flip][..., ::-1]
        y = (raw.mean(axis=(1, 2, 3)) > 127.5).astype(cp.int64)
        del raw
        xt, yt = torch.from_dlpack(x), torch.from_dlpack(y)
        loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        if check_shared:  # CuPy's batch and PyTorch's gradients are live
            both += check_shared()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        del x, y, xt, yt, loss
    torch.cuda.synchronize()
    return losses, both


def run_gpubuddy(a):
    import gpubuddy._native as native
    import gpubuddy.cupy
    import gpubuddy.torch
    gpubuddy.torch.enable(pool_size=a.pool)
    gpubuddy.cupy.enable()
    pools = set()

    def shared():
        import torch
        s = gpubuddy.cupy.stats(0)
        pools.add(s["pool"])
        pools.add(native.lib().gpb_torch_pool(0))
        pools.add(gpubuddy.cupy.pool(0))
        torch.cuda.synchronize()
        by = s["bytes_by_library"]
        return int(by["torch"] > 0 and by["cupy"] > 0)
    losses, both = workload(a.steps, shared)
    s = gpubuddy.cupy.stats(0)
    if len(pools) != 1:
        raise AssertionError("PyTorch and CuPy used %d pools: %s" % (len(pools), pools))
    if both == 0:
        raise AssertionError("no step held blocks of both libraries: %s"
                             % s["bytes_by_library"])
    return {"losses": losses, "used_peak": s["used_peak"], "shared_steps": both,
            "cupy_mallocs": s["cupy_mallocs"], "pool": s["pool"]}


def run_native(a):
    import cupy as cp
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    if a.torch_cap:
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.torch_cap / total), 0)
    if a.cupy_cap:
        cp.get_default_memory_pool().set_limit(size=a.cupy_cap)
    peak = [0]

    def track():
        peak[0] = max(peak[0], cp.get_default_memory_pool().total_bytes())
        return 0
    losses, _ = workload(a.steps, track)
    return {"losses": losses, "torch_reserved_peak": torch.cuda.max_memory_reserved(0),
            "cupy_pool_peak": peak[0]}


def run(a):
    try:
        out = run_gpubuddy(a) if a.mode == "gpubuddy" else run_native(a)
        out["ok"] = True
    except AssertionError as e:
        out = {"ok": False, "assertion": str(e)}
    except (MemoryError, RuntimeError) as e:  # OOM of either library
        out = {"ok": False, "error": "%s: %s" % (type(e).__name__,
                                                 str(e).splitlines()[0][:300])}
    print(json.dumps(out), flush=True)
    return 0


def child(args, timeout=300):
    return finish(spawn(args), timeout)


def spawn(args):
    cmd = [sys.executable, os.path.abspath(__file__), "run"] + [str(x) for x in args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)


def finish(p, timeout=300):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return {"ok": False, "error": "timed out"}
    for line in out.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": False, "error": "no result (exit %d): %s" % (
        p.returncode, err.strip().splitlines()[-1:] or "")}


def smallest(name, args, start, grid, log, par=4):
    """The smallest multiple of grid that runs, each try a fresh process
    with args(cap), par tries at a time: from start, the size runs or
    doubles until it does; then each round tries par sizes spread over
    the interval left, so (0, hi] narrows by par + 1 a round."""
    def tries(caps):
        got = [(c, finish(spawn(args(c)))) for c in caps]
        for c, x in got:
            log("%s: %d MiB %s" % (name, c // MIB, "runs" if x["ok"] else "fails"))
        return got
    hi = max(grid, -(-start // grid) * grid)
    lo = 0  # in bytes: known to fail (or nothing)
    while not tries([hi])[0][1]["ok"]:
        lo, hi = hi, hi * 2
        if hi > (256 << 30):
            return None
    while hi - lo > grid:
        n = (hi - lo) // grid - 1  # sizes strictly between
        k = min(par, n)
        caps = sorted({lo + grid * max(1, round((j + 1) * (n + 1) / (k + 1)))
                       for j in range(k)})
        got = tries([c for c in caps if lo < c < hi])
        ok = [c for c, x in got if x["ok"]]
        if ok:
            hi = min(ok)
        bad = [c for c, x in got if not x["ok"] and c < hi]
        if bad:
            lo = max(bad)
    return hi


def search(a):
    grid = a.grid * MIB
    st = ["--steps", a.steps]
    log = lambda m: print("cupy_torch_mix: " + m, file=sys.stderr, flush=True)
    g0 = child(["gpubuddy", "--pool", 16 << 30] + st)
    n0 = child(["native"] + st)
    log("uncapped: gpubuddy %s, native %s" % (g0, n0))
    res = {"grid_mib": a.grid, "steps": a.steps, "gpubuddy_uncapped": g0,
           "native_uncapped": n0}
    if not g0.get("ok") or not n0.get("ok"):
        res["failed"] = "an uncapped run failed"
    else:
        same = max(abs(x - y) for x, y in zip(g0["losses"], n0["losses"]))
        res["loss_max_diff"] = same
        res["gpubuddy_pool"] = smallest(
            "gpubuddy pool", lambda c: ["gpubuddy", "--pool", c] + st,
            g0["used_peak"], grid, log, a.parallel)
        res["torch_cap"] = smallest(
            "PyTorch cap", lambda c: ["native", "--torch-cap", c] + st,
            n0["torch_reserved_peak"], grid, log, a.parallel)
        res["cupy_cap"] = smallest(
            "CuPy limit", lambda c: ["native", "--cupy-cap", c] + st,
            n0["cupy_pool_peak"], grid, log, a.parallel)
        if None in (res["gpubuddy_pool"], res["torch_cap"], res["cupy_cap"]):
            res["failed"] = "no budget ran"
        else:  # the two caps together must run too
            both = child(["native", "--torch-cap", res["torch_cap"],
                          "--cupy-cap", res["cupy_cap"]] + st)
            res["native_both_caps_ok"] = both["ok"]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "cupy.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.out, "cupy.md"), "w") as f:
        f.write(report(res))
    sys.stdout.write(report(res))
    return 1 if "failed" in res else 0


def report(r):
    if "failed" in r:
        return "cupy_torch_mix: FAILED: %s\n%s\n" % (r["failed"], json.dumps(r))
    m = lambda b: "%d MiB" % (b // MIB)
    native = r["torch_cap"] + r["cupy_cap"]
    return ("| allocator | smallest budget (%d MiB grid, %d steps) |\n|---|---|\n"
            "| gpubuddy, one pool for PyTorch and CuPy | %s |\n"
            "| PyTorch's caching allocator + CuPy's memory pool | %s (%s + %s)%s |\n\n"
            "gpubuddy needs %.2fx the memory of the two pools; the largest "
            "loss difference between the two uncapped runs: %.3g.\n" % (
                r["grid_mib"], r["steps"], m(r["gpubuddy_pool"]), m(native),
                m(r["torch_cap"]), m(r["cupy_cap"]),
                "" if r["native_both_caps_ok"] else " (both caps at once: FAILED)",
                r["gpubuddy_pool"] / native, r["loss_max_diff"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("mode", choices=("gpubuddy", "native"))
    r.add_argument("--pool", type=int, default=0)
    r.add_argument("--torch-cap", type=int, default=0)
    r.add_argument("--cupy-cap", type=int, default=0)
    r.add_argument("--steps", type=int, default=12)
    s = sub.add_parser("search")
    s.add_argument("--out", required=True)
    s.add_argument("--grid", type=int, default=16)
    s.add_argument("--steps", type=int, default=12)
    s.add_argument("--parallel", type=int, default=4,
                   help="tries at a time (each its own process)")
    a = ap.parse_args()
    return run(a) if a.cmd == "run" else search(a)


if __name__ == "__main__":
    sys.exit(main())
