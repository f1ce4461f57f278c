#!/bin/sh
# SPDX-License-Identifier: MIT
# run-ab.sh A.tar.gz B.tar.gz [RUNS] [BENCH ARGS...]: two versions of the
# library side by side on one machine. Builds gpubuddy-bench from each
# `make dist` tarball, then runs them in turn RUNS times (default 3), so
# a slow or fast phase of the machine falls on both. Prints the target
# lines (worst-size medians and p99.9, churn tails) of every run.
# Default bench args: --gpu --only fixed,churn (--host where no GPU).
set -eu
a=$1
b=$2
runs=${3:-3}
shift 2
[ $# -gt 0 ] && shift
args=${*:-}
work=${TMPDIR:-/tmp}/gpb-ab
rm -rf "$work" && mkdir -p "$work/A" "$work/B"
for v in A B; do
  if [ $v = A ]; then t=$a; else t=$b; fi
  tar xzf "$t" -C "$work/$v"
  src=$(ls -d "$work/$v"/gpubuddy-*/)
  (cd "$src" && ./configure -q >/dev/null && make -j"$(nproc)" >/dev/null) ||
    { echo "run-ab: build of $t failed" >&2; exit 1; }
done
if [ -z "$args" ]; then
  if nvidia-smi >/dev/null 2>&1; then args="--gpu --only fixed,churn"
  else args="--host --only fixed,churn"; fi
fi
echo "run-ab: A=$(basename "$a") B=$(basename "$b"), $runs runs of: gpubuddy-bench $args"
for r in $(seq "$runs"); do
  for v in A B; do
    bin=$(ls -d "$work/$v"/gpubuddy-*/)bench/gpubuddy-bench
    echo "== $v run $r"
    # shellcheck disable=SC2086
    "$bin" $args 2>&1 | grep -E "^(PASS|MISS)  gpubuddy " || true
  done
done
