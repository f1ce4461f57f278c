# SPDX-License-Identifier: MIT
"""The shared library inside the package, loaded once with ctypes."""
import ctypes
import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB_PATH = os.path.join(_HERE, "_lib", "libgpubuddy.so")
_lib = None


class GpubuddyError(RuntimeError):
    """A gpubuddy call failed; the message is one line saying why."""


def library_path():
    """Path of the libgpubuddy.so this package uses."""
    return _LIB_PATH


def _preload_cudart():
    """The library names its CUDA runtime (_lib/cudart: libcudart.so.N) but
    no path to it: the loader finds PyTorch's (already loaded, or its
    wheel's, relative to the package) or one on its search path. Where
    neither is, load the CUDA install's by path first (CUDA_HOME,
    CUDA_PATH, /usr/local/cuda)."""
    try:
        with open(os.path.join(_HERE, "_lib", "cudart")) as f:
            soname = f.read().strip()
    except OSError:
        return  # built without CUDA
    try:
        ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
        return
    except OSError:
        pass
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                 "/usr/local/cuda"):
        for sub in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            path = os.path.join(base or "", sub, soname)
            if base and os.path.exists(path):
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return


def lib():
    """The loaded library, with the signatures this package calls."""
    global _lib
    if _lib is not None:
        return _lib
    if not os.path.exists(_LIB_PATH):
        raise GpubuddyError("gpubuddy: %s is missing: reinstall the package "
                            "(pip install ./python from a clone)" % _LIB_PATH)
    _preload_cudart()
    # RTLD_GLOBAL: the PyTorch shim and CUDAPluggableAllocator find its
    # symbols in the process.
    try:
        l = ctypes.CDLL(_LIB_PATH, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise GpubuddyError("gpubuddy: cannot load %s: %s (set CUDA_HOME to a "
                            "CUDA install, or install PyTorch)" % (_LIB_PATH, e)) from None
    vp, i, sz, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p
    for name, res, args in (
            ("gpb_version", cp, []),
            ("gpb_strerror", cp, [i]),
            ("gpb_size_parse", i, [cp, vp]),
            ("gpb_last_error_detail", cp, []),
            ("gpb_torch_pool", vp, [i]),
            ("gpb_pool_stats", i, [vp, vp]),
            ("gpb_pool_memory", i, [vp, vp, vp]),
            ("gpb_pool_plan_info", i, [vp, vp]),
            ("gpb_stats_json", i, [vp, cp, sz]),
            ("gpb_torch_calls", i, [i, vp, vp, vp]),
            ("gpb_torch_explain", i, [i, sz, cp, sz]),
            ("gpb_torch_trace", i, [i, cp]),
            ("gpb_torch_drain", i, [i])):
        f = getattr(l, name)
        f.restype = res
        f.argtypes = args
    _lib = l
    return l


def check(rc, what):
    """Raises GpubuddyError for a negative gpubuddy return code."""
    if rc < 0:
        l = lib()
        raise GpubuddyError("gpubuddy: %s: %s: %s" % (
            what, l.gpb_strerror(rc).decode(), l.gpb_last_error_detail().decode()))
    return rc


def version():
    """The library's version string."""
    return lib().gpb_version().decode()


_PLAN_FIELDS = ("entries", "next", "placed", "busy", "unmatched",
                "repeat_from", "requests", "stopped_at")  # gpb_plan_info_t


def pool_plan(pool):
    """How far a pool has followed its plan (gpb_pool_plan_info), or None
    when it follows none."""
    info = (ctypes.c_uint64 * len(_PLAN_FIELDS))()
    check(lib().gpb_pool_plan_info(pool, info), "plan info")
    return dict(zip(_PLAN_FIELDS, info)) if info[0] else None


def pool_stats(pool):
    """A pool's stats (gpb_pool_stats, as gpb_stats_json writes them)."""
    l = lib()
    st = ctypes.create_string_buffer(16384)  # larger than gpb_stats_t
    check(l.gpb_pool_stats(pool, st), "pool stats")
    n = check(l.gpb_stats_json(st, None, 0), "stats as JSON")
    buf = ctypes.create_string_buffer(n + 1)
    l.gpb_stats_json(st, buf, n + 1)
    return json.loads(buf.value.decode())
