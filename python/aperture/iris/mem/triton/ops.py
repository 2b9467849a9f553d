"""``iris.mem.triton.ops``: where Iris's newest tree defines its device functions. Here they are
aperture.iris's own (the same objects as ``iris.load`` ...); the SDMA helpers Iris defines beside
them (``put_signal``, ``put_rects``, ``wait_then_put_*``, ``quiet``) raise aperture's AMD-only
error naming what to use instead (aperture.iris._amd)."""

from ... import _amd
from ..._device import *  # noqa: F401,F403


def __getattr__(name):
    if name in _amd.SDMA_DEVICE_HELPERS:
        _amd.refuse("sdma_device", f"iris.mem.triton.ops.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
