# SPDX-License-Identifier: MIT
"""gpubuddy._cppext against a stand-in torch whose cpp_extension.load
writes NAME.so and counts its calls: run by tests/test_python.sh. A build
happens once per torch version, C++ ABI, library path and source bytes,
says so in one line, and a failed build is one GpubuddyError line. The
allocator the wheel prebuilt is used, silently, only when its record
matches the running torch exactly; otherwise the cached build is, and
its line says what the prebuilt one was for."""
import contextlib
import io
import atexit
import os
import shutil
import sys
import tempfile

tmp = tempfile.mkdtemp(prefix="gpb-cppext-")
atexit.register(shutil.rmtree, tmp, True)
stub = os.path.join(tmp, "stub", "torch")
os.makedirs(os.path.join(stub, "utils"))
with open(os.path.join(stub, "__init__.py"), "w") as f:
    f.write("__version__ = '2.99.0+cu999'\n"
            "class _C:\n    _GLIBCXX_USE_CXX11_ABI = True\n"
            "class version:\n    cuda = '99.9'\n"
            "from . import utils\n")
with open(os.path.join(stub, "utils", "__init__.py"), "w") as f:
    f.write("from . import cpp_extension\n")
with open(os.path.join(stub, "utils", "cpp_extension.py"), "w") as f:
    f.write("import os\ncalls = []\n"
            "def load(name, sources, extra_include_paths, extra_ldflags, "
            "extra_cflags, build_directory, with_cuda, is_python_module, "
            "verbose):\n"
            "    calls.append((name, build_directory))\n"
            "    if os.environ.get('STUB_FAIL'):\n"
            "        raise RuntimeError('Error building extension\\n"
            "x.cpp:1: error: boom')\n"
            "    open(os.path.join(build_directory, name + '.so'), 'w').close()\n")
sys.path.insert(0, os.path.dirname(stub))
os.environ["GPB_CPPEXT_CACHE"] = os.path.join(tmp, "cache")

import torch  # noqa: E402  the stand-in
from gpubuddy import GpubuddyError, _cppext  # noqa: E402

calls = torch.utils.cpp_extension.calls
src = os.path.join(tmp, "a.cpp")
with open(src, "w") as f:
    f.write("int x;\n")


def build(*args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        so = _cppext.build(*args)
    return so, err.getvalue()


so, said = build("gpbx", [src], [], ["-lgpubuddy"])
assert os.path.exists(so) and so.endswith("/gpbx.so"), so
assert len(calls) == 1
assert said.count("\n") == 1 and "for torch 2.99.0+cu999" in said, said
so2, said = build("gpbx", [src], [], ["-lgpubuddy"])  # cached: no build, silent
assert so2 == so and len(calls) == 1 and said == "", said
with open(src, "a") as f:
    f.write("int y;\n")
so3, _ = build("gpbx", [src], [], ["-lgpubuddy"])  # edited source: rebuilt
assert so3 != so and len(calls) == 2

# Every part of the ABI key separates builds: torch's version and C++ ABI,
# the library's path (in the flags), the include paths.
k = lambda ld=("-L/venv1/gpubuddy/_lib", "-Wl,-rpath,/venv1/gpubuddy/_lib"), inc=(): \
    _cppext._key("n", [src], list(inc), list(ld))
base = k()
torch.__version__ = "2.99.1"
assert k() != base
torch.__version__ = "2.99.0+cu999"
torch._C._GLIBCXX_USE_CXX11_ABI = False
assert k() != base
torch._C._GLIBCXX_USE_CXX11_ABI = True
assert k(ld=("-L/venv2/gpubuddy/_lib", "-Wl,-rpath,/venv2/gpubuddy/_lib")) != base
assert k(inc=("/x/include",)) != base
assert k() == base and "/" not in base

os.environ["STUB_FAIL"] = "1"
with open(src, "a") as f:
    f.write("int z;\n")
try:
    build("gpbx", [src], [], [])
except GpubuddyError as e:
    msg = str(e)
    assert "\n" not in msg and "building gpbx failed" in msg and "error: boom" in msg, msg
    log = msg.rsplit(" ", 1)[1]
    assert "x.cpp:1: error: boom" in open(log).read()
else:
    raise AssertionError("no GpubuddyError for a failed build")
del os.environ["STUB_FAIL"]

# The prebuilt allocator: a package folder (sources, version script) and
# a library folder (libgpubuddy's, with gpubuddy.h) as a wheel lays them.
import json  # noqa: E402
pkg, libdir = os.path.join(tmp, "pkg"), os.path.join(tmp, "pkg", "_lib")
os.makedirs(os.path.join(libdir, "include"))
for path, text in (("_allocator.cpp", "int gpbx;\n"), ("_allocator.map", "{};\n"),
                   ("_stacks.cpp", "int st;\n"), ("_stacks.h", "int sth;\n"),
                   ("_lib/include/gpubuddy.h", "int gpb;\n")):
    with open(os.path.join(pkg, path), "w") as f:
        f.write(text)
inc = os.path.join(libdir, "include")
name = _cppext.ALLOCATOR
pre = os.path.join(libdir, name + ".so")
hashed = _cppext.allocator_inputs(pkg, libdir, inc, "$ORIGIN")[3]


def record(**change):
    rec = dict(_cppext.abi(hashed), **change)
    with open(os.path.join(libdir, name + ".json"), "w") as f:
        json.dump(rec, f)


def allocator():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        so = _cppext.allocator(pkg, libdir, inc)
    return so, err.getvalue()


assert _cppext.prebuilt(name, libdir, hashed) == (None, None)  # none there
n = len(calls)
so, said = allocator()  # no prebuilt one: the cached build, as before
assert so != pre and len(calls) == n + 1 and said.count("\n") == 1, said
assert "prebuilt" not in said, said
open(pre, "w").close()
record()
so, said = allocator()  # a match: the prebuilt one, no build, no line
assert so == pre and said == "" and len(calls) == n + 1, (so, said)
rec = _cppext.abi(hashed)
assert rec["torch"] == "2.99.0+cu999" and rec["cxx11_abi"] is True
assert rec["cuda"] == "99.9" and rec["python"] == "%d.%d" % sys.version_info[:2]
# Anything else: the cached build, its line naming what the prebuilt one
# is for. Each field counts; the cache folder is the same for all.
for change, says in ((dict(torch="2.98.0+cu998"), "is for torch 2.98.0+cu998"),
                     (dict(cxx11_abi=False), "is for cxx11_abi False"),
                     (dict(cuda="12.8"), "is for cuda 12.8"),
                     (dict(python="3.7"), "is for python 3.7"),
                     (dict(sources="0" * 64), "is for other sources")):
    record(**change)
    got, why = _cppext.prebuilt(name, libdir, hashed)
    assert got is None and why.endswith(says), why
    shutil.rmtree(_cppext._cache_root())
    so, said = allocator()
    assert so != pre and so.startswith(_cppext._cache_root()), so
    assert said.count("\n") == 1 and said.rstrip().endswith(
        "(once, about a minute; the package's prebuilt one %s)" % says), said
record()
assert _cppext.prebuilt(name, libdir, hashed)[0] == pre
with open(os.path.join(pkg, "_allocator.cpp"), "a") as f:
    f.write("int edited;\n")  # an editable install's source, edited since
assert _cppext.prebuilt(name, libdir, hashed) == (None, "the package's "
                                                 "prebuilt one is for other sources")
# A header edited: the cached build is made again, in its own folder.
os.remove(pre)
first = allocator()[0]
n = len(calls)
with open(os.path.join(pkg, "_stacks.h"), "a") as f:
    f.write("int edited;\n")
so, said = allocator()
assert len(calls) == n + 1 and so != first and "building" in said, (so, said)
with open(os.path.join(libdir, name + ".json"), "w") as f:
    f.write("{not json")
assert _cppext.prebuilt(name, libdir, hashed) == (None, None)
print("gpubuddy._cppext: all checks passed")
