"""``iris.mem.gluon.tracing``: Iris's Gluon device-side tracing (``Tracing``), AMD-only: the
import succeeds, any name in it raises aperture.Error naming iris.mem.triton.tracing.Tracing."""

from ..._amd import module_getattr

__getattr__ = module_getattr("gluon_context", "iris.mem.gluon.tracing")
