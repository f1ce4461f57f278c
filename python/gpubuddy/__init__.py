# SPDX-License-Identifier: MIT
"""gpubuddy: a power-of-two buddy allocator for CUDA memory.

`import gpubuddy` needs nothing but the library built into this package;
`gpubuddy.torch` makes it PyTorch's CUDA allocator (it needs torch):

    import gpubuddy.torch
    gpubuddy.torch.enable(pool_size="20G")   # before the first CUDA tensor
    ...
    print(gpubuddy.torch.stats())

A run's trace, laid out offline, is a plan that the next run follows in
less memory: gpubuddy.make_plan(trace, out), or python -m gpubuddy replay
--plan-out OUT TRACE.
"""
from ._native import GpubuddyError, library_path, version
from ._plan import make_plan, replay_path

__all__ = ["GpubuddyError", "library_path", "make_plan", "replay_path", "version"]
__version__ = version()
