# SPDX-License-Identifier: MIT
# gpu-common.sh: sourced by the bench's scripts for the GPU machine.
#
# build_cuda TARBALL WORK unpacks a `make dist` tarball into WORK (emptied
# first), configures it with CUDA and builds it in WORK/build, and leaves
# the shell there, with $src naming the unpacked source. Returns nonzero,
# saying why, if any step fails.
build_cuda() {
  rm -rf "$2" && mkdir -p "$2" || return 1
  tar xzf "$1" -C "$2" || return 1
  src=$(ls -d "$2"/gpubuddy-*/ | head -1)
  cd "$2" && mkdir build && cd build || return 1
  "$src/configure" --with-cuda NVCCFLAGS="-O2 -arch=sm_90" >configure.log 2>&1 &&
    make -j"$(nproc)" >make.log 2>&1 ||
    { tail -30 configure.log make.log; return 1; }
}

# describe_gpu FILE: the date, GPU (name, driver, serial), CPU and host,
# to stdout and FILE, so that runs on different machines can be told apart.
describe_gpu() {
  {
    date -u '+%Y-%m-%d %H:%M UTC'
    nvidia-smi --query-gpu=name,driver_version,serial --format=csv,noheader
    grep -m1 'model name' /proc/cpuinfo
    hostname
  } | tee "$1"
}
