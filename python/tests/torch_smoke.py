# SPDX-License-Identifier: MIT
"""torch_smoke.py [enable|mem_pool]: gpubuddy.torch on a real GPU, in a
fresh process each (scripts/gpu-check.sh runs both).

enable: tensors come from gpubuddy; stats() and a trace see them;
exhausting the pool raises torch.cuda.OutOfMemoryError with gpubuddy's
explanation, and the program goes on after catching it; enable() again
is refused. mem_pool: only the tensors made inside use_mem_pool come from
gpubuddy."""
import os
import sys
import tempfile

import torch
import gpubuddy.torch as gt
from gpubuddy import GpubuddyError

MiB = 1 << 20


def enable_case():
    gt.enable(pool_size=512 * MiB, publish="smoke")
    x = torch.randn(1024, 1024, device="cuda")  # 4 MiB
    s = gt.stats()
    assert s["allocs"] >= 1 and s["used_bytes"] >= 4 * MiB, s
    # The default VMM pool reserves a wider range; its budget is the size.
    assert s["budget_bytes"] == 512 * MiB and s["held_bytes"] <= 512 * MiB, s
    path = os.path.join(tempfile.mkdtemp(), "smoke.trace")
    gt.start_trace(path)
    y = x @ x
    torch.cuda.synchronize()
    gt.stop_trace()
    assert os.path.getsize(path) > 0
    try:
        torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError as e:
        msg = str(e)
        for want in ("cannot allocate 1073741824 bytes", "largest free block",
                     "pool's 536870912 bytes of memory are mapped"):
            assert want in msg, (want, msg)
        print("OutOfMemoryError:", msg.splitlines()[0])
    else:
        raise AssertionError("no OutOfMemoryError from an exhausted pool")
    z = y + 1  # still usable after the error
    torch.cuda.synchronize()
    try:
        gt.enable()
        raise AssertionError("enable() twice was accepted")
    except GpubuddyError as e:
        print("second enable():", e)
    s = gt.stats()
    assert s["failures"] >= 1, s  # the pool's count, whichever front end
    del x, y, z


def mem_pool_case():
    pool = gt.mem_pool(pool_size=256 * MiB)
    with torch.cuda.use_mem_pool(pool):
        a = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
    b = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    s = gt.stats()
    assert 64 * MiB <= s["used_bytes"] < 128 * MiB, s  # a, not b
    del a, b


if __name__ == "__main__":
    case = sys.argv[1] if len(sys.argv) > 1 else "enable"
    {"enable": enable_case, "mem_pool": mem_pool_case}[case]()
    print("torch_smoke %s: ok" % case)
