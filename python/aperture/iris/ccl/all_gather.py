"""``iris.ccl.all_gather``: Iris's module form of ``ctx.ccl.all_gather``."""

from ._module_api import ccl_of


def all_gather(output_tensor, input_tensor, ctx, group=None, async_op=False, config=None):
    return ccl_of(ctx, "all_gather").all_gather(output_tensor, input_tensor, group=group, async_op=async_op,
                                                config=config)
