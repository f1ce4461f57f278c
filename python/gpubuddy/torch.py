# SPDX-License-Identifier: MIT
"""gpubuddy as PyTorch's CUDA allocator.

    import gpubuddy.torch
    gpubuddy.torch.enable(pool_size="20G")  # before the first CUDA tensor
    model = ...                             # every tensor now comes from gpubuddy
    print(gpubuddy.torch.stats())

Each device the program uses gets its own pool, made at its first
allocation. Exhaustion raises torch.cuda.OutOfMemoryError with gpubuddy's
explanation, so PyTorch's fallbacks (cuDNN's smaller workspaces) and a
program's own handlers work as with PyTorch's allocator. For one scope
only (a KV cache, say), use mem_pool() with torch.cuda.use_mem_pool.
"""
import atexit
import os
import sys

from ._native import (GpubuddyError, check, lib, library_path, pool_plan,
                      pool_stats)
from ._plan import make_plan

try:
    import torch as _torch
except ImportError:  # one line, naming what is missing
    raise ImportError("gpubuddy.torch needs PyTorch, and the module 'torch' "
                      "is not installed") from None

_POLICIES = ("buddy", "trim", "bestfit")
_state = {"enabled": False, "alloc": None, "cache": None, "min_block": 512}


def _cache_name(plan_cache, policy, trace, plan):
    """enable(plan_cache=PATH): the base name of the device's plans,
    PATH.rRANK under torchrun (the library appends ".DEVICE")."""
    if trace or plan:
        raise GpubuddyError("gpubuddy: plan_cache records and follows plans "
                            "itself; it excludes trace and plan")
    if policy not in (None, "bestfit"):
        raise GpubuddyError("gpubuddy: a plan needs policy 'bestfit', not %r"
                            % policy)
    name = os.fspath(plan_cache)
    where = os.path.dirname(name) or "."
    if not name or not os.path.isdir(where):
        raise GpubuddyError("gpubuddy: plan_cache %r: no directory %r"
                            % (name, where))
    rank = os.environ.get("RANK")
    return name if rank is None else "%s.r%s" % (name, rank)


def _configure(pool_size, policy, publish, min_block, trace, vmm=False,
               plan=None, cache=None):
    """Sets the GPB_TORCH_* variables the library reads when it makes each
    device's pool (at that device's first allocation)."""
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
    if min_block is not None:
        env["GPB_TORCH_MIN_BLOCK"] = str(int(min_block))
    if publish:
        # One process per GPU under torchrun: the rank keeps names apart
        # across processes; the library appends ".DEVICE".
        rank = os.environ.get("RANK")
        env["GPB_TORCH_PUBLISH"] = publish if rank is None else "%s.r%s" % (publish, rank)
    if trace:
        env["GPB_TORCH_TRACE"] = trace
    if plan:
        plan = os.fspath(plan)
        if not (os.path.isfile(plan) or os.path.isfile(plan + ".0")):
            raise GpubuddyError("gpubuddy: plan %r: no such file (make one "
                                "with gpubuddy-replay --plan-out)" % plan)
        if policy not in (None, "bestfit"):
            raise GpubuddyError("gpubuddy: a plan needs policy 'bestfit', "
                                "not %r" % policy)
        env["GPB_TORCH_PLAN"] = plan
    if cache:
        env["GPB_TORCH_PLAN_CACHE"] = cache
        # The arguments say what this run does: a plan or trace left in
        # the environment would make the library refuse the pools.
        os.environ.pop("GPB_TORCH_PLAN", None)
        os.environ.pop("GPB_TORCH_TRACE", None)
    env["GPB_TORCH_VMM"] = "1" if vmm else "0"
    os.environ.update(env)


def _shim_path():
    """The C++ entry points that raise OutOfMemoryError, built against this
    torch at first use (cached by torch and gpubuddy version)."""
    from torch.utils import cpp_extension
    here = os.path.dirname(os.path.abspath(__file__))
    libdir = os.path.dirname(library_path())
    tag = "%s-%s" % (_torch.__version__, lib().gpb_version().decode())
    tag = "".join(c if c.isalnum() or c in "._-" else "_" for c in tag)
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME",
                                        os.path.expanduser("~/.cache")),
                         "gpubuddy", tag)
    os.makedirs(cache, exist_ok=True)
    name = "gpubuddy_oom"
    cpp_extension.load(name=name, sources=[os.path.join(here, "_oom_shim.cpp")],
                       extra_ldflags=["-L" + libdir, "-lgpubuddy",
                                      "-Wl,-rpath," + libdir],
                       build_directory=cache, is_python_module=False,
                       verbose=False)
    return os.path.join(cache, name + ".so")


def _allocator(oom_error):
    lib()  # loaded RTLD_GLOBAL before PyTorch opens either library
    if oom_error:
        return _torch.cuda.memory.CUDAPluggableAllocator(
            _shim_path(), "gpbx_malloc", "gpbx_free")
    return _torch.cuda.memory.CUDAPluggableAllocator(
        library_path(), "gpb_torch_malloc", "gpb_torch_free")


def enable(pool_size=None, policy=None, publish=None, min_block=None,
           trace=None, oom_error=True, vmm=False, plan=None, plan_cache=None):
    """Makes gpubuddy PyTorch's CUDA allocator, for every device.

    Call it before the first CUDA allocation. pool_size: bytes per device,
    as an int or a string ("20G", "90%" of the device's free memory at its
    first allocation; default 90%). policy: "bestfit" (default: the least
    memory), "trim" or "buddy". publish: a name to watch each pool live
    under (gpubuddy-stat, gpubuddy-view) as NAME.DEVICE, or NAME.rRANK.DEVICE
    under torchrun. trace: record each device's pool to PATH.DEVICE
    (X.DEVICE.gz, compressed, for a PATH X.gz).
    oom_error=False uses the plain C entry points, which return NULL when
    the pool is exhausted instead of raising OutOfMemoryError. vmm=True:
    pool_size is the memory the pool may hold, mapped 2 MiB at a time only
    under live blocks of an address range four times larger, so holes
    between blocks cost no memory (GPB_CFG_VMM). plan: a placement plan
    made from an earlier run's trace (gpubuddy-replay --plan-out); each
    pool follows PATH.DEVICE if that file exists, else PATH, and places by
    best fit wherever this run departs from it. plan_cache: plans kept
    from run to run, with nothing else to run: a device with a plan at
    PATH.DEVICE (PATH.rRANK.DEVICE under torchrun) follows it; one without
    records this run and writes its plan there at exit, or at
    save_plan(). Delete the files when the program changes.
    """
    if _state["enabled"]:
        raise GpubuddyError("gpubuddy.torch.enable() was already called")
    if not _torch.cuda.is_available():
        raise GpubuddyError("gpubuddy.torch.enable(): PyTorch sees no CUDA "
                            "device (torch.cuda.is_available() is False)")
    cache = _cache_name(plan_cache, policy, trace, plan) if plan_cache else None
    _configure(pool_size, policy, publish, min_block, trace, vmm, plan, cache)
    alloc = _allocator(oom_error)
    try:
        _torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise GpubuddyError("gpubuddy.torch.enable() must be called before "
                            "the first CUDA allocation; PyTorch's allocator is "
                            "already in use (%s)" % str(e).splitlines()[0]) from None
    _state["enabled"] = True
    _state["alloc"] = alloc
    if cache:
        _state["cache"] = cache
        _state["min_block"] = int(min_block) if min_block is not None else 512
        atexit.register(_save_plans)


def mem_pool(pool_size=None, policy=None, publish=None, min_block=None,
             oom_error=True):
    """A torch.cuda.MemPool whose memory comes from gpubuddy, for one scope:

        pool = gpubuddy.torch.mem_pool(pool_size="8G")
        with torch.cuda.use_mem_pool(pool):
            kv_cache = torch.empty(...)   # from gpubuddy
        x = torch.empty(...)              # from PyTorch's allocator

    The settings apply to each device's gpubuddy pool when it is made.
    """
    if not hasattr(_torch.cuda, "MemPool"):
        raise GpubuddyError("gpubuddy.torch.mem_pool() needs torch.cuda.MemPool "
                            "(PyTorch 2.5 or later); this is %s" % _torch.__version__)
    _configure(pool_size, policy, publish, min_block, None)
    alloc = _allocator(oom_error)
    pool = _torch.cuda.MemPool(alloc.allocator())
    pool._gpubuddy_allocator = alloc  # keep the allocator alive with the pool
    return pool


def _device(device):
    if device is None:
        return _torch.cuda.current_device()
    if isinstance(device, _torch.device):
        return device.index if device.index is not None else _torch.cuda.current_device()
    return int(device)


def stats(device=None):
    """The device's pool stats as a dict (bytes used, free, requested,
    largest free block, fragmentation, counts, free blocks per order),
    with the PyTorch calls it served, and under "plan" how far it has
    followed enable(plan=...): entries, placed, busy (range taken),
    unmatched, stopped_at (the request it gave the plan up at, 0: none). Raises GpubuddyError when the device
    has no gpubuddy pool yet."""
    import ctypes
    d = _device(device)
    l = lib()
    pool = l.gpb_torch_pool(d)
    if not pool:
        raise GpubuddyError("gpubuddy: device %d has no pool yet (no CUDA "
                            "allocation through gpubuddy on it)" % d)
    out = pool_stats(pool)
    m, f, fr = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    check(l.gpb_torch_calls(d, ctypes.byref(m), ctypes.byref(f), ctypes.byref(fr)),
          "torch calls")
    out.update(device=d, torch_mallocs=m.value, torch_failed_mallocs=f.value,
               torch_frees=fr.value)
    plan = pool_plan(pool)
    if plan:  # enable(plan=...): how many requests went where planned
        out["plan"] = plan
    return out


def start_trace(path, device=None):
    """Records the device's pool (default: the current device) to a trace
    at path (.gz compresses), for gpubuddy-replay and gpubuddy-view."""
    d = _device(device)
    check(lib().gpb_torch_trace(d, os.fsencode(path)), "start trace on device %d" % d)


def stop_trace(device=None):
    """Stops the device's trace and flushes it."""
    d = _device(device)
    check(lib().gpb_torch_trace(d, None), "stop trace on device %d" % d)


def _save_one(cache, d, min_block):
    """Lays out device d's recording of enable(plan_cache=...) into its
    plan, once. None when there is nothing to do, else what make_plan
    returned; raises GpubuddyError."""
    trace = "%s.%d.trace.gz" % (cache, d)
    plan = "%s.%d" % (cache, d)
    if os.path.exists(plan) or not os.path.exists(trace):
        return None  # following a plan, or nothing recorded
    if lib().gpb_torch_pool(d):  # stop and flush the recording
        check(lib().gpb_torch_trace(d, None), "stop trace on device %d" % d)
    made = make_plan(trace, plan, min_block)
    os.remove(trace)
    return made


def save_plan(device=None):
    """enable(plan_cache=...): stops recording the device (default: the
    current one) and writes its plan now, not at exit, so a long job
    records only its first steps (two or more whole steps after set-up,
    for the plan to find the repeating one). Returns what
    gpubuddy.make_plan returned, or None when the device follows a plan
    or recorded nothing."""
    if not _state["cache"]:
        raise GpubuddyError("gpubuddy: save_plan() needs enable(plan_cache=...)")
    return _save_one(_state["cache"], _device(device), _state["min_block"])


def _drop_departed(cache, d):
    """At exit: a plan this run gave up (it departed, or ran past a plan
    with no repeating step) is removed, so the next run records anew
    rather than start a layout it will leave."""
    pool = lib().gpb_torch_pool(d)
    plan = "%s.%d" % (cache, d)
    info = pool_plan(pool) if pool and os.path.exists(plan) else None
    if info and info["stopped_at"]:
        os.remove(plan)
        sys.stderr.write("gpubuddy: device %d: this run left its plan %s at "
                         "request %d (the program changed?); removed it, so "
                         "the next run records a new one\n"
                         % (d, plan, info["stopped_at"]))


def _save_plans():
    """At exit: every device's plan, with one line each on stderr."""
    cache = _state["cache"]
    try:
        n = _torch.cuda.device_count()
    except Exception as e:  # said, never a traceback at exit
        sys.stderr.write("gpubuddy: no plans written: %s\n" % e)
        return
    for d in range(n):
        _drop_departed(cache, d)
        try:
            made = _save_one(cache, d, _state["min_block"])
        except GpubuddyError as e:
            sys.stderr.write("%s (its recording stays at %s.%d.trace.gz)\n"
                             % (e, cache, d))
            continue
        if made:
            sys.stderr.write(
                "gpubuddy: device %d: wrote %s.%d, this run's plan (%d entries%s; "
                "a pool of %.3fx its peak); the next run with the same "
                "plan_cache follows it\n" % (
                    d, cache, d, made["entries"],
                    ", a repeating step" if made["repeat_from"] < made["entries"]
                    else ", no repeating step found: a longer run may need more "
                    "memory than best fit alone", made["extent_ratio"]))
