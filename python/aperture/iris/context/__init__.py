"""``iris.context``: where Iris's newest tree keeps its device-side context, ``TritonContext``;
here aperture.iris's DeviceContext under both names, its recorder as ``TritonDeviceTracing``, and
Iris's pointer translation ``_translate_ptr`` (``iris.context.triton`` holds the same names).
Iris's Gluon names here, ``GluonContext`` and ``GluonDeviceTracing`` (and ``iris.context.gluon``),
are AMD-only: taking one raises aperture.Error naming the Triton one."""

import importlib

from .._amd import refuse
from .triton import DeviceContext, TritonContext, TritonDeviceTracing, _translate_ptr  # noqa: F401

__all__ = ["DeviceContext", "TritonContext", "TritonDeviceTracing"]

_GLUON_NAMES = ("GluonContext", "GluonDeviceTracing")


def __getattr__(name):
    if name == "gluon":  # the submodule, importable as in Iris (AMD-only inside)
        return importlib.import_module(f"{__name__}.gluon")
    if name in _GLUON_NAMES:
        refuse("gluon_context", f"iris.context.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
