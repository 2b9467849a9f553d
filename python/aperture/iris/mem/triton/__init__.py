"""``iris.mem.triton``: the device side at the path Iris's newest tree gives it.

``Context`` (also ``DeviceContext``) and the device functions are aperture.iris's own, the same
objects as ``iris.DeviceContext`` and ``iris.load`` ...; the device-side recorder is
``iris.mem.triton.tracing.Tracing`` (aperture.iris.tracing.DeviceTracing); the tile types
(``Tile``, ``make_tensor_view`` ...) are ``types``'s. Iris's signal helpers of this module
(``put_signal``, ``quiet``, ``wait_then_put_*``) are not provided (docs/IRIS.md).
"""

from ..._device import (  # noqa: F401
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xchg,
    atomic_xor,
    copy,
    get,
    load,
    put,
    store,
)
from .context import Context, DeviceContext  # noqa: F401
from .tracing import Tracing  # noqa: F401
from .tracing import Tracing as DeviceTracing  # noqa: F401
from .types import *  # noqa: F401,F403  (the tile types and index helpers)
