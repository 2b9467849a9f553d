"""aperture.Error: every failure of the C++ core, and every refusal of the Python layer."""

from ._core import ErrorCode

_PREFIX = "aperture: "


class Error(RuntimeError):
    """A failure of aperture. ``str(e)`` is the C++ message ("aperture: <what, the values, the fix>");
    ``e.code`` the :class:`ErrorCode` to branch on; ``e.call`` the library or system function that
    failed ("" when aperture itself refused)."""

    def __init__(self, message, code=ErrorCode.internal, call=""):
        super().__init__(message)
        self.code = code
        self.call = call


Error.__module__ = "aperture"  # shown as aperture.Error, where it is documented

def fail(code, detail):
    """Raise aperture.Error from the Python layer, worded as the C++ errors are."""
    raise Error(_PREFIX + detail, code=code)
