"""``iris.experimental``: Iris's experimental providers, mapped onto aperture's.

``iris.experimental.torch_symm_mem_provider`` is aperture's torch symmetric-memory support
(aperture.torch_symmetric_provider / aperture.from_torch_symmetric); ``iris_gluon`` and
``rocshmem_provider`` are AMD-only: they import, and each name in them raises saying so.
"""

from . import iris_gluon, rocshmem_provider  # AMD-only: importable, every name in them refuses

__all__ = []
