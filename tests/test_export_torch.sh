#!/bin/sh
# SPDX-License-Identifier: MIT
# test_export_torch.sh: gpubuddy-export-torch writes PyTorch's snapshot
# schema. The fixture snapshot, imported then exported: the pickle must
# have device_traces (a segment_alloc, then alloc, free_requested,
# free_completed and oom entries with time_us and frames) and one
# segment whose blocks tile it, active ones with their requested sizes;
# importing it back must give the same ops (sizes, times, streams, call
# site frames; ids are the replay's addresses). A pool's MODULE+0xOFFSET
# frame becomes {filename: MODULE, line: 0, name}. A live pool exports
# its blocks and, over --seconds, its events. Errors leave no file.
# Read with the standard library only; tests/test_memory_viz.sh opens the
# result with torch's own memory_viz. Skips (77) without python3.
set -u
srcdir=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
here=$(pwd)
exp=$here/tools/gpubuddy-export-torch
imp="python3 $srcdir/tools/gpubuddy-import-torch"
churn=$here/samples/gpubuddy-sample-churn
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-export.XXXXXX")
pc=
trap '[ -n "$pc" ] && kill $pc 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

$imp -q "$srcdir/tests/data/torch_snapshot.pickle" -o "$tmp/t.trace" || fail "import: exit $?"
$exp "$tmp/t.trace" -o "$tmp/t.pickle" || fail "export: exit $?"
python3 - "$tmp/t.pickle" <<'PY' || fail "the snapshot's schema"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
tr = d["device_traces"][0]
acts = [e["action"] for e in tr]
assert acts[0] == "segment_alloc" and tr[0]["time_us"] == 0, tr[0]
for a in ("alloc", "free_requested", "free_completed", "oom"):
    assert a in acts, a
assert acts.count("free_requested") == acts.count("free_completed")
for e in tr:
    assert isinstance(e["time_us"], int) and isinstance(e["frames"], list)
    if e["action"] == "oom":
        assert "addr" not in e and e["device_free"] >= 0
    else:
        assert e["addr"] > 0 and e["size"] > 0
assert tr[1]["frames"][0] == {"filename": "model.py", "line": 195, "name": "forward"}, tr[1]
(seg,) = d["segments"]
assert seg["address"] == tr[0]["addr"] and seg["total_size"] == tr[0]["size"]
assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
at = seg["address"]
for b in seg["blocks"]:
    assert b["address"] == at, (b, at)
    at += b["size"]
    assert b["state"] in ("active_allocated", "inactive")
    assert (b["requested_size"] > 0) == (b["state"] == "active_allocated")
    assert b["requested_size"] <= b["size"]
act = [b for b in seg["blocks"] if b["state"] == "active_allocated"]
assert act and seg["allocated_size"] == sum(b["size"] for b in act)
assert seg["requested_size"] == sum(b["requested_size"] for b in act)
assert all(b["frames"] for b in act)
PY
# Back through the importer: the same ops, ids aside.
$imp -q "$tmp/t.pickle" -o "$tmp/t2.trace" || fail "re-import: exit $?"
cat > "$tmp/ops.py" <<'PY'
import sys
def load(path):
    fr, st, last, ops, ids, n = {}, {}, None, [], {}, 0
    for l in open(path, encoding="utf-8"):
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
        elif l.strip() and not l.startswith("#"):
            f = l.split()
            site = f[7] if len(f) > 7 else "0"
            if f[2] == "alloc":  # allocations numbered in order
                ids[f[3]] = n
                n += 1
            ops.append((f[1], f[2], ids.get(f[3], "-") if f[2] != "fail" else "-",
                        f[4], f[6], ";".join(st.get(site, []))))
    return ops
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = [(x, y) for x, y in zip(a, b) if x != y]
assert len(a) == len(b) and not bad, (len(a), len(b), bad[:1])
print("same", len(a), "ops")
PY
python3 "$tmp/ops.py" "$tmp/t.trace" "$tmp/t2.trace" || fail "the round trip changed the ops"
# A pool's frames, a recorded failure, a free of an unknown id.
cat > "$tmp/p.trace" <<'T'
# gpubuddy-trace v2
# seq time_ns op id size tag stream [site]
# site 1 /nonexistent/app+0x1a2f3 load_weights;/nonexistent/app+0x2b10 main
1 0 alloc 0x0 4096 0 0x0 1
2 5000 fail 0x0 1099511627776 0 0x0 1
3 9000 free 0x12345 64 0 0x0
T
$exp -q "$tmp/p.trace" -o "$tmp/p.pickle" || fail "pool trace: exit $?"
python3 - "$tmp/p.pickle" <<'PY' || fail "pool trace: frames or oom"
import pickle, sys
tr = pickle.load(open(sys.argv[1], "rb"))["device_traces"][0]
assert [e["action"] for e in tr] == ["segment_alloc", "alloc", "oom"], tr
assert tr[1]["frames"][0] == {"filename": "/nonexistent/app", "line": 0, "name": "load_weights"}
assert tr[2]["size"] == 1 << 40 and tr[2]["frames"] is tr[1]["frames"]
assert tr[2]["time_us"] == 5
PY
# --device 2: two empty histories before ours.
$exp -q --device 2 "$tmp/p.trace" -o "$tmp/d.pickle" || fail "--device: exit $?"
python3 -c 'import pickle,sys; d=pickle.load(open(sys.argv[1],"rb")); assert [len(x) for x in d["device_traces"]] == [0, 0, 3] and d["segments"][0]["device"] == 2' "$tmp/d.pickle" ||
  fail "--device 2"
# Errors: one line, nothing left behind.
$exp "$tmp/missing.trace" -o "$tmp/x.pickle" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ ! -e "$tmp/x.pickle" ] && [ "$(wc -l < "$tmp/err")" = 1 ] || fail "missing trace: exit $rc: $(cat "$tmp/err")"
$exp --pool-size 4096 "$tmp/t.trace" -o "$tmp/x.pickle" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && [ ! -e "$tmp/x.pickle" ] && grep -q 'larger --pool-size' "$tmp/err" || fail "small pool: exit $rc: $(cat "$tmp/err")"
$exp "$tmp/t.trace" > /dev/null 2>&1; [ $? = 2 ] || fail "no -o: not exit 2"
$exp --seconds 1 "$tmp/t.trace" -o "$tmp/x.pickle" 2> /dev/null; [ $? = 2 ] || fail "--seconds without --live: not exit 2"
# A live pool: its blocks now, and its events over a second.
if [ -x "$churn" ]; then
  name=export-$$
  "$churn" --backend virtual --steps 100000000 --pace-us 200 --publish "$name" --quiet > /dev/null 2>&1 &
  pc=$!
  i=0
  while [ $i -lt 50 ] && ! "$exp" -q --live "$name" -o "$tmp/l0.pickle" 2> /dev/null; do
    sleep 0.1; i=$((i + 1))
  done
  $exp --live "$name" --seconds 1 -o "$tmp/l.pickle" || fail "--live: exit $?"
  python3 - "$tmp/l.pickle" <<'PY' || fail "--live: the snapshot"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
(seg,) = d["segments"]
assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
assert any(b["state"] == "active_allocated" for b in seg["blocks"])
acts = {e["action"] for e in d["device_traces"][0]}
assert "alloc" in acts and "free_completed" in acts, acts
PY
  kill $pc; wait $pc 2>/dev/null; pc=
fi
[ $fails = 0 ] || exit 1
echo "test_export_torch: ok"
