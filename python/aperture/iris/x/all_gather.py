"""Tile-level all-gather: each rank's tile lands, at that rank's place, in every rank's output."""

import triton
import triton.language as tl

import aperture.triton as apt


@triton.jit
def all_gather(tile, dst_view, dim: tl.constexpr, ctx):
    """Stores ``tile.data`` into every rank's ``dst_view``, the whole gathered tensor: along
    dim 0 this rank's rows start at rank * (dst_view.M // world_size), along dim 1 its columns at
    rank * (dst_view.N // world_size)."""
    if dim == 0:
        dst_ptrs, mask = dst_view.offset_tile_ptr(tile, offset_m=ctx.rank * (dst_view.M // ctx.world_size))
    else:
        dst_ptrs, mask = dst_view.offset_tile_ptr(tile, offset_n=ctx.rank * (dst_view.N // ctx.world_size))
    for peer in range(ctx.world_size):
        apt.store(dst_ptrs, tile.data, ctx.rank, peer, ctx.heap_bases, mask=mask, proxy=ctx.proxy)
