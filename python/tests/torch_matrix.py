#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_matrix.py: every torch.cuda memory tool, natively and under
gpubuddy.torch.enable(), each check in a fresh process; the results side by
side. scripts/gpu-check.sh runs it on the GPU machine.

    torch_matrix.py [--out DIR] [--only NAME,...]      all checks, both ways
    torch_matrix.py --one NAME --mode native|gpubuddy|gpubuddy-plain

A check passes when it runs and its own assertions hold; under gpubuddy
the results it reports (numbers that must agree, like CUDA graph outputs
against eager ones) must also equal the native run's. Writes DIR/matrix.md
(one table) and DIR/matrix.json; exits 1 when a check fails under
gpubuddy (or natively: the check itself is then wrong).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20


def _mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 256)).cuda()


def c_stats(torch):
    """memory_allocated and friends, memory_stats' keys, memory_summary."""
    c = torch.cuda
    x = torch.empty(10 * MiB, dtype=torch.uint8, device="cuda")
    a, r = c.memory_allocated(), c.memory_reserved()
    assert a >= 10 * MiB, a
    assert r >= a, (r, a)
    assert c.max_memory_allocated() >= a
    assert c.max_memory_reserved() >= r
    st = c.memory_stats()
    for k in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
              "reserved_bytes.all.current", "active_bytes.all.current",
              "requested_bytes.all.current", "allocation.all.current",
              "num_ooms", "num_alloc_retries"):
        assert k in st, k
    assert st["requested_bytes.all.current"] >= 10 * MiB
    assert "Allocated memory" in c.memory_summary()
    del x
    assert c.memory_allocated() < a
    extra = sorted(k for k in st if k.startswith("gpubuddy."))
    return {"allocated_ge_10MiB": True, "gpubuddy_keys": extra}


def c_peaks(torch):
    """reset_peak_memory_stats and reset_accumulated_memory_stats."""
    c = torch.cuda
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
    del x
    assert c.max_memory_allocated() >= 64 * MiB
    c.reset_peak_memory_stats()
    assert c.max_memory_allocated() < 64 * MiB, c.max_memory_allocated()
    y = torch.empty(MiB, dtype=torch.uint8, device="cuda")
    c.reset_accumulated_memory_stats()
    z = torch.empty(MiB, dtype=torch.uint8, device="cuda")
    n = c.memory_stats()["allocation.all.allocated"]
    assert n == 1, n
    del y, z
    return {"peak_reset": True}


def c_mem_get_info(torch):
    fr, total = torch.cuda.mem_get_info()
    assert 0 < fr <= total
    return {"ok": True}


def c_empty_cache(torch):
    """empty_cache gives memory back: reserved does not grow."""
    c = torch.cuda
    xs = [torch.empty(32 * MiB, dtype=torch.uint8, device="cuda") for _ in range(8)]
    before = c.memory_reserved()
    del xs
    c.empty_cache()
    after = c.memory_reserved()
    assert after <= before, (before, after)
    return {"reserved_fell": after < before}


def c_fraction(torch):
    """set_per_process_memory_fraction caps what may be allocated."""
    c = torch.cuda
    total = c.get_device_properties(0).total_memory
    c.set_per_process_memory_fraction(0.05)
    try:
        torch.empty(int(total * 0.1), dtype=torch.uint8, device="cuda")
        raise AssertionError("no OutOfMemoryError above the fraction")
    except torch.cuda.OutOfMemoryError:
        pass
    x = torch.empty(int(total * 0.01), dtype=torch.uint8, device="cuda")
    del x
    return {"capped": True}


def c_oom(torch):
    """OutOfMemoryError, the OOM observer, and recovery after it."""
    seen = []
    torch._C._cuda_attach_out_of_memory_observer(
        lambda dev, alloc, total, free: seen.append(dev))
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        raise AssertionError("no OutOfMemoryError")
    except torch.cuda.OutOfMemoryError:
        pass
    assert seen == [0], seen
    x = torch.ones(MiB, device="cuda")
    assert x.sum().item() == MiB
    assert torch.cuda.memory_stats()["num_ooms"] == 1
    return {"observer_called": True}


def c_snapshot(torch):
    """_record_memory_history, _snapshot and _dump_snapshot in PyTorch's
    schema with Python frames, rendered by torch.cuda._memory_viz."""
    from torch.cuda import _memory_viz as mv
    torch.cuda.memory._record_memory_history(max_entries=100000)
    m = _mlp(torch)
    loss = m(torch.randn(64, 256, device="cuda")).sum()
    loss.backward()
    snap = torch.cuda.memory._snapshot()
    path = os.path.join(tempfile.mkdtemp(), "snap.pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    assert snap["segments"], "no segments"
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc"]
    assert allocs, "no alloc events"
    here = os.path.basename(__file__)
    assert any(f["filename"].endswith(here) for e in allocs for f in e["frames"]), \
        "no frame of this script"
    blocks = [b for s in snap["segments"] for b in s["blocks"]]
    states = sorted(set(b["state"] for b in blocks))
    assert "active_allocated" in states, "block states %s" % states
    for fn in (mv.segment_plot, mv.trace_plot):  # HTML: offline
        assert len(fn(snap)) > 1000, fn.__name__
    assert "Segment" in mv.segsum(snap) or len(mv.segsum(snap)) > 100, "segsum"
    assert len(mv.trace(snap)) > 100, "trace"
    lines = lambda x: x  # memory_viz's flamegraph.pl is fetched: not offline
    assert mv.memory(snap, lines) and mv.segments(snap, lines), "flamegraph lines"
    assert os.path.getsize(path) > 0
    imp = os.environ.get("GPB_IMPORT_TORCH")
    if imp:  # gpubuddy-import-torch reads it back
        subprocess.run([sys.executable, imp, path, "-o", path + ".trace"],
                       check=True, stdout=subprocess.DEVNULL)
    return {"segments": True, "python_frames": True, "memory_viz": True}


def c_graph(torch):
    """torch.cuda.graph with a private pool, and a second graph sharing it;
    replays give eager's numbers."""
    m = _mlp(torch)
    x = torch.randn(64, 256, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1):
        y1 = m(x)
    with torch.cuda.graph(g2, pool=g1.pool()):
        y2 = m(y1)
    x.copy_(torch.randn(64, 256, device="cuda", generator=None))
    g1.replay()
    g2.replay()
    torch.cuda.synchronize()
    e1 = m(x)
    e2 = m(e1)
    assert torch.equal(y1, e1) and torch.equal(y2, e2)
    out = float(y2.double().sum())
    del g1, g2, y1, y2
    torch.cuda.synchronize()
    return {"equal_eager": True, "checksum": round(out, 3)}


def c_compile_ro(torch):
    """torch.compile(mode="reduce-overhead"): CUDA graph trees."""
    m = _mlp(torch)
    f = torch.compile(m, mode="reduce-overhead")
    sums = []
    for i in range(6):
        torch.manual_seed(i)
        x = torch.randn(32 if i % 2 else 64, 256, device="cuda")
        y = f(x)
        assert torch.allclose(y, m(x), atol=1e-4, rtol=1e-4)
        sums.append(round(float(y.double().sum()), 2))
    return {"matches_eager": True, "sums": sums}


def c_compile(torch):
    m = _mlp(torch)
    f = torch.compile(m)
    x = torch.randn(64, 256, device="cuda")
    y = f(x)
    assert torch.allclose(y, m(x), atol=1e-4, rtol=1e-4)
    return {"matches_eager": True}


def c_record_stream(torch):
    """record_stream on two side streams: the block is not reused before
    their work is done."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    ok = True
    for _ in range(20):
        x = torch.full((4 * MiB,), 7.0, device="cuda")
        outs = []
        for s in (s1, s2):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.cuda._sleep(2000000)
                outs.append(x.sum())
            x.record_stream(s)
        del x
        y = torch.zeros(4 * MiB, device="cuda")  # may reuse x's block
        torch.cuda.synchronize()
        ok &= all(o.item() == 7.0 * 4 * MiB for o in outs)
        del y
    assert ok
    return {"no_early_reuse": True}


def c_mem_pool(torch):
    """torch.cuda.MemPool and use_mem_pool scopes."""
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        a = torch.ones(MiB, device="cuda")
    b = torch.ones(MiB, device="cuda")
    assert a.sum().item() == b.sum().item() == MiB
    assert pool.use_count() >= 1
    del a, b, pool
    return {"ok": True}


def c_caching_alloc(torch):
    p = torch.cuda.caching_allocator_alloc(MiB)
    torch.cuda.caching_allocator_delete(p)
    return {"ok": True, "backend": torch.cuda.get_allocator_backend()}


def _ipc_child(conn):
    import torch  # noqa: F401  PyTorch's own allocator opens the handle
    t = conn.recv()
    conn.send(float(t.sum().item()))


def c_ipc(torch):
    """A CUDA tensor sent to another process (torch.multiprocessing), whose
    allocator is PyTorch's own."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=_ipc_child, args=(there,))
    p.start()
    t = torch.ones(1000, device="cuda")
    try:
        here.send(t)  # pickles here: a refusal raises in this process
        assert here.poll(120), "no answer from the receiver"
        got = here.recv()
    except Exception:
        p.kill()
        raise
    p.join()
    assert got == 1000.0, got
    return {"received": True}


CHECKS = {n[2:]: f for n, f in sorted(globals().items()) if n.startswith("c_")}


def run_one(name, mode):
    if mode.startswith("gpubuddy"):
        import gpubuddy.torch as gt
        # A fixed size, so that checks run side by side fit on one GPU.
        gt.enable(pool_size="8G", vmm=mode != "gpubuddy-plain")
    import torch
    torch.manual_seed(0)
    try:
        out = {"ok": True, **CHECKS[name](torch)}
    except Exception as e:
        import traceback
        traceback.print_exc()  # to stderr, which spawn() keeps on failure
        why = (str(e).splitlines() or [repr(e)])[0]
        out = {"ok": False, "error": "%s: %s" % (type(e).__name__, why[:300])}
    print(json.dumps(out), flush=True)


def spawn(name, mode):
    t0 = time.time()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name,
                        "--mode", mode], capture_output=True, text=True,
                       timeout=600)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            out = json.loads(line)
            break
    else:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        out = {"ok": False, "error": "exit %d: %s" % (p.returncode, tail[:300])}
    if not out["ok"]:
        out["stderr"] = p.stderr.strip().splitlines()[-40:]
    out["s"] = round(time.time() - t0, 1)
    return out


# What gpubuddy answers differently by design: the check passes when its
# error says this (the limit named in docs/GPU.md).
EXPECTED = {("ipc", "gpubuddy"): "only from a plain pool"}
# Results that differ by design: a plain pool holds its range for good.
SAME_BUT = {("empty_cache", "gpubuddy-plain"): {"reserved_fell"}}


def verdict(name, mode, native, mine):
    want = EXPECTED.get((name, mode))
    if want:
        return want in json.dumps(mine)
    if not mine["ok"]:
        return False
    skip = {"s", "backend", "gpubuddy_keys"} | SAME_BUT.get((name, mode), set())
    return all(mine.get(k) == v for k, v in native.items() if k not in skip)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one")
    ap.add_argument("--mode", default="native")
    ap.add_argument("--only")
    ap.add_argument("--out", default=".")
    ap.add_argument("--jobs", type=int, default=4,
                    help="checks run at once, each a process of its own")
    a = ap.parse_args()
    if a.one:
        run_one(a.one, a.mode)
        return 0
    names = a.only.split(",") if a.only else list(CHECKS)
    modes = ["native", "gpubuddy", "gpubuddy-plain"]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(a.jobs) as ex:
        runs = {(n, m): ex.submit(spawn, n, m) for n in names for m in modes}
        rows, fails = {}, 0
        for n in names:
            row = {m: runs[n, m].result() for m in modes}
            for m in modes[1:]:
                row[m]["pass"] = row["native"]["ok"] and \
                    verdict(n, m, row["native"], row[m])
                fails += not row[m]["pass"]
            fails += not row["native"]["ok"]
            rows[n] = row
            print(n, json.dumps(row), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "matrix.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(a.out, "matrix.md"), "w") as f:
        f.write("| check | native | gpubuddy (VMM, the default) | gpubuddy vmm=False |\n"
                "|---|---|---|---|\n")
        for n, r in rows.items():
            cell = lambda x: (("pass" if x["ok"] else "refused as designed: "
                               + x["error"][:60]) if x.get("pass", x["ok"])
                              else "FAIL: " + x.get("error", "differs")[:80])
            f.write("| %s | %s | %s | %s |\n" % (n, cell(r["native"]),
                    cell(r["gpubuddy"]), cell(r["gpubuddy-plain"])))
    print("%d passed, %d failed" % (len(names) * 3 - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
