#!/bin/sh
# SPDX-License-Identifier: MIT
# run-fuzzers.sh: builds the libFuzzer targets in a temporary directory and
# runs each for a bounded time. Exits non-zero on a crash, a sanitizer
# report or a build failure.
#
#   tests/run-fuzzers.sh [SECONDS]     (default 20 per target)
#
# Needs clang with libFuzzer and zlib headers. CC overrides the compiler.
# A crash leaves its input in the temporary directory, which is then kept
# and named. Seeds come from tests/data (a trace, an RMM log, a blocked
# .gz trace) and a few inputs made here (a gzipped trace, a bad header).
set -eu

secs=${1:-20}
case $secs in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cc=${CC:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "$0: $cc not found (needs clang with libFuzzer)" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-fuzz.XXXXXX")
keep=0
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$tmp"; fi; }
trap cleanup EXIT

flags="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# .gz traces go through libdeflate where the build would use it.
zdef= zlib=-lz
if pkg-config --exists libdeflate 2>/dev/null; then
  zdef="-DGPB_HAVE_LIBDEFLATE $(pkg-config --cflags libdeflate)"
  zlib="-lz $(pkg-config --libs libdeflate)"
fi
echo "building fuzz_trace in $tmp"
"$cc" $flags $zdef -I"$top/include" -I"$top/lib" \
  "$top/tests/fuzz/fuzz_trace.c" "$top/lib/trace/read.c" "$top/lib/trace/zin.c" \
  "$top/lib/trace/sitetab.c" \
  "$top/lib/base/error.c" $zlib -o "$tmp/fuzz_trace"

echo "building fuzz_plan in $tmp"
"$cc" $flags -I"$top/include" -I"$top/lib" \
  "$top/tests/fuzz/fuzz_plan.c" "$top/lib/plan/file.c" "$top/lib/base/error.c" \
  -o "$tmp/fuzz_plan"

# Seed corpus.
echo "building fuzz_shm in $tmp"
"$cc" $flags $zdef -I"$top/include" -I"$top/lib" -DGPB_BUILDING_LIBRARY \
  "$top/tests/fuzz/fuzz_shm.c" $(ls "$top"/lib/*/*.c) $zlib -lpthread -lm \
  -o "$tmp/fuzz_shm"
mkdir -p "$tmp/corpus-shm"
(cd "$tmp" && GPB_FUZZ_SEEDS="$tmp/corpus-shm" ./fuzz_shm -runs=0 > /dev/null 2>&1) || true

# The call-site tables, from traces and from live segments; its seeds (a
# trace with sites, a real segment's site table) come from the target.
echo "building fuzz_sites in $tmp"
"$cc" $flags $zdef -I"$top/include" -I"$top/lib" -DGPB_BUILDING_LIBRARY \
  "$top/tests/fuzz/fuzz_sites.c" $(ls "$top"/lib/*/*.c) $zlib -lpthread -lm \
  -o "$tmp/fuzz_sites"
mkdir -p "$tmp/corpus-sites"
(cd "$tmp" && GPB_FUZZ_SEEDS="$tmp/corpus-sites" ./fuzz_sites -runs=0 > /dev/null 2>&1) || true

# gpubuddy-relay's /metrics request reader, alone.
echo "building fuzz_http in $tmp"
"$cc" $flags -I"$top/tools/relay" "$top/tests/fuzz/fuzz_http.c" \
  "$top/tools/relay/http.c" -o "$tmp/fuzz_http"
mkdir -p "$tmp/corpus-http"
printf '\000GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' > "$tmp/corpus-http/get"
printf '\002GET /metrics?a=1 HTTP/1.0\r\nAuthorization: Bearer s3cret\r\n\r\n' \
  > "$tmp/corpus-http/token"
printf '\001POST /metrics HTTP/1.1\r\n' > "$tmp/corpus-http/post"

mkdir -p "$tmp/corpus"
cp "$top/tests/data/rmm_small.csv" "$tmp/corpus/rmm.csv"
head -n 40 "$top/tests/data/torch_snapshot.expected" > "$tmp/corpus/native.trace"
gzip -c "$tmp/corpus/native.trace" > "$tmp/corpus/native.trace.gz"
cp "$top/tests/data/churn_small.trace.gz" "$tmp/corpus/blocked.trace.gz"
printf '# gpubuddy-trace v1\n1 0 fail 0 4096 0 0x7\n2 5 free 0x10 0 0 0\n' \
  > "$tmp/corpus/fail.trace"
printf '# gpubuddy-trace v2\n' > "$tmp/corpus/v2.trace"
mkdir -p "$tmp/corpus-plan"
printf 'gpubuddy-plan 1\n# c\n512 0\n1024 512\nrepeat 1\n512 4096\n' \
  > "$tmp/corpus-plan/periodic.plan"
printf 'gpubuddy-plan 1\r\n\r\n18446744073709551614 1\r\n' > "$tmp/corpus-plan/crlf.plan"

status=0
for t in fuzz_trace fuzz_plan fuzz_shm fuzz_sites fuzz_http; do
  echo "running $t for ${secs}s"
  corpus=corpus/
  extra=
  case $t in
    fuzz_plan) corpus=corpus-plan/ ;;
    fuzz_shm) corpus=corpus-shm/ extra=-max_len=16384 ;;
    fuzz_sites) corpus=corpus-sites/ extra=-max_len=16384 ;;
    fuzz_http) corpus=corpus-http/ extra=-max_len=9000 ;;
  esac
  if ! (cd "$tmp" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "./$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 $extra \
        -print_final_stats=1 $corpus > "$t.log" 2>&1); then
    echo "$t: FAILED; its log and crash input are kept in $tmp" >&2
    tail -n 40 "$tmp/$t.log" >&2
    keep=1
    status=1
  else
    grep -E '^stat::number_of_executed_units|^Done' "$tmp/$t.log" || true
  fi
done
# The importer (Python): mutated snapshots, one-line errors only.
if command -v python3 >/dev/null 2>&1; then
  echo "running fuzz_import_torch for ${secs}s"
  GPB_FUZZ_OUT="$tmp/import-findings" python3 "$top/tests/fuzz/fuzz_import_torch.py" "$secs" ||
    { echo "fuzz_import_torch: FAILED; inputs kept in $tmp/import-findings" >&2; keep=1; status=1; }
fi
exit $status
