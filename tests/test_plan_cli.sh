#!/bin/sh
# SPDX-License-Identifier: MIT
# test_plan_cli.sh: gpubuddy-replay --plan-out and --plan end to end.
#  - the gpt sample, planned and followed: periodic, every request where
#    planned, and a smallest pool within 1.01 x peak (best fit alone
#    needs 1.053);
#  - a plan made from a shorter run (the trace's first 3,000 lines) and
#    followed by the whole run: every request still where planned;
#  - another program's plan: given up, and the replay still serves all;
#  - --policy all --find-min-pool names the trace's own plan too;
#  - JSON keys; bad plans and option mixes: one line, exit 1 or 2, and
#    no plan file left by a failed --plan-out.
# Run by make check from the build directory.
set -u
srcdir=${srcdir:-.}
replay=./tools/gpubuddy-replay
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-plan-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
traces=$srcdir/samples/traces
gpt=$traces/torch-gpt.trace.gz
resnet=$traces/torch-resnet.trace.gz
# The ratio printed on a "min pool size" line, times 1000.
ratio() {
  sed -n 's/^min pool size.*, \([0-9]*\)\.\([0-9]*\)x peak demand.*/\1\2/p' "$1"
}

# 1. Plan the gpt sample and follow it.
$replay --plan-out "$tmp/gpt.plan" "$gpt" > "$tmp/out.txt" 2> "$tmp/err.txt" ||
  fail "--plan-out exited $?: $(cat "$tmp/err.txt")"
head -1 "$tmp/gpt.plan" | grep -qx 'gpubuddy-plan 1' || fail "no plan header"
grep -q '^repeat 574$' "$tmp/gpt.plan" || fail "gpt's plan has no period from entry 574"
# Numbered as the file numbers them (issue 38, item 13).
grep -q '^periodic: entries 574 to 1407 repeat (counted from 0, as the file.s "repeat 574"' "$tmp/out.txt" ||
  fail "--plan-out does not report the period: $(cat "$tmp/out.txt")"
grep -q '^extent: .*(1426018564 bytes, 1.000x' "$tmp/out.txt" ||
  fail "extent: $(grep extent "$tmp/out.txt")"
[ -z "$(ls "$tmp" | grep '^gpt\.plan\.')" ] || fail "a temporary file was left: $(ls "$tmp")"
$replay --quiet --plan "$tmp/gpt.plan" --find-min-pool "$gpt" > "$tmp/f.txt" ||
  fail "--plan --find-min-pool exited $?"
r=$(ratio "$tmp/f.txt")
[ -n "$r" ] && [ "$r" -le 1010 ] || fail "gpt with its plan needs ${r:-?}/1000 x peak"
grep -q '^plan: .*1408 entries; 1902 requests placed as planned, 0 by best fit' \
  "$tmp/f.txt" || fail "not every request placed as planned: $(grep '^plan' "$tmp/f.txt")"
$replay --quiet --policy bestfit --find-min-pool "$gpt" > "$tmp/b.txt"
b=$(ratio "$tmp/b.txt")
[ -n "$b" ] && [ "$r" -lt "$b" ] || fail "the plan ($r) is no better than best fit (${b:-?})"

# What --policy all --find-min-pool recommends: the policies, and the
# trace's own plan for a job that runs again.
$replay --quiet --policy all --find-min-pool "$gpt" > "$tmp/all.txt" ||
  fail "--policy all --find-min-pool exited $?"
grep -q '^for a job that runs again: bestfit following a plan made from this trace (--plan-out) fits in [0-9]* bytes (1.000x' \
  "$tmp/all.txt" || fail "no plan in the recommendation: $(tail -2 "$tmp/all.txt")"
$replay --quiet --json --policy all --find-min-pool "$gpt" > "$tmp/all.json" ||
  fail "--policy all --find-min-pool --json exited $?"
grep -q '"own_plan_min_pool_ratio": 1.000' "$tmp/all.json" || fail "JSON lacks the own plan"
if command -v python3 > /dev/null; then
  python3 -m json.tool "$tmp/all.json" > /dev/null || fail "--policy all JSON does not parse"
fi

# 2. A plan from a shorter run of the same program, followed by a
# longer one: set-up, then more steps than the plan saw.
gzip -dc "$gpt" | head -3000 > "$tmp/short.trace"
$replay --quiet --plan-out "$tmp/short.plan" "$tmp/short.trace" > /dev/null ||
  fail "--plan-out of the short run exited $?"
grep -q '^repeat ' "$tmp/short.plan" || fail "the short run's plan has no period"
$replay --quiet --plan "$tmp/short.plan" --find-min-pool "$gpt" > "$tmp/s.txt" ||
  fail "the long run with the short plan exited $?"
r=$(ratio "$tmp/s.txt")
[ -n "$r" ] && [ "$r" -le 1010 ] || fail "the long run needs ${r:-?}/1000 x peak"
grep -q 'requests placed as planned, 0 by best fit' "$tmp/s.txt" ||
  fail "the long run left its plan: $(grep '^plan' "$tmp/s.txt")"

# A run with no repeating step, cut while blocks live: a warning, as a
# longer run would be placed around the plan's layout.
gzip -dc "$traces/torch-infer.trace.gz" | head -2000 > "$tmp/cut.trace"
$replay --plan-out "$tmp/cut.plan" "$tmp/cut.trace" > "$tmp/cut.txt" 2> "$tmp/cut.err" ||
  fail "--plan-out of a cut run exited $?"
grep -q '^periodic: no' "$tmp/cut.txt" || fail "a cut inference run has a period?"
grep -q 'warning: no period found and [0-9]* bytes still live' "$tmp/cut.err" ||
  fail "no warning for a plan without a period: $(cat "$tmp/cut.err")"

# 3. Another program's plan: given up early, best fit serves the rest.
$replay --quiet --plan-out "$tmp/resnet.plan" "$resnet" > /dev/null || fail "resnet plan"
$replay --quiet --plan "$tmp/resnet.plan" "$gpt" > "$tmp/x.txt" ||
  fail "gpt with resnet's plan exited $?"
grep -q '^failed allocations (OOM): 0$' "$tmp/x.txt" || fail "a foreign plan failed requests"
grep -q '^plan given up at request [0-9]*: the run departed' "$tmp/x.txt" ||
  fail "a foreign plan was not given up: $(grep '^plan' "$tmp/x.txt")"

# 4. JSON.
$replay --quiet --json --plan "$tmp/gpt.plan" --pool-size 2G "$gpt" > "$tmp/p.json" ||
  fail "--json exited $?"
for k in '"plan": ' '"plan_entries": 1408' '"plan_placed": 1902' \
         '"plan_busy": 0' '"plan_unmatched": 0' '"plan_repeat_from": 574' \
         '"plan_stopped_at": 0'; do
  grep -qF "$k" "$tmp/p.json" || fail "JSON lacks $k"
done
$replay --quiet --json --plan-out "$tmp/j.plan" "$gpt" > "$tmp/o.json" ||
  fail "--plan-out --json exited $?"
for k in '"entries": 1408' '"repeat_from": 574' '"extent": 1426018564' \
         '"extent_ratio": 1.000'; do
  grep -qF "$k" "$tmp/o.json" || fail "--plan-out JSON lacks $k"
done
if command -v python3 > /dev/null; then
  python3 -m json.tool "$tmp/o.json" > /dev/null || fail "--plan-out JSON does not parse"
  python3 -m json.tool "$tmp/p.json" > /dev/null || fail "--plan JSON does not parse"
fi

# 5. Errors: one line each; usage is exit 2, a bad file exit 1.
err() { # expected-rc what args...
  want=$1 what=$2
  shift 2
  $replay "$@" > /dev/null 2> "$tmp/e.txt"
  rc=$?
  [ $rc = "$want" ] || fail "$what: exit $rc, expected $want"
  [ "$(wc -l < "$tmp/e.txt")" = 1 ] || fail "$what: not one line: $(cat "$tmp/e.txt")"
}
err 2 "--plan with buddy" --plan "$tmp/gpt.plan" --policy buddy "$gpt"
err 2 "--plan and --plan-out" --plan "$tmp/gpt.plan" --plan-out "$tmp/y.plan" "$gpt"
err 2 "--plan-out with --find-min-pool" --plan-out "$tmp/y.plan" --find-min-pool "$gpt"
err 2 "--plan-out from stdin" --plan-out "$tmp/y.plan" - < /dev/null
err 2 "--plan ''" --plan '' "$gpt"
err 1 "a missing plan" --plan "$tmp/none.plan" "$gpt"
grep -q 'none.plan' "$tmp/e.txt" || fail "a missing plan is not named"
printf 'gpubuddy-plan 1\n512 0\n512 x\n' > "$tmp/bad.plan"
err 1 "a bad plan" --plan "$tmp/bad.plan" "$gpt"
grep -q 'bad.plan:3: expected' "$tmp/e.txt" || fail "a bad plan's line: $(cat "$tmp/e.txt")"
printf 'gpubuddy-plan 1\n512 100\n' > "$tmp/off.plan"
err 1 "a plan off the unit grid" --plan "$tmp/off.plan" "$gpt"
grep -q 'not a multiple' "$tmp/e.txt" || fail "off grid: $(cat "$tmp/e.txt")"
err 1 "--plan-out to a missing directory" --plan-out "$tmp/no/such.plan" "$gpt"
[ ! -e "$tmp/no" ] || fail "a failed --plan-out left something"
$replay --help | grep -q -- '--plan-out' || fail "--help does not list --plan-out"

# 6. Issue 38: a FIFO named as a plan or a trace is refused at once, not
# waited on; a plan cut short is refused; a plan past the pool is warned of.
mkfifo "$tmp/fifo.plan" "$tmp/fifo.trace"
timeout 10 $replay --plan "$tmp/fifo.plan" "$gpt" > /dev/null 2> "$tmp/e.txt"
rc=$?
[ $rc = 1 ] || fail "--plan FIFO: exit $rc (124: it waited)"
grep -q 'fifo.plan: not a regular file' "$tmp/e.txt" || fail "--plan FIFO: $(cat "$tmp/e.txt")"
GPB_TRACE=$tmp/fifo.trace timeout 10 ./samples/gpubuddy-sample-churn --steps 10 \
  > /dev/null 2> "$tmp/e.txt"
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "GPB_TRACE FIFO: exit $rc (124: it waited)"
grep -q 'GPB_TRACE=.*fifo.trace: not a regular file' "$tmp/e.txt" ||
  fail "GPB_TRACE FIFO: $(cat "$tmp/e.txt")"
printf 'gpubuddy-plan 1\n512 0' > "$tmp/cut.plan"
err 1 "a plan with no end of line" --plan "$tmp/cut.plan" "$gpt"
grep -q 'cut.plan:2: the last line has no end of line' "$tmp/e.txt" ||
  fail "a cut plan: $(cat "$tmp/e.txt")"
$replay --pool-size 64M --plan "$tmp/gpt.plan" "$gpt" > /dev/null 2> "$tmp/e.txt"
grep -q "gpt.plan reaches 1426018564 bytes, past the 67108864-byte pool" "$tmp/e.txt" ||
  fail "a plan past the pool: no warning: $(cat "$tmp/e.txt")"

if [ $fails != 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo ok
