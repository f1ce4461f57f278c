#!/bin/sh
# SPDX-License-Identifier: MIT
# test_memory_viz.sh: what gpubuddy-export-torch writes opens in
# PyTorch's own memory_viz (torch/cuda/_memory_viz.py): segsum, trace,
# segments, memory, compare, trace_plot and segment_plot run on it and
# report the pool and its allocations. The snapshot is the fixture's,
# imported then exported. The Python with torch is GPB_TORCH_PYTHON,
# else /opt/torchenv/bin/python, else python3; skips (77) when none has
# torch.
set -u
srcdir=${srcdir:-.}
py=
for c in "${GPB_TORCH_PYTHON:-}" /opt/torchenv/bin/python python3; do
  [ -n "$c" ] && "$c" -c 'import torch.cuda._memory_viz' > /dev/null 2>&1 && { py=$c; break; }
done
[ -n "$py" ] || { echo "SKIP: no Python with torch"; exit 77; }
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-memviz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 "$srcdir/tools/gpubuddy-import-torch" -q "$srcdir/tests/data/torch_snapshot.pickle" -o "$tmp/t.trace" || exit 1
./tools/gpubuddy-export-torch "$tmp/t.trace" -o "$tmp/t.pickle" || exit 1
"$py" - "$tmp/t.pickle" <<'PY'
import pickle, sys
import torch
import torch.cuda._memory_viz as mv
d = pickle.load(open(sys.argv[1], "rb"))
s = mv.segsum(d)
assert "segments: 1" in s and "total_allocated" in s, s
t = mv.trace(d)
assert "cudaMalloc(" in t and "raise OutOfMemoryError" in t and "del " in t, t[:400]
lines = lambda x: x  # the flamegraph's input lines, without the script
seg = mv.segments(d, format_flamegraph=lines)
mem = mv.memory(d, format_flamegraph=lines)
assert "active_allocated;" in seg and "model.py:" in mem, mem[:400]
# compare() takes segment lists (its command line passes whole snapshots).
cmp = mv.compare(d["segments"], d["segments"], format_flamegraph=lines)
assert cmp == "", cmp  # the same segments: nothing only before or after
for html in (mv.trace_plot(d), mv.trace_plot(d, plot_segments=True),
             mv.segment_plot(d)):
    assert html.startswith("\n<!DOCTYPE html>") and "snapshot.pickle" in html
print("memory_viz of torch %s reads it: %d trace entries" % (torch.__version__, len(d["device_traces"][0])))
PY
