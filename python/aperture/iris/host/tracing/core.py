"""``iris.host.tracing.core``: ``Tracing`` (aperture.iris.tracing's)."""

from ...tracing import Tracing

__all__ = ["Tracing"]
