"""``iris.experimental``: Iris's experimental providers, mapped onto aperture's.

``iris.experimental.torch_symm_mem_provider`` is aperture's torch symmetric-memory support
(aperture.torch_symmetric_provider / aperture.from_torch_symmetric); ``iris_gluon`` and
``rocshmem_provider`` are AMD-only and raise saying so.
"""

from .._amd import AmdOnlyModule

iris_gluon = AmdOnlyModule("gluon", "iris.experimental.iris_gluon")
rocshmem_provider = AmdOnlyModule("rocshmem", "iris.experimental.rocshmem_provider")

__all__ = []
