"""``iris.ccl.reduce``: Iris's module form of ``ctx.ccl.reduce`` and its preamble. Iris's versions
name the root ``dst`` or ``root`` (the fourth argument either way); both keywords are taken."""

from ._module_api import ccl_of


def reduce_preamble(output_tensor, input_tensor, ctx, root=0, config=None, workspace=None):
    return ccl_of(ctx, "reduce_preamble").reduce_preamble(output_tensor, input_tensor, root=root, config=config,
                                                          workspace=workspace)


def reduce(output_tensor, input_tensor, ctx, dst=0, op=None, group=None, async_op=False, config=None, workspace=None,
           root=None):
    ccl_of(ctx, "reduce").reduce(output_tensor, input_tensor, dst=dst, op=op, group=group, async_op=async_op,
                                 config=config, workspace=workspace, root=root)
