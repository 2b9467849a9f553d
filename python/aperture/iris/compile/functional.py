"""``iris.compile.functional``: the other form Iris's compile support has taken, one process-wide
context set with ``set_context(ctx)`` and read with ``get_context()``. The operators are those of
``iris.compile.functional_collectives`` (``torch.ops.iris.*``), registered once.

The process-wide context is the Iris instance in the module global ``_iris_ctx``, as in Iris:
programs and Iris's tests read and assign it directly, and an assignment counts as
``set_context`` (None: no context). ``functional_collectives.setup(ctx)`` sets it too, and the
operators fall back to it on a thread that has no context of its own."""

import aperture

from .._errors import IrisTypeError

_iris_ctx = None


class IrisContextNotSet(aperture.Error, RuntimeError):
    """No Iris context for the compiled collectives (Iris raises RuntimeError)."""


def require_iris(value, who):
    """``value`` if it is an Iris instance, else IrisTypeError (Iris's words, which tests match)."""
    from ..iris import Iris

    if not isinstance(value, Iris):
        raise IrisTypeError(f"aperture: iris.compile.{who}: Expected an Iris instance, got {type(value).__name__} "
                            "(make one with iris.iris(heap_size))", code=aperture.ErrorCode.invalid_argument)
    return value


def set_context(ctx):
    """Makes the Iris instance ``ctx`` the process-wide context of the compiled collectives
    (IrisTypeError, a TypeError, for anything else). It also takes effect on this thread, over a
    context that ``setup`` gave it before."""
    global _iris_ctx
    _iris_ctx = require_iris(ctx, "set_context")
    from .functional_collectives import forget_thread_context  # that module imports this one

    forget_thread_context()


def get_context():
    """The process-wide Iris instance (``set_context``'s, ``setup``'s or one assigned to
    ``_iris_ctx``); IrisContextNotSet, a RuntimeError, if there is none."""
    if _iris_ctx is None:
        raise context_not_set()
    return _iris_ctx


def context_not_set():
    return IrisContextNotSet("aperture: iris.compile: Iris context not set. Call iris.compile.set_context(ctx) "
                             "(or iris.compile.setup(ctx)) before using compiled collectives.",
                             code=aperture.ErrorCode.invalid_argument)


__all__ = ["set_context", "get_context"]
