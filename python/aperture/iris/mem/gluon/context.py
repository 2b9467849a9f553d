"""``iris.mem.gluon.context``: Iris's Gluon device context (``Context``), AMD-only: the import
succeeds, any name in it raises aperture.Error naming iris.mem.triton.context.Context."""

from ..._amd import module_getattr

__getattr__ = module_getattr("gluon_context", "iris.mem.gluon.context")
