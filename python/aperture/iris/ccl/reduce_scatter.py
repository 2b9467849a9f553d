"""``iris.ccl.reduce_scatter``: Iris's module form of ``ctx.ccl.reduce_scatter`` (``workspace``, which
some Iris versions take, is accepted: aperture's call needs none)."""

from ._module_api import ccl_of


def reduce_scatter(output_tensor, input_tensor, ctx, op=None, group=None, async_op=False, config=None, workspace=None):
    return ccl_of(ctx, "reduce_scatter").reduce_scatter(output_tensor, input_tensor, op=op, group=group,
                                                        async_op=async_op, config=config, workspace=workspace)
