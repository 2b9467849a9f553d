"""``iris.ccl.reduce``: Iris's module form of ``ctx.ccl.reduce`` and its preamble. Iris's versions
name the root ``dst`` or ``root`` (the fourth argument either way); both keywords are taken."""

import aperture

from . import Workspace
from ._module_api import ccl_of


def _root(dst, root):
    if root is not None and dst not in (0, root):
        raise aperture.Error(f"iris.ccl.reduce: dst={dst} and root={root} name different roots; give one",
                             code=aperture.ErrorCode.invalid_argument)
    return dst if root is None else root


def reduce_preamble(output_tensor, input_tensor, ctx, root=0, config=None, workspace=None):
    ccl_of(ctx, "reduce_preamble")
    return workspace if isinstance(workspace, Workspace) and workspace.matches(output_tensor) else \
        Workspace(output_tensor.shape, output_tensor.dtype)


def reduce(output_tensor, input_tensor, ctx, dst=0, op=None, group=None, async_op=False, config=None, workspace=None,
           root=None):
    ccl_of(ctx, "reduce").reduce(output_tensor, input_tensor, dst=_root(dst, root), op=op, group=group,
                                 async_op=async_op, config=config)
