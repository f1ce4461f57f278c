#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""memory_compare.py: gpubuddy against PyTorch's allocator on real
workloads, side by side on one GPU (issue: PyTorch, first class).

    memory_compare.py base --out DIR --replay PATH [--workloads resnet,gpt,infer]
    memory_compare.py caps --out DIR [--allocators default,expandable,gpubuddy,gpubuddy-plain,gpubuddy-null]
    memory_compare.py caps --out DIR --grid 32 --near COARSE/caps.json
    memory_compare.py caps --out DIR --grid 32 --hint 1.06
    memory_compare.py steps --out DIR [--runs 3] [--versus gpubuddy,gpubuddy:8589934592] [--fork]

base: each workload runs twice under PyTorch's allocator and twice under
gpubuddy (a large pool, its trace recorded), in turn: the losses must be
equal, the median step times are compared, and gpubuddy-replay
--find-min-pool on the recorded trace predicts the smallest pool.
caps: for each allocator, the smallest cap (PyTorch's per-process
fraction) or pool size (gpubuddy) on a 128 MiB grid with which the
workload still runs, each try a fresh process (workloads.py); tries run
several at a time when their caps fit on the GPU together. It searches
between peak live bytes and a size known to run, k sizes a round.
Without base.json (caps alone), one run of each workload under PyTorch's
allocator gives its peak live bytes; --hint R starts each search at R x
that peak, and widens it when that size fails.
steps: step time alone, nothing traced: each workload runs --runs times
under each allocator, in turn (default, then each of --versus), with
more steps than base (resnet 30, gpt 20, infer 120: its 60 shapes twice,
the second pass timed). Each round gives the ratio of each allocator's
median step to PyTorch's, and the median of the per-step ratios
("paired": the same step, the same shapes). With --fork every run is a
child of one process that imported torch once (workloads.py
--alternate), so that runs differ less by the process.
Writes DIR/base.json, DIR/caps.json, DIR/steps.json and DIR/memory.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
G = 128 << 20


def run(workload, allocator, cap=0, trace=None, steps=0, timeout=600):
    cmd = [sys.executable, os.path.join(HERE, "workloads.py"), workload, allocator,
           "--cap", str(cap)]
    if trace:
        cmd += ["--trace", trace]
    if steps:
        cmd += ["--steps", str(steps)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            universal_newlines=True)


def result(p):
    out, _ = p.communicate()
    for line in out.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": False, "error": "no result (exit %s)" % p.returncode}


def med(ms):
    return statistics.median(ms[2:] if len(ms) > 3 else ms) if ms else None


def base(a):
    res = {}
    for w in a.workloads:
        r = {"default": [], "gpubuddy": []}
        for i in range(2):
            for alloc in ("default", "gpubuddy"):
                tr = os.path.join(a.out, "%s.trace.gz" % w) if alloc == "gpubuddy" and i == 0 else None
                x = result(run(w, alloc, trace=tr))
                r[alloc].append(x)
                print("%s %s run %d: ok=%s median %.1f ms %s" % (
                    w, alloc, i, x["ok"], med(x.get("step_ms")) or -1,
                    x.get("error") or ""), file=sys.stderr, flush=True)
        d, g = r["default"], r["gpubuddy"]
        peak = max(x.get("peak_live", 0) for x in d)
        pred = None
        trace = os.path.join(a.out, "%s.trace.0.gz" % w)
        if a.replay and os.path.exists(trace):
            p = subprocess.run([a.replay, "--find-min-pool", "--policy", "bestfit",
                                "--min-block", "512", "--resolution", str(G),
                                "--json", "--quiet", trace],
                               stdout=subprocess.PIPE, universal_newlines=True)
            try:
                pred = json.loads(p.stdout)["runs"][0]["min_pool_size"]
            except (ValueError, KeyError, IndexError):
                pred = None
        res[w] = {
            "peak_live": peak,
            "peak_reserved": max(x.get("peak_reserved", 0) for x in d),
            "losses_equal": all(x["losses"] == d[0]["losses"] for x in d + g),
            "default_repeatable": d[0]["losses"] == d[1]["losses"],
            "step_ms_default": [med(x["step_ms"]) for x in d],
            "step_ms_gpubuddy": [med(x["step_ms"]) for x in g],
            "predicted_min_pool": pred,
            "ok": all(x["ok"] for x in d + g),
            "errors": [x["error"] for x in d + g if x.get("error")],
        }
    with open(os.path.join(a.out, "base.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def rounds(a, w, n):
    """Each round's results, {allocator: result}, in turn."""
    allocs = ["default"] + a.versus
    if not a.fork:
        for i in range(a.runs):
            ys = {}
            for alloc in allocs:
                name, _, cap = alloc.partition(":")  # NAME:BYTES caps it
                ys[alloc] = result(run(w, name, cap=int(cap or 0), steps=n))
            yield ys
        return
    cmd = [sys.executable, os.path.join(HERE, "workloads.py"), w, "--alternate",
           ",".join(allocs), "--rounds", str(a.runs)]
    if n:
        cmd += ["--steps", str(n)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         universal_newlines=True)
    ys, cur = {}, 0
    # Each run's line is kept as it comes: a search stopped midway keeps
    # the rounds it finished.
    log = open(os.path.join(a.out, "steps-%s.jsonl" % w), "a")
    for line in p.stdout:
        if not line.startswith("{"):
            continue
        log.write(line)
        log.flush()
        y = json.loads(line)
        if y.get("round", cur) != cur:  # a round left short is dropped, said
            if ys:
                print("%s round %d: %d of %d runs, dropped" % (
                    w, cur, len(ys), len(allocs)), file=sys.stderr, flush=True)
            ys, cur = {}, y["round"]
        ys[y.get("allocator", "?")] = y
        if len(ys) == len(allocs):
            yield ys
            ys = {}
    p.wait()
    log.close()
    if ys or p.returncode:
        print("%s: workloads.py --alternate stopped (exit %s)" % (w, p.returncode),
              file=sys.stderr, flush=True)


def steps(a):
    # infer: 60 shapes, then the same 60 again; only the second pass is
    # timed, as every shape's first step loads kernels (workloads.py).
    n = {"resnet": 30, "gpt": 20, "infer": 120, "ops": 20}
    warm = {"infer": 60, "ops": 2}
    res = {}
    for w in a.workloads:
        r = {"default": [], "allocs per step": {}}
        for v in a.versus:
            r[v], r["ratio " + v], r["paired " + v] = [], [], []
        for i, ys in enumerate(rounds(a, w, n.get(w, 0))):
            x = {}
            for alloc in ["default"] + a.versus:
                y = ys[alloc]
                x[alloc] = y["step_ms"][warm.get(w, 0):] if y["ok"] else None
                if not y["ok"]:
                    print("%s %s run %d: %s" % (w, alloc, i, y.get("error")),
                          file=sys.stderr, flush=True)
                r[alloc].append(med(x[alloc]))
                k = y.get("allocs", (y.get("gpubuddy") or {}).get("allocs"))
                if y["ok"] and k:  # what a step asks of the allocator
                    r["allocs per step"][alloc] = round(k / n.get(w, 1), 1)
            for v in a.versus:
                if not (x["default"] and x[v]):
                    continue
                r["ratio " + v].append(round(med(x[v]) / med(x["default"]), 4))
                # The same shapes at the same step: each step's own ratio.
                r["paired " + v].append(round(statistics.median(
                    p / q for p, q in zip(x[v], x["default"])), 4))
            print("%s run %d: %s; paired %s" % (w, i, ", ".join(
                "%s %s ms" % (k, med(x[k]) if x[k] else None)
                for k in ["default"] + a.versus), ", ".join(
                "%s %s" % (v, r["paired " + v][-1] if x[v] and x["default"]
                           else None) for v in a.versus)),
                file=sys.stderr, flush=True)
        res[w] = r
    with open(os.path.join(a.out, "steps.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def search(w, alloc, lo, hi, par, gpu_bytes, G=G, hi_runs=False):
    """Smallest multiple of G in (lo, hi] that runs; hi must run (checked
    first unless hi_runs). Returns (size, tries)."""
    tries = []
    lo = lo // G * G
    hi = -(-hi // G) * G
    x = {"ok": True}
    if not hi_runs:
        x = result(run(w, alloc, cap=hi))
        tries.append((hi, x["ok"], x.get("error")))
    while not x["ok"]:  # the known-good end fails: widen
        lo, hi = hi, hi + max(G, hi // 4)
        if hi > gpu_bytes:
            return None, tries
        x = result(run(w, alloc, cap=hi))
        tries.append((hi, x["ok"], x.get("error")))
    while hi - lo > G:
        n = (hi - lo) // G - 1
        k = max(1, min(par, n, int(0.9 * gpu_bytes // hi)))
        pts = sorted({lo + G * max(1, round((j + 1) * (n + 1) / (k + 1)))
                      for j in range(k)})
        pts = [p for p in pts if lo < p < hi]
        procs = [(p, run(w, alloc, cap=p)) for p in pts]
        got = [(p, result(q)) for p, q in procs]
        for p, x in got:
            tries.append((p, x["ok"], x.get("error")))
        ok = [p for p, x in got if x["ok"]]
        bad = [p for p, x in got if not x["ok"] and (not ok or p < min(ok))]
        if ok:
            hi = min(ok)
        if bad:
            lo = max(bad)
        print("  %s %s: (%d MiB, %d MiB]" % (w, alloc, lo >> 20, hi >> 20),
              file=sys.stderr, flush=True)
    return hi, tries


def peaks(a):
    """Without base.json: each workload's peak live bytes from one run
    under PyTorch's allocator, all at once (no trace, no step times)."""
    ps = {w: run(w, "default") for w in a.workloads}
    b = {}
    for w, p in ps.items():
        x = result(p)
        if not x["ok"]:
            sys.exit("memory_compare: %s failed under PyTorch's allocator: %s"
                     % (w, x.get("error")))
        b[w] = {"peak_live": x["peak_live"], "peak_reserved": x["peak_reserved"],
                "predicted_min_pool": None, "losses_equal": None,
                "default_repeatable": None, "step_ms_default": [],
                "step_ms_gpubuddy": []}
    return b


def caps(a):
    import torch
    gpu = torch.cuda.get_device_properties(0).total_memory
    name = torch.cuda.get_device_name(0)
    path = os.path.join(a.out, "base.json")
    if os.path.exists(path):
        with open(path) as f:
            b = json.load(f)
    else:
        b = peaks(a)
    res = {"gpu": name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    grid = a.grid << 20
    near = {}
    if a.near:
        with open(a.near) as f:
            near = json.load(f)
    res["grid"] = grid
    for w in a.workloads:
        if w not in b:
            continue
        peak = b[w]["peak_live"]
        res[w] = {"peak_live": peak}
        for alloc in a.allocators:
            old = near.get(w, {}).get(alloc, {}).get("min")
            lo = peak
            if old:  # a coarser search ran it at old and failed a step below
                hi, lo = old, max(peak, old - near.get("grid", G))
            elif a.hint:  # a guess at the ratio; checked first, widened if short
                hi = int(peak * a.hint) + grid
            elif alloc.startswith("gpubuddy"):
                hi = (b[w]["predicted_min_pool"] or int(peak * 1.3)) + grid
            else:
                hi = max(b[w]["peak_reserved"], peak + grid)
            t0 = time.time()
            size, tries = search(w, alloc, lo, hi, a.parallel, gpu, grid,
                                 hi_runs=bool(old))
            res[w][alloc] = {"min": size, "tries": tries,
                             "seconds": round(time.time() - t0, 1)}
            print("%s %s: %s" % (w, alloc, size), file=sys.stderr, flush=True)
        with open(os.path.join(a.out, "caps.json"), "w") as f:
            json.dump(res, f, indent=1)
    table(a.out, b, res)
    return res


def gib(x):
    return "%.3f GiB" % (x / 2**30) if x else "n/a"


def table(out, b, c):
    cols = [x for x in ("default", "expandable", "gpubuddy", "gpubuddy-plain", "gpubuddy-null")
            if any(x in c.get(w, {}) for w in b)]
    lines = ["Smallest cap or pool that runs (%d MiB grid), %s, %s" % (
                 c.get("grid", G) >> 20, c["gpu"], c["date"]),
             "", "| workload | peak live | " + " | ".join(cols) + " | losses equal | step ms PyTorch / gpubuddy |",
             "|---" * (len(cols) + 4) + "|"]
    for w in b:
        if w not in c:
            continue
        cells = []
        for x in cols:
            m = c[w].get(x, {}).get("min")
            cells.append("%s (%.3fx)" % (gib(m), m / b[w]["peak_live"]) if m else "n/a")
        sd = "/".join("%.1f" % v for v in b[w]["step_ms_default"] if v)
        sg = "/".join("%.1f" % v for v in b[w]["step_ms_gpubuddy"] if v)
        lines.append("| %s | %s | %s | %s | %s ; %s |" % (
            w, gib(b[w]["peak_live"]), " | ".join(cells),
            "n/a" if b[w]["losses_equal"] is None else "yes" if b[w]["losses_equal"]
            else "no (PyTorch repeatable: %s)" % b[w]["default_repeatable"],
            sd, sg))
    with open(os.path.join(out, "memory.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["base", "caps", "steps"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay", help="gpubuddy-replay (base: predicts the pool)")
    ap.add_argument("--workloads", default="resnet,gpt,infer")
    ap.add_argument("--allocators", default="default,expandable,gpubuddy,gpubuddy-null")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--grid", type=int, default=128,
                    help="caps: the search's step in MiB")
    ap.add_argument("--hint", type=float, default=None,
                    help="caps: start each search at peak live x HINT "
                    "(checked first), not at the traced prediction")
    ap.add_argument("--near", help="caps: a coarser run's caps.json; each "
                    "search starts from its result, one coarse step down")
    ap.add_argument("--versus", default="gpubuddy",
                    help="steps: the allocators (A,B) timed against PyTorch's; "
                    "NAME:BYTES runs NAME with that cap or pool size")
    ap.add_argument("--fork", action="store_true",
                    help="steps: run each try as a child of one process "
                    "(workloads.py --alternate); no NAME:BYTES")
    a = ap.parse_args()
    a.workloads = a.workloads.split(",")
    a.allocators = a.allocators.split(",")
    a.versus = a.versus.split(",")
    for v in a.versus:  # NAME:BYTES must name bytes, said before any run
        if ":" in v and not v.partition(":")[2].isdigit():
            ap.error("--versus %s: expected NAME or NAME:BYTES (an integer)" % v)
        if ":" in v and a.fork:
            ap.error("--versus %s: --fork runs take no pool size" % v)
    os.makedirs(a.out, exist_ok=True)
    if a.phase == "base":
        json.dump(base(a), sys.stdout, indent=1)
    elif a.phase == "steps":
        json.dump(steps(a), sys.stdout, indent=1)
    else:
        caps(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
