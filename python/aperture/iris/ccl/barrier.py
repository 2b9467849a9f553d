"""``iris.ccl.barrier``: Iris's module form of ``ctx.ccl.barrier`` (every rank's stream waits for
every other's)."""

from ._module_api import ccl_of


def barrier(ctx, group=None, async_op=False):
    ccl_of(ctx, "barrier").barrier(group=group, async_op=async_op)
