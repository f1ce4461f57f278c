#!/bin/sh
# SPDX-License-Identifier: MIT
# run-gpu.sh OUTDIR [BUILDDIR]: the full benchmark suite on a GPU machine,
# for docs/PERFORMANCE.md. Runs gpubuddy-bench --gpu (gpubuddy's device
# backend vs cudaMalloc vs cudaMallocAsync, same run) and --host (host
# backend vs glibc malloc) and writes into OUTDIR:
#   device.txt           nvidia-smi, CPU, the exact commands
#   gpu/  host/          results.txt, results.json, summary.md, *.png
#   SUMMARY.md           both summaries, ready to paste
# The project must be built already: BUILDDIR/bench/gpubuddy-bench, or
# gpubuddy-bench on PATH, or ./build/bench/gpubuddy-bench. Traces: every
# samples/traces/*.gz (the bench finds them itself), plus any listed in
# $GPB_BENCH_TRACES (space-separated paths). Takes about 3 to 6 minutes;
# each run is cut off by `timeout`, 8 minutes in all.
set -u
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [BUILDDIR]" >&2; exit 2; }
out=$1
build=${2:-}
top=$(cd "$(dirname "$0")/.." && pwd)

bench=
if [ -n "$build" ] && [ -x "$build/bench/gpubuddy-bench" ]; then
  bench=$build/bench/gpubuddy-bench
elif command -v gpubuddy-bench >/dev/null 2>&1; then
  bench=$(command -v gpubuddy-bench)
elif [ -x "$top/build/bench/gpubuddy-bench" ]; then
  bench=$top/build/bench/gpubuddy-bench
fi
[ -n "$bench" ] || { echo "run-gpu.sh: gpubuddy-bench not found (give BUILDDIR)" >&2; exit 2; }
"$bench" --help | grep -q 'CUDA (--gpu available)' ||
  { echo "run-gpu.sh: $bench was built without CUDA" >&2; exit 2; }

mkdir -p "$out/gpu" "$out/host" || exit 1
extra=
for t in ${GPB_BENCH_TRACES:-}; do extra="$extra --trace $t"; done
export GPB_SAMPLES_DIR=${GPB_SAMPLES_DIR:-$top/samples/traces}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "bench: $bench"
  echo "git: $(cd "$top" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  grep -m1 'model name' /proc/cpuinfo
  echo "cores: $(nproc)"
} >"$out/device.txt"

rc=0
echo "== gpu run ==" >&2
timeout 330 "$bench" --gpu --out "$out/gpu" $extra >"$out/gpu/stdout.txt" 2>"$out/gpu/stderr.txt"
r=$?; [ $r -eq 0 ] || { echo "run-gpu.sh: --gpu run exited $r (see $out/gpu/stderr.txt)" >&2; rc=1; }
echo "== host run ==" >&2
timeout 150 "$bench" --host --out "$out/host" $extra >"$out/host/stdout.txt" 2>"$out/host/stderr.txt"
r=$?; [ $r -eq 0 ] || { echo "run-gpu.sh: --host run exited $r (see $out/host/stderr.txt)" >&2; rc=1; }

{
  echo "### GPU: gpubuddy device backend vs cudaMalloc vs cudaMallocAsync"
  echo
  [ -f "$out/gpu/summary.md" ] && sed 's/](\([a-z]\)/](gpu\/\1/' "$out/gpu/summary.md"
  echo
  echo "### Host of the GPU machine: gpubuddy host backend vs glibc malloc"
  echo
  [ -f "$out/host/summary.md" ] && sed 's/](\([a-z]\)/](host\/\1/' "$out/host/summary.md"
} >"$out/SUMMARY.md"
echo "run-gpu.sh: results in $out (SUMMARY.md to paste)" >&2
grep -E '^(PASS|MISS|n/a) ' "$out/gpu/stdout.txt" 2>/dev/null
exit $rc
