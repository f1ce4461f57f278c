#!/bin/sh
# SPDX-License-Identifier: MIT
# test_import_torch.sh: gpubuddy-import-torch on the fixture snapshots, then
# malformed and malicious pickles (tests/test_import_torch.py, which loads
# the importer once and runs each case in a forked child of one Python
# process). Skips (77) without python3.
srcdir=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
exec python3 "$srcdir/tests/test_import_torch.py" "$srcdir" ./tools/gpubuddy-replay
