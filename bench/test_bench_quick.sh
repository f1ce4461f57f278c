#!/bin/sh
# SPDX-License-Identifier: MIT
# test_bench_quick.sh: runs gpubuddy-bench --host --quick and checks that
# the harness works: exit 0, every table header printed, every contender
# measured, a trace written with gpb_trace_writer replayed through
# gpb_trace_open, and the JSON, summary and plots written; bad usage and
# bad traces end in one line on stderr. It checks no timing: speed
# belongs to the benchmark, not to the tests.
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

# Usage errors: one line on stderr, exit 2, before anything runs. A list
# that names no suite, or leaves none, would otherwise run nothing and
# pass; a count with a sign or a space is not a count.
one_line() { # what, then the command
  what=$1; shift
  "$@" >"$out/u.out" 2>"$out/u.err"
  rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2"
  [ "$(wc -l <"$out/u.err")" -eq 1 ] ||
    fail "$what: $(wc -l <"$out/u.err") lines on stderr: $(head -3 "$out/u.err")"
  [ -s "$out/u.out" ] && fail "$what: wrote to stdout"
  return 0
}
one_line "--no-such-option" "$bench" --no-such-option
grep -q "unknown option '--no-such-option' (try 'gpubuddy-bench --help')" "$out/u.err" ||
  fail "--no-such-option: $(cat "$out/u.err")"
one_line "--json without a value" "$bench" --quick --json
grep -q -- "option '--json' needs a value" "$out/u.err" || fail "--json: $(cat "$out/u.err")"
one_line "an extra argument" "$bench" --quick extra
one_line "--only ''" "$bench" --quick --only ""
one_line "--only ,,," "$bench" --quick --only ,,,
one_line "--only traces --skip traces" "$bench" --quick --only traces --skip traces
one_line "--contenders ," "$bench" --quick --contenders ,
one_line "--seed ' -1'" "$bench" --quick --seed " -1"
one_line "--min-block 2^63" "$bench" --quick --min-block 9223372036854775808
"$bench" --version >"$out/v" 2>&1 || fail "--version exited non-zero"
grep -q '^gpubuddy-bench [0-9]' "$out/v" || fail "--version: $(cat "$out/v")"

# --json to a place that cannot be written fails before any suite runs.
"$bench" --quick --only meta --json "$out/no/such/dir/r.json" >"$out/j.out" 2>"$out/j.err" &&
  fail "--json into a missing directory was accepted"
grep -q '^==' "$out/j.out" && fail "--json into a missing directory: suites ran first"
grep -q 'cannot write --json' "$out/j.err" || fail "--json: $(cat "$out/j.err")"

# A peak of 2^63 bytes cannot be doubled into a pool: one error, exit 1,
# no pool of 0 bytes tried (and nothing malloc'ed of that size, which
# ASan aborts on).
printf '# gpubuddy-trace v1\n1 0 alloc 0x1 9223372036854775808 0 0x0\n' >"$out/huge63.trace"
"$bench" --quick --only traces --trace "$out/huge63.trace" >"$out/h.out" 2>"$out/h.err" &&
  fail "a trace with a peak of 2^63 bytes did not fail the run"
grep -q 'peak demand of 9223372036854775808 bytes is larger than any pool' "$out/h.err" ||
  fail "peak of 2^63: $(grep -v '^\[bench\]' "$out/h.err" | head -3)"
grep -q 'pool of 0 B' "$out/h.out" "$out/h.err" && fail "peak of 2^63: a pool of 0 bytes was tried"
# A request of 2 TiB fits the search (1 GiB blocks keep its pools' metadata
# small) but not malloc: it fails there, and the run goes on.
printf '# gpubuddy-trace v1\n1 0 alloc 0x1 2199023255552 0 0x0\n2 1 free 0x1 0 0 0x0\n' >"$out/big41.trace"
"$bench" --quick --only traces --contenders malloc --min-block 1G \
  --trace "$out/big41.trace" >"$out/b.out" 2>"$out/b.err" ||
  fail "a trace with a 2 TiB request: exit $?: $(grep -v '^\[bench\]' "$out/b.err" | head -3)"
grep -q '^buddy  *2.0 TiB' "$out/b.out" || fail "a 2 TiB request: no smallest pool of 2 TiB"

# --save-synthetic that cannot finish (here the file size limit, as a full
# disk would) fails and leaves no partial trace behind.
(trap '' XFSZ; ulimit -f 16; exec "$bench" --quick --synthetic-steps 20 \
  --save-synthetic "$out/cut.trace") >/dev/null 2>"$out/cut.err" &&
  fail "--save-synthetic past the file size limit did not fail"
ls "$out" | grep -q '^cut\.trace' && fail "--save-synthetic left a partial file: $(ls "$out" | grep cut)"

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
# Every replay row has its worst op, a time one of its passes took: more
# than 0 and at most the row's max. No other row has one.
awk '/"group": "trace:/ {
       n++
       if (!match($0, /"worst_op_best_ns": [0-9.e+]+/)) { bad = "no worst op: " $0; exit }
       w = substr($0, RSTART + 20, RLENGTH - 20) + 0
       match($0, /"max_ns": [0-9.e+]+/); m = substr($0, RSTART + 10, RLENGTH - 10) + 0
       if (w <= 0 || w > m) { bad = "worst op " w " against max " m; exit }
     }
     /"worst_op_best_ns"/ && !/"group": "trace:/ { bad = "worst op off a replay: " $0; exit }
     END { if (bad != "") { print bad; exit 1 } if (n == 0) { print "no replay rows"; exit 1 } }' \
  "$out/run/results.json" >"$out/wb" || fail "$(cat "$out/wb")"
grep -q "^case .* fails   worst op$" "$out/stdout" || fail "no worst op column"
grep -q '^| 256 B | gpubuddy |' "$out/run/summary.md" || fail "summary has no table"
for f in latency-fixed-256.png latency-churn.png frag-synth.png \
         latency-trace-synth.png; do
  [ -s "$out/run/$f" ] || fail "plot $f not written"
  head -c 8 "$out/run/$f" | od -An -c | grep -q "P   N   G" ||
    fail "plot $f is not a PNG"
done
echo "gpubuddy-bench --quick: ok"
exit 0
