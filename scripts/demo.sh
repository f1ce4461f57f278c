#!/bin/sh
# SPDX-License-Identifier: MIT
# demo.sh [BUILDDIR]: the README's demo. Starts a sample workload that
# publishes its pool live, and gpubuddy-view attached to it. With a display
# ($DISPLAY or $WAYLAND_DISPLAY) the viewer opens a window (q quits);
# without one it renders PNG frames headless and prints where they are.
#
# BUILDDIR is where `make` ran (default: ./build, else the current
# directory). Environment:
#   DEMO_SAMPLE=kvcache|churn|cnn|checkerboard   workload (default kvcache)
#   DEMO_STEPS=N       workload steps (default 200000 windowed; headless, it
#                      runs until the frames are taken, so every frame shows
#                      it live, then it is stopped)
#   DEMO_PACE_US=N     microseconds between steps (default 200)
#   DEMO_OUT=DIR       headless frames go here (default ./demo-out)
#   DEMO_FRAMES=N      headless frames to write (default 20, every 500 ms)
#   DEMO_BACKEND=B     auto|device|pinned|host (default auto: GPU if usable)
set -eu

build=${1:-}
if [ -z "$build" ]; then
  if [ -x build/gpubuddy-view ]; then build=build; else build=.; fi
fi
view=$build/gpubuddy-view
sample_name=${DEMO_SAMPLE:-kvcache}
sample=$build/samples/gpubuddy-sample-$sample_name
if [ ! -x "$view" ]; then
  echo "demo: $view not found: build first (./autogen.sh && ./configure &&" \
       "make)" >&2
  exit 1
fi
if [ ! -x "$sample" ]; then
  echo "demo: $sample not found (DEMO_SAMPLE=$sample_name)" >&2
  exit 1
fi

if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then windowed=1; else windowed=0; fi
if [ $windowed = 1 ] && "$view" --version | grep -q "headless only"; then
  echo "demo: this gpubuddy-view has no window (built without SDL2:" \
       "apt-get install libsdl2-dev, then configure again); rendering headless" >&2
  windowed=0
fi
# Headless, 20000 steps ended before the frames did: the last ones were
# DISCONNECTED over the pool the sample emptied as it exited.
if [ $windowed = 1 ]; then steps=${DEMO_STEPS:-200000}; else steps=${DEMO_STEPS:-1000000000}; fi
pace=${DEMO_PACE_US:-200}
name=demo-$$
pid=

# The sample stops on SIGTERM as at its last step: it frees its blocks
# and unpublishes the pool; wait for that.
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

out=${DEMO_OUT:-demo-out}
mkdir -p "$out"
log=$out/sample.log
if [ -n "${DEMO_STEPS:-}" ] || [ $windowed = 1 ]; then what="$steps steps"; else what="until the frames are taken"; fi
echo "demo: starting $sample_name ($what, ${pace} us apart), published as $name; its log: $log" >&2
"$sample" --backend "${DEMO_BACKEND:-auto}" --publish "$name" --steps "$steps" \
  --pace-us "$pace" --quiet >"$log" 2>&1 &
pid=$!

# Wait for the pool to appear (the sample creates it at start).
i=0
until "$view" --list 2>/dev/null | grep -qx "$name"; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "demo: the sample did not publish $name; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
# Say where the pool lives: the GPU, or the host when none is usable.
backend=$("$build/tools/gpubuddy-stat" --json "$name" 2>/dev/null |
  sed -n 's/.*"backend":"\([a-z]*\)".*/\1/p')
case $backend in
  device|pinned) echo "demo: the pool is on the GPU ($backend memory)" >&2 ;;
  "") ;;
  *) echo "demo: no usable GPU here: the pool is $backend memory (the same allocator, on the host)" >&2 ;;
esac

if [ $windowed = 1 ]; then
  echo "demo: opening the viewer (h: keys, q: quit)" >&2
  "$view" "$name"
else
  echo "demo: no display: rendering frames headless into $out/" >&2
  SDL_VIDEODRIVER=dummy "$view" "$name" --headless --frames "$out" \
    --count "${DEMO_FRAMES:-20}" --interval-ms 500 --size 1280x800
  echo "demo: frames written: $out/frame-000.png .. (open them with any image viewer)"
fi
