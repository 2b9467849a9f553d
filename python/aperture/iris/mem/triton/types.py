"""``iris.mem.triton.types``: the tile types at the path Iris's newest tree gives them (its package
re-exports them as ``iris.Tile`` ...). The same objects as ``iris.x``'s (aperture.iris._tile), with
the index helpers ``compute_tile_indices``, ``compute_tile_offsets`` and ``chiplet_transform_chunked``
(also in ``iris.ccl.utils``)."""

from ..._tile import (
    AllReduceConfig,
    TensorView,
    Tile,
    TileView,
    chiplet_transform_chunked,
    compute_tile_indices,
    compute_tile_offsets,
    make_tensor_view,
    offset_ptr,
    tile_layout,
    tile_ptr,
)

__all__ = ["Tile", "TileView", "TensorView", "AllReduceConfig", "make_tensor_view", "tile_layout", "tile_ptr",
           "offset_ptr", "chiplet_transform_chunked", "compute_tile_indices", "compute_tile_offsets"]
