"""``iris.x.gemm_reduce_scatter``: rank r's C (M x N / W) = columns [r N / W, (r + 1) N / W) of the
sum over the W ranks of (A_q @ B + bias_q[:, None]).

Each rank multiplies its A (M x K) by B (K x N) with the persistent tiled GEMM of
aperture.iris.x.gemm_all_reduce (NUM_SMS programs over the M x N tiles, GROUP_SIZE_M swizzle,
float32 accumulation, BIAS adding bias[m] to row m), stores each rounded tile into its own C_full
(M x N), and adds the tile's columns atomically into the C of the rank that owns them (column c
belongs to rank c // (N / W), at column c % (N / W)). Columns from W * (N // W) on, when W does
not divide N, belong to no rank.

Where it differs from Iris's kernel, and why:

- Iris builds it on AMD's tritonBLAS; this is plain Triton (tl.dot), with no such dependency.
- Iris deals N's tiles to the ranks round-robin, then reduces C_full's tile at the rank's local
  tile position (the first N / W columns, not the dealt tile's), reading the peers' C_full with
  nothing ordering the read after the peer's store. This kernel gives what a reduce-scatter of
  the product along N gives (``dist.reduce_scatter`` of the W column blocks, as Iris's test
  compares with): the contiguous column blocks, summed.
- The sums are atomic adds into the owners' C, which need no ordering between the ranks:
  **C must be zero when the kernel starts** (Iris's tests allocate it with ``shmem.zeros``), and
  every rank's C is complete once every rank's kernel has finished. C_full is this rank's
  product (written for Iris's callers; peers do not read it).
- As in gemm_all_reduce: shapes and strides may be run-time values; NUM_XCDS and CHUNK_SIZE
  (AMD chiplet parameters) are accepted and change nothing; the cache modifiers are mapped to
  NVIDIA's loads as described there; ``stride_bn``, ``stride_bk`` keep Iris's names and take
  ``B.stride(0), B.stride(1)`` (along K, along N), as Iris's tests pass them; under Triton's
  interpreter a bfloat16 C is summed without atomics with one rank, and refused with more.
"""

import triton
import triton.language as tl

import aperture.triton as apt

from ._gemm import (_BF16_ATOMICS_INTERPRETED, _INTERPRETED, accumulator, add_bias,
                              operand_ptrs, part_k, part_side, product, tile_rows_cols, to_output)


@triton.jit
def _tile(A, B, C_full, C, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm_full,
          stride_cn_full, stride_cm, stride_cn, stride_bias, heap_bases, cur_rank: tl.constexpr,
          world_size: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
          BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, BIAS: tl.constexpr, EVEN_K: tl.constexpr,
          CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr):
    pid_m, pid_n, rm, rn = tile_rows_cols(tile_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    a_ptrs, b_ptrs = operand_ptrs(A, B, rm, rn, M, N, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_SIZE_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=accumulator(A.dtype.element_ty))
    acc = product(acc, a_ptrs, b_ptrs, K, stride_ak, stride_bk, BLOCK_SIZE_K, not EVEN_K, CACHE_MODIFIER_A,
                  CACHE_MODIFIER_B, ALLOW_TF32)
    result = to_output(add_bias(acc, bias_ptr, rm, M, stride_bias, BIAS), C.dtype.element_ty)
    rows = rm.to(tl.int64)
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    full_ptrs = C_full + rows[:, None] * stride_cm_full + rn.to(tl.int64)[None, :] * stride_cn_full
    tl.store(full_ptrs, result.to(C_full.dtype.element_ty), mask=inside)

    # The ranks owning this tile's columns: first to last (one, unless a block boundary crosses it).
    n_local = N // world_size
    per_rank = tl.maximum(n_local, 1)
    first = (pid_n * BLOCK_SIZE_N) // per_rank
    last = tl.minimum((pid_n * BLOCK_SIZE_N + BLOCK_SIZE_N - 1) // per_rank, world_size - 1)
    for peer in range(world_size):
        if (peer >= first) & (peer <= last) & (n_local > 0):
            local_n = rn - peer * n_local
            mask = inside & (local_n[None, :] >= 0) & (local_n[None, :] < n_local)
            c_ptrs = C + rows[:, None] * stride_cm + local_n.to(tl.int64)[None, :] * stride_cn
            if _INTERPRETED and C.dtype.element_ty == tl.bfloat16:
                tl.static_assert(world_size == 1, _BF16_ATOMICS_INTERPRETED)
                total = tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32) + result.to(tl.float32)
                tl.store(c_ptrs, to_output(total, tl.bfloat16), mask=mask)
            else:
                apt.atomic_add(c_ptrs, result, cur_rank, peer, heap_bases, mask=mask, sem="relaxed", scope="sys")


@triton.jit
def gemm_reduce_scatter(A, B, C_full, C, bias_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
                        stride_cm_full, stride_cn_full, stride_cm, stride_cn, stride_bias, heap_bases,
                        cur_rank: tl.constexpr, world_size: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                        BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                        NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr, CHUNK_SIZE: tl.constexpr,
                        BIAS: tl.constexpr, EVEN_K: tl.constexpr, CACHE_MODIFIER_A: tl.constexpr,
                        CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr):
    """This rank's C (M x N // world_size, zero at the start, on the symmetric heap) += columns
    [r * N // W, (r + 1) * N // W) of every rank's A (M x K) @ B (K x N) + bias[:, None], r this
    rank; C_full (M x N) gets this rank's own product.

    Launch on a grid of NUM_SMS programs, every rank the same kernel with its own ``cur_rank``
    (``heap_bases``: the heap's table). Once every rank's kernel is done, each C holds its
    columns' sum. Parameters as gemm_all_reduce's, with C_full's strides before C's."""
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
        _tile(A, B, C_full, C, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
              stride_cm_full, stride_cn_full, stride_cm, stride_cn, stride_bias, heap_bases, cur_rank, world_size,
              PART_M, PART_N, PART_K, GROUP_SIZE_M, BIAS, EVEN_K, CACHE_MODIFIER_A,
              CACHE_MODIFIER_B, ALLOW_TF32)
        tile_id += NUM_SMS


__all__ = ["gemm_reduce_scatter"]
