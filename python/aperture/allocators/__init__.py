"""Memory that other libraries allocate, brought into aperture by its table of peer addresses.

    class MyLibrary(aperture.allocators.ForeignAllocator):   # allocate_buffer, buffer_of
        ...
    prov = MyLibrary().provider(team)          # an aperture.Provider over the library's buffers
    m = MyLibrary().map_of(tensor)             # the AddressMap of a tensor the library allocated

torch symmetric memory is the first: ``TorchSymmetric``, with ``torch_symmetric_provider`` and
``from_torch_symmetric`` built on it."""

from ._foreign import ForeignAllocator, ForeignBuffer
from ._torch_symmetric import TorchSymmetric, from_torch_symmetric, torch_symmetric_provider

__all__ = ["ForeignAllocator", "ForeignBuffer", "TorchSymmetric", "from_torch_symmetric", "torch_symmetric_provider"]
