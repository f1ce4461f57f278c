#!/bin/sh
# SPDX-License-Identifier: MIT
# func-length.sh [MAX] [DIR...]: lists C and Python functions longer than
# MAX lines (default 100) under DIR (default lib tools viewer bench
# python/gpubuddy samples), longest first, and exits 1 if there is any.
# A C function runs from its signature's first line (at column 0, with a
# "(", outside any braces) to the brace that closes its body, both
# counted. Braces are counted outside string and character literals and
# // comments; struct, enum and initializer bodies are not functions.
# Python files are *.py and files without a dot whose first line is a
# python shebang; a function (or method, nested ones too) runs from its
# "def" line to its last, as python3's ast gives them (end_lineno -
# lineno + 1). Without python3 the Python files are left out, and said so.
set -eu
max=${1:-100}
case $max in ''|*[!0-9]*) echo "usage: $0 [MAX] [DIR...]" >&2; exit 2 ;; esac
[ $# -gt 0 ] && shift
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ $# -gt 0 ] || set -- lib tools viewer bench python/gpubuddy samples
out=${TMPDIR:-/tmp}/func-length.$$
trap 'rm -f "$out" "$out.py"' EXIT
{
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
  }'
find "$@" -type f \( -name '*.py' -o ! -name '*.*' \) | sort > "$out.py"
if ! command -v python3 > /dev/null 2>&1; then
  [ -s "$out.py" ] && echo "func-length.sh: no python3: Python files not measured" >&2
elif [ -s "$out.py" ]; then
  python3 - "$max" "$out.py" <<'PY'
import ast, sys
limit = int(sys.argv[1])
for path in open(sys.argv[2]).read().splitlines():
    with open(path, "rb") as f:
        first = f.readline()
        if not path.endswith(".py") and not (
                first.startswith(b"#!") and b"python" in first):
            continue
        text = first + f.read()
    try:
        tree = ast.parse(text, path)
    except (SyntaxError, ValueError) as e:  # listed, so that it fails
        print("0 %s:%s not parsed by python3's ast (%s)"
              % (path, getattr(e, "lineno", 0), type(e).__name__))
        continue
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > limit:
                print("%d %s:%d %s" % (n, path, node.lineno, node.name))
PY
fi
} | sort -rn > "$out" || true
if [ -s "$out" ]; then
  echo "functions longer than $max lines:"
  cat "$out"
  exit 1
fi
echo "no function longer than $max lines"
