"""``iris.mem.triton.tracing``: where Iris's newest tree keeps the device-side recorder, which it
calls ``Tracing`` there (aperture.iris.tracing.DeviceTracing; the host's ``Tracing`` is another
class, ``iris.tracing.Tracing``)."""

from ...tracing.device import DeviceTracing

Tracing = DeviceTracing

__all__ = ["Tracing"]
