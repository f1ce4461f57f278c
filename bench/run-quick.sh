#!/bin/sh
# SPDX-License-Identifier: MIT
# run-quick.sh [BUILDDIR]: the benchmark's quick mode, as CI runs it:
# small counts, no thresholds, output in BUILDDIR/bench-quick. Checks the
# harness end to end (bench/test_bench_quick.sh is the make-check form).
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
bench=$build/bench/gpubuddy-bench
[ -x "$bench" ] || { echo "run-quick.sh: no $bench (build first)" >&2; exit 2; }
mode=--host
"$bench" --help | grep -q 'CUDA (--gpu available)' && command -v nvidia-smi >/dev/null 2>&1 &&
  nvidia-smi -L >/dev/null 2>&1 && mode=--gpu
exec "$bench" $mode --quick --out "$build/bench-quick"
