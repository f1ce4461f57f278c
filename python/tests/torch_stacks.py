#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_stacks.py: enable(stacks=...) on a real GPU, each case a fresh
process. scripts/torch-dropin.sh OUT stacks runs it.

    torch_stacks.py              both cases; exits 1 when one fails
    torch_stacks.py --one check|cost [--stacks N]

check: with stacks=True, the pool's trace names this file's functions
as the call sites of the model's tensors (gpubuddy's own frames, not
PyTorch's). cost: microseconds per torch.empty + del (4 KiB to 16 MiB,
no kernels), with stacks off and on, paired over rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def user_model_step(torch, m, x):
    return m(x).sum()


def check():
    import gpubuddy.torch as gt
    path = os.path.join(tempfile.mkdtemp(), "run.trace")
    gt.enable(pool_size="4G", stacks=True, trace=path)
    import torch
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).cuda()
    for _ in range(3):
        user_model_step(torch, m, torch.randn(64, 256, device="cuda")).backward()
    gt.stop_trace(0)
    sites = [l for l in open(path + ".0") if l.startswith("# site ")]
    mine = [l for l in sites if "torch_stacks.py:" in l and "user_model_step" in l]
    assert mine, "no site names user_model_step: %s" % sites[:3]
    return {"sites": len(sites), "naming_this_file": len(mine)}


def cost(stacks, n=20000):
    import gpubuddy.torch as gt
    gt.enable(pool_size="4G", stacks=stacks)
    import torch
    sizes = [4096 << (i % 13) for i in range(n)]
    for s in sizes[:2000]:  # warm: every site and block seen once
        t = torch.empty(s, dtype=torch.uint8, device="cuda")
        del t
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in sizes:
        t = torch.empty(s, dtype=torch.uint8, device="cuda")
        del t
    return {"us_per_op": round((time.perf_counter() - t0) / n * 1e6, 3)}


def spawn(*args):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                       capture_output=True, text=True, timeout=300)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": False, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", choices=["check", "cost"])
    ap.add_argument("--stacks", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if a.one:
        try:
            out = {"ok": True, **(check() if a.one == "check" else
                                  cost(a.stacks or False))}
        except Exception as e:
            out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out), flush=True)
        return 0
    res = {"check": spawn("--one", "check")}
    ratios = []
    for r in range(a.rounds):
        off = spawn("--one", "cost")
        on = spawn("--one", "cost", "--stacks", "32")
        if off.get("ok") and on.get("ok"):
            ratios.append((off["us_per_op"], on["us_per_op"]))
    res["cost"] = {"off_on_us": ratios,
                   "median_off": statistics.median(x for x, _ in ratios) if ratios else None,
                   "median_on": statistics.median(y for _, y in ratios) if ratios else None}
    print(json.dumps(res, indent=1))
    ok = res["check"].get("ok") and len(ratios) == a.rounds
    print("%d passed, %d failed" % (ok, not ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
