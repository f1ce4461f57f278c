#!/bin/sh
# SPDX-License-Identifier: MIT
# test_big_snapshot.sh: a 20 MB PyTorch snapshot shaped like a real one
# (bench/big_snapshot.py: shared frame dicts, 30 to 70 frames a stack)
# imports whole: every alloc, free_completed and oom entry becomes one op,
# the sites keep every frame, and the trace replays. The import runs
# under an address-space cap of 512 MiB, a guard against a copy of the
# snapshot per step creeping back (streamed, it takes about 35 MiB
# resident now).
# scripts/bench-big-snapshot.sh measures 1 GB by hand. Skips (77)
# without python3.
set -u
srcdir=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-bigsnap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
python3 "$srcdir/bench/big_snapshot.py" 20 "$tmp/s.pickle" || exit 1
(ulimit -v 524288; python3 "$srcdir/tools/gpubuddy-import-torch" -q "$tmp/s.pickle" -o "$tmp/s.trace.gz") ||
  fail "import under 512 MiB: exit $?"
python3 - "$tmp/s.pickle" "$tmp/s.trace.gz" <<'PY' || fail "the trace does not match the snapshot"
import gzip, pickle, sys
tr = pickle.load(open(sys.argv[1], "rb"))["device_traces"][0]
want = sum(e["action"] in ("alloc", "free_completed", "oom") for e in tr)
deepest = max(len(e["frames"]) for e in tr)
ops = stacks = 0
longest = 0
for l in gzip.open(sys.argv[2], "rt", encoding="utf-8"):
    if l.startswith("# stack "):
        stacks += 1
        longest = max(longest, len(l.split()) - 3)
    elif l[0].isdigit():
        ops += 1
assert ops == want, (ops, want)
assert stacks == 400 and longest == deepest, (stacks, longest, deepest)
print("%d ops, %d stacks, up to %d frames" % (ops, stacks, longest))
PY
./tools/gpubuddy-replay -q "$tmp/s.trace.gz" > /dev/null || fail "replay: exit $?"
[ $fails = 0 ] || exit 1
echo "test_big_snapshot: ok"
