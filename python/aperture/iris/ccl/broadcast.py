"""``iris.ccl.broadcast``: Iris's module form of ``ctx.ccl.broadcast`` (in place, returns None)."""

from ._module_api import ccl_of


def broadcast(tensor, ctx, src=0, group=None, async_op=False, config=None):
    ccl_of(ctx, "broadcast").broadcast(tensor, src=src, group=group, async_op=async_op, config=config)
