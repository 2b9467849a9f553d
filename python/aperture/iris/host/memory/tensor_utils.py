"""``iris.host.memory.tensor_utils``: ``CUDAArrayInterface`` and ``tensor_from_ptr``
(aperture.iris.tensor_utils's)."""

from ...tensor_utils import CUDAArrayInterface, tensor_from_ptr

__all__ = ["CUDAArrayInterface", "tensor_from_ptr"]
