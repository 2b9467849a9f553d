"""``iris.backend.hip``: Iris's HIP backend, AMD-only. The import succeeds; any name in it raises
aperture.Error saying it is AMD-only and what an NVIDIA program uses instead (aperture.iris._amd)."""

from .._amd import module_getattr

__getattr__ = module_getattr("hip_backend", "iris.backend.hip")
