"""``iris.ccl.broadcast``: Iris's module form of ``ctx.ccl.broadcast`` (returns None), in place,
``broadcast(tensor, ctx, src=0, group=None, async_op=False, config=None)``, or from one tensor to
another, ``broadcast(output_tensor, input_tensor, ctx, src=0, ...)``, as Iris's versions have it."""

from . import _is_tensor
from ._module_api import ccl_of


def broadcast(tensor, ctx, *args, **kwargs):
    if _is_tensor(ctx):  # the two-tensor form: the Iris instance comes third
        output_tensor, input_tensor = tensor, ctx
        ctx, args = (args[0], args[1:]) if args else (kwargs.pop("ctx", None), ())
        ccl_of(ctx, "broadcast").broadcast(output_tensor, input_tensor, *args, **kwargs)
        return
    ccl_of(ctx, "broadcast").broadcast(tensor, *args, **kwargs)
