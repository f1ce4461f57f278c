#!/bin/sh
# SPDX-License-Identifier: MIT
# callgrind.sh [REV ...]: instructions per gpb_alloc and per gpb_free on
# bench/churn.c's 200k-op churn (virtual backend, nobody listening), for
# each policy, side by side for each REV (a git revision; "." is the
# working tree, the default). Each is built the way the wheel builds the
# library (cc -O2 over lib/*/*.c, one object, no autotools), with the
# working tree's churn.c, so revisions before the script compare too.
# Needs valgrind. Prints a Markdown table; exits 1 when a run fails.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "callgrind.sh: no valgrind" >&2; exit 2; }
cc=${CC:-cc}
[ $# -gt 0 ] || set -- .
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ops=${CHURN_OPS:-200000}
n=0
echo "| revision | policy | alloc | free |"
echo "|---|---|---|---|"
for rev in "$@"; do
  src=$top
  if [ "$rev" != . ]; then
    src=$tmp/src-$(echo "$rev" | tr -c 'A-Za-z0-9\n' _)
    mkdir -p "$src"
    git -C "$top" archive "$rev" include lib | tar -x -C "$src"
  fi
  n=$((n + 1))
  exe=$tmp/churn-$n
  # shellcheck disable=SC2046
  $cc -O2 -g -std=gnu11 -DGPB_BUILDING_LIBRARY \
    -I"$src/include" -I"$src/lib" -o "$exe" "$top/bench/churn.c" \
    $(ls "$src"/lib/*/*.c) -lz -lpthread -lm -ldl
  for pol in buddy bestfit; do
    row="| $rev | $pol |"
    # Instructions are counted only inside the function (and what it
    # calls): the profile's total is its inclusive cost, whatever the
    # compiler inlined into it.
    for fn in gpb_alloc gpb_free; do
      valgrind --tool=callgrind --toggle-collect="$fn" \
        --callgrind-out-file="$tmp/cg.out" "$exe" --policy $pol --ops "$ops" \
        > "$tmp/churn.txt" 2> "$tmp/vg.txt" || { cat "$tmp/vg.txt" >&2; exit 1; }
      calls=$(sed -n "s/.*allocs \([0-9]*\) frees \([0-9]*\).*/\1 \2/p" "$tmp/churn.txt")
      [ "$fn" = gpb_alloc ] && calls=${calls% *} || calls=${calls#* }
      ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$tmp/cg.out")
      [ -n "$ir" ] && [ "${calls:-0}" -gt 0 ] ||
        { echo "callgrind.sh: no profile of $fn" >&2; exit 1; }
      row="$row $(awk -v i="$ir" -v c="$calls" 'BEGIN { printf "%.0f", i / c }') |"
    done
    echo "$row"
  done
done
