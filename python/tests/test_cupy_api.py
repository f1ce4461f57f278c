# SPDX-License-Identifier: MIT
"""gpubuddy.cupy's checks against the stand-in cupy (fake_cupy), run by
tests/test_python.sh with the package and fake_cupy on the path. On a
device the machine does not have, the shared pool cannot be made: a
malloc must raise CuPy's OutOfMemoryError with gpubuddy's reason, in one
line."""
import ctypes
import os

import cupy
import gpubuddy
import gpubuddy.cupy as gc
from gpubuddy import GpubuddyError


def expect_error(fn, text, kind=GpubuddyError):
    try:
        fn()
    except kind as e:
        msg = str(e)
        assert "\n" not in msg, "not one line: %r" % msg
        assert text in msg, "%r not in %r" % (text, msg)
        return
    raise AssertionError("no %s (wanted %r)" % (kind.__name__, text))


os.environ["FAKE_CUDA"] = "0"
expect_error(gc.enable, "CuPy sees no CUDA device (cudaErrorNoDevice")
os.environ["FAKE_CUDA"] = "1"
expect_error(lambda: gc.enable(policy="worst"), "policy must be one of")
expect_error(lambda: gc.enable(pool_size=0), "pool_size must be > 0")
expect_error(lambda: gc.enable(pool_size=2.5), "pool_size must be bytes")
expect_error(gc.disable, "enable() was not called")
assert cupy.cuda.get_allocator() == "cupy's MemoryPool.malloc"

# A CuPy whose C-function memory differs: said at enable(), not at a malloc.
real = cupy.cuda.memory.CFunctionAllocatorMemory
cupy.cuda.memory.CFunctionAllocatorMemory = lambda size, param: None
expect_error(gc.enable, "has no CFunctionAllocatorMemory(size, param, malloc, free, device)")
cupy.cuda.memory.CFunctionAllocatorMemory = real
assert cupy.cuda.get_allocator() == "cupy's MemoryPool.malloc"

os.environ["RANK"] = "3"
gc.enable(pool_size="1G", policy="buddy", publish="prep")
assert os.environ["GPB_TORCH_POOL_SIZE"] == "1G"
assert os.environ["GPB_TORCH_POLICY"] == "buddy"
assert os.environ["GPB_TORCH_PUBLISH"] == "prep.r3"
expect_error(gc.enable, "already called")
alloc = cupy.cuda.get_allocator()
assert callable(alloc)

# As CuPy calls it: size 0 needs no memory; the stream and device current
# at the malloc go to the C functions, which are the library's.
lib = gpubuddy._native.lib()
addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
assert alloc(0).ptr == 0
cupy.cuda.current.ptr = 0x5000
# Device 63: no machine has it, so even on a GPU host its pool cannot be
# made (within the library's 64 devices).
cupy.cuda.runtime.device = 63
expect_error(lambda: alloc(4096), "gpubuddy: device 63 has no pool",
             cupy.cuda.memory.OutOfMemoryError)
size, param, malloc, free, device = cupy.cuda.memory.made[-1]
assert (size, param, device) == (4096, 0x5000, 63), cupy.cuda.memory.made[-1]
assert malloc == addr(lib.gpb_cupy_malloc) and free == addr(lib.gpb_cupy_free)
try:
    alloc(512)
except MemoryError:  # what programs catch
    pass
else:
    raise AssertionError("no MemoryError")
m = ctypes.c_uint64()
lib.gpb_cupy_calls(63, None, ctypes.byref(m), None)
assert m.value == 2, m.value  # both failures counted by the C side
expect_error(lambda: gc.stats(63), "device 63 has no pool yet")
expect_error(lambda: gc.pool(63), "pool of device 63")

gc.disable()
assert cupy.cuda.get_allocator() == "cupy's MemoryPool.malloc"
print("gpubuddy.cupy against fake cupy: all checks passed")
