"""``iris.context.gluon``: Iris's ``GluonContext`` and ``GluonDeviceTracing``, AMD-only: the import
succeeds, any name in it raises aperture.Error naming iris.context.TritonContext and
TritonDeviceTracing."""

from .._amd import module_getattr

__getattr__ = module_getattr("gluon_context", "iris.context.gluon")
