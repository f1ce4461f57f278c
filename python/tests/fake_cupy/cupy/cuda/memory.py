# SPDX-License-Identifier: MIT
"""cupy.cuda.memory: CuPy's types, with CFunctionAllocatorMemory calling
the C malloc and free as CuPy does (void *(void *, size_t, int) and
void (void *, void *, int)), and recording what it was given."""
import ctypes

allocator = "cupy's MemoryPool.malloc"
made = []  # (size, param, malloc, free, device) of each memory
_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__("Out of memory allocating {:,} bytes".format(size))
        self._size, self._total, self._limit = size, total, limit


class CFunctionAllocatorMemory:
    def __init__(self, size, param, malloc_func, free_func, device_id):
        made.append((size, param, malloc_func, free_func, device_id))
        self.size, self._param, self.device_id = size, param, device_id
        self._free = _FREE(free_func)
        self.ptr = 0
        if size > 0:
            self.ptr = _MALLOC(malloc_func)(param, size, device_id) or 0

    def __del__(self):
        if self.ptr:
            self._free(self._param, self.ptr, self.device_id)


class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset
