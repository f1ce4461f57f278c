#!/bin/sh
# SPDX-License-Identifier: MIT
# test_prebuild.sh: where the build's Python has torch, the wheel carries
# PyTorch's allocator interface prebuilt against it. pip install
# --no-build-isolation --target prebuilds it, says so in one line, and
# the object finds libgpubuddy
# by $ORIGIN only, exports only gpbx_install, records the torch it was
# built for, and is what gpubuddy.torch._native_path() picks, with no
# build at first use; with a record of another torch the cached build is
# used, and its line says why. Under pip's build isolation (no torch
# there), without a C++ compiler or with a broken one the install still
# succeeds and one line says the allocator was not prebuilt. No GPU is needed: enable() is not
# called. The Python with torch is GPB_TORCH_PYTHON, else
# /opt/torchenv/bin/python, else python3; skips (77) when none has torch
# with its C++ headers.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
py=
for c in "${GPB_TORCH_PYTHON:-}" /opt/torchenv/bin/python python3; do
  [ -n "$c" ] && "$c" -c 'import torch.utils.cpp_extension as c; assert c.CUDA_HOME' \
    > /dev/null 2>&1 && { py=$c; break; }
done
[ -n "$py" ] || { echo "SKIP: no Python with torch and a CUDA toolkit"; exit 77; }
"$py" -m pip --version > /dev/null 2>&1 || { echo "SKIP: no pip for $py"; exit 77; }
command -v readelf > /dev/null && command -v nm > /dev/null || { echo "SKIP: no readelf or nm"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-prebuild.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 GPB_CPPEXT_CACHE=$tmp/cache
unset GPB_PREBUILD
said() { grep "gpubuddy build: PyTorch's allocator interface" "$1" | sed 's/^ *//'; }

# 1. The build's Python has torch.
"$py" -m pip install -v --no-build-isolation --target "$tmp/site" "$top/python" > "$tmp/pip.log" 2>&1 ||
  { tail -20 "$tmp/pip.log"; echo "FAIL: pip install --target"; exit 1; }
line=$(said "$tmp/pip.log")
case $line in
  "gpubuddy build: PyTorch's allocator interface prebuilt for torch "*) ;;
  *) fail "the build said '$line'" ;;
esac
lib=$tmp/site/gpubuddy/_lib
so=$lib/gpubuddy_torch_alloc.so
[ -f "$so" ] && [ -f "$lib/gpubuddy_torch_alloc.json" ] || { echo "FAIL: no prebuilt allocator in $lib"; exit 1; }
rp=$(readelf -d "$so" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
[ "$rp" = '$ORIGIN' ] || fail "the prebuilt allocator's run path is '$rp'"
readelf -d "$so" | grep -q 'NEEDED.*\[libgpubuddy\.so\]' || fail "the allocator does not link libgpubuddy"
syms=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort -u | tr '\n' ' ')
[ "$syms" = "gpbx_install " ] || fail "the allocator exports '$syms'"
want=$("$py" -c 'import sys, torch; print("%s %s %s %d.%d" % (torch.__version__,
  bool(torch._C._GLIBCXX_USE_CXX11_ABI), torch.version.cuda, *sys.version_info[:2]))' 2>/dev/null)
got=$("$py" -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["torch"], r["cxx11_abi"], r["cuda"], r["python"])' "$lib/gpubuddy_torch_alloc.json")
[ "$got" = "$want" ] || fail "the record says '$got', the torch is '$want'"

pick() { (cd "$tmp" && PYTHONPATH="$tmp/site" "$py" -c \
  'import gpubuddy.torch as gt; print(gt._native_path())' 2>&1 | grep -v '^W[0-9]'); }
got=$(pick)
[ "$got" = "$so" ] || fail "_native_path() gave '$got', not the prebuilt $so"
[ ! -e "$tmp/cache" ] || fail "a build at first use beside the prebuilt allocator: $(ls "$tmp/cache")"

# 2. A record of another torch: the cached build, with one line on why
#    (cpp_extension.load needs ninja).
if ! "$py" -c 'from torch.utils.cpp_extension import is_ninja_available as n; assert n()' 2>/dev/null; then
  echo "no ninja: the cached build is not tried"
else
  sed 's/"torch": "[^"]*"/"torch": "0.0.1"/' "$lib/gpubuddy_torch_alloc.json" > "$tmp/rec" &&
    cp "$tmp/rec" "$lib/gpubuddy_torch_alloc.json"
  got=$(pick)
  case $got in
    "gpubuddy: building PyTorch's allocator interface for torch "*"; the package's prebuilt one is for torch 0.0.1)
$tmp/cache/gpubuddy_torch_alloc-"*/gpubuddy_torch_alloc.so) ;;
    *) fail "with another torch's record, _native_path() gave '$got'" ;;
  esac
fi

# 3. Build isolation hides torch; no C++ compiler; a failing one.
"$py" -m pip install -v --target "$tmp/site1" "$top/python" > "$tmp/pip1.log" 2>&1 ||
  fail "pip install with build isolation: $(tail -3 "$tmp/pip1.log")"
case $(said "$tmp/pip1.log") in
  "gpubuddy build: PyTorch's allocator interface not prebuilt: "*"torch"*) ;;
  *) fail "with build isolation the build said '$(said "$tmp/pip1.log")'" ;;
esac
[ ! -e "$tmp/site1/gpubuddy/_lib/gpubuddy_torch_alloc.so" ] || fail "an allocator built in isolation"
CXX=$tmp/no-such-c++ "$py" -m pip install -v --no-build-isolation --target "$tmp/site2" "$top/python" \
  > "$tmp/pip2.log" 2>&1 || fail "pip install without a C++ compiler: $(tail -3 "$tmp/pip2.log")"
line=$(said "$tmp/pip2.log")
case $line in
  "gpubuddy build: PyTorch's allocator interface not prebuilt: compiling it against torch "*"failed: "*"no-such-c++"*) ;;
  *) fail "without a C++ compiler the build said '$line'" ;;
esac
[ -f "$tmp/site2/gpubuddy/_lib/libgpubuddy.so" ] || fail "no libgpubuddy.so without a C++ compiler"
[ ! -e "$tmp/site2/gpubuddy/_lib/gpubuddy_torch_alloc.so" ] || fail "an allocator without a C++ compiler"
CXX=false "$py" -m pip install -v --no-build-isolation --target "$tmp/site3" "$top/python" \
  > "$tmp/pip3.log" 2>&1 || fail "pip install --no-build-isolation: $(tail -3 "$tmp/pip3.log")"
case $(said "$tmp/pip3.log") in
  *"not prebuilt: compiling it against torch "*"failed: status 1;"*) ;;
  *) fail "with a failing C++ compiler the build said '$(said "$tmp/pip3.log")'" ;;
esac
[ ! -e "$tmp/site3/gpubuddy/_lib/gpubuddy_torch_alloc.so" ] || fail "an allocator from a failed compile"

[ $fails = 0 ] && echo "prebuild: the wheel's C++ allocator is built, linked, recorded and picked"
exit $fails
