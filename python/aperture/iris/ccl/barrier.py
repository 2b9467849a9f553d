"""``iris.ccl.barrier``: Iris's module form of ``ctx.ccl.barrier`` (every rank's stream waits for
every other). ``config``, which Iris's takes and leaves unused, must be a Config or None."""

from ._module_api import ccl_of


def barrier(ctx, group=None, async_op=False, config=None):
    ccl_of(ctx, "barrier").barrier(group=group, async_op=async_op, config=config)
