#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu-check.sh: the one GPU check of gpubuddy. Builds the project with CUDA
# on a GPU machine and runs, step by step: the test suite (GPU tests for
# real), every sample on the device backend, compute-sanitizer memcheck and
# racecheck over the GPU tests, the NVTX out-of-bounds proof, the PyTorch
# pluggable-allocator check and the recording of PyTorch memory traces.
# It writes OUT/report.md (date, device, versions, each step's result and
# key output) and OUT/logs/*.log.
#
#   scripts/gpu-check.sh OUT [SRC]
#
# SRC is a `make dist` tarball (gpubuddy-*.tar.gz) or a source tree whose
# configure is already generated (the machine has no libtool to run
# autoreconf). Default: the newest .gpu/gpubuddy-*.tar.gz next to this
# script's tree, else that tree itself. Each step has its own time limit
# and the whole run a budget (GPB_CHECK_BUDGET seconds, default 470), so
# one hang cannot eat it; a failing step does not stop the others. Exit
# status: 0 when no step failed or timed out, 1 otherwise.
set -u

usage() {
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
}
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  '') usage >&2; exit 2 ;;
esac

OUT=$(mkdir -p "$1" && cd "$1" && pwd) || { echo "gpu-check: cannot use $1" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")/.." && pwd)
SRC=${2:-}
if [ -z "$SRC" ]; then
  SRC=$(ls -t "$HERE"/.gpu/gpubuddy-*.tar.gz 2>/dev/null | head -1)
  [ -n "$SRC" ] || SRC=$HERE
fi
WORK=${GPB_CHECK_WORK:-/tmp/gpb-gpu-check}
BUDGET=${GPB_CHECK_BUDGET:-470}
JOBS=${GPB_CHECK_JOBS:-16}
START=$(date +%s)
LOGS=$OUT/logs
mkdir -p "$LOGS"
RESULTS=$OUT/.results
: > "$RESULTS"

say() { echo "gpu-check: $*" >&2; }
PATH=$PATH:/usr/local/cuda/bin  # nvcc and compute-sanitizer

# step NAME LIMIT COMMAND: runs COMMAND (a bash string) in $BUILD with a
# time limit, logs to $LOGS/NAME.log, records PASS/FAIL/SKIP/TIMEOUT.
# Exit 77 from the command means SKIP. Returns the command's status.
step() {
  local name=$1 limit=$2 cmd=$3 now left t0 rc status note
  now=$(date +%s)
  left=$((BUDGET - (now - START)))
  if [ "$left" -le 10 ]; then
    echo "$name|SKIP|0|time budget spent" >> "$RESULTS"
    say "$name: SKIP (time budget spent)"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "$name (limit ${limit}s)..."
  t0=$(date +%s)
  (cd "${BUILD:-$WORK}" && timeout -k 5 "$limit" bash -c "$cmd") > "$LOGS/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124|137) status=TIMEOUT ;;
    *) status=FAIL ;;
  esac
  note=$(grep -v '^\s*$' "$LOGS/$name.log" | tail -1 | tr '|' '/' | cut -c1-120)
  echo "$name|$status|$(( $(date +%s) - t0 ))|$note" >> "$RESULTS"
  say "$name: $status"
  return $rc
}

# record NAME STATUS NOTE: a result decided by the script itself.
record() {
  echo "$1|$2|0|$3" >> "$RESULTS"
  say "$1: $2 ($3)"
}

# ---------------------------------------------------------------- machine
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1
  nvidia-smi 2>&1 | sed -n '1,12p'
  nvcc --version 2>&1 | tail -2
  compute-sanitizer --version 2>&1 | tail -1
  gcc --version 2>&1 | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
  echo "source: $SRC"
} > "$LOGS/machine.log" 2>&1
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
NGPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
CUDAVER=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
NVCCVER=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
SANVER=$(compute-sanitizer --version 2>/dev/null | tail -1)
TORCHVER=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)

# ------------------------------------------------------------------ build
rm -rf "$WORK"
mkdir -p "$WORK"
if [ -f "$SRC" ]; then
  step unpack 60 "tar -xzf '$SRC' -C '$WORK'"
  SRCDIR=$(ls -d "$WORK"/gpubuddy-*/ 2>/dev/null | head -1)
  SRCDIR=${SRCDIR%/}
else
  SRCDIR=$SRC
fi
BUILD=$WORK/build
mkdir -p "$BUILD"
if [ -z "${SRCDIR:-}" ] || [ ! -x "$SRCDIR/configure" ]; then
  record configure FAIL "no configure in '${SRCDIR:-?}': pass a make dist tarball"
  BUILT=no
else
  step configure 120 "'$SRCDIR/configure' --with-cuda NVCCFLAGS='${NVCCFLAGS:--O2 -arch=sm_90 -lineinfo}' && grep -E 'GPB_HAVE_(CUDA|NVTX)' config.h" && \
  step build 300 "make -j$JOBS" && BUILT=yes || BUILT=no
fi

if [ "$BUILT" = yes ]; then
  # Test suite: every test, GPU ones for real.
  step check 300 "make -j$JOBS check; rc=\$?; cat test-suite.log | head -200; grep -h -E '^(PASS|FAIL|SKIP|XFAIL|ERROR)' tests/*.log samples/*.log 2>/dev/null; exit \$rc"
  mkdir -p "$LOGS/tests"
  cp "$BUILD"/tests/*.log "$BUILD"/samples/*.log "$BUILD"/test-suite.log "$LOGS/tests/" 2>/dev/null

  # Every sample on the device backend.
  for s in churn:20000 cnn:200 kvcache:1000 checkerboard:1; do
    name=${s%%:*} steps=${s##*:}
    if [ -x "$BUILD/samples/gpubuddy-sample-$name" ]; then
      step "sample-$name" 60 "samples/gpubuddy-sample-$name --backend device --steps $steps"
    else
      record "sample-$name" SKIP "samples/gpubuddy-sample-$name was not built"
    fi
  done

  # compute-sanitizer over the GPU tests (libtool runs the real binaries).
  SAN="./libtool --mode=execute compute-sanitizer --error-exitcode 99"
  for t in test_gpu test_stream test_multipool; do
    [ -x "$BUILD/tests/$t" ] || { record "memcheck-$t" SKIP "not built"; continue; }
    step "memcheck-$t" 120 "GPB_TEST_SCALE=0.3 $SAN --tool memcheck --leak-check full tests/$t"
  done
  # test_gpu on one host thread here: racecheck checks the kernels, and
  # with several threads in cudaStreamSynchronize it hung inside libcuda
  # about one run in ten (see tests/test_gpu.c).
  for t in test_stream test_gpu; do
    [ -x "$BUILD/tests/$t" ] || continue
    step "racecheck-$t" 120 "GPB_TEST_SCALE=0.1 GPB_TEST_GPU_THREADS=1 $SAN --tool racecheck tests/$t"
  done
  [ -x "$BUILD/tests/test_stream" ] && \
    step "synccheck-test_stream" 120 "GPB_TEST_SCALE=0.3 $SAN --tool synccheck tests/test_stream"

  # NVTX: memcheck must flag the write past the block (it lies inside the
  # pool, so only the NVTX regions make it an error), and pass the control
  # that writes the block's last byte. The test runs memcheck itself and
  # fails when it misses the write.
  if ! grep -q 'define GPB_HAVE_NVTX 1' "$BUILD/config.h" 2>/dev/null; then
    record nvtx-oob SKIP "configure found no NVTX3 memory headers"
  elif [ -x "$BUILD/tests/test_nvtx_oob" ]; then
    step nvtx-oob 180 "./tests/test_nvtx_oob"
  fi

  # PyTorch: gpubuddy as the pluggable allocator, compared with the default.
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    step torch-compare 240 "python3 '$SRCDIR/samples/torch/train.py' --lib .libs/libgpubuddy.so --compare --steps 200 --json '$OUT/torch-compare.json'"
    step torch-traces 150 "python3 '$SRCDIR/samples/torch/record_traces.py' --out '$OUT/traces' --steps 4"
    # The Python package, installed the README's way, in fresh processes.
    # --no-build-isolation: the wheel prebuilds the C++ allocator against
    # this torch (torch-env.sh installs without it: built at first use).
    step python-install 240 "python3 -m pip install -q --no-index --no-build-isolation --target '$BUILD/pysite' '$SRCDIR/python'"
    step python-smoke-enable 120 "PYTHONPATH='$BUILD/pysite' python3 '$SRCDIR/python/tests/torch_smoke.py' enable"
    step python-smoke-mempool 120 "PYTHONPATH='$BUILD/pysite' python3 '$SRCDIR/python/tests/torch_smoke.py' mem_pool"
    # Every torch.cuda memory tool natively and under gpubuddy, side by side.
    step torch-matrix 300 "PYTHONPATH='$BUILD/pysite' GPB_IMPORT_TORCH='$SRCDIR/tools/gpubuddy-import-torch' python3 '$SRCDIR/python/tests/torch_matrix.py' --out '$OUT' --jobs 8"
  else
    record torch-compare SKIP "python3 cannot import torch with CUDA"
    record torch-traces SKIP "python3 cannot import torch with CUDA"
    record python-smoke SKIP "python3 cannot import torch with CUDA"
    record torch-matrix SKIP "python3 cannot import torch with CUDA"
  fi
fi

# ----------------------------------------------------------------- report
TOTAL=$(( $(date +%s) - START ))
NFAIL=$(grep -c -E '\|(FAIL|TIMEOUT)\|' "$RESULTS")
NPASS=$(grep -c '|PASS|' "$RESULTS")
NSKIP=$(grep -c '|SKIP|' "$RESULTS")
{
  echo "# gpubuddy GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- device: ${DEVICE:-unknown} (${NGPU:-0} GPU(s))"
  echo "- driver: ${DRIVER:-?}, CUDA (driver) ${CUDAVER:-?}, nvcc ${NVCCVER:-?}"
  echo "- compute-sanitizer: ${SANVER:-?}"
  echo "- PyTorch: ${TORCHVER:-not available}"
  echo "- source: $(basename "$SRC")"
  echo "- result: $NPASS passed, $NFAIL failed or timed out, $NSKIP skipped, ${TOTAL}s"
  echo
  echo "| step | result | seconds | last line |"
  echo "|---|---|---|---|"
  while IFS='|' read -r n st secs note; do
    echo "| $n | $st | $secs | \`$note\` |"
  done < "$RESULTS"
  echo
  if [ -f "$OUT/torch-compare.json" ]; then
    echo "## PyTorch comparison"
    echo
    echo '```json'
    cat "$OUT/torch-compare.json"
    echo '```'
    echo
  fi
  echo "## Key output"
  while IFS='|' read -r n st secs note; do
    [ -f "$LOGS/$n.log" ] || continue
    echo
    echo "### $n: $st"
    echo
    echo '```'
    case $n in
      check) grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' "$LOGS/$n.log" | head -5
             grep -hE '^(FAIL|ERROR): ' "$LOGS/$n.log" | sort -u | head -20
             grep -hE '^(PASS|SKIP): tests/test_(gpu|stream|multipool|nvtx)' "$LOGS/$n.log" | sort -u ;;
      memcheck-*|racecheck-*|synccheck-*) grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Error|FAIL|hazard|LEAK' "$LOGS/$n.log" | head -20; tail -3 "$LOGS/$n.log" ;;
      nvtx-oob) grep -E 'Invalid|at 0x|is out of bounds|ERROR SUMMARY|^-- |FAIL|SKIP|memcheck|writing' "$LOGS/$n.log" | head -20 ;;
      *) tail -15 "$LOGS/$n.log" ;;
    esac
    echo '```'
  done < "$RESULTS"
  echo
  echo "Logs: logs/ (machine.log has nvidia-smi and versions; logs/tests/ has every test's log)."
} > "$OUT/report.md"
rm -f "$RESULTS"
say "report: $OUT/report.md ($NPASS passed, $NFAIL failed, $NSKIP skipped, ${TOTAL}s)"
[ "$NFAIL" -eq 0 ]
