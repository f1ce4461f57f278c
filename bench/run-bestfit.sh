#!/bin/sh
# SPDX-License-Identifier: MIT
# run-bestfit.sh OUT TARBALL [RUNS]: best fit against the buddy policy, side
# by side, on a GPU machine (issue 14). Builds TARBALL (a `make dist`
# tarball) with CUDA, then runs RUNS times (default 2), in turn:
#   gpubuddy-bench --gpu  --only fixed          device backend, every allocator
#   gpubuddy-bench --gpu  --only traces  --contenders P   device backend
#   gpubuddy-bench --host --only traces  --contenders P   host backend
#   gpubuddy-bench --gpu  --only threads        1 to 16 threads, arenas
# where P is gpubuddy,gpubuddy-bestfit,gpubuddy-bestfit-plan,empty-call:
# the two policies, best fit following the trace's own plan, and the
# timer's floor (a tail it shares is the host's). The other
# allocators stay out of the replays, where their passes would leave the
# policies' metadata cold at the start of each of theirs (the trace
# rows' p99.9 measured that, not the policies).
# Writes each run's output to OUT (at most 8 files for RUNS 2) and prints
# the rows that compare the policies.
set -u
[ $# -ge 2 ] || { echo "usage: $0 OUT TARBALL [RUNS]" >&2; exit 2; }
out=$1 tarball=$2 runs=${3:-2}
. "$(dirname "$0")/gpu-common.sh"
work=${TMPDIR:-/tmp}/gpb-bestfit
mkdir -p "$out" || exit 1
build_cuda "$tarball" "$work" || exit 1
bench=$PWD/bench/gpubuddy-bench
export GPB_SAMPLES_DIR=$src/samples/traces
describe_gpu "$out/device.txt"
pair=gpubuddy,gpubuddy-bestfit,gpubuddy-bestfit-plan,empty-call
i=1
while [ "$i" -le "$runs" ]; do
  timeout 150 "$bench" --gpu --only fixed >"$out/gpu-$i.txt" 2>/dev/null
  timeout 150 "$bench" --gpu --only traces --contenders "$pair" \
    >>"$out/gpu-$i.txt" 2>/dev/null
  timeout 100 "$bench" --host --only traces --contenders "$pair" \
    >"$out/host-$i.txt" 2>/dev/null
  timeout 200 "$bench" --gpu --only threads >"$out/threads-$i.txt" 2>/dev/null
  i=$((i + 1))
done
for f in "$out"/gpu-*.txt "$out"/host-*.txt; do
  echo "== $(basename "$f")"
  grep -E '^== Trace|^plan |^(replay|[0-9.]+ [KMG]?i?B) +(gpubuddy(-bestfit(-plan)?)?|empty-call) ' "$f"
done
for f in "$out"/threads-*.txt; do
  echo "== $(basename "$f")"
  grep -E '^gpubuddy' "$f"
done
