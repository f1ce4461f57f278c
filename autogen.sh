#!/bin/sh
# SPDX-License-Identifier: MIT
# Generates configure and Makefile.in from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
# configure.ac names m4/ for libtool's macros; a fresh checkout has none
# yet, and aclocal warns about the missing folder.
mkdir -p m4
autoreconf -fi
