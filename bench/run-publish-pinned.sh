#!/bin/sh
# SPDX-License-Identifier: MIT
# run-publish-pinned.sh TARBALL: builds bench/publish_overhead from a
# `make dist` tarball and runs it with the reader left to the scheduler
# (host and virtual backends),
# on the writer's SMT sibling, and on another physical core, to tell what
# a reader costs the writer from what sharing a core costs it. Prints the
# CPU topology first. About 2 minutes on 16 cores.
set -eu
tarball=$1
work=${TMPDIR:-/tmp}/gpb-pinned
rm -rf "$work" && mkdir -p "$work" && cd "$work"
tar xzf "$tarball"
cd gpubuddy-*/
./configure -q --without-cuda >/dev/null
make -j"$(nproc)" bench/publish_overhead >/dev/null
lscpu | grep -E 'Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)'
sib=$(cut -d, -f2 /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null | cut -d- -f2)
echo "cpu0 siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)"
other=$(( $(nproc) / 2 ))
[ "$other" = "${sib:-x}" ] && other=$((other + 1))
for pin in none "0,${sib:-1}" "0,$other"; do
  echo "== reader: $pin (writer,reader CPUs)"
  if [ "$pin" = none ]; then
    ./bench/publish_overhead --steps 2000000 --backend both
  else
    ./bench/publish_overhead --steps 2000000 --backend host --pin "$pin"
  fi
done
