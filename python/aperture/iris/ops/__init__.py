"""``iris.ops``: Iris's fused GEMM + collective operations, on aperture.

``ctx.ops.matmul_all_reduce(output, A, B)`` (the Iris object's ``ops`` namespace) or
``iris.ops.matmul_all_reduce(ctx, output, A, B)``, and likewise ``all_gather_matmul``,
``matmul_all_gather``, ``matmul_reduce_scatter``, the ``_hbm_buffer`` variants of
all_gather_matmul and of a reduce-scatter by rows, ``matmul_reduce_scatter_fast`` and its
standalone reduce-scatter ``fast_reduce_scatter``; the ``*_preamble`` functions; ``FusedConfig``
and ``FusedWorkspace``. Each runs as a torch GEMM followed by a collective on the context's
aperture Communicator (ops/_gemm_collective.py says what each computes), except the row
reduce-scatter on bf16 GPU operands of suitable shape, which is aperture.OverlappedGemm's
gemm_rs; docs/IRIS.md lists how this differs from Iris's Triton kernels.

``TRITONBLAS_AVAILABLE`` is Iris's flag for the operations it builds with the optional tritonBLAS
(matmul_all_reduce, all_gather_matmul and its _hbm_buffer variant, matmul_all_gather,
matmul_reduce_scatter, and their preambles): True when they work. Here they need no tritonBLAS
(torch's GEMM), so it is always True.

Four modules Iris keeps at their own paths only (its ``iris/ops/__init__.py`` re-exports none of
their names), so here too ``iris.ops.<module>`` is the module: ``all_reduce_fast`` (one-shot and
two-shot pull all-reduce, and a GEMM before it), ``reduce_scatter_auto`` (a row reduce-scatter
choosing one-shot or the ring by size, and a GEMM before it), ``all_gather_matmul_m`` (rows of A
gathered along M, then the GEMM) and ``matmul_all_reduce_hbm_buffer`` (GEMM + two-shot
all-reduce through heap staging buffers). Their reductions add in fp32 and round once, as Iris's
pull kernels do (ops/_pull_collectives.py).
"""

import weakref

# Each operation through its module at Iris's path (iris.ops.matmul_reduce_scatter ...), so the
# module is loaded, and aliased by `python -m aperture.iris`, before a program imports it: the
# import system would otherwise set iris.ops.<name>, the function, to the module on that import.
from ._gemm_collective import OpsAssertionError, OpsError
from .all_gather_matmul import all_gather_matmul, all_gather_matmul_preamble
from .all_gather_matmul_hbm_buffer import all_gather_matmul_hbm_buffer, all_gather_matmul_hbm_buffer_preamble
from .matmul import matmul, matmul_preamble
from .matmul_all_gather import matmul_all_gather
from .matmul_all_reduce import matmul_all_reduce, matmul_all_reduce_preamble
from .matmul_reduce_scatter import matmul_reduce_scatter, matmul_reduce_scatter_preamble
from .matmul_reduce_scatter_fast import (
    fast_reduce_scatter,
    matmul_reduce_scatter_fast,
    matmul_reduce_scatter_fast_preamble,
)
from .matmul_reduce_scatter_hbm_buffer import (
    matmul_reduce_scatter_hbm_buffer,
    matmul_reduce_scatter_hbm_buffer_preamble,
)
from .config import FusedConfig
from .workspace import FusedWorkspace

TRITONBLAS_AVAILABLE = True  # the operations Iris guards by it run on torch's GEMM here

# Loaded here so that `python -m aperture.iris` aliases them too (one module object under both
# names); as in Iris, iris.ops.<name> is then the module, its functions not re-exported.
from . import all_gather_matmul_m, all_reduce_fast, matmul_all_reduce_hbm_buffer, reduce_scatter_auto  # noqa: F401


class OpsNamespace:
    """``ctx.ops``: the operations with the context filled in."""

    def __init__(self, ctx):
        # Weak, as ctx.ccl: the context owns this object.
        self._shmem = weakref.proxy(ctx)

    def matmul_all_reduce(self, output_tensor, A, B, *args, **kwargs):
        # Either of Iris's orders after B (async_op, config, workspace, or the older bias first):
        # matmul_all_reduce reads them.
        return matmul_all_reduce(self._shmem, output_tensor, A, B, *args, **kwargs)

    def all_gather_matmul(self, output_tensor, A_sharded, B, bias=None, async_op=False, config=None, workspace=None):
        return all_gather_matmul(self._shmem, output_tensor, A_sharded, B, bias, async_op, config, workspace)

    def matmul_all_gather(self, output_tensor, A, B, bias=None, async_op=False, config=None, workspace=None):
        return matmul_all_gather(self._shmem, output_tensor, A, B, bias, async_op, config, workspace)

    def matmul_reduce_scatter(self, output_tensor, A, B, bias=None, async_op=False, config=None, workspace=None):
        return matmul_reduce_scatter(self._shmem, output_tensor, A, B, bias, async_op, config, workspace)

    def matmul_reduce_scatter_fast(self, output_tensor, A, B, **kwargs):
        return matmul_reduce_scatter_fast(self._shmem, output_tensor, A, B, **kwargs)

    def matmul_reduce_scatter_fast_preamble(self, output_tensor, A, B, **kwargs):
        return matmul_reduce_scatter_fast_preamble(self._shmem, output_tensor, A, B, **kwargs)

    def fast_reduce_scatter(self, output_tensor, input_tensor, **kwargs):
        return fast_reduce_scatter(self._shmem, output_tensor, input_tensor, **kwargs)


__all__ = [
    "FusedConfig", "FusedWorkspace", "OpsNamespace", "OpsError", "OpsAssertionError", "matmul", "matmul_preamble",
    "matmul_all_reduce",
    "matmul_all_reduce_preamble",
    "all_gather_matmul", "all_gather_matmul_preamble", "matmul_all_gather", "matmul_reduce_scatter",
    "matmul_reduce_scatter_preamble", "all_gather_matmul_hbm_buffer", "all_gather_matmul_hbm_buffer_preamble",
    "matmul_reduce_scatter_hbm_buffer", "matmul_reduce_scatter_hbm_buffer_preamble", "matmul_reduce_scatter_fast",
    "matmul_reduce_scatter_fast_preamble", "fast_reduce_scatter", "TRITONBLAS_AVAILABLE",
]
