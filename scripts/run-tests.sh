#!/bin/sh
# SPDX-License-Identifier: MIT
# run-tests.sh [--distcheck]: everything a fresh machine needs to pass the
# tests: install the packages, build, and run `make check`. With
# --distcheck, `make distcheck` instead: the release tarball is made and
# the same suite runs once, in a build from that tarball (what CI runs).
# Exits non-zero on any failure, after the failed tests' logs.
set -e
mode=check
case "${1:-}" in
  '') ;;
  --distcheck) mode=distcheck ;;
  -h|--help) sed -n '3,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "run-tests.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
if [ $mode = check ]; then
  "$top/scripts/build.sh" "$top/build"
  cd "$top/build"
  make -j"$(nproc)" check || { cat test-suite.log; exit 1; }
  exit 0
fi
# distcheck builds everything again from the tarball: configure here only.
(cd "$top" && { [ -x configure ] || ./autogen.sh >/dev/null; })
mkdir -p "$top/build" && cd "$top/build"
[ -f Makefile ] || "$top/configure" -q
# distcheck's own suite runs in gpubuddy-*/_build/sub; on a failure, the
# failed tests' logs, not just make's last words.
make -j"$(nproc)" distcheck > distcheck.log 2>&1 || {
  tail -20 distcheck.log
  find . -path '*/_build/*' -name '*.trs' -exec grep -l ':test-result: \(FAIL\|ERROR\)' {} + 2>/dev/null |
    while read -r t; do echo "--- ${t%.trs}.log"; tail -60 "${t%.trs}.log"; done
  exit 1
}
grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' distcheck.log || true
grep -A3 'archives ready for distribution' distcheck.log || true
