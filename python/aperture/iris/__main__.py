"""``python -m aperture.iris [--] prog.py args...`` or ``python -m aperture.iris -m module args...``:
runs an Iris program unmodified, with ``import iris`` resolving to aperture.iris (in this process
and in the Python processes it starts). Refuses when a real Iris is importable, unless
APERTURE_IRIS_OVERRIDE=1."""

import runpy
import sys

from . import _alias

USAGE = "usage: python -m aperture.iris [--] program.py [args...]  |  python -m aperture.iris -m module [args...]"


def main(argv):
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    try:
        _alias.install()
    except ImportError as e:
        print(e, file=sys.stderr)
        return 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        import os

        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python prog.py` would
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
