"""``iris.ccl.all_reduce``: Iris's module form of ``ctx.ccl.all_reduce`` and its preamble."""

from . import AllReduceWorkspace  # noqa: F401  (what all_reduce_preamble returns and all_reduce takes back)
from ._module_api import ccl_of


def all_reduce_preamble(output_tensor, input_tensor, ctx, config=None, workspace=None):
    return ccl_of(ctx, "all_reduce_preamble").all_reduce_preamble(output_tensor, input_tensor, config=config,
                                                                  workspace=workspace)


def all_reduce(output_tensor, input_tensor, ctx, op=None, group=None, async_op=False, config=None, workspace=None):
    return ccl_of(ctx, "all_reduce").all_reduce(output_tensor, input_tensor, op=op, group=group, async_op=async_op,
                                                config=config, workspace=workspace)
