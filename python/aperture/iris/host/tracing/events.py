"""``iris.host.tracing.events``: ``TraceEvent`` and ``EVENT_NAMES`` (aperture.iris.tracing's)."""

from ...tracing import EVENT_NAMES, TraceEvent

__all__ = ["EVENT_NAMES", "TraceEvent"]
