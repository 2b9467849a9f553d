"""``iris.mem.triton.context``: ``Context`` (Iris's newest name for ``DeviceContext``), and the
pointer translation Iris's kernels import from here as ``__translate``."""

from ..._device import translate
from ..._device_context import DeviceContext

Context = DeviceContext
globals()["__translate"] = translate  # Iris's name; a module-level dunder, importable by name
