"""``iris.compile``: Iris's collectives as torch custom operators (``torch.ops.iris.all_reduce``,
``all_gather``, ``reduce_scatter``, ``all_to_all``, ``wait_tensor``) that torch.compile traces
through, on aperture's Communicator. Both forms Iris has had: ``setup(ctx)`` with the functional
calls of ``functional_collectives``, and ``set_context(ctx)`` / ``get_context()``."""

from .functional import get_context, set_context
from .functional_collectives import IrisCompileContext, all_gather, all_reduce, reduce_scatter, setup, wait_tensor

__all__ = ["IrisCompileContext", "all_reduce", "all_gather", "reduce_scatter", "wait_tensor", "setup",
           "set_context", "get_context"]
