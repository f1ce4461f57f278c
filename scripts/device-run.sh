#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# device-run.sh OUT [bench]: what one call on the GPU machine runs. It runs
# scripts/gpu-check.sh on the tarball carried in .gpu/, converts the
# PyTorch snapshots it records into gpubuddy traces, optionally runs the
# benchmark suite, and packs everything into at most 8 files under OUT
# (the device tool brings back no more).
set -u
out=$1
what=${2:-check}
here=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/gpb-device-run
mkdir -p "$work" "$out"
tarball=$(ls -t "$here"/.gpu/gpubuddy-*.tar.gz | head -1)
if [ "$what" = check ] || [ "$what" = all ]; then
  GPB_CHECK_WORK=$work/build "$here/scripts/gpu-check.sh" "$work/check" "$tarball"
  cp "$work/check/report.md" "$out/gpu-check-report.md"
  [ -f "$work/check/torch-compare.json" ] && cp "$work/check/torch-compare.json" "$out/"
  for f in "$work"/check/traces/*.pickle; do
    [ -f "$f" ] || continue
    python3 "$here/tools/gpubuddy-import-torch" "$f" -o "$out/$(basename "$f" .pickle).trace.gz" ||
      echo "device-run: import of $f failed" >&2
  done
  tar czf "$out/gpu-check-logs.tar.gz" -C "$work/check" . 2>/dev/null
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  build=$work/build/build  # where gpu-check.sh built
  "$here/bench/run-gpu.sh" "$work/bench" "$build"
  [ -x "$build/bench/publish_overhead" ] &&
    timeout 60 "$build/bench/publish_overhead" --steps 2000000 > "$work/bench/publish_overhead.txt" 2>&1
  # The reader left to the scheduler, on the writer's SMT sibling, and on
  # another core: what a reader costs apart from what sharing a core does.
  timeout 240 sh "$here/bench/run-publish-pinned.sh" "$tarball" > "$work/bench/publish_pinned.txt" 2>&1
  # The viewer's ingest on this host's CPU (it builds headless here: no
  # SDL2): a million and two million live blocks, then a 3M-op sample
  # trace from memory, a plain file and a gzipped one.
  view=$build/gpubuddy-view
  if [ -x "$view" ]; then
    vb=$work/bench/viewer_bench.txt
    { "$view" --version; date -u; nproc; } > "$vb"
    for i in 1 2 3; do timeout 60 "$view" --bench --bench-frames 100 >> "$vb" 2>&1; done
    for i in 1 2 3; do timeout 60 "$view" --bench --steps 2000000 --bench-frames 20 >> "$vb" 2>&1; done
    tr=$work/churn3m.trace
    "$build/samples/gpubuddy-sample-churn" --backend virtual --steps 3000000 \
      --trace "$tr.gz" --quiet > /dev/null 2>&1 && gzip -dc "$tr.gz" > "$tr"
    [ -f "$tr" ] && for i in 1 2 3; do
      timeout 120 "$view" --bench --trace "$tr" --bench-frames 20 >> "$vb" 2>&1
    done
    # The .gz with inflate workers (the default here) and without, in turn.
    [ -f "$tr.gz" ] && for i in 1 2 3; do
      for t in default 0; do
        echo "== GPB_INFLATE_THREADS=$t" >> "$vb"
        if [ $t = default ]; then env -u GPB_INFLATE_THREADS timeout 120 "$view" --bench --trace "$tr.gz" --bench-frames 20
        else GPB_INFLATE_THREADS=$t timeout 120 "$view" --bench --trace "$tr.gz" --bench-frames 20; fi >> "$vb" 2>&1
      done
    done
  fi
  tar czf "$out/bench.tar.gz" -C "$work/bench" .
  cp "$work"/bench/*.md "$out/" 2>/dev/null
fi
ls -la "$out"
