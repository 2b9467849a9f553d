"""``iris.ccl.all_to_all``: Iris's module form of ``ctx.ccl.all_to_all``."""

from ._module_api import ccl_of


def all_to_all(output_tensor, input_tensor, ctx, group=None, async_op=False, config=None):
    return ccl_of(ctx, "all_to_all").all_to_all(output_tensor, input_tensor, group=group, async_op=async_op,
                                                config=config)
