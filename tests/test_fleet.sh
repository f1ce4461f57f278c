#!/bin/sh
# SPDX-License-Identifier: MIT
# test_fleet.sh: a fleet across machines, three network namespaces as
# hosts. Each host has its own /dev/shm and host name (unshare --mount
# --uts), two publishing processes as ranks of one job (RANK set, as
# torchrun does; small pools, so some allocations fail) and one
# `gpubuddy-relay --all --metrics` on its own address. A fourth namespace
# runs one real Prometheus scraping the three, and the viewer. Checked:
#   1. every series carries host, pool, device and rank, and nothing
#      else of ours (no pid: it is on gpubuddy_pool_info alone);
#   2. Prometheus has all six pools, two per host, one per rank, and the
#      latest failed request beside the largest free block;
#   3. a killed relay shows as up == 0 for its host only, and (once the
#      viewer knows the words: `gpubuddy-view --help` says "not
#      answering") as "not answering" in the viewer's grid.
# Traffic stays on addresses this test creates (10.250.H.0/30 on veth
# pairs between namespaces it creates); nothing goes out. Skips (77)
# without root, ip netns, unshare or prometheus. Every wait is bounded.
set -u
here=$(pwd)
relay=$here/tools/gpubuddy-relay churn=$here/samples/gpubuddy-sample-churn
view=$here/gpubuddy-view
[ -x "$relay" ] && [ -x "$churn" ] || { echo "SKIP: not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
for c in ip unshare prometheus python3; do
  command -v $c >/dev/null 2>&1 || { echo "SKIP: no $c"; exit 77; }
done
# A host needs its own /dev/shm and name: a private mount namespace.
unshare --mount --uts --propagation private \
  sh -c 'mount -t tmpfs gpbprobe /dev/shm && hostname gpb-probe' 2>/dev/null ||
  { echo "SKIP: unshare --mount --uts with a tmpfs fails here"; exit 77; }
id=$$
mon=gpbf$id-mon
ns_of() { echo "gpbf$id-h$1"; }
ip netns add "$mon" 2>/dev/null || { echo "SKIP: cannot make a network namespace"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-fleet.XXXXXX")
chmod 755 "$tmp"
: > "$tmp/pids"
cleanup() {
  for p in $(cat "$tmp/pids"); do kill "$p" 2>/dev/null; done
  sleep 0.5
  for p in $(cat "$tmp/pids"); do kill -9 "$p" 2>/dev/null; done
  for h in 0 1 2; do ip netns del "$(ns_of $h)" 2>/dev/null; done
  ip netns del "$mon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tok=fleet-$id
inmon() { ip netns exec "$mon" "$@"; }
ip -n "$mon" link set lo up

# Each host: a veth pair to the monitoring namespace, then its programs.
cat > "$tmp/host.sh" <<'EOF2'
# host.sh H TMP RELAY CHURN TOKEN: runs in host H's namespaces.
h=$1 tmp=$2 relay=$3 churn=$4 tok=$5
mount -t tmpfs -o size=64m gpbfleet /dev/shm || exit 1
hostname "fleet-host$h" || exit 1
for r in $((2 * h)) $((2 * h + 1)); do
  RANK=$r "$churn" --backend virtual --pool-size 4M --max-size 1M --max-live 64 \
    --steps 100000000 --pace-us 500 --seed $((r + 1)) --publish "train.r$r.0" \
    --quiet > /dev/null 2>&1 &
  echo $! >> "$tmp/pids"
done
exec "$relay" --all --listen "10.250.$h.2:7461" --metrics "10.250.$h.2:9464" \
  --allow-remote --token "$tok" -q
EOF2
for h in 0 1 2; do
  ns=$(ns_of $h)
  ip netns add "$ns" || { fail "ip netns add $ns"; exit 1; }
  ip link add "gpbf${id}m$h" type veth peer name "gpbf${id}h$h" &&
    ip link set "gpbf${id}m$h" netns "$mon" && ip link set "gpbf${id}h$h" netns "$ns" &&
    ip -n "$mon" addr add "10.250.$h.1/30" dev "gpbf${id}m$h" &&
    ip -n "$ns" addr add "10.250.$h.2/30" dev "gpbf${id}h$h" &&
    ip -n "$mon" link set "gpbf${id}m$h" up && ip -n "$ns" link set "gpbf${id}h$h" up &&
    ip -n "$ns" link set lo up || { echo "SKIP: cannot make veth pairs"; exit 77; }
  ip netns exec "$ns" unshare --mount --uts --propagation private \
    sh "$tmp/host.sh" $h "$tmp" "$relay" "$churn" "$tok" 2> "$tmp/host$h.err" &
  echo $! >> "$tmp/pids"
  eval "relay$h=$!"
done

get() { # URL: the body, with the fleet's token
  inmon python3 -c '
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
try:
    sys.stdout.write(urllib.request.urlopen(req, timeout=5).read().decode())
except Exception as e:
    sys.stderr.write("%s\n" % e); sys.exit(1)' "$1" "$tok"
}
i=0
until get "http://10.250.2.2:9464/metrics" > "$tmp/m2.txt" 2>/dev/null &&
      [ "$(grep -c '^gpubuddy_pool_size_bytes' "$tmp/m2.txt")" = 2 ]; do
  i=$((i + 1))
  [ $i -lt 50 ] || { cat "$tmp"/host*.err; fail "host 2's /metrics never listed its two pools"; exit 1; }
  sleep 0.2
done

# 1. The label set, as a host serves it.
grep -q '^gpubuddy_pool_size_bytes{host="fleet-host2",pool="train.r5.0",device="0",rank="5"} 4194304$' "$tmp/m2.txt" ||
  fail "host 2's series: $(grep '^gpubuddy_pool_size_bytes' "$tmp/m2.txt")"
bad=$(grep -v '^#' "$tmp/m2.txt" | grep -v '^gpubuddy_pool_info' | sed -n 's/^[a-z_]*{\(.*\)}.*/\1/p' |
      tr ',' '\n' | sed 's/=.*//' | sort -u | grep -vx 'host\|pool\|device\|rank\|state\|order')
[ -z "$bad" ] || fail "labels beyond host, pool, device, rank (and state, order): $bad"
if command -v promtool >/dev/null 2>&1; then
  promtool check metrics < "$tmp/m2.txt" > "$tmp/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$tmp/promtool.out")"
fi

# 2. One Prometheus for the fleet, in the monitoring namespace.
cat > "$tmp/prom.yml" <<EOF2
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: gpubuddy
    authorization:
      credentials: $tok
    static_configs:
      - targets: ["10.250.0.2:9464", "10.250.1.2:9464", "10.250.2.2:9464"]
EOF2
inmon prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address=127.0.0.1:9090 > "$tmp/prom.log" 2>&1 &
echo $! >> "$tmp/pids"
q() { # EXPR: "labels value" lines of an instant query, sorted
  inmon python3 -c '
import json, sys, urllib.parse, urllib.request
u = "http://127.0.0.1:9090/api/v1/query?query=" + urllib.parse.quote(sys.argv[1])
try:
    r = json.load(urllib.request.urlopen(u, timeout=5))["data"]["result"]
except Exception:
    sys.exit(0)
for x in r:
    m = x["metric"]
    print(",".join("%s=%s" % (k, m[k]) for k in sorted(m)), x["value"][1])' "$1" | sort
}
wait_for() { # EXPR WANT: until q EXPR prints WANT (bounded: 40 s)
  i=0
  while [ $i -lt 80 ]; do
    got=$(q "$1")
    [ "$got" = "$2" ] && return 0
    sleep 0.5; i=$((i + 1))
  done
  return 1
}
want="host=fleet-host0 2
host=fleet-host1 2
host=fleet-host2 2"
wait_for 'count by (host) (gpubuddy_pool_size_bytes)' "$want" ||
  fail "pools per host: '$got'; $(tail -3 "$tmp/prom.log")"
got=$(q 'gpubuddy_pool_size_bytes{rank="3"}')
[ "$got" = "__name__=gpubuddy_pool_size_bytes,device=0,host=fleet-host1,instance=10.250.1.2:9464,job=gpubuddy,pool=train.r3.0,rank=3 4194304" ] ||
  fail "rank 3's series: '$got'"
got=$(q 'count(count by (rank) (gpubuddy_pool_up == 1))')
[ "$got" = " 6" ] || fail "ranks up: '$got'"
# A 4 MiB pool under this churn fails requests: the latest failed one is
# there, larger than the largest free block was when it failed.
wait_for 'count(gpubuddy_last_failed_request_bytes > 0)' " 6" ||
  fail "failed requests known for '$got' of 6 pools"
got=$(q 'count(gpubuddy_last_failed_request_bytes > on(host, pool, device, rank) gpubuddy_pool_size_bytes)')
[ -z "$got" ] || [ "$got" = " 0" ] || fail "a failed request larger than its pool: '$got'"
# The dashboard (docs/grafana-gpubuddy.json), as Grafana would ask with
# every variable at All: each variable lists values and each query has
# series (a query that matches nothing is a broken panel).
dash=$(cd "$(dirname "$0")/.." && pwd)/docs/grafana-gpubuddy.json
out=$(inmon python3 - "$dash" <<'PY'
import json, re, sys, urllib.parse, urllib.request
api = "http://127.0.0.1:9090/api/v1/"
def ask(path):
    return json.load(urllib.request.urlopen(api + path, timeout=5))["data"]
def fill(e):
    return re.sub(r"\$\{?(job|host|rank|pool)\}?", ".*", e)
d = json.load(open(sys.argv[1]))
for v in d["templating"]["list"]:
    m = re.match(r"label_values\((.*), (\w+)\)$", v.get("query", ""))
    if v["type"] == "query" and (not m or not ask("label/%s/values?match[]=%s" % (
            m.group(2), urllib.parse.quote(fill(m.group(1)))))):
        print("variable %s: no values for %s" % (v["name"], v["query"]))
for p in d["panels"]:
    for t in p["targets"]:
        if not ask("query?query=" + urllib.parse.quote(fill(t["expr"])))["result"]:
            print("panel '%s': no series for %s" % (p["title"], t["expr"]))
PY
)
[ -z "$out" ] || fail "the dashboard: $out"

# 3. A relay dies: Prometheus marks its host down, the others stay up.
kill "$relay2"
want="__name__=up,instance=10.250.0.2:9464,job=gpubuddy 1
__name__=up,instance=10.250.1.2:9464,job=gpubuddy 1
__name__=up,instance=10.250.2.2:9464,job=gpubuddy 0"
wait_for 'up' "$want" || fail "up after killing host 2's relay: '$got'"
# (--help wraps its lines: "not" may end one.)
if [ -x "$view" ] && "$view" --help 2>&1 | tr -s ' \n' '  ' | grep -q 'not answering'; then
  inmon "$view" --connect 10.250.0.2:7461,10.250.1.2:7461,10.250.2.2:7461 --token "$tok" \
    --headless --png "$tmp/grid.png" --json > "$tmp/grid.json" 2> "$tmp/grid.err" ||
    fail "the viewer's grid with one relay gone: $(cat "$tmp/grid.err")"
  grep -q 'not answering' "$tmp/grid.json" || fail "the grid does not say 'not answering': $(head -c 400 "$tmp/grid.json")"
else
  echo "note: gpubuddy-view does not know 'not answering' yet: its part is not run"
fi
[ $fails = 0 ] && echo "fleet: 3 hosts, 6 ranks, Prometheus saw all and the killed relay as up 0"
exit $fails
