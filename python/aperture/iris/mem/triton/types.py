"""``iris.mem.triton.types``: the tile types at the path Iris's newest tree gives them (its package
re-exports them as ``iris.Tile`` ...). The same objects as ``iris.x``'s (aperture.iris.x.core).
Iris's ``chiplet_transform_chunked``, ``compute_tile_indices`` and ``compute_tile_offsets`` are not
provided: the index holds no version of the file that defines them (docs/IRIS.md)."""

from ...x.core import AllReduceConfig, TensorView, Tile, TileView, make_tensor_view, offset_ptr, tile_layout, tile_ptr

__all__ = ["Tile", "TileView", "TensorView", "AllReduceConfig", "make_tensor_view", "tile_layout", "tile_ptr",
           "offset_ptr"]
