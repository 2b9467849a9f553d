"""Iris's torch symmetric-memory provider, on aperture's.

``TorchSymmMemProvider(group=None, device=None)`` allocates with torch.distributed's symmetric
memory and describes each allocation with aperture's map of it (aperture.from_torch_symmetric):
``allocate_symmetric(*size, dtype=None)`` returns ``(tensor, peer_bases)``;
``allocate_symmetric_map`` returns ``(tensor, SymmetricAddressMap)`` (Iris's interface over
aperture's map); ``symmetric_address_map(tensor)`` gives the map of the allocation a tensor lies
in (KeyError for one this provider did not allocate, as Iris raises); ``free(tensor)`` forgets the
allocation (torch frees its memory with the last reference to the tensor).
"""

import torch

import aperture

from ..tensor_creation import flatten_size
from .symmetric_memory import SymmetricAddressMap


class TorchSymmMemProvider:
    def __init__(self, group=None, device=None):
        import torch.distributed as dist

        if not dist.is_initialized():
            raise aperture.Error("aperture: TorchSymmMemProvider: torch.distributed is not initialised; call "
                                 "torch.distributed.init_process_group first", code=aperture.ErrorCode.invalid_argument)
        self._group = group if group is not None else dist.group.WORLD
        self.cur_rank = dist.get_rank(self._group)
        self.num_ranks = dist.get_world_size(self._group)
        self.device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        self._allocations = {}  # allocation base -> (tensor, SymmetricAddressMap)

    def allocate_symmetric_map(self, *size, dtype=None):
        """A new symmetric allocation (collective) and its map."""
        from torch.distributed import _symmetric_memory as symm_mem

        tensor = symm_mem.empty(flatten_size(size), dtype=dtype or torch.get_default_dtype(), device=self.device)
        amap = SymmetricAddressMap(aperture.from_torch_symmetric(tensor, group=self._group))
        self._allocations[tensor.data_ptr()] = (tensor, amap)
        return tensor, amap

    def allocate_symmetric(self, *size, dtype=None):
        tensor, amap = self.allocate_symmetric_map(*size, dtype=dtype)
        return tensor, amap.peer_bases

    def _allocation_of(self, tensor):
        address = tensor.data_ptr()
        for base, (_, amap) in self._allocations.items():
            if base <= address < base + amap.allocation_bytes:
                return base
        raise KeyError(f"aperture: TorchSymmMemProvider: the tensor at {address:#x} is not in an allocation of this "
                       "provider; allocate it with allocate_symmetric")

    def symmetric_address_map(self, tensor):
        """The map of the allocation ``tensor`` lies in; KeyError when this provider did not allocate it."""
        return self._allocations[self._allocation_of(tensor)][1]

    def free(self, tensor):
        """Forgets the allocation ``tensor`` lies in (KeyError if none): its memory goes when the
        program's last reference to it does."""
        del self._allocations[self._allocation_of(tensor)]

    def get_rank(self):
        return self.cur_rank

    def get_num_ranks(self):
        return self.num_ranks

    def barrier(self):
        import torch.distributed as dist

        dist.barrier(group=self._group)


__all__ = ["TorchSymmMemProvider", "SymmetricAddressMap"]
