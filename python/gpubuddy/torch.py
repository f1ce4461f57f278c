# SPDX-License-Identifier: MIT
"""gpubuddy as PyTorch's CUDA allocator.

    import gpubuddy.torch
    gpubuddy.torch.enable(pool_size="20G")  # before the first CUDA tensor
    model = ...                             # every tensor now comes from gpubuddy
    print(gpubuddy.torch.stats())

Each device the program uses gets its own pool, made at its first
allocation: by default a VMM pool, which maps memory only under live
blocks, with a budget of 90% of the device's free memory. gpubuddy is
installed as PyTorch's own CUDA allocator (a C++ subclass of c10's
CUDAAllocator, built against this torch at first use), so
torch.cuda.memory_stats and the rest, memory snapshots, CUDA graphs and
torch.compile work as with PyTorch's allocator, and memory_stats() gains
gpubuddy's fragmentation figures under "gpubuddy.*" keys. Exhaustion
raises torch.cuda.OutOfMemoryError with gpubuddy's explanation. Without a
C++ compiler it falls back to torch's pluggable allocator, with one
warning line saying what will not work. For one scope only (a KV cache,
say), use mem_pool() with torch.cuda.use_mem_pool.
"""
import atexit
import ctypes
import os
import platform
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
_state = {"enabled": False, "alloc": None, "cache": None, "min_block": 512,
          "native": False}
_FALLBACK = ("gpubuddy: PyTorch's allocator interface could not be built "
             "(%s); using torch's pluggable allocator instead, under which "
             "torch.cuda.memory_stats, memory_allocated and the other stats, "
             "_record_memory_history snapshots and torch.compile's CUDA "
             "graphs raise errors\n")


def _fail(fmt, *args):
    raise GpubuddyError("gpubuddy: " + (fmt % args if args else fmt))


def _check_pool_size(pool_size):
    if isinstance(pool_size, bool) or not isinstance(pool_size, (int, str)):
        _fail("pool_size must be bytes (int) or a string like '20G' or "
              "'90%%', not %r", pool_size)
    if isinstance(pool_size, int):
        if pool_size <= 0:
            _fail("pool_size must be > 0, not %d", pool_size)
        return
    text = pool_size.strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            pct = -1.0
        if not 0 < pct <= 100:
            _fail("pool_size %r: a percentage must be in (0, 100]", pool_size)
        return
    out = ctypes.c_size_t()
    if lib().gpb_size_parse(text.encode(), ctypes.byref(out)) or not out.value:
        _fail("pool_size %r is not a size (bytes like '20G', '512M', or "
              "'90%%' of the free memory)", pool_size)


def _stacks_spec(stacks):
    """enable(stacks=...) as GPB_TORCH_STACKS: False "0"; True or "python"
    "32"; N "N" (Python frames); "all" "all" (Python and C++ frames)."""
    if stacks is True or stacks == "python":
        return "32"
    if stacks is False or stacks is None:
        return "0"
    if stacks == "all":
        if not (sys.platform.startswith("linux") and
                platform.machine() in ("x86_64", "AMD64")):
            _fail("stacks='all' needs Linux on x86-64 (torch's unwinder "
                  "for C++ frames); stacks=True records the Python frames")
        return "all"
    if isinstance(stacks, int) and not isinstance(stacks, bool) and 1 <= stacks <= 64:
        return str(stacks)
    _fail("stacks must be True, False, 'python', 'all' or 1 to 64 frames, "
          "not %r", stacks)


def _check_args(pool_size, policy, publish, min_block, trace):
    """Every argument, at enable(): one GpubuddyError line, never a failure
    later at the first CUDA allocation."""
    if pool_size is not None:
        _check_pool_size(pool_size)
    if policy is not None and policy not in _POLICIES:
        _fail("policy must be one of %s, not %r", ", ".join(_POLICIES), policy)
    if min_block is not None:
        if (isinstance(min_block, bool) or not isinstance(min_block, int) or
                min_block < 16 or min_block > 1 << 30 or
                min_block & (min_block - 1)):
            _fail("min_block must be a power of two from 16 to 2**30 bytes, "
                  "not %r", min_block)
    if publish is not None:
        if not isinstance(publish, str) or not publish or "/" in publish:
            _fail("publish must be a name with no '/', like 'train', not %r",
                  publish)
        if len(publish) > 40:
            _fail("publish name %r is too long (at most 40 characters)", publish)
    if trace is not None:
        if not isinstance(trace, (str, os.PathLike)) or not os.fspath(trace):
            _fail("trace must be a file path, not %r", trace)
        where = os.path.dirname(os.path.abspath(os.fspath(trace)))
        if not os.path.isdir(where):
            _fail("trace %r: no directory %r", os.fspath(trace), where)


def _cache_name(plan_cache, policy, trace, plan):
    """enable(plan_cache=PATH): the base name of the device's plans,
    PATH.rRANK under torchrun (the library appends ".DEVICE")."""
    if not isinstance(plan_cache, (str, os.PathLike)) or not os.fspath(plan_cache):
        _fail("plan_cache must be a file path, not %r", plan_cache)
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


def _configure(pool_size, policy, publish, min_block, trace, vmm=True,
               plan=None, cache=None, stacks=False):
    """Sets the GPB_TORCH_* variables the library reads when it makes each
    device's pool (at that device's first allocation)."""
    _check_args(pool_size, policy, publish, min_block, trace)
    env = {}
    if pool_size is not None:
        env["GPB_TORCH_POOL_SIZE"] = str(pool_size).strip()
    if policy is not None:
        env["GPB_TORCH_POLICY"] = policy
    if min_block is not None:
        env["GPB_TORCH_MIN_BLOCK"] = str(int(min_block))
    if publish:
        # One process per GPU under torchrun: the rank keeps names apart
        # across processes; the library appends ".DEVICE".
        rank = os.environ.get("RANK")
        env["GPB_TORCH_PUBLISH"] = publish if rank is None else "%s.r%s" % (publish, rank)
    if trace:
        env["GPB_TORCH_TRACE"] = os.fspath(trace)
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
    env["GPB_TORCH_STACKS"] = _stacks_spec(stacks)
    os.environ.update(env)


def _native_path():
    """PyTorch's allocator interface over gpubuddy (_allocator.cpp): the
    one the wheel's build compiled when it matches this torch, else built
    against this torch at first use and cached (gpubuddy._cppext)."""
    from . import _cppext
    here = os.path.dirname(os.path.abspath(__file__))
    libdir = os.path.dirname(library_path())
    inc = os.path.join(libdir, "include")  # the wheel's copy of gpubuddy.h
    if not os.path.exists(os.path.join(inc, "gpubuddy.h")):
        inc = os.path.join(here, "..", "..", "include")  # a clone
    return _cppext.allocator(here, libdir, inc)


def _install_native():
    """Installs the C++ allocator; False, with one warning line, when it
    cannot be built (no compiler, or no CUDA headers)."""
    lib()  # loaded RTLD_GLOBAL before the extension that links it
    try:
        path = _native_path()
    except Exception as e:  # a build failure of any kind: fall back
        why = str(e).strip().splitlines()
        sys.stderr.write(_FALLBACK % (why[-1] if why else type(e).__name__))
        return False
    # RTLD_LOCAL: nothing else may bind to its symbols (it exports only
    # gpbx_install) or to the C++ templates it instantiates.
    ext = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    err = ctypes.create_string_buffer(512)
    if ext.gpbx_install(err, ctypes.c_size_t(len(err))) != 0:
        raise GpubuddyError("gpubuddy.torch.enable() must be called before "
                            "the first CUDA allocation; %s" % err.value.decode())
    _state["native"] = True
    _patch_memory_stats()
    return True


def _allocator():
    """The pluggable fallback: the library's C entry points (NULL when the
    pool is exhausted; PyTorch then raises its own OutOfMemoryError)."""
    lib()
    return _torch.cuda.memory.CUDAPluggableAllocator(
        library_path(), "gpb_torch_malloc", "gpb_torch_free")


def _patch_memory_stats():
    """torch.cuda.memory_stats() gains gpubuddy's figures under keys of
    its own ("gpubuddy.largest_free", "gpubuddy.held_bytes" ...), for
    each device with a pool; every other key is PyTorch's, from gpubuddy's
    numbers."""
    mem = _torch.cuda.memory
    orig = mem.memory_stats
    if getattr(orig, "_gpubuddy", False):
        return

    def memory_stats(device=None):
        out = orig(device=device)
        try:
            st = stats(device)
        except (GpubuddyError, RuntimeError, ValueError):
            return out
        for k in ("largest_free", "free_bytes", "internal_waste_bytes",
                  "external_frag", "live_allocs", "failures", "held_bytes",
                  "budget_bytes"):
            out["gpubuddy." + k] = st[k]
        return out
    memory_stats._gpubuddy = True
    memory_stats.__doc__ = orig.__doc__
    mem.memory_stats = memory_stats
    _torch.cuda.memory_stats = memory_stats


def enable(pool_size=None, policy=None, publish=None, min_block=None,
           trace=None, oom_error=True, vmm=True, plan=None, plan_cache=None,
           stacks=False):
    """Makes gpubuddy PyTorch's CUDA allocator, for every device.

    Call it before the first CUDA allocation. pool_size: bytes per device,
    as an int or a string ("20G", "90%" of the device's free memory at its
    first allocation; default 90%). vmm=True (the default): pool_size is
    the memory the pool may hold, mapped 2 MiB at a time only under live
    blocks of an address range four times larger, so holes between blocks
    cost no memory (GPB_CFG_VMM); vmm=False: one plain range of pool_size,
    held from the first allocation (needed to send CUDA tensors to other
    processes). policy: "bestfit" (default: the least memory), "trim" or
    "buddy". publish: a name to watch each pool live under
    (gpubuddy-stat, gpubuddy-view) as NAME.DEVICE, or NAME.rRANK.DEVICE
    under torchrun. trace: record each device's pool to PATH.DEVICE
    (X.DEVICE.gz, compressed, for a PATH X.gz). oom_error=False uses
    torch's pluggable allocator over the library's C entry points, which
    return NULL when the pool is exhausted (and leaves PyTorch's memory
    stats unavailable). plan: a placement plan made from an earlier run's
    trace (gpubuddy-replay --plan-out); each pool follows PATH.DEVICE if
    that file exists, else PATH, and places by best fit wherever this run
    departs from it. plan_cache: plans kept from run to run, with nothing
    else to run: a device with a plan at PATH.DEVICE (PATH.rRANK.DEVICE
    under torchrun) follows it; one without records this run and writes
    its plan there at exit, or at save_plan(). Delete the files when the
    program changes. stacks=True (or "python", or N frames, 1 to 64; True
    is 32): each allocation's call site is its Python stack, so publish's
    live view, traces and OOM explanations name your code; stacks="all"
    adds the C++ frames between the op and the allocator (ATen, c10, your
    own extensions), as _record_memory_history(stacks="all") does. Each
    costs a walk of the stack per allocation (docs/GPU.md), so both are
    off by default. Every argument is checked here: a bad one raises
    GpubuddyError.
    """
    if _state["enabled"]:
        raise GpubuddyError("gpubuddy.torch.enable() was already called")
    cache = _cache_name(plan_cache, policy, trace, plan) \
        if plan_cache is not None else None
    _configure(pool_size, policy, publish, min_block, trace, vmm, plan, cache,
               stacks)
    if not _torch.cuda.is_available():
        raise GpubuddyError("gpubuddy.torch.enable(): PyTorch sees no CUDA "
                            "device (torch.cuda.is_available() is False)")
    if not (oom_error and _install_native()):
        alloc = _allocator()
        try:
            _torch.cuda.memory.change_current_allocator(alloc)
        except RuntimeError as e:
            raise GpubuddyError("gpubuddy.torch.enable() must be called before "
                                "the first CUDA allocation; PyTorch's allocator "
                                "is already in use (%s)"
                                % str(e).splitlines()[0]) from None
        _state["alloc"] = alloc
    _state["enabled"] = True
    if cache:
        _state["cache"] = cache
        _state["min_block"] = int(min_block) if min_block is not None else 512
        atexit.register(_save_plans)


def mem_pool(pool_size=None, policy=None, publish=None, min_block=None,
             oom_error=True):
    """A torch.cuda.MemPool whose memory comes from gpubuddy, for one scope
    (oom_error is ignored: kept so that older calls work):

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
    alloc = _allocator()
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
    largest free block, fragmentation, counts, free blocks per order,
    held_bytes and budget_bytes: the memory it holds and may hold),
    with the PyTorch calls it served, and under "plan" how far it has
    followed enable(plan=...): entries, placed, busy (range taken),
    unmatched, stopped_at (the request it gave the plan up at, 0: none). Raises GpubuddyError when the device
    has no gpubuddy pool yet."""
    d = _device(device)
    l = lib()
    pool = l.gpb_torch_pool(d)
    if not pool:
        raise GpubuddyError("gpubuddy: device %d has no pool yet (no CUDA "
                            "allocation through gpubuddy on it)" % d)
    out = pool_stats(pool)
    held, limit = ctypes.c_uint64(), ctypes.c_uint64()
    check(l.gpb_pool_memory(pool, ctypes.byref(held), ctypes.byref(limit)),
          "pool memory")
    out.update(held_bytes=held.value, budget_bytes=limit.value)
    out.update(device=d, **_torch_calls(d))
    plan = pool_plan(pool)
    if plan:  # enable(plan=...): how many requests went where planned
        out["plan"] = plan
    return out


def _torch_calls(d):
    """The PyTorch calls the pool served: the C++ allocator's own counts
    (PyTorch's memory_stats, from gpubuddy's), else the C entry points'."""
    m, f, fr = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    if _state.get("native"):  # the pool's counts, less CuPy's share of it
        ms = _torch._C._cuda_memoryStats(d)
        a = ms["allocation"]["all"]
        check(lib().gpb_cupy_calls(d, ctypes.byref(m), ctypes.byref(f),
                                   ctypes.byref(fr)), "cupy calls")
        return {"torch_mallocs": max(0, a["allocated"] - m.value),
                "torch_frees": max(0, a["freed"] - fr.value),
                "torch_failed_mallocs": ms["num_ooms"]}
    check(lib().gpb_torch_calls(d, ctypes.byref(m), ctypes.byref(f),
                                ctypes.byref(fr)), "torch calls")
    return {"torch_mallocs": m.value, "torch_failed_mallocs": f.value,
            "torch_frees": fr.value}


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
