# SPDX-License-Identifier: MIT
"""Placement plans from Python: the gpubuddy-replay built into the package
lays a recorded trace out offline (docs/DESIGN.md, Plans)."""
import json
import os
import subprocess

from ._native import GpubuddyError

_HERE = os.path.dirname(os.path.abspath(__file__))


def replay_path():
    """Path of the gpubuddy-replay this package carries."""
    return os.path.join(_HERE, "_bin", "gpubuddy-replay")


def make_plan(trace, out, min_block=512):
    """Lays a recorded run's trace out offline and writes the plan to out,
    for the next run of the same program to follow
    (gpubuddy.torch.enable(plan=out), GPB_PLAN=out). min_block: the pool's
    (512, PyTorch's rounding, is gpubuddy.torch's default). Returns what
    gpubuddy-replay --plan-out --json says: entries, repeat_from (entries
    when the run has no repeating step), extent (the pool the plan needs,
    bytes), peak_demand_bytes, extent_ratio. Raises GpubuddyError, one
    line, when the trace cannot be read or the plan written; out is then
    left as it was."""
    exe = replay_path()
    if not os.access(exe, os.X_OK):
        raise GpubuddyError("gpubuddy: %s is missing or not executable: "
                            "reinstall the package (pip install ./python)" % exe)
    if isinstance(min_block, bool) or not isinstance(min_block, int) or min_block <= 0:
        raise GpubuddyError("gpubuddy: min_block must be a power of two > 0, "
                            "not %r" % (min_block,))
    cmd = [exe, "--quiet", "--json", "--min-block", str(min_block),
           "--plan-out", os.fspath(out), os.fspath(trace)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        raise GpubuddyError("gpubuddy: make_plan(%r): %s" % (os.fspath(trace), why))
    return json.loads(p.stdout)
