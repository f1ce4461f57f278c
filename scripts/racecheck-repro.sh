#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# racecheck-repro.sh TARBALL SECONDS SEED...: builds tests/test_gpu from a
# `make dist` tarball and runs it under compute-sanitizer racecheck (as
# gpu-check.sh does, scale 0.1) once per seed, each with SECONDS to
# finish, printing its output line-buffered and its time, then once
# without the sanitizer. For a racecheck step that timed out.
set -u
tarball=$1
limit=$2
shift 2
work=${TMPDIR:-/tmp}/gpb-racecheck
rm -rf "$work" && mkdir -p "$work" && tar xzf "$tarball" -C "$work"
src=$(ls -d "$work"/gpubuddy-*/)
mkdir -p "$work/b" && cd "$work/b"
"$src/configure" -q --with-cuda NVCCFLAGS='-O2 -arch=sm_90 -lineinfo' >/dev/null &&
  make -j"$(nproc)" >/dev/null 2>&1 && make -j"$(nproc)" tests/test_gpu >/dev/null 2>&1 ||
  { echo "build failed"; exit 1; }
for s in "$@"; do
  echo "== seed $s, racecheck"
  t0=$(date +%s.%N)
  GPB_TEST_SEED=$s GPB_TEST_SCALE=0.1 timeout "$limit" stdbuf -oL -eL \
    ./libtool --mode=execute compute-sanitizer --error-exitcode 99 --tool racecheck tests/test_gpu 2>&1 | tail -8
  rc=${PIPESTATUS[0]}; echo "rc=$rc $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
  echo "== seed $s, no sanitizer"
  t0=$(date +%s.%N)
  GPB_TEST_SEED=$s GPB_TEST_SCALE=0.1 timeout 60 tests/test_gpu 2>&1 | tail -3
  rc=${PIPESTATUS[0]}; echo "rc=$rc $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
done
