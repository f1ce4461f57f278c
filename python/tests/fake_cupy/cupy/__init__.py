# SPDX-License-Identifier: MIT
"""A stand-in for cupy, just enough for gpubuddy.cupy's own checks
(tests/test_python.sh): FAKE_CUDA=0 says no GPU. The allocator it is
given is called as CuPy calls it, and CFunctionAllocatorMemory calls the C
functions for real, through ctypes, with the arguments CuPy passes."""
from . import cuda  # noqa: F401
