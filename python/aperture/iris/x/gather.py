"""Tile-level gather: one rank's tile, loaded into registers for the caller to consume."""

import triton
import triton.language as tl  # noqa: F401  (the interpreter wants it in a jit function's globals)

import aperture.triton as apt


@triton.jit
def gather(tile, src_view, source_rank, ctx):
    """``source_rank``'s tile of ``src_view`` (0 outside the tensor). ``source_rank`` may be a
    loop variable: this rank's own tile is read directly, through the same call."""
    src_ptrs, mask = src_view.tile_ptr(tile)
    return apt.load(src_ptrs, ctx.rank, source_rank, ctx.heap_bases, mask=mask, other=0.0, proxy=ctx.proxy)
