#!/bin/sh
# SPDX-License-Identifier: MIT
# test_relay_abuse.sh: what a local peer can do to gpubuddy-relay.
#   1. Connections that never say HELLO fill --max-clients: a viewer still
#      gets in (the oldest silent one gives way), where it was refused.
#   2. Out of descriptors (ulimit -n), accept fails with EMFILE: the relay
#      pauses and says so once, where it spun and logged ~150,000 lines a
#      second.
#   3. Bad option values, checked before it starts: one line, exit 2
#      (--max-clients 4294967297 ran as 1, --compress 4294967296 as 0,
#      a --listen with no value was an "unknown option", and a bad
#      --listen address exited 1).
# Loopback only; every wait is bounded.
set -u
here=$(pwd)
relay=$here/tools/gpubuddy-relay
churn=$here/samples/gpubuddy-sample-churn
view=$here/gpubuddy-view
[ -x "$relay" ] && [ -x "$churn" ] && [ -x "$view" ] || { echo "SKIP: not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-abuse.XXXXXX")
pids=
cleanup() { for p in $pids; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
name=abuse-$$
"$churn" --backend virtual --pool-size 16M --steps 100000000 --pace-us 500 --publish "$name" --quiet > /dev/null 2>&1 &
pids="$pids $!"
sleep 0.3
waitport() { i=0; while [ ! -s "$1" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; cat "$1"; }
hold() { # PORT N SECONDS: N connections that say nothing, held open
  python3 - "$@" <<'PY' &
import socket, sys, time
s = []
for _ in range(int(sys.argv[2])):
    try:
        s.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2))
    except OSError:
        pass
time.sleep(float(sys.argv[3]))
PY
  pids="$pids $!"
}

# 1. Silent connections do not lock a viewer out.
"$relay" "$name" --listen 127.0.0.1:0 --port-file "$tmp/p1" --max-clients 2 -q 2> "$tmp/r1.err" &
pids="$pids $!"
p1=$(waitport "$tmp/p1")
hold "$p1" 2 4
sleep 0.5
# (timeout: a hang guard, not a time limit)
timeout 300 "$view" --connect "127.0.0.1:$p1" --headless --png "$tmp/v.png" > "$tmp/v.out" 2>&1 ||
  fail "a viewer behind 2 silent connections (max 2): $(tail -2 "$tmp/v.out")"

# 2. EMFILE: a pause and one line, not a busy loop.
(ulimit -n 24; exec "$relay" "$name" --listen 127.0.0.1:0 --port-file "$tmp/p2" --max-clients 100) \
  2> "$tmp/r2.err" &
pids="$pids $!"
p2=$(waitport "$tmp/p2")
hold "$p2" 40 3
sleep 2
n=$(grep -c 'accept:' "$tmp/r2.err")
[ "$n" -ge 1 ] || echo "note: the relay never ran out of descriptors here"
[ "$n" -le 2 ] || fail "EMFILE logged $n lines in 2 s"
# 3. Usage errors: one line, exit 2, nothing started.
for bad in "--max-clients 4294967297 --listen 127.0.0.1:0 $name" \
    "--max-clients 0 $name" "--compress 4294967296 --listen 127.0.0.1:0 $name" \
    "--compress -1 $name" "--compress x $name" \
    "$name --listen" "$name --metrics" "--listen nohost $name" \
    "--listen 127.0.0.1:65536 $name" "--listen 127.0.0.1: $name" \
    "--metrics 127.0.0.1:x $name"; do
  timeout 60 "$relay" $bad > /dev/null 2> "$tmp/bad.err" # a hang guard
  rc=$?
  [ $rc = 2 ] || fail "'$bad' exited $rc, expected 2: $(cat "$tmp/bad.err")"
  [ "$(wc -l < "$tmp/bad.err")" = 1 ] || fail "'$bad': not one line: $(cat "$tmp/bad.err")"
done
"$relay" "$name" --listen > /dev/null 2> "$tmp/bad.err"
grep -q "option '--listen' needs a value" "$tmp/bad.err" ||
  fail "--listen with no value: $(cat "$tmp/bad.err")"
[ $fails = 0 ] && echo "relay: a viewer gets past silent connections; EMFILE said $n time(s); usage errors exit 2"
exit $fails
