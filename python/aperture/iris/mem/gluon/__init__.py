"""``iris.mem.gluon``: Iris's Gluon device side (``context.Context``, which Iris's ccl/gluon kernels
import as ``IrisDeviceCtx``, and ``tracing.Tracing``), AMD-only. The modules import, as for a
program that uses them only on its AMD path; any name in them raises aperture.Error saying so and
naming the Triton equivalent (aperture.iris._amd). ``iris.device.gluon`` is the same modules."""

from ..._amd import module_getattr
from . import context, tracing  # noqa: F401  (iris.mem.gluon.context without importing it, as in Iris)

__getattr__ = module_getattr("gluon_context", "iris.mem.gluon")
