#!/bin/sh
# SPDX-License-Identifier: MIT
# test_import_torch.sh: gpubuddy-import-torch on the fixture snapshots, then
# malformed and malicious pickles (tests/test_import_torch.py, which loads
# the importer once and runs each case in a forked child of one Python
# process). Skips (77) without python3.
srcdir=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
python3 "$srcdir/tests/test_import_torch.py" "$srcdir" ./tools/gpubuddy-replay || exit 1

# A gzipped snapshot inflating to 256 MiB, within --max-input: it costs
# about what it inflates to, not twice (1 GiB took 2,065 MiB of RSS: the
# inflated bytes were copied whole, then copied again for the unpickler).
# A fresh process, whose peak RSS is its own alone.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-import-big.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -c 'import gzip, sys; open(sys.argv[1], "wb").write(gzip.compress(b"\x80\x04" + b"\0" * (256 << 20), 9))' \
  "$tmp/big.pickle.gz"
python3 - "$srcdir/tools/gpubuddy-import-torch" "$tmp" <<'PY' || { echo "FAIL: a 256 MiB inflation took too much memory" >&2; exit 1; }
import resource, subprocess, sys
imp, t = sys.argv[1], sys.argv[2]
r = subprocess.run([sys.executable, imp, t + "/big.pickle.gz", "-o", t + "/big.trace",
                    "--max-input", str(1 << 30)], capture_output=True, text=True)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
print("256 MiB inflated: exit %d, peak RSS %d MiB: %s" % (r.returncode, rss, r.stderr.strip()))
sys.exit(0 if r.returncode == 1 and "not a readable pickle" in r.stderr and rss < 384 else 1)
PY
