"""``iris.mem``: where Iris's newest tree keeps its device side (``iris.mem.triton``)."""

from . import triton  # noqa: F401  (iris.mem.triton.<name> without importing it, as in Iris)
