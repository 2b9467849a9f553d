"""``iris.host.iris``: the host class and its factory (aperture.iris.Iris, aperture.iris.iris), and
the names Iris's module of them also binds (tracing's classes, ``tensor_creation``)."""

from .. import tensor_creation  # noqa: F401
from ..tracing import DeviceTracing, TraceEvent, Tracing  # noqa: F401
from ..iris import Iris, iris

__all__ = ["Iris", "iris"]
