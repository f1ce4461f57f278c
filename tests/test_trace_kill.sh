#!/bin/sh
# SPDX-License-Identifier: MIT
# test_trace_kill.sh: a program recording GPB_TRACE=X.trace.gz is killed
# (SIGKILL, then SIGTERM): gpubuddy-replay replays the ops before the cut
# and warns that the file was cut short, where it rejected the whole file
# ("corrupt or truncated gzip stream") and replayed nothing. What the
# killed program lost is at most its last block (64 KiB of text).
set -u
here=$(pwd)
churn=$here/samples/gpubuddy-sample-churn
replay=$here/tools/gpubuddy-replay
[ -x "$churn" ] && [ -x "$replay" ] || { echo "SKIP: not built"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-tkill.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -KILL $pid 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for sig in KILL TERM; do
  t=$tmp/$sig.trace.gz
  GPB_TRACE=$t "$churn" --backend virtual --pool-size 8M --steps 100000000 \
    --pace-us 20 --quiet > /dev/null 2>&1 &
  pid=$!
  # Until a few blocks are out (each holds 64 KiB of text), at most 20 s.
  i=0
  while [ $i -lt 200 ]; do
    [ -f "$t" ] && [ "$(wc -c < "$t")" -gt 60000 ] && break
    sleep 0.1; i=$((i + 1))
  done
  kill -$sig $pid
  wait $pid 2>/dev/null
  pid=
  "$replay" "$t" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ $rc = 0 ] || fail "SIG$sig: replay exited $rc: $(cat "$tmp/err")"
  ops=$(sed -n 's/.*(\([0-9]*\) ops).*/\1/p' "$tmp/out" | head -1)
  [ "${ops:-0}" -gt 1000 ] || fail "SIG$sig: $ops allocs replayed: $(cat "$tmp/out")"
  if [ $sig = KILL ]; then
    grep -q "warning: .*cut short" "$tmp/err" || fail "SIGKILL: no warning: $(cat "$tmp/err")"
  fi
  echo "SIG$sig: $ops allocs replayed; $(head -c 200 "$tmp/err")"
done
[ $fails = 0 ] || exit 1
echo "ok: killed traces replay up to the cut"
