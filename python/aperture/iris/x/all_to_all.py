"""Tile-level all-to-all, by columns, as torch.distributed's: rank d's output columns
[s*N_per_rank, (s+1)*N_per_rank) are rank s's input columns [d*N_per_rank, (d+1)*N_per_rank)."""

import triton
import triton.language as tl

import aperture.triton as apt


@triton.jit
def all_to_all(tile, src_view, dst_view, N_per_rank, ctx):
    """Fills this rank's ``dst_view`` tile: each of its columns is pulled from the rank whose
    block it lies in. The inputs must be complete before the kernel starts (no flags)."""
    rm, rn = tile.indices()
    source = rn // N_per_rank                              # the rank each output column comes from
    src_col = ctx.rank * N_per_rank + rn % N_per_rank      # where that rank holds it
    rows = rm < dst_view.M
    cols = (rn < dst_view.N) & (source < ctx.world_size)
    src_offsets = rm.to(tl.int64)[:, None] * src_view.stride_m + src_col.to(tl.int64)[None, :] * src_view.stride_n
    dst_offsets = rm.to(tl.int64)[:, None] * dst_view.stride_m + rn.to(tl.int64)[None, :] * dst_view.stride_n
    # Each element is moved once, by the load of its source rank; the other loads are masked off,
    # which costs no memory traffic.
    for peer in range(ctx.world_size):
        mask = rows[:, None] & (cols & (source == peer) & (src_col < src_view.N))[None, :]
        data = apt.load(src_view.ptr + src_offsets, ctx.rank, peer, ctx.heap_bases, mask=mask, other=0.0,
                        proxy=ctx.proxy)
        tl.store(dst_view.ptr + dst_offsets, data, mask=mask)
