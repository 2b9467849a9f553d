"""``iris.ops.matmul_reduce_scatter``: GEMM then reduce-scatter, at Iris's module path
(``from iris.ops.matmul_reduce_scatter import ...``); ops/_gemm_collective.py implements it."""

from ._gemm_collective import matmul_reduce_scatter, matmul_reduce_scatter_preamble

__all__ = ["matmul_reduce_scatter", "matmul_reduce_scatter_preamble"]
