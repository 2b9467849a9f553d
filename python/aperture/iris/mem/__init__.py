"""``iris.mem``: where Iris's newest tree keeps its device side (``iris.mem.triton``; ``iris.mem.gluon``,
its Gluon side, is AMD-only: importable, every name in it refused)."""

from . import gluon, triton  # noqa: F401  (iris.mem.triton.<name> without importing it, as in Iris)
