#!/bin/sh
# SPDX-License-Identifier: MIT
# test_compare.sh: gpubuddy-replay --compare A B. Two small runs whose
# call sites have other ids in each (sites match by their frames): the
# text must show each site's bytes at the peak in A and B and the change,
# largest change first, the two mlp sites told apart by their callers;
# the peaks and each policy's smallest pool must equal what the tool finds
# for each run alone; JSON must carry the same figures; --png must write
# a PNG of the tool's width; bad arguments get one line and exit 2, a
# missing trace exit 1.
set -u
replay=./tools/gpubuddy-replay
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-compare.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

cat > "$tmp/a.trace" <<'T'
# gpubuddy-trace v2
# seq time_ns op id size tag stream [site]
# site 1 ??:0 c10::alloc;/w/model.py:10 attention;/w/train.py:5 step
# site 2 ??:0 c10::alloc;/w/model.py:20 mlp;/w/train.py:5 step
# site 3 ??:0 c10::alloc;/w/model.py:20 mlp;/w/eval.py:9 run
1 0 alloc 0x1 3145728 0 0x0 1
2 1 alloc 0x2 1048576 0 0x0 2
3 2 alloc 0x3 1000 0 0x0 3
4 3 free 0x1 3145728 0 0x0 1
5 4 free 0x2 1048576 0 0x0 2
T
cat > "$tmp/b.trace" <<'T'
# gpubuddy-trace v2
# seq time_ns op id size tag stream [site]
# site 7 ??:0 c10::alloc;/w/model.py:20 mlp;/w/train.py:5 step
# site 8 ??:0 c10::alloc;/w/model.py:10 attention;/w/train.py:5 step
# site 9 ??:0 c10::alloc;/w/model.py:30 norm;/w/train.py:5 step
1 0 alloc 0x1 1048576 0 0x0 8
2 1 alloc 0x2 1048576 0 0x0 7
3 2 alloc 0x3 2097152 0 0x0 9
4 3 alloc 0x4 5000 0 0x0
T
a=$tmp/a.trace b=$tmp/b.trace
$replay -q --compare "$a" "$b" --png "$tmp/c.png" > "$tmp/out" 2> "$tmp/err" || fail "exit $?: $(cat "$tmp/err")"
row() { grep -q "^ *$1 *$2 *$3  $4\$" "$tmp/out" || fail "no row '$1 $2 $3 $4': $(cat "$tmp/out")"; }
row "3.0 MiB" "1.0 MiB" "-2.0 MiB" "model.py:10 attention"
row "0 B" "2.0 MiB" "+2.0 MiB" "model.py:30 norm"
row "0 B" "4.9 KiB" "+4.9 KiB" "(no call site)"
row "1000 B" "0 B" "-1000 B" "model.py:20 mlp < eval.py:9 run"
row "1.0 MiB" "1.0 MiB" "0" "model.py:20 mlp < train.py:5 step"
grep -A1 'B - A  site' "$tmp/out" | grep -q 'attention' || fail "the largest change is not first"
grep -q '^  peak live bytes *4.0 MiB *4.0 MiB *+3.9 KiB' "$tmp/out" || fail "peak line"
grep -q '^  buddy    internal  20.0% ->   0.1%' "$tmp/out" || fail "buddy's fragmentation line"
# Each smallest pool is what --find-min-pool finds for the run alone.
$replay -q --json --compare "$a" "$b" > "$tmp/j" || fail "json: exit $?"
for k in a b; do
  $replay -q --json --find-min-pool --policy all "$tmp/$k.trace" |
    grep '"min_pool_size"' | tr -dc '0-9\n' > "$tmp/$k.alone"
  grep "\"$k\": {" -A4 "$tmp/j" | grep -o '"min_pool_size": [0-9]*' |
    tr -dc '0-9\n' > "$tmp/$k.cmp"
  [ -s "$tmp/$k.alone" ] && cmp -s "$tmp/$k.alone" "$tmp/$k.cmp" ||
    fail "$k: smallest pools $(cat "$tmp/$k.cmp" | tr '\n' ' ')differ from --find-min-pool's $(cat "$tmp/$k.alone" | tr '\n' ' ')"
done
grep -q '"peak_live_diff": 4000,' "$tmp/j" || fail "json: peak_live_diff"
grep -q '"label": "model.py:10 attention", "a_bytes": 3145728, "b_bytes": 1048576, "diff_bytes": -2097152' "$tmp/j" ||
  fail "json: the attention row"
if command -v python3 > /dev/null 2>&1; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["sites"]) == 5' "$tmp/j" ||
    fail "json does not parse or has not 5 sites"
fi
# The picture: a PNG, 1600 pixels wide, one pair of bars per figure.
[ "$(head -c 8 "$tmp/c.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "png: no PNG signature"
[ "$(od -An -tu1 -j16 -N4 "$tmp/c.png" | tr -s ' ' | sed 's/^ //')" = "0 0 6 64" ] || fail "png: not 1600 wide"
# --top-sites=N: rows shown.
[ "$($replay -q --compare "$a" "$b" --top-sites=2 | sed -n '/B - A  site/,$p' | wc -l)" = 3 ] || fail "--top-sites=2 does not show 2 rows"
# Bad arguments: one line, exit 2; a missing trace: exit 1.
bad() {
  want=$1; shift
  $replay -q "$@" > /dev/null 2> "$tmp/err"; rc=$?
  [ $rc = "$want" ] && [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$*: exit $rc, want $want: $(cat "$tmp/err")"
}
bad 2 --compare "$a" --plan-out "$tmp/p" "$b"
bad 2 --compare "$a" --pool-size 64M "$b"
bad 2 --compare - "$b"
bad 2 --png "$tmp/x.png" "$b"
bad 2 --compare "$a"
bad 1 --compare "$tmp/missing.trace" "$b"
[ $fails = 0 ] || exit 1
echo "test_compare: ok"
