#!/bin/sh
# SPDX-License-Identifier: MIT
# test_conventions.sh: every program follows docs/DESIGN.md's "Programs"
# convention: --help starts "Usage: PROG", --version prints "PROG ...",
# both exit 0; a usage error is one line on stderr that names the program
# and ends in "(try 'PROG --help')", and exit 2: an unknown option is
# exactly "PROG: unknown option 'OPT' (try 'PROG --help')", a missing
# value "PROG: option 'OPT' needs a value (try 'PROG --help')", and a
# refused value names the option and the value; a pool nobody publishes
# exits 1 in gpubuddy-stat, gpubuddy-view and gpubuddy-relay. (They
# reported an unknown option four ways, "usage:" and "Usage:" were mixed,
# and a missing pool exited 2 in stat, 1 elsewhere.)
set -u
here=$(pwd)
srcdir=${srcdir:-.}
top=$(cd "$srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-conv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0 checked=0
fail() { # PROG WHAT
  echo "FAIL: $1: $2"
  fails=$((fails + 1))
}

# Each program's option that takes a value, and a value it refuses;
# "-" for no option whose value is required. A new program gets a line.
value_opt() { # PROG: prints "OPT BAD"
  case $1 in
    gpubuddy-replay | gpubuddy-export-torch) echo "--pool-size x" ;;
    gpubuddy-stat) echo "- 0" ;; # --watch [SECONDS]: the value is optional
    gpubuddy-relay) echo "--max-clients 0" ;;
    gpubuddy-view) echo "--scale x" ;;
    gpubuddy-bench) echo "--pairs 0" ;;
    gpubuddy-sample-*) echo "--steps x" ;;
    gpubuddy-import-torch) echo "--max-input x" ;;
    *) echo "" ;;
  esac
}

# A usage error: exit 2 and one line "PROG: ... (try 'PROG --help')".
usage_err() { # PROG WHAT COMMAND...
  p=$1 what=$2; shift 2
  "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null; rc=$?
  [ $rc = 2 ] || fail "$p" "$what exited $rc, not 2"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$p" "$what: not one line: $(head -c 300 "$tmp/err")"
  case $(cat "$tmp/err") in
    "$p: "*" (try '$p --help')") ;;
    *) fail "$p" "$what said '$(head -c 200 "$tmp/err")'" ;;
  esac
}

check_values() { # PROG COMMAND...: a missing and a refused value
  p=$1; shift
  set -- "$@" # the command
  ob=$(value_opt "$p")
  [ -n "$ob" ] || { fail "$p" "no option listed in value_opt"; return; }
  opt=${ob% *} bad=${ob#* }
  if [ "$opt" = - ]; then # stat: --watch's optional SECONDS
    opt=--watch
  else
    usage_err "$p" "a missing value" "$@" "$opt"
    want="$p: option '$opt' needs a value (try '$p --help')"
    [ "$(cat "$tmp/err")" = "$want" ] ||
      fail "$p" "a missing value said '$(head -c 200 "$tmp/err")', not '$want'"
  fi
  usage_err "$p" "a refused value" "$@" "$opt" "$bad"
  grep -q -e "$opt" "$tmp/err" && grep -q -e "'$bad'" "$tmp/err" ||
    fail "$p" "a refused value does not name $opt and '$bad': $(head -c 200 "$tmp/err")"
}

check() { # PROG COMMAND...: the option checks
  p=$1; shift
  "$@" --help > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc = 0 ] || fail "$p" "--help exited $rc"
  head -n 1 "$tmp/out" | grep -q "^Usage: $p" ||
    fail "$p" "--help starts '$(head -n 1 "$tmp/out" | cut -c1-60)', not 'Usage: $p'"
  "$@" --version > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc = 0 ] && grep -q "^$p " "$tmp/out" ||
    fail "$p" "--version: exit $rc, '$(head -n 1 "$tmp/out")'"
  usage_err "$p" "an unknown option" "$@" --no-such-option
  want="$p: unknown option '--no-such-option' (try '$p --help')"
  [ "$(cat "$tmp/err")" = "$want" ] ||
    fail "$p" "an unknown option said '$(head -c 200 "$tmp/err")'"
  check_values "$p" "$@"
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
echo "ok: $checked programs checked"
