#!/bin/sh
# SPDX-License-Identifier: MIT
# test_demo.sh: the README's demo, headless and short: it says whether the
# pool is on the GPU or in host memory, keeps the sample's log in its
# output directory and says so, and leaves no /tmp/gpubuddy-demo-*.log
# behind (it did, without a word). Every frame shows the workload live:
# at full pace its 20000 default steps ended before the frames did, and
# the last ones were DISCONNECTED over an emptied pool.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(pwd)
[ -x "$build/gpubuddy-view" ] || { echo "SKIP: no viewer built"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
before=$(ls /tmp/gpubuddy-demo-*.log 2>/dev/null | wc -l)
(unset DISPLAY WAYLAND_DISPLAY DEMO_STEPS; DEMO_OUT="$tmp/out" DEMO_FRAMES=3 \
  DEMO_SAMPLE=churn DEMO_PACE_US=0 DEMO_BACKEND=host sh "$top/scripts/demo.sh" "$build") \
  > "$tmp/demo.out" 2> "$tmp/demo.err"
rc=$?
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
[ $rc = 0 ] || fail "demo exited $rc: $(tail -3 "$tmp/demo.err")"
grep -q 'no usable GPU here: the pool is host memory\|the pool is on the GPU' "$tmp/demo.err" ||
  fail "the demo does not say GPU or host: $(cat "$tmp/demo.err")"
grep -q "its log: $tmp/out/sample.log" "$tmp/demo.err" || fail "the demo does not name its log"
[ -f "$tmp/out/sample.log" ] || fail "no sample.log in the output directory"
[ -f "$tmp/out/frame-002.png" ] || fail "not all frames: $(ls "$tmp/out")"
grep -q "disconnected\|program exited" "$tmp/demo.err" &&
  fail "the workload was gone before the last frame: $(cat "$tmp/demo.err")"
after=$(ls /tmp/gpubuddy-demo-*.log 2>/dev/null | wc -l)
[ "$after" = "$before" ] || fail "the demo left a /tmp/gpubuddy-demo-*.log behind"
[ $fails = 0 ] && echo "demo: says where the pool is, keeps and names its log, ends live"
exit $fails
