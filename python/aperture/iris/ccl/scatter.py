"""``iris.ccl.scatter``: Iris's module form of ``ctx.ccl.scatter``."""

from ._module_api import ccl_of


def scatter(output_tensor, input_tensor, ctx, src=0, group=None, async_op=False, config=None):
    ccl_of(ctx, "scatter").scatter(output_tensor, input_tensor, src=src, group=group, async_op=async_op, config=config)
