#!/bin/sh
# SPDX-License-Identifier: MIT
# test_cli.sh: every program agrees on the conventions: --help prints to
# stdout and exits 0; --version prints "PROG VERSION" (the package's) and
# exits 0; a bad option is one line on stderr naming --help, exit 2.
# Programs not built here (the viewer without SDL2 is still built) are
# skipped one by one.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
want=$(sed -n 's/^#define GPB_VERSION_STRING "\(.*\)"/\1/p' "$top/include/gpubuddy.h")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
n=0
for p in tools/gpubuddy-replay tools/gpubuddy-stat tools/gpubuddy-relay tools/gpubuddy-export-torch \
         bench/gpubuddy-bench gpubuddy-view samples/gpubuddy-sample-churn samples/gpubuddy-sample-cnn \
         samples/gpubuddy-sample-kvcache samples/gpubuddy-sample-checkerboard \
         "$top/tools/gpubuddy-import-torch"; do
  case $p in /*) ;; *) p=./$p ;; esac
  [ -x "$p" ] || { echo "skip $p (not built)"; continue; }
  name=$(basename "$p")
  n=$((n + 1))
  out=$("$p" --help 2>/dev/null); rc=$?
  [ $rc = 0 ] || fail "$name --help: exit $rc"
  [ -n "$out" ] || fail "$name --help: nothing on stdout"
  v=$("$p" --version 2>&1); rc=$?
  [ $rc = 0 ] || fail "$name --version: exit $rc"
  case $v in
    "$name $want"|"$name $want "*) ;;
    *) fail "$name --version: '$v', expected '$name $want'" ;;
  esac
  "$p" --no-such-option > /dev/null 2> err.tmp; rc=$?
  [ $rc = 2 ] || fail "$name --no-such-option: exit $rc, expected 2"
  [ "$(wc -l < err.tmp)" = 1 ] || fail "$name --no-such-option: $(wc -l < err.tmp) lines on stderr: $(head -3 err.tmp)"
  grep -q -- '--help' err.tmp || fail "$name --no-such-option: the line does not point at --help"
done
rm -f err.tmp
[ $n -gt 0 ] || { echo "SKIP: no program built"; exit 77; }
[ $fails = 0 ] && echo "$n programs agree"
exit $fails
