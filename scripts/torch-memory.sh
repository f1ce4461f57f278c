#!/bin/sh
# SPDX-License-Identifier: MIT
# torch-memory.sh OUT PHASE [ARGS...]: one call on the GPU machine of the
# PyTorch comparison (samples/torch/memory_compare.py): builds and installs
# the newest tarball in .gpu/ (scripts/torch-env.sh), then runs
# PHASE (base, caps or steps) with its results in OUT. ARGS go to the phase.
set -eu
out=$1
phase=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
. "$here/scripts/torch-env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
exec python3 "$work/src/samples/torch/memory_compare.py" "$phase" --out "$out" \
  --replay "$work/build/tools/gpubuddy-replay" "$@"
