"""``iris.ccl.all_to_all``: Iris's module forms of ``ctx.ccl.all_to_all`` and of its variable-size
form, which splits columns."""

from . import _refuse
from ._module_api import ccl_of


def all_to_all(output_tensor, input_tensor, ctx, group=None, async_op=False, config=None):
    return ccl_of(ctx, "all_to_all").all_to_all(output_tensor, input_tensor, group=group, async_op=async_op,
                                                config=config)


def all_to_all_v(output_tensor, input_tensor, output_split_sizes, input_split_sizes, ctx, group=None,
                 async_op=False, config=None):
    """Variable all-to-all of column blocks (torch's all_to_all_single with split sizes, on columns):
    input (M, sum(input_split_sizes)) sends its j-th block of ``input_split_sizes[j]`` columns to
    rank j; output (M, sum(output_split_sizes)) receives ``output_split_sizes[i]`` columns from rank
    i, blocks in rank order. Runs as ``ctx.ccl.all_to_all_v`` on the transposed tensors, where a
    column block is contiguous."""
    ccl = ccl_of(ctx, "all_to_all_v")
    for name, tensor, splits in (("input", input_tensor, input_split_sizes),
                                 ("output", output_tensor, output_split_sizes)):
        if tensor.dim() != 2 or tensor.shape[1] != sum(int(s) for s in splits):
            _refuse("all_to_all_v", f"the {name} must be 2-D with sum({name}_split_sizes) = "
                                    f"{sum(int(s) for s in splits)} columns, got shape {tuple(tensor.shape)}")
    rows = input_tensor.shape[0]
    if output_tensor.shape[0] != rows:
        _refuse("all_to_all_v", f"output has {output_tensor.shape[0]} rows and input {rows}; give both the same")

    def spans(splits):
        counts = [int(s) * rows for s in splits]
        return counts, [sum(counts[:j]) for j in range(len(counts))]

    send_counts, send_displs = spans(input_split_sizes)
    recv_counts, recv_displs = spans(output_split_sizes)
    columns_out = output_tensor.new_empty((output_tensor.shape[1], rows))  # (columns, M): a block is contiguous
    ccl.all_to_all_v(columns_out, input_tensor.t().contiguous(), send_counts, send_displs, recv_counts, recv_displs,
                     group=group, async_op=async_op, config=config)
    output_tensor.copy_(columns_out.t())
