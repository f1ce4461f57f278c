#!/bin/sh
# SPDX-License-Identifier: MIT
# viewer-cost.sh [BUILD_DIR] [SECONDS]: what gpubuddy-view's window costs
# in CPU, in a real X window (Xvfb, software rendering) at 1600x1000. For
# each case it runs the viewer for SECONDS (default 10), then reads its
# user + system CPU time from /proc and the frames it drew (the test hook
# GPB_VIEW_TEST_QUIT_MS), and prints one markdown table row:
#   quiet     a live pool that changes once in 3 s
#   busy      a live pool changing every 200 us
#   grid      4 quiet live pools, through one gpubuddy-relay --all
#   grid-busy 4 live pools changing every 200 us, through the relay
#   paused    a replay paused at its end (the window idle)
# Needs Xvfb; run from anywhere, BUILD_DIR defaults to ./build.
set -eu
b=$(cd "${1:-build}" && pwd)
secs=${2:-10}
view=$b/gpubuddy-view churn=$b/samples/gpubuddy-sample-churn
relay=$b/tools/gpubuddy-relay
for x in "$view" "$churn" "$relay"; do
  [ -x "$x" ] || { echo "viewer-cost: $x not built" >&2; exit 1; }
done
command -v Xvfb >/dev/null || { echo "viewer-cost: needs Xvfb" >&2; exit 1; }
tmp=$(mktemp -d /tmp/viewer-cost.XXXXXX)
pids=
trap 'kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp 3>"$tmp/display" \
  2>/dev/null &
pids="$pids $!"
i=0
while [ ! -s "$tmp/display" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
DISPLAY=:$(cat "$tmp/display")
export DISPLAY
unset SDL_VIDEODRIVER
tck=$(getconf CLK_TCK)

# start NAME PACE_US
start() {
  "$churn" --backend virtual --pool-size 64M --publish "$1" \
    --steps 1000000000 --pace-us "$2" --quiet >/dev/null 2>&1 &
  pids="$pids $!"
  i=0
  until "$view" --list | grep -qx "$1" || [ $i -ge 100 ]; do
    sleep 0.05; i=$((i + 1))
  done
}
# measure LABEL ARGS...: one table row.
measure() {
  label=$1; shift
  GPB_VIEW_TEST_QUIT_MS=$((secs * 1000)) "$view" "$@" --size 1600x1000 \
    2>"$tmp/err" &
  vp=$!
  sleep 1 # start-up (SDL, the first attach) is not the steady state
  t0=$(awk '{print $14 + $15}' /proc/$vp/stat)
  s0=$(date +%s.%N)
  sleep $((secs - 2))
  t1=$(awk '{print $14 + $15}' /proc/$vp/stat)
  s1=$(date +%s.%N)
  wait $vp || { echo "viewer-cost: $label failed: $(cat "$tmp/err")" >&2; exit 1; }
  n=$(sed -n 's/^gpubuddy-view: \([0-9]*\) frames in \([0-9]*\) ms/\1 \2/p' "$tmp/err")
  echo "$label $t0 $t1 $s0 $s1 $tck $n" | awk '{
    cpu = ($3 - $2) / $6 / ($5 - $4) * 100
    printf "| %s | %.1f%% | %.1f |\n", $1, cpu, $7 / ($8 / 1000) }'
}
for q in 1 2 3 4; do start "vcost-q$q-$$" 3000000; done
for q in 1 2 3 4; do start "vcost-b$q-$$" 200; done
"$relay" --all --listen 127.0.0.1:0 --port-file "$tmp/port" >/dev/null 2>&1 &
pids="$pids $!"
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
r=127.0.0.1:$(cat "$tmp/port")
echo "| case (1600x1000, Xvfb, $secs s) | CPU (one core) | frames/s |"
echo "|---|---|---|"
measure quiet "vcost-q1-$$"
measure busy "vcost-b1-$$"
measure grid --connect "$r/vcost-q1-$$,$r/vcost-q2-$$,$r/vcost-q3-$$,$r/vcost-q4-$$"
measure grid-busy --connect "$r/vcost-b1-$$,$r/vcost-b2-$$,$r/vcost-b3-$$,$r/vcost-b4-$$"
measure paused --pattern churn --steps 100000 --speed 0
