"""``iris.x.gemm_all_gather``: rows [r M, (r + 1) M) of every rank's C = rank r's A @ B + bias[:, None].

Each rank multiplies its own A (M x K) by B (K x N) with the persistent tiled GEMM of
aperture.iris.x.gemm_all_reduce (NUM_SMS programs over the output tiles, GROUP_SIZE_M swizzle,
float32 accumulation, BIAS adding bias[m] to row m), and stores each rounded tile into its block
of rows of every rank's C (world_size * M x N, on the symmetric heap): an all-gather along rows.

Where it differs from Iris's kernel, and why:

- Iris builds it on AMD's tritonBLAS; this is plain Triton (tl.dot), with no such dependency.
- Iris stores the tile into its own C and then calls iris.x's all_gather, whose mask bounds the
  tile by the whole gathered C: an edge tile (M not a multiple of BLOCK_SIZE_M) would spill into
  the next rank's rows. Here every store is masked to this rank's M rows, each peer's copy
  written once through the heap's table (aperture.triton.store). Nothing reads a peer, so any
  order of the ranks gives the same C; it is complete once every rank's kernel has finished.
- As in gemm_all_reduce: shapes and strides may be run-time values; NUM_XCDS and CHUNK_SIZE
  (AMD chiplet parameters) are accepted and change nothing; the cache modifiers are mapped to
  NVIDIA's loads as described there; ``stride_bn``, ``stride_bk`` keep Iris's names and take
  ``B.stride(0), B.stride(1)`` (along K, along N), as Iris's tests pass them.
"""

import triton
import triton.language as tl

import aperture.triton as apt

from ._gemm import (accumulator, add_bias, operand_ptrs, part_k, part_side, product, tile_rows_cols,
                    to_output)


@triton.jit
def _tile(A, B, C, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
          stride_bias, heap_bases, cur_rank: tl.constexpr, world_size: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
          BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, BIAS: tl.constexpr,
          EVEN_K: tl.constexpr, CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr,
          ALLOW_TF32: tl.constexpr):
    _, _, rm, rn = tile_rows_cols(tile_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    a_ptrs, b_ptrs = operand_ptrs(A, B, rm, rn, M, N, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_SIZE_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=accumulator(A.dtype.element_ty))
    acc = product(acc, a_ptrs, b_ptrs, K, stride_ak, stride_bk, BLOCK_SIZE_K, not EVEN_K, CACHE_MODIFIER_A,
                  CACHE_MODIFIER_B, ALLOW_TF32)
    result = to_output(add_bias(acc, bias_ptr, rm, M, stride_bias, BIAS), C.dtype.element_ty)
    rows = (rm + cur_rank * M).to(tl.int64)
    c_ptrs = C + rows[:, None] * stride_cm + rn.to(tl.int64)[None, :] * stride_cn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    for step in range(world_size):  # this rank first, then rank+1, ...: the ranks spread their writes
        peer = (cur_rank + step) % world_size
        apt.store(c_ptrs, result, cur_rank, peer, heap_bases, mask=mask)


@triton.jit
def gemm_all_gather(A, B, C, bias_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                    stride_bias, heap_bases, cur_rank: tl.constexpr, world_size: tl.constexpr,
                    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                    GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr,
                    CHUNK_SIZE: tl.constexpr, BIAS: tl.constexpr, EVEN_K: tl.constexpr,
                    CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr):
    """Rows [cur_rank * M, (cur_rank + 1) * M) of every rank's C (world_size * M x N) = this rank's
    A (M x K) @ B (K x N) + bias[:, None] (BIAS 0/1; bias_ptr: M elements).

    Launch on a grid of NUM_SMS programs, every rank the same kernel with its own ``cur_rank``
    (``heap_bases``: the heap's table). C is on the symmetric heap; M is this rank's row count.
    Parameters as gemm_all_reduce's."""
    # _tile takes B's strides as (along K, along N): Iris's (stride_bn, stride_bk), as they come.
    pid = tl.program_id(0)
    # A tile larger than one program holds is computed in parts (_gemm.PART_ELEMENTS says why).
    PART_M: tl.constexpr = part_side(BLOCK_SIZE_M, BLOCK_SIZE_N, 0)
    PART_N: tl.constexpr = part_side(BLOCK_SIZE_M, BLOCK_SIZE_N, 1)
    PART_K: tl.constexpr = part_k(PART_M, PART_N, BLOCK_SIZE_K, A.dtype.element_ty)
    total_tiles = tl.cdiv(M, PART_M) * tl.cdiv(N, PART_N)
    # One loop form for both Triton modes (the interpreter cannot range() over a run-time bound);
    # the K loop inside each tile is the one Triton pipelines.
    tile_id = pid
    while tile_id < total_tiles:
        _tile(A, B, C, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm,
              stride_cn, stride_bias, heap_bases, cur_rank, world_size, PART_M, PART_N, PART_K,
              GROUP_SIZE_M, BIAS, EVEN_K, CACHE_MODIFIER_A, CACHE_MODIFIER_B, ALLOW_TF32)
        tile_id += NUM_SMS


__all__ = ["gemm_all_gather"]
