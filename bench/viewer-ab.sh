#!/bin/sh
# SPDX-License-Identifier: MIT
# viewer-ab.sh A.tar.gz B.tar.gz: the viewer's ingest, two builds side by
# side on one host. Builds each `make dist` tarball headless (no SDL2
# needed), writes one 3M-op churn trace, then runs `gpubuddy-view --bench`
# on a million live blocks and on the trace, A then B, three rounds.
set -eu
work=${TMPDIR:-/tmp}/gpb-viewer-ab
rm -rf "$work" && mkdir -p "$work"
for x in a b; do
  t=$1; shift
  mkdir -p "$work/$x/src" "$work/$x/build"
  tar xzf "$t" -C "$work/$x/src" --strip-components=1
  (cd "$work/$x/build" && "$work/$x/src/configure" -q >/dev/null &&
     make -j"$(nproc)" >/dev/null 2>&1)
done
tr=$work/churn3m.trace
"$work/b/build/samples/gpubuddy-sample-churn" --backend virtual --steps 3000000 \
  --trace "$tr" --quiet >/dev/null 2>&1
for i in 1 2 3; do
  for x in a b; do
    v=$work/$x/build/gpubuddy-view
    echo "== $x round $i: --bench (1M live blocks)"
    timeout 60 "$v" --bench --bench-frames 50 2>&1
    echo "== $x round $i: --bench --trace churn3m"
    timeout 120 "$v" --bench --trace "$tr" --bench-frames 20 2>&1
  done
done
