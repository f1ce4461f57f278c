#!/bin/sh
# SPDX-License-Identifier: MIT
# setup.sh: installs the Debian packages gpubuddy needs to build, test and
# run the viewer, and Prometheus (tests/test_metrics.sh scrapes the relay
# with a real one). Safe to run again. Needs root (or sudo).
#
# On a fresh cloud machine apt is often busy (unattended-upgrades, cloud
# init): apt's lock is waited for (120 tries, 10 minutes), not failed on.
# APT_GET and DPKG name other commands, SETUP_LOCK_POLL the seconds
# between tries (tests/test_setup.sh uses stand-ins and 0.1).
set -e
PKGS="autoconf automake libtool pkg-config make gcc clang python3 \
  zlib1g-dev libdeflate-dev libsdl2-dev xvfb xdotool help2man python3-pip \
  prometheus"
APT_GET=${APT_GET:-apt-get}
DPKG=${DPKG:-dpkg}
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

# apt_run ARGS...: apt-get, again every 5 s while another process holds
# apt's or dpkg's lock (apt's own wait, DPkg::Lock::Timeout, covers only
# dpkg's lock, and only from apt 1.9.11).
apt_run() {
  poll=${SETUP_LOCK_POLL:-5}
  tries=0
  while :; do
    if $SUDO env DEBIAN_FRONTEND=noninteractive "$APT_GET" \
         -o DPkg::Lock::Timeout=60 "$@" 2> "${TMPDIR:-/tmp}/setup-apt.$$"; then
      rm -f "${TMPDIR:-/tmp}/setup-apt.$$"
      return 0
    fi
    if ! grep -qiE 'could not get lock|unable to acquire|lock.*held|is another process using it' \
         "${TMPDIR:-/tmp}/setup-apt.$$" || [ $tries -ge 120 ]; then
      cat "${TMPDIR:-/tmp}/setup-apt.$$" >&2
      rm -f "${TMPDIR:-/tmp}/setup-apt.$$"
      return 1
    fi
    [ $tries = 0 ] && echo "setup: waiting for apt's lock (another apt, or unattended-upgrades, holds it)" >&2
    sleep "$poll"
    tries=$((tries + 1))
  done
}

missing=
for p in $PKGS; do
  "$DPKG" -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing" >&2
  apt_run update -qq
  apt_run install -y -qq $missing >/dev/null
fi
echo "setup: build dependencies present" >&2
