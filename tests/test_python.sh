#!/bin/sh
# SPDX-License-Identifier: MIT
# test_python.sh: the Python package installs with one pip command, offline,
# and says clearly what is missing: `import gpubuddy` without torch works,
# `import gpubuddy.torch` without torch is a one-line ImportError naming
# torch, and gpubuddy.torch's checks (no CUDA device, called after the
# first allocation, bad arguments, no pool yet) run against a stand-in
# torch module (python/tests/fake_torch), and gpubuddy.cupy's against a
# stand-in cupy (python/tests/fake_cupy). The real-GPU part is
# python/tests/torch_smoke.py, run by scripts/gpu-check.sh.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
$py -m pip --version >/dev/null 2>&1 || { echo "SKIP: no pip for $py"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-py.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# One command, no network: the build backend needs nothing from PyPI.
if ! PIP_NO_INDEX=1 $py -m pip install -q --target "$tmp/site" "$top/python" > "$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"
  echo "FAIL: pip install ./python"
  exit 1
fi
[ -f "$tmp/site/gpubuddy/_lib/libgpubuddy.so" ] || fail "no libgpubuddy.so in the package"
# The planner comes with the package: python -m gpubuddy replay runs it.
[ -x "$tmp/site/gpubuddy/_bin/gpubuddy-replay" ] || fail "no executable gpubuddy-replay in the package"
got=$(cd "$tmp" && PYTHONPATH="$tmp/site" $py -m gpubuddy replay --version 2>&1)
case $got in "gpubuddy-replay "[0-9]*) ;; *) fail "python -m gpubuddy replay --version: '$got'" ;; esac
(cd "$tmp" && PYTHONPATH="$tmp/site" $py -m gpubuddy replay --plan-out "$tmp/gpt.plan" \
   "$top/samples/traces/torch-gpt.trace.gz" >"$tmp/plan.out" 2>&1) ||
  fail "python -m gpubuddy replay --plan-out: $(tail -1 "$tmp/plan.out")"
[ "$(head -1 "$tmp/gpt.plan" 2>/dev/null)" = "gpubuddy-plan 1" ] || fail "no plan written"
got=$(cd "$tmp" && PYTHONPATH="$tmp/site" $py -m gpubuddy nosuch 2>&1)
rc=$?
[ $rc = 2 ] && [ "$(printf '%s\n' "$got" | wc -l)" = 1 ] ||
  fail "python -m gpubuddy nosuch: exit $rc, '$got'"

want=$(sed -n 's/^#define GPB_VERSION_STRING "\(.*\)"/\1/p' "$top/include/gpubuddy.h")
got=$(cd "$tmp" && PYTHONPATH="$tmp/site" $py -c 'import gpubuddy; print(gpubuddy.__version__)' 2>&1)
[ "$got" = "$want" ] || fail "import gpubuddy: '$got', expected version $want"

if ! PYTHONPATH="$tmp/site" $py -c 'import torch' 2>/dev/null; then
  out=$(cd "$tmp" && PYTHONPATH="$tmp/site" $py -c 'import gpubuddy.torch' 2>&1)
  [ $? != 0 ] || fail "import gpubuddy.torch without torch succeeded"
  last=$(printf '%s\n' "$out" | tail -1)
  case $last in
    "ImportError: gpubuddy.torch needs PyTorch"*torch*) ;;
    *) fail "without torch: '$last'" ;;
  esac
  # A traceback, but no chained one: the cause is said once.
  printf '%s\n' "$out" | grep -q 'During handling' && fail "chained traceback: $out"
fi

(cd "$tmp" && PYTHONPATH="$tmp/site:$top/python/tests/fake_torch" \
   $py "$top/python/tests/test_torch_api.py") || fail "test_torch_api.py"

# gpubuddy.cupy: without CuPy, enable() says so in one line; its logic
# runs against a stand-in cupy (python/tests/fake_cupy).
if ! PYTHONPATH="$tmp/site" $py -c 'import cupy' 2>/dev/null; then
  last=$(cd "$tmp" && PYTHONPATH="$tmp/site" $py -c \
         'import gpubuddy.cupy; gpubuddy.cupy.enable()' 2>&1 | tail -1)
  case $last in
    *"GpubuddyError: gpubuddy.cupy.enable() needs CuPy"*"'cupy' is not installed") ;;
    *) fail "gpubuddy.cupy.enable() without cupy: '$last'" ;;
  esac
fi
# The C++ parts' build cache, keyed on the torch ABI (a stand-in torch).
(cd "$tmp" && PYTHONPATH="$tmp/site" $py "$top/python/tests/test_cppext.py") ||
  fail "test_cppext.py"
(cd "$tmp" && PYTHONPATH="$tmp/site:$top/python/tests/fake_cupy" \
   $py "$top/python/tests/test_cupy_api.py" 2>"$tmp/cupy.err") ||
  { cat "$tmp/cupy.err"; fail "test_cupy_api.py"; }

[ $fails = 0 ] && echo "python package: all checks passed"
exit $fails
