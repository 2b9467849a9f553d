"""The persistent tiled GEMM that aperture's fused iris.x kernels share (gemm_all_reduce,
gemm_all_gather, gemm_reduce_scatter, all_gather_gemm): the tile numbering (``tile_coords``,
swizzled by GROUP_SIZE_M rows of tiles), the operands' pointers and cache hints, the K loop
(``product``, float32 accumulation by ``tl.dot``), the row bias, and the rounding to the output
type in both Triton modes. What each Iris parameter means here is in gemm_all_reduce's docstring.
"""


import triton
import triton.language as tl

import aperture.triton as apt


# Triton 3.6's interpreter cannot take a kernel's run-time scalar (a one-element array there) as
# a bound of range(): interpreted, the K loop is a while loop; compiled, it stays a for loop, which
# Triton software-pipelines. The kernels' loops over tiles are while loops in both modes.
_INTERPRETED = tl.constexpr(bool(triton.knobs.runtime.interpret))

_BF16_ATOMICS_INTERPRETED = tl.constexpr(
    "aperture.iris.x: Triton's interpreter has no bfloat16 atomics, which the reduction of a bfloat16 output "
    "needs with more than one rank: run the kernel on a GPU, or use float16 / float32 under the interpreter")


@triton.constexpr_function
def cache_hint(modifier):
    """The tl.load cache modifier for Iris's CACHE_MODIFIER_A/B."""
    if modifier is None or modifier in ("", ".cs", ".lu"):
        return ""
    if modifier in (".ca", ".cg", ".cv"):
        return modifier
    raise ValueError(f"aperture.iris.x: cache modifier {modifier!r} is not one a load takes on NVIDIA; give None, "
                     "'.ca', '.cg', '.cv', '.cs' or '.lu'")


@triton.constexpr_function
def eviction_hint(modifier):
    """The tl.load eviction policy for Iris's CACHE_MODIFIER_A/B (AMD's streaming hints)."""
    return "evict_first" if modifier in (".cs", ".lu") else ""


# The largest part of an output tile one program computes at a time: a float32 accumulator of
# 128 x 128 (128 registers a thread with Triton's default 4 warps) and operand slices of 32 KiB a
# K step (Triton's default 3 pipeline stages then fit the shared memory of an A100, H100 or H200).
# Iris's tests ask for tiles up to 256 x 256 x 128, sized for AMD's GPUs. On an H100 such a tile
# as one part asked for 384 KiB of shared memory in float16 (Triton: "out of resource"), and in
# float32 had not finished after 100 s (2026-12-05). A larger tile is computed
# in parts of at most these sizes: which program computes which elements, and how the K steps
# group the sum, change; what is computed does not.
PART_ELEMENTS = 128 * 128
PART_STEP_BYTES = 32 << 10


@triton.constexpr_function
def part_side(block_m, block_n, axis):
    """Rows (axis 0) or columns (axis 1) of the parts of a BLOCK_SIZE_M x BLOCK_SIZE_N tile, each
    a power of two dividing its block side: the larger side is halved, rows first, until a part
    holds PART_ELEMENTS."""
    sides = [block_m, block_n]
    while sides[0] * sides[1] > PART_ELEMENTS:
        sides[0 if sides[0] >= sides[1] else 1] //= 2
    return sides[axis]


@triton.constexpr_function
def part_k(m, n, block_k, dtype):
    """The K step of an m x n part with ``dtype`` operands: block_k, halved while its two operand
    slices exceed PART_STEP_BYTES (down to 16, tl.dot's least). It divides block_k, so EVEN_K's
    promise (K % BLOCK_SIZE_K == 0) holds for it too."""
    k, size = block_k, max(dtype.primitive_bitwidth // 8, 1)
    while k > 16 and (m + n) * k * size > PART_STEP_BYTES:
        k //= 2
    return k


@triton.constexpr_function
def dot_precision(allow_tf32):
    return "tf32" if allow_tf32 else "ieee"


@triton.constexpr_function
def accumulator(dtype):
    return tl.int32 if dtype == tl.int8 else tl.float32


@triton.jit
def to_output(x, dtype: tl.constexpr):
    """``x`` rounded to ``dtype`` to nearest, ties to even (a compiled cast's rounding). Triton
    3.6's interpreter truncates float32 to bfloat16, so there the rounding is done on the bits."""
    if _INTERPRETED and dtype == tl.bfloat16:
        bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        y = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        y = x.to(dtype)
    return y


@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Tile number -> (pid_m, pid_n), grouped: GROUP_SIZE_M rows of tiles are walked column by
    column, so consecutive tiles share B's columns and A's rows."""
    in_group = GROUP_SIZE_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_SIZE_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (tile_id % in_group) % rows
    pid_n = (tile_id % in_group) // rows
    return pid_m, pid_n


@triton.jit
def _load_a(a_ptrs, mask, other, CACHE_MODIFIER_A: tl.constexpr, a_rank, cur_rank, heap_bases):
    if heap_bases is None:
        a = tl.load(a_ptrs, mask=mask, other=other, cache_modifier=cache_hint(CACHE_MODIFIER_A),
                    eviction_policy=eviction_hint(CACHE_MODIFIER_A))
    else:  # A lies on a_rank's heap
        a = apt.load(a_ptrs, cur_rank, a_rank, heap_bases, mask=mask, other=other,
                     cache_modifier=cache_hint(CACHE_MODIFIER_A))
    return a


@triton.jit
def _k_step(acc, k, a_ptrs, b_ptrs, k_len, stride_ak, stride_bk, BLOCK_SIZE_K: tl.constexpr, MASK_K: tl.constexpr,
            CACHE_MODIFIER_A, CACHE_MODIFIER_B, ALLOW_TF32, a_rank, cur_rank, heap_bases, copy_ptrs, copy_mask,
            stride_copy_k):
    # The BLOCK_SIZE_K slice that starts k columns of A (rows of B) past the first one.
    a_ptrs += k * stride_ak
    b_ptrs += k * stride_bk
    if copy_ptrs is not None:
        copy_ptrs += k * stride_copy_k
    if MASK_K:
        in_k = tl.arange(0, BLOCK_SIZE_K) < k_len - k
        a = _load_a(a_ptrs, in_k[None, :], 0.0, CACHE_MODIFIER_A, a_rank, cur_rank, heap_bases)
        b = tl.load(b_ptrs, mask=in_k[:, None], other=0.0, cache_modifier=cache_hint(CACHE_MODIFIER_B),
                    eviction_policy=eviction_hint(CACHE_MODIFIER_B))
        if copy_ptrs is not None:  # all_gather_gemm keeps the A it read
            tl.store(copy_ptrs, a, mask=copy_mask & in_k[None, :])
    else:
        a = _load_a(a_ptrs, None, None, CACHE_MODIFIER_A, a_rank, cur_rank, heap_bases)
        b = tl.load(b_ptrs, cache_modifier=cache_hint(CACHE_MODIFIER_B),
                    eviction_policy=eviction_hint(CACHE_MODIFIER_B))
        if copy_ptrs is not None:
            tl.store(copy_ptrs, a, mask=copy_mask)
    if _INTERPRETED and a.dtype == tl.bfloat16:
        # Triton 3.6's interpreter multiplies bfloat16 blocks as their raw 16-bit patterns: it
        # gets them as float32, exactly (every product of two bfloat16 values is a float32 value).
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=dot_precision(ALLOW_TF32), out_dtype=acc.dtype)


@triton.jit
def product(acc, a_ptrs, b_ptrs, k_len, stride_ak, stride_bk, BLOCK_SIZE_K: tl.constexpr, MASK_K: tl.constexpr,
            CACHE_MODIFIER_A: tl.constexpr, CACHE_MODIFIER_B: tl.constexpr, ALLOW_TF32: tl.constexpr, a_rank=0,
            cur_rank=0, heap_bases=None, copy_ptrs=None, copy_mask=None, stride_copy_k=0):
    """``acc`` + A_block @ B_block over k_len: ``a_ptrs`` (BLOCK_M x BLOCK_SIZE_K) and ``b_ptrs``
    (BLOCK_SIZE_K x BLOCK_N) point at the first K slice.
    MASK_K=False promises k_len % BLOCK_SIZE_K == 0. Given ``heap_bases``, A is read from
    a_rank's heap (the pointers are cur_rank's); given ``copy_ptrs``, every A slice read is also
    stored at its K offset there (``copy_mask``, K stride ``stride_copy_k``)."""
    if _INTERPRETED:  # the module's header says why the two loops
        k = 0
        while k < k_len:
            acc = _k_step(acc, k, a_ptrs, b_ptrs, k_len, stride_ak, stride_bk, BLOCK_SIZE_K, MASK_K, CACHE_MODIFIER_A,
                          CACHE_MODIFIER_B, ALLOW_TF32, a_rank, cur_rank, heap_bases, copy_ptrs, copy_mask,
                          stride_copy_k)
            k += BLOCK_SIZE_K
    else:
        for k in range(0, k_len, BLOCK_SIZE_K):
            acc = _k_step(acc, k, a_ptrs, b_ptrs, k_len, stride_ak, stride_bk, BLOCK_SIZE_K, MASK_K, CACHE_MODIFIER_A,
                          CACHE_MODIFIER_B, ALLOW_TF32, a_rank, cur_rank, heap_bases, copy_ptrs, copy_mask,
                          stride_copy_k)
    return acc


@triton.jit
def operand_ptrs(A, B, rm, rn, M, N, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_SIZE_K: tl.constexpr):
    """The first K slice's pointer blocks of rows ``rm`` of A and columns ``rn`` of B. Rows and
    columns past M and N read row/column index % M or % N (in bounds, no mask); their results are
    never stored."""
    BLOCK_M: tl.constexpr = rm.shape[0]
    BLOCK_N: tl.constexpr = rn.shape[0]
    rk = tl.arange(0, BLOCK_SIZE_K)
    # Each tile starts inside M x N at a multiple of its block: the wrapped indices are contiguous
    # runs the compiler may vectorise (a vector past M or N only feeds results that are not stored).
    rows = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M).to(tl.int64)
    cols = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N).to(tl.int64)
    a_ptrs = A + rows[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = B + rk[:, None] * stride_bk + cols[None, :] * stride_bn
    return a_ptrs, b_ptrs


@triton.jit
def add_bias(acc, bias_ptr, rm, M, stride_bias, BIAS: tl.constexpr):
    """With BIAS, ``acc`` + bias[m] on each row m (Iris's row bias, a vector of M elements)."""
    if BIAS:
        bias = tl.load(bias_ptr + rm.to(tl.int64) * stride_bias, mask=rm < M, other=0.0)
        acc = acc + bias.to(acc.dtype)[:, None]
    return acc


@triton.jit
def tile_rows_cols(tile_id, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                   GROUP_SIZE_M: tl.constexpr):
    """(pid_m, pid_n, rows, columns) of output tile ``tile_id`` of M x N."""
    pid_m, pid_n = tile_coords(tile_id, tl.cdiv(M, BLOCK_SIZE_M), tl.cdiv(N, BLOCK_SIZE_N), GROUP_SIZE_M)
    rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    return pid_m, pid_n, rm, rn
