#!/bin/sh
# SPDX-License-Identifier: MIT
# torch-ddp.sh OUT: DDP on every GPU of the machine (torchrun, NCCL), once
# with PyTorch's allocator and once with one gpubuddy pool per rank; the
# losses must be equal and each rank's pool must be readable live under
# its own name. With one GPU it runs two ranks on it with gloo. Then twice
# more with enable(plan_cache=OUT/ddp.plan): the first run writes each
# rank's plan at exit, the second follows it; its losses must be equal
# too, and every request of the second run placed where planned.
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/torch-env.sh"
export GPB_STAT="$work/build/tools/gpubuddy-stat"
export GPB_VIEW="$work/build/gpubuddy-view"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=$(nvidia-smi -L | wc -l)
if [ "$n" -lt 2 ]; then export BACKEND=gloo; n=2; fi
nvidia-smi -L | tee "$out/gpus.txt"
echo "backend: ${BACKEND:-nccl}, $n ranks" | tee -a "$out/gpus.txt"
# The fleet view: one metrics relay for every pool on the machine.
"$work/build/tools/gpubuddy-relay" --metrics 127.0.0.1:0 --port-file "$out/metrics.port" -q &
relay=$!
i=0; while [ ! -s "$out/metrics.port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
export GPB_METRICS_URL="http://127.0.0.1:$(cat "$out/metrics.port")/metrics"
rm -f "$out"/ddp.plan.* "$out"/plan-*.json
for a in default gpubuddy gpubuddy-cache gpubuddy-cache2; do
  torchrun --standalone --nproc_per_node="$n" "$work/src/samples/torch/ddp.py" \
    "${a%2}" "$out" > "$out/run-$a.log" 2>&1 || { tail -20 "$out/run-$a.log"; exit 1; }
  if [ "$a" = gpubuddy-cache ]; then
    cp "$out/losses-gpubuddy-cache.json" "$out/losses-cache1.json"
  fi
done
ls "$out"/ddp.plan.* | sed 's/^/plan written: /'
grep -h '^gpubuddy: device' "$out/run-gpubuddy-cache.log"
kill $relay 2>/dev/null
grep -c '^gpubuddy_pool_size_bytes{pool="ddp' "$out/fleet-metrics.txt" 2>/dev/null | sed 's/^/pools in the metrics: /'
cat "$out/fleet-stat-all.txt" 2>/dev/null
python3 -c 'import json,sys
g = json.load(open(sys.argv[1]))
if isinstance(g, dict): sys.exit("viewer grid: %s" % g)
for p in g: s = p.get("stats", {}); print("grid:", p.get("name"), "used", s.get("used_bytes"), "live", s.get("live_allocs"))' "$out/fleet-grid.json" || true
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
d = json.load(open(os.path.join(out, "losses-default.json")))
g = json.load(open(os.path.join(out, "losses-gpubuddy.json")))
print("losses equal:", d == g, "first", d[0], g[0], "last", d[-1], g[-1])
c1 = json.load(open(os.path.join(out, "losses-cache1.json")))
c2 = json.load(open(os.path.join(out, "losses-gpubuddy-cache.json")))
print("plan_cache losses equal: recording", c1 == d, "following", c2 == d)
placed = True
for f in sorted(os.listdir(out)):
    if f.startswith("plan-"):
        p = json.load(open(os.path.join(out, f)))
        pl = p["plan"] or {}
        placed &= bool(pl) and pl["placed"] == pl["requests"]
        print(f, "following:", pl and "%d of %d requests where planned, %d entries"
              % (pl["placed"], pl["requests"], pl["entries"]))
d = d == g == c1 == c2 and placed
for f in sorted(os.listdir(out)):
    if f.startswith("stat-"):
        s = json.load(open(os.path.join(out, f)))
        print(f, s["name"], "gpubuddy-stat rc", s["rc"], s["stdout"][:160] or s["stderr"][:160])
sys.exit(0 if d else 1)
PY
