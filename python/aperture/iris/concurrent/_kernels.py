"""The kernels of ``iris.concurrent.gemm``: a local GEMM and an independent collective sharing
one GPU, tile by tile, from two work-stealing queues.

Each queue is a counter in device memory: a program takes its next tile with an atomic add and
stops when the number passes the queue's length. ``fused_gemm_collective`` is one persistent
kernel over both queues: programs below GEMM_WGS start on the GEMM's tiles, the others on the
collective's, and each takes from the other queue once its own is empty, so neither part waits
while programs sit idle. ``gemm_queue`` and ``collective_queue`` drain one queue each, for the
"concurrent" mode's two kernels on two streams.

The GEMM (C = A @ B, float32 accumulation, C's type at the end) is aperture.iris.x's persistent
GEMM tile; a tile larger than one program holds is computed in parts (aperture.iris.x._gemm says
why). The collective's tiles reach peers with aperture.iris's device functions through the heap's
table, so a heap over nodes reaches the other nodes' ranks through its proxy. No tile waits for
another rank: every rank's ``comm_src`` must be written before any rank launches, and ``comm_dst``
is complete on every rank once every rank's kernels have finished (Iris's contract: a barrier on
each side, e.g. ``ctx.barrier()``). Half-precision sums are accumulated in float32 and rounded once.
"""

import triton
import triton.language as tl

from .._device import load, store
from ..x._gemm import accumulator, operand_ptrs, part_k, part_side, product, tile_rows_cols, to_output

# What the collective's queue holds (COMM_KIND).
ALL_GATHER = tl.constexpr(0)
ALL_REDUCE = tl.constexpr(1)
REDUCE_SCATTER = tl.constexpr(2)
ALL_TO_ALL = tl.constexpr(3)
BROADCAST = tl.constexpr(4)


@triton.jit
def _gemm_tile(tile_id, A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               EVEN_K: tl.constexpr):
    # BLOCK_* are the part's sides here (the callers number the tiles by parts).
    _, _, rm, rn = tile_rows_cols(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    a_ptrs, b_ptrs = operand_ptrs(A, B, rm, rn, M, N, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=accumulator(A.dtype.element_ty))
    acc = product(acc, a_ptrs, b_ptrs, K, stride_ak, stride_bk, BLOCK_K, not EVEN_K, None, None, False)
    c_ptrs = C + rm.to(tl.int64)[:, None] * stride_cm + rn.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, to_output(acc, C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _sum_over_ranks(ptrs, mask, cur_rank, heap_bases, world_size: tl.constexpr, acc_dtype: tl.constexpr):
    # Every rank's copy of the block, added in float32 (an integer type in its own width); the
    # ranks are read from cur_rank on, so that they do not all read one peer at once.
    total = load(ptrs, cur_rank, cur_rank, heap_bases, mask=mask).to(acc_dtype)
    for step in range(1, world_size):
        total += load(ptrs, cur_rank, (cur_rank + step) % world_size, heap_bases, mask=mask).to(acc_dtype)
    return total


@triton.constexpr_function
def _sum_type(dtype):
    return tl.float32 if dtype.is_floating() else dtype


@triton.jit
def _collective_tile(tile_id, src, dst, Mc, Nc, stride_sm, stride_sn, stride_dm, stride_dn, rows_per_rank, root,
                     heap_bases, cur_rank, world_size: tl.constexpr, COMM_KIND: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """One tile of the collective. Its grid: comm_src's (Mc, Nc) for ALL_GATHER, ALL_TO_ALL and
    BROADCAST; the rows of this rank's block (rows_per_rank, Nc) for REDUCE_SCATTER; for
    ALL_REDUCE this rank's share of (Mc, Nc)'s tiles (rows_per_rank carries a full share's tile
    count), tile_id counted from the share's first, the host giving the last share no tile past
    the grid."""
    if COMM_KIND == REDUCE_SCATTER:
        _, _, rm, rn = tile_rows_cols(tile_id, rows_per_rank, Nc, BLOCK_M, BLOCK_N, GROUP_M)
        mask = (rm[:, None] < rows_per_rank) & (rn[None, :] < Nc)
    else:
        if COMM_KIND == ALL_REDUCE:
            tile_id += cur_rank * rows_per_rank  # rank r sums tiles [r share, (r + 1) share)
        _, _, rm, rn = tile_rows_cols(tile_id, Mc, Nc, BLOCK_M, BLOCK_N, GROUP_M)
        mask = (rm[:, None] < Mc) & (rn[None, :] < Nc)
    rows = rm.to(tl.int64)
    cols = rn.to(tl.int64)[None, :]
    src_ptrs = src + rows[:, None] * stride_sm + cols * stride_sn
    if COMM_KIND == ALL_GATHER:  # push this rank's block into its rows of every rank's dst
        block = tl.load(src_ptrs, mask=mask)
        dst_ptrs = dst + (rows + cur_rank * Mc)[:, None] * stride_dm + cols * stride_dn
        for step in range(world_size):
            store(dst_ptrs, block, cur_rank, (cur_rank + step) % world_size, heap_bases, mask=mask)
    elif COMM_KIND == ALL_REDUCE:  # sum this rank's share of the tiles, then push it to every rank
        total = _sum_over_ranks(src_ptrs, mask, cur_rank, heap_bases, world_size, _sum_type(src.dtype.element_ty))
        result = to_output(total, dst.dtype.element_ty)
        dst_ptrs = dst + rows[:, None] * stride_dm + cols * stride_dn
        for step in range(world_size):
            store(dst_ptrs, result, cur_rank, (cur_rank + step) % world_size, heap_bases, mask=mask)
    elif COMM_KIND == REDUCE_SCATTER:  # pull this rank's block of rows, summed over the ranks
        block_ptrs = src + (rows + cur_rank * rows_per_rank)[:, None] * stride_sm + cols * stride_sn
        total = _sum_over_ranks(block_ptrs, mask, cur_rank, heap_bases, world_size, _sum_type(src.dtype.element_ty))
        tl.store(dst + rows[:, None] * stride_dm + cols * stride_dn, to_output(total, dst.dtype.element_ty), mask=mask)
    elif COMM_KIND == ALL_TO_ALL:  # row block p of src goes to row block cur_rank of rank p's dst
        block = tl.load(src_ptrs, mask=mask)
        owner = rm // rows_per_rank
        dst_rows = rows - owner.to(tl.int64) * rows_per_rank + cur_rank * rows_per_rank
        dst_ptrs = dst + dst_rows[:, None] * stride_dm + cols * stride_dn
        for step in range(world_size):  # a tile may span blocks: each peer gets its rows only
            peer = (cur_rank + step) % world_size
            store(dst_ptrs, block, cur_rank, peer, heap_bases, mask=mask & (owner == peer)[:, None])
    else:  # BROADCAST: pull root's block
        block = load(src_ptrs, cur_rank, root, heap_bases, mask=mask)
        tl.store(dst + rows[:, None] * stride_dm + cols * stride_dn, block, mask=mask)


@triton.jit
def fused_gemm_collective(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          src, dst, Mc, Nc, stride_sm, stride_sn, stride_dm, stride_dn, rows_per_rank, root,
                          counters, comm_tiles, heap_bases, cur_rank, world_size: tl.constexpr,
                          COMM_KIND: tl.constexpr, GEMM_WGS, GEMM_BLOCK_M: tl.constexpr,
                          GEMM_BLOCK_N: tl.constexpr, GEMM_BLOCK_K: tl.constexpr, GEMM_GROUP_M: tl.constexpr,
                          COMM_BLOCK_M: tl.constexpr, COMM_BLOCK_N: tl.constexpr, COMM_GROUP_M: tl.constexpr,
                          EVEN_K: tl.constexpr):
    """Both queues in one persistent kernel (``counters``: two zeroed int32, the GEMM's and the
    collective's). Programs below GEMM_WGS start on the GEMM; each takes from the other queue when
    its own is empty, and ends when both are."""
    PART_M: tl.constexpr = part_side(GEMM_BLOCK_M, GEMM_BLOCK_N, 0)
    PART_N: tl.constexpr = part_side(GEMM_BLOCK_M, GEMM_BLOCK_N, 1)
    PART_K: tl.constexpr = part_k(PART_M, PART_N, GEMM_BLOCK_K, A.dtype.element_ty)
    gemm_tiles = tl.cdiv(M, PART_M) * tl.cdiv(N, PART_N)
    on_gemm = (tl.program_id(0) < GEMM_WGS).to(tl.int32)
    queues_left = 2
    while queues_left > 0:
        if on_gemm != 0:
            tile_id = tl.atomic_add(counters, 1)
            if tile_id < gemm_tiles:
                _gemm_tile(tile_id, A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                           stride_cn, PART_M, PART_N, PART_K, GEMM_GROUP_M, EVEN_K)
            else:
                queues_left -= 1
                on_gemm = 0
        else:
            tile_id = tl.atomic_add(counters + 1, 1)
            if tile_id < comm_tiles:
                _collective_tile(tile_id, src, dst, Mc, Nc, stride_sm, stride_sn, stride_dm, stride_dn,
                                 rows_per_rank, root, heap_bases, cur_rank, world_size, COMM_KIND, COMM_BLOCK_M,
                                 COMM_BLOCK_N, COMM_GROUP_M)
            else:
                queues_left -= 1
                on_gemm = 1


@triton.jit
def gemm_queue(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, counter,
               GEMM_BLOCK_M: tl.constexpr, GEMM_BLOCK_N: tl.constexpr, GEMM_BLOCK_K: tl.constexpr,
               GEMM_GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    """The GEMM's queue alone (``counter``: one zeroed int32)."""
    PART_M: tl.constexpr = part_side(GEMM_BLOCK_M, GEMM_BLOCK_N, 0)
    PART_N: tl.constexpr = part_side(GEMM_BLOCK_M, GEMM_BLOCK_N, 1)
    PART_K: tl.constexpr = part_k(PART_M, PART_N, GEMM_BLOCK_K, A.dtype.element_ty)
    gemm_tiles = tl.cdiv(M, PART_M) * tl.cdiv(N, PART_N)
    tile_id = tl.atomic_add(counter, 1)
    while tile_id < gemm_tiles:
        _gemm_tile(tile_id, A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   PART_M, PART_N, PART_K, GEMM_GROUP_M, EVEN_K)
        tile_id = tl.atomic_add(counter, 1)


@triton.jit
def collective_queue(src, dst, Mc, Nc, stride_sm, stride_sn, stride_dm, stride_dn, rows_per_rank, root, counter,
                     comm_tiles, heap_bases, cur_rank, world_size: tl.constexpr, COMM_KIND: tl.constexpr,
                     COMM_BLOCK_M: tl.constexpr, COMM_BLOCK_N: tl.constexpr, COMM_GROUP_M: tl.constexpr):
    """The collective's queue alone (``counter``: one zeroed int32)."""
    tile_id = tl.atomic_add(counter, 1)
    while tile_id < comm_tiles:
        _collective_tile(tile_id, src, dst, Mc, Nc, stride_sm, stride_sn, stride_dm, stride_dn, rows_per_rank, root,
                         heap_bases, cur_rank, world_size, COMM_KIND, COMM_BLOCK_M, COMM_BLOCK_N, COMM_GROUP_M)
        tile_id = tl.atomic_add(counter, 1)
