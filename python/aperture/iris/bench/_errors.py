"""The errors of iris.bench: aperture.Error, and the built-in exception Iris raises for the same."""

import aperture

from .._errors import IrisTypeError, IrisValueError


class BenchRunError(aperture.Error, RuntimeError):
    """A run that cannot go on: a benchmark that never hands over a call to time, a failed rank."""


def refuse(message, kind=IrisValueError):
    """Raises ``kind`` (IrisValueError, IrisTypeError) for bad input, the message naming it."""
    raise kind(f"aperture: iris.bench: {message}", code=aperture.ErrorCode.invalid_argument)


__all__ = ["BenchRunError", "IrisTypeError", "IrisValueError", "refuse"]
