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
make -j"$(nproc)" >/dev/null
echo "build: built in $build" >&2
