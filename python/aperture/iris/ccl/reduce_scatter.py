"""``iris.ccl.reduce_scatter``: Iris's module form of ``ctx.ccl.reduce_scatter``, its workspace and the
ring variant's preparation (``workspace``, which some Iris versions take, is accepted: aperture's
call needs none beyond the tile count a ring workspace was prepared for)."""

import aperture

from . import Workspace, _refuse
from ._module_api import ccl_of

ReduceScatterWorkspace = Workspace


def _prepare_ring_workspace(ctx, M, N, dtype, total_tiles, workspace):
    """Iris's preparation of a "ring_chunked" workspace for an (M, N) ``dtype`` output with
    ``total_tiles`` tiles: records them, so that a later call whose Config makes more tiles is
    refused ("Flags array too small") as Iris refuses it. Returns the workspace."""
    ccl_of(ctx, "reduce_scatter")
    if not isinstance(workspace, Workspace):
        raise aperture.Error(f"aperture: iris.ccl.reduce_scatter: the workspace must be a ReduceScatterWorkspace, "
                             f"got {type(workspace).__name__}", code=aperture.ErrorCode.invalid_argument)
    if int(total_tiles) <= 0:
        _refuse("reduce_scatter", f"total_tiles must be positive, got {total_tiles}")
    workspace.shape, workspace.dtype, workspace.tiles = (int(M), int(N)), dtype, int(total_tiles)
    return workspace


def reduce_scatter(output_tensor, input_tensor, ctx, op=None, group=None, async_op=False, config=None, workspace=None):
    return ccl_of(ctx, "reduce_scatter").reduce_scatter(output_tensor, input_tensor, op=op, group=group,
                                                        async_op=async_op, config=config, workspace=workspace)
