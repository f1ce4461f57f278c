#!/bin/sh
# SPDX-License-Identifier: MIT
# torch-memory.sh OUT PHASE [ARGS...]: one call on the GPU machine of the
# PyTorch comparison (samples/torch/memory_compare.py): builds the newest
# `make dist` tarball carried in .gpu/ (no libtool needed there), installs
# the Python package from it with one offline pip command, then runs
# PHASE (base, caps or steps) with its results in OUT. ARGS go to the phase.
set -eu
out=$1
phase=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/gpb-torch
tarball=$(ls -t "$here"/.gpu/gpubuddy-*.tar.gz | head -1)
mkdir -p "$work" "$out"
if [ ! -x "$work/build/tools/gpubuddy-replay" ] || [ "$tarball" -nt "$work/stamp" ]; then
  rm -rf "$work/src" "$work/build" "$work/site"
  mkdir -p "$work/src" "$work/build"
  tar xzf "$tarball" -C "$work/src" --strip-components=1
  (cd "$work/build" && "$work/src/configure" -q >/dev/null &&
     make -j"$(nproc)" >/dev/null) || { echo "torch-memory: build failed" >&2; exit 1; }
  python3 -m pip install -q --no-index --target "$work/site" "$work/src/python"
  touch "$work/stamp"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
export PYTHONPATH="$work/site"
exec python3 "$work/src/samples/torch/memory_compare.py" "$phase" --out "$out" \
  --replay "$work/build/tools/gpubuddy-replay" "$@"
