#!/bin/sh
# SPDX-License-Identifier: MIT
# test_import_torch.sh: gpubuddy-import-torch on the fixture snapshots
# (tests/data/gen_torch_snapshot.py made them and the traces they must
# give), then malformed and malicious pickles: each must fail with a clear
# message and exit 1, never run code, never leave a half-written trace.
# Skips (77) without python3.
set -u
srcdir=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
imp="python3 $srcdir/tools/gpubuddy-import-torch"
data=$srcdir/tests/data
replay=./tools/gpubuddy-replay
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-import-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# The sites a trace defines, one "ID FRAME;FRAME;..." a line: v2's "# site"
# lines, or v3's frames and stacks (docs/TRACE_FORMAT.md) joined back.
sites() {
  python3 - "$1" <<'PY'
import sys
fr, st, last = {}, {}, None
for l in open(sys.argv[1], encoding="utf-8"):
    l = l.rstrip("\n")
    w = l.split(" ", 3)
    if l.startswith("# frame "):
        fr[w[2]] = w[3]
    elif l.startswith("# stack "):
        last = w[2]
        st[last] = [fr[x] for x in l.split()[3:]]
    elif l.startswith("# stack+ "):
        st[last] += [fr[x] for x in l.split()[2:]]
    elif l.startswith("# site "):
        st[w[2]] = [w[3]]
for k, v in st.items():
    print(k, ";".join(v))
PY
}

# 1. Both layouts convert to exactly the expected traces: with the call
# sites their frames give (v3), and with --no-frames the v1 trace the
# importer wrote before it kept frames, byte for byte.
for s in torch_snapshot torch_snapshot_old; do
  $imp -q "$data/$s.pickle" -o "$tmp/$s.trace" || fail "$s: exit $?"
  cmp -s "$tmp/$s.trace" "$data/$s.sites.expected" || {
    fail "$s: output differs from $s.sites.expected"; diff "$tmp/$s.trace" "$data/$s.sites.expected" | head; }
  $imp -q "$data/$s.pickle" -o "$tmp/$s.trace.gz" || fail "$s .gz: exit $?"
  gzip -dc "$tmp/$s.trace.gz" | cmp -s - "$data/$s.sites.expected" || fail "$s: .gz output differs"
  $imp -q --no-frames "$data/$s.pickle" -o "$tmp/$s.v1.trace" || fail "$s --no-frames: exit $?"
  cmp -s "$tmp/$s.v1.trace" "$data/$s.expected" || {
    fail "$s --no-frames: output differs from $s.expected"; diff "$tmp/$s.v1.trace" "$data/$s.expected" | head; }
done
# stdin and stdout.
$imp -q - -o - < "$data/torch_snapshot.pickle" > "$tmp/pipe.trace" || fail "stdin/stdout: exit $?"
cmp -s "$tmp/pipe.trace" "$data/torch_snapshot.sites.expected" || fail "stdin/stdout output differs"
$imp -q --no-frames - -o - < "$data/torch_snapshot.pickle" > "$tmp/pipe.trace" || fail "stdin/stdout: exit $?"
cmp -s "$tmp/pipe.trace" "$data/torch_snapshot.expected" || fail "stdin/stdout --no-frames output differs"

# 2. The imported trace replays: 100 allocs + 60 frees + one failed request
# (two ops); the 80 GiB request fails again.
$replay --json --quiet "$tmp/torch_snapshot.trace.gz" > "$tmp/r.json" || fail "replay exited $?"
grep -q '"ops": 162,' "$tmp/r.json" || fail "replay: expected 162 ops"
grep -q '"recorded_failures": 1,' "$tmp/r.json" || fail "replay: expected 1 recorded failure"
grep -q '"failed_allocs": 1,' "$tmp/r.json" || fail "replay: expected 1 failed alloc"

# 2b. Call sites. A snapshot whose stacks include the frames that
# PyTorch's memory_viz leaves out (the unwinder's, CPython's evaluation
# loop, the process entry): the importer leaves them out too, and
# gpubuddy-replay --top-sites names the program's own frames, innermost
# first. A snapshot with no frames at all is a v1 trace as before.
python3 - "$tmp" <<'PY'
import pickle, sys
t = sys.argv[1]
def fr(*names):
    return [{"filename": f, "line": l, "name": n} for f, l, n in names]
gather = ("/src/torch/csrc/profiler/combined_traceback.cpp", 7,
          "torch::CapturedTraceback::gather(bool, bool, bool)")
evalf = ("/usr/src/python3.11/Python/ceval.c", 5, "_PyEval_EvalFrameDefault")
start = ("??", 0, "_start")
attn = fr(gather, ("/w/model.py", 42, "attention"), evalf,
          ("/w/train.py", 7, "step"), start)
mlp = fr(gather, ("/w/model.py", 80, "mlp"), evalf, ("/w/train.py", 7, "step"))
hidden = fr(gather, evalf, start)  # nothing left: no call site
e = []
for k in range(4):
    e.append({"action": "alloc", "addr": 0x10000 * (k + 1), "size": 3 << 20,
              "stream": 0, "frames": attn})
for k in range(2):
    e.append({"action": "alloc", "addr": 0x100000 * (k + 1), "size": 1 << 20,
              "stream": 0, "frames": mlp})
e.append({"action": "alloc", "addr": 0x900000, "size": 512, "stream": 0,
          "frames": hidden})
e.append({"action": "oom", "size": 1 << 40, "stream": 0, "frames": mlp})
e.append({"action": "free_completed", "addr": 0x10000, "size": 3 << 20,
          "stream": 0, "frames": []})
open(t + "/frames.pickle", "wb").write(pickle.dumps({"device_traces": [e]}))
for x in e:
    del x["frames"]
open(t + "/noframes.pickle", "wb").write(pickle.dumps({"device_traces": [e]}))
PY
$imp -q "$tmp/frames.pickle" -o "$tmp/frames.trace" || fail "frames: exit $?"
sites "$tmp/frames.trace" > "$tmp/frames.sites"
grep -qx '1 /w/model.py:42 attention;/w/train.py:7 step' "$tmp/frames.sites" ||
  fail "frames: site 1 is not attention;step: $(cat "$tmp/frames.sites")"
grep -qx '2 /w/model.py:80 mlp;/w/train.py:7 step' "$tmp/frames.sites" ||
  fail "frames: site 2 is not mlp;step"
[ "$(wc -l < "$tmp/frames.sites")" = 2 ] || fail "frames: not two sites"
# Each frame is written once: train.py:7 step is in both stacks.
[ "$(grep -c 'train.py:7 step' "$tmp/frames.trace")" = 1 ] || fail "frames: a frame written twice"
grep -q 'gather\|ceval\|_start' "$tmp/frames.trace" && fail "frames: memory_viz's omitted frames were kept"
grep -qx '7 6000 alloc 0x900000 512 0 0x0' "$tmp/frames.trace" || fail "frames: a stack with no frames left has a site"
grep -qx '9 8000 free 0x10000 3145728 0 0x0 1' "$tmp/frames.trace" || fail "frames: the free lacks its allocation's site"
$replay --top-sites=3 "$tmp/frames.trace" > "$tmp/top.out" 2>&1 || fail "replay --top-sites: exit $?"
grep -A2 '1\. 12.0 MiB.*site 1: model.py:42 attention$' "$tmp/top.out" | grep -q '/w/model.py:42 attention' ||
  fail "--top-sites does not name attention first: $(cat "$tmp/top.out")"
grep -A2 '2\. 2.0 MiB.*site 2: model.py:80 mlp$' "$tmp/top.out" | grep -q '/w/train.py:7 step' ||
  fail "--top-sites does not name mlp's stack second"
grep -A2 'failed allocations' "$tmp/top.out" | grep -q 'site 2' || fail "--top-sites: the failure is not mlp's"
$imp -q --no-frames "$tmp/frames.pickle" -o "$tmp/nf.trace" || fail "--no-frames: exit $?"
$imp -q "$tmp/noframes.pickle" -o "$tmp/none.trace" || fail "no frames: exit $?"
head -1 "$tmp/none.trace" | grep -qx '# gpubuddy-trace v1' || fail "no frames: not a v1 trace"
cmp -s "$tmp/nf.trace" "$tmp/none.trace" || fail "--no-frames differs from a snapshot without frames"

# 2c. Past GPB_MAX_SITES (65535) distinct stacks, new ones are 0 (no
# site), as in a pool; and a stack too long for a line keeps every frame
# (over "# stack+" lines), within the 4096-byte line limit.
python3 - "$tmp" <<'PY'
import pickle, sys
t = sys.argv[1]
e = [{"action": "alloc", "addr": 1 << 40, "size": 512, "stream": 0,
      "frames": [{"filename": "/" + "d" * 300, "line": k, "name": "h"}
                 for k in range(2000)]}]
open(t + "/deep.pickle", "wb").write(pickle.dumps({"device_traces": [e]}))
e += [{"action": "alloc", "addr": 4096 * (k + 1), "size": 512, "stream": 0,
       "frames": [{"filename": "f.py", "line": k, "name": "g"}]}
      for k in range(65536)]
open(t + "/many.pickle", "wb").write(pickle.dumps({"device_traces": [e]}))
PY
$imp -q "$tmp/many.pickle" -o "$tmp/many.trace" || fail "many sites: exit $?"
sites "$tmp/many.trace" > "$tmp/many.sites"
grep -qx '65535 f.py:65533 g' "$tmp/many.sites" || fail "many sites: no site 65535"
grep -q '^65536 ' "$tmp/many.sites" && fail "many sites: an id past 65535"
grep -qx '65537 65536000 alloc 0x10000000 512 0 0x0' "$tmp/many.trace" || fail "many sites: stack 65536 is not site 0"
awk 'length($0) > 4096 { bad = 1 } END { exit bad }' "$tmp/many.trace" || fail "a line longer than 4096 bytes"
[ "$(grep '^1 ' "$tmp/many.sites" | sed 's/^1 //' | tr ';' '\n' | grep -c '^/d*:[0-9]* h$')" = 2000 ] ||
  fail "the deep stack lost frames"
grep -q '^# stack+ ' "$tmp/many.trace" || fail "the deep stack took no stack+ line"
$imp -q "$tmp/deep.pickle" -o "$tmp/deep.trace" || fail "deep stack: exit $?"
$replay --quiet --top-sites=1 "$tmp/deep.trace" | grep -c '/ddd' > "$tmp/deep.n"
[ "$(cat "$tmp/deep.n")" = 2000 ] || fail "replay does not read the deep stack whole: $(cat "$tmp/deep.n")"
$replay --quiet "$tmp/many.trace" > /dev/null || fail "replay of the many-site trace: exit $?"

# 3. Devices: 1 has an empty history (a warning, a trace with no ops),
# 7 does not exist (an error naming what there is).
$imp "$data/torch_snapshot.pickle" --device 1 -o "$tmp/d1.trace" 2> "$tmp/d1.err"
[ $? = 1 ] || fail "--device 1 (an empty history): exit 0, expected an error"
grep -q 'no allocations' "$tmp/d1.err" || fail "--device 1: no message"
[ ! -e "$tmp/d1.trace" ] || fail "--device 1: left an empty trace behind"
$imp "$data/torch_snapshot.pickle" --device 7 -o "$tmp/d7.trace" 2> "$tmp/d7.err"
[ $? = 1 ] || fail "--device 7 did not exit 1"
grep -q 'device 7 not in the snapshot' "$tmp/d7.err" || fail "--device 7: $(cat "$tmp/d7.err")"
[ ! -e "$tmp/d7.trace" ] || fail "--device 7 left an output file"

# 4. Malformed input: each exits 1 with a message containing the context.
bad() { # name expected-words... ; the pickle is $tmp/bad.pickle
  name=$1; shift
  rm -f "$tmp/out.trace"
  $imp "$tmp/bad.pickle" -o "$tmp/out.trace" 2> "$tmp/err"
  rc=$?
  [ $rc = 1 ] || fail "$name: exit $rc, expected 1"
  for w in "$@"; do grep -q -- "$w" "$tmp/err" || fail "$name: message lacks '$w': $(cat "$tmp/err")"; done
  [ ! -e "$tmp/out.trace" ] || fail "$name: left a partial trace"
  if grep -q Traceback "$tmp/err"; then fail "$name: Python traceback"; fi
}
mk() { python3 -c "import pickle,sys; sys.stdout.buffer.write(pickle.dumps($1))" > "$tmp/bad.pickle"; }

head -c 3000 "$data/torch_snapshot.pickle" > "$tmp/bad.pickle"
bad truncated "not a readable pickle"
: > "$tmp/bad.pickle"; bad empty "empty"
printf 'hello world' > "$tmp/bad.pickle"; bad text "not a readable pickle"
mk "[{'address': 1, 'blocks': []}]"; bad "old list layout" "list of segments"
mk "{'segments': []}"; bad "no history" "device_traces" "_record_memory_history"
mk "{'device_traces': 5}"; bad "traces not a list" "expected a list"
mk "{'device_traces': [[{'action': 'alloc', 'size': 512}]]}"; bad "missing addr" "device_traces\[0\]\[0\] (alloc)" "missing 'addr'"
mk "{'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': -512}]]}"; bad "negative size" "negative"
mk "{'device_traces': [[{'action': 'alloc', 'addr': 'x', 'size': 512}]]}"; bad "string addr" "expected an integer"
mk "{'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 512}, 7]]}"; bad "entry not a dict" "device_traces\[0\]\[1\]"
mk "{'device_traces': [[{'action': 'alloc', 'addr': 2**70, 'size': 512}]]}"; bad "huge addr" "64 bits"
rm -f "$tmp/bad.pickle"; bad missing "cannot open"
# Frames: not a list, a frame not a dict, missing or mistyped keys.
fa="{'action': 'alloc', 'addr': 4096, 'size': 512, 'frames':"
mk "{'device_traces': [[$fa {'a': 1}}]]}"; bad "frames not a list" "device_traces\[0\]\[0\] (alloc)" "'frames' is a dict"
mk "{'device_traces': [[$fa [7]}]]}"; bad "frame not a dict" "frame 0 is a int"
mk "{'device_traces': [[$fa [{'filename': 'a.py', 'line': 1}]}]]}"; bad "frame without name" "frame 0: 'name' is missing"
mk "{'device_traces': [[$fa [{'filename': 'a.py', 'name': 'f'}]}]]}"; bad "frame without line" "frame 0: missing 'line'"
mk "{'device_traces': [[$fa [{'filename': 3, 'line': 1, 'name': 'f'}]}]]}"; bad "numeric file name" "'filename' is 3"
mk "{'device_traces': [[$fa [{'filename': 'a', 'line': -1, 'name': 'f'}]}]]}"; bad "negative line" "negative"
# Huge, odd strings are cut and cleaned, not refused: a frame of a
# megabyte, with ';', newlines, control characters, a lone surrogate and
# non-ASCII text, still makes one line of the trace, which replays.
mk "{'device_traces': [[$fa [{'filename': 'x' * (1 << 20), 'line': 2 ** 63, 'name': 'a;b\\nc\\x00\\ud800 \\u00e9t\\u00e9'}]}]]}"
$imp -q "$tmp/bad.pickle" -o "$tmp/odd.trace" 2> "$tmp/err" || fail "odd frame strings: exit $?: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/odd.trace")" = 5 ] || fail "odd frame strings: not 5 lines: $(head -c 300 "$tmp/odd.trace")"
grep -q ':9223372036854775808 a?b?c?? ét' "$tmp/odd.trace" || fail "odd frame strings: not cleaned: $(tail -c 100 "$tmp/odd.trace")"
$replay --quiet --top-sites=1 "$tmp/odd.trace" > /dev/null || fail "odd frame strings: the trace does not replay"

# 5. A malicious pickle (it would create a file through os.system) is
# refused before anything runs.
python3 - "$tmp" > "$tmp/bad.pickle" <<'PY'
import os, pickle, sys
class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[1] + "/pwned",))
sys.stdout.buffer.write(pickle.dumps({"device_traces": [[Evil()]]}))
PY
bad malicious "refused"
[ ! -e "$tmp/pwned" ] || fail "the malicious pickle ran code"

# 5b. Input that would take unbounded memory or time gets one line, no
# traceback, and memory within the bounds (each under ulimit -v as well,
# so a bound that failed would fail the test rather than the machine).
mk "{'device_traces': [[]]}"; bad "empty history" "no allocations in its history"
python3 - "$tmp" <<'PY'
import gzip, pickle, struct, sys
t = sys.argv[1]
def X(s): b = s.encode(); return b"X" + struct.pack("<I", len(b)) + b
open(t + "/bomb.pickle", "wb").write(gzip.compress(b"\0" * (80 << 20), 9))
open(t + "/memo.pickle", "wb").write(b"\x80\x02N" + b"r" + struct.pack("<I", 1 << 27) + b".")
sys.set_int_max_str_digits(0)
big = 10 ** 5000
open(t + "/bigint.pickle", "wb").write(pickle.dumps({"device_traces": [[{"action": big, "addr": 1, "size": 1}]]}))
open(t + "/bigkey.pickle", "wb").write(pickle.dumps({"device_traces": [[{big: 1, "action": "alloc", "addr": 1, "size": 512}]]}))
nest = b"]" * 200001 + b"a" * 200000
open(t + "/deep.pickle", "wb").write(b"\x80\x02}" + X("device_traces") + b"]]}" + X("action") + nest + b"saas.")
PY
# A gzipped snapshot inflating to 256 MiB, within --max-input: it costs
# about what it inflates to, not twice (1 GiB took 2,065 MiB of RSS: the
# inflated bytes were copied whole, then copied again for the unpickler).
# (The file is made by another process: a child's peak RSS counts what it
# shared with its parent at fork.)
python3 -c 'import gzip, sys; open(sys.argv[1], "wb").write(gzip.compress(b"\x80\x04" + b"\0" * (256 << 20), 9))' \
  "$tmp/big.pickle.gz"
python3 - "$srcdir/tools/gpubuddy-import-torch" "$tmp" <<'PY' || fail "a 256 MiB inflation took too much memory"
import resource, subprocess, sys
imp, t = sys.argv[1], sys.argv[2]
r = subprocess.run([sys.executable, imp, t + "/big.pickle.gz", "-o", t + "/big.trace",
                    "--max-input", str(1 << 30)], capture_output=True, text=True)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
print("256 MiB inflated: exit %d, peak RSS %d MiB: %s" % (r.returncode, rss, r.stderr.strip()))
sys.exit(0 if r.returncode == 1 and "not a readable pickle" in r.stderr and rss < 384 else 1)
PY
rm -f "$tmp/big.pickle.gz"
for k in bomb memo bigint bigkey deep; do
  cp "$tmp/$k.pickle" "$tmp/bad.pickle"
  rm -f "$tmp/out.trace"
  (ulimit -v 1500000; $imp "$tmp/bad.pickle" -o "$tmp/out.trace" --max-input 50000000) 2> "$tmp/err"
  rc=$?
  if [ $k = bigkey ]; then # an extra key, however odd, is ignored
    [ $rc = 0 ] || fail "$k: exit $rc: $(tail -2 "$tmp/err")"
    continue
  fi
  [ $rc = 1 ] || fail "$k: exit $rc, expected 1: $(tail -2 "$tmp/err")"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$k: not one line: $(cat "$tmp/err")"
  grep -q Traceback "$tmp/err" && fail "$k: Python traceback"
done

# 5b'. A message that quotes damaged input (newlines, control bytes) is
# still one line (fuzz_import_torch.py found pickles whose error text
# carried them).
python3 - "$srcdir/tools/gpubuddy-import-torch" > "$tmp/say.out" 2> "$tmp/say.err" <<'PY'
import importlib.machinery, sys, types
loader = importlib.machinery.SourceFileLoader("imp", sys.argv[1])
m = types.ModuleType(loader.name)
loader.exec_module(m)
m.say("bad float: '1\n2\x1e\x00'")
PY
[ "$(wc -l < "$tmp/say.err")" = 1 ] || fail "a message with a newline is $(wc -l < "$tmp/say.err") lines"

# 5b''. fuzz_import_torch.py found pickles whose failed load (a MemoryError
# under the address-space cap) made CPython write a SystemError line to
# stderr before ours: the message is one line again.
cp "$data/fuzz_memoryerror.pickle" "$tmp/bad.pickle"
bad "memory error noise" "not a readable pickle"
[ "$(wc -l < "$tmp/err")" = 1 ] || fail "memory error: $(cat "$tmp/err")"

# 5c. Several devices: the summary names the others; --device all writes
# one trace per device with a history (.DEVICE before the first dot).
mk "{'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 512}], [], [{'action': 'alloc', 'addr': 8192, 'size': 1024}]]}"
$imp "$tmp/bad.pickle" -o "$tmp/one.trace" 2> "$tmp/err" || fail "two devices: exit $?"
grep -q 'device 2 also has a history' "$tmp/err" || fail "the other device is not named: $(cat "$tmp/err")"
$imp "$tmp/bad.pickle" --device all -o "$tmp/all.trace.gz" 2> "$tmp/err" || fail "--device all: exit $?"
[ -s "$tmp/all.0.trace.gz" ] && [ -s "$tmp/all.2.trace.gz" ] || fail "--device all did not write all.0 and all.2"
[ ! -e "$tmp/all.1.trace.gz" ] || fail "--device all wrote a trace for a device without history"
$imp "$tmp/bad.pickle" --device x -o "$tmp/x.trace" 2>/dev/null; [ $? = 2 ] || fail "--device x did not exit 2"

# 5d. Times: the last time_ns a trace holds (2^64 - 1) is 18446744073709551
# us after the first entry; one more does not fit and is refused, naming
# the entry, rather than written as a number the replayer rejects.
tm() { mk "{'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 512, 'time_us': 5}, {'action': 'free_completed', 'addr': 4096, 'size': 512, 'time_us': 5 + $1}]]}"; }
tm 18446744073709551
$imp -q "$tmp/bad.pickle" -o "$tmp/tmax.trace" || fail "the largest time: exit $?"
grep -qx '2 18446744073709551000 free 0x1000 512 0 0x0' "$tmp/tmax.trace" || fail "the largest time: $(tail -1 "$tmp/tmax.trace")"
$replay --quiet "$tmp/tmax.trace" > /dev/null || fail "the largest time does not replay"
tm 18446744073709552; bad "time past 2^64 ns" "device_traces\[0\]\[1\] (free_completed)" "'time_us'" "64-bit"
tm '2 ** 63'; bad "time 2^63 us" "device_traces\[0\]\[1\]" "64-bit"

# 5e. All or nothing. Outputs go to a temporary file and are renamed into
# place only when whole, so a failed write leaves no partial trace and an
# existing output as it was, and no temporary file behind.
o=$tmp/o; mkdir "$o"
printf 'old trace\n' > "$o/keep"
only() { # the files in $o must be exactly these
  [ "$(cd "$o" && ls -A | tr '\n' ' ')" = "$* " ] || fail "$name: files in the output directory: $(ls -A "$o" | tr '\n' ' '), expected $*"
}
intact() { # each named output still holds the old text
  for f in "$@"; do cmp -s "$o/keep" "$o/$f" || fail "$name: $f was changed or removed"; done
}
onefail() { # rc: the run's exit must be 1 with one line, no traceback
  [ "$1" = 1 ] || fail "$name: exit $1, expected 1: $(cat "$tmp/err")"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$name: not one line: $(cat "$tmp/err")"
}
# A full disk (a file size limit makes writes fail with EFBIG; Python
# ignores SIGXFSZ): the old file stays.
name="file size limit"
cp "$o/keep" "$o/t.trace"
(ulimit -f 2; $imp -q "$data/torch_snapshot.pickle" -o "$o/t.trace") 2> "$tmp/err"
onefail $?
grep -q "cannot write $o/t.trace: File too large" "$tmp/err" || fail "$name: $(cat "$tmp/err")"
intact t.trace; only keep t.trace
# An output that is not a regular file is written in place, never
# replaced or removed: a FIFO whose reader leaves early stays a FIFO.
name="FIFO"
mkfifo "$o/fifo"
head -c 100 "$o/fifo" > /dev/null &
$imp -q "$tmp/many.pickle" -o "$o/fifo" 2> "$tmp/err"
onefail $?
wait
grep -q "cannot write $o/fifo: Broken pipe" "$tmp/err" || fail "$name: $(cat "$tmp/err")"
[ -p "$o/fifo" ] || fail "$name: the FIFO was removed"
rm -f "$o/fifo"
# /dev/full the same, but only when not root: an importer that removed
# its output on failure would remove /dev/full (as it once did).
if [ "$(id -u)" != 0 ] && [ -c /dev/full ] && [ -w /dev/full ]; then
  name="/dev/full"
  $imp -q "$data/torch_snapshot.pickle" -o /dev/full 2> "$tmp/err"
  onefail $?
  grep -q 'cannot write /dev/full: No space left on device' "$tmp/err" || fail "$name: $(cat "$tmp/err")"
  [ -c /dev/full ] || fail "/dev/full is no longer a device"
fi
# Out of memory while writing (the gzip writer under --max-memory): the
# old file stays, and the message says it was the writing that ran out.
name="--max-memory while writing"
mk "{'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 512}]]}"
cp "$o/keep" "$o/m.trace.gz"
$imp -q --max-memory=100000 "$tmp/bad.pickle" -o "$o/m.trace.gz" 2> "$tmp/err"
onefail $?
grep -q "writing $o/m.trace.gz needs more than the 100000 bytes of address space that --max-memory allows; no file was written" "$tmp/err" ||
  fail "$name: $(cat "$tmp/err")"
intact t.trace m.trace.gz; only keep m.trace.gz t.trace
# Replacing keeps an existing file's mode and a symbolic link; a new file
# gets the umask's mode, as before.
name="replace"
chmod 600 "$o/t.trace"; ln -s t.trace "$o/link.trace"
$imp -q "$data/torch_snapshot.pickle" -o "$o/link.trace" || fail "$name: exit $?"
[ -L "$o/link.trace" ] || fail "$name: the symbolic link was replaced"
cmp -s "$o/t.trace" "$data/torch_snapshot.sites.expected" || fail "$name: the link's file was not written"
ls -l "$o/t.trace" | grep -q '^-rw-------' || fail "$name: mode not kept: $(ls -l "$o/t.trace")"
(umask 022; $imp -q "$data/torch_snapshot.pickle" -o "$o/new.trace") || fail "$name: new file: exit $?"
ls -l "$o/new.trace" | grep -q '^-rw-r--r--' || fail "$name: a new file's mode: $(ls -l "$o/new.trace")"
rm -f "$o/link.trace" "$o/new.trace" "$o/m.trace.gz"; cp "$o/keep" "$o/t.trace"
# --device all checks every device before writing any: device 1's bad
# size leaves no all.0; and when device 2's write fails, device 0's
# trace, already written, is not put in place either.
name="--device all, a bad device"
mk "{'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 512}], [{'action': 'alloc', 'addr': 4096, 'size': -1}]]}"
cp "$o/keep" "$o/all.0.trace"
$imp -q "$tmp/bad.pickle" --device all -o "$o/all.trace" 2> "$tmp/err"
onefail $?
grep -q "device_traces\[1\]\[0\] (alloc): 'size' is negative" "$tmp/err" || fail "$name: $(cat "$tmp/err")"
intact all.0.trace; only all.0.trace keep t.trace
name="--device all, a failed write"
python3 - "$tmp" <<'PY'
import pickle, sys
big = [{"action": "alloc", "addr": 4096 * (k + 1), "size": 512} for k in range(200)]
d = [[{"action": "alloc", "addr": 4096, "size": 512}], [], big]
open(sys.argv[1] + "/bad.pickle", "wb").write(pickle.dumps({"device_traces": d}))
PY
rm "$o/all.0.trace"
(ulimit -f 2; $imp -q "$tmp/bad.pickle" --device all -o "$o/all.trace") 2> "$tmp/err"
onefail $?
grep -q "cannot write $o/all.2.trace: File too large" "$tmp/err" || fail "$name: $(cat "$tmp/err")"
only keep t.trace
$imp -q "$tmp/bad.pickle" --device all -o "$o/all.trace" || fail "--device all: exit $?"
only all.0.trace all.2.trace keep t.trace
rm "$o"/all.*

# 5f. An output that is the input snapshot (by name, through a link, or
# as stdin) is a usage error: exit 2, one line, the snapshot untouched.
name="output = input"
cp "$data/torch_snapshot.pickle" "$o/in.pickle"; ln -s in.pickle "$o/in.link"
for args in "$o/in.pickle -o $o/in.pickle" "$o/in.link -o $o/in.pickle" "$o/in.pickle -o $o/in.link" "- -o $o/in.pickle"; do
  $imp -q $args < "$o/in.pickle" 2> "$tmp/err"
  rc=$?
  [ $rc = 2 ] || fail "$name ($args): exit $rc, expected 2"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$name ($args): not one line: $(cat "$tmp/err")"
  grep -q "is the input snapshot" "$tmp/err" || fail "$name ($args): $(cat "$tmp/err")"
  cmp -s "$o/in.pickle" "$data/torch_snapshot.pickle" || fail "$name ($args): the snapshot was overwritten"
done
# With --device all, the per-device name can be the input's.
cp "$o/in.pickle" "$o/s.0.pickle"
$imp -q "$o/s.0.pickle" --device all -o "$o/s.pickle" 2> "$tmp/err"; rc=$?
[ $rc = 2 ] || fail "$name (--device all): exit $rc, expected 2: $(cat "$tmp/err")"
cmp -s "$o/s.0.pickle" "$data/torch_snapshot.pickle" || fail "$name (--device all): the snapshot was overwritten"
rm -f "$o"/*.pickle "$o/in.link"

# 5g. Byte-count options out of range are usage errors (exit 2, one line,
# the range named), not a data error or no limit at all.
for opt in --max-input=-1 --max-input=0 --max-input=1e31 --max-input=10000000000000000000000000000000 \
           --max-memory=-5 --max-memory=4611686018427387905 --max-memory=lots; do
  $imp -q "$opt" "$data/torch_snapshot.pickle" -o "$o/opt.trace" 2> "$tmp/err"
  rc=$?
  [ $rc = 2 ] || fail "$opt: exit $rc, expected 2: $(cat "$tmp/err")"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$opt: not one line: $(cat "$tmp/err")"
  grep -q "takes a number of bytes from [01].* to 4611686018427387904 (2^62)" "$tmp/err" || fail "$opt: $(cat "$tmp/err")"
  [ ! -e "$o/opt.trace" ] || fail "$opt: wrote a trace"
done
$imp -q --max-input=4611686018427387904 "$data/torch_snapshot.pickle" -o "$o/opt.trace" || fail "--max-input=2^62: exit $?"
rm -f "$o/opt.trace"

# 5h. A read error names the input, not the output.
if [ -r /proc/self/mem ]; then
  $imp -q /proc/self/mem -o "$o/mem.trace" 2> "$tmp/err"
  rc=$?
  [ $rc = 1 ] || fail "/proc/self/mem: exit $rc, expected 1"
  grep -q '^gpubuddy-import-torch: cannot read /proc/self/mem: ' "$tmp/err" || fail "/proc/self/mem: $(cat "$tmp/err")"
  [ ! -e "$o/mem.trace" ] || fail "/proc/self/mem: wrote a trace"
fi

# 6. --help and --version.
$imp --help | grep -q -- '--device' || fail "--help does not list --device"
$imp --version | grep -q '^gpubuddy-import-torch [0-9]' || fail "--version: $($imp --version)"

if [ $fails != 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo ok
