# SPDX-License-Identifier: MIT
"""python -m gpubuddy replay ARGS...: the gpubuddy-replay built into the
package (plans, smallest pools, replays), for a pip-only install."""
import os
import sys

from ._plan import replay_path

_USAGE = ("usage: python -m gpubuddy replay [ARGS...]   (gpubuddy-replay; "
          "python -m gpubuddy replay --help)\n"
          "       python -m gpubuddy --version")


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(_USAGE)
        return 0
    if argv[:1] == ["--version"]:
        from . import __version__
        print("gpubuddy %s" % __version__)
        return 0
    if argv[:1] != ["replay"]:
        sys.stderr.write("python -m gpubuddy: %s (see --help)\n" % (
            "unknown command %r" % argv[0] if argv else "no command"))
        return 2
    exe = replay_path()
    try:
        os.execv(exe, [exe] + argv[1:])
    except OSError as e:
        sys.stderr.write("python -m gpubuddy: cannot run %s: %s\n" % (exe, e.strerror))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
