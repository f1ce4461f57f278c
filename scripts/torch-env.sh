# SPDX-License-Identifier: MIT
# torch-env.sh: sourced by the scripts/torch-*.sh experiments on the GPU
# machine (with `here` set to the source root). Builds the newest `make
# dist` tarball carried in .gpu/ under $work (no libtool needed there),
# once per tarball, installs the Python package from it with one offline
# pip command, and exports PYTHONPATH for it.
work=/tmp/gpb-torch
tarball=$(ls -t "$here"/.gpu/gpubuddy-*.tar.gz | head -1)
if [ ! -f "$work/stamp" ] || [ "$tarball" -nt "$work/stamp" ]; then
  rm -rf "$work" && mkdir -p "$work/src" "$work/build"
  tar xzf "$tarball" -C "$work/src" --strip-components=1
  (cd "$work/build" && "$work/src/configure" -q >/dev/null &&
     make -j"$(nproc)" >/dev/null) || { echo "$0: build failed" >&2; exit 1; }
  python3 -m pip install -q --no-index --target "$work/site" "$work/src/python"
  touch "$work/stamp"
fi
export PYTHONPATH="$work/site"
