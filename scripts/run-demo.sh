#!/bin/sh
# SPDX-License-Identifier: MIT
# run-demo.sh: everything a fresh machine needs for the demo: install the
# packages, build, then run a sample workload with the live viewer (a
# window where there is a display, PNG frames otherwise). Uses the GPU
# where one is usable, the host backend otherwise.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
"$top/scripts/build.sh" "$top/build"
exec "$top/scripts/demo.sh" "$top/build" "$@"
