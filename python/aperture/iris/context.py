"""``iris.context``: where Iris's newest tree keeps its device-side context, ``TritonContext``;
here aperture.iris's DeviceContext under both names, and its recorder as ``TritonDeviceTracing``."""

from ._device_context import DeviceContext
from .tracing.device import DeviceTracing as TritonDeviceTracing

TritonContext = DeviceContext

__all__ = ["DeviceContext", "TritonContext", "TritonDeviceTracing"]
