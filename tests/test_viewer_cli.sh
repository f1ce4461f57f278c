#!/bin/sh
# SPDX-License-Identifier: MIT
# test_viewer_cli.sh: gpubuddy-view's command line with no display: help,
# bad options, a headless PNG, headless frames, and clean failures for a
# missing trace and a missing live pool. Run from the build directory.
set -u
view=./gpubuddy-view
[ -x "$view" ] || { echo "SKIP: $view not built"; exit 77; }
tmp=$(mktemp -d /tmp/test_viewer_cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export SDL_VIDEODRIVER=dummy

$view --help >"$tmp/help" || fail "--help exits nonzero"
grep -q -- "--headless" "$tmp/help" || fail "--help does not mention --headless"
grep -q "SAVE A PNG" "$tmp/help" || fail "--help has no keys guide"

$view --no-such-option >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad option does not exit 2"
$view --pattern churn --size 5x5 --headless --png "$tmp/x.png" >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad --size does not exit 2"

$view --pattern checker --steps 3000 --pool-size 4M --headless \
  --png "$tmp/a.png" --size 640x400 --at end 2>"$tmp/err" ||
  fail "headless render failed: $(cat "$tmp/err")"
head -c 8 "$tmp/a.png" | od -An -c | grep -q "P   N   G" || fail "not a PNG"

$view --pattern churn --steps 2000 --speed 1000 --headless --frames "$tmp/fr" \
  --count 3 --interval-ms 10 --size 600x300 2>"$tmp/err" ||
  fail "headless frames failed: $(cat "$tmp/err")"
[ -f "$tmp/fr/frame-002.png" ] || fail "no frame-002.png"

$view --trace "$tmp/missing.trace" --headless --png "$tmp/b.png" 2>"$tmp/err"
[ $? -eq 1 ] || fail "a missing trace does not exit 1"
grep -q "missing.trace" "$tmp/err" || fail "no message names the missing trace"

$view no-such-pool-$$ --headless --png "$tmp/c.png" 2>"$tmp/err"
[ $? -eq 1 ] || fail "a missing pool does not exit 1"
[ -s "$tmp/err" ] || fail "no message for a missing pool"
$view --list >/dev/null || fail "--list fails"

# Without --headless: a build with no window (no SDL2 at configure time)
# says so and how to render instead; a window build with SDL's dummy
# driver opens one, so it is only checked for the message when it fails.
if ! grep -q "^#define GPB_HAVE_SDL2_WINDOW 1" ./config.h 2>/dev/null; then
  $view --pattern churn --steps 100 2>"$tmp/err"
  [ $? -eq 1 ] || fail "a build with no window does not exit 1 without --headless"
  grep -q "no window" "$tmp/err" && grep -q -- "--headless" "$tmp/err" ||
    fail "no clear message for a build with no window: $(cat "$tmp/err")"
fi

# Benchmark mode, small: every line it promises, and a trace written by a
# sample replayed from memory and from the file with the same event count.
$view --bench --steps 20000 --bench-frames 3 --size 320x200 >"$tmp/bench" 2>&1 ||
  fail "--bench failed: $(cat "$tmp/bench")"
for w in "source synthetic pattern" "replay fill (ops in memory)" \
         "replay churn at full pool" "frame 320x200" "live   model + map"; do
  grep -q "$w" "$tmp/bench" || fail "--bench printed no '$w': $(cat "$tmp/bench")"
done
printf '# gpubuddy-trace v1\n1 0 alloc 1 1000 0 0\n2 5 alloc 2 300 1 0\n3 9 free 1 0 0 0\n' >"$tmp/t.trace"
$view --bench --trace "$tmp/t.trace" --bench-frames 2 --size 320x200 >"$tmp/bench" 2>&1 ||
  fail "--bench --trace failed: $(cat "$tmp/bench")"
mem=$(grep "whole run (ops in memory)" "$tmp/bench" | awk '{print $8}')
file=$(grep "whole run (from the file)" "$tmp/bench" | awk '{print $8}')
[ -n "$mem" ] && [ "$mem" = "$file" ] ||
  fail "--bench --trace: events from memory '$mem', from the file '$file'"
# A trace is replayed into the pool gpubuddy-replay would pick, not 256 MiB
# (torch-gpt failed 881 of its 1902 requests there), and --headless --json
# gives the rendered frame's figures for a script to check.
top=$(cd "$(dirname "$0")/.." && pwd)
$view --trace "$top/samples/traces/torch-gpt.trace.gz" --headless --png "$tmp/g.png" \
  --at end --json > "$tmp/j.json" 2>/dev/null || fail "--headless --json exited $?"
python3 - "$tmp/j.json" <<'PY' || fail "--json: $(cat "$tmp/j.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["failed_allocs"] == 0, j
assert j["ops"] == j["total_ops"] == 3801, j
assert j["pool_size"] == 4294967296, j  # next power of two >= 2 x 1.33 GiB
for k in ("bytes_used", "largest_free", "stats"):
    assert k in j, k
PY
# Values that used to be accepted and ignored now fail, exit 2.
for bad in "--at -5" "--at 1e3" "--find 0xzz" "--count 0"; do
  $view --pattern checkerboard --headless --frames "$tmp/fr" $bad > /dev/null 2> "$tmp/err"
  rc=$?
  [ $rc = 2 ] || fail "'$bad' exited $rc, expected 2"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "'$bad': not one line: $(cat "$tmp/err")"
done
echo "test_viewer_cli: ok"
