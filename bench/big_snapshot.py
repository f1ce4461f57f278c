#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""big_snapshot.py SIZE_MB OUT.pickle: writes a PyTorch memory snapshot of
about SIZE_MB megabytes, shaped like a real one (torch.cuda.memory.
_dump_snapshot): device_traces entries whose frames are lists of 30 to 70
frame dicts shared between stacks (as torch's symbolizer shares them, so
the pickle memoizes each dict once), 400 distinct stacks, alloc /
free_requested / free_completed pairs with about 2,000 allocations live,
an oom now and then, and one segment of blocks at the end. Fixed seed:
the same SIZE gives the same file. For scripts/bench-big-snapshot.sh."""
import pickle
import random
import sys


def main():
    size = int(float(sys.argv[1]) * 1e6)
    out = sys.argv[2]
    rnd = random.Random(36)
    frames = [{"filename": "/venv/lib/python3.11/site-packages/torch/%s.py"
               % rnd.choice(["nn/modules/module", "nn/functional",
                             "_tensor", "autograd/function"]),
               "line": rnd.randrange(1, 3000), "name": "f%d" % k}
              for k in range(3000)]
    frames += [{"filename": "/srv/model/layer%d.py" % (k % 40),
                "line": k, "name": "forward"} for k in range(500)]
    stacks = []
    for _ in range(400):
        n = rnd.randrange(30, 71)
        stacks.append([rnd.choice(frames) for _ in range(n)])
    trace, live, t, addr = [], [], 0, 1 << 40
    # About 380 bytes an entry with 50 memo references a stack.
    n_entries = max(10, size // 380)
    while len(trace) < n_entries:
        t += rnd.randrange(1, 50)
        if live and (len(live) > 2000 or rnd.random() < 0.45):
            a, s, st = live.pop(rnd.randrange(len(live)))
            for act in ("free_requested", "free_completed"):
                trace.append({"action": act, "addr": a, "size": s,
                              "stream": 0, "time_us": t,
                              "frames": list(st)})
        elif rnd.random() < 0.001:
            st = rnd.choice(stacks)
            trace.append({"action": "oom", "size": 1 << 36, "stream": 0,
                          "time_us": t, "device_free": 0,
                          "frames": list(st)})
        else:
            s = rnd.choice([512, 4096, 1 << 20, 3 << 20, 20 << 20])
            addr += s + 512
            st = rnd.choice(stacks)
            live.append((addr, s, st))
            trace.append({"action": "alloc", "addr": addr, "size": s,
                          "stream": 0, "time_us": t, "frames": list(st)})
    blocks = [{"address": a, "size": s, "requested_size": s,
               "state": "active_allocated", "frames": list(st)}
              for a, s, st in live]
    seg = {"device": 0, "address": 1 << 40, "total_size": addr,
           "allocated_size": 0, "active_size": 0, "requested_size": 0,
           "stream": 0, "segment_type": "large", "blocks": blocks}
    with open(out, "wb") as f:
        pickle.dump({"segments": [seg], "device_traces": [trace]}, f,
                    protocol=4)


if __name__ == "__main__":
    main()
