"""Iris's torch symmetric-memory provider, on aperture's.

``TorchSymmMemProvider(group=None, device=None)`` allocates with torch.distributed's symmetric
memory and describes each allocation with aperture's map of it (aperture.from_torch_symmetric):
``allocate_symmetric(*size, dtype=None)`` returns ``(tensor, peer_bases)``;
``allocate_symmetric_map`` returns ``(tensor, SymmetricAddressMap)`` (aperture's AddressMap).
"""

import torch

import aperture

from ..tensor_creation import flatten_size


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

    def allocate_symmetric_map(self, *size, dtype=None):
        from torch.distributed import _symmetric_memory as symm_mem

        tensor = symm_mem.empty(flatten_size(size), dtype=dtype or torch.get_default_dtype(), device=self.device)
        return tensor, aperture.from_torch_symmetric(tensor, group=self._group)

    def allocate_symmetric(self, *size, dtype=None):
        tensor, amap = self.allocate_symmetric_map(*size, dtype=dtype)
        return tensor, amap.peer_bases

    def get_rank(self):
        return self.cur_rank

    def get_num_ranks(self):
        return self.num_ranks

    def barrier(self):
        import torch.distributed as dist

        dist.barrier(group=self._group)


SymmetricAddressMap = aperture.AddressMap
__all__ = ["TorchSymmMemProvider", "SymmetricAddressMap"]
