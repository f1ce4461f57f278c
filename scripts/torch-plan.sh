#!/bin/sh
# SPDX-License-Identifier: MIT
# torch-plan.sh OUT [WORKLOAD...]: one call on the GPU machine of the
# placement-plan experiment (samples/torch/plan_check.py): a short
# PyTorch training run records its trace, gpubuddy-replay --plan-out lays
# it out, and a longer run follows the plan in a pool of the plan's
# extent. Builds and installs the newest tarball in .gpu/ first
# (scripts/torch-env.sh). Results in OUT/summary.md.
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/torch-env.sh"
{ nvidia-smi --query-gpu=name,driver_version,serial --format=csv,noheader; date -u; } |
  tee "$out/gpu.txt"
exec python3 "$work/src/samples/torch/plan_check.py" --out "$out" \
  --replay "$work/build/tools/gpubuddy-replay" "$@"
