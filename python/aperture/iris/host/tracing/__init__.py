"""``iris.host.tracing``: where Iris's newest tree keeps tracing's host side; the names are
aperture.iris.tracing's (``Tracing``, ``TraceEvent``, ``EVENT_NAMES``, the ``kernel_artifacts``
module)."""

from ...tracing import EVENT_NAMES, TraceEvent, Tracing
from . import kernel_artifacts  # noqa: F401  (as Iris's package binds it)

__all__ = ["EVENT_NAMES", "TraceEvent", "Tracing"]
