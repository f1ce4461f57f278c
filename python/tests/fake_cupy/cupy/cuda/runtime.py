# SPDX-License-Identifier: MIT
"""cupy.cuda.runtime: FAKE_CUDA=0 fails as CuPy does without a GPU."""
import os

device = 0


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount():
    if os.environ.get("FAKE_CUDA") == "0":
        raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    return 2


def getDevice():
    return device
