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

# Every bad argument: one line at enable(), not at the first allocation.
for kw, text in ((dict(pool_size="abc"), "is not a size"),
                 (dict(pool_size="-1G"), "is not a size"),
                 (dict(pool_size="150%"), "percentage must be in (0, 100]"),
                 (dict(pool_size="0%"), "percentage must be in (0, 100]"),
                 (dict(pool_size="x%"), "percentage must be in (0, 100]"),
                 (dict(min_block=3), "min_block must be a power of two"),
                 (dict(min_block=-1), "min_block must be a power of two"),
                 (dict(min_block=2 ** 70), "min_block must be a power of two"),
                 (dict(min_block="x"), "min_block must be a power of two"),
                 (dict(publish="a/b"), "publish must be a name"),
                 (dict(publish=123), "publish must be a name"),
                 (dict(publish=""), "publish must be a name"),
                 (dict(trace="/nonexistent/dir/run.trace"), "no directory"),
                 (dict(plan_cache=""), "plan_cache must be a file path"),
                 (dict(stacks=0), "stacks must be True, False, 'python', 'all' or 1 to 64"),
                 (dict(stacks=65), "stacks must be True, False, 'python', 'all' or 1 to 64"),
                 (dict(stacks="deep"), "stacks must be True, False, 'python', 'all' or 1 to 64")):
    expect_error(lambda: gt.enable(**kw), text)
    assert not gt._state["enabled"]

# With torch's C++ extension build unavailable (this stand-in has no
# torch.utils), enable() falls back to the pluggable allocator, saying in
# one line what will not work.
import io
err, sys.stderr = sys.stderr, io.StringIO()
try:
    gt.enable(pool_size="90%")
    said = sys.stderr.getvalue()
finally:
    sys.stderr = err
assert said.count("\n") == 1 and "pluggable allocator" in said, said
assert "memory_stats" in said and "torch.compile" in said, said
assert torch.cuda.memory.calls[-1][1:] == ("gpb_torch_malloc", "gpb_torch_free")
assert os.environ["GPB_TORCH_VMM"] == "1"  # the default: a VMM pool
assert os.environ["GPB_TORCH_STACKS"] == "0"  # stacks: off by default
gt._state["enabled"] = False
torch.cuda.memory.in_use[0] = False

os.environ["RANK"] = "1"
gt.enable(pool_size="2G", policy="bestfit", publish="train", min_block=1024,
          oom_error=False, plan=__file__, vmm=False, stacks=True)
assert os.environ["GPB_TORCH_VMM"] == "0"
assert os.environ["GPB_TORCH_STACKS"] == "32"
assert torch.cuda.memory.calls[-1] == (gpubuddy.library_path(), "gpb_torch_malloc",
                                       "gpb_torch_free"), torch.cuda.memory.calls
assert os.environ["GPB_TORCH_POOL_SIZE"] == "2G"
assert os.environ["GPB_TORCH_POLICY"] == "bestfit"
assert os.environ["GPB_TORCH_MIN_BLOCK"] == "1024"
assert os.environ["GPB_TORCH_PUBLISH"] == "train.r1"
assert os.environ["GPB_TORCH_PLAN"] == __file__
expect_error(lambda: gt.enable(oom_error=False), "already called")

# stacks="all" (C++ frames too) needs torch's unwinder: Linux on x86-64.
import platform  # noqa: E402
for machine, want in (("x86_64", "all"), ("aarch64", None)):
    real, platform.machine = platform.machine, lambda m=machine: m
    try:
        gt._state["enabled"] = False
        torch.cuda.memory.in_use[0] = False
        if want:
            gt.enable(oom_error=False, stacks="all")
            assert os.environ["GPB_TORCH_STACKS"] == want
        else:
            expect_error(lambda: gt.enable(oom_error=False, stacks="all"),
                         "stacks='all' needs Linux on x86-64")
    finally:
        platform.machine = real
        gt._state["enabled"] = True
        torch.cuda.memory.in_use[0] = True

# A new process's view: PyTorch's allocator already in use.
gt._state["enabled"] = False
expect_error(lambda: gt.enable(oom_error=False),
             "must be called before the first CUDA allocation")

expect_error(lambda: gt.stats(), "device 0 has no pool yet")
expect_error(lambda: gt.start_trace("/tmp/x.trace"), "device 0 has no gpubuddy pool")
pool = gt.mem_pool(oom_error=False)
assert isinstance(pool, torch.cuda.MemPool)

# enable(plan_cache=...): plans kept from run to run.
import gzip
import shutil
import tempfile
tmp = tempfile.mkdtemp()
gt._state["enabled"] = False
torch.cuda.memory.in_use[0] = False
cache = os.path.join(tmp, "run.plan")
expect_error(lambda: gt.enable(plan_cache=cache, trace="x", oom_error=False),
             "excludes trace and plan")
expect_error(lambda: gt.enable(plan_cache=cache, plan=__file__, oom_error=False),
             "excludes trace and plan")
expect_error(lambda: gt.enable(plan_cache=cache, policy="trim", oom_error=False),
             "a plan needs policy 'bestfit'")
expect_error(lambda: gt.enable(plan_cache="/nonexistent/dir/run.plan",
                               oom_error=False), "no directory")
expect_error(lambda: gt.save_plan(), "needs enable(plan_cache=...)")
gt.enable(plan_cache=cache, oom_error=False)
assert os.environ["GPB_TORCH_PLAN_CACHE"] == cache + ".r1"  # RANK=1 above
assert "GPB_TORCH_PLAN" not in os.environ  # left by the enable() above
# What the library records on devices 0 and 1 (a real trace, and a bad
# one), then what exit does with it: device 0 gets its plan and loses its
# recording; device 1's recording is kept, with one line saying why.
here = os.path.dirname(os.path.abspath(__file__))
gpt = os.path.join(here, "..", "..", "samples", "traces", "torch-gpt.trace.gz")
shutil.copy(gpt, cache + ".r1.0.trace.gz")
with gzip.open(cache + ".r1.1.trace.gz", "wt") as f:
    f.write("not a trace\n")
gt._save_plans()
with open(cache + ".r1.0") as f:
    assert f.readline() == "gpubuddy-plan 1\n"
assert not os.path.exists(cache + ".r1.0.trace.gz")
assert os.path.exists(cache + ".r1.1.trace.gz") and not os.path.exists(cache + ".r1.1")
assert gt.save_plan(0) is None  # device 0 now follows its plan
made = gpubuddy.make_plan(gpt, os.path.join(tmp, "p"), min_block=256)
assert made["entries"] == 1408 and made["repeat_from"] == 574, made
expect_error(lambda: gpubuddy.make_plan(gpt, os.path.join(tmp, "q"), min_block=0),
             "min_block must be")
expect_error(lambda: gpubuddy.make_plan(cache + ".r1.1.trace.gz", os.path.join(tmp, "q")),
             "make_plan(")
assert not os.path.exists(os.path.join(tmp, "q"))
shutil.rmtree(tmp)
print("gpubuddy.torch checks passed")
