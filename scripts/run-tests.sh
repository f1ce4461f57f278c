#!/bin/sh
# SPDX-License-Identifier: MIT
# run-tests.sh: everything a fresh machine needs to pass the tests: install
# the packages, build, and run `make check`. Exits non-zero on any failure.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
"$top/scripts/build.sh" "$top/build"
cd "$top/build"
make -j"$(nproc)" check || { cat test-suite.log; exit 1; }
