#!/bin/sh
# SPDX-License-Identifier: MIT
# test_relay_fuzz.sh: builds tests/fuzz/fuzz_frame.c with clang's libFuzzer
# (plus ASan and UBSan) straight from the library sources and runs it for a
# bounded time. For CI, not for `make check`:
#
#   tests/test_relay_fuzz.sh [SECONDS] [WORKDIR]     (default 60, a temp dir)
#
# Exits 0 when the time ran out with no finding, 77 when clang or libFuzzer
# is missing, and libFuzzer's status (the crash input is kept in WORKDIR)
# otherwise. A seed corpus of valid relay streams comes from the codec
# itself (fuzz_frame -seed), so the fuzzer starts from deep inside.
set -eu
secs=${1:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/gpb-fuzz-frame.XXXXXX")}
CC=${CLANG:-clang}
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no $CC"; exit 77; }
mkdir -p "$work/corpus"
# Every library source except the CUDA backends' device code (plain C only).
srcs=$(ls "$here"/lib/*/*.c)
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$here/include -I$here/lib -DGPB_BUILDING_LIBRARY -D_GNU_SOURCE"
if ! $CC $flags -o "$work/fuzz_frame" "$here/tests/fuzz/fuzz_frame.c" $srcs -lz -lpthread -lm 2>"$work/build.log"; then
  if grep -q "fuzzer" "$work/build.log" && ! echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){return 0;}' | $CC -fsanitize=fuzzer -x c - -o "$work/probe" 2>/dev/null; then
    echo "SKIP: $CC has no libFuzzer"; exit 77
  fi
  cat "$work/build.log"; exit 1
fi
# Seeds: valid streams written by the relay's own encoder.
GPB_FUZZ_SEEDS="$work/corpus" "$work/fuzz_frame" -runs=0 >/dev/null 2>&1 || true
echo "fuzzing the relay frame parser for ${secs}s in $work"
cd "$work"
exec ./fuzz_frame -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 corpus
