#!/bin/sh
# SPDX-License-Identifier: MIT
# torch-dropin.sh OUT PHASE [ARGS...]: one experiment of gpubuddy as
# PyTorch's allocator on the GPU machine. Builds and installs the newest
# tarball in .gpu/ (scripts/torch-env.sh), builds the C++ allocator once,
# then runs PHASE with its results in OUT:
#   matrix      every torch.cuda memory tool natively and under gpubuddy,
#               each check a fresh process (python/tests/torch_matrix.py)
#   base        losses, step times and traces of the three workloads
#               (memory_compare.py base; ARGS go there)
#   caps        the smallest size each allocator runs the three workloads
#               in (samples/torch/memory_compare.py caps; ARGS go there)
#   steps       step time and alloc+free cost, paired rounds
#               (memory_compare.py steps; ARGS go there)
#   frameworks  Hugging Face Trainer and PyTorch Lightning, unmodified,
#               natively and under gpubuddy (samples/torch/frameworks.py)
#   stacks      enable(stacks=True and "all"): call sites in the pool's trace,
#               and their cost per allocation (python/tests/torch_stacks.py)
set -eu
out=$1
phase=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
. "$here/scripts/torch-env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import gpubuddy.torch as gt; print(gt._native_path())"
export GPB_IMPORT_TORCH="$work/src/tools/gpubuddy-import-torch"
src=$work/src
case $phase in
  matrix) exec python3 "$src/python/tests/torch_matrix.py" --out "$out" "$@" ;;
  base|caps|steps) exec python3 "$src/samples/torch/memory_compare.py" "$phase" \
      --out "$out" --replay "$work/build/tools/gpubuddy-replay" "$@" ;;
  frameworks) exec python3 "$src/samples/torch/frameworks.py" --out "$out" "$@" ;;
  stacks) exec python3 "$src/python/tests/torch_stacks.py" \
      --replay "$work/build/tools/gpubuddy-replay" "$@" ;;
  *) echo "torch-dropin.sh: unknown phase '$phase' (matrix, base, caps, steps, frameworks or stacks)" >&2
     exit 2 ;;
esac
