"""``iris.hip``: Iris's HIP runtime bindings, AMD-only. The import succeeds; any name in it raises
aperture.Error saying it is AMD-only and what an NVIDIA program uses instead (aperture.iris._amd)."""

from ._amd import module_getattr

__getattr__ = module_getattr("hip", "iris.hip")
