#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates the PyTorch snapshot fixtures for tests/test_import_torch.sh.

A small seeded workload (the ground truth: allocs, frees, one OOM) is
written twice in the shape torch.cuda.memory._dump_snapshot() gives:

  torch_snapshot.pickle      PyTorch >= 2.1: time_us, free_requested then
                             free_completed, segment events, frames
  torch_snapshot_old.pickle  older layout: no time_us, one 'free' action

and the traces the importer must produce from each are written from the
ground truth (not by running the importer): NAME.expected without call
sites (--no-frames, a v1 trace) and NAME.sites.expected with the call
sites the entries' frames give (v2). Run it from anywhere; it writes
next to itself. Deterministic: the same files every run.
"""

import os
import pickle
import random

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = 0x7F0000000000
STREAMS = [0, 0x5581D0E0]


def workload():
    rng = random.Random(1234)
    live = {}  # addr -> (size, stream)
    ops = []   # (kind, addr, size, stream)
    slots = list(range(64))
    for step in range(160):
        if live and (rng.random() < 0.45 or len(live) > 40):
            addr = rng.choice(sorted(live))
            size, stream = live.pop(addr)
            ops.append(("free", addr, size, stream))
        else:
            free_slots = [s for s in slots if BASE + s * 0x100000 not in live]
            addr = BASE + rng.choice(free_slots) * 0x100000
            size = 512 * rng.randint(1, 2000)
            stream = rng.choice(STREAMS)
            live[addr] = (size, stream)
            ops.append(("alloc", addr, size, stream))
        if step == 100:
            ops.append(("oom", 0, 80 << 30, 0))
    return ops


def frames(rng):
    return [{"filename": "model.py", "line": rng.randint(1, 300),
             "name": "forward"},
            {"filename": "??", "line": 0, "name": "c10::cuda::alloc"}]


def build(ops, modern):
    rng = random.Random(99)
    entries = []
    expected = []
    t_us = 1700000000000000
    t0 = None
    seq = 0
    sited = []   # the same ops as v2 lines, with their call sites
    site_ids = {}
    live_site = {}

    def site_of(fr):
        # The importer's text of a stack: "FILE:LINE NAME" joined by ';'.
        text = ";".join("%s:%d %s" % (f["filename"], f["line"], f["name"])
                        for f in fr)
        if text not in site_ids:
            site_ids[text] = len(site_ids) + 1
            sited.append("# site %d %s" % (site_ids[text], text))
        return site_ids[text]

    def stamp(e):
        if modern:
            e["time_us"] = t_us
        return e

    def line(kind, addr, size, stream, site):
        nonlocal seq
        seq += 1
        if modern:
            t_ns = (t_us - t0) * 1000
        else:
            t_ns = (len(entries) - 1) * 1000
        expected.append("%d %d %s 0x%x %d 0 0x%x"
                        % (seq, t_ns, kind, addr, size, stream))
        sited.append("%s %d" % (expected[-1], site))

    # A block allocated before the history began: its free is dropped.
    entries.append(stamp({"action": "free_completed", "addr": BASE - 0x1000,
                          "size": 4096, "stream": 0, "frames": []}))
    t0 = t_us
    entries.append(stamp({"action": "segment_alloc", "addr": BASE,
                          "size": 64 << 20, "stream": 0, "frames": []}))
    for kind, addr, size, stream in ops:
        t_us += rng.randint(1, 50)
        if kind == "alloc":
            fr = frames(rng)
            entries.append(stamp({"action": "alloc", "addr": addr,
                                  "size": size, "stream": stream,
                                  "frames": fr}))
            live_site[addr] = site_of(fr)
            line("alloc", addr, size, stream, live_site[addr])
        elif kind == "free":
            if modern:
                entries.append(stamp({"action": "free_requested",
                                      "addr": addr, "size": size,
                                      "stream": stream, "frames": []}))
                t_us += rng.randint(0, 5)
                entries.append(stamp({"action": "free_completed",
                                      "addr": addr, "size": size,
                                      "stream": stream, "frames": []}))
            else:
                entries.append({"action": "free", "addr": addr,
                                "size": size, "stream": stream,
                                "frames": []})
            line("free", addr, size, stream, live_site.pop(addr))
        else:
            fr = frames(rng)
            entries.append(stamp({"action": "oom", "size": size,
                                  "stream": stream, "device_free": 1 << 30,
                                  "frames": fr}))
            line("fail", 0, size, stream, site_of(fr))
            entries.append(stamp({"action": "snapshot", "addr": 0,
                                  "size": 0, "stream": 0, "frames": []}))
    snap = {
        "segments": [{"device": 0, "address": BASE, "total_size": 64 << 20,
                      "stream": 0, "segment_type": "large",
                      "allocated_size": 0, "active_size": 0,
                      "requested_size": 0, "blocks": []}],
        "device_traces": [entries, []],
    }
    if modern:
        snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "",
                                      "max_split_size": -1}
    return snap, expected, sited


def main():
    ops = workload()
    for name, modern in (("torch_snapshot", True),
                         ("torch_snapshot_old", False)):
        snap, expected, sited = build(ops, modern)
        with open(os.path.join(HERE, name + ".pickle"), "wb") as f:
            pickle.dump(snap, f, protocol=4)
        with open(os.path.join(HERE, name + ".expected"), "w") as f:
            f.write("# gpubuddy-trace v1\n"
                    "# seq time_ns op id size tag stream\n")
            f.write("\n".join(expected) + "\n")
        with open(os.path.join(HERE, name + ".sites.expected"), "w") as f:
            f.write("# gpubuddy-trace v2\n"
                    "# seq time_ns op id size tag stream [site]\n")
            f.write("\n".join(sited) + "\n")


if __name__ == "__main__":
    main()
