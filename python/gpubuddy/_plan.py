# SPDX-License-Identifier: MIT
"""Placement plans from Python: the library's planner (gpb_plan_make_trace,
lib/plan/) through ctypes, in this process (docs/DESIGN.md, Plans)."""
import ctypes
import os

from ._native import GpubuddyError, lib

_HERE = os.path.dirname(os.path.abspath(__file__))


def replay_path():
    """Path of the gpubuddy-replay this package carries."""
    return os.path.join(_HERE, "_bin", "gpubuddy-replay")


def _plan_lib():
    l = lib()
    if not getattr(l, "_gpb_plan_ready", False):
        vp, i, sz, cp, u64 = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                              ctypes.c_char_p, ctypes.c_uint64)
        for name, res, args in (
                ("gpb_plan_make_trace", i, [cp, sz, ctypes.POINTER(vp),
                                            ctypes.POINTER(u64)]),
                ("gpb_plan_save", i, [vp, cp]),
                ("gpb_plan_destroy", None, [vp]),
                ("gpb_plan_count", sz, [vp]),
                ("gpb_plan_repeat_from", sz, [vp]),
                ("gpb_plan_extent", u64, [vp])):
            f = getattr(l, name)
            f.restype = res
            f.argtypes = args
        l._gpb_plan_ready = True
    return l


def make_plan(trace, out, min_block=512):
    """Lays a recorded run's trace out offline and writes the plan to out,
    for the next run of the same program to follow
    (gpubuddy.torch.enable(plan=out), GPB_PLAN=out). min_block: the pool's
    (512, PyTorch's rounding, is gpubuddy.torch's default). Returns what
    gpubuddy-replay --plan-out --json says: trace, plan, min_block,
    entries, repeat_from (entries when the run has no repeating step),
    extent (the pool the plan needs, bytes), peak_demand_bytes,
    extent_ratio. Raises GpubuddyError, one line, when the trace cannot
    be read or the plan written; out is then left as it was."""
    if isinstance(min_block, bool) or not isinstance(min_block, int) or min_block <= 0:
        raise GpubuddyError("gpubuddy: min_block must be a power of two > 0, "
                            "not %r" % (min_block,))
    l = _plan_lib()
    trace, out = os.fspath(trace), os.fspath(out)

    def fail(what):
        raise GpubuddyError("gpubuddy: make_plan(%r): %s" % (
            trace, l.gpb_last_error_detail().decode(errors="replace") or what))
    plan, peak = ctypes.c_void_p(), ctypes.c_uint64()
    if l.gpb_plan_make_trace(os.fsencode(trace), min_block, ctypes.byref(plan),
                             ctypes.byref(peak)) < 0:
        fail("cannot plan")
    try:
        if l.gpb_plan_save(plan, os.fsencode(out)) < 0:
            fail("cannot write the plan")
        entries, rf = l.gpb_plan_count(plan), l.gpb_plan_repeat_from(plan)
        extent = l.gpb_plan_extent(plan)
    finally:
        l.gpb_plan_destroy(plan)
    return {"trace": trace, "plan": out, "min_block": min_block,
            "entries": entries, "repeat_from": rf, "extent": extent,
            "peak_demand_bytes": peak.value,
            "extent_ratio": round(extent / peak.value, 6) if peak.value else 0.0}
