"""``iris.ops.matmul_reduce_scatter_hbm_buffer``: GEMM then reduce-scatter by rows, at Iris's module path
(``from iris.ops.matmul_reduce_scatter_hbm_buffer import ...``); ops/_gemm_collective.py implements it."""

from ._gemm_collective import matmul_reduce_scatter_hbm_buffer, matmul_reduce_scatter_hbm_buffer_preamble

__all__ = ["matmul_reduce_scatter_hbm_buffer", "matmul_reduce_scatter_hbm_buffer_preamble"]
