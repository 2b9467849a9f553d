"""``iris.host.memory``: of Iris's newest host memory package, the allocator-agnostic descriptor
(``address_map``) and ``tensors`` (Iris's tensor factories module, aperture.iris.tensor_creation).
Iris's allocators themselves are not provided: aperture's providers take their place."""

import sys

from ... import tensor_creation as tensors  # noqa: F401
from . import address_map  # noqa: F401

# ``import iris.host.memory.tensors`` too: the same module object, not a copy (monkeypatches agree).
sys.modules.setdefault(f"{__name__}.tensors", tensors)
