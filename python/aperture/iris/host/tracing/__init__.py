"""``iris.host.tracing``: where Iris's newest tree keeps tracing's host side; the names are
aperture.iris.tracing's (``Tracing``, ``TraceEvent``, ``EVENT_NAMES``)."""

from ...tracing import EVENT_NAMES, TraceEvent, Tracing

__all__ = ["EVENT_NAMES", "TraceEvent", "Tracing"]
