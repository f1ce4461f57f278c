#!/bin/sh
# SPDX-License-Identifier: MIT
# test_site_names.sh: gpubuddy-replay --top-sites names the user's code.
# A snapshot shaped like a real PyTorch one: 30 frames of caching
# allocator, c10, ATen and torch.nn plumbing under every stack, then the
# user's model line, then its caller. Two sites share the model line and
# differ only in the caller. The ranking must name each site by its model
# line (not CUDACachingAllocator), tell the two apart by the caller, list
# the user's frames first, keep all frames (none cut), and take extra
# framework patterns from GPB_SITE_FRAMEWORK. Skips (77) without python3.
set -u
srcdir=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
imp="python3 $srcdir/tools/gpubuddy-import-torch"
replay=./tools/gpubuddy-replay
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-sitenames.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

python3 - "$tmp" <<'PY'
import pickle, sys
t = sys.argv[1]
def fr(*names):
    return [{"filename": f, "line": l, "name": n} for f, l, n in names]
alloc = [("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 900 + k,
          "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::"
          "malloc_%d(int, unsigned long, CUstream_st*)" % k) for k in range(20)]
aten = [("/pytorch/aten/src/ATen/native/Linear.cpp", 100 + k, "at::native::linear")
        for k in range(6)]
nn = [("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
       1500 + k, "_call_impl") for k in range(4)]
model = ("/srv/hf/modeling_llama.py", 216, "forward")
def stack(caller):
    return fr(*(alloc + aten + nn + [model, caller,
                ("/srv/hf/trainer.py", 3, "main")]))
a = stack(("/srv/hf/trainer.py", 10, "train_step"))
b = stack(("/srv/hf/trainer.py", 20, "eval_step"))
e = [{"action": "alloc", "addr": 0x100000 * (k + 1), "size": 4 << 20,
      "stream": 0, "frames": a} for k in range(3)]
e += [{"action": "alloc", "addr": 0x10000000 * (k + 1), "size": 2 << 20,
       "stream": 0, "frames": b} for k in range(2)]
open(t + "/s.pickle", "wb").write(pickle.dumps({"device_traces": [e]}))
PY
$imp -q "$tmp/s.pickle" -o "$tmp/s.trace" || fail "import: exit $?"
$replay --quiet --top-sites=2 "$tmp/s.trace" > "$tmp/top" 2>&1 || fail "replay: exit $?"
grep -q '^ *1\. 12.0 MiB.*; site 1: modeling_llama.py:216 forward < trainer.py:10 train_step$' "$tmp/top" ||
  fail "site 1 is not named by the model line and its caller: $(grep '^ *[12]\.' "$tmp/top")"
grep -q '^ *2\. 4.0 MiB.*; site 2: modeling_llama.py:216 forward < trainer.py:20 eval_step$' "$tmp/top" ||
  fail "site 2 is not named by the model line and its caller"
grep '^ *[12]\.' "$tmp/top" | grep -q 'CUDACaching' && fail "a row names the caching allocator"
# The user's three frames first, then 30 of the framework's: all 33 kept.
grep -A4 '^ *1\.' "$tmp/top" | sed -n 2,5p > "$tmp/first"
sed -n 1p "$tmp/first" | grep -q '/srv/hf/modeling_llama.py:216 forward' || fail "frame 1 is not the model's"
sed -n 4p "$tmp/first" | grep -q -- '-- framework (30 frames)' || fail "the framework's frames do not follow the user's 3"
[ "$(grep -c 'malloc_19' "$tmp/top")" = 2 ] || fail "the outermost allocator frame was cut"
# JSON names the site and lists the frames user first.
$replay --quiet --json --top-sites=1 "$tmp/s.trace" > "$tmp/j" || fail "json: exit $?"
python3 - "$tmp/j" <<'PY' || fail "json: no name or frames_user_first"
import json, sys
s = json.load(open(sys.argv[1]))["runs"][0]["top_sites_at_peak"][0]
assert s["name"] == "/srv/hf/modeling_llama.py:216 forward", s["name"]
assert s["user_frames"] == 3 and len(s["frames_user_first"]) == 33
assert s["frames_user_first"][1] == "/srv/hf/trainer.py:10 train_step"
PY
# A user who counts the model library as framework too.
GPB_SITE_FRAMEWORK=/srv/hf/modeling $replay --quiet --top-sites=1 "$tmp/s.trace" > "$tmp/top2" 2>&1
grep -q 'site 1: trainer.py:10 train_step$' "$tmp/top2" || fail "GPB_SITE_FRAMEWORK: $(grep '^ *1\.' "$tmp/top2")"
[ $fails = 0 ] || exit 1
echo "test_site_names: ok"
