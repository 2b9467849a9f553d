"""``iris.ccl.all_gather``: Iris's module form of ``ctx.ccl.all_gather`` and its preamble."""

from . import Workspace
from ._module_api import ccl_of

AllGatherWorkspace = Workspace  # what all_gather_preamble returns and all_gather takes back


def all_gather_preamble(output_tensor, input_tensor, ctx, config=None, workspace=None):
    return ccl_of(ctx, "all_gather_preamble").all_gather_preamble(output_tensor, input_tensor, config=config,
                                                                  workspace=workspace)


def all_gather(output_tensor, input_tensor, ctx, group=None, async_op=False, config=None, workspace=None):
    return ccl_of(ctx, "all_gather").all_gather(output_tensor, input_tensor, group=group, async_op=async_op,
                                                config=config, workspace=workspace)
