#!/bin/sh
# SPDX-License-Identifier: MIT
# test_viewer_xvfb.sh: gpubuddy-view in a real X window (Xvfb), driven by
# input events as a user's keyboard sends them (xdotool, through XTEST):
# Esc with nothing selected keeps the window open, / opens the prompt
# without typing itself, a trace address typed there selects its block,
# space pauses, c changes the colouring, a resized window refits its map
# and its screenshots (p) follow the new size, and q quits with status 0.
# Then on a longer trace: the wheel over the timeline zooms it in time,
# > (shift+.) pans it, a shows the allocation bands, j scrolls the hover.
# The viewer writes what the input left behind at exit
# (GPB_VIEW_TEST_STATE). Skips without Xvfb, xdotool, python3 or a window
# build. Run from the build directory.
set -u
view=$PWD/gpubuddy-view
# The test data, found before the test moves to its own directory: beside
# this script (srcdir, also in a VPATH build such as distcheck's).
data=$(cd "$(dirname "$0")/data" && pwd) || exit 1
[ -x "$view" ] || { echo "SKIP: $view not built"; exit 77; }
grep -q "^#define GPB_HAVE_SDL2_WINDOW 1" ./config.h 2>/dev/null ||
  { echo "SKIP: built without a window"; exit 77; }
for t in Xvfb xdotool python3; do
  command -v $t >/dev/null 2>&1 || { echo "SKIP: no $t"; exit 77; }
done
tmp=$(mktemp -d /tmp/test_viewer_xvfb.XXXXXX)
xpid= vpid=
trap 'kill $vpid $xpid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/err" ] && cat "$tmp/err"; exit 1; }
unset SDL_VIDEODRIVER
# SDL's X11 backend leaves blocks of libdbus and of unloaded libraries to
# the exit; the viewer's own leaks are the other viewer tests' to find.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export ASAN_OPTIONS

# A display of our own: Xvfb picks a free number and writes it to fd 3.
Xvfb -displayfd 3 -screen 0 1280x800x24 -nolisten tcp 3>"$tmp/display" \
  2>"$tmp/xvfb.err" &
xpid=$!
i=0
while [ ! -s "$tmp/display" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$tmp/display" ] || { echo "SKIP: Xvfb did not start: $(cat "$tmp/xvfb.err")"; exit 77; }
DISPLAY=:$(cat "$tmp/display")
export DISPLAY

# Two allocations at a traced program's addresses: B's 100 KiB takes the
# 128 KiB block after A's 64 KiB one (buddy, 4 KiB blocks).
printf '# gpubuddy-trace v1\n1 0 alloc 0x7fb400000000 65536 1 0\n2 5 alloc 0x7fb400100000 102400 2 0\n' \
  >"$tmp/t.trace"
cd "$tmp" || exit 1
GPB_VIEW_TEST_STATE=$tmp/state.json $view --trace t.trace --pool-size 1M \
  --min-block 4K --size 800x500 >"$tmp/out" 2>"$tmp/err" &
vpid=$!
win=$(timeout 20 xdotool search --sync --name '^gpubuddy-view' | head -1)
[ -n "$win" ] || fail "no gpubuddy-view window appeared"
xdotool windowfocus --sync "$win" || fail "cannot focus the window"
# Each key waits for the frame after it; 0.3 s is many frames.
key() { xdotool key "$@"; sleep 0.3; }

key Escape
kill -0 $vpid 2>/dev/null || fail "Esc with nothing selected quit the viewer"
key slash
xdotool type --delay 20 0x7fb400100000
sleep 0.2
key Return
key space
key c
key p
xdotool windowsize --sync "$win" 640 400 || fail "cannot resize the window"
sleep 0.5
key p
key q
i=0
while kill -0 $vpid 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 $vpid 2>/dev/null && fail "q did not quit within 5 s"
wait $vpid
rc=$?
vpid=
[ $rc -eq 0 ] || fail "the viewer exited $rc"
[ -s "$tmp/state.json" ] || fail "no state written at exit"

python3 - "$tmp" <<'PY' || fail "state: $(cat "$tmp/state.json")"
import json, struct, sys
d = sys.argv[1]
s = json.load(open(d + "/state.json"))
def check(ok, what):
    if not ok:
        sys.exit("%s (state %s)" % (what, s))
check(not s["searching"], "the prompt is still open after Return")
check(not s["search"].startswith("/"), "the / that opened the prompt was typed into it")
check("not an address" not in s["message"].lower(), "the address was refused")
check(s["have_sel"] and s["sel_off"] == 128 * 1024,
      "the trace address did not select B's block at 128 KiB")
check(s["paused"], "space did not pause the finished replay")
check(s["color"] == 1, "c did not move to the next colouring")
check((s["width"], s["height"]) == (640, 400), "the frame did not follow the resize")
check(s["map_start"] == 0 and s["map_end"] == s["pool_size"],
      "the resized map does not show the whole pool")
check(s["ops"] == 2 and s["failed_allocs"] == 0, "the replay did not run")
sizes = []
for n in ("gpubuddy-view-000.png", "gpubuddy-view-001.png"):
    b = open(d + "/" + n, "rb").read(24)
    check(b[:8] == b"\x89PNG\r\n\x1a\n", n + " is not a PNG")
    sizes.append(struct.unpack(">II", b[16:24]))
check(sizes == [(800, 500), (640, 400)], "screenshots %s, not 800x500 then 640x400" % sizes)
PY

# The timeline's chart, where a first run of this size put it.
run2() {
  GPB_VIEW_TEST_STATE=$tmp/state2.json $view --trace "$data/churn_small.trace.gz" \
    --speed 0 --size 800x500 >"$tmp/out" 2>"$tmp/err" &
  vpid=$!
  win=$(timeout 20 xdotool search --sync --name '^gpubuddy-view' | head -1)
  [ -n "$win" ] || fail "no window for the second trace"
  xdotool windowfocus --sync "$win" || fail "cannot focus the window"
  sleep 1
}
quit2() {
  key q
  i=0
  while kill -0 $vpid 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  wait $vpid || fail "the viewer exited $?"
  vpid=
}
run2
quit2
set -- $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))
print(s["tl_x"] + s["tl_w"] // 2, s["tl_y"] + s["tl_h"] // 2, s["tl_h"])' "$tmp/state2.json")
[ "${3:-0}" -gt 10 ] || fail "no timeline chart at 800x500: $(cat "$tmp/state2.json")"
run2
xdotool mousemove --window "$win" "$1" "$2"
sleep 0.3
xdotool click 4
sleep 0.3
key shift+period
key a
key j
quit2
python3 - "$tmp/state2.json" <<'PY' || fail "state: $(cat "$tmp/state2.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["tl_zhi"] > 0 and s["tl_zhi"] - s["tl_zlo"] < s["total_ops"], "the wheel did not zoom the timeline"
# Zoomed at the middle: [N/4, 3N/4); > pans a quarter of that on.
assert s["tl_zlo"] > 0.3 * s["total_ops"], "> did not pan the zoomed timeline"
assert s["bands"], "a did not show the allocation bands"
assert s["hover_skip"] == 1, "j did not scroll the hover"
PY
echo "viewer_xvfb: all checks passed"
