"""Iris's module-level ccl functions (``from iris.ccl.all_reduce import all_reduce``), which take the
Iris instance among their arguments (where Iris puts it): each is the ``ctx.ccl`` method of the
same name, so both forms run the same Communicator call."""

import aperture


def ccl_of(ctx, call):
    """``ctx.ccl`` of an aperture.iris instance, or one aperture.Error naming what ``ctx`` is."""
    ccl = getattr(ctx, "ccl", None)
    if ccl is None or not hasattr(ccl, "all_reduce"):
        raise aperture.Error(f"iris.ccl.{call}: the Iris instance argument must be an iris.iris(...) context, "
                             f"got {type(ctx).__name__}", code=aperture.ErrorCode.invalid_argument)
    return ccl
