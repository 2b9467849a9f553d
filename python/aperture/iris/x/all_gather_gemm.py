"""``iris.x.all_gather_gemm``: C = [A_0 | A_1 | ... | A_{W-1}] @ B + bias[:, None], on every rank.

A is sharded along K: rank r holds columns [r K / W, (r + 1) K / W) as its A_sharded
(M x K / W, on the symmetric heap); B (K x N) is replicated. Each rank computes its whole C with
the persistent tiled GEMM of aperture.iris.x.gemm_all_reduce (NUM_SMS programs over the output
tiles, GROUP_SIZE_M swizzle, float32 accumulation, BIAS adding bias[m] to row m), reading each
K slice of A straight from the owning rank's A_sharded through the heap's table
(aperture.triton.load). The A slices the programs of the first tile column read are also stored
into this rank's A_gathered (M x K), so that it ends up holding the gathered A as in Iris.

Where it differs from Iris's kernel, and why:

- Iris builds it on AMD's tritonBLAS; this is plain Triton (tl.dot), with no such dependency.
- Iris first pushes its shard into every rank's A_gathered and then multiplies its own
  A_gathered, with only a barrier of the program in between: nothing waits for the other
  programs, nor for the other ranks' pushes. Here the product reads the shards themselves
  (inputs no rank writes), so it is right in any order of the ranks and programs, and A's data
  crosses the fabric once per tile row rather than once to fill A_gathered.
- K must be a multiple of the world size (K / W columns per rank, as in Iris's test); EVEN_K=1
  drops the K masks where K / W is also a multiple of BLOCK_SIZE_K (each shard's K loop is
  masked where it is not).
- As in gemm_all_reduce: shapes and strides may be run-time values; NUM_XCDS and CHUNK_SIZE
  (AMD chiplet parameters) are accepted and change nothing; the cache modifiers are mapped to
  NVIDIA's loads as described there (CACHE_MODIFIER_A goes to the peers' shard loads too);
  ``stride_bn``, ``stride_bk`` keep Iris's names and take ``B.stride(0), B.stride(1)`` (along K,
  along N), as Iris's tests pass them.
"""

import triton
import triton.language as tl

from ._gemm import (accumulator, add_bias, operand_ptrs, part_k, part_side, product, tile_rows_cols,
                    to_output)


@triton.jit
def _tile(A_sharded, B, C, A_gathered, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
          stride_cm, stride_cn, stride_ag_m, stride_ag_n, stride_bias, heap_bases, cur_rank: tl.constexpr,
          world_size: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
          BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, BIAS: tl.constexpr, EVEN_K: tl.constexpr,
          CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr):
    _, pid_n, rm, rn = tile_rows_cols(tile_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    k_local = K // world_size
    rk = tl.arange(0, BLOCK_SIZE_K)
    # Only the first tile column keeps the A it reads: each row block of A_gathered written once.
    keep = (rm[:, None] < M) & (pid_n == 0)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=accumulator(A_sharded.dtype.element_ty))
    for step in range(world_size):  # this rank's shard first, then rank+1's, ...
        owner = (cur_rank + step) % world_size
        # The owner's shard is this rank's A_sharded pointer, translated; B's rows owner * k_local on.
        b_shard = B + tl.cast(owner * k_local, tl.int64) * stride_bk
        a_ptrs, b_ptrs = operand_ptrs(A_sharded, b_shard, rm, rn, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                                      BLOCK_SIZE_K)
        copy_ptrs = (A_gathered + rm.to(tl.int64)[:, None] * stride_ag_m
                     + (owner * k_local + rk).to(tl.int64)[None, :] * stride_ag_n)
        if EVEN_K:
            if k_local % BLOCK_SIZE_K == 0:
                acc = product(acc, a_ptrs, b_ptrs, k_local, stride_ak, stride_bk, BLOCK_SIZE_K, False,
                              CACHE_MODIFIER_A, CACHE_MODIFIER_B, ALLOW_TF32, owner, cur_rank, heap_bases, copy_ptrs,
                              keep, stride_ag_n)
            else:
                acc = product(acc, a_ptrs, b_ptrs, k_local, stride_ak, stride_bk, BLOCK_SIZE_K, True,
                              CACHE_MODIFIER_A, CACHE_MODIFIER_B, ALLOW_TF32, owner, cur_rank, heap_bases, copy_ptrs,
                              keep, stride_ag_n)
        else:
            acc = product(acc, a_ptrs, b_ptrs, k_local, stride_ak, stride_bk, BLOCK_SIZE_K, True, CACHE_MODIFIER_A,
                          CACHE_MODIFIER_B, ALLOW_TF32, owner, cur_rank, heap_bases, copy_ptrs, keep, stride_ag_n)
    result = to_output(add_bias(acc, bias_ptr, rm, M, stride_bias, BIAS), C.dtype.element_ty)
    c_ptrs = C + rm.to(tl.int64)[:, None] * stride_cm + rn.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, result, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def all_gather_gemm(A_sharded, B, C, A_gathered, bias_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
                    stride_cm, stride_cn, stride_ag_m, stride_ag_n, stride_bias, heap_bases, cur_rank: tl.constexpr,
                    world_size: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                    BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                    NUM_XCDS: tl.constexpr, CHUNK_SIZE: tl.constexpr, BIAS: tl.constexpr, EVEN_K: tl.constexpr,
                    CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr):
    """This rank's C (M x N) = the ranks' A_sharded (M x K / world_size each, on the symmetric
    heap), side by side in rank order, @ B (K x N) + bias[:, None] (BIAS 0/1; bias_ptr: M
    elements); this rank's A_gathered (M x K) gets the gathered A.

    Launch on a grid of NUM_SMS programs, every rank the same kernel with its own ``cur_rank``
    (``heap_bases``: the heap's table). K is the full (gathered) K; stride_am, stride_ak are
    A_sharded's strides, stride_ag_m, stride_ag_n A_gathered's. Other parameters as
    gemm_all_reduce's. The ranks' shards must be written before any rank starts (a host barrier)."""
    # _tile takes B's strides as (along K, along N): Iris's (stride_bn, stride_bk), as they come.
    pid = tl.program_id(0)
    # A tile larger than one program holds is computed in parts (_gemm.PART_ELEMENTS says why).
    PART_M: tl.constexpr = part_side(BLOCK_SIZE_M, BLOCK_SIZE_N, 0)
    PART_N: tl.constexpr = part_side(BLOCK_SIZE_M, BLOCK_SIZE_N, 1)
    PART_K: tl.constexpr = part_k(PART_M, PART_N, BLOCK_SIZE_K, A_sharded.dtype.element_ty)
    total_tiles = tl.cdiv(M, PART_M) * tl.cdiv(N, PART_N)
    # One loop form for both Triton modes (the interpreter cannot range() over a run-time bound);
    # the K loop inside each tile is the one Triton pipelines.
    tile_id = pid
    while tile_id < total_tiles:
        _tile(A_sharded, B, C, A_gathered, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bn,
              stride_bk, stride_cm, stride_cn, stride_ag_m, stride_ag_n, stride_bias, heap_bases, cur_rank,
              world_size, PART_M, PART_N, PART_K, GROUP_SIZE_M, BIAS, EVEN_K, CACHE_MODIFIER_A,
              CACHE_MODIFIER_B, ALLOW_TF32)
        tile_id += NUM_SMS


__all__ = ["all_gather_gemm"]
