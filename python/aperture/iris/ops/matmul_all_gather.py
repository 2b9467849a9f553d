"""``iris.ops.matmul_all_gather``: GEMM then all-gather by rows, at Iris's module path
(``from iris.ops.matmul_all_gather import ...``); ops/_gemm_collective.py implements it."""

from ._gemm_collective import matmul_all_gather

__all__ = ["matmul_all_gather"]
