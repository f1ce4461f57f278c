#!/bin/sh
# SPDX-License-Identifier: MIT
# test_viewer_cost.sh: the window draws a frame only on input or when what
# it shows changed, and at most 30 a second. A live pool that changes
# once in 3 s (it drew 44 frames a second, 85% of a core at 1600x1000), a
# grid of two such pools, and a busy pool (capped near 30 a second) are
# watched for 3 s each through SDL's dummy driver; the test hook
# (GPB_VIEW_TEST_QUIT_MS) says how many frames were drawn. The CPU these
# cost is bench/viewer-cost.sh's to measure. Also: with no display the
# window says so instead of running invisibly. Run from the build
# directory.
set -u
view=./gpubuddy-view churn=./samples/gpubuddy-sample-churn
relay=./tools/gpubuddy-relay
[ -x "$view" ] && [ -x "$churn" ] && [ -x "$relay" ] || { echo "SKIP: not built"; exit 77; }
grep -q "^#define GPB_HAVE_SDL2_WINDOW 1" ./config.h 2>/dev/null ||
  { echo "SKIP: built without a window"; exit 77; }
tmp=$(mktemp -d /tmp/test_viewer_cost.XXXXXX)
pids=
trap 'kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# No display and no driver asked for: one line that says what to do, exit
# 1 (SDL fell back to its offscreen driver and the viewer ran unseen).
(unset DISPLAY WAYLAND_DISPLAY SDL_VIDEODRIVER
 timeout 20 $view --pattern churn --steps 100 >/dev/null 2>"$tmp/err")
rc=$?
[ $rc = 1 ] || fail "with no display the window exited $rc, expected 1"
grep -q "no display, try --headless" "$tmp/err" ||
  fail "with no display: $(cat "$tmp/err")"

export SDL_VIDEODRIVER=dummy
# start NAME PACE_US: a churn program publishing NAME, one step per PACE.
start() {
  "$churn" --backend virtual --pool-size 8M --publish "$1" \
    --steps 100000000 --pace-us "$2" --quiet >/dev/null 2>&1 &
  pids="$pids $!"
  i=0
  until $view --list | grep -qx "$1" || [ $i -ge 100 ]; do
    sleep 0.05; i=$((i + 1))
  done
  $view --list | grep -qx "$1" || fail "$1 was not published"
}
# frames ARGS...: frames drawn in 3 s.
frames() {
  GPB_VIEW_TEST_QUIT_MS=3000 $view "$@" --size 1600x1000 2>"$tmp/err" ||
    fail "the window failed: $(cat "$tmp/err")"
  sed -n 's/^gpubuddy-view: \([0-9]*\) frames in .*/\1/p' "$tmp/err"
}
q1=vcost-q1-$$ q2=vcost-q2-$$ busy=vcost-b-$$
start "$q1" 3000000
start "$q2" 3000000

n=$(frames "$q1")
[ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -le 8 ] ||
  fail "a quiet live pool drew '$n' frames in 3 s, expected 1..8"
# The grid of our two pools only (--all would show other programs'),
# through a relay serving every pool.
"$relay" --all --listen 127.0.0.1:0 --port-file "$tmp/port" \
  >/dev/null 2>&1 &
pids="$pids $!"
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(cat "$tmp/port")
n=$(frames --connect "127.0.0.1:$port/$q1,127.0.0.1:$port/$q2")
[ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -le 12 ] ||
  fail "a grid of quiet pools drew '$n' frames in 3 s, expected 1..12"
start "$busy" 200
# Busy: drawn as it changes (more than the quiet pool's), at most 30 a
# second (90 in 3 s, some slack for the first).
n=$(frames "$busy")
[ -n "$n" ] && [ "$n" -gt 8 ] && [ "$n" -le 95 ] ||
  fail "a busy live pool drew '$n' frames in 3 s, expected 9..95"
echo "viewer_cost: all checks passed"
