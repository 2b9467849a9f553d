"""``iris.host.memory.address_map``: Iris's newest descriptor of one backing allocation, the
metadata a kernel needs to translate a local pointer to a peer's (its ``peer_bases`` table).

``SymmetricAddressMap(peer_bases, local_rank, allocation_base, allocation_bytes, capabilities=...)``
is checked as Iris checks it (an int64/uint64 table, the rank in range, ``peer_bases[local_rank] ==
allocation_base``; each a ValueError). ``of(address_map)`` describes an aperture AddressMap this
way; its capabilities are what aperture's direct peers support (load/store and atomics), dropped
when some peer is reached only through an engine.
"""

import aperture

from ..._errors import IrisValueError

#: Remote loads and stores through translated pointers.
CAP_REMOTE_LOAD_STORE = 1 << 0
#: Remote atomics through translated pointers.
CAP_REMOTE_ATOMICS = 1 << 1


class SymmetricAddressMap:
    __slots__ = ("peer_bases", "local_rank", "allocation_base", "allocation_bytes", "capabilities")

    def __init__(self, peer_bases, local_rank, allocation_base, allocation_bytes,
                 capabilities=CAP_REMOTE_LOAD_STORE | CAP_REMOTE_ATOMICS):
        import torch

        if peer_bases.dtype not in (torch.int64, torch.uint64):
            raise IrisValueError("aperture: iris: SymmetricAddressMap: peer_bases must be int64 or uint64, got "
                                 f"{peer_bases.dtype}", code=aperture.ErrorCode.invalid_argument)
        if not 0 <= local_rank < peer_bases.numel():
            raise IrisValueError(f"aperture: iris: SymmetricAddressMap: local_rank {local_rank} out of range for "
                                 f"{peer_bases.numel()} ranks", code=aperture.ErrorCode.invalid_argument)
        local_base = int(peer_bases[local_rank].item())
        if local_base != allocation_base:
            raise IrisValueError(f"aperture: iris: SymmetricAddressMap: peer_bases[{local_rank}]={local_base:#x} does "
                                 f"not match allocation_base={allocation_base:#x}: translation would reach the wrong "
                                 "addresses",
                                 code=aperture.ErrorCode.invalid_argument)
        for name, value in (("peer_bases", peer_bases), ("local_rank", int(local_rank)),
                            ("allocation_base", int(allocation_base)), ("allocation_bytes", int(allocation_bytes)),
                            ("capabilities", int(capabilities))):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):  # frozen, as Iris's dataclass is
        raise AttributeError(f"SymmetricAddressMap is frozen: cannot set {name}")

    @classmethod
    def of(cls, address_map):
        """aperture's AddressMap ``address_map`` as Iris's descriptor."""
        reachable = all(base != 0 for base in address_map.host_peer_bases)
        return cls(address_map.peer_bases, address_map.local_rank, address_map.allocation_base,
                   address_map.allocation_bytes, CAP_REMOTE_LOAD_STORE | CAP_REMOTE_ATOMICS if reachable else 0)

    @property
    def world_size(self):
        return self.peer_bases.numel()

    def owns(self, tensor):
        """True when ``tensor``'s elements lie inside this allocation (a host check before a launch)."""
        start = tensor.data_ptr()
        end = start + tensor.numel() * tensor.element_size()
        return self.allocation_base <= start and end <= self.allocation_base + self.allocation_bytes

    def supports(self, capability):
        return bool(self.capabilities & capability)

    def __eq__(self, other):
        if not isinstance(other, SymmetricAddressMap):
            return NotImplemented
        return (self.peer_bases.tolist(), self.local_rank, self.allocation_base, self.allocation_bytes,
                self.capabilities) == (other.peer_bases.tolist(), other.local_rank, other.allocation_base,
                                       other.allocation_bytes, other.capabilities)

    __hash__ = None

    def __repr__(self):
        return (f"SymmetricAddressMap(local_rank={self.local_rank}, allocation_base={self.allocation_base:#x}, "
                f"allocation_bytes={self.allocation_bytes}, capabilities={self.capabilities})")


__all__ = ["SymmetricAddressMap", "CAP_REMOTE_LOAD_STORE", "CAP_REMOTE_ATOMICS"]
