#!/bin/sh
# SPDX-License-Identifier: MIT
# test_wheel.sh: the Python package builds the standard way, offline.
# `python3 -m build` makes an sdist and, from it, a wheel; the wheel finds
# the same features configure found here (config.h), names libcudart with
# no path of this machine, and installs in a fresh virtual environment
# with its console scripts; an editable install (pip install -e) of a copy
# of the tree imports from that tree. The build's isolated environment has
# no torch: the wheel is built all the same, without the prebuilt C++
# allocator, and one line says so (tests/test_prebuild.sh builds one
# where torch is). Skips (77) where pip, venv or the
# `build` module are missing (pip install build).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(pwd)
py=${PYTHON:-python3}
$py -m pip --version >/dev/null 2>&1 || { echo "SKIP: no pip for $py"; exit 77; }
$py -c 'import build' 2>/dev/null || { echo "SKIP: no 'build' module (pip install build)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
$py -m venv "$tmp/venv" >/dev/null 2>&1 || { echo "SKIP: $py -m venv fails"; exit 77; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset LD_LIBRARY_PATH

# 1. sdist, then a wheel built from the unpacked sdist (build's default).
if ! $py -m build --outdir "$tmp/dist" "$top/python" > "$tmp/build.log" 2>&1; then
  tail -20 "$tmp/build.log"
  echo "FAIL: python3 -m build"
  exit 1
fi
sdist=$(ls "$tmp"/dist/gpubuddy-*.tar.gz 2>/dev/null)
whl=$(ls "$tmp"/dist/gpubuddy-*.whl 2>/dev/null)
[ -n "$sdist" ] && [ -n "$whl" ] || { echo "FAIL: no sdist or wheel: $(ls "$tmp/dist")"; exit 1; }
for f in configure.ac include/gpubuddy.h lib/pool/pool.c tools/gpubuddy-replay.c PKG-INFO; do
  tar tzf "$sdist" | grep -q "^gpubuddy-[^/]*/$f\$" || fail "sdist lacks $f"
done

# 2. One truth for features: what the wheel's build found is what
#    configure defined in this build's config.h, unless this build was
#    told to do without (--without-cuda drops NVTX, --without-libdeflate
#    libdeflate): the wheel probes, it takes no such flags.
got=$(sed -n 's/^gpubuddy build: features as configure finds them: //p' "$tmp/build.log")
if [ -f "$build/config.h" ]; then
  args=$(sed -n 's/^ac_cs_config=//p' "$build/config.status" 2>/dev/null)
  skip=
  case $args in *--without-cuda*) skip="$skip GPB_HAVE_NVTX" ;; esac
  case $args in *--without-libdeflate*) skip="$skip GPB_HAVE_LIBDEFLATE" ;; esac
  keep() { for m in "$@"; do case " $skip " in *" $m "*) ;; *) printf '%s ' "$m" ;; esac; done; }
  want=$(for m in $(keep HAVE_EXECINFO_H GPB_HAVE_NVTX GPB_HAVE_LIBDEFLATE); do
           grep -q "^#define $m 1" "$build/config.h" && printf '%s ' "$m"; done)
  got=$(keep $got)
  [ "$(echo $got)" = "$(echo ${want:-none})" ] ||
    fail "the wheel found '$got', configure '$want'"
fi

# 3. No path of the build machine: every RUNPATH entry is $ORIGIN-relative.
(cd "$tmp" && mkdir w && cd w && $py -m zipfile -e "$whl" .) || fail "cannot unpack the wheel"
for so in "$tmp"/w/gpubuddy/_lib/libgpubuddy.so "$tmp"/w/gpubuddy/_bin/gpubuddy-replay \
          "$tmp"/w/gpubuddy/_lib/gpubuddy_torch_alloc.so; do
  case $so in *_torch_alloc.so) [ -f "$so" ] || continue ;; esac  # only with torch
  [ -f "$so" ] || { fail "the wheel lacks $so"; continue; }
  command -v readelf >/dev/null || break
  rp=$(readelf -d "$so" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p' | tr ':' ' ')
  for d in $rp; do
    case $d in '$ORIGIN'*) ;; *) fail "$(basename "$so") has run path $d" ;; esac
  done
done
# One line on the C++ allocator; without torch, the wheel has none.
said=$(grep -c "^gpubuddy build: PyTorch's allocator interface" "$tmp/build.log")
[ "$said" = 1 ] || fail "$said lines on the C++ allocator in the build's output"
line=$(grep "^gpubuddy build: PyTorch's allocator interface" "$tmp/build.log")
case $line in
  *"not prebuilt: "*torch*) [ ! -e "$tmp"/w/gpubuddy/_lib/gpubuddy_torch_alloc.so ] ||
                              fail "a C++ allocator built without torch" ;;
  *"prebuilt for torch "*) [ -f "$tmp"/w/gpubuddy/_lib/gpubuddy_torch_alloc.json ] ||
                              fail "a prebuilt C++ allocator with no record" ;;
  *) fail "the build said '$line'" ;;
esac
cat "$tmp"/w/gpubuddy-*.dist-info/entry_points.txt 2>/dev/null |
  grep -q '^gpubuddy-import-torch = ' || fail "no gpubuddy-import-torch console script"

# 4. A fresh virtual environment: the wheel, its console scripts, imports.
v=$tmp/venv/bin
$v/pip install -q "$whl" > "$tmp/pip.log" 2>&1 || fail "pip install the wheel: $(tail -3 "$tmp/pip.log")"
want=$(sed -n 's/^#define GPB_VERSION_STRING "\(.*\)"/\1/p' "$top/include/gpubuddy.h")
for s in gpubuddy-import-torch gpubuddy-replay; do
  got=$(cd "$tmp" && $v/$s --version 2>&1)
  [ "$got" = "$s $want" ] || fail "$s --version: '$got'"
done
got=$(cd "$tmp" && $v/python -c 'import gpubuddy, gpubuddy.cupy; print(gpubuddy.__version__)' 2>&1)
[ "$got" = "$want" ] || fail "import gpubuddy in the venv: '$got'"

# 5. Editable: a copy of the tree (pip writes the library into it).
mkdir "$tmp/src" && (cd "$top" && cp -R python lib include tools configure.ac LICENSE "$tmp/src/") &&
  chmod -R u+w "$tmp/src"
$py -m venv "$tmp/venv2" >/dev/null 2>&1
if ! "$tmp/venv2/bin/pip" install -q -e "$tmp/src/python" > "$tmp/pipe.log" 2>&1; then
  fail "pip install -e: $(tail -3 "$tmp/pipe.log")"
else
  echo 'EDITED = 1' >> "$tmp/src/python/gpubuddy/_plan.py"
  got=$(cd "$tmp" && "$tmp/venv2/bin/python" -c 'import gpubuddy, gpubuddy._plan as p; print(gpubuddy.__file__, p.EDITED)' 2>&1)
  [ "$got" = "$tmp/src/python/gpubuddy/__init__.py 1" ] || fail "editable import: '$got'"
  got=$(cd "$tmp" && "$tmp/venv2/bin/gpubuddy-import-torch" --version 2>&1)
  [ "$got" = "gpubuddy-import-torch $want" ] || fail "editable gpubuddy-import-torch: '$got'"
fi
[ $fails = 0 ] && echo "wheel: sdist, wheel, venv install and editable install all checked"
exit $fails
