"""``iris.experimental.symmetric_memory.SymmetricAddressMap``: Iris's description of one symmetric
allocation, over aperture's AddressMap of it.

Iris's interface: ``peer_bases`` (the int64 table kernels take), ``direct`` (per rank: reachable
by load/store), ``all_direct()`` and ``indirect_peers()`` (methods, where aperture's AddressMap has
properties), ``allocation_base``, ``allocation_bytes``, ``local_rank``, ``world_size``. aperture's
map itself is ``address_map``, for its checked ``translate``, ``owns`` and ``is_direct``.
"""


class SymmetricAddressMap:
    def __init__(self, address_map):
        self.address_map = address_map
        self.direct = [base != 0 for base in address_map.host_peer_bases]

    peer_bases = property(lambda self: self.address_map.peer_bases)
    allocation_base = property(lambda self: self.address_map.allocation_base)
    allocation_bytes = property(lambda self: self.address_map.allocation_bytes)
    local_rank = property(lambda self: self.address_map.local_rank)
    world_size = property(lambda self: self.address_map.world_size)

    def all_direct(self):
        return all(self.direct)

    def indirect_peers(self):
        return [peer for peer, direct in enumerate(self.direct) if not direct]

    def is_direct(self, peer):
        return self.address_map.is_direct(peer)

    def owns(self, tensor):
        return self.address_map.owns(tensor)

    def translate(self, tensor, to_rank):
        return self.address_map.translate(tensor, to_rank)

    def __repr__(self):
        return f"SymmetricAddressMap({self.address_map!r}, direct={self.direct})"


__all__ = ["SymmetricAddressMap"]
