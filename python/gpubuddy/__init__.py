# SPDX-License-Identifier: MIT
"""gpubuddy: a power-of-two buddy allocator for CUDA memory.

`import gpubuddy` needs nothing but the library built into this package;
`gpubuddy.torch` makes it PyTorch's CUDA allocator (it needs torch):

    import gpubuddy.torch
    gpubuddy.torch.enable(pool_size="20G")   # before the first CUDA tensor
    ...
    print(gpubuddy.torch.stats())
"""
from ._native import GpubuddyError, library_path, version

__all__ = ["GpubuddyError", "library_path", "version"]
__version__ = version()
