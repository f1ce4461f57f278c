# SPDX-License-Identifier: MIT
"""gpubuddy as CuPy's allocator.

    import gpubuddy.cupy
    gpubuddy.cupy.enable()          # before the first CuPy array
    x = cupy.zeros(...)             # memory from gpubuddy
    print(gpubuddy.cupy.stats())

Each device's memory comes from gpubuddy's shared pool of that device
(gpb_device_pool): with gpubuddy.torch enabled too, PyTorch and CuPy
allocate from one pool, not two caches. Blocks are tagged by library, so
stats()["bytes_by_library"], gpubuddy-view --color tag and the
OutOfMemoryError text show what each holds. Exhaustion raises CuPy's
OutOfMemoryError (a subclass of it) with gpubuddy's explanation.

Under the hood: cupy.cuda.set_allocator with a function that makes
cupy.cuda.memory.CFunctionAllocatorMemory over the C entry points
gpb_cupy_malloc and gpb_cupy_free (lib/gpu/cupy.c). Its param is CuPy's
current stream at the allocation, and the free is ordered on that stream
(see lib/gpu/cupy.c for why): keep a stream alive while arrays made on it
live, as with CuPy's own pool.
"""
import ctypes
import os

from ._native import GpubuddyError, check, lib, pool_stats

_POLICIES = ("buddy", "trim", "bestfit")
_state = {"enabled": False, "previous": None}


def _import_cupy():
    try:
        import cupy
    except ImportError:  # one line, naming what is missing
        raise GpubuddyError("gpubuddy.cupy.enable() needs CuPy, and the module "
                            "'cupy' is not installed") from None
    return cupy


def _entry_points():
    """The C entry points' addresses, with the signatures this module calls."""
    l = lib()
    u64p = ctypes.POINTER(ctypes.c_uint64)
    for name, res, args in (
            ("gpb_device_pool", ctypes.c_int,
             [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
            ("gpb_cupy_calls", ctypes.c_int, [ctypes.c_int, u64p, u64p, u64p]),
            ("gpb_cupy_bytes", ctypes.c_int, [ctypes.c_int, u64p, u64p]),
            ("gpb_cupy_explain", ctypes.c_int,
             [ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t])):
        f = getattr(l, name)
        f.restype = res
        f.argtypes = args
    addr = ctypes.cast
    return (addr(l.gpb_cupy_malloc, ctypes.c_void_p).value,
            addr(l.gpb_cupy_free, ctypes.c_void_p).value)


def _configure(pool_size, policy, publish):
    """The GPB_TORCH_* settings the shared pools are made from (at each
    device's first allocation, by whichever library comes first)."""
    env = {}
    if pool_size is not None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, (int, str)):
            raise GpubuddyError("gpubuddy: pool_size must be bytes (int) or a "
                                "string like '20G' or '90%%', not %r" % (pool_size,))
        if isinstance(pool_size, int) and pool_size <= 0:
            raise GpubuddyError("gpubuddy: pool_size must be > 0, not %d" % pool_size)
        env["GPB_TORCH_POOL_SIZE"] = str(pool_size)
    if policy is not None:
        if policy not in _POLICIES:
            raise GpubuddyError("gpubuddy: policy must be one of %s, not %r"
                                % (", ".join(_POLICIES), policy))
        env["GPB_TORCH_POLICY"] = policy
    if publish:
        rank = os.environ.get("RANK")  # torchrun: one process per GPU
        env["GPB_TORCH_PUBLISH"] = publish if rank is None else "%s.r%s" % (publish, rank)
    os.environ.update(env)


def explain(size, device):
    """gpubuddy's one-line reason why `size` bytes do not fit on device."""
    buf = ctypes.create_string_buffer(1024)
    lib().gpb_cupy_explain(device, size, buf, len(buf))
    return buf.value.decode()


def _oom_class(cupy):
    """CuPy's OutOfMemoryError with gpubuddy's message: code that catches
    CuPy's (or MemoryError) catches it."""
    base = cupy.cuda.memory.OutOfMemoryError

    class OutOfMemoryError(base):
        def __init__(self, size, device):
            MemoryError.__init__(self, explain(size, device))
            self._size, self._total, self._limit = size, -1, 0

        def __reduce__(self):
            # The class is made at enable(): pickled (multiprocessing), it
            # goes as a MemoryError with the same text.
            return (MemoryError, (str(self),))
    return OutOfMemoryError


def _allocator(cupy, malloc, free):
    """CuPy's allocator: a function of the size, returning a MemoryPointer."""
    memory = cupy.cuda.memory
    make, pointer = memory.CFunctionAllocatorMemory, memory.MemoryPointer
    stream, device = cupy.cuda.get_current_stream, cupy.cuda.runtime.getDevice
    oom = _oom_class(cupy)

    def gpubuddy_malloc(size):
        d = device()
        # param: the stream the free will be ordered on (lib/gpu/cupy.c).
        mem = make(size, stream().ptr, malloc, free, d)
        if size and not mem.ptr:
            raise oom(size, d)
        return pointer(mem, 0)
    return gpubuddy_malloc


def enable(pool_size=None, policy=None, publish=None):
    """Makes gpubuddy CuPy's device memory allocator, for every device.

    Call it before the first CuPy array (memory CuPy's own pool holds
    already stays there until freed). pool_size, policy and publish are as
    in gpubuddy.torch.enable() and set the same GPB_TORCH_* settings: the
    pool of a device is one for both libraries, made by the first one to
    allocate there, so give the settings to one of them.
    """
    cupy = _import_cupy()
    if _state["enabled"]:
        raise GpubuddyError("gpubuddy.cupy.enable() was already called")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver, no device
        raise GpubuddyError("gpubuddy.cupy.enable(): CuPy sees no CUDA device "
                            "(%s)" % str(e).splitlines()[0]) from None
    if n == 0:
        raise GpubuddyError("gpubuddy.cupy.enable(): CuPy sees no CUDA device")
    _configure(pool_size, policy, publish)
    malloc, free = _entry_points()
    try:  # a size of 0 allocates nothing: this checks the signature only
        cupy.cuda.memory.CFunctionAllocatorMemory(0, 0, malloc, free, 0)
    except (AttributeError, TypeError) as e:
        raise GpubuddyError("gpubuddy.cupy.enable(): CuPy %s has no "
                            "CFunctionAllocatorMemory(size, param, malloc, free, "
                            "device) (%s)" % (getattr(cupy, "__version__", "?"),
                                              e)) from None
    _state["previous"] = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(_allocator(cupy, malloc, free))
    _state["enabled"] = True


def disable():
    """Gives CuPy back the allocator it had before enable(); arrays made
    from gpubuddy stay valid and go back to it when they die."""
    if not _state["enabled"]:
        raise GpubuddyError("gpubuddy.cupy.disable(): enable() was not called")
    _import_cupy().cuda.set_allocator(_state["previous"])
    _state["enabled"] = False


def pool(device=0):
    """The address of the device's shared gpubuddy pool (the one
    gpubuddy.torch uses too), made now if it is not yet; raises
    GpubuddyError when it cannot be made."""
    _entry_points()
    p = ctypes.c_void_p()
    check(lib().gpb_device_pool(int(device), ctypes.byref(p)),
          "pool of device %d" % device)
    return p.value


def stats(device=None):
    """The device's pool stats as a dict, as gpubuddy.torch.stats() gives
    them, with the CuPy calls it served (cupy_mallocs, cupy_failed_mallocs,
    cupy_frees), the pool's address ("pool") and the block bytes each
    library holds ("bytes_by_library": {"torch": ..., "cupy": ...})."""
    if device is None:
        device = _import_cupy().cuda.runtime.getDevice()
    d = int(device)
    _entry_points()
    l = lib()
    p = l.gpb_torch_pool(d)
    if not p:
        raise GpubuddyError("gpubuddy: device %d has no pool yet (no CUDA "
                            "allocation through gpubuddy on it)" % d)
    out = pool_stats(p)
    m, f, fr = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    check(l.gpb_cupy_calls(d, ctypes.byref(m), ctypes.byref(f), ctypes.byref(fr)),
          "cupy calls")
    tb, cb = ctypes.c_uint64(), ctypes.c_uint64()
    check(l.gpb_cupy_bytes(d, ctypes.byref(tb), ctypes.byref(cb)), "bytes by library")
    out.update(device=d, pool=p, cupy_mallocs=m.value, cupy_failed_mallocs=f.value,
               cupy_frees=fr.value,
               bytes_by_library={"torch": tb.value, "cupy": cb.value})
    return out
