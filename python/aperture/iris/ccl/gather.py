"""``iris.ccl.gather``: Iris's module form of ``ctx.ccl.gather``."""

from ._module_api import ccl_of


def gather(output_tensor, input_tensor, ctx, dst=0, group=None, async_op=False, config=None):
    ccl_of(ctx, "gather").gather(output_tensor, input_tensor, dst=dst, group=group, async_op=async_op, config=config)
