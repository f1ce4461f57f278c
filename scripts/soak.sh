#!/bin/sh
# SPDX-License-Identifier: MIT
# soak.sh [BUILDDIR] [ROUNDS] [TESTS...]: runs the seeded tests ROUNDS times
# (default 10), each with a fresh seed from the clock (GPB_TEST_SOAK=1),
# where `make check` always uses the fixed default seed. A failure prints
# the test's seed line and log, so `GPB_TEST_SEED=N tests/test_foo` replays
# it. Exits non-zero when any round failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
rounds=${2:-10}
[ $# -gt 2 ] && { shift 2; tests="$*"; } ||
  tests=$(cd "$top" && grep -l 'test_seed()' tests/test_*.c | sed 's/\.c$//' | tr '\n' ' ')
[ -f "$build/Makefile" ] || { echo "soak: no build in $build (run scripts/build.sh)" >&2; exit 2; }
passed=0 failed=0
for r in $(seq 1 "$rounds"); do
  if GPB_TEST_SOAK=1 make -s -C "$build" check TESTS="$tests" >/dev/null 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "soak: round $r failed:" >&2
    for t in $tests; do
      grep -q '^:test-result: \(FAIL\|ERROR\)' "$build/$t.trs" 2>/dev/null || continue
      echo "--- $t ($(grep -m1 '^seed ' "$build/$t.log"))" >&2
      tail -20 "$build/$t.log" >&2
    done
  fi
done
echo "soak: $passed passed, $failed failed (rounds of: $tests)"
[ "$failed" -eq 0 ]
