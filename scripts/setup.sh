#!/bin/sh
# SPDX-License-Identifier: MIT
# setup.sh: installs the Debian packages gpubuddy needs to build, test and
# run the viewer. Safe to run again. Needs root (or sudo).
set -e
PKGS="autoconf automake libtool pkg-config make gcc clang python3 \
  zlib1g-dev libdeflate-dev libsdl2-dev xvfb xdotool help2man python3-pip"
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
missing=
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
echo "setup: build dependencies present" >&2
