# SPDX-License-Identifier: MIT
"""Builds the package's C++ parts against the user's torch, once.

The build is cached under $XDG_CACHE_HOME/gpubuddy (~/.cache/gpubuddy),
or GPB_CPPEXT_CACHE, in a folder keyed on everything the object depends
on: the torch version and C++ ABI, the library it links (its path, in
the flags: the object carries it as rpath) and the sources' bytes. Two
virtual environments therefore keep two copies instead of rebuilding
each other's. One line on stderr says when it builds; a failed build is
one GpubuddyError line, with the compiler's output kept in build.log.
"""
import hashlib
import os
import sys

from ._native import GpubuddyError


def _key(name, sources, include_paths, ldflags):
    import torch
    h = hashlib.sha256()
    for part in (torch.__version__, str(torch._C._GLIBCXX_USE_CXX11_ABI),
                 sys.version.split()[0], *include_paths, *ldflags):
        h.update(part.encode() + b"\0")
    for src in sources:
        with open(src, "rb") as f:
            h.update(f.read())
    return "%s-%s" % (name, h.hexdigest()[:16])


def _cache_root():
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.environ.get("GPB_CPPEXT_CACHE") or os.path.join(base, "gpubuddy")


def build(name, sources, include_paths=(), ldflags=()):
    """The path of the shared object built from sources (C++, against
    torch's headers and CUDA's), building it when the cache has none.
    Raises GpubuddyError, one line, when it cannot (it needs a C++
    compiler and torch's headers)."""
    import torch
    from torch.utils import cpp_extension
    where = os.path.join(_cache_root(), _key(name, sources, include_paths, ldflags))
    so = os.path.join(where, name + ".so")
    if os.path.exists(so):
        return so
    os.makedirs(where, exist_ok=True)
    sys.stderr.write("gpubuddy: building PyTorch's allocator interface for "
                     "torch %s into %s (once, about a minute)\n"
                     % (torch.__version__, where))
    # No .cu source: the architecture list only has to be there, also on a
    # machine whose GPU torch cannot see.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    try:
        cpp_extension.load(name=name, sources=list(sources),
                           extra_include_paths=list(include_paths),
                           extra_ldflags=list(ldflags),
                           extra_cflags=["-O2", "-fvisibility=hidden"],
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
