#!/bin/sh
# SPDX-License-Identifier: MIT
# test_readme.sh: the README's example program builds and runs with the
# README's own commands: the build-tree line (run from the source root, as
# written; a build directory other than build/ is substituted for it), and
# the pkg-config line against a copy installed with `make install
# prefix=DIR`, whose .pc file must name DIR (it named /usr/local once),
# run with no LD_LIBRARY_PATH, as are the installed programs; and the
# installed libgpubuddy-read.so loads alone with dlopen.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The first C block is app.c.
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$top/README.md" > "$tmp/app.c"
grep -q 'int main' "$tmp/app.c" || { echo "FAIL: no C program in README.md"; exit 1; }
# The cc lines, as the README shows them.
tree_line=$(grep '^cc -I include app.c build/' "$top/README.md" | head -1)
pc_line=$(grep '^cc app.c $(pkg-config' "$top/README.md" | head -1)
[ -n "$tree_line" ] || fail "no build-tree cc line in README.md"
[ -n "$pc_line" ] || fail "no pkg-config cc line in README.md"

# A sanitizer build's library needs its runtime first in the program too:
# the build's own CFLAGS go after "cc" (empty in a normal build).
san=$(sed -n 's/^CFLAGS = //p' "$build/Makefile" | grep -o -- '-fsanitize=[^ ]*' | tr '\n' ' ')
cc_san() { printf '%s' "$1" | sed "s|^cc |cc $san|"; }
tree_line=$(cc_san "$tree_line")
pc_line=$(cc_san "$pc_line")

# 1. From the build tree.
if [ -n "$tree_line" ]; then
  line=$tree_line
  [ "$build" = "$top/build" ] ||
    line=$(printf '%s' "$line" | sed "s|\$PWD/build/|$build/|g; s| build/| $build/|g")
  line=$(printf '%s' "$line" | sed "s| app.c | $tmp/app.c |; s|-o app|-o $tmp/app-tree|")
  (cd "$top" && eval "$line") > "$tmp/cc.log" 2>&1 || fail "build-tree line: $(tail -3 "$tmp/cc.log")"
  (cd "$tmp" && ./app-tree) > "$tmp/run.log" 2>&1 ||
    fail "the example from the build tree: $(cat "$tmp/run.log")"
fi

# 2. Installed with a prefix, through pkg-config.
if ! command -v pkg-config >/dev/null 2>&1; then
  echo "no pkg-config: the installed case is skipped"
elif [ -n "$pc_line" ]; then
  ${MAKE:-make} -s -C "$build" install prefix="$tmp/inst" > "$tmp/install.log" 2>&1 ||
    fail "make install prefix=$tmp/inst: $(tail -3 "$tmp/install.log")"
  pc=$(ls "$tmp"/inst/lib*/pkgconfig/gpubuddy.pc 2>/dev/null | head -1)
  if [ -z "$pc" ]; then
    fail "no gpubuddy.pc installed"
  else
    grep -q "^prefix=$tmp/inst\$" "$pc" || fail "gpubuddy.pc does not say prefix=$tmp/inst: $(grep ^prefix "$pc")"
    line=$(printf '%s' "$pc_line" | sed "s| app.c | $tmp/app.c |; s|-o app|-o $tmp/app-inst|")
    (export PKG_CONFIG_PATH="$(dirname "$pc")"; eval "$line") > "$tmp/cc.log" 2>&1 ||
      fail "pkg-config line: $(tail -3 "$tmp/cc.log")"
    # As a user runs it: no search path from the environment.
    env -u LD_LIBRARY_PATH "$tmp/app-inst" > "$tmp/run.log" 2>&1 ||
      fail "the installed example: $(cat "$tmp/run.log")"
  fi
  # 3. The installed programs run as installed, and libgpubuddy-read loads
  #    with dlopen on its own (it needs libgpubuddy, found beside it).
  for prog in gpubuddy-stat gpubuddy-replay gpubuddy-relay; do
    got=$(env -u LD_LIBRARY_PATH "$tmp/inst/bin/$prog" --version 2>&1)
    case $got in "$prog "[0-9]*) ;; *) fail "installed $prog --version: $got" ;; esac
  done
  rd=$(ls "$tmp"/inst/lib*/libgpubuddy-read.so 2>/dev/null | head -1)
  cat > "$tmp/dl.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!h || !dlsym(h, "gpb_trace_open") || !dlsym(h, "gpb_model_reset")) {
    printf("%s\n", dlerror());
    return 1;
  }
  return 0;
}
EOF
  if ! cc $san "$tmp/dl.c" -o "$tmp/dl" -ldl > "$tmp/cc.log" 2>&1; then
    fail "the dlopen program: $(tail -3 "$tmp/cc.log")"
  elif [ -z "$rd" ]; then
    fail "no libgpubuddy-read.so installed"
  else
    env -u LD_LIBRARY_PATH "$tmp/dl" "$rd" > "$tmp/run.log" 2>&1 ||
      fail "dlopen $rd alone: $(cat "$tmp/run.log")"
  fi
fi
[ $fails = 0 ] && echo "README example: built and ran both ways"
exit $fails
