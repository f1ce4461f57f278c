#!/bin/sh
# SPDX-License-Identifier: MIT
# test_conventions.sh: every program follows docs/DESIGN.md's "Programs"
# convention: --help starts "Usage: PROG", --version prints "PROG ...",
# both exit 0; an unknown option is one line "PROG: unknown option 'OPT'
# (try 'PROG --help')" and exit 2; a pool nobody publishes exits 1 in
# gpubuddy-stat, gpubuddy-view and gpubuddy-relay. (They reported an
# unknown option four ways, "usage:" and "Usage:" were mixed, and a
# missing pool exited 2 in stat, 1 elsewhere.)
#
# PENDING names programs whose owners have not adopted the convention yet:
# their differences are printed as notes, not failures. Empty it as they
# do; the goal is no name left.
set -u
here=$(pwd)
srcdir=${srcdir:-.}
top=$(cd "$srcdir" && pwd)
PENDING=${GPB_CONVENTION_PENDING-"gpubuddy-replay gpubuddy-export-torch gpubuddy-view gpubuddy-bench"}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-conv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0 notes=0 checked=0
fail() { # PROG WHAT
  case " $PENDING " in
    *" $1 "*) echo "note (pending): $1: $2"; notes=$((notes + 1)) ;;
    *) echo "FAIL: $1: $2"; fails=$((fails + 1)) ;;
  esac
}

check() { # PROG COMMAND...: the three option checks
  p=$1; shift
  "$@" --help > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc = 0 ] || fail "$p" "--help exited $rc"
  head -n 1 "$tmp/out" | grep -q "^Usage: $p" ||
    fail "$p" "--help starts '$(head -n 1 "$tmp/out" | cut -c1-60)', not 'Usage: $p'"
  "$@" --version > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc = 0 ] && grep -q "^$p " "$tmp/out" ||
    fail "$p" "--version: exit $rc, '$(head -n 1 "$tmp/out")'"
  "$@" --no-such-option > "$tmp/out" 2> "$tmp/err" < /dev/null; rc=$?
  want="$p: unknown option '--no-such-option' (try '$p --help')"
  [ $rc = 2 ] || fail "$p" "an unknown option exited $rc, not 2"
  [ "$(cat "$tmp/err")" = "$want" ] ||
    fail "$p" "an unknown option said '$(head -c 200 "$tmp/err")'"
  checked=$((checked + 1))
}

for f in "$here"/tools/gpubuddy-*; do # every tool built, new ones too
  [ -f "$f" ] && [ -x "$f" ] && check "$(basename "$f")" "$f"
done
[ -x "$here/gpubuddy-view" ] && check gpubuddy-view "$here/gpubuddy-view"
[ -x "$here/bench/gpubuddy-bench" ] && check gpubuddy-bench "$here/bench/gpubuddy-bench"
for s in "$here"/samples/gpubuddy-sample-*; do
  [ -x "$s" ] && check "$(basename "$s")" "$s"
done
if command -v python3 > /dev/null; then
  check gpubuddy-import-torch python3 "$top/tools/gpubuddy-import-torch"
fi
[ $checked -ge 5 ] || { echo "SKIP: programs not built"; exit 77; }

# A pool nobody publishes: an error while running, 1.
name=conv-nosuch-$$
miss() { # PROG COMMAND...
  p=$1; shift
  timeout 20 "$@" > /dev/null 2> "$tmp/err"; rc=$?
  [ $rc = 1 ] || fail "$p" "a missing pool exited $rc, not 1: $(head -c 200 "$tmp/err")"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$p" "a missing pool: not one line: $(cat "$tmp/err")"
}
miss gpubuddy-stat "$here/tools/gpubuddy-stat" "$name"
miss gpubuddy-relay "$here/tools/gpubuddy-relay" "$name" --listen 127.0.0.1:0
[ -x "$here/gpubuddy-view" ] &&
  miss gpubuddy-view "$here/gpubuddy-view" "$name" --headless --png "$tmp/x.png"

[ $fails = 0 ] || exit 1
echo "ok: $checked programs checked; $notes note(s) for programs pending: $PENDING"
