#!/bin/sh
# SPDX-License-Identifier: MIT
# test_view_recorded_oom.sh: gpubuddy-view --oom 1 on a trace whose
# recorded failure is there to explain. The pool derived from a trace
# counts only the requests that succeeded when recorded (as
# gpubuddy-replay's does): a 1 TiB request that failed in the recording
# fails again and is explained (before, the pool was sized to hold it
# and --oom 1 found "0 failed allocations"). A failure that only a
# tighter pool reproduces (tests/data/sites_oom.trace, recorded in 1 MiB)
# gets one line that says the trace recorded it and to give --pool-size,
# and the recording's size shows it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
view=./gpubuddy-view
[ -x "$view" ] || { echo "SKIP: no gpubuddy-view"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-vroom.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

cat > "$tmp/big.trace" <<'T'
# gpubuddy-trace v1
# seq time_ns op id size tag stream
1 1000 alloc 0x0 1048576 0 0x0
2 2000 fail 0x0 1099511627776 0 0x0
3 3000 free 0x0 1048576 0 0x0
T
$view --trace "$tmp/big.trace" --headless --png "$tmp/b.png" --oom 1 --json > "$tmp/b.json" 2> "$tmp/err" ||
  fail "--oom 1 of a recorded 1 TiB failure: exit $?: $(cat "$tmp/err")"
grep -q '"requested": *1099511627776' "$tmp/b.json" || fail "the 1 TiB failure is not explained: $(head -c 300 "$tmp/b.json")"
sites=$top/tests/data/sites_oom.trace
$view --trace "$sites" --min-block 4K --headless --png "$tmp/s.png" --oom 1 > /dev/null 2> "$tmp/err" &&
  fail "--oom 1 in the derived pool succeeded"
[ "$(wc -l < "$tmp/err")" = 1 ] || fail "not one line: $(cat "$tmp/err")"
grep -q "the trace recorded 1 in its own pool: give that pool's size with --pool-size" "$tmp/err" ||
  fail "the line: $(cat "$tmp/err")"
$view --trace "$sites" --min-block 4K --pool-size 1048576 --headless --png "$tmp/s.png" --oom 1 > /dev/null 2> "$tmp/err" ||
  fail "--pool-size 1048576 --oom 1: exit $?: $(cat "$tmp/err")"
[ $fails = 0 ] || exit 1
echo "test_view_recorded_oom: ok"
