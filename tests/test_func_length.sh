#!/bin/sh
# SPDX-License-Identifier: MIT
# test_func_length.sh: no function is over 100 lines (the style's "fits
# on a screen"), C and Python alike, in the directories
# scripts/func-length.sh measures by default: lib tools viewer bench
# python/gpubuddy samples. Then the script itself: a C and a Python
# function of 101 lines are each listed (exit 1), and 100 lines pass.
set -u
srcdir=${srcdir:-.}
top=$(cd "$srcdir" && pwd)
fl=$top/scripts/func-length.sh
"$fl" || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-funclen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/d"
# A function of N lines in each language: C, *.py, and a script named
# without a dot whose shebang says python.
gen() { # N
  { echo "int c_fn(void)"; echo "{"
    i=3; while [ $i -lt "$1" ]; do echo "  (void)0;"; i=$((i + 1)); done
    echo "}"; } > "$tmp/d/a.c"
  { echo "def py_fn():"
    i=2; while [ $i -le "$1" ]; do echo "    pass"; i=$((i + 1)); done
  } > "$tmp/d/b.py"
  { echo "#!/usr/bin/env python3"; cat "$tmp/d/b.py"; } |
    sed 's/py_fn/script_fn/' > "$tmp/d/tool"
  printf '#!/bin/sh\n%s\n' 'def x(:' > "$tmp/d/shell-tool" # not Python
}
fails=0
gen 101
"$fl" 100 "$tmp/d" > "$tmp/out"; rc=$?
for f in "101 $tmp/d/a.c:1 c_fn" "101 $tmp/d/b.py:1 py_fn" \
         "101 $tmp/d/tool:2 script_fn"; do
  grep -qxF "$f" "$tmp/out" || { echo "FAIL: not listed: $f"; fails=1; }
done
[ $rc = 1 ] || { echo "FAIL: 101-line functions: exit $rc, not 1"; fails=1; }
gen 100
"$fl" 100 "$tmp/d" > "$tmp/out" ||
  { echo "FAIL: 100-line functions refused:"; cat "$tmp/out"; fails=1; }
[ $fails = 0 ] && echo "PASS: no function over 100 lines; the measure checked"
exit $fails
