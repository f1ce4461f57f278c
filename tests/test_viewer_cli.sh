#!/bin/sh
# SPDX-License-Identifier: MIT
# test_viewer_cli.sh: gpubuddy-view's command line with no display: help,
# bad options, a headless PNG, headless frames, clean failures for a
# missing trace and a missing live pool, and the grid of several live
# pools (--all, --connect through gpubuddy-relay --all). Run from the
# build directory.
set -u
view=./gpubuddy-view
[ -x "$view" ] || { echo "SKIP: $view not built"; exit 77; }
tmp=$(mktemp -d /tmp/test_viewer_cli.XXXXXX)
pids=
trap 'kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export SDL_VIDEODRIVER=dummy

$view --help >"$tmp/help" || fail "--help exits nonzero"
grep -q -- "--headless" "$tmp/help" || fail "--help does not mention --headless"
grep -q "save a PNG" "$tmp/help" || fail "--help has no keys guide"
grep -q "UNUSABLE x for S" "$tmp/help" || fail "--help does not say what UNUSABLE is"
# The keys section reads as text, not in capitals ("--ALL", "0X.."): no
# line after "Keys" has more capitals than lowercase letters.
sed -n '/^Keys$/,$p' "$tmp/help" >"$tmp/keys"
[ -s "$tmp/keys" ] || fail "--help has no Keys section"
! grep -q -e "--ALL" -e "0X" "$tmp/keys" || fail "--help keys in capitals"
awk 'NR > 1 { u = gsub(/[A-Z]/, "&"); l = gsub(/[a-z]/, "&");
  if (u > l) { print "line in capitals: " $0; bad = 1 } }
  END { exit bad }' "$tmp/keys" || fail "--help keys section in capitals"
grep -q "state, order, tag, age or site" "$tmp/help" || fail "--help: no --color site"
grep -q "top_sites" "$tmp/help" || fail "--help: --json does not name top_sites"

$view --no-such-option >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad option does not exit 2"
$view --pattern churn --size 5x5 --headless --png "$tmp/x.png" >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad --size does not exit 2"

$view --pattern checker --steps 3000 --pool-size 4M --headless \
  --png "$tmp/a.png" --size 640x400 --at end 2>"$tmp/err" ||
  fail "headless render failed: $(cat "$tmp/err")"
head -c 8 "$tmp/a.png" | od -An -c | grep -q "P   N   G" || fail "not a PNG"

# --tree --color order colors the tree by order (it drew state colors):
# the map (left of the 250-pixel panel, above the status lines) has no
# pixel of the state mode's used blue, which --color state has plenty of.
# png_py FILE [ARGS] < SCRIPT: runs SCRIPT with the PNG (the viewer's:
# 8-bit RGB, filter 0 on every row) decoded: w, h, raw (rows of 3 * w + 1
# bytes, each after its filter byte).
png_load='
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
w, h = struct.unpack(">II", b[16:24])
i, data = 8, b""
while i < len(b):
    n, t = struct.unpack(">I4s", b[i:i + 8])
    if t == b"IDAT":
        data += b[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(data)

'
png_py() { python3 -c "$png_load$(cat)" "$@"; }
# png_count FILE RRGGBB: pixels of that color in the map area.
png_count() {
  png_py "$1" "$2" <<'PY'
want = bytes.fromhex(sys.argv[2])
n = 0
for y in range(h - 100):  # above the timeline and status line
    row = raw[y * (3 * w + 1) + 1:(y + 1) * (3 * w + 1)]
    n += sum(1 for x in range(w - 250) if row[3 * x:3 * x + 3] == want)
print(n)
PY
}
for mode in order state; do
  $view --pattern churn --headless --png "$tmp/tree-$mode.png" --tree \
    --color $mode --size 640x400 2>"$tmp/err" ||
    fail "--tree --color $mode failed: $(cat "$tmp/err")"
done
[ "$(png_count "$tmp/tree-state.png" 3b82f6)" -gt 100 ] ||
  fail "--tree --color state draws no used blocks"
n=$(png_count "$tmp/tree-order.png" 3b82f6)
[ "$n" = 0 ] || fail "--tree --color order: $n pixels in state colors"

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

# A window whose replay is over sleeps until an event and draws only
# when what it shows changes: once here (it drew every frame, 60 a
# second with vsync, then 4 a second). The test hook quits after N ms and
# counts the frames drawn.
if grep -q "^#define GPB_HAVE_SDL2_WINDOW 1" ./config.h 2>/dev/null; then
  GPB_VIEW_TEST_QUIT_MS=1500 $view --pattern churn --steps 100 --speed 0 \
    --size 320x200 2>"$tmp/err" || fail "the window failed: $(cat "$tmp/err")"
  n=$(sed -n 's/^gpubuddy-view: \([0-9]*\) frames in .*/\1/p' "$tmp/err")
  [ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -le 3 ] ||
    fail "a finished replay drew '$n' frames in 1.5 s, expected 1..3: $(cat "$tmp/err")"
  # Playing, it draws every frame: the count is real (more than idle
  # allows, even at 10 fps on a loaded sanitizer build).
  GPB_VIEW_TEST_QUIT_MS=1500 $view --pattern churn --steps 100000 --speed 1000 \
    --size 320x200 2>"$tmp/err" || fail "the window failed: $(cat "$tmp/err")"
  n=$(sed -n 's/^gpubuddy-view: \([0-9]*\) frames in .*/\1/p' "$tmp/err")
  [ -n "$n" ] && [ "$n" -gt 12 ] ||
    fail "a playing replay drew '$n' frames in 1.5 s: $(cat "$tmp/err")"
fi

# --compare A B: two runs in one picture with their figures and B - A
# as JSON; one trace only is a usage error.
data=$(cd "$(dirname "$0")/data" && pwd)
$view --compare "$data/sites_oom.trace" "$data/churn_small.trace.gz" \
  --headless --png "$tmp/cmp.png" --size 1200x700 --json >"$tmp/cmp.json" \
  2>"$tmp/err" || fail "--compare failed: $(cat "$tmp/err")"
head -c 8 "$tmp/cmp.png" | od -An -c | grep -q "P   N   G" || fail "--compare: not a PNG"
python3 - "$tmp/cmp.json" <<'PY' || fail "--compare --json: $(cat "$tmp/cmp.json")"
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["a"], d["b"]
assert a["name"].endswith("sites_oom.trace") and a["ops"] == 8, a["name"]
assert b["name"].endswith("churn_small.trace.gz") and b["ops"] > 8
assert d["diff"]["peak"] == b["peak"] - a["peak"]
assert d["diff"]["failures"] == b["failed_allocs"] - a["failed_allocs"]
PY
$view --compare "$data/sites_oom.trace" --headless --png "$tmp/c1.png" \
  >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "two traces" "$tmp/err" ||
  fail "--compare with one trace: $(cat "$tmp/err")"

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
# At op 2958 in a 2 GiB pool, two free 128 MiB buddies that deferred
# coalescing kept apart are one 256 MiB block to any request: the largest
# free block is 256 MiB (it said 128 MiB).
$view --trace "$top/samples/traces/torch-gpt.trace.gz" --pool-size 2G --headless \
  --png "$tmp/g2.png" --at 2958 --json > "$tmp/j2.json" 2>/dev/null ||
  fail "--pool-size 2G --at 2958 --json exited $?"
python3 - "$tmp/j2.json" <<'PY' || fail "--json at op 2958: $(cat "$tmp/j2.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ops"] == 2958, j
assert j["stats"]["free_blocks"][19] == 3, j  # 128 MiB blocks, two of them buddies
assert j["largest_free"] == 256 << 20, j
PY
# Why blocks are where they are: tests/data/sites_oom.trace has two call
# sites and a failed 512 KiB request (op 6) that found 384 KiB free, 256
# KiB at most in one block. --json explains it and ranks the sites by live bytes;
# --color site and --oom 1 render; --oom 2 asks for a failure not there.
sites="$top/tests/data/sites_oom.trace"
$view --trace "$sites" --pool-size 1M --min-block 4K --headless --json \
  --png "$tmp/s.png" --color site --sites --oom 1 > "$tmp/s.json" 2>"$tmp/err" ||
  fail "--color site --oom 1 exited $?: $(cat "$tmp/err")"
python3 - "$tmp/s.json" <<'PY' || fail "--json with sites: $(cat "$tmp/s.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ops"] == 6, j  # --oom 1 went to the failure
o = j["ooms"]
assert o["count"] == 1 and len(o["explained"]) == 1, o
e = o["explained"][0]
assert (e["op"], e["requested"], e["free"], e["largest"]) == (6, 524288, 393216, 262144), e
t = j["top_sites"]
assert [s["id"] for s in t] == [1, 2], t
assert t[0]["bytes"] == 524288 and "load_weights" in t[0]["frames"], t
PY
$view --trace "$sites" --pool-size 1M --min-block 4K --headless \
  --png "$tmp/s2.png" --oom 2 >/dev/null 2>"$tmp/err" &&
  fail "--oom 2 of a trace with one failure succeeded"
grep -q "has 1 failed allocation" "$tmp/err" || fail "--oom 2: $(cat "$tmp/err")"
# The pool --trace picks is larger than the traced program's: its
# recorded failure does not recur, and --oom 1 says so and what to do
# (it said only "0 failed allocations").
$view --trace "$sites" --headless --png "$tmp/s3.png" --oom 1 \
  >/dev/null 2>"$tmp/err" && fail "--oom 1 with no failure replayed succeeded"
grep -q "the trace recorded 1 in its own pool: give that pool's size with --pool-size" \
  "$tmp/err" || fail "--oom 1, no failure replayed: $(cat "$tmp/err")"
# torch-gpt in a 256 MiB pool: 881 failures, the first ones explained.
$view --trace "$top/samples/traces/torch-gpt.trace.gz" --pool-size 256M \
  --headless --png "$tmp/g3.png" --at end --json > "$tmp/j3.json" 2>/dev/null ||
  fail "--pool-size 256M --json exited $?"
python3 - "$tmp/j3.json" <<'PY' || fail "--json ooms: $(cat "$tmp/j3.json")"
import json, sys
j = json.load(open(sys.argv[1]))
o = j["ooms"]
assert o["count"] == j["failed_allocs"] == 881, o
ex = o["explained"]
assert len(ex) == 4 and [e["op"] for e in ex] == sorted(e["op"] for e in ex), ex
for e in ex:
    assert e["requested"] > e["largest"], e
PY
# Values that used to be accepted and ignored now fail, exit 2.
for bad in "--at -5" "--at 1e3" "--find 0xzz" "--count 0" "--size 640x400x" \
    "--speed nan" "--speed 1e999" "--find 0xffffffffffffffffff" "--find 0x-1" \
    "--pool-size 0" "--min-block 3" "--pool-size 128 --min-block 256"; do
  $view --pattern checkerboard --headless --frames "$tmp/fr" $bad > /dev/null 2> "$tmp/err"
  rc=$?
  [ $rc = 2 ] || fail "'$bad' exited $rc, expected 2"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "'$bad': not one line: $(cat "$tmp/err")"
done
# A damaged trace (bytes overwritten inside a gzip block): one line,
# exit 1, and no PNG of the ops before the fault; one already there stays
# as it was. (A trace merely cut short reads up to the cut, with a
# warning: a killed program's trace.)
cp "$top/samples/traces/torch-infer.trace.gz" "$tmp/trunc.gz"
printf '\377\377\377\377\377\377\377\377' |
  dd of="$tmp/trunc.gz" bs=1 seek=12000 conv=notrunc 2> /dev/null
echo "not overwritten" > "$tmp/old.png"
$view --trace "$tmp/trunc.gz" --headless --png "$tmp/old.png" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc = 1 ] || fail "a damaged trace exited $rc, expected 1"
[ "$(wc -l < "$tmp/err")" = 1 ] && grep -q "trunc.gz" "$tmp/err" ||
  fail "a cut trace: not one line: $(cat "$tmp/err")"
[ "$(cat "$tmp/old.png")" = "not overwritten" ] || fail "a cut trace overwrote the PNG"
$view --trace "$tmp/trunc.gz" --headless --png "$tmp/new.png" > /dev/null 2>&1
[ ! -e "$tmp/new.png" ] || fail "a cut trace wrote a PNG"
# The grid: two live pools of two processes, seen with --all and through
# one gpubuddy-relay --all; other pools of the machine may be there too.
churn=./samples/gpubuddy-sample-churn relay=./tools/gpubuddy-relay
ga=vcli-a-$$ gb=vcli-b-$$
for p in "$ga 8M" "$gb 4M"; do
  set -- $p
  "$churn" --backend virtual --pool-size "$2" --publish "$1" --steps 100000000 \
    --pace-us 300 --quiet > /dev/null 2>&1 &
  pids="$pids $!"
done
i=0
while [ "$($view --list | grep -c "^vcli-[ab]-$$\$")" != 2 ] && [ $i -lt 50 ]; do
  sleep 0.1; i=$((i + 1))
done
# --frames on a pool whose program exits stops there: the frames after it
# all showed DISCONNECTED over the pool the program emptied as it exited.
gx=vcli-x-$$
"$churn" --backend virtual --pool-size 4M --publish "$gx" --steps 1000 \
  --pace-us 1000 --quiet > /dev/null 2>&1 &
xpid=$!
pids="$pids $xpid"
i=0
until $view --list | grep -qx "$gx" || [ $i -ge 50 ]; do sleep 0.02; i=$((i + 1)); done
$view "$gx" --headless --frames "$tmp/fx" --count 40 --interval-ms 100 \
  --size 320x200 2> "$tmp/err" || fail "--frames on $gx exited $?: $(cat "$tmp/err")"
grep -q "program exited" "$tmp/err" || fail "--frames went on past the exit: $(cat "$tmp/err")"
grep -q "(disconnected)" "$tmp/err" && fail "--frames wrote a DISCONNECTED frame: $(cat "$tmp/err")"
[ -f "$tmp/fx/frame-000.png" ] && [ ! -f "$tmp/fx/frame-039.png" ] ||
  fail "--frames: $(ls "$tmp/fx")"
wait $xpid
# grid_check FILE.json [relay]: both pools, with their sizes, in one array.
grid_check() {
  python3 - "$1" "$ga" "$gb" "${2:-}" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list), rows
by = {r["name"]: r for r in rows}
for name, size in ((sys.argv[2], 8 << 20), (sys.argv[3], 4 << 20)):
    r = by[name]
    assert r["pool_size"] == size, r
    assert r["closed"] is False, r
    for k in ("ops", "total_ops", "failed_allocs", "bytes_used", "largest_free", "stats"):
        assert k in r, (k, r)
    if sys.argv[4]:
        assert r["relay"] == sys.argv[4], r
PY
}
$view --all --headless --png "$tmp/grid.png" --size 900x500 --json > "$tmp/all.json" 2> "$tmp/err" ||
  fail "--all --headless exited $?: $(cat "$tmp/err")"
grid_check "$tmp/all.json" || fail "--all --json: $(cat "$tmp/all.json")"
python3 - "$tmp/grid.png" <<'PY' || fail "--all --png is not a 900x500 PNG"
import struct, sys
b = open(sys.argv[1], "rb").read(24)
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", b
assert struct.unpack(">II", b[16:24]) == (900, 500), struct.unpack(">II", b[16:24])
PY

"$relay" --all --listen 127.0.0.1:0 --port-file "$tmp/port" 2> "$tmp/relay.log" &
pids="$pids $!"
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
addr=127.0.0.1:$(cat "$tmp/port")
# The relay finds pools within a second: retry for up to 5 s.
i=0
while [ $i -lt 50 ]; do
  $view --connect "$addr" --headless --png "$tmp/r.png" --json > "$tmp/r.json" 2> "$tmp/err" &&
    grid_check "$tmp/r.json" "$addr" 2> /dev/null && break
  sleep 0.1; i=$((i + 1))
done
grid_check "$tmp/r.json" "$addr" ||
  fail "--connect to a relay with several pools: $(cat "$tmp/r.json" "$tmp/err")"
# A list of addresses, each naming its pool.
$view --connect "$addr/$ga,$addr/$gb" --headless --png "$tmp/r.png" --json > "$tmp/r2.json" 2> "$tmp/err" ||
  fail "--connect A/NAME,B/NAME exited $?: $(cat "$tmp/err")"
grid_check "$tmp/r2.json" "$addr" || fail "--connect A/NAME,B/NAME: $(cat "$tmp/r2.json")"
[ "$(grep -c '"name"' "$tmp/r2.json")" = 2 ] || fail "--connect A/NAME,B/NAME: not two pools"
# One pool named: the single-pool view and its one JSON object, as ever.
$view --connect "$addr/$ga" --headless --png "$tmp/r.png" --json > "$tmp/one.json" 2> /dev/null ||
  fail "--connect A/NAME exited $?"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["pool_size"] == 8 << 20, j' \
  "$tmp/one.json" || fail "--connect A/NAME: $(cat "$tmp/one.json")"
# A relay of the list that refuses at the start (issue 37): shown as not
# answering, in one stderr line and the JSON, beside the other relay's
# pools; it stopped the viewer. None answering: one line each, exit 1. A
# hole in the list: usage, exit 2.
$view --connect "127.0.0.1:1,$addr" --headless --png "$tmp/r.png" --json > "$tmp/r3.json" 2> "$tmp/err"
rc=$?
[ $rc = 0 ] || fail "a refused relay in the list exited $rc, expected 0: $(cat "$tmp/err")"
[ "$(grep -c 'not answering' "$tmp/err")" = 1 ] && grep -q "127.0.0.1:1 not answering" "$tmp/err" ||
  fail "a refused relay in the list: $(cat "$tmp/err")"
grid_check "$tmp/r3.json" "$addr" || fail "the pools beside a refused relay: $(cat "$tmp/r3.json")"
python3 - "$tmp/r3.json" <<'PY' || fail "the refused relay in --json: $(cat "$tmp/r3.json")"
import json, sys
rows = json.load(open(sys.argv[1]))
down = [r for r in rows if r["name"] is None]
assert len(down) == 1 and down[0]["relay"] == "127.0.0.1:1", down
assert down[0]["state"] == "not answering" and down[0]["error"], down
PY
# ... and in the picture (1280x800): a cell of its own (issue 37; it was
# in the status line alone), dim (VC_DOWN, 13171d) with its caption in
# red (VC_ALERT, ef4444) under it, first ("127.0.0.1:1" sorts before the
# other relay's "127.0.0.1:PORT/NAME").
png_py "$tmp/r.png" <<'PY' || fail "the refused relay has no cell in the grid"
def at(x, y):
    o = y * (3 * w + 1) + 1 + 3 * x
    return raw[o:o + 3]
dim, red = bytes.fromhex("13171d"), bytes.fromhex("ef4444")
cell = [(x, y) for y in range(0, h - 40, 2) for x in range(0, w, 2)
        if at(x, y) == dim]
assert len(cell) > 5000, "%d pixels of the cell's colour" % len(cell)
x0, x1 = min(p[0] for p in cell), max(p[0] for p in cell)
y0, y1 = min(p[1] for p in cell), max(p[1] for p in cell)
assert x0 < w // 3 and y0 < h // 3, (x0, y0)  # the first cell
# The caption: up to 5 lines of text under the dim part, in its columns.
n = sum(at(x, y) == red for y in range(y1, min(y1 + 110, h - 40))
        for x in range(x0, x1 + 1))
assert n > 300, "%d red pixels in the caption under %d,%d-%d,%d" % (n, x0, y0, x1, y1)
PY
$view --connect "127.0.0.1:1,127.0.0.1:2" --headless --png "$tmp/r.png" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc = 1 ] || fail "a list of refused relays exited $rc, expected 1"
[ "$(wc -l < "$tmp/err")" = 2 ] && grep -q "127.0.0.1:2" "$tmp/err" ||
  fail "a list of refused relays: $(cat "$tmp/err")"
for bad in "--connect $addr,," "--connect ,$addr" "--all $ga" "--all --find 0x10"; do
  $view $bad --headless --png "$tmp/r.png" > /dev/null 2> "$tmp/err"
  rc=$?
  [ $rc = 2 ] || fail "'$bad' exited $rc, expected 2"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "'$bad': not one line: $(cat "$tmp/err")"
done
grep -q "(try 'gpubuddy-view --help')\$" "$tmp/err" || fail "usage error: $(cat "$tmp/err")"

# A cut trace (issue 36): the viewer says gpb_trace_warning once, as
# gpubuddy-replay does, and shows what came before the cut; a whole
# trace gives no warning. A plain trace cut inside its last line, and a
# .trace.gz cut inside the gzip stream.
srcdir=${srcdir:-.}
replay=./tools/gpubuddy-replay
infer=$srcdir/samples/traces/torch-infer.trace.gz
printf '# gpubuddy-trace v1\n1 0 alloc 0xa 1048576 0 0x0\n2 1 alloc 0xb 2097152 0 0x0\n3 2 free 0xa 0 0 0x0\n4 3 alloc 0xc 10' > "$tmp/cut.trace"
head -c $(($(wc -c < "$infer") / 2)) "$infer" > "$tmp/cut.trace.gz"
for t in "$tmp/cut.trace" "$tmp/cut.trace.gz"; do
  $replay --pool-size 64M "$t" 2> "$tmp/rw" > /dev/null || fail "replay of $t exited $?"
  want=$(sed -n 's/^gpubuddy-replay: warning: //p' "$tmp/rw")
  [ -n "$want" ] || fail "gpubuddy-replay gave no warning for $t: $(cat "$tmp/rw")"
  $view --trace "$t" --headless --png "$tmp/cut.png" --json > "$tmp/cut.json" 2> "$tmp/err" ||
    fail "the viewer on $t exited $?: $(cat "$tmp/err")"
  [ "$(grep -c 'warning' "$tmp/err")" = 1 ] || fail "$t: not one warning: $(cat "$tmp/err")"
  grep -qxF "gpubuddy-view: warning: $want" "$tmp/err" ||
    fail "$t: the viewer said '$(cat "$tmp/err")', not the warning '$want'"
  grep -q '"ops": *[1-9]' "$tmp/cut.json" || fail "$t: no ops before the cut: $(head -c 300 "$tmp/cut.json")"
done
$view --trace "$infer" --headless --png "$tmp/cut.png" 2> "$tmp/err" || fail "whole trace: $?"
! grep -q warning "$tmp/err" || fail "a whole trace warned: $(cat "$tmp/err")"
echo "test_viewer_cli: ok"
