#!/bin/sh
# SPDX-License-Identifier: MIT
# test_stat.sh: gpubuddy-stat over two live pools of two processes.
#   --all lists both, one line each with the writer's pid; --all --json is
#   one JSON array with the figures; --watch into a file writes reports
#   without the screen-clearing escape codes a terminal gets; options
#   that would be dropped (--list NAME, --all --watch) are usage errors.
set -u
here=$(pwd)
stat=$here/tools/gpubuddy-stat
churn=$here/samples/gpubuddy-sample-churn
[ -x "$stat" ] && [ -x "$churn" ] || { echo "SKIP: not built"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-stat.XXXXXX")
a=stat-a-$$ b=stat-b-$$
"$churn" --backend virtual --steps 100000000 --pace-us 200 --publish "$a" --quiet > /dev/null 2>&1 &
pa=$!
"$churn" --backend virtual --steps 100000000 --pace-us 200 --publish "$b" --quiet > /dev/null 2>&1 &
pb=$!
trap 'kill $pa $pb 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
i=0
while [ $i -lt 50 ]; do
  n=$("$stat" --list | grep -c "^stat-[ab]-$$\$")
  [ "$n" = 2 ] && break
  sleep 0.1; i=$((i + 1))
done
"$stat" --all > "$tmp/all.txt" 2>&1 || fail "--all exited $?"
grep -q "^$a  *$pa " "$tmp/all.txt" || fail "--all lacks $a with pid $pa: $(cat "$tmp/all.txt")"
grep -q "^$b  *$pb " "$tmp/all.txt" || fail "--all lacks $b with pid $pb"
head -1 "$tmp/all.txt" | grep -q 'largest.*waste.*extfrag.*failed' || fail "--all header: $(head -1 "$tmp/all.txt")"
"$stat" --all --json > "$tmp/all.json" || fail "--all --json exited $?"
python3 - "$tmp/all.json" "$a" "$pa" "$b" "$pb" <<'PY' || fail "--all --json: $(cat "$tmp/all.json")"
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))}
for name, pid in ((sys.argv[2], sys.argv[3]), (sys.argv[4], sys.argv[5])):
    r = rows[name]
    assert r["pid"] == int(pid), r
    for k in ("pool_size", "used_bytes", "requested_bytes", "largest_free",
              "internal_waste_bytes", "external_frag", "failures", "device"):
        assert k in r, (k, r)
PY
# Until two reports are in (not "two within a second": a loaded machine
# may take longer); 3000 naps of 0.1 s are only a hang guard.
: > "$tmp/watch.txt" # there before the loop reads it
"$stat" --watch 0.1 "$a" >> "$tmp/watch.txt" 2>/dev/null &
w=$!
n=0
while [ "$(grep -c 'used' "$tmp/watch.txt")" -lt 2 ] && kill -0 $w 2>/dev/null; do
  n=$((n + 1)); [ $n -le 3000 ] || break
  sleep 0.1
done
kill $w 2>/dev/null; wait $w 2>/dev/null
[ "$(grep -c 'used' "$tmp/watch.txt")" -ge 2 ] || fail "--watch wrote fewer than two reports"
if grep -q "$(printf '\033')" "$tmp/watch.txt"; then fail "--watch into a file wrote escape codes"; fi
# A writer killed with SIGKILL leaves its segment: --list offers it as
# stale, --remove-stale removes it, and a live one is never removed.
kill -KILL $pb; wait $pb 2>/dev/null
"$stat" --list > "$tmp/list.out" 2> "$tmp/list.err"
grep -q "^stale: $b\$" "$tmp/list.err" || fail "--list does not offer $b as stale: $(cat "$tmp/list.err")"
grep -q "^$b\$" "$tmp/list.out" && fail "--list lists the dead $b as live"
"$stat" --remove-stale > "$tmp/rm.out" 2>&1 || fail "--remove-stale exited $?"
[ ! -e "/dev/shm/gpubuddy.$b" ] || fail "--remove-stale left /dev/shm/gpubuddy.$b"
[ -e "/dev/shm/gpubuddy.$a" ] || fail "--remove-stale removed the live $a"
# One report at a time: an extra NAME or a --watch that would be dropped
# is a usage error (one line, exit 2), not silently ignored.
for bad in "--list extra" "--all --watch" "--all $a" "--list --all" \
    "--list --watch 0.5" "--remove-stale $a" "--remove-stale --json"; do
  "$stat" $bad > "$tmp/bad.out" 2> "$tmp/bad.err"
  rc=$?
  [ $rc = 2 ] || fail "'$bad' exited $rc, expected 2"
  [ "$(wc -l < "$tmp/bad.err")" = 1 ] || fail "'$bad': not one line: $(cat "$tmp/bad.err")"
  [ -s "$tmp/bad.out" ] && fail "'$bad' printed a report: $(cat "$tmp/bad.out")"
done
[ $fails = 0 ] && echo "gpubuddy-stat: --all, --json, --watch into a file, stale segments, usage"
exit $fails
