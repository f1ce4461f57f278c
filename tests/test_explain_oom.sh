#!/bin/sh
# SPDX-License-Identifier: MIT
# test_explain_oom.sh: gpubuddy-replay --explain-oom end to end.
#  - a six-op trace into a 4 KiB pool, whose one failure has a known
#    explanation: every figure is checked, in text and in JSON, and with
#    bestfit, whose window cuts an allocation; in v2 with call sites,
#    each allocation listed names its site;
#  - a sample trace into a pool too small: the first 10 of its failures
#    are explained (=all: every one), and in each the largest free block
#    is smaller than the block needed and the listed allocations' bytes
#    add up to the window's live bytes;
#  - a bad limit is a one-line usage error, exit 2.
# Run by make check from the build directory.
set -u
srcdir=${srcdir:-.}
replay=./tools/gpubuddy-replay
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-oom-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
has() { # file text
  grep -qF -- "$2" "$1" || fail "$1 lacks '$2'"
}

# 1. Buddy, 4 KiB of 256-byte blocks. After op 5 the pool holds 0xa1
# (200 bytes in 256 at 0x400), 0xa3 (300 in 512 at 0x600) and 0xa2 (2048
# at 0x800); [0, 0x400) and 0x500 are free. Op 6 asks 2000 bytes, a block
# of 2048: of the windows [0, 0x800) and [0x800, 0x1000), the first holds
# 768 live bytes in two allocations, aged 90 and 70 ns.
cat > "$tmp/small.trace" <<'EOF'
# gpubuddy-trace v1
1 0 alloc 0xa0 1000 1 0x0
2 10 alloc 0xa1 200 2 0x0
3 20 alloc 0xa2 2048 0 0x0
4 30 alloc 0xa3 300 0 0x0
5 40 free 0xa0 1000 1 0x0
6 100 alloc 0xa4 2000 3 0x0
EOF
$replay --pool-size 4K --min-block 256 --explain-oom "$tmp/small.trace" \
  > "$tmp/small.txt" 2> "$tmp/small.err" || fail "--explain-oom exited $?"
has "$tmp/small.txt" 'failed allocations (OOM): 1'
has "$tmp/small.txt" 'failed at op 6 (id 0xa4, tag 3): 2000 bytes requested'
has "$tmp/small.txt" 'needs a block of 2048 bytes'
has "$tmp/small.txt" 'pool: 1280 bytes free (1.2 KiB), largest free block 1024 bytes'
has "$tmp/small.txt" 'cheapest window: [0x0, 0x800), 768 bytes live (768 B) in 2 allocations'
has "$tmp/small.txt" '0x400: 256 bytes (256 B), requested 200, age 90 ns, tag 2, id 0xa1'
has "$tmp/small.txt" '0x600: 512 bytes (512 B), requested 300, age 70 ns, tag 0, id 0xa3'
[ "$(grep -c 'failed at op' "$tmp/small.txt")" = 1 ] || fail "expected one explanation"
$replay --pool-size 4K --explain-oom --json --quiet "$tmp/small.trace" > "$tmp/small.json" ||
  fail "--explain-oom --json exited $?"
for kv in '"op": 6' '"id": 164' '"requested": 2000' '"need_bytes": 2048' \
          '"free_bytes": 1280' '"largest_free": 1024' '"offset": 0' \
          '"size": 2048' '"live_bytes": 768' '"live_allocs": 2' \
          '{"offset": 1024, "size": 256, "in_window": 256, "requested": 200, "age_ns": 90, "tag": 2, "id": 161}' \
          '{"offset": 1536, "size": 512, "in_window": 512, "requested": 300, "age_ns": 70, "tag": 0, "id": 163}'; do
  has "$tmp/small.json" "$kv"
done
# Without the option the output is as before: no explanation.
$replay --pool-size 4K --quiet "$tmp/small.trace" > "$tmp/plain.txt"
$replay --pool-size 4K --quiet --json "$tmp/small.trace" > "$tmp/plain.json"
! grep -q 'failed at op' "$tmp/plain.txt" || fail "an explanation without --explain-oom"
! grep -q 'oom_explained' "$tmp/plain.json" || fail "oom_explained without --explain-oom"
# Bestfit needs a run, and says how long the longest free one is. In a
# pool of 16 units a request of 2 or more is an eighth of it, and ends
# its run: 0xa0 takes [0xc00, 0x1000), 0xa1 0, 0xa2 [0x400, 0xc00) and
# 0xa3 [0x200, 0x400), so 1280 bytes are free in [0x100, 0x200) and
# [0xc00, 0x1000). Of the runs of 2048 bytes, [0x800, 0x1000) holds the
# least: 1024 bytes of 0xa2.
$replay --pool-size 4K --explain-oom --policy bestfit --quiet "$tmp/small.trace" > "$tmp/fit.txt"
has "$tmp/fit.txt" 'needs a run of 2048 bytes'
has "$tmp/fit.txt" 'pool: 1280 bytes free (1.2 KiB), largest free block 1024 bytes (1.0 KiB), largest free run 1024 bytes'
has "$tmp/fit.txt" 'cheapest window: [0x800, 0x1000), 1024 bytes live (1.0 KiB) in 1 allocation'
has "$tmp/fit.txt" '0x400: 2048 bytes (2.0 KiB), 1024 in the window, requested 2048, age 80 ns, tag 0, id 0xa2'

# 1b. The same trace in v2 with call sites: each allocation listed names
# its site, by number and by its first frame outside the framework (0xa1
# site 2, 0xa3 site 1); one without a site names none.
cat > "$tmp/sites.trace" <<'EOF'
# gpubuddy-trace v2
# site 1 /bin/app+0x10 main
# site 2 /bin/app+0x30 load
1 0 alloc 0xa0 1000 1 0x0 1
2 10 alloc 0xa1 200 2 0x0 2
3 20 alloc 0xa2 2048 0 0x0
4 30 alloc 0xa3 300 0 0x0 1
5 40 free 0xa0 1000 1 0x0 1
6 100 alloc 0xa4 2000 3 0x0 2
EOF
$replay --pool-size 4K --min-block 256 --explain-oom --quiet "$tmp/sites.trace" \
  > "$tmp/sites.txt" || fail "--explain-oom with sites exited $?"
has "$tmp/sites.txt" '0x400: 256 bytes (256 B), requested 200, age 90 ns, tag 2, id 0xa1, site 2 (app+0x30 load)'
has "$tmp/sites.txt" '0x600: 512 bytes (512 B), requested 300, age 70 ns, tag 0, id 0xa3, site 1 (app+0x10 main)'
$replay --pool-size 4K --explain-oom --json --quiet "$tmp/sites.trace" > "$tmp/sites.json" ||
  fail "--explain-oom --json with sites exited $?"
has "$tmp/sites.json" '"age_ns": 90, "tag": 2, "id": 161, "site": 2, "site_name": "app+0x30 load"}'
has "$tmp/sites.json" '"age_ns": 70, "tag": 0, "id": 163, "site": 1, "site_name": "app+0x10 main"}'

# 2. A sample trace into a pool far too small. Each explanation: the
# largest free block (bestfit: run) is smaller than what was needed, and
# the listed bytes in the window add up to its live bytes when all are
# listed (at most 8).
check() { # file
  awk '
    function fin() {
      if (live != "" && n == allocs && sum != live) {
        printf "op %s: listed %d bytes, window %d\n", op, sum, live; bad++
      }
    }
    /failed at op/ { fin(); op = $4; need = ""; live = ""; sum = 0; n = 0; seen++ }
    /needs a (block|run) of/ { for (i = 1; i < NF; i++) if ($i == "of") need = $(i + 1) }
    /largest free (block|run)/ {
      for (i = 1; i < NF; i++)
        if ($i == "free" && ($(i + 1) == "block" || $(i + 1) == "run")) lf = $(i + 2)
      if (need != "" && lf + 0 >= need + 0) {
        printf "op %s: largest free %s >= needed %s\n", op, lf, need; bad++
      }
    }
    /cheapest window:/ {
      for (i = 1; i < NF; i++) {
        if ($i == "live") live = $(i - 2)
        if ($i == "in") allocs = $(i + 1)
      }
    }
    /^ *0x[0-9a-f]*: / {
      n++
      if ($0 ~ / in the window/) { for (i = 1; i < NF; i++) if ($(i + 1) == "in" && $(i + 2) == "the") w = $i; sum += w }
      else sum += $2
    }
    END { fin(); printf "%d explained\n", seen; exit bad > 0 }
  ' "$1"
}
gpt=$srcdir/samples/traces/torch-gpt.trace.gz
for pol in buddy trim bestfit; do
  $replay --pool-size 64M --policy $pol --explain-oom --quiet "$gpt" > "$tmp/gpt-$pol.txt" ||
    fail "$pol: replay exited $?"
  [ "$(grep -c 'failed at op' "$tmp/gpt-$pol.txt")" = 10 ] || fail "$pol: not 10 explanations"
  grep -q '^why (the first 10 of [0-9]*; --explain-oom=all' "$tmp/gpt-$pol.txt" ||
    fail "$pol: no count of the failures left unexplained"
  out=$(check "$tmp/gpt-$pol.txt") || fail "$pol: $out"
done
$replay --pool-size 64M --explain-oom=all --quiet "$gpt" > "$tmp/all.txt" || fail "=all exited $?"
n=$(sed -n 's/^failed allocations (OOM): \([0-9]*\).*/\1/p' "$tmp/all.txt")
[ "$(grep -c 'failed at op' "$tmp/all.txt")" = "$n" ] || fail "=all did not explain all $n"
out=$(check "$tmp/all.txt") || fail "=all: $out"
$replay --pool-size 64M --explain-oom=3 --policy all --json --quiet "$gpt" > "$tmp/all.json" ||
  fail "--policy all --json exited $?"
[ "$(grep -c '"oom_explained": \[' "$tmp/all.json")" = 3 ] || fail "a run lacks oom_explained"
[ "$(grep -c '"requested":' "$tmp/all.json")" -ge 9 ] || fail "fewer than 3 explanations per run"

# 3. Usage errors: one line naming --help, exit 2.
for bad in x 0 -1 1x ''; do
  $replay --explain-oom="$bad" --pool-size 4K "$tmp/small.trace" > /dev/null 2> "$tmp/bad.err"
  rc=$?
  [ $rc = 2 ] || fail "--explain-oom='$bad': exit $rc, expected 2"
  [ "$(wc -l < "$tmp/bad.err")" = 1 ] || fail "--explain-oom='$bad': not one line: $(cat "$tmp/bad.err")"
  case $(cat "$tmp/bad.err") in
    *"(try 'gpubuddy-replay --help')") ;;
    *) fail "--explain-oom='$bad': '$(cat "$tmp/bad.err")' does not end by pointing at --help" ;;
  esac
done
$replay --help | grep -q -- '--explain-oom' || fail "--help does not list --explain-oom"

if [ $fails != 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo ok
