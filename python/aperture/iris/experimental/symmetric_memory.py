"""``iris.experimental.symmetric_memory.SymmetricAddressMap``: aperture's AddressMap (peer_bases,
local_rank, the allocation's bytes, per-peer reachability)."""

import aperture

SymmetricAddressMap = aperture.AddressMap
__all__ = ["SymmetricAddressMap"]
