#!/bin/sh
# SPDX-License-Identifier: MIT
# test_relay_all.sh: gpubuddy-relay --all, one port for every pool of the
# machine, with real processes. Two pools are served by name (HOST:PORT/
# NAME, read back through gpubuddy-view --connect --json); no name gets
# the list, which the viewer shows as a grid; a pool that starts after the
# relay is served; a pool that exits and starts again with another size
# is served anew.
set -u
here=$(pwd)
relay=$here/tools/gpubuddy-relay
churn=$here/samples/gpubuddy-sample-churn
view=$here/gpubuddy-view
[ -x "$relay" ] && [ -x "$churn" ] || { echo "SKIP: not built"; exit 77; }
[ -x "$view" ] || { echo "SKIP: no gpubuddy-view (built with --disable-viewer)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-rall.XXXXXX")
a=rall-a-$$ b=rall-b-$$ c=rall-c-$$
pids=
start() { # NAME SIZE: a pool that runs until killed
  "$churn" --backend virtual --pool-size "$2" --steps 100000000 --pace-us 300 \
    --publish "$1" --quiet > /dev/null 2>&1 &
  pids="$pids $!"
  last=$!
}
trap 'kill $pids $rp 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

start "$a" 8M
pa=$last
start "$b" 4M
"$relay" --all --listen 127.0.0.1:0 --port-file "$tmp/port" -v 2> "$tmp/relay.log" &
rp=$!
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$tmp/port" ] || { echo "FAIL: the relay wrote no port: $(cat "$tmp/relay.log")"; exit 1; }
addr=127.0.0.1:$(cat "$tmp/port")

# size NAME: the pool size a reader through the relay sees, retried for
# up to 5 s (pools are found within a second).
size() {
  j=0
  while [ $j -lt 50 ]; do
    if "$view" --connect "$addr/$1" --headless --png "$tmp/x.png" --json \
         > "$tmp/v.json" 2> "$tmp/v.err"; then
      sed -n 's/.*"pool_size":\([0-9]*\).*/\1/p' "$tmp/v.json"
      return 0
    fi
    sleep 0.1; j=$((j + 1))
  done
  echo "none: $(cat "$tmp/v.err")"
}

s=$(size "$a"); [ "$s" = 8388608 ] || fail "$a through the relay: $s"
s=$(size "$b"); [ "$s" = 4194304 ] || fail "$b through the relay: $s"
# No name: the viewer asks for the list and shows the grid of both.
"$view" --connect "$addr" --headless --png "$tmp/x.png" --json > "$tmp/none.json" 2> "$tmp/none.err" ||
  fail "no pool name, two pools: exited $?: $(cat "$tmp/none.err")"
grep -q "\"name\":\"$a\"" "$tmp/none.json" && grep -q "\"name\":\"$b\"" "$tmp/none.json" ||
  fail "no name: $(cat "$tmp/none.json")"
"$view" --connect "$addr/nosuch-$$" --headless --png "$tmp/x.png" > /dev/null 2> "$tmp/ns.err" &&
  fail "a pool that does not exist was served"
grep -q "no pool 'nosuch-$$'" "$tmp/ns.err" || fail "no such pool: $(cat "$tmp/ns.err")"

# A pool that appears after the relay started.
start "$c" 2M
s=$(size "$c"); [ "$s" = 2097152 ] || fail "$c, started later: $s"

# A pool that ends and starts again, with another size.
kill -INT "$pa" 2>/dev/null
wait "$pa" 2>/dev/null
start "$a" 16M
j=0
while [ $j -lt 50 ]; do
  s=$(size "$a")
  [ "$s" = 16777216 ] && break
  sleep 0.1; j=$((j + 1))
done
[ "$s" = 16777216 ] || fail "$a after a restart: $s"

kill "$rp"
wait "$rp"
rc=$?
[ $rc = 0 ] || fail "relay exit status $rc on SIGTERM"
[ $fails = 0 ] || { echo "relay log:"; tail -20 "$tmp/relay.log"; exit 1; }
echo "ok: --all served 3 pools by name, one started late, one restarted"
