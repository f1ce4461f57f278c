# SPDX-License-Identifier: MIT
"""PEP 517 and PEP 660 build backend of the gpubuddy Python package.

It needs nothing from the network and no other package (no setuptools,
wheel or libtool: the GPU machines have none of them and no network), so
`pip install ./python`, `pip install --no-build-isolation ./python`,
`pip install -e ./python` and `python3 -m build ./python` all work
offline. A standard backend (setuptools) would need setuptools present
at build time and a setup.py compiling the same C sources by the same
rules: it would not do the job better.

build_wheel compiles every C source of the library (lib/*/*.c) once,
into one shared object with the system C compiler, as libgpubuddy.so
inside the package, then gpubuddy-replay (tools/) linked against that
object (rpath $ORIGIN/../_lib), as _bin/gpubuddy-replay, for `python -m
gpubuddy replay`; gpubuddy.make_plan calls the library's planner. It
writes the wheel (a zip with METADATA, WHEEL, RECORD and
entry_points.txt: console scripts gpubuddy-import-torch and
gpubuddy-replay) itself.

When the build's Python has torch with its C++ headers and a CUDA
toolkit, and a C++ compiler is there (CXX, else c++), PyTorch's
allocator interface (gpubuddy/_allocator.cpp) is prebuilt against that
torch into _lib/ beside the library (rpath $ORIGIN), with a record of
the torch it is for; gpubuddy/_cppext.py gives the command and the
record, and at enable() uses the object only for that torch. pip's build
isolation hides the user's torch: `pip install --no-build-isolation`
prebuilds, a plain `pip install` does not. When it cannot be built, one line says why and the wheel goes on without
it; GPB_PREBUILD=0 skips it.

Features come from one truth: the headers configure.ac probes
(execinfo.h, NVTX's, libdeflate's) are read from configure.ac and probed
here with the same compiler, so a wheel records call sites as deep as a
configured build does. The CUDA runtime is used when its header and
library are found (CUDA_HOME, CUDA_PATH, then /usr/local/cuda); the
library records no absolute path to it: at run time it is the
libcudart PyTorch's wheels ship (site-packages/nvidia/.../lib, found
relative to the package) or the one the CUDA install provides (the
loader's search path; gpubuddy._native preloads it from CUDA_HOME or
/usr/local/cuda). zlib is required (trace files). Set CC or CFLAGS to
change the build.

build_sdist packs the package with the C sources it builds from
(include/, lib/, tools/, configure.ac), so the sdist builds a wheel by
itself. build_editable compiles the library into the source tree
(gpubuddy/_lib, gpubuddy/_bin) and installs a .pth file naming it.
"""
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)             # python/
# The C sources: the repository in a clone, the sdist's own copy in an sdist.
ROOT = PKG if os.path.isdir(os.path.join(PKG, "lib")) else os.path.dirname(PKG)
NAME = "gpubuddy"
# What build_sdist copies from ROOT besides the package: the C sources the
# wheel compiles, and what the features and version are read from.
SDIST_FROM_ROOT = ("include", "lib", "tools/common", "tools/gpubuddy-replay.c",
                   "tools/gpubuddy-import-torch", "configure.ac", "LICENSE")
# The features configure.ac probes, by the macro its config.h defines: the
# pattern finds the header's name in configure.ac, so both probe the same.
FEATURES = (("HAVE_EXECINFO_H", r"AC_CHECK_HEADERS\(\[(execinfo\.h)\]", None),
            ("GPB_HAVE_NVTX", r"AC_CHECK_HEADER\(\[(nvtx3/[\w.]+)\], \[have_nvtx", "cuda"),
            ("GPB_HAVE_LIBDEFLATE", r"AC_CHECK_HEADER\(\[(libdeflate\.h)\]", "-ldeflate"))


def _version():
    with open(os.path.join(ROOT, "include", "gpubuddy.h")) as f:
        m = re.search(r'#define GPB_VERSION_STRING "([^"]+)"', f.read())
    if not m:
        raise RuntimeError("gpubuddy: no GPB_VERSION_STRING in include/gpubuddy.h")
    return m.group(1)


def _say(msg):
    sys.stderr.write("gpubuddy build: %s\n" % msg)


def _cuda_dirs():
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                 "/usr/local/cuda"):
        if not base:
            continue
        inc = os.path.join(base, "include")
        for libdir in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            lib = os.path.join(base, libdir)
            if (os.path.exists(os.path.join(inc, "cuda_runtime_api.h")) and
                    any(n.startswith("libcudart.so") for n in os.listdir(lib)
                        if os.path.isdir(lib))):
                return inc, lib
    return None, None


def _cc_ok(cc, code, args):
    """Whether cc compiles and links `code` with args (a configure test)."""
    tmp = tempfile.mkdtemp(prefix="gpubuddy-probe-")
    try:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(code)
        p = subprocess.run([cc, src, "-o", os.path.join(tmp, "probe")] + args,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return p.returncode == 0
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _features(cc, cuda_inc):
    """The macros configure would define here (config.h), from the headers
    configure.ac names, probed with the same compiler; and the libraries
    they need."""
    with open(os.path.join(ROOT, "configure.ac")) as f:
        ac = f.read()
    defs, libs = [], []
    for macro, pattern, needs in FEATURES:
        m = re.search(pattern, ac)
        if not m:
            raise RuntimeError("gpubuddy: configure.ac no longer probes %s as "
                               "expected (%s): update FEATURES in %s" % (
                                   macro, pattern, os.path.basename(__file__)))
        pre, args = "", []
        if needs == "cuda":
            if not cuda_inc:
                continue
            pre, args = "#include <cuda_runtime_api.h>\n", ["-I" + cuda_inc, "-c"]
        elif needs:
            args = [needs]
        if _cc_ok(cc, "%s#include <%s>\nint main(void) { return 0; }\n"
                  % (pre, m.group(1)), args):
            defs.append("-D%s=1" % macro)
            if needs and needs.startswith("-l"):
                libs.append(needs)
    return defs, libs


def _cudart_soname(lib):
    """libcudart.so.MAJOR, the name the library will ask the loader for."""
    real = os.path.basename(os.path.realpath(os.path.join(lib, "libcudart.so")))
    m = re.match(r"(libcudart\.so\.\d+)", real)
    return m.group(1) if m else "libcudart.so"


# Where a libcudart is found at run time, relative to _lib/ and _bin/: the
# one PyTorch's wheels ship (nvidia-cuda-runtime-cu12, and CUDA 13's
# nvidia/cu13); else the loader's own search path (a CUDA install).
CUDART_RPATH = ("$ORIGIN/../../nvidia/cuda_runtime/lib", "$ORIGIN/../../nvidia/cu13/lib")


def _compile(out_so, out_replay, out_cudart):
    cc = os.environ.get("CC", "cc")

    def sources(*dirs):
        return sorted(os.path.join(d, f) for top in dirs
                      for d, _, fs in os.walk(os.path.join(ROOT, top))
                      for f in fs if f.endswith(".c"))
    srcs = sources("lib")
    if not srcs:
        raise RuntimeError("gpubuddy: no C sources under %s/lib: build from a "
                           "clone of the repository or an sdist" % ROOT)
    flags = ["-O2", "-g", "-std=gnu11", "-DGPB_BUILDING_LIBRARY", "-D_GNU_SOURCE",
             "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "lib")]
    flags += os.environ.get("CFLAGS", "").split()
    libs = ["-lz", "-lpthread", "-lm", "-ldl"]
    inc, lib = _cuda_dirs()
    feats, feat_libs = _features(cc, inc)
    flags += feats
    libs += feat_libs
    _say("features as configure finds them: %s" % (" ".join(
        f[2:-2] for f in feats) or "none"))
    if inc:
        flags += ["-DGPB_HAVE_CUDA=1", "-I" + inc]
        libs += ["-L" + lib, "-lcudart"] + ["-Wl,-rpath," + r for r in CUDART_RPATH]
        with open(out_cudart, "w") as f:
            f.write(_cudart_soname(lib) + "\n")
        _say("CUDA runtime %s from %s (found at run time by name)" % (
            _cudart_soname(lib), lib))
    else:
        _say("no CUDA runtime found (CUDA_HOME, /usr/local/cuda): host "
             "backends only")
    # The tool links the library just built, as the tools link the
    # installed one: the package's _bin/ and _lib/ sit side by side.
    common = os.path.join(ROOT, "tools", "common")
    lib_dir = os.path.dirname(out_so)
    jobs = [("libgpubuddy", [cc, "-fPIC", "-shared", "-fvisibility=hidden"] +
             flags + srcs + ["-o", out_so] + libs),
            ("gpubuddy-replay", [cc] + flags + ["-I" + common,
             os.path.join(ROOT, "tools", "gpubuddy-replay.c")] +
             sources(os.path.join("tools", "common")) +
             ["-o", out_replay, "-L" + lib_dir, "-lgpubuddy",
              "-Wl,-rpath,$ORIGIN/../_lib"] + libs)]
    _say("compiling %d sources with %s, then gpubuddy-replay" % (len(srcs), cc))
    for name, cmd in jobs:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout)
            raise RuntimeError("gpubuddy: compiling %s failed (%s); the "
                               "compiler's output is above" % (name, cc))


# PyTorch's allocator interface (gpubuddy/_cppext.py names and builds it).
ALLOCATOR = "gpubuddy_torch_alloc"


def _torch_plan(lib_dir, out):
    """(plan, how) from gpubuddy/_cppext.py run by this build's Python:
    the command compiling the allocator against its torch, and what it is
    built for; (None, why) when it has no torch. Only the build's own
    environment counts: pip's build isolation hides the user's torch, and
    the wheel is then built without the object (--no-build-isolation
    builds it in)."""
    script = os.path.join(PKG, NAME, "_cppext.py")
    argv = [sys.executable, script, os.path.join(PKG, NAME), lib_dir,
            os.path.join(ROOT, "include"), out]
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        return None, str(e)
    if p.returncode == 0:
        return json.loads(p.stdout.strip().splitlines()[-1]), ""
    return None, (p.stderr.strip().splitlines() or ["status %d" % p.returncode])[-1]


def _prebuild(lib_dir):
    """[(path, archive name)] of the allocator compiled against the build's
    torch, and its record; [] and one line saying why when it cannot be
    (no torch, no CUDA toolkit, no C++ compiler, a compile error): the
    wheel goes on without it, and enable() builds it at first use."""
    so = os.path.join(lib_dir, ALLOCATOR + ".so")
    rec = os.path.join(lib_dir, ALLOCATOR + ".json")
    later = "; enable() builds it at first use instead"
    if os.environ.get("GPB_PREBUILD", "1") == "0":
        _say("PyTorch's allocator interface not prebuilt (GPB_PREBUILD=0)" + later)
        return []
    plan, how = _torch_plan(lib_dir, so)
    if plan is None:
        _say("PyTorch's allocator interface not prebuilt: %s (%s)%s"
             % (how, sys.executable, later))
        return []
    r = plan["record"]
    what = "torch %s (C++ ABI %d, CUDA %s)%s" % (r["torch"], r["cxx11_abi"],
                                                r["cuda"], how)
    log = os.path.join(lib_dir, "allocator.log")
    try:
        with open(log, "w") as f:
            p = subprocess.run(plan["argv"], stdout=f, stderr=subprocess.STDOUT)
        why = "status %d" % p.returncode if p.returncode else None
    except OSError as e:  # no C++ compiler
        why = str(e)
    if why:
        with open(log) as f:  # the first error says the most
            out = f.read().strip().splitlines()
        errs = [x for x in out if "error" in x] or out[-1:] or [why]
        _say("PyTorch's allocator interface not prebuilt: compiling it against "
             "%s failed: %s%s" % (what, errs[0].strip()[:200], later))
        return []
    with open(rec, "w") as f:
        json.dump(r, f, sort_keys=True)
        f.write("\n")
    _say("PyTorch's allocator interface prebuilt for " + what)
    return [(so, "_lib/%s.so" % ALLOCATOR), (rec, "_lib/%s.json" % ALLOCATOR)]


def _tag():
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-" + plat


def _metadata(version):
    with open(os.path.join(PKG, "README.md")) as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: gpubuddy, a buddy allocator for CUDA memory, as "
            "PyTorch's and CuPy's allocator\nLicense: MIT\nRequires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, version, readme))


# Console scripts (entry_points.txt): what a pip-only install runs.
ENTRY_POINTS = ("[console_scripts]\n"
                "gpubuddy-import-torch = gpubuddy._cli:import_torch\n"
                "gpubuddy-replay = gpubuddy._cli:replay\n")


def _record_line(arc, data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "%s,sha256=%s,%d" % (arc, h.decode(), len(data))


def _package_files():
    """(archive name, bytes) of the package's Python files, without what
    builds leave in the tree (_lib, _bin of an editable install)."""
    files = []
    src = os.path.join(PKG, NAME)
    for d, dirs, fs in os.walk(src):
        dirs[:] = sorted(x for x in dirs if x not in ("__pycache__", "_lib", "_bin"))
        for f in sorted(fs):
            if f.endswith((".pyc", ".so")):
                continue
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                files.append((os.path.relpath(p, PKG).replace(os.sep, "/"), fh.read()))
    return files


def _built_files(tmp):
    """Compiles into tmp; (archive name, bytes) of what the package gets."""
    so, replay = os.path.join(tmp, "libgpubuddy.so"), os.path.join(tmp, "gpubuddy-replay")
    cudart = os.path.join(tmp, "cudart")
    _compile(so, replay, cudart)
    files = []
    for path, arc in ((so, "_lib/libgpubuddy.so"), (replay, "_bin/gpubuddy-replay"),
                      *_prebuild(tmp),
                      (cudart, "_lib/cudart"),
                      (os.path.join(ROOT, "include", "gpubuddy.h"), "_lib/include/gpubuddy.h"),
                      (os.path.join(ROOT, "tools", "gpubuddy-import-torch"),
                       "_import_torch.py")):
        if os.path.exists(path):
            with open(path, "rb") as fh:
                files.append((NAME + "/" + arc, fh.read()))
    return files


def _write_wheel(wheel_directory, version, files):
    tag = _tag()
    dist = "%s-%s.dist-info" % (NAME, version)
    files = list(files)
    files.append((dist + "/METADATA", _metadata(version).encode()))
    files.append((dist + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: "
                  "gpubuddy_build\nRoot-Is-Purelib: false\nTag: %s\n" % tag).encode()))
    files.append((dist + "/entry_points.txt", ENTRY_POINTS.encode()))
    with open(os.path.join(ROOT, "LICENSE"), "rb") as fh:
        files.append((dist + "/LICENSE", fh.read()))
    record = [_record_line(a, d) for a, d in files] + [dist + "/RECORD,,"]
    files.append((dist + "/RECORD", ("\n".join(record) + "\n").encode()))
    name = "%s-%s-%s.whl" % (NAME, version, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            info = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            # A regular file's type bits too: pip makes a file
            # executable only when they are there.
            exe = arc.endswith(".so") or "/_bin/" in arc
            info.external_attr = (0o100000 | (0o755 if exe else 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tmp = tempfile.mkdtemp(prefix="gpubuddy-build-")
    try:
        return _write_wheel(wheel_directory, _version(),
                            _package_files() + _built_files(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: the library is compiled into the source tree (gpubuddy/_lib,
    gpubuddy/_bin), and a .pth file puts the tree on sys.path, so edits to
    the Python files take effect at once (C changes: install again)."""
    tmp = tempfile.mkdtemp(prefix="gpubuddy-build-")
    try:
        for ext in (".so", ".json"):  # an earlier install's, if this one has none
            stale = os.path.join(PKG, NAME, "_lib", ALLOCATOR + ext)
            if os.path.exists(stale):
                os.remove(stale)
        for arc, data in _built_files(tmp):
            if arc.endswith("_import_torch.py"):
                continue  # gpubuddy._cli reads the clone's tools/ itself
            dest = os.path.join(PKG, *arc.split("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as fh:
                fh.write(data)
            if "/_bin/" in arc or arc.endswith(".so"):
                os.chmod(dest, 0o755)
        pth = [("_gpubuddy_editable.pth", (PKG + "\n").encode())]
        return _write_wheel(wheel_directory, _version(), pth)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sdist_add(tar, path, arc):
    """Adds a file or tree, leaving out what builds and Python leave."""
    def skip(info):
        base = os.path.basename(info.name)
        if base in ("__pycache__", "_lib", "_bin") or base.endswith((".pyc", ".o", ".so")):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 1767225600  # 2026-01-01: the same sources, the same bytes
        return info
    tar.add(path, arcname=arc, filter=skip)


def build_sdist(sdist_directory, config_settings=None):
    """PEP 517: gpubuddy-VERSION.tar.gz with the package, its backend and the
    C sources it compiles (the sdist's ROOT is itself)."""
    version = _version()
    base = "%s-%s" % (NAME, version)
    name = base + ".tar.gz"
    pkg_info = _metadata(version).encode()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        for f in ("pyproject.toml", "README.md", "_build", NAME, "tests"):
            if os.path.exists(os.path.join(PKG, f)):
                _sdist_add(tar, os.path.join(PKG, f), base + "/" + f)
        for f in SDIST_FROM_ROOT:
            _sdist_add(tar, os.path.join(ROOT, f), base + "/" + f)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size, info.mtime, info.mode = len(pkg_info), 1767225600, 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
    return name
