"""``iris.experimental.symmetric_memory.SymmetricAddressMap``: Iris's description of one symmetric
allocation.

Made either of aperture's AddressMap of the allocation (``SymmetricAddressMap(address_map)``, what
aperture.iris's providers do; ``address_map`` then keeps it, for its checked ``translate``) or field
by field as Iris's dataclass is (``peer_bases, local_rank, allocation_base, allocation_bytes,
direct``), as a provider written for Iris makes it. Either way: ``peer_bases`` (the int64 table
kernels take), ``direct`` (per rank: reachable by load/store), ``all_direct()`` and
``indirect_peers()`` (methods, where aperture's AddressMap has properties), ``allocation_base``,
``allocation_bytes``, ``local_rank``, ``world_size``, ``is_direct``, ``owns`` and ``translate``.
"""

import aperture

from .._errors import IrisValueError


class SymmetricAddressMap:
    def __init__(self, *args, **fields):
        if len(args) == 1 and not fields and isinstance(args[0], aperture.AddressMap):
            self.address_map = args[0]
            self.peer_bases = self.address_map.peer_bases
            self.local_rank = self.address_map.local_rank
            self.allocation_base = self.address_map.allocation_base
            self.allocation_bytes = self.address_map.allocation_bytes
            self.direct = tuple(base != 0 for base in self.address_map.host_peer_bases)
            return
        names = ("peer_bases", "local_rank", "allocation_base", "allocation_bytes", "direct")
        given = dict(zip(names, args)) | fields
        if len(args) > len(names) or set(given) != set(names):
            raise TypeError(f"SymmetricAddressMap takes an aperture.AddressMap, or the fields {', '.join(names)}; "
                            f"got {len(args)} positional and {sorted(fields)}")
        self.address_map = None
        self.peer_bases = given["peer_bases"]
        self.local_rank = int(given["local_rank"])
        self.allocation_base = int(given["allocation_base"])
        self.allocation_bytes = int(given["allocation_bytes"])
        self.direct = tuple(bool(d) for d in given["direct"])
        if len(self.direct) != self.peer_bases.numel():
            raise IrisValueError(f"aperture: iris: SymmetricAddressMap: direct has {len(self.direct)} entries for "
                                 f"{self.peer_bases.numel()} ranks", code=aperture.ErrorCode.invalid_argument)

    @property
    def world_size(self):
        return self.peer_bases.numel()

    def all_direct(self):
        return all(self.direct)

    def indirect_peers(self):
        return [peer for peer, direct in enumerate(self.direct) if not direct]

    def is_direct(self, peer):
        if self.address_map is not None:
            return self.address_map.is_direct(peer)
        return self.direct[peer]

    def owns(self, tensor):
        if self.address_map is not None:
            return self.address_map.owns(tensor)
        start = tensor.data_ptr()
        return (self.allocation_base <= start
                and start + tensor.numel() * tensor.element_size() <= self.allocation_base + self.allocation_bytes)

    def translate(self, tensor, to_rank):
        """The address of ``tensor``'s first element in ``to_rank``'s copy."""
        if self.address_map is not None:
            return self.address_map.translate(tensor, to_rank)
        if not self.owns(tensor):
            raise IrisValueError("aperture: iris: SymmetricAddressMap.translate: the tensor is not in this "
                                 "allocation", code=aperture.ErrorCode.invalid_argument)
        if not self.direct[to_rank]:
            raise IrisValueError(f"aperture: iris: SymmetricAddressMap.translate: rank {to_rank} is not reachable by "
                                 "load/store (direct is False)", code=aperture.ErrorCode.invalid_argument)
        return int(self.peer_bases[to_rank].item()) + tensor.data_ptr() - self.allocation_base

    def __repr__(self):
        source = (repr(self.address_map) if self.address_map is not None
                  else f"allocation_base={self.allocation_base:#x}")
        return f"SymmetricAddressMap({source}, direct={list(self.direct)})"


__all__ = ["SymmetricAddressMap"]
