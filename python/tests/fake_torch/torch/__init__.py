# SPDX-License-Identifier: MIT
"""A stand-in for torch, just enough for gpubuddy.torch's own checks
(tests/test_python.sh): FAKE_CUDA=0 says no GPU; change_current_allocator
fails after allocate() as PyTorch's does once its allocator is in use."""
import os

__version__ = "0.0-fake"


class device:
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index


from . import cuda  # noqa: E402
