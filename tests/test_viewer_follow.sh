#!/bin/sh
# SPDX-License-Identifier: MIT
# test_viewer_follow.sh: a workload that exits and starts again under the
# same name is followed: by gpubuddy-relay serving that one pool by name
# (it served the dead pool's last state for good), so that
# gpubuddy-view --connect HOST:PORT/NAME shows the new pool. Run from the
# build directory.
set -u
view=./gpubuddy-view churn=./samples/gpubuddy-sample-churn
relay=./tools/gpubuddy-relay
for x in "$view" "$churn" "$relay"; do
  [ -x "$x" ] || { echo "SKIP: $x not built"; exit 77; }
done
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d /tmp/test_viewer_follow.XXXXXX)
pids=
trap 'kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/relay.log" ] && cat "$tmp/relay.log"; exit 1; }
export SDL_VIDEODRIVER=dummy
name=vfollow-$$

# pool_size: what the view through the relay says the pool's size is.
pool_size() {
  $view --connect "127.0.0.1:$port/$name" --headless --png "$tmp/x.png" \
    --json 2>"$tmp/err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pool_size"])'
}

# The first run: 8 MiB, a few steps, then it exits.
"$churn" --backend virtual --pool-size 8M --publish "$name" --steps 2000 \
  --pace-us 500 --quiet >/dev/null 2>&1 &
first=$!
pids="$pids $first"
i=0
until $view --list | grep -qx "$name" || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done
"$relay" "$name" --listen 127.0.0.1:0 --port-file "$tmp/port" \
  >"$tmp/relay.log" 2>&1 &
pids="$pids $!"
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(cat "$tmp/port")
[ -n "$port" ] || fail "the relay did not start"
[ "$(pool_size)" = 8388608 ] || fail "the first run: $(cat "$tmp/err")"
wait $first
i=0
until grep -q "is gone" "$tmp/relay.log" || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done

# The second run, 16 MiB, under the same name: the relay follows it.
"$churn" --backend virtual --pool-size 16M --publish "$name" \
  --steps 100000000 --pace-us 1000 --quiet >/dev/null 2>&1 &
pids="$pids $!"
i=0
until grep -q "is back" "$tmp/relay.log" || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done
got=$(pool_size)
[ "$got" = 16777216 ] ||
  fail "after the restart the relay served a pool of '$got' bytes, not the new 16 MiB"
echo "viewer_follow: all checks passed"
