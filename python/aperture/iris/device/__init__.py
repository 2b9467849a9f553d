"""``iris.device``: the path Iris's device side had before it moved to ``iris.mem``, which Iris
keeps as an alias; here the same modules as aperture.iris.mem. ``sdma_utils`` is AMD-only."""

from ..mem import triton, utils  # noqa: F401
from . import sdma_utils  # noqa: F401
