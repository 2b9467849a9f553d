"""``iris.host.iris``: the host class and its factory (aperture.iris.Iris, aperture.iris.iris), and
the names Iris's module of them also binds (tracing's classes, ``tensor_creation``, the copy
engine switch's two readers, which Iris's tests import from here)."""

from .. import tensor_creation  # noqa: F401
from ..tracing import DeviceTracing, TraceEvent, Tracing  # noqa: F401
from .._copy_engine import _parse_copy_engine_env, _resolve_enable_copy_engine  # noqa: F401
from ..iris import Iris, iris

__all__ = ["Iris", "iris"]
