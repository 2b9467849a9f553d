"""``iris.mem.triton.types``: the tile types at the path Iris's newest tree gives them (its package
re-exports them as ``iris.Tile`` ...). The same objects as ``iris.x``'s (aperture.iris._tile), with
the index helpers ``compute_tile_indices``, ``compute_tile_offsets`` and ``chiplet_transform_chunked``
(also in ``iris.ccl.utils``)."""

from ..._tile import *  # noqa: F401,F403
from ..._tile import __all__  # noqa: F401
