"""``iris.compile.functional``: the other form Iris's compile support has taken, one process-wide
context set with ``set_context(ctx)`` and read with ``get_context()``. The operators are those of
``iris.compile.functional_collectives`` (``torch.ops.iris.*``), registered once."""

from . import functional_collectives as _fc


def set_context(ctx):
    """Makes the Iris instance ``ctx`` the compiled collectives' context (TypeError, an
    aperture.Error too, for anything else)."""
    _fc.setup(ctx)


def get_context():
    """The Iris instance the compiled collectives run on (this thread's, else the process's
    default); aperture.Error (a RuntimeError) if none was set."""
    return _fc._current().ctx


__all__ = ["set_context", "get_context"]
