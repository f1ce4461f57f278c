#!/bin/sh
# SPDX-License-Identifier: MIT
# test_lean.sh: an allocating program links only what it needs. The
# shared libgpubuddy exports no reader, links one compressor (not zlib and
# libdeflate both), and leaks no internal symbol beyond the GPB__SHARED
# ones libgpubuddy-read calls; the samples do not link libgpubuddy-read.
set -u
lib=.libs/libgpubuddy.so
[ -f "$lib" ] || { echo "SKIP: no shared libgpubuddy (static build)"; exit 77; }
command -v readelf >/dev/null && command -v nm >/dev/null ||
  { echo "SKIP: readelf or nm missing"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

exports=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }')
readers=$(printf '%s\n' "$exports" | grep -E '^gpb_(attach_|trace_(open|next|close|error|warning|format_name)$)')
[ -z "$readers" ] || fail "libgpubuddy exports readers: $(echo $readers)"
internal=$(printf '%s\n' "$exports" | grep '^gpb__' | sort | tr '\n' ' ')
want="gpb__fail gpb__guard_add gpb__guard_cut gpb__guard_remove gpb__model_set_counters gpb__shm_alive gpb__shm_check_header gpb__shm_check_name gpb__shm_map gpb__shm_path "
[ "$internal" = "$want" ] || fail "internal exports are '$internal', want '$want'"

needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
z=$(printf '%s\n' "$needed" | grep -c '^libz\.')
d=$(printf '%s\n' "$needed" | grep -c '^libdeflate\.')
[ $((z + d)) -eq 1 ] || fail "libgpubuddy needs $(echo $needed): want exactly one compressor"

rd=.libs/libgpubuddy-read.so
[ -f "$rd" ] || fail "no $rd"
nm -D --defined-only "$rd" | grep -q ' T gpb_attach_open$' || fail "$rd lacks gpb_attach_open"
# What it leaves to libgpubuddy must be there, exported.
missing=$(nm -D --undefined-only "$rd" | awk '{ print $2 }' | grep '^gpb' |
  while read -r sym; do printf '%s\n' "$exports" | grep -qx "$sym" || echo "$sym"; done)
[ -z "$missing" ] || fail "$rd needs what libgpubuddy does not export: $(echo $missing)"

for s in samples/.libs/gpubuddy-sample-churn samples/gpubuddy-sample-churn; do
  [ -f "$s" ] || continue
  readelf -d "$s" 2>/dev/null | grep -q 'libgpubuddy-read' && fail "$s links libgpubuddy-read"
  break
done
echo "libgpubuddy: $(echo $needed); readers only in libgpubuddy-read"
