"""The ``aperture`` command of the installed package: the C++ program built with it (launch, info,
bench, demo), installed inside the package folder."""

import os
import sys

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "aperture")


def main():
    if not os.access(PROGRAM, os.X_OK):
        sys.exit(f"aperture: the program {PROGRAM} is missing; reinstall the package (pip install .)")
    os.execv(PROGRAM, [PROGRAM] + sys.argv[1:])


if __name__ == "__main__":
    main()
