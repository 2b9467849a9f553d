"""``iris.mem.triton``: the device side at the path Iris's newest tree gives it.

``Context`` (also ``DeviceContext``) and the device functions are aperture.iris's own, the same
objects as ``iris.DeviceContext`` and ``iris.load`` ...; the device-side recorder is
``iris.mem.triton.tracing.Tracing`` (aperture.iris.tracing.DeviceTracing); the tile types
(``Tile``, ``make_tensor_view`` ...) are ``types``'s. Iris's SDMA helpers of this module
(``put_signal``, ``put_rects``, ``wait_then_put_*``, ``quiet``) and ``triggered`` are AMD-only:
each raises aperture's one error saying so and what to use instead (aperture.iris._amd).
"""

from ... import _amd

from ..._device import *  # noqa: F401,F403
from .context import Context, DeviceContext  # noqa: F401
from .tracing import Tracing  # noqa: F401
from .tracing import Tracing as DeviceTracing  # noqa: F401
from .types import *  # noqa: F401,F403  (the tile types and index helpers)


def __getattr__(name):
    if name == "triggered":  # reached as an attribute, as Iris's package exports it
        import importlib

        return importlib.import_module(f"{__name__}.triggered")
    if name in _amd.SDMA_DEVICE_HELPERS:
        _amd.refuse("sdma_device", f"iris.mem.triton.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
