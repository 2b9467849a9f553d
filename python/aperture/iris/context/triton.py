"""``iris.context.triton``: Iris's module of ``TritonContext``, ``TritonDeviceTracing`` and
``_translate_ptr``; here aperture.iris's DeviceContext, its recorder and its translate."""

from .._device import translate as _translate_ptr  # noqa: F401
from .._device_context import DeviceContext
from ..tracing.device import DeviceTracing as TritonDeviceTracing

TritonContext = DeviceContext

__all__ = ["DeviceContext", "TritonContext", "TritonDeviceTracing"]
