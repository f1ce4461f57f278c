#!/bin/sh
# SPDX-License-Identifier: MIT
# run-prefetch-ab.sh TARBALL [DIST...]: how far ahead the ring writer
# should prefetch (lib/live/live.h, gpb__ring_put). Builds
# bench/publish_overhead from a `make dist` tarball once per distance
# (default 8 and 32 slots) and runs them in turn, three times each, with
# the reader left to the scheduler and pinned to another core. Prints
# the "on" and "on+reader" lines of every run.
set -eu
tarball=$1
shift
dists=${*:-8 32}
work=${TMPDIR:-/tmp}/gpb-prefetch-ab
rm -rf "$work" && mkdir -p "$work"
other=$(( $(nproc) / 2 ))
for d in $dists; do
  mkdir -p "$work/$d" && tar xzf "$tarball" -C "$work/$d"
  src=$(ls -d "$work/$d"/gpubuddy-*/)
  sed -i "s/(seq + [0-9]*) \& r->mask/(seq + $d) \& r->mask/" "$src/lib/live/live.h"
  grep -q "(seq + $d) & r->mask" "$src/lib/live/live.h" || { echo "cannot set distance $d"; exit 1; }
  (cd "$src" && ./configure -q --without-cuda >/dev/null && make -j"$(nproc)" bench/publish_overhead >/dev/null)
done
for rep in 1 2 3; do
  for d in $dists; do
    b=$(ls -d "$work/$d"/gpubuddy-*/)bench/publish_overhead
    echo "== distance $d, run $rep, reader unpinned"
    "$b" --steps 2000000 --backend host | grep -E "^host +on"
    echo "== distance $d, run $rep, reader on CPU $other"
    "$b" --steps 2000000 --backend host --pin "0,$other" | grep -E "^host +on"
  done
done
