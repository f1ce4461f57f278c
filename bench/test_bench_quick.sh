#!/bin/sh
# SPDX-License-Identifier: MIT
# test_bench_quick.sh: runs gpubuddy-bench --host --quick and checks that
# the harness works: exit 0, every table header printed, every contender
# measured, a trace written with gpb_trace_writer replayed through
# gpb_trace_open, and the JSON, summary and plots written. It checks no
# timing: speed belongs to the benchmark, not to the tests.
set -u
bench=${GPB_BENCH:-./bench/gpubuddy-bench}
[ -x "$bench" ] || { echo "no $bench" >&2; exit 99; }
out=$(mktemp -d "${TMPDIR:-/tmp}/gpb-bench.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bench" --help >"$out/help" || fail "--help exited non-zero"
grep -q -- '--quick' "$out/help" || fail "--help does not list --quick"
"$bench" --no-such-option >/dev/null 2>&1 && fail "a bad option was accepted"
"$bench" --pairs 0 >/dev/null 2>&1 && fail "--pairs 0 was accepted"
"$bench" --only nosuch >/dev/null 2>&1 && fail "--only nosuch was accepted"
"$bench" --contenders gpubuddy,nosuch >/dev/null 2>&1 &&
  fail "--contenders nosuch was accepted"
"$bench" --quick --trace "$out/missing.gz" --only traces >/dev/null 2>&1 &&
  fail "a missing trace file did not fail the run"

# Sanitizer builds run with GPB_TEST_SCALE < 1: smaller counts keep this
# test within seconds there (ASan maps and poisons every large malloc).
small=
case ${GPB_TEST_SCALE:-1} in
  0*|.*) small="--pairs 20 --churn-ops 300 --churn-live 32 --synthetic-steps 4 --meta-reps 1" ;;
esac

"$bench" --quick $small --save-synthetic "$out/synth.trace.gz" ||
  fail "--save-synthetic failed"
[ -s "$out/synth.trace.gz" ] || fail "--save-synthetic wrote nothing"

"$bench" --host --quick $small --trace "$out/synth.trace.gz" --synthetic \
  --out "$out/run" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || { cat "$out/stderr" >&2; fail "gpubuddy-bench --host --quick exited $rc"; }
for h in "== Latency per call, fixed sizes" "== Latency per call, churn mix" \
         "== Throughput" "== Trace synth: " "== Trace synthetic-dynamic" \
         "smallest pool" "== Metadata and pool creation" "== Targets"; do
  grep -q -- "$h" "$out/stdout" || fail "missing header: $h"
done
for a in gpubuddy gpubuddy-trim malloc empty-call; do
  grep -q "^256 B  *$a " "$out/stdout" || fail "no 256 B row for $a"
  grep -q "^mix  *$a " "$out/stdout" || fail "no churn row for $a"
done
grep -q "^replay  *empty-call " "$out/stdout" || fail "no replay row for empty-call"
# The empty call measures the timer, not work threads could share.
grep -q "^empty-call " "$out/stdout" && fail "the threads suite ran empty-call"
grep -q "^gpubuddy-arenas  *16 .* to " "$out/stdout" ||
  fail "no 16-thread row with its rounds' ratios"
# --contenders keeps only the named allocators.
"$bench" --host --quick $small --only fixed --contenders gpubuddy,malloc \
  >"$out/some" 2>/dev/null || fail "--contenders gpubuddy,malloc failed"
grep -q "^256 B  *malloc " "$out/some" || fail "--contenders dropped malloc"
grep -q "^256 B  *gpubuddy-trim " "$out/some" && fail "--contenders kept trim"
# The file trace and the generated one are the same ops: same peak.
p1=$(sed -n 's/^== Trace synth: .*peak live \(.*\) ==$/\1/p' "$out/stdout")
p2=$(sed -n 's/^== Trace synthetic-dynamic: .*peak live \(.*\) ==$/\1/p' "$out/stdout")
[ -n "$p1" ] && [ "$p1" = "$p2" ] || fail "trace file peak '$p1' != generated '$p2'"
for f in results.txt results.json summary.md; do
  [ -s "$out/run/$f" ] || fail "$f not written"
done
grep -q '^stalls: the host paused .* times a second, at most ' "$out/stdout" ||
  fail "no line on the host's stalls"
grep -q '"host_stalls_per_s": [0-9]' "$out/run/results.json" ||
  fail "JSON has no host_stalls_per_s"
grep -q '"latency": \[' "$out/run/results.json" || fail "JSON has no latency"
grep -q '"traces": \[' "$out/run/results.json" || fail "JSON has no traces"
grep -q '"metadata": \[' "$out/run/results.json" || fail "JSON has no metadata"
grep -q '^| 256 B | gpubuddy |' "$out/run/summary.md" || fail "summary has no table"
for f in latency-fixed-256.png latency-churn.png frag-synth.png \
         latency-trace-synth.png; do
  [ -s "$out/run/$f" ] || fail "plot $f not written"
  head -c 8 "$out/run/$f" | od -An -c | grep -q "P   N   G" ||
    fail "plot $f is not a PNG"
done
echo "gpubuddy-bench --quick: ok"
exit 0
