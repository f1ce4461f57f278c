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

# 1. Both layouts convert to exactly the expected traces.
for s in torch_snapshot torch_snapshot_old; do
  $imp -q "$data/$s.pickle" -o "$tmp/$s.trace" || fail "$s: exit $?"
  cmp -s "$tmp/$s.trace" "$data/$s.expected" || {
    fail "$s: output differs from $s.expected"; diff "$tmp/$s.trace" "$data/$s.expected" | head; }
  $imp -q "$data/$s.pickle" -o "$tmp/$s.trace.gz" || fail "$s .gz: exit $?"
  gzip -dc "$tmp/$s.trace.gz" | cmp -s - "$data/$s.expected" || fail "$s: .gz output differs"
done
# stdin and stdout.
$imp -q - -o - < "$data/torch_snapshot.pickle" > "$tmp/pipe.trace" || fail "stdin/stdout: exit $?"
cmp -s "$tmp/pipe.trace" "$data/torch_snapshot.expected" || fail "stdin/stdout output differs"

# 2. The imported trace replays: 100 allocs + 60 frees + one failed request
# (two ops); the 80 GiB request fails again.
$replay --json --quiet "$tmp/torch_snapshot.trace.gz" > "$tmp/r.json" || fail "replay exited $?"
grep -q '"ops": 162,' "$tmp/r.json" || fail "replay: expected 162 ops"
grep -q '"recorded_failures": 1,' "$tmp/r.json" || fail "replay: expected 1 recorded failure"
grep -q '"failed_allocs": 1,' "$tmp/r.json" || fail "replay: expected 1 failed alloc"

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

# 6. --help and --version.
$imp --help | grep -q -- '--device' || fail "--help does not list --device"
$imp --version | grep -q '^gpubuddy-import-torch [0-9]' || fail "--version: $($imp --version)"

if [ $fails != 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo ok
