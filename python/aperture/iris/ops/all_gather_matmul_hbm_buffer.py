"""``iris.ops.all_gather_matmul_hbm_buffer``: all_gather_matmul through a heap staging buffer, at Iris's module path
(``from iris.ops.all_gather_matmul_hbm_buffer import ...``); ops/_gemm_collective.py implements it."""

from ._gemm_collective import all_gather_matmul_hbm_buffer, all_gather_matmul_hbm_buffer_preamble

__all__ = ["all_gather_matmul_hbm_buffer", "all_gather_matmul_hbm_buffer_preamble"]
