#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_stacks.py: enable(stacks=...) on a real GPU, each case a fresh
process. scripts/torch-dropin.sh OUT stacks runs it.

    torch_stacks.py [--rounds N] [--replay PATH]
                                  every case; exits 1 when one fails
    torch_stacks.py --one check --stacks python|all [--replay PATH]
    torch_stacks.py --one compile --stacks off|all
    torch_stacks.py --one cost --stacks off|python|all [--native]

check: the pool's trace names this file's function as the call site of
the model's tensors (not PyTorch's frames). With stacks="all" its sites
also carry C++ frames (MODULE+0xOFF) above the Python ones, and the
allocations the autograd engine's threads make, which have no Python
stack, get C++ sites too; gpubuddy-replay --top-sites (given --replay)
still names this file's function. compile: torch.compile (default and
reduce-overhead) trains to the same losses with stacks="all" as with
stacks off, and the trace names this file's function. cost: microseconds per torch.empty +
del (4 KiB to 16 MiB, no kernels) under gpubuddy with stacks off,
"python" and "all", and natively with PyTorch's own
_record_memory_history(stacks=...) for comparison, paired over rounds.
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


def trace_sites(path):
    """(site texts by id, allocations with a site, allocations without)."""
    sites, with_site, without = {}, 0, 0
    for line in open(path):
        if line.startswith("# site "):
            sid, text = line[7:].rstrip("\n").split(" ", 1)
            sites[sid] = text
        elif not line.startswith("#"):
            f = line.split()
            if len(f) >= 7 and f[2] == "alloc":
                if len(f) > 7 and f[7] != "0":
                    with_site += 1
                else:
                    without += 1
    return sites, with_site, without


def top_site_names(replay, path):
    out = subprocess.run([replay, "--top-sites=5", "--json", path],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr.strip()[-300:]
    runs = json.loads(out.stdout)["runs"]
    return [s.get("name") or "" for s in runs[0]["top_sites_at_peak"]]


def check(stacks, replay):
    import gpubuddy.torch as gt
    path = os.path.join(tempfile.mkdtemp(), "run.trace")
    gt.enable(pool_size="4G", stacks=stacks, trace=path)
    import torch
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).cuda()
    for _ in range(3):
        user_model_step(torch, m, torch.randn(64, 256, device="cuda")).backward()
    gt.stop_trace(0)
    sites, with_site, without = trace_sites(path + ".0")
    mine = [t for t in sites.values()
            if "torch_stacks.py:" in t and "user_model_step" in t]
    assert mine, "no site names user_model_step: %s" % list(sites.values())[:3]
    res = {"sites": len(sites), "naming_this_file": len(mine),
           "allocs_with_site": with_site, "allocs_without": without}
    if stacks == "all":
        cpp = [t for t in mine if ".so+0x" in t.split(";")[0]]
        assert cpp, "no C++ frame above user_model_step: %s" % mine[0][:300]
        only_cpp = [t for t in sites.values() if ".py:" not in t]
        assert only_cpp, "no C++-only site (the autograd engine's threads)"
        assert without == 0, "%d allocations without a site" % without
        res.update(cpp_sites=len(cpp), cpp_only_sites=len(only_cpp),
                   cpp_frames_first=cpp[0].split(";")[0][:160])
    if replay:
        names = top_site_names(replay, path + ".0")
        assert any("user_model_step" in n for n in names), names
        res["top_site_names"] = names
    return res


def compiled(stacks):
    """torch.compile (Triton kernels, CUDA graphs) under stacks: the same
    losses as without, and the trace still names this file."""
    import gpubuddy.torch as gt
    path = os.path.join(tempfile.mkdtemp(), "run.trace")
    gt.enable(pool_size="4G", stacks=False if stacks == "off" else stacks,
              trace=path)
    import torch
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                            torch.nn.Linear(512, 256)).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=1e-5)
    losses = {}
    for mode in ("default", "reduce-overhead"):
        f = torch.compile(m, mode=mode)
        for step in range(4):
            torch.manual_seed(step)
            loss = user_model_step(torch, f, torch.randn(64, 256, device="cuda"))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.setdefault(mode, []).append(round(loss.item(), 4))
    gt.stop_trace(0)
    sites, with_site, without = trace_sites(path + ".0")
    assert stacks == "off" or any("user_model_step" in t for t in sites.values()), \
        "no site names user_model_step"
    return {"losses": losses, "sites": len(sites), "allocs_without": without}


def cost(stacks, native, n=20000):
    if native:
        import torch
        if stacks != "off":
            torch.cuda.memory._record_memory_history(max_entries=100000,
                                                     stacks=stacks)
    else:
        import gpubuddy.torch as gt
        gt.enable(pool_size="4G", stacks=False if stacks == "off" else stacks)
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


MODES = [(alloc, st) for alloc in ("gpubuddy", "native")
         for st in ("off", "python", "all")]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", choices=["check", "compile", "cost"])
    ap.add_argument("--stacks", choices=["off", "python", "all"], default="python")
    ap.add_argument("--native", action="store_true")
    ap.add_argument("--replay", help="gpubuddy-replay, to read the check's trace")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if a.one:
        try:
            out = {"ok": True, **(check(a.stacks, a.replay) if a.one == "check"
                                  else compiled(a.stacks) if a.one == "compile"
                                  else cost(a.stacks, a.native))}
        except Exception as e:
            out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out), flush=True)
        return 0
    rep = ["--replay", a.replay] if a.replay else []
    res = {"check_" + st: spawn("--one", "check", "--stacks", st, *rep)
           for st in ("python", "all")}
    comp = {st: spawn("--one", "compile", "--stacks", st) for st in ("off", "all")}
    same = all(c.get("ok") for c in comp.values()) and \
        comp["off"]["losses"] == comp["all"]["losses"]
    res["check_compile"] = dict(comp["all"], ok=same, losses_off=comp["off"].get("losses"))
    rounds = {"%s/%s" % m: [] for m in MODES}
    for r in range(a.rounds):  # each round every mode once, fresh processes
        for alloc, st in MODES:
            got = spawn("--one", "cost", "--stacks", st,
                        *(["--native"] if alloc == "native" else []))
            rounds["%s/%s" % (alloc, st)].append(got.get("us_per_op"))
    res["cost_us"] = rounds
    res["median_us"] = {k: statistics.median(v) for k, v in rounds.items()
                        if v and None not in v}
    # Each stacks mode against its allocator's "off" of the same round.
    res["median_ratio_to_off"] = {
        k: statistics.median(x / o for x, o in zip(v, rounds[k.split("/")[0] + "/off"]))
        for k, v in rounds.items() if v and None not in v and None not in
        rounds[k.split("/")[0] + "/off"] and not k.endswith("/off")}
    print(json.dumps(res, indent=1))
    failed = [k for k in res if k.startswith("check_") and not res[k].get("ok")]
    failed += [k for k, v in rounds.items() if None in v]
    print("%d passed, %d failed" % (3 + len(rounds) - len(failed), len(failed)))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
