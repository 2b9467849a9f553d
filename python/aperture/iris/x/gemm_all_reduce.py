"""``iris.x.gemm_all_reduce``: C = sum over ranks of (A_r @ B + bias_r[:, None]), on every rank.

A persistent kernel: the launch's NUM_SMS programs walk the (M / BLOCK_SIZE_M) x (N / BLOCK_SIZE_N)
output tiles (program p takes tiles p, p + NUM_SMS, ...; the tile numbers are swizzled by
GROUP_SIZE_M rows of tiles, for L2 reuse of B). Each tile's product (float16, bfloat16 or float32
operands) is accumulated in float32 over K by ``tl.dot`` and, with BIAS, gets bias[m] added to its row m;
the rounded tile is then added atomically into every rank's C (``iris.x.all_reduce_atomic``).

Where it differs from Iris's kernel, and why:

- Iris builds it on AMD's tritonBLAS; this is plain Triton (tl.dot), with no such dependency.
- Iris stores each rank's tile into its own C and then has every rank read the others' C (one
  shot), with nothing ordering a rank's read after the peer's store, and a peer may already have
  overwritten its C with the sum. Here every rank adds its tile into every rank's C with atomics,
  which needs no ordering between the ranks: **C must be zero when the kernel starts** (Iris's
  tests allocate it with ``shmem.zeros``; zero it again before reusing it), and every rank has
  the sum once every rank's kernel has finished (a host barrier).
- A tile larger than a program of Triton's default 4 warps holds on NVIDIA (more than 128 x 128,
  or a K step whose operands pass 32 KiB) is computed in parts of that size (_gemm.part_side,
  part_k). Iris's tile sizes are chosen for AMD's GPUs: its largest test tile, 256 x 256
  x 128, asked an H100 for 384 KiB of shared memory as one part. Parts change which program
  computes which elements and how the K sum is grouped, not what is computed.
- The shapes and strides (M, N, K, stride_*) may be run-time values or compile-time constants
  (Iris declares them ``tl.constexpr``, a compilation per shape); ``cur_rank`` and ``world_size``
  are compile-time constants as in Iris.
- NUM_XCDS and CHUNK_SIZE describe AMD's chiplets (Iris remaps program ids for them); they are
  accepted and do not change the result or the tile order here. EVEN_K=1 promises K %
  BLOCK_SIZE_K == 0 and drops the K masks. CACHE_MODIFIER_A/B go to the operands' loads:
  ".ca", ".cg" and ".cv" as they are, None or "" for none, ".cs" and ".lu" (AMD's streaming /
  last-use hints) as the "evict_first" eviction policy; others are refused at compile time.
  ALLOW_TF32 is tl.dot's input_precision for float32 operands ("tf32" or "ieee").
- Under Triton's interpreter (TRITON_INTERPRET=1), which has no bfloat16 atomics, a bfloat16 C
  is added with a load and a store: exact for one rank (the interpreter runs one program at a
  time); with more ranks the kernel refuses at compile time (a GPU runs it). The interpreter's
  tl.dot also misreads bfloat16 blocks, so there they are multiplied as float32 (exactly), and
  its float32-to-bfloat16 cast truncates, so there the rounding to nearest is done on the bits.
"""

import triton
import triton.language as tl

# The module, not its DeviceContext: aperture.iris._device_context imports this package.
from .. import _device_context
from ._gemm import (_BF16_ATOMICS_INTERPRETED, _INTERPRETED, accumulator, add_bias, operand_ptrs, part_k, part_side,
                    product, tile_rows_cols, to_output)
from .all_reduce import all_reduce_atomic
from .core import Tile, make_tensor_view


@triton.jit
def _tile(A, B, C, bias_ptr, tile_id, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
          stride_bias, heap_bases, cur_rank: tl.constexpr, world_size: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
          BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, BIAS: tl.constexpr,
          EVEN_K: tl.constexpr, CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr,
          ALLOW_TF32: tl.constexpr):
    pid_m, pid_n, rm, rn = tile_rows_cols(tile_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    a_ptrs, b_ptrs = operand_ptrs(A, B, rm, rn, M, N, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_SIZE_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=accumulator(A.dtype.element_ty))
    acc = product(acc, a_ptrs, b_ptrs, K, stride_ak, stride_bk, BLOCK_SIZE_K, not EVEN_K, CACHE_MODIFIER_A,
                  CACHE_MODIFIER_B, ALLOW_TF32)
    acc = add_bias(acc, bias_ptr, rm, M, stride_bias, BIAS)
    result = to_output(acc, C.dtype.element_ty)
    view = make_tensor_view(C, M, N, stride_cm, stride_cn)
    tile = Tile(pid_m, pid_n, BLOCK_SIZE_M, BLOCK_SIZE_N, result)
    if _INTERPRETED and C.dtype.element_ty == tl.bfloat16:
        tl.static_assert(world_size == 1, _BF16_ATOMICS_INTERPRETED)
        ptrs, mask = view.tile_ptr(tile)
        total = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32) + result.to(tl.float32)
        tl.store(ptrs, to_output(total, tl.bfloat16), mask=mask)
    else:
        all_reduce_atomic(tile, view, _device_context.DeviceContext(cur_rank, world_size, heap_bases))


@triton.jit
def gemm_all_reduce(A, B, C, bias_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                    stride_bias, heap_bases, cur_rank: tl.constexpr, world_size: tl.constexpr,
                    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                    GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr,
                    CHUNK_SIZE: tl.constexpr, BIAS: tl.constexpr, EVEN_K: tl.constexpr,
                    CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr):
    """Every rank's C (M x N, zero at the start) += this rank's A (M x K) @ B (K x N) + bias[:, None].

    Launch on a grid of NUM_SMS programs, every rank the same kernel with its own ``cur_rank``
    (``heap_bases``: the heap's table, ``get_heap_bases()``). A, B, C and bias are this rank's
    tensors, C on the symmetric heap. Strides are in elements.
    BIAS (0/1) adds bias[m] (bias_ptr: M elements) to row m of this rank's product. Once every
    rank's kernel is done, C holds the sum over ranks.

    The parameters are Iris's, in its order; ``stride_bn`` and ``stride_bk`` keep Iris's names,
    and the first is B's stride along K (``B.stride(0)``), the second along N, as Iris's tests
    pass them."""
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


__all__ = ["gemm_all_reduce"]
