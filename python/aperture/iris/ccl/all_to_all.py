"""``iris.ccl.all_to_all``: Iris's module forms of ``ctx.ccl.all_to_all`` and of its variable-size
form, which splits columns (``ctx.ccl.all_to_all_v`` with split sizes)."""

from ._module_api import ccl_of


def all_to_all(output_tensor, input_tensor, ctx, group=None, async_op=False, config=None):
    return ccl_of(ctx, "all_to_all").all_to_all(output_tensor, input_tensor, group=group, async_op=async_op,
                                                config=config)


def all_to_all_v(output_tensor, input_tensor, output_split_sizes, input_split_sizes, ctx, group=None,
                 async_op=False, config=None):
    """Input (M, sum(input_split_sizes)) sends its j-th block of ``input_split_sizes[j]`` columns to
    rank j; output (M, sum(output_split_sizes)) receives ``output_split_sizes[i]`` columns from rank
    i, blocks in rank order."""
    return ccl_of(ctx, "all_to_all_v").all_to_all_v(output_tensor, input_tensor, output_split_sizes, input_split_sizes,
                                                    group=group, async_op=async_op, config=config)
