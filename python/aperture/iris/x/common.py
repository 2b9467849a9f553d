"""``iris.x.common``: the tile index helpers where Iris's newest tree keeps them
(``chiplet_transform_chunked``, ``compute_tile_indices``, ``compute_tile_offsets``; aperture.iris._tile's)."""

from .._tile import chiplet_transform_chunked, compute_tile_indices, compute_tile_offsets

__all__ = ["chiplet_transform_chunked", "compute_tile_indices", "compute_tile_offsets"]
