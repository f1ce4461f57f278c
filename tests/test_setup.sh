#!/bin/sh
# SPDX-License-Identifier: MIT
# test_setup.sh: the set-up and build scripts, with stand-ins for apt.
#   1. scripts/setup.sh waits while apt's lock is held (it failed at once
#      on a fresh cloud machine), gives up on any other apt error with
#      apt's message, and installs prometheus (test_metrics.sh was skipped
#      under the README's test command without it).
#   2. scripts/build-filter.awk shows compiler, libtool, make and linker
#      errors, and not an object named libgpbcore_la-error.lo.
#   3. autogen.sh makes the m4 folder it names (aclocal warned without).
set -u
srcdir=${srcdir:-.}
top=$(cd "$srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-setup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Stand-ins: dpkg knows no package; apt-get says its lock is held
# $LOCKED times, then logs its arguments; sudo just runs the command.
mkdir -p "$tmp/bin"
cat > "$tmp/bin/dpkg" <<'X'
#!/bin/sh
exit 1
X
cat > "$tmp/bin/apt-get" <<'X'
#!/bin/sh
n=$(cat "$STATE" 2>/dev/null || echo 0)
if [ "$n" -lt "$LOCKED" ]; then
  echo $((n + 1)) > "$STATE"
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)" >&2
  exit 100
fi
if [ "$LOCKED" = fail ]; then echo "E: Unable to locate package nosuch" >&2; exit 100; fi
echo "$*" >> "$LOG"
X
printf '#!/bin/sh\nexec "$@"\n' > "$tmp/bin/sudo"
chmod +x "$tmp/bin/"*
run_setup() { # LOCKED
  rm -f "$tmp/state" "$tmp/log"
  PATH="$tmp/bin:$PATH" STATE=$tmp/state LOG=$tmp/log LOCKED=$1 \
    SETUP_LOCK_POLL=0.1 APT_GET=apt-get DPKG=dpkg \
    sh "$top/scripts/setup.sh" > /dev/null 2> "$tmp/err"
}
run_setup 3
rc=$?
[ $rc = 0 ] || fail "lock held 3 times: exit $rc: $(cat "$tmp/err")"
[ "$(grep -c "waiting for apt's lock" "$tmp/err")" = 1 ] || fail "lock: $(cat "$tmp/err")"
grep -q " update" "$tmp/log" 2>/dev/null && grep -q " install .*prometheus" "$tmp/log" ||
  fail "apt-get was not run to update and install prometheus: $(cat "$tmp/log" 2>/dev/null)"
run_setup fail
rc=$?
[ $rc != 0 ] || fail "an apt error other than the lock did not fail"
grep -q "Unable to locate package" "$tmp/err" || fail "apt's message lost: $(cat "$tmp/err")"
grep -q "waiting" "$tmp/err" && fail "another error was waited on"

# 2. The build filter.
printf '%s\n' "  CC       lib/base/libgpbcore_la-error.lo" \
  "  CC       lib/base/libgpbcore_la-util.lo" \
  "lib/x.c:3:1: error: expected ';'" \
  "libtool: error: cannot find the library" \
  "make[2]: *** [Makefile:900: lib/x.lo] Error 1" \
  "/usr/bin/ld: tools/a.o: undefined reference to \`gpb_x'" \
  "checking for error... yes" |
  awk -f "$top/scripts/build-filter.awk" > /dev/null 2> "$tmp/filter"
grep -q "la-error" "$tmp/filter" && fail "build filter shows an object file as an error"
[ "$(grep -c '^build:   lib/base$' "$tmp/filter")" = 1 ] || fail "directory line: $(cat "$tmp/filter")"
for w in "error: expected" "libtool: error" "\*\*\* \[Makefile" "undefined reference"; do
  grep -q "$w" "$tmp/filter" || fail "build filter hides '$w': $(cat "$tmp/filter")"
done

# 3. autogen.sh makes m4/ before autoreconf.
grep -q "mkdir -p m4" "$top/autogen.sh" || fail "autogen.sh does not make m4/"

[ $fails = 0 ] || exit 1
echo "ok: setup waits for apt's lock and installs prometheus; the build filter shows real errors only"
