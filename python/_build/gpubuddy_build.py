# SPDX-License-Identifier: MIT
"""PEP 517 build backend of the gpubuddy Python package.

build_wheel compiles every C source of the library (../lib/*/*.c) once,
into one shared object with the system C compiler, as libgpubuddy.so
inside the package, then gpubuddy-replay (../tools) linked against that
object (rpath $ORIGIN/../_lib), as _bin/gpubuddy-replay, for `python -m
gpubuddy replay`; gpubuddy.make_plan calls the library's planner. It
writes the wheel (a zip with METADATA, WHEEL and RECORD) itself. The
CUDA runtime is used when its header and library are found (CUDA_HOME,
then /usr/local/cuda); NVTX when its headers are there too; zlib is
required (trace files). Set CC or CFLAGS to change the build.
"""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)             # python/
ROOT = os.path.dirname(PKG)             # the repository
NAME = "gpubuddy"


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


def _compile(out_so, out_replay):
    cc = os.environ.get("CC", "cc")

    def sources(*dirs):
        return sorted(os.path.join(d, f) for top in dirs
                      for d, _, fs in os.walk(os.path.join(ROOT, top))
                      for f in fs if f.endswith(".c"))
    srcs = sources("lib")
    if not srcs:
        raise RuntimeError("gpubuddy: no C sources under %s/lib: build from a "
                           "clone of the repository" % ROOT)
    flags = ["-O2", "-g", "-std=gnu11", "-DGPB_BUILDING_LIBRARY", "-D_GNU_SOURCE",
             "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "lib")]
    flags += os.environ.get("CFLAGS", "").split()
    libs = ["-lz", "-lpthread", "-lm", "-ldl"]
    inc, lib = _cuda_dirs()
    if inc:
        flags += ["-DGPB_HAVE_CUDA=1", "-I" + inc]
        libs += ["-L" + lib, "-lcudart", "-Wl,-rpath," + lib]
        if os.path.exists(os.path.join(inc, "nvtx3", "nvToolsExtMem.h")):
            flags.append("-DGPB_HAVE_NVTX=1")
        _say("CUDA runtime from %s" % lib)
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


def _tag():
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-" + plat


def _metadata(version):
    with open(os.path.join(PKG, "README.md")) as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: gpubuddy, a buddy allocator for CUDA memory, as "
            "PyTorch's allocator\nLicense: MIT\nRequires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, version, readme))


def _record_line(arc, data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "%s,sha256=%s,%d" % (arc, h.decode(), len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    tag = _tag()
    tmp = tempfile.mkdtemp(prefix="gpubuddy-build-")
    try:
        so = os.path.join(tmp, "libgpubuddy.so")
        replay = os.path.join(tmp, "gpubuddy-replay")
        _compile(so, replay)
        files = []  # (archive name, bytes)
        src = os.path.join(PKG, NAME)
        for d, _, fs in os.walk(src):
            for f in sorted(fs):
                if f.endswith((".pyc", ".so")) or "__pycache__" in d:
                    continue
                p = os.path.join(d, f)
                arc = os.path.relpath(p, PKG).replace(os.sep, "/")
                with open(p, "rb") as fh:
                    files.append((arc, fh.read()))
        with open(so, "rb") as fh:
            files.append((NAME + "/_lib/libgpubuddy.so", fh.read()))
        with open(replay, "rb") as fh:
            files.append((NAME + "/_bin/gpubuddy-replay", fh.read()))
        with open(os.path.join(ROOT, "include", "gpubuddy.h"), "rb") as fh:
            files.append((NAME + "/_lib/include/gpubuddy.h", fh.read()))
        dist = "%s-%s.dist-info" % (NAME, version)
        files.append((dist + "/METADATA", _metadata(version).encode()))
        files.append((dist + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: "
                      "gpubuddy_build\nRoot-Is-Purelib: false\nTag: %s\n" % tag).encode()))
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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
