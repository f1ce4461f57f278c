# SPDX-License-Identifier: MIT
# build-filter.awk: what scripts/build.sh shows of make's output: one line
# per directory compiled, and every diagnostic that makes a build fail
# (a compiler's or libtool's "error:", make's "***", a linker's undefined
# reference), in full. Object names such as libgpbcore_la-error.lo are
# neither.
/^  (CC|CCLD)/ { d = $2; sub("/[^/]*$", "", d)
                 if (d != last) { printf "build:   %s\n", d > "/dev/stderr"; last = d }
                 next }
/(^|[: ])(fatal )?error:|\*\*\*|undefined reference/ { print > "/dev/stderr" }
