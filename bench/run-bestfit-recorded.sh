#!/bin/sh
# SPDX-License-Identifier: MIT
# run-bestfit-recorded.sh OUT TARBALL [ROUNDS]: best fit against the buddy
# policy on allocation streams recorded here and now from real PyTorch
# workloads (issue 14), on a GPU machine. Builds TARBALL (a `make dist`
# tarball) with CUDA, installs the Python package from it offline, then:
#   1. records one gpubuddy trace per workload of
#      samples/torch/workloads.py (ResNet-50 training, GPT-2 training,
#      GPT-2 fp16 inference), each run under gpubuddy.torch;
#   2. replays each with `gpubuddy-bench --only traces --trace T
#      --trace-rounds ROUNDS --contenders gpubuddy,gpubuddy-bestfit,
#      gpubuddy-bestfit-plan,empty-call` (ROUNDS default 5), on the device
#      backend and on the host backend: the smallest pool per policy and
#      following the trace's own plan, and the latencies side by side
#      with the empty call's (the timer's floor). Three pools only, so
#      that GPT-2 training's (14.7 GiB each) fit an 80 GiB GPU together.
# Writes OUT/device.txt, OUT/{gpu,host}-W.txt and OUT/traces.tar (the
# recorded traces, for replaying elsewhere): 8 files. Prints the
# rows that compare the policies. A pool the device cannot hold beside
# the other is cut to fit, and then it may fail allocations: the last
# column counts them.
set -u
[ $# -ge 2 ] || { echo "usage: $0 OUT TARBALL [ROUNDS]" >&2; exit 2; }
out=$1 tarball=$2 rounds=${3:-5}
. "$(dirname "$0")/gpu-common.sh"
work=${TMPDIR:-/tmp}/gpb-recorded
mkdir -p "$out" || exit 1
build_cuda "$tarball" "$work" || exit 1
mkdir -p "$work/traces" || exit 1
python3 -m pip install -q --no-index --target "$work/site" "$src/python" ||
  { echo "run-bestfit-recorded: pip install failed" >&2; exit 1; }
describe_gpu "$out/device.txt"
for w in resnet gpt infer; do
  t=$work/traces/real-$w.trace.gz
  echo "$(date -u +%H:%M:%S) recording $w..." >&2
  PYTHONPATH=$work/site timeout 300 python3 "$src/samples/torch/workloads.py" \
    "$w" gpubuddy --trace "$t" >"$work/record-$w.json" 2>&1
  # The package writes X.DEVICE.gz for a PATH X.gz.
  [ -f "${t%.gz}.0.gz" ] && mv "${t%.gz}.0.gz" "$t"
  if [ ! -s "$t" ]; then
    echo "run-bestfit-recorded: no trace for $w:" >&2
    tail -3 "$work/record-$w.json" >&2
    continue
  fi
  for be in gpu host; do
    echo "$(date -u +%H:%M:%S) replaying $w ($be)..." >&2
    timeout 240 ./bench/gpubuddy-bench --"$be" --only traces --trace "$t" \
      --trace-rounds "$rounds" \
      --contenders gpubuddy,gpubuddy-bestfit,gpubuddy-bestfit-plan,empty-call \
      >"$out/$be-$w.txt" 2>/dev/null
  done
done
tar -cf "$out/traces.tar" -C "$work/traces" . ||
  echo "run-bestfit-recorded: could not pack the traces" >&2
for f in "$out"/gpu-*.txt "$out"/host-*.txt; do
  echo "== $(basename "$f")"
  grep -iE '^== Trace|smallest pool|^plan |^replay +(gpubuddy(-bestfit(-plan)?)?|empty-call) ' "$f"
done
