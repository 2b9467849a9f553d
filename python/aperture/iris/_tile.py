"""Where a tile lies in a 2-D tensor, and the objects that carry it: ``iris.x.core``,
``iris.mem.triton.types`` and ``iris.Tile`` ... are this module's names. It stands apart from both
packages so that ``import iris`` does not import every iris.x kernel to get them.

A tile is block (pid_m, pid_n) of BLOCK_M x BLOCK_N elements; a tensor view is a pointer with its
shape and strides. ``TensorView.tile_ptr(tile)`` gives the tile's pointer block and bounds mask,
valid on this rank: the collectives of iris.x translate it to a peer through the heap's table.

Offsets are computed in int64, so a view larger than 2**31 elements addresses correctly. Shapes and
strides may be runtime values or compile-time constants (Iris's older TensorView required
constants; its newest requires runtime values: both work here).
"""

import triton
import triton.language as tl
from triton.language.core import _aggregate as aggregate
from triton.language.core import base_value

from .tracing.device import bind_interpreted_methods


@triton.constexpr_function
def _value(x):
    # A Python int (a literal, under the interpreter) becomes a constant an aggregate can hold.
    return x if isinstance(x, base_value) else tl.constexpr(x)


@triton.jit
def tile_layout(pid_m, pid_n, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """Rows ``rm`` and columns ``rn`` of tile (pid_m, pid_n), and the mask of those inside M x N."""
    rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    # Each tile's indices are one contiguous, block-aligned run: say so for vectorised access.
    rm = tl.max_contiguous(tl.multiple_of(rm, BLOCK_SIZE_M), BLOCK_SIZE_M)
    rn = tl.max_contiguous(tl.multiple_of(rn, BLOCK_SIZE_N), BLOCK_SIZE_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    return rm, rn, mask


# Iris's names of tile_layout and of the offset grids its ccl kernels index with.
compute_tile_indices = tile_layout


@triton.jit
def compute_tile_offsets(rm, rn, stride_in_m, stride_in_n, stride_out_m, stride_out_n):
    """The element offsets of the tile rows ``rm`` x columns ``rn`` in an input and in an output of
    the given strides: ``(input_offset, output_offset)``, each a 2-D block (int64: no overflow on
    large tensors)."""
    rows, cols = rm.to(tl.int64)[:, None], rn.to(tl.int64)[None, :]
    return rows * stride_in_m + cols * stride_in_n, rows * stride_out_m + cols * stride_out_n


@triton.jit
def chiplet_transform_chunked(pid, num_workgroups, num_xcds: tl.constexpr, chunk_size: tl.constexpr):
    """Iris's program-id renumbering for AMD's multi-die GPUs: the hardware deals programs to the
    dies round-robin, and this makes ``chunk_size`` consecutive new ids share a die (and its L2).
    Ids past the last whole group of ``num_xcds * chunk_size`` keep their number. It permutes
    [0, num_workgroups), so a kernel's result never depends on it; with ``num_xcds`` 1 (every
    NVIDIA GPU, ``Config.num_xcds`` here) it is the identity."""
    group = num_xcds * chunk_size
    die = pid % num_xcds
    slot = pid // num_xcds  # the program's place in its die's queue
    moved = (slot // chunk_size) * group + die * chunk_size + slot % chunk_size
    return tl.where(pid < (num_workgroups // group) * group, moved, pid)


@triton.jit
def _block_ptr(ptr, rm, rn, M, N, stride_m, stride_n):
    offsets = rm.to(tl.int64)[:, None] * stride_m + rn.to(tl.int64)[None, :] * stride_n
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    return ptr + offsets, mask


@triton.jit
def tile_ptr(ptr, M, N, stride_m, stride_n, pid_m, pid_n, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """The pointer block of tile (pid_m, pid_n) of the M x N tensor at ``ptr``, and its mask."""
    rm, rn, _ = tile_layout(pid_m, pid_n, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N)
    return _block_ptr(ptr, rm, rn, M, N, stride_m, stride_n)


@triton.jit
def offset_ptr(ptr, stride_m, stride_n, offset_m, offset_n):
    """``ptr`` moved by offset_m rows and offset_n columns."""
    return ptr + tl.cast(offset_m, tl.int64) * stride_m + tl.cast(offset_n, tl.int64) * stride_n


class _TileView:
    """Tile (pid_m, pid_n) of block_m x block_n elements, without data."""

    pid_m: base_value
    pid_n: base_value
    block_m: tl.constexpr
    block_n: tl.constexpr

    @triton.constexpr_function
    def __init__(self, pid_m, pid_n, block_m, block_n):
        self.pid_m = _value(pid_m)
        self.pid_n = _value(pid_n)
        self.block_m = tl.constexpr(block_m)
        self.block_n = tl.constexpr(block_n)

    @triton.jit
    def layout(self, M, N):
        """``tile_layout`` of this tile: rows, columns and the mask inside M x N."""
        return tile_layout(self.pid_m, self.pid_n, M, N, self.block_m, self.block_n)

    @triton.jit
    def indices(self):
        """This tile's rows and columns, with no bounds check."""
        rm = self.pid_m * self.block_m + tl.arange(0, self.block_m)
        rn = self.pid_n * self.block_n + tl.arange(0, self.block_n)
        return rm, rn


class _Tile:
    """A tile and its data: block_m x block_n values in registers (a GEMM's result, a loaded block)."""

    pid_m: base_value
    pid_n: base_value
    block_m: tl.constexpr
    block_n: tl.constexpr
    data: base_value

    @triton.constexpr_function
    def __init__(self, pid_m, pid_n, block_m, block_n, data):
        self.pid_m = _value(pid_m)
        self.pid_n = _value(pid_n)
        self.block_m = tl.constexpr(block_m)
        self.block_n = tl.constexpr(block_n)
        self.data = _value(data)

    layout = _TileView.layout
    indices = _TileView.indices


class _TensorView:
    """An M x N tensor at ``ptr`` with strides (stride_m, stride_n), in elements."""

    ptr: base_value
    M: base_value
    N: base_value
    stride_m: base_value
    stride_n: base_value

    @triton.constexpr_function
    def __init__(self, ptr, M, N, stride_m, stride_n):
        self.ptr = ptr
        self.M = _value(M)
        self.N = _value(N)
        self.stride_m = _value(stride_m)
        self.stride_n = _value(stride_n)

    @triton.jit
    def tile_ptr(self, tile):
        """The pointer block of ``tile`` in this tensor, and its bounds mask."""
        rm, rn = tile.indices()
        return self.tile_ptr_from_indices(rm, rn, tile.block_m, tile.block_n)

    @triton.jit
    def tile_ptr_from_indices(self, rm, rn, block_m: tl.constexpr, block_n: tl.constexpr):
        """The pointer block of rows ``rm`` x columns ``rn`` (each a contiguous run of block_m and
        block_n indices starting at a multiple of the block), and its bounds mask."""
        rm = tl.max_contiguous(tl.multiple_of(rm, block_m), block_m)
        rn = tl.max_contiguous(tl.multiple_of(rn, block_n), block_n)
        return _block_ptr(self.ptr, rm, rn, self.M, self.N, self.stride_m, self.stride_n)

    @triton.jit
    def offset_tile_ptr(self, tile, offset_m=0, offset_n=0, src_mask=None):
        """``tile``'s pointer block moved by offset_m rows and offset_n columns (where a rank's
        part of a gathered tensor starts), masked to this view and, if given, ``src_mask``."""
        rm, rn = tile.indices()
        ptrs, mask = _block_ptr(self.ptr, rm + offset_m, rn + offset_n, self.M, self.N, self.stride_m, self.stride_n)
        if src_mask is not None:
            mask = mask & src_mask
        return ptrs, mask

    @triton.jit
    def offset(self, offset_m=0, offset_n=0):
        """The view whose pointer is this one's moved by offset_m rows and offset_n columns (same
        shape and strides)."""
        return TensorView(offset_ptr(self.ptr, self.stride_m, self.stride_n, offset_m, offset_n), self.M, self.N,
                          self.stride_m, self.stride_n)

    @triton.jit
    def number_of_tiles(self, block_m, block_n):
        """How many block_m x block_n tiles cover this tensor."""
        return tl.cdiv(self.M, block_m) * tl.cdiv(self.N, block_n)


class _AllReduceConfig:
    """Which all-reduce a kernel runs, as Iris numbers them (0 atomic, 1 ring, 2 one_shot,
    3 two_shot, 4 spinlock), and the locks the variant waits on (any pointer where it needs none)."""

    variant_code: tl.constexpr
    locks_ptr: base_value

    @triton.constexpr_function
    def __init__(self, variant_code, locks_ptr):
        self.variant_code = tl.constexpr(variant_code)
        self.locks_ptr = _value(locks_ptr)


def _named_aggregate(source, name):
    cls = aggregate(source)
    cls.__name__ = cls.__qualname__ = name
    bind_interpreted_methods(cls, source)
    return cls


TileView = _named_aggregate(_TileView, "TileView")
Tile = _named_aggregate(_Tile, "Tile")
TensorView = _named_aggregate(_TensorView, "TensorView")
AllReduceConfig = _named_aggregate(_AllReduceConfig, "AllReduceConfig")


@triton.jit
def make_tensor_view(ptr, M, N, stride_m, stride_n):
    """``TensorView(ptr, M, N, stride_m, stride_n)``, built inside a kernel."""
    return TensorView(ptr, M, N, stride_m, stride_n)


__all__ = ["TileView", "Tile", "TensorView", "AllReduceConfig", "tile_layout", "tile_ptr", "offset_ptr",
           "make_tensor_view", "compute_tile_indices", "compute_tile_offsets", "chiplet_transform_chunked"]
