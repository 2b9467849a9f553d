"""``iris.ops.matmul_all_reduce``: GEMM then all-reduce, at Iris's module path
(``from iris.ops.matmul_all_reduce import ...``); ops/_gemm_collective.py implements it."""

from ._gemm_collective import matmul_all_reduce, matmul_all_reduce_preamble

__all__ = ["matmul_all_reduce", "matmul_all_reduce_preamble"]
