#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-big-snapshot.sh [SIZE_MB] [BUILDDIR]: how long gpubuddy-import-
# torch takes on a PyTorch snapshot of SIZE_MB (default 1000) and how much
# memory, against the goal of issue 36: a 1 GB snapshot within a minute
# in at most twice its size. The snapshot is made by
# bench/big_snapshot.py (fixed seed) in a temporary directory; the
# import's wall time, CPU time (user + system: what a loaded machine
# changes least) and peak resident memory come from /usr/bin/time,
# and the trace is checked by replaying it. Prints one table row. Exits
# non-zero when a step fails (not when the goal is missed: the row says).
# Columns: snapshot size, ops imported, wall time, CPU time, peak RSS,
# RSS over the snapshot's size, verdict.
set -eu
size=${1:-1000}
top=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$top/build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-bigsnap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 "$top/bench/big_snapshot.py" "$size" "$tmp/s.pickle"
bytes=$(stat -c %s "$tmp/s.pickle")
/usr/bin/time -f "%e %U %S %M" -o "$tmp/time" \
  python3 "$top/tools/gpubuddy-import-torch" -q "$tmp/s.pickle" -o "$tmp/s.trace.gz"
read -r secs user sys kb < "$tmp/time"
"$build/tools/gpubuddy-replay" -q --json "$tmp/s.trace.gz" > "$tmp/r.json"
ops=$(sed -n 's/^ *"ops": \([0-9]*\),$/\1/p' "$tmp/r.json" | head -1)
awk -v b="$bytes" -v s="$secs" -v c="$user $sys" -v k="$kb" -v o="$ops" 'BEGIN {
  split(c, t, " ")
  r = k * 1024 / b
  printf "| %.0f MB | %d ops | %.1f s | %.1f s | %.0f MiB | %.2fx | %s |\n",
    b / 1e6, o, s, t[1] + t[2], k / 1024, r,
    (s <= 60 && r <= 2) ? "meets the goal" : "misses the goal"
}'
