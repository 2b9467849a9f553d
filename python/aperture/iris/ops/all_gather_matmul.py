"""``iris.ops.all_gather_matmul``: all-gather of A's column shards then GEMM, at Iris's module path
(``from iris.ops.all_gather_matmul import ...``); ops/_gemm_collective.py implements it."""

from ._gemm_collective import all_gather_matmul, all_gather_matmul_preamble

__all__ = ["all_gather_matmul", "all_gather_matmul_preamble"]
