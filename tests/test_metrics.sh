#!/bin/sh
# SPDX-License-Identifier: MIT
# test_metrics.sh: gpubuddy-relay --metrics over two live pools, then a real
# Prometheus scraping it.
#   1. /metrics names both pools with their pids, in families that
#      `promtool check metrics` accepts (when promtool is installed);
#      other paths are 404; a token, when set, is required as a Bearer
#      header; a non-loopback address is refused without --allow-remote.
#   2. With Debian's prometheus installed (skipped otherwise, exit 77 at
#      the end): a real server scrapes the relay every second and its HTTP
#      API gives back the pool's size and a growing alloc counter.
# Every loop here is bounded; the test ends by itself within a minute.
set -u
here=$(pwd)
relay=$here/tools/gpubuddy-relay
churn=$here/samples/gpubuddy-sample-churn
[ -x "$relay" ] && [ -x "$churn" ] || { echo "SKIP: not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-metrics.XXXXXX")
pids=
cleanup() { for p in $pids; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
get() { # URL [HEADER]: body on stdout, HTTP status on stderr's last line
  python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    k, v = sys.argv[2].split(": ", 1)
    req.add_header(k, v)
try:
    r = urllib.request.urlopen(req, timeout=10)
    sys.stdout.write(r.read().decode()); code = r.status
except urllib.error.HTTPError as e:
    code = e.code
sys.stderr.write("%d\n" % code)
PY
}
a=metrics-a-$$ b=metrics-b-$$
for n in $a $b; do
  "$churn" --backend virtual --pool-size 64M --steps 100000000 --pace-us 300 --publish "$n" --quiet > /dev/null 2>&1 &
  pids="$pids $!"
done
pa=$(echo $pids | cut -d' ' -f1)
"$relay" --metrics 127.0.0.1:0 --port-file "$tmp/port" -q 2> "$tmp/relay.err" &
pids="$pids $!"
i=0; while [ ! -s "$tmp/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
port=$(cat "$tmp/port" 2>/dev/null)
[ -n "$port" ] || { cat "$tmp/relay.err"; echo "FAIL: the relay wrote no port"; exit 1; }
sleep 0.5
get "http://127.0.0.1:$port/metrics" > "$tmp/m.txt" 2> "$tmp/code" || true
[ "$(tail -1 "$tmp/code")" = 200 ] || fail "/metrics: HTTP $(tail -1 "$tmp/code")"
host=$(hostname)
grep -q "^gpubuddy_pool_size_bytes{host=\"$host\",pool=\"$a\",device=\"0\"} 67108864\$" "$tmp/m.txt" ||
  fail "no pool size for $a: $(grep pool_size "$tmp/m.txt")"
# The pid only on the info series (it changes at every restart).
grep -q "^gpubuddy_pool_info{host=\"$host\",pool=\"$a\",device=\"0\",pid=\"$pa\",policy=\"[a-z]*\",backend=\"virtual\"} 1\$" "$tmp/m.txt" ||
  fail "no info series for $a: $(grep pool_info "$tmp/m.txt")"
grep -v '^gpubuddy_pool_info' "$tmp/m.txt" | grep -q 'pid=' && fail "pid outside gpubuddy_pool_info"
grep -q "^gpubuddy_pool_up{host=\"$host\",pool=\"$b\"" "$tmp/m.txt" || fail "no series for $b"
for fam in gpubuddy_pool_bytes gpubuddy_alloc_failures_total gpubuddy_largest_free_block_bytes \
           gpubuddy_external_fragmentation_ratio gpubuddy_free_blocks; do
  grep -q "^# TYPE $fam " "$tmp/m.txt" || fail "no family $fam"
done
grep -q 'state="waste"' "$tmp/m.txt" || fail "no waste state"
if command -v promtool >/dev/null 2>&1; then
  promtool check metrics < "$tmp/m.txt" > "$tmp/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$tmp/promtool.out")"
fi
get "http://127.0.0.1:$port/other" > /dev/null 2> "$tmp/code" || true
[ "$(tail -1 "$tmp/code")" = 404 ] || fail "/other: HTTP $(tail -1 "$tmp/code")"

# A token is required once set; a public address needs --allow-remote.
"$relay" --metrics 127.0.0.1:0 --port-file "$tmp/port2" --token s3cret -q 2>/dev/null &
pids="$pids $!"
i=0; while [ ! -s "$tmp/port2" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
p2=$(cat "$tmp/port2")
get "http://127.0.0.1:$p2/metrics" > /dev/null 2> "$tmp/code" || true
[ "$(tail -1 "$tmp/code")" = 401 ] || fail "no token: HTTP $(tail -1 "$tmp/code")"
get "http://127.0.0.1:$p2/metrics" "Authorization: Bearer s3cret" > /dev/null 2> "$tmp/code" || true
[ "$(tail -1 "$tmp/code")" = 200 ] || fail "with the token: HTTP $(tail -1 "$tmp/code")"
timeout 300 "$relay" --metrics 0.0.0.0:0 -q 2> "$tmp/err"; rc=$? # a hang guard
[ $rc = 1 ] && grep -q 'not a loopback' "$tmp/err" || fail "0.0.0.0 without --allow-remote: exit $rc, $(cat "$tmp/err")"

# 2. A real Prometheus server.
if ! command -v prometheus >/dev/null 2>&1; then
  [ $fails = 0 ] || exit 1
  echo "SKIP: no prometheus (apt-get install prometheus); the exposition checks passed"
  exit 77
fi
pp=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$tmp/prom.yml" <<EOF2
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpubuddy
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF2
prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$pp" > "$tmp/prom.log" 2>&1 &
pids="$pids $!"
q() { get "http://127.0.0.1:$pp/api/v1/query?query=$1" 2>/dev/null; }
got= i=0
while [ $i -lt 40 ]; do
  got=$(q "gpubuddy_pool_size_bytes%7Bpool%3D%22$a%22%7D" | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["data"]["result"]
    print(r[0]["value"][1] if r else "")
except Exception:
    print("")' 2>/dev/null)
  [ -n "$got" ] && break
  sleep 0.5; i=$((i + 1))
done
[ "$got" = 67108864 ] || fail "Prometheus read back '$got' for $a's pool size: $(tail -5 "$tmp/prom.log")"
allocs=$(q "gpubuddy_allocs_total%7Bpool%3D%22$b%22%7D" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else 0)')
[ "${allocs%.*}" -gt 0 ] 2>/dev/null || fail "Prometheus read back allocs_total '$allocs' for $b"
[ $fails = 0 ] && echo "metrics: exposition checked, promtool, and a real Prometheus read back size $got and $allocs allocs"
exit $fails
