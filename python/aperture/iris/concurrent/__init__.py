"""``iris.concurrent``: an independent computation and a collective at once on one GPU, from
work-stealing queues (``iris.concurrent.gemm``: a local GEMM beside all_gather, all_reduce,
reduce_scatter, all_to_all or broadcast), with ``tune=True`` backed by ``iris.concurrent.autotune``.
``iris.concurrent.predictor`` (AMD's origami cost models) is AMD-only."""

from . import autotune, gemm

__all__ = ["autotune", "gemm"]
