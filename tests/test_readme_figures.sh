#!/bin/sh
# SPDX-License-Identifier: MIT
# test_readme_figures.sh: the README's figures are the docs' current ones.
# Each check reads the figure in README.md and the table it comes from
# in docs/, and they must agree (the README had a GPU-check date two
# runs old, "169 M" allocs a second found in no table, colour keys 1-4
# for five modes, and bestfit's tail from its two best machines only).
#   1. The GPU check: device and steps = docs/GPU.md's Results table.
#   2. The viewer's colour keys: as many as VIEWER.md's --color modes,
#      in the same order.
#   3. Threads: the arenas' ratios and ops/s, and the one lock's ratios,
#      each in PERFORMANCE.md's Throughput table.
#   4. Bestfit's device tail and median ratios: every number quoted is in
#      PERFORMANCE.md's "Best fit against buddy" table.
set -u
srcdir=${srcdir:-.}
top=$(cd "$srcdir" && pwd)
readme=$top/README.md docs=$top/docs
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# The README as one line: figures may wrap.
flat=$(tr '\n' ' ' < "$readme" | tr -s ' ')

# 1. GPU check: the device and the steps of docs/GPU.md's Results.
got=$(printf '%s' "$flat" | sed -n 's/.*docs\/GPU.md has the results (\([A-Z0-9]*\): \([0-9]*\/[0-9]*\) steps).*/\1 \2/p')
res=$(sed -n '/^## Results/,/^## /p' "$docs/GPU.md")
dev=$(printf '%s\n' "$res" | sed -n 's/^Measured on one NVIDIA \([A-Z0-9]*\) .*/\1/p' | head -n 1)
steps=$(printf '%s\n' "$res" | sed -n 's/^| \([0-9]*\/[0-9]*\) pass .*/\1/p' | head -n 1)
want="$dev $steps"
[ -n "$got" ] && [ "$got" = "$want" ] || fail "GPU check: README '$got', docs/GPU.md '$want'"

# 2. Colour keys.
keys=$(printf '%s' "$flat" | sed -n 's/.*`1`-`\([0-9]\)` colour by \([a-z/]*\),.*/\1 \2/p')
modes=$(sed -n 's/.*`--color \([a-z|]*\)`.*/\1/p' "$docs/VIEWER.md" | head -n 1)
n=$(printf '%s' "$modes" | tr '|' '\n' | grep -c .)
[ "$keys" = "$n $(printf '%s' "$modes" | tr '|' '/')" ] ||
  fail "colour keys: README '$keys', VIEWER.md --color $modes ($n)"

# 3. Threads: each end of the README's ranges is one host's cell of the
#    table's row (cells "H200 / H100").
t=$(printf '%s' "$flat" | sed -n 's/.*16 threads got \([0-9.]*\) to \([0-9.]*\) times the throughput of one with arenas (\([0-9.]*\) to \([0-9.]*\) M allocs and frees per second), against \([0-9.]*\) to \([0-9.]*\) times with one lock.*/\1 \2 \3 \4 \5 \6/p')
set -- $t
[ $# = 6 ] || fail "threads: no figure found in README.md"
cells() { # ROW COLUMN: the row's cell, split at " / " into words
  grep "^| $1 |" "$docs/PERFORMANCE.md" | head -n 1 | cut -d'|' -f"$2" |
    sed 's/M ops\/s//g; s/x//g; s/\///g'
}
has() { # WORD LIST...: the word is one of the list
  w=$1; shift
  for x in "$@"; do [ "$x" = "$w" ] && return 0; done
  return 1
}
if [ $# = 6 ]; then
  ratio=$(cells gpubuddy-arenas 5) ops=$(cells gpubuddy-arenas 4)
  lock=$(cells "gpubuddy (one lock)" 5)
  for v in "$1" "$2"; do has "$v" $ratio || fail "threads: arenas' ${v}x is not in PERFORMANCE.md's row ($ratio)"; done
  for v in "$3" "$4"; do has "$v" $ops || fail "threads: arenas' $v M ops/s is not in PERFORMANCE.md's row ($ops)"; done
  for v in "$5" "$6"; do has "$v" $lock || fail "threads: one lock's ${v}x is not in PERFORMANCE.md's row ($lock)"; done
fi

# 4. Bestfit against buddy: the sentences' numbers, each in the table.
table=$(sed -n '/^## Best fit against buddy/,/^## /p' "$docs/PERFORMANCE.md" | grep '^| ')
sent=$(printf '%s' "$flat" | sed -n 's/.*\(bestfit.s median allocation takes .*rows are at most [0-9.]* us p99.9)\).*/\1/p')
[ -n "$sent" ] || fail "bestfit: the median and tail sentences were not found"
for x in $(printf '%s' "$sent" | grep -o '[0-9][0-9]*\.[0-9][0-9]*\|[0-9]\{3,\}' | sort -u); do
  printf '%s' "$table" | grep -q "[^0-9.]$x[^0-9]" || fail "bestfit: $x is not in PERFORMANCE.md's table"
done
sed -n '/^## Best fit against buddy/,/^## /p' "$docs/PERFORMANCE.md" | tr '\n' ' ' |
  grep -q "at most 1.06 us in 58 of 60 trace rows" ||
  fail "bestfit: '58 of the 60 rows' no longer in PERFORMANCE.md"
printf '%s' "$flat" | grep -q "169 M" && fail "README still quotes 169 M"

[ $fails = 0 ] || exit 1
echo "ok: the README's GPU check, colour keys, thread and bestfit figures are the docs'"
