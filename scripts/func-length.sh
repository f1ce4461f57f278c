#!/bin/sh
# SPDX-License-Identifier: MIT
# func-length.sh [MAX] [DIR...]: lists C functions longer than MAX lines
# (default 100) under DIR (default lib tools viewer bench), longest first,
# and exits 1 if there is any. A function runs from its signature's first
# line (at column 0, with a "(", outside any braces) to the brace that
# closes its body, both counted. Braces are counted outside string and
# character literals and // comments; struct, enum and initializer
# bodies are not functions.
set -eu
max=${1:-100}
case $max in ''|*[!0-9]*) echo "usage: $0 [MAX] [DIR...]" >&2; exit 2 ;; esac
[ $# -gt 0 ] && shift
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ $# -gt 0 ] || set -- lib tools viewer bench
find "$@" -name '*.c' -type f | sort | xargs awk -v max="$max" '
  FNR == 1 { depth = 0; sig = 0; start = 0 }
  {
    line = $0
    gsub(/\\./, "", line)                 # escapes, then literals
    gsub(/"[^"]*"/, "", line); gsub(/\047[^\047]*\047/, "", line)
    sub(/\/\/.*/, "", line)
    if (depth == 0 && /^[A-Za-z_]/ && line ~ /\(/ && line !~ /;[ \t]*$/ &&
        line !~ /=/ && line !~ /^(struct|enum|union|typedef)/) {
      sig = FNR; name = line; sub(/\(.*/, "", name)
      n = split(name, w, /[ *]+/); name = w[n]
    }
    opens = gsub(/\{/, "{", line); closes = gsub(/\}/, "}", line)
    if (depth == 0 && opens > closes && sig) start = sig
    depth += opens - closes
    if (depth == 0 && start) {
      len = FNR - start + 1
      if (len > max) printf "%d %s:%d %s\n", len, FILENAME, start, name
      start = 0; sig = 0
    }
    if (depth == 0 && line ~ /;[ \t]*$/) sig = 0
  }' | sort -rn > "${TMPDIR:-/tmp}/func-length.$$" || true
if [ -s "${TMPDIR:-/tmp}/func-length.$$" ]; then
  echo "functions longer than $max lines:"
  cat "${TMPDIR:-/tmp}/func-length.$$"
  rm -f "${TMPDIR:-/tmp}/func-length.$$"
  exit 1
fi
rm -f "${TMPDIR:-/tmp}/func-length.$$"
echo "no function longer than $max lines"
