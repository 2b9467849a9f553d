"""``iris.x``: Iris's tile-level collectives, for kernels that iterate over their own tiles.

A kernel describes one tile (``Tile(pid_m, pid_n, BLOCK_M, BLOCK_N, data)``, ``TileView`` without
data) of a tensor (``make_tensor_view(ptr, M, N, stride_m, stride_n)``) and calls a collective
with a device context, the standalone way::

    ctx = iris.DeviceContext.initialize(context_tensor, RANK, WORLD_SIZE)
    iris.x.all_reduce_atomic(iris.x.Tile(pid_m, pid_n, BM, BN, acc), dst_view, ctx)

or as the context's method (``ctx.all_reduce_atomic(tile, dst_view)``; the methods are listed in
aperture.iris._device_context). The collectives are aperture's own, on aperture.triton: every peer
access goes through the heap's table, and every wait is an acquire at system scope. What each
variant does, and where it differs from Iris, is in its module and in docs/IRIS.md. Iris's
prefill flash attention (one GPU, paged, distributed over the heap, ring; ``prefill_attn``) and
its fused GEMM + collective kernels (``gemm_all_reduce``, ``gemm_all_gather``, ``gemm_reduce_scatter``,
``all_gather_gemm``) are here too.
"""

from .all_gather import all_gather
from .all_reduce import all_reduce_atomic, all_reduce_one_shot, all_reduce_ring, all_reduce_spinlock, all_reduce_two_shot
from .all_gather_gemm import all_gather_gemm
from .all_to_all import all_to_all
from .core import AllReduceConfig, TensorView, Tile, TileView, make_tensor_view, offset_ptr, tile_layout, tile_ptr
from .gather import gather
from .gemm_all_gather import gemm_all_gather
from .gemm_all_reduce import gemm_all_reduce
from .gemm_reduce_scatter import gemm_reduce_scatter
from .reduce_scatter import reduce_scatter
from .prefill_attn import (
    distributed_prefill_attn_kernel,
    finalize_prefill_output_kernel,
    flash_prefill_kernel,
    flash_prefill_step,
    fused_ring_prefill_attn_kernel,
    load_kv_tile_global_paged,
    load_kv_tile_paged,
    paged_prefill_attn,
    paged_prefill_attn_kernel,
    reference_prefill_attn,
    ring_prefill_attn_step_kernel,
)


def __getattr__(name):
    # iris.x.DeviceContext(rank, world_size, heap_bases) is the one device context of aperture.iris;
    # imported on first use because that context's methods are built on this package.
    if name == "DeviceContext":
        from .._device_context import DeviceContext

        return DeviceContext
    raise AttributeError(f"module 'iris.x' has no attribute '{name}'")


__all__ = [
    "Tile", "TileView", "TensorView", "DeviceContext", "AllReduceConfig", "tile_layout", "tile_ptr", "offset_ptr",
    "make_tensor_view", "all_reduce_atomic", "all_reduce_ring", "all_reduce_two_shot", "all_reduce_one_shot",
    "all_reduce_spinlock", "gather", "all_gather", "all_to_all", "reduce_scatter",
    # Fused GEMM + collective kernels (Iris builds them on tritonBLAS; these are plain Triton).
    "gemm_all_reduce", "gemm_all_gather", "gemm_reduce_scatter", "all_gather_gemm",
    # Prefill flash attention: one GPU, paged, distributed over the heap, ring (prefill_attn).
    "flash_prefill_step", "flash_prefill_kernel", "reference_prefill_attn", "load_kv_tile_paged",
    "paged_prefill_attn_kernel", "paged_prefill_attn", "load_kv_tile_global_paged",
    "distributed_prefill_attn_kernel", "ring_prefill_attn_step_kernel", "finalize_prefill_output_kernel",
    "fused_ring_prefill_attn_kernel",
]
