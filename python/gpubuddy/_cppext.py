# SPDX-License-Identifier: MIT
"""Builds the package's C++ parts against the user's torch, once, unless
the wheel's build already did.

The package has one C++ part, PyTorch's allocator interface
(_allocator.cpp and the call sites it takes, _stacks.cpp; ALLOCATOR), linked to libgpubuddy and exporting only
gpbx_install (_allocator.map). allocator() finds it in this order:

1. Prebuilt: the wheel's build compiled it when its Python had torch and
   a C++ compiler (python/_build runs this file as a script for the
   command), into _lib/ beside libgpubuddy.so (rpath $ORIGIN), with a
   record, ALLOCATOR.json, of what it was built for: the torch version,
   its C++ ABI and CUDA version, the Python version and the sources'
   hash. It is used only when the running torch matches that record
   exactly.
2. Cached: built here at first use with torch.utils.cpp_extension, under
   $XDG_CACHE_HOME/gpubuddy (~/.cache/gpubuddy), or GPB_CPPEXT_CACHE, in
   a folder keyed on everything the object depends on: the torch version
   and C++ ABI, the library it links (its path, in the flags: the object
   carries it as rpath) and the sources' bytes. Two virtual environments
   therefore keep two copies instead of rebuilding each other's. One line
   on stderr says when it builds (and why the prebuilt one does not do);
   a failed build is one GpubuddyError line, with the compiler's output
   kept in build.log.

This file imports nothing of the package at load time, so the build
backend can run it by path with the build's Python.
"""
import hashlib
import json
import os
import sys
import sysconfig

ALLOCATOR = "gpubuddy_torch_alloc"
# What both builds add to torch's own flags.
CFLAGS = ["-O2", "-fvisibility=hidden"]


def allocator_inputs(pkg, libdir, inc, rpath):
    """(sources, include_paths, ldflags, hashed files) of the allocator:
    pkg is the package's folder, libdir holds libgpubuddy.so, inc
    gpubuddy.h, and rpath is where the object finds the library at run
    time (libdir for a cached build, $ORIGIN for a prebuilt one)."""
    src = [os.path.join(pkg, f) for f in ("_allocator.cpp", "_stacks.cpp")]
    vscript = os.path.join(pkg, "_allocator.map")
    ldflags = ["-L" + libdir, "-lgpubuddy", "-Wl,-rpath," + rpath,
               "-Wl,--version-script=" + vscript]
    hashed = src + [os.path.join(pkg, "_stacks.h"), vscript,
                    os.path.join(inc, "gpubuddy.h")]
    return src, [inc, pkg], ldflags, hashed


def abi(hashed):
    """What an object built against the running torch depends on, besides
    its flags: recorded beside a prebuilt object, compared before use."""
    import torch
    h = hashlib.sha256()
    for path in hashed:
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return {"torch": torch.__version__,
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "cuda": getattr(getattr(torch, "version", None), "cuda", None),
            "python": "%d.%d" % sys.version_info[:2],
            "sources": h.hexdigest()}


def prebuilt(name, libdir, hashed):
    """(path, None) of libdir/NAME.so when its record NAME.json matches
    abi(hashed) exactly; else (None, why): why is None without a prebuilt
    object, else a phrase naming what it was built for."""
    so = os.path.join(libdir, name + ".so")
    try:
        with open(os.path.join(libdir, name + ".json")) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None, None
    if not os.path.exists(so):
        return None, None
    here = abi(hashed)
    if rec == here:
        return so, None
    diff = ["other sources" if k == "sources" else "%s %s" % (k, rec.get(k))
            for k in here if rec.get(k) != here[k]]
    return None, "the package's prebuilt one is for " + ", ".join(diff)


def _key(name, files, include_paths, ldflags):
    import torch
    h = hashlib.sha256()
    for part in (torch.__version__, str(torch._C._GLIBCXX_USE_CXX11_ABI),
                 sys.version.split()[0], *include_paths, *ldflags):
        h.update(part.encode() + b"\0")
    for src in files:
        with open(src, "rb") as f:
            h.update(f.read())
    return "%s-%s" % (name, h.hexdigest()[:16])


def _cache_root():
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.environ.get("GPB_CPPEXT_CACHE") or os.path.join(base, "gpubuddy")


def build(name, sources, include_paths=(), ldflags=(), why=None, hashed=None):
    """The path of the shared object built from sources (C++, against
    torch's headers and CUDA's), building it when the cache has none; why,
    when given, ends the line saying so. hashed: every file the object
    depends on (the sources and their headers; default the sources). Raises GpubuddyError, one line,
    when it cannot (it needs a C++ compiler and torch's headers)."""
    import torch
    from torch.utils import cpp_extension
    from ._native import GpubuddyError
    where = os.path.join(_cache_root(),
                         _key(name, hashed or sources, include_paths, ldflags))
    so = os.path.join(where, name + ".so")
    if os.path.exists(so):
        return so
    os.makedirs(where, exist_ok=True)
    sys.stderr.write("gpubuddy: building PyTorch's allocator interface for "
                     "torch %s into %s (once, about a minute%s)\n"
                     % (torch.__version__, where, "; " + why if why else ""))
    # No .cu source: the architecture list only has to be there, also on a
    # machine whose GPU torch cannot see.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    try:
        cpp_extension.load(name=name, sources=list(sources),
                           extra_include_paths=list(include_paths),
                           extra_ldflags=list(ldflags),
                           extra_cflags=list(CFLAGS),
                           build_directory=where, with_cuda=True,
                           is_python_module=False, verbose=False)
    except Exception as e:  # the compiler's output can be long: keep it aside
        log = os.path.join(where, "build.log")
        with open(log, "w") as f:
            f.write(str(e))
        last = (str(e).strip().splitlines() or ["?"])[-1][:200]
        raise GpubuddyError("gpubuddy: building %s failed (a C++ compiler and "
                            "torch's headers are needed): %s; the output is in %s"
                            % (name, last, log)) from None
    return so


def allocator(pkg, libdir, inc):
    """The path of PyTorch's allocator interface for the running torch:
    the prebuilt one when it matches, else the cached build (built now
    when missing). Raises GpubuddyError as build() does."""
    _, _, _, hashed = allocator_inputs(pkg, libdir, inc, "$ORIGIN")
    so, why = prebuilt(ALLOCATOR, libdir, hashed)
    if so:
        return so
    src, incs, ldflags, hashed = allocator_inputs(pkg, libdir, inc, libdir)
    return build(ALLOCATOR, src, incs, ldflags, why=why, hashed=hashed)


def compile_argv(name, sources, include_paths, ldflags, out):
    """The one compiler command that builds what build() builds with
    cpp_extension.load: its flags (torch's headers, Python's, CUDA's, the
    C++ ABI, torch's libraries and libcudart), in its order. Raises
    RuntimeError when torch finds no CUDA toolkit."""
    import torch
    from torch.utils import cpp_extension as ce
    if not ce.CUDA_HOME:
        raise RuntimeError("torch finds no CUDA toolkit (CUDA_HOME)")
    try:
        system = ce.include_paths("cuda")
    except TypeError:  # torch before 2.6
        system = ce.include_paths(cuda=True)
    system.append(sysconfig.get_path("include", scheme="posix_prefix"))
    cudalib = os.path.join(ce.CUDA_HOME, "lib64")
    if not os.path.exists(cudalib) and os.path.exists(os.path.join(ce.CUDA_HOME, "lib")):
        cudalib = os.path.join(ce.CUDA_HOME, "lib")
    torchlib = ce.library_paths()[0]
    return ([os.environ.get("CXX", "c++"), "-DTORCH_EXTENSION_NAME=" + name,
             "-DTORCH_API_INCLUDE_EXTENSION_H",
             "-D_GLIBCXX_USE_CXX11_ABI=%d" % torch._C._GLIBCXX_USE_CXX11_ABI] +
            ["-I" + os.path.abspath(i) for i in include_paths] +
            [a for i in system for a in ("-isystem", i)] +
            ["-fPIC", "-std=c++17"] + CFLAGS + list(sources) +
            ["-shared", "-o", out] + list(ldflags) +
            ["-L" + torchlib, "-lc10", "-lc10_cuda", "-ltorch_cpu",
             "-ltorch_cuda", "-ltorch", "-ltorch_python",
             "-L" + cudalib, "-lcudart"])


def _prebuild_plan(pkg, libdir, inc, out):
    """For the wheel's build: {"argv": the command that compiles the
    allocator to out, linked to libdir's libgpubuddy and finding it at
    $ORIGIN; "record": what it is built for}."""
    src, incs, ldflags, hashed = allocator_inputs(pkg, libdir, inc, "$ORIGIN")
    return {"argv": compile_argv(ALLOCATOR, src, incs, ldflags, out),
            "record": abi(hashed)}


if __name__ == "__main__":
    # python _cppext.py PKG LIBDIR INC OUT: the build backend's question
    # to the build's Python; one line on stderr and status 1 when no. The
    # script's folder leaves sys.path: its torch.py is not torch.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        print(json.dumps(_prebuild_plan(*sys.argv[1:5])))
    except Exception as e:  # no torch, no CUDA toolkit ...: say which
        last = (str(e).strip().splitlines() or [""])[-1][:200]
        sys.stderr.write("%s: %s\n" % (type(e).__name__, last))
        sys.exit(1)
