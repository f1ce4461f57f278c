#!/bin/sh
# SPDX-License-Identifier: MIT
# test_trace_replay.sh: gpubuddy-replay end to end.
#  - a trace recorded by a pool (tests/test_trace --record) replays through
#    the tool with the same config to the same stats (plain, .gz, stdin);
#  - the RMM CSV fixture replays with the expected counts;
#  - --policy all, --find-min-pool (the size found works, one min_block
#    less fails), --speed, --hold, --top-sites, warnings, bad input and
#    usage errors;
#  - the sample traces name the sample script's frames as top sites;
#  - the peak of 2 MiB pages under live blocks on a hand-worked trace.
# Run by make check from the build directory.
set -u
srcdir=${srcdir:-.}
replay=./tools/gpubuddy-replay
rec=./tests/test_trace
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-replay-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# First value of "key": N in a JSON file (the tool writes one key a line).
jget() { sed -n "s/^ *\"$2\": \([0-9.]*\),\{0,1\}$/\1/p" "$1" | head -n 1; }
expect() { # file key want
  got=$(jget "$1" "$2")
  if [ "$got" != "$3" ]; then fail "$1: $2 is '$got', expected '$3'"; fi
}

# 1. Round trip through the tool.
# A fixed seed: the check below needs a recording that hit OOM, and some
# random seeds at GPB_TEST_SCALE=0.25 (CI's sanitizer run) hit none.
export GPB_TEST_SEED=${GPB_TEST_SEED:-56999018924111}
$rec --record "$tmp/rec.trace" > "$tmp/want.txt" || { echo "record failed"; exit 1; }
$rec --record "$tmp/rec.trace.gz" > "$tmp/want_gz.txt" || exit 1
for t in rec.trace rec.trace.gz; do
  $replay --json --quiet --pool-size 4M --min-block 256 "$tmp/$t" > "$tmp/$t.json" ||
    fail "replay of $t exited $?"
done
gzip -dc "$tmp/rec.trace.gz" | $replay --json --quiet --pool-size 4M - > "$tmp/stdin.json" ||
  fail "replay from stdin exited $?"
while read -r key val; do
  case $key in internal_frag_bytes|live_allocs|seed) continue ;; esac
  expect "$tmp/rec.trace.json" "$key" "$val"
done < "$tmp/want.txt"
while read -r key val; do
  case $key in internal_frag_bytes|live_allocs|seed) continue ;; esac
  expect "$tmp/rec.trace.gz.json" "$key" "$val"
  expect "$tmp/stdin.json" "$key" "$val"
done < "$tmp/want_gz.txt"
# The recording hit OOM, so the round trip covered failed requests.
[ "$(jget "$tmp/rec.trace.json" failed_allocs)" -gt 0 ] ||
  fail "the recorded workload had no failures"

# 2. The RMM fixture: 18 records, two zero-byte ones skipped, one failure
# (two ops), one free of a pointer never allocated.
$replay --json "$srcdir/tests/data/rmm_small.csv" > "$tmp/rmm.json" 2> "$tmp/rmm.err" ||
  fail "replay of the RMM fixture exited $?"
expect "$tmp/rmm.json" ops 17
expect "$tmp/rmm.json" allocs 8
expect "$tmp/rmm.json" frees 9
expect "$tmp/rmm.json" unknown_frees 1
expect "$tmp/rmm.json" recorded_failures 1
expect "$tmp/rmm.json" failed_allocs 1
expect "$tmp/rmm.json" peak_live_bytes 3349088
expect "$tmp/rmm.json" pool_size 8388608
[ "$(grep -c 'never allocated' "$tmp/rmm.err")" = 1 ] ||
  fail "expected one warning about the unknown free"

# 3. Text output names every figure.
$replay "$tmp/rec.trace" > "$tmp/text.txt" 2>/dev/null || fail "text replay exited $?"
for w in 'events:' 'peak live bytes served' 'peak bytes in blocks' 'internal' \
         'external' 'failed allocations (OOM)' 'median' 'p99' 'max' 'total time'; do
  grep -q "$w" "$tmp/text.txt" || fail "text output lacks '$w'"
done

# 4. --policy all runs every policy (buddy, trim, bestfit) and compares them.
$replay --policy all --quiet "$tmp/rec.trace" > "$tmp/all.txt" || fail "--policy all exited $?"
grep -q '^comparison:' "$tmp/all.txt" || fail "--policy all printed no comparison"
grep -q '^recommended for the least memory: bestfit' "$tmp/all.txt" || fail "--policy all recommends no policy"
[ "$(grep -c '^policy ' "$tmp/all.txt")" = 3 ] || fail "--policy all did not run three policies"
$replay --policy all --json --quiet "$tmp/rec.trace" > "$tmp/all.json" || fail "--policy all --json exited $?"
[ "$(grep -c '"policy":' "$tmp/all.json")" = 3 ] || fail "--policy all --json lacks a run"

# 5. --find-min-pool: the size it reports replays cleanly, and one step
# of its stated resolution less does not (tests/test_minpool checks that
# every smaller size on the grid fails, on a trace where bisection errs).
for pol in buddy trim; do
  $replay --find-min-pool --policy $pol --json --quiet --min-block 256 "$tmp/rec.trace" \
    > "$tmp/min.json" || fail "--find-min-pool exited $?"
  min=$(jget "$tmp/min.json" min_pool_size)
  [ "$(jget "$tmp/min.json" peak_demand_bytes)" -gt 0 ] || fail "no peak_demand_bytes in --find-min-pool --json"
  step=$(jget "$tmp/min.json" min_pool_resolution)
  expect "$tmp/min.json" failed_allocs 0
  expect "$tmp/min.json" pool_size "$min"
  $replay --json --quiet --policy $pol --pool-size "$min" "$tmp/rec.trace" > "$tmp/at.json"
  expect "$tmp/at.json" failed_allocs 0
  $replay --json --quiet --policy $pol --pool-size $((min - step)) "$tmp/rec.trace" > "$tmp/below.json"
  [ "$(jget "$tmp/below.json" failed_allocs)" -gt 0 ] ||
    fail "$pol: a pool of $((min - step)) bytes (one step below the minimum found) had no failure"
done

# 5b. --find-min-pool numbers its probes on from the doubling into the
# scan: the last probe printed (it fits) is the count of replays.
$replay --find-min-pool --min-block 256 "$tmp/rec.trace" > "$tmp/minp.txt" 2> "$tmp/minp.err" ||
  fail "--find-min-pool with progress exited $?"
lastp=$(sed -n 's/^find-min-pool (buddy): probe \([0-9]*\)[^:]*: .* fits$/\1/p' "$tmp/minp.err" | tail -n 1)
reps=$(sed -n 's/.*(\([0-9]*\) replays)$/\1/p' "$tmp/minp.txt")
[ -n "$lastp" ] && [ "$lastp" = "$reps" ] ||
  fail "--find-min-pool: last probe numbered '$lastp', but '$reps' replays"

# 5c. Sizes near 2^64 are refused in one line, not wrapped to a step of
# 0 (SIGFPE) or a pool of 0 bytes: a resolution past the largest pool
# tried (exit 2), and a trace whose one request, or one request that
# failed when recorded, is 2^63 bytes (exit 1).
$replay --quiet --find-min-pool --resolution 1.8e19 --min-block 9223372036854775808 \
  "$tmp/rec.trace" > /dev/null 2> "$tmp/big.err"
rc=$?
[ $rc = 2 ] && [ "$(wc -l < "$tmp/big.err")" = 1 ] ||
  fail "--resolution 1.8e19: exit $rc: $(head -3 "$tmp/big.err")"
$replay --quiet --find-min-pool --min-block 9223372036854775808 "$tmp/rec.trace" \
  > /dev/null 2> "$tmp/big.err"
rc=$?
[ $rc = 2 ] && [ "$(wc -l < "$tmp/big.err")" = 1 ] ||
  fail "--find-min-pool --min-block 2^63: exit $rc: $(head -3 "$tmp/big.err")"
for op in alloc fail; do
  printf '# gpubuddy-trace v1\n1 0 %s 0x1 9223372036854775808 0 0x0\n' $op > "$tmp/huge63.trace"
  $replay --quiet --find-min-pool "$tmp/huge63.trace" > /dev/null 2> "$tmp/big.err"
  rc=$?
  [ $rc = 1 ] && [ "$(wc -l < "$tmp/big.err")" = 1 ] &&
    grep -q 'peak demand of 9223372036854775808 bytes is larger than any pool' "$tmp/big.err" ||
    fail "a $op of 2^63 bytes: exit $rc: $(head -3 "$tmp/big.err")"
done

# 5d. SIGINT stops --find-min-pool at its next probe, with one line and
# exit 1, as it stops a replay. At a resolution of 1 byte the search would
# run for minutes; the guard only keeps a failure from hanging the suite.
$replay --find-min-pool --resolution 1 "$srcdir/samples/traces/torch-infer.trace.gz" \
  > /dev/null 2> "$tmp/int.err" &
rp=$!
i=0; while ! grep -q 'probe' "$tmp/int.err" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
grep -q 'probe' "$tmp/int.err" || fail "--find-min-pool --resolution 1 printed no probe"
kill -INT $rp
i=0; while kill -0 $rp 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 $rp 2>/dev/null; then
  kill -KILL $rp; fail "--find-min-pool went on after SIGINT"
fi
wait $rp
rc=$?
[ $rc = 1 ] || fail "--find-min-pool after SIGINT: exit $rc, expected 1"
[ "$(grep -c 'interrupted by signal 2 during --find-min-pool' "$tmp/int.err")" = 1 ] ||
  fail "--find-min-pool after SIGINT: $(tail -2 "$tmp/int.err")"

# 6. --speed runs (paced by timestamps; no timing is checked here).
$replay --speed 1000 --quiet "$srcdir/tests/data/rmm_small.csv" > /dev/null || fail "--speed exited $?"
# A tiny speed and a huge jump between timestamps: the pause is clamped
# (to a day) instead of overflowing the conversion to an integer, which
# UBSan stops at once. The replay is then still waiting when timeout ends it.
printf '# gpubuddy-trace v1\n1 0 alloc 0x10 64 0 0\n2 1000000000000000000 free 0x10 0 0 0\n' > "$tmp/jump.trace"
timeout 3 $replay --speed 1e-300 --pool-size 1M --quiet "$tmp/jump.trace" > /dev/null 2> "$tmp/jump.err"
rc=$?
[ $rc = 124 ] || fail "--speed 1e-300 over a 1e18 ns jump: exit $rc, not paused: $(head -3 "$tmp/jump.err")"

# 6b. The 4096-byte line limit does not count a CR: lines of exactly 4096
# bytes are read with LF and with CRLF ends, in the buffer and across its
# edges (300 of them); one byte more is refused either way.
long=$(printf '#%4095s' x)
for eol in lf crlf; do
  if [ $eol = crlf ]; then e='\r\n'; else e='\n'; fi
  { printf "# gpubuddy-trace v1$e"
    i=0; while [ $i -lt 300 ]; do printf "%s$e" "$long"; i=$((i + 1)); done
    printf "1 0 alloc 0x10 64 0 0${e}2 0 free 0x10 0 0 0$e"; } > "$tmp/long-$eol.trace"
  $replay --quiet --pool-size 1M "$tmp/long-$eol.trace" > /dev/null 2> "$tmp/long.err" ||
    fail "4096-byte lines with $eol refused: $(cat "$tmp/long.err")"
  { printf "# gpubuddy-trace v1$e"; printf "%sy$e" "$long"; } > "$tmp/longer-$eol.trace"
  $replay --quiet --pool-size 1M "$tmp/longer-$eol.trace" > /dev/null 2> "$tmp/long.err"
  grep -q 'longer than 4096' "$tmp/long.err" || fail "a 4097-byte line with $eol was not refused"
done

# 6c. A replay that publishes and is stopped by SIGTERM leaves no segment
# in /dev/shm behind.
pub=replay-sig-$$
$replay --publish $pub --speed 0.001 --quiet "$srcdir/samples/traces/torch-gpt.trace.gz" > /dev/null 2>&1 &
rp=$!
i=0; while [ ! -e /dev/shm/gpubuddy.$pub ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -e /dev/shm/gpubuddy.$pub ] || fail "--publish made no segment"
kill -TERM $rp; wait $rp 2>/dev/null
[ ! -e /dev/shm/gpubuddy.$pub ] || { rm -f /dev/shm/gpubuddy.$pub; fail "SIGTERM left /dev/shm/gpubuddy.$pub behind"; }

# 6e. --hold: the inference sample replays in about 0.2 s at --speed 1,
# before gpubuddy-stat could attach (issue 38 item 18); held, the pool
# stays published as the replay left it until SIGINT, which ends the
# hold, not the program: the report follows, exit 0, no segment left.
# --hold SECONDS ends by itself; --hold without --publish is a usage error.
stat=./tools/gpubuddy-stat
pub=replay-hold-$$
infer=$srcdir/samples/traces/torch-infer.trace.gz
$replay --publish $pub --speed 1 --hold "$infer" > "$tmp/hold.out" 2> "$tmp/hold.err" &
rp=$!
i=0
until $stat $pub > "$tmp/hold.stat" 2> "$tmp/hold.stat.err" || [ $i -ge 100 ]; do
  sleep 0.1; i=$((i + 1))
done
grep -q "^pool '$pub'" "$tmp/hold.stat" ||
  fail "gpubuddy-stat did not attach to the held pool: $(cat "$tmp/hold.stat.err")"
# Attached after the replay's end (the report is written after the hold).
sleep 1
$stat --json $pub > "$tmp/hold.json" 2>&1 || fail "stat of the held pool: $(cat "$tmp/hold.json")"
grep -q '"writer_gone":false' "$tmp/hold.json" || fail "the held pool: $(cat "$tmp/hold.json")"
grep -q 'stays published until' "$tmp/hold.err" || fail "--hold said: $(cat "$tmp/hold.err")"
kill -INT $rp; wait $rp; rc=$?
[ $rc = 0 ] || fail "SIGINT during --hold exited $rc: $(cat "$tmp/hold.err")"
grep -q '^total time' "$tmp/hold.out" || fail "no report after --hold: $(cat "$tmp/hold.out")"
[ ! -e /dev/shm/gpubuddy.$pub ] || { rm -f /dev/shm/gpubuddy.$pub; fail "--hold left /dev/shm/gpubuddy.$pub behind"; }
$replay --publish $pub --hold 0.3 --quiet "$infer" > /dev/null 2> "$tmp/hold.err" ||
  fail "--hold 0.3 exited $?: $(cat "$tmp/hold.err")"
[ ! -e /dev/shm/gpubuddy.$pub ] || { rm -f /dev/shm/gpubuddy.$pub; fail "--hold 0.3 left a segment"; }
$replay --hold 1 "$infer" > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "--hold without --publish exited $rc, not 2"
$replay --publish $pub --hold 0 "$infer" > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "--hold 0 exited $rc, not 2"

# 8. Pages under live blocks (what a GPB_CFG_VMM pool would map), buddy
# in 16 MiB: a [0,1M) and c [1M,2M) share granule 0, b [2M,4M) is granule
# 1; with b freed, d (3 MiB, a 4 MiB block at 4M) takes granules 2 and 3:
# three granules at the peak, 6 MiB.
printf '# gpubuddy-trace v1\n1 0 alloc 0xa 1048576 0 0x0\n2 1 alloc 0xb 2097152 0 0x0\n3 2 alloc 0xc 1048576 0 0x0\n4 3 free 0xb 0 0 0x0\n5 4 alloc 0xd 3145728 0 0x0\n6 5 free 0xa 0 0 0x0\n' > "$tmp/pages.trace"
$replay --json --quiet --pool-size 16M "$tmp/pages.trace" > "$tmp/pages.json" || fail "pages replay exited $?"
expect "$tmp/pages.json" peak_page_bytes 6291456
$replay --quiet --pool-size 16M "$tmp/pages.trace" | grep -q 'peak 2 MiB pages in use: 6.0 MiB (6291456, ' ||
  fail "the text report lacks the pages line"

# 6d. --top-sites: the bytes each call site held when live bytes peaked
# (4500 after op 3: site 2 3000 in one, site 1 1500 in two), the sites of
# failed allocations (ties by id; site 3 never defined: no frames), frames
# one a line in text; a trace without sites says so; bad counts exit 2.
cat > "$tmp/sites.trace" <<'T'
# gpubuddy-trace v2
# site 1 /bin/app+0x10 main;/lib/libc.so+0x20 start
#	site  2	/bin/app+0x30 load
1 0 alloc 0x1 1000 0 0 1
2 1 alloc 0x2 3000 0 0 2
3 2 alloc 0x3 500 0 0 1
4 3 free 0x2 3000 0 0 2
5 4 alloc 0x4 2000 0 0 1
6 5 alloc 0x5 1000000000 0 0 2
7 6 alloc 0x6 100 0 0
8 7 alloc 0x7 1000000000 0 0 3
T
$replay --top-sites --json --quiet --pool-size 64K "$tmp/sites.trace" > "$tmp/sites.json" ||
  fail "--top-sites --json exited $?"
expect "$tmp/sites.json" peak_live_bytes 4500
expect "$tmp/sites.json" failed_allocs 2
for w in '"sites_named": true' \
    '{"site": 2, "allocs": 1, "bytes": 3000, "frames": "/bin/app+0x30 load", "name": "/bin/app+0x30 load", "user_frames": 1, "frames_user_first": ["/bin/app+0x30 load"]},' \
    '{"site": 1, "allocs": 2, "bytes": 1500, "frames": "/bin/app+0x10 main;/lib/libc.so+0x20 start", "name": "/bin/app+0x10 main", "user_frames": 1, "frames_user_first": ["/bin/app+0x10 main", "/lib/libc.so+0x20 start"]}' \
    '{"site": 2, "failures": 1, "bytes": 1000000000, "frames": "/bin/app+0x30 load", "name": "/bin/app+0x30 load", "user_frames": 1, "frames_user_first": ["/bin/app+0x30 load"]},' \
    '{"site": 3, "failures": 1, "bytes": 1000000000, "frames": null}'; do
  grep -qF -- "$w" "$tmp/sites.json" || fail "--top-sites --json lacks '$w'"
done
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/sites.json" 2>/dev/null ||
  { command -v python3 >/dev/null && fail "--top-sites --json is not JSON"; }
$replay --top-sites=1 --quiet --pool-size 64K "$tmp/sites.trace" > "$tmp/sites.txt" ||
  fail "--top-sites=1 exited $?"
for w in 'call sites at peak live bytes, 4.4 KiB (top 1 of 2 sites):' \
    ' 1. 2.9 KiB (66.7%) in 1 allocation; site 2' \
    'call sites of failed allocations (top 1 of 2 sites):' \
    ' 1. 1 failure, 953.7 MiB asked; site 2' '        /bin/app+0x30 load'; do
  grep -qF -- "$w" "$tmp/sites.txt" || fail "--top-sites=1 text lacks '$w'"
done
$replay --top-sites=5 --quiet --pool-size 64K "$tmp/sites.trace" > "$tmp/sites5.txt"
grep -qF '        /lib/libc.so+0x20 start' "$tmp/sites5.txt" || fail "--top-sites lacks a second frame"
grep -qF '(not defined in the trace)' "$tmp/sites5.txt" || fail "--top-sites: an undefined site not said"
$replay --top-sites --quiet "$srcdir/tests/data/rmm_small.csv" > "$tmp/nosites.txt" ||
  fail "--top-sites of a trace without sites exited $?"
grep -q 'the trace names none' "$tmp/nosites.txt" || fail "--top-sites: no sites not said"
for bad in --top-sites=0 --top-sites=x --top-sites=65537; do
  $replay $bad "$tmp/sites.trace" > /dev/null 2>&1; [ $? = 2 ] || fail "$bad did not exit 2"
done
# A bad call site definition is an error that names its line.
printf '# gpubuddy-trace v2\n# site 0 /bin/app+0x1\n' > "$tmp/badsite.trace"
$replay --top-sites "$tmp/badsite.trace" > /dev/null 2> "$tmp/badsite.err"
[ $? = 1 ] || fail "a bad call site line did not exit 1"
grep -q 'line 2.*call site' "$tmp/badsite.err" || fail "bad site error: $(cat "$tmp/badsite.err")"

# 7. Errors: bad traces name the line; usage errors exit 2.
printf '# gpubuddy-trace v1\n1 0 alloc 0x10 64 0 0\n2 0 alloc 0x20 -5 0 0\n' > "$tmp/bad.trace"
$replay "$tmp/bad.trace" > /dev/null 2> "$tmp/bad.err"
[ $? = 1 ] || fail "a bad trace did not exit 1"
grep -q 'line 3' "$tmp/bad.err" || fail "bad trace error does not name line 3: $(cat "$tmp/bad.err")"
$replay "$tmp/missing.trace" > /dev/null 2>&1; [ $? = 1 ] || fail "a missing trace did not exit 1"
$replay --pool-size 12Q "$tmp/rec.trace" > /dev/null 2>&1; [ $? = 2 ] || fail "bad --pool-size did not exit 2"
$replay --policy best "$tmp/rec.trace" > /dev/null 2>&1; [ $? = 2 ] || fail "bad --policy did not exit 2"
$replay --speed 0 "$tmp/rec.trace" > /dev/null 2>&1; [ $? = 2 ] || fail "--speed 0 did not exit 2"
# Counts are digits only: strtoull would take " -1" as all, " 5" as 5.
for bad in " -1" " 5" "+3" "-1" "3 " "0" "1x" ""; do
  $replay --explain-oom="$bad" --quiet "$tmp/rec.trace" > /dev/null 2> "$tmp/eo.err"
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l < "$tmp/eo.err")" = 1 ] || fail "--explain-oom='$bad': exit $rc"
done
$replay --top-sites=" 5" --quiet "$tmp/rec.trace" > /dev/null 2>&1; [ $? = 2 ] ||
  fail "--top-sites=' 5' did not exit 2"
$replay - < "$tmp/rec.trace" > /dev/null 2>&1; [ $? = 2 ] || fail "stdin without --pool-size did not exit 2"
$replay > /dev/null 2>&1; [ $? = 2 ] || fail "no argument did not exit 2"
$replay --help | grep -q -- '--find-min-pool' || fail "--help does not list the options"

# 9. A request that failed when recorded (5 MiB, next to 1 MiB live) and
# that a larger pool serves: the peak reported is the recording's 1 MiB,
# and the 6 MiB the replay held with it is named apart (it was reported
# as the peak, as if the program had held 5 MiB more).
printf '# gpubuddy-trace v2\n1 0 alloc 0x0 1048576 0 0\n2 1 fail 0x0 5242880 0 0\n3 2 free 0x0 0 0 0\n' \
  > "$tmp/fail.trace"
$replay --json --quiet --pool-size 16M "$tmp/fail.trace" > "$tmp/fail.json" ||
  fail "replay of fail.trace exited $?"
expect "$tmp/fail.json" peak_live_bytes 1048576
expect "$tmp/fail.json" served_peak_live_bytes 6291456
expect "$tmp/fail.json" served_recorded_failures 1
$replay --quiet --pool-size 16M "$tmp/fail.trace" > "$tmp/fail.txt" || fail "text replay of fail.trace"
grep -q "peak live bytes served:  1.0 MiB" "$tmp/fail.txt" &&
  grep -q "beyond it: this pool also served 1 request that had failed" "$tmp/fail.txt" ||
  fail "the peak beside a served recorded failure: $(grep -A1 'peak live' "$tmp/fail.txt")"
# Through a pool as small as the recording's, it fails again: one peak.
$replay --json --quiet --pool-size 4M "$tmp/fail.trace" > "$tmp/fail4.json"
expect "$tmp/fail4.json" peak_live_bytes 1048576
expect "$tmp/fail4.json" served_recorded_failures 0

# 10. A PyTorch snapshot (a pickle) given as a trace: one line naming the
# importer (it said "binary data (NUL byte)"), plain or gzipped.
gzip -c "$srcdir/tests/data/torch_snapshot.pickle" > "$tmp/snap.pickle.gz"
for p in "$srcdir/tests/data/torch_snapshot.pickle" "$tmp/snap.pickle.gz"; do
  $replay "$p" > /dev/null 2> "$tmp/pk.err"
  rc=$?
  [ $rc = 1 ] && [ "$(wc -l < "$tmp/pk.err")" = 1 ] &&
    grep -q "gpubuddy-import-torch" "$tmp/pk.err" ||
    fail "a pickle: exit $rc: $(cat "$tmp/pk.err")"
done

# 11. --find-min-pool stopped by SIGINT: it prints the smallest size that
# fitted so far (it printed nothing), and that size does replay cleanly;
# its progress lines give the probes' total and a time left.
churn=./samples/gpubuddy-sample-churn
if [ -x "$churn" ]; then
  GPB_TRACE=$tmp/long.trace $churn --backend virtual --pool-size 64M \
    --steps 100000 --quiet > /dev/null 2>&1
  $replay --find-min-pool --policy buddy --resolution 256 --min-block 256 \
    "$tmp/long.trace" > "$tmp/int.out" 2> "$tmp/int.err" &
  rp=$!
  i=0 # until the scan has begun and said so (at most 20 s)
  while ! grep -q "of at most" "$tmp/int.err" && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  kill -INT $rp 2>/dev/null
  wait $rp
  best=$(sed -n 's/.*interrupted: at most .* (\([0-9]*\) bytes fit).*/\1/p' "$tmp/int.out")
  if [ -n "$best" ]; then
    $replay --json --quiet --pool-size "$best" --min-block 256 --policy buddy \
      "$tmp/long.trace" > "$tmp/best.json" || fail "replay at $best exited $?"
    expect "$tmp/best.json" failed_allocs 0
  elif ! grep -q "^min pool size (buddy): " "$tmp/int.out"; then
    fail "--find-min-pool after SIGINT: $(cat "$tmp/int.out") / $(tail -2 "$tmp/int.err")"
  fi # (else it had finished before the signal: nothing to check)
  grep -q "of at most [0-9]*, at most about [0-9]* s left" "$tmp/int.err" ||
    fail "no total or time left: $(head -3 "$tmp/int.err")"
fi

# The sample traces carry the stacks PyTorch recorded: of each one's top
# sites at the peak, the first named is the sample script's own frame, not
# PyTorch's (they carried no sites, so --top-sites had nothing to show).
for w in resnet gpt infer; do
  f=$srcdir/samples/traces/torch-$w.trace.gz
  $replay --top-sites=3 --quiet "$f" > "$tmp/top-$w.txt" 2>&1 ||
    fail "--top-sites on $f exited $?"
  grep -m1 "^   [0-9]\. .*; site [0-9]*: " "$tmp/top-$w.txt" |
    grep -q ": record_traces\.py:[0-9]* " ||
    fail "$f: top site not the sample's frame: $(grep -m1 '; site' "$tmp/top-$w.txt")"
done

if [ $fails != 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo ok
