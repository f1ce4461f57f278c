#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ddp.py ALLOCATOR OUT: DDP training under torchrun, one gpubuddy pool per
rank (scripts/torch-ddp.sh runs it with gpubuddy and with PyTorch's
allocator and compares the losses).

    torchrun --nproc_per_node=2 samples/torch/ddp.py gpubuddy OUT

With gpubuddy each rank publishes its pool as ddp.rRANK.DEVICE; at step
10 each rank reads its own pool live with `gpubuddy-stat --json` (the
GPB_STAT environment variable names the program) and writes what it
saw to OUT/stat-RANK.json; at step 15 rank 0 takes the fleet: gpubuddy-stat
--all, the relay's metrics and the viewer's grid (GPB_VIEW), as
OUT/fleet-*. Rank 0 writes the losses to
OUT/losses-ALLOCATOR.json. BACKEND=gloo runs two ranks on one GPU.

ALLOCATOR gpubuddy-cache: gpubuddy with enable(plan_cache=OUT/ddp.plan),
so each rank's first run writes OUT/ddp.plan.rRANK.DEVICE at exit and
the next run follows it; each rank writes what its pool placed as
planned (stats()["plan"]) to OUT/plan-RANK.json."""
import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist


def main():
    alloc, out = sys.argv[1], sys.argv[2]
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    ngpu = torch.cuda.device_count()
    dev = local % ngpu
    if alloc.startswith("gpubuddy"):
        import gpubuddy.torch as gt
        cache = os.path.join(out, "ddp.plan") if alloc == "gpubuddy-cache" else None
        gt.enable(pool_size="4G", publish="ddp", plan_cache=cache)
    torch.cuda.set_device(dev)
    dist.init_process_group(os.environ.get("BACKEND", "nccl"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(100 + rank)
    losses = []
    for step in range(30):
        x = torch.randn(256, 1024, generator=g).cuda(dev)
        loss = (ddp(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(t.item() / dist.get_world_size())
        if step == 10 and alloc == "gpubuddy":
            name = "ddp.r%d.%d" % (rank, dev)
            p = subprocess.run([os.environ["GPB_STAT"], "--json", name],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            with open(os.path.join(out, "stat-%d.json" % rank), "w") as f:
                json.dump({"name": name, "rc": p.returncode,
                           "stdout": p.stdout.strip(), "stderr": p.stderr.strip(),
                           "stats": gt.stats(dev)}, f)
        if step == 15 and alloc == "gpubuddy" and rank == 0:
            # Every rank's pool on this machine at once: gpubuddy-stat --all
            # and the relay's Prometheus metrics (GPB_METRICS_URL).
            p = subprocess.run([os.environ["GPB_STAT"], "--all"],
                               stdout=subprocess.PIPE, universal_newlines=True)
            with open(os.path.join(out, "fleet-stat-all.txt"), "w") as f:
                f.write(p.stdout)
            # The same pools as the viewer's grid, headless: a PNG and the
            # figures of each pool (GPB_VIEW names the program).
            view = os.environ.get("GPB_VIEW")
            if view:
                png = os.path.join(out, "fleet-grid.png")
                p = subprocess.run([view, "--all", "--headless", "--png", png,
                                    "--json"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE,
                                   universal_newlines=True)
                with open(os.path.join(out, "fleet-grid.json"), "w") as f:
                    f.write(p.stdout if p.returncode == 0 else
                            json.dumps({"rc": p.returncode,
                                        "stderr": p.stderr.strip()}))
            url = os.environ.get("GPB_METRICS_URL")
            if url:
                import urllib.request
                body = urllib.request.urlopen(url, timeout=10).read().decode()
                with open(os.path.join(out, "fleet-metrics.txt"), "w") as f:
                    f.write(body)
        dist.barrier()
    if rank == 0:
        with open(os.path.join(out, "losses-%s.json" % alloc), "w") as f:
            json.dump(losses, f)
    if alloc == "gpubuddy-cache":
        s = gt.stats(dev)
        with open(os.path.join(out, "plan-%d.json" % rank), "w") as f:
            json.dump({"allocs": s["allocs"], "plan": s.get("plan")}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
