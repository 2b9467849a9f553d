"""``iris.device``: the path Iris's device side had before it moved to ``iris.mem``, which Iris
keeps as an alias; here the same modules as aperture.iris.mem, reachable by every path below it
(``iris.device.triton.context``, ``iris.device.utils`` ...). ``sdma_utils`` and ``gluon`` are
AMD-only."""

import importlib
import sys

from ..mem import gluon, triton, utils  # noqa: F401
from . import sdma_utils  # noqa: F401

sys.modules.setdefault(f"{__name__}.triton", triton)
sys.modules.setdefault(f"{__name__}.utils", utils)
# iris.device.gluon (.context, .tracing): the AMD-only iris.mem.gluon modules, every name refused.
sys.modules.setdefault(f"{__name__}.gluon", gluon)
for _name in ("context", "tracing"):
    sys.modules.setdefault(f"{__name__}.gluon.{_name}", getattr(gluon, _name))
for _name in ("context", "ops", "types", "tracing", "triggered"):
    sys.modules.setdefault(f"{__name__}.triton.{_name}", importlib.import_module(f"{triton.__name__}.{_name}"))
