#!/bin/sh
# SPDX-License-Identifier: MIT
# cupy-check.sh OUT [ARGS...]: one call on the GPU machine of the CuPy
# check (python/tests/cupy_torch_mix.py): a small PyTorch model trained on
# batches that CuPy preprocesses, in one process with one gpubuddy pool
# (asserted: one pool address, and stats holding blocks of both libraries'
# tags), then the smallest budget that runs, each try a fresh process on a
# size grid, for gpubuddy's shared pool and for PyTorch's caching
# allocator plus CuPy's memory pool. Builds and installs the newest
# tarball in .gpu/ first (scripts/torch-env.sh). ARGS go to the search
# (--grid MIB, --steps N). Results in OUT/cupy.md and OUT/cupy.json; exits
# non-zero when an assertion fails or no budget runs.
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/torch-env.sh"
python3 -c 'import cupy, torch; print("cupy", cupy.__version__, "torch", torch.__version__)' |
  tee "$out/versions.txt"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } |
  tee "$out/gpu.txt"
exec python3 "$work/src/python/tests/cupy_torch_mix.py" search --out "$out" "$@"
