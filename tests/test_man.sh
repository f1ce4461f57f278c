#!/bin/sh
# SPDX-License-Identifier: MIT
# test_man.sh: the committed man pages (man/*.1) match what help2man makes
# of each program's --help and --version now, so a changed option cannot
# leave its page behind. Skips (77) without help2man. Run from the build
# directory by make check.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
command -v help2man >/dev/null 2>&1 || { echo "SKIP: no help2man"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$top/scripts/gen-man.sh" "$PWD" "$tmp" 2>"$tmp/log" || { cat "$tmp/log"; exit 1; }
fail=0
for f in "$tmp"/*.1; do
  n=$(basename "$f")
  if ! cmp -s "$f" "$top/man/$n"; then
    echo "FAIL: man/$n differs from the program's --help (run scripts/gen-man.sh $PWD)"
    diff "$top/man/$n" "$f" | head -20
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "man pages match their programs"
exit $fail
