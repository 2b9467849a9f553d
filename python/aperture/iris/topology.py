"""``iris.topology``: where Iris kept topology discovery before ``iris.host.distributed.topology``.

The same module object, not a copy of its names: a program (or a test) that replaces one of its
functions replaces it for discovery too."""

import sys

from .host.distributed import topology as _topology

sys.modules[__name__] = _topology  # the import system hands out what sys.modules holds
