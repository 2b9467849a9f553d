"""``iris.x.core``: the tile types and index helpers (aperture.iris._tile's)."""

from .._tile import (  # noqa: F401
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
from .._tile import __all__  # noqa: F401
