#!/bin/sh
# SPDX-License-Identifier: MIT
# run-fuzzers.sh: the one fuzz runner. Builds the libFuzzer targets with
# clang, ASan and UBSan in a temporary directory (the library compiled
# once, every target linked against it) and runs each for a bounded time,
# then the importer's Python fuzzer. Exits non-zero on a crash, a
# sanitizer report or a build failure, and 77 when clang has no libFuzzer.
#
#   tests/run-fuzzers.sh [SECONDS [TARGET...]]   (default 20 s per target)
#
# TARGETs: fuzz_trace (the trace readers: native, gzip, RMM CSV), fuzz_plan
# (the plan file parser), fuzz_shm (a live segment through the
# shared-memory reader), fuzz_frame (relay frames through the TCP reader),
# fuzz_import_torch (Python); default all.
# CC overrides the compiler; JOBS the parallel compiles (default: cores).
# A crash keeps the temporary directory, with its input, and names it.
# Seeds: tests/data (a trace, an RMM log, a blocked .gz trace), a few
# inputs made here, and valid segments and streams the targets write
# themselves (GPB_FUZZ_SEEDS).
set -eu

secs=${1:-20}
case $secs in ''|*[!0-9]*) echo "usage: $0 [SECONDS [TARGET...]]" >&2; exit 2 ;; esac
[ $# -gt 0 ] && shift
targets=${*:-fuzz_trace fuzz_plan fuzz_shm fuzz_frame fuzz_sites fuzz_http fuzz_import_torch}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cc=${CC:-clang}
command -v "$cc" >/dev/null 2>&1 || { echo "SKIP: $cc not found (needs clang with libFuzzer)"; exit 77; }
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-fuzz.XXXXXX")
keep=0
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$tmp"; fi; }
trap cleanup EXIT

if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
     "$cc" -fsanitize=fuzzer -x c - -o "$tmp/probe" 2>/dev/null; then
  echo "SKIP: $cc has no libFuzzer"; exit 77
fi

san="-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
# .gz traces go through libdeflate where the build would use it.
zdef= zlib=-lz
if pkg-config --exists libdeflate 2>/dev/null; then
  zdef="-DGPB_HAVE_LIBDEFLATE $(pkg-config --cflags libdeflate)"
  zlib="-lz $(pkg-config --libs libdeflate)"
fi
cflags="$san -fsanitize=fuzzer-no-link $zdef -I$top/include -I$top/lib -DGPB_BUILDING_LIBRARY"

# The library once, with coverage: every plain C source of lib/.
echo "building the library for the fuzzers in $tmp ($jobs jobs)"
mkdir -p "$tmp/obj"
ls "$top"/lib/*/*.c | xargs -P "$jobs" -I{} sh -c \
  'o="$2/obj/$(echo "$1" | sed "s|.*/lib/||; s|/|_|g; s|\.c$|.o|")"; '"$cc"' '"$cflags"' -c "$1" -o "$o"' \
  sh {} "$tmp" || { echo "building the library failed" >&2; keep=1; exit 1; }
ar rcs "$tmp/libfuzz.a" "$tmp"/obj/*.o

status=0
build() { # target
  "$cc" $cflags -fsanitize=fuzzer "$top/tests/fuzz/$1.c" "$tmp/libfuzz.a" \
    $zlib -lpthread -lm -o "$tmp/$1" 2> "$tmp/$1.build.log" ||
    { echo "$1: build FAILED" >&2; cat "$tmp/$1.build.log" >&2; keep=1; status=1; return 1; }
}

# Seeds.
mkdir -p "$tmp/corpus-trace" "$tmp/corpus-plan" "$tmp/corpus-shm" "$tmp/corpus-frame" \
  "$tmp/corpus-sites" "$tmp/corpus-http"
# The /metrics request reader's: a first byte that says how the bytes
# arrive (fuzz_http.c), then a request.
printf '\000GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' > "$tmp/corpus-http/get"
printf '\002GET /metrics?a=1 HTTP/1.0\r\nAuthorization: Bearer s3cret\r\n\r\n' \
  > "$tmp/corpus-http/token"
printf '\001POST /metrics HTTP/1.1\r\n' > "$tmp/corpus-http/post"
cp "$top/tests/data/rmm_small.csv" "$tmp/corpus-trace/rmm.csv"
head -n 40 "$top/tests/data/torch_snapshot.expected" > "$tmp/corpus-trace/native.trace"
gzip -c "$tmp/corpus-trace/native.trace" > "$tmp/corpus-trace/native.trace.gz"
cp "$top/tests/data/churn_small.trace.gz" "$tmp/corpus-trace/blocked.trace.gz"
printf '# gpubuddy-trace v1\n1 0 fail 0 4096 0 0x7\n2 5 free 0x10 0 0 0\n' \
  > "$tmp/corpus-trace/fail.trace"
printf '# gpubuddy-trace v2\n' > "$tmp/corpus-trace/v2.trace"
printf 'gpubuddy-plan 1\n# c\n512 0\n1024 512\nrepeat 1\n512 4096\n' \
  > "$tmp/corpus-plan/periodic.plan"
printf 'gpubuddy-plan 1\r\n\r\n18446744073709551614 1\r\n' > "$tmp/corpus-plan/crlf.plan"

run() { # target corpus [libFuzzer options]
  t=$1 corpus=$2
  shift 2
  echo "running $t for ${secs}s"
  if ! (cd "$tmp" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "./$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        "$@" -print_final_stats=1 "$corpus/" > "$t.log" 2>&1); then
    echo "$t: FAILED; its log and crash input are kept in $tmp" >&2
    tail -n 40 "$tmp/$t.log" >&2
    keep=1
    status=1
  else
    grep -E '^stat::number_of_executed_units|^Done' "$tmp/$t.log" || true
  fi
}

for t in $targets; do
  case $t in
    fuzz_trace) build $t && run $t corpus-trace ;;
    fuzz_plan) build $t && run $t corpus-plan ;;
    fuzz_shm|fuzz_frame|fuzz_sites)
      build $t || continue
      # Valid segments / streams / site tables from the target itself.
      (cd "$tmp" && GPB_FUZZ_SEEDS="$tmp/corpus-${t#fuzz_}" "./$t" -runs=0 > /dev/null 2>&1) || true
      case $t in
        fuzz_frame) run $t corpus-frame -max_len=65536 ;;
        *) run $t "corpus-${t#fuzz_}" -max_len=16384 ;;
      esac ;;
    fuzz_http) # the relay's request reader, which is not in the library
      "$cc" $cflags -fsanitize=fuzzer -I"$top/tools/relay" "$top/tests/fuzz/$t.c" \
        "$top/tools/relay/http.c" -o "$tmp/$t" 2> "$tmp/$t.build.log" ||
        { echo "$t: build FAILED" >&2; cat "$tmp/$t.build.log" >&2; keep=1; status=1; continue; }
      run $t corpus-http -max_len=9000 ;;
    fuzz_import_torch)
      command -v python3 >/dev/null 2>&1 || { echo "fuzz_import_torch: no python3, skipped"; continue; }
      echo "running fuzz_import_torch for ${secs}s"
      GPB_FUZZ_OUT="$tmp/import-findings" python3 "$top/tests/fuzz/fuzz_import_torch.py" "$secs" ||
        { echo "fuzz_import_torch: FAILED; inputs kept in $tmp/import-findings" >&2; keep=1; status=1; } ;;
    *) echo "$0: unknown target $t" >&2; exit 2 ;;
  esac
done
exit $status
