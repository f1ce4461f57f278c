#!/bin/sh
# SPDX-License-Identifier: MIT
# gen-man.sh BUILDDIR [OUTDIR]: writes the man page of every installed
# program from its --help and --version with help2man (OUTDIR defaults to
# man/ in the source tree). The pages are committed, so users and the GPU
# machine need no help2man; tests/test_man.sh regenerates them and fails
# when one no longer matches its program.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1
out=${2:-$top/man}
command -v help2man >/dev/null || { echo "gen-man: help2man is not installed" >&2; exit 77; }
mkdir -p "$out"
# name|path in the build tree|one-line description
while IFS='|' read -r name path desc; do
  [ -n "$name" ] || continue
  prog=$build/$path
  [ -x "$prog" ] || prog=$top/$path # scripts live in the source tree
  if [ ! -x "$prog" ]; then
    echo "gen-man: $path not built, skipped" >&2
    continue
  fi
  SOURCE_DATE_EPOCH=1795392000 help2man --no-info --no-discard-stderr \
    --name="$desc" --output="$out/$name.1" "$prog"
done <<'LIST'
gpubuddy-replay|tools/gpubuddy-replay|replay an allocation trace through a gpubuddy pool
gpubuddy-stat|tools/gpubuddy-stat|print the stats of pools published live
gpubuddy-relay|tools/gpubuddy-relay|serve live gpubuddy pools over TCP and as Prometheus metrics
gpubuddy-view|gpubuddy-view|draw a gpubuddy pool's block map live, relayed or from a trace
gpubuddy-import-torch|tools/gpubuddy-import-torch|convert PyTorch memory snapshots to gpubuddy traces
gpubuddy-export-torch|tools/gpubuddy-export-torch|write a gpubuddy trace or live pool as a PyTorch memory snapshot
gpubuddy-sample-churn|samples/gpubuddy-sample-churn|sample workload: random allocation churn
gpubuddy-sample-cnn|samples/gpubuddy-sample-cnn|sample workload: a CNN's activations and workspaces
gpubuddy-sample-kvcache|samples/gpubuddy-sample-kvcache|sample workload: an LLM server's paged KV cache
gpubuddy-sample-checkerboard|samples/gpubuddy-sample-checkerboard|sample workload: a checkerboard of live and freed blocks
LIST
