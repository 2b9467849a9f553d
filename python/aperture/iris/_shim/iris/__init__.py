# On PYTHONPATH only under `python -m aperture.iris` / `aperture launch --iris`: this process's
# `import iris` becomes aperture.iris (aperture/iris/_alias.py says how, and refuses over a real Iris).
import sys

from aperture.iris import _alias

_alias.install()
import aperture.iris as _target  # noqa: E402

sys.modules[__name__] = _target  # the import system hands out what sys.modules holds for "iris"
