"""Errors that are both aperture.Error and the built-in exception Iris raises for the same input,
so that an Iris program's ``except ValueError`` and aperture's ``except aperture.Error`` both hold."""

import aperture


class IrisValueError(aperture.Error, ValueError):
    """Input Iris refuses with ValueError (shapes, sizes, configurations)."""


class IrisTypeError(aperture.Error, TypeError):
    """An argument of a kind Iris refuses with TypeError (not an Iris instance, ...)."""


class IrisAttributeError(aperture.Error, AttributeError):
    """An attribute that AMD's Iris has and aperture.iris does not: reading it raises the message,
    while ``getattr(obj, name, default)`` and ``hasattr`` see an attribute that is not there."""
