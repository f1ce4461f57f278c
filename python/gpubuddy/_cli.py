# SPDX-License-Identifier: MIT
"""The console scripts of a pip install (entry_points.txt): the same
programs `make install` puts in bin/, for users of the package alone."""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _import_torch_module():
    """gpubuddy-import-torch's code: inside a wheel, _import_torch.py; in an
    editable install, the clone's tools/gpubuddy-import-torch."""
    for path in (os.path.join(_HERE, "_import_torch.py"),
                 os.path.join(_HERE, "..", "..", "tools", "gpubuddy-import-torch")):
        if os.path.exists(path):
            loader = importlib.machinery.SourceFileLoader("_gpubuddy_import_torch", path)
            spec = importlib.util.spec_from_loader(loader.name, loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            return mod
    sys.stderr.write("gpubuddy-import-torch: its code is missing from %s: "
                     "reinstall the package\n" % _HERE)
    sys.exit(1)


def import_torch():
    """gpubuddy-import-torch: PyTorch memory snapshot to gpubuddy trace."""
    sys.exit(_import_torch_module().main(sys.argv[1:]))


def replay():
    """gpubuddy-replay: the planner and simulator built into the package."""
    from .__main__ import main
    sys.exit(main(["replay"] + sys.argv[1:]))
