# SPDX-License-Identifier: MIT
"""gpubuddy.torch's checks against the stand-in torch (fake_torch):
run by tests/test_python.sh with the package and fake_torch on the path."""
import os
import sys

import torch
import gpubuddy
import gpubuddy.torch as gt
from gpubuddy import GpubuddyError


def expect_error(fn, text):
    try:
        fn()
    except GpubuddyError as e:
        msg = str(e)
        assert "\n" not in msg, "not one line: %r" % msg
        assert text in msg, "%r not in %r" % (text, msg)
        return
    raise AssertionError("no GpubuddyError (wanted %r)" % text)


os.environ["FAKE_CUDA"] = "0"
expect_error(lambda: gt.enable(oom_error=False), "PyTorch sees no CUDA device")
os.environ["FAKE_CUDA"] = "1"

expect_error(lambda: gt.enable(policy="worst", oom_error=False), "policy must be one of")
expect_error(lambda: gt.enable(pool_size=-5, oom_error=False), "pool_size must be > 0")
expect_error(lambda: gt.enable(pool_size=1.5, oom_error=False), "pool_size must be bytes")
expect_error(lambda: gt.enable(plan="/nonexistent/run.plan", oom_error=False),
             "no such file")
expect_error(lambda: gt.enable(plan=__file__, policy="buddy", oom_error=False),
             "a plan needs policy 'bestfit'")
assert "GPB_TORCH_PLAN" not in os.environ

os.environ["RANK"] = "1"
gt.enable(pool_size="2G", policy="bestfit", publish="train", min_block=1024,
          oom_error=False, plan=__file__)
assert torch.cuda.memory.calls[-1] == (gpubuddy.library_path(), "gpb_torch_malloc",
                                       "gpb_torch_free"), torch.cuda.memory.calls
assert os.environ["GPB_TORCH_POOL_SIZE"] == "2G"
assert os.environ["GPB_TORCH_POLICY"] == "bestfit"
assert os.environ["GPB_TORCH_MIN_BLOCK"] == "1024"
assert os.environ["GPB_TORCH_PUBLISH"] == "train.r1"
assert os.environ["GPB_TORCH_PLAN"] == __file__
expect_error(lambda: gt.enable(oom_error=False), "already called")

# A new process's view: PyTorch's allocator already in use.
gt._state["enabled"] = False
expect_error(lambda: gt.enable(oom_error=False),
             "must be called before the first CUDA allocation")

expect_error(lambda: gt.stats(), "device 0 has no pool yet")
expect_error(lambda: gt.start_trace("/tmp/x.trace"), "device 0 has no gpubuddy pool")
pool = gt.mem_pool(oom_error=False)
assert isinstance(pool, torch.cuda.MemPool)
print("gpubuddy.torch checks passed")
