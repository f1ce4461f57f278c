#!/bin/sh
# SPDX-License-Identifier: MIT
# build.sh [BUILDDIR] [configure args...]: generates configure if needed and
# builds out of tree (default build/). CUDA is used when /usr/local/cuda
# has it; the viewer when SDL2 is found.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
[ $# -gt 0 ] && shift
cd "$top"
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$top/configure" -q "$@"
# Progress instead of a long silent make: one line per directory built.
echo "build: building in $build (about a minute on 2 cores)..." >&2
{ make -j"$(nproc)" 2>&1; echo "$?" > .make-status; } |
  awk -f "$top/scripts/build-filter.awk"
st=$(cat .make-status); rm -f .make-status
[ "$st" = 0 ] || { echo "build: make failed (exit $st)" >&2; exit 1; }
echo "build: built in $build" >&2
