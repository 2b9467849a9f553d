"""Tile-level reduce-scatter: the tiles are split into contiguous runs, one per rank, and each
rank sums only its run, into its own output."""

import triton
import triton.language as tl

from ._tiles import accumulator_type, sum_of_peers, tile_number


@triton.jit
def reduce_scatter(tile, src_view, dst_view, locks, ctx, generation=1):
    """If this rank owns the tile (rank r owns tiles [r*T, (r+1)*T), T = tiles // world_size, the
    last rank also the remainder), writes into its ``dst_view`` the sum of ``tile.data`` and the
    other ranks' ``src_view`` tiles, each read once that rank's ``locks[tile]`` equals
    ``generation``."""
    total = tl.cdiv(dst_view.M, tile.block_m) * tl.cdiv(dst_view.N, tile.block_n)
    tile_id = tile_number(tile, dst_view)
    per_rank = total // ctx.world_size
    start = ctx.rank * per_rank
    end = total if ctx.rank == ctx.world_size - 1 else start + per_rank
    if (tile_id >= start) and (tile_id < end):
        src_ptrs, mask = src_view.tile_ptr(tile)
        dst_ptrs, _ = dst_view.tile_ptr(tile)
        acc = tile.data.to(accumulator_type(tile.data.dtype))
        acc = sum_of_peers(acc, src_ptrs, mask, ctx, locks, tile_id, generation)
        tl.store(dst_ptrs, acc.to(tile.data.dtype), mask=mask)
