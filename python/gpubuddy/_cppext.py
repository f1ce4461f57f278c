# SPDX-License-Identifier: MIT
"""Builds the package's C++ parts against the user's torch, once.

The build is cached under $XDG_CACHE_HOME/gpubuddy (~/.cache/gpubuddy),
in a folder keyed on everything the object depends on: the torch version
and C++ ABI, the library it links (its path: the object carries it as
rpath) and the sources' bytes. Two virtual environments therefore keep
two copies instead of rebuilding each other's.
"""
import hashlib
import os
import sys


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


def build(name, sources, include_paths=(), ldflags=()):
    """The path of the shared object built from sources (C++, against
    torch's headers and CUDA's), building it when the cache has none.
    Raises what torch.utils.cpp_extension raises when it cannot."""
    from torch.utils import cpp_extension
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    where = os.path.join(base, "gpubuddy",
                         _key(name, sources, include_paths, ldflags))
    so = os.path.join(where, name + ".so")
    if os.path.exists(so):
        return so
    os.makedirs(where, exist_ok=True)
    sys.stderr.write("gpubuddy: building PyTorch's allocator interface for "
                     "torch %s into %s (once, about a minute)\n"
                     % (__import__("torch").__version__, where))
    # No .cu source: the architecture list only has to be there, also on a
    # machine whose GPU torch cannot see.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    cpp_extension.load(name=name, sources=list(sources),
                       extra_include_paths=list(include_paths),
                       extra_ldflags=list(ldflags), extra_cflags=["-O2", "-fvisibility=hidden"],
                       build_directory=where, with_cuda=True,
                       is_python_module=False, verbose=False)
    return so
