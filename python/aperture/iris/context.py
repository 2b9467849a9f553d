"""``iris.context``: where Iris's newest tree keeps its device-side context, ``TritonContext``;
here aperture.iris's DeviceContext under both names."""

from ._device_context import DeviceContext

TritonContext = DeviceContext

__all__ = ["DeviceContext", "TritonContext"]
