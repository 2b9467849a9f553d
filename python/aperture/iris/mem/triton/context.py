"""``iris.mem.triton.context``: ``Context`` (Iris's newest name for ``DeviceContext``)."""

from ..._device_context import DeviceContext

Context = DeviceContext
