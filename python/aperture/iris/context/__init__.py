"""``iris.context``: where Iris's newest tree keeps its device-side context, ``TritonContext``;
here aperture.iris's DeviceContext under both names, its recorder as ``TritonDeviceTracing``, and
Iris's pointer translation ``_translate_ptr`` (``iris.context.triton`` holds the same names)."""

from .triton import DeviceContext, TritonContext, TritonDeviceTracing, _translate_ptr  # noqa: F401

__all__ = ["DeviceContext", "TritonContext", "TritonDeviceTracing"]
