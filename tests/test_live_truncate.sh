#!/bin/sh
# SPDX-License-Identifier: MIT
# test_live_truncate.sh: segments truncated to 0, 4096 and 65536 bytes
# under real processes: the workloads keep allocating and say once that
# they stopped publishing; gpubuddy-relay --all, gpubuddy-view --all and
# gpubuddy-view NAME drop the cut pools and keep serving the healthy one.
# Before the SIGBUS guard every one of them died with exit 135.
set -u
here=$(pwd)
relay=$here/tools/gpubuddy-relay
churn=$here/samples/gpubuddy-sample-churn
view=$here/gpubuddy-view
[ -x "$relay" ] && [ -x "$churn" ] || { echo "SKIP: not built"; exit 77; }
[ -x "$view" ] || { echo "SKIP: no gpubuddy-view (built with --disable-viewer)"; exit 77; }
[ -d /dev/shm ] || { echo "SKIP: no /dev/shm"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-trunc.XXXXXX")
ok=trunc-ok-$$
pids= rp= v1= v2=
start() { # NAME: a pool that runs until killed, its stderr in $tmp/NAME.err
  "$churn" --backend virtual --pool-size 8M --steps 100000000 --pace-us 200 \
    --publish "$1" --quiet > /dev/null 2> "$tmp/$1.err" &
  pids="$pids $!"
}
trap 'kill $pids $rp $v1 $v2 2>/dev/null; wait 2>/dev/null; rm -f /dev/shm/gpubuddy.trunc-*-$$; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for n in 0 4096 65536 ok; do start "trunc-$n-$$"; done
j=0
while [ $j -lt 50 ]; do
  [ -e /dev/shm/gpubuddy.trunc-65536-$$ ] && [ -e /dev/shm/gpubuddy.$ok ] && break
  sleep 0.1; j=$((j + 1))
done
"$relay" --all --listen 127.0.0.1:0 --port-file "$tmp/port" -v 2> "$tmp/relay.log" &
rp=$!
"$view" --all --headless --frames "$tmp/grid" --interval-ms 50 --count 100 \
  > /dev/null 2> "$tmp/vall.err" &
v1=$!
"$view" trunc-0-$$ --headless --frames "$tmp/one" --interval-ms 50 --count 100 \
  > /dev/null 2> "$tmp/vone.err" &
v2=$!
j=0
while [ ! -s "$tmp/port" ] && [ $j -lt 50 ]; do sleep 0.1; j=$((j + 1)); done
[ -s "$tmp/port" ] || { echo "FAIL: the relay wrote no port: $(cat "$tmp/relay.log")"; exit 1; }
addr=127.0.0.1:$(cat "$tmp/port")
sleep 1.5 # the relay and the viewers have attached every pool

for n in 0 4096 65536; do truncate -s $n /dev/shm/gpubuddy.trunc-$n-$$; done
sleep 2 # the workloads write on; the readers look again within 250 ms

for n in 0 4096 65536; do
  [ "$(grep -c 'publishing stopped' "$tmp/trunc-$n-$$.err")" = 1 ] ||
    fail "workload cut to $n: $(cat "$tmp/trunc-$n-$$.err")"
  grep -q "pool 'trunc-$n-$$'.*truncated?" "$tmp/relay.log" ||
    fail "the relay did not drop trunc-$n"
done
kill -0 $pids 2>/dev/null || fail "a workload died"
kill -0 "$rp" 2>/dev/null || fail "the relay died: $(tail -5 "$tmp/relay.log")"
# The healthy pool is still served through the relay.
"$view" --connect "$addr/$ok" --headless --png "$tmp/x.png" --json \
  > "$tmp/ok.json" 2> "$tmp/ok.err" || fail "$ok through the relay: $(cat "$tmp/ok.err")"
grep -q '"pool_size":8388608' "$tmp/ok.json" || fail "$ok: $(cat "$tmp/ok.json")"
wait "$v1"; rc=$?
[ $rc = 0 ] || fail "gpubuddy-view --all exited $rc: $(tail -3 "$tmp/vall.err")"
# Its one pool cut, the headless viewer ends with the message and 1.
wait "$v2"; rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "gpubuddy-view NAME exited $rc: $(tail -3 "$tmp/vone.err")"
grep -q "truncated?" "$tmp/vone.err" || fail "gpubuddy-view NAME said: $(cat "$tmp/vone.err")"
v1= v2=
kill "$rp"; wait "$rp"; rc=$?; rp=
[ $rc = 0 ] || fail "relay exit status $rc on SIGTERM"
for p in $pids; do kill -INT "$p"; wait "$p"; rc=$?; [ $rc = 0 ] || fail "workload exit $rc"; done
pids=
[ $fails = 0 ] || { echo "relay log:"; tail -20 "$tmp/relay.log"; exit 1; }
echo "ok: 3 cut segments; workloads, relay --all, view --all and view NAME lived on"
