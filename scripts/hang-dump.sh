#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# hang-dump.sh TARBALL RUNS SECONDS: runs tests/test_gpu under
# compute-sanitizer racecheck RUNS times (scale 0.1, random seeds, as
# gpu-check.sh). A run still going after SECONDS gets every thread's
# stack printed (gdb where the machine has it, else /proc wchan and
# syscall) before it is killed: for an intermittent hang.
set -u
tarball=$1
runs=$2
limit=$3
work=${TMPDIR:-/tmp}/gpb-hang
rm -rf "$work" && mkdir -p "$work" && tar xzf "$tarball" -C "$work"
src=$(ls -d "$work"/gpubuddy-*/)
mkdir -p "$work/b" && cd "$work/b"
"$src/configure" -q --with-cuda NVCCFLAGS='-O2 -arch=sm_90 -lineinfo' CFLAGS='-O1 -g -fno-omit-frame-pointer' >/dev/null &&
  make -j"$(nproc)" >/dev/null 2>&1 && make -j"$(nproc)" tests/test_gpu >/dev/null 2>&1 ||
  { echo "build failed"; exit 1; }
echo "tools: $(command -v gdb cuda-gdb eu-stack 2>/dev/null | tr '\n' ' ')"
dbg=$(command -v gdb || command -v cuda-gdb || true)
for r in $(seq "$runs"); do
  GPB_TEST_SCALE=0.1 stdbuf -oL -eL ./libtool --mode=execute compute-sanitizer \
    --error-exitcode 99 --tool racecheck tests/test_gpu > "$work/run.log" 2>&1 &
  san=$!
  t=0
  while kill -0 $san 2>/dev/null && [ $t -lt "$limit" ]; do sleep 1; t=$((t + 1)); done
  if ! kill -0 $san 2>/dev/null; then
    wait $san; echo "run $r: exit $? in ${t}s: $(grep -o 'seed [0-9]*' "$work/run.log" | head -1)"
    continue
  fi
  echo "run $r: HUNG after ${limit}s; output so far:"
  cat "$work/run.log"
  for pid in $(pgrep -f "test_gpu" | grep -v "^$san$"); do
    [ "$pid" = $$ ] && continue
    echo "--- pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-150)"
    for task in /proc/$pid/task/*; do
      echo "  task ${task##*/} $(cat $task/comm 2>/dev/null) wchan=$(cat $task/wchan 2>/dev/null) syscall=$(cut -d' ' -f1-3 $task/syscall 2>/dev/null)"
    done
    if [ -n "$dbg" ]; then
      timeout 60 "$dbg" -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt 25" 2>&1 |
        grep -vE "^\[New LWP|^warning:|Missing separate" | head -300
    fi
  done
  kill -9 $san 2>/dev/null; pkill -9 -f tests/.libs/test_gpu; pkill -9 -f lt-test_gpu
  wait $san 2>/dev/null
  break
done
