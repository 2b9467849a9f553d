"""aperture's first level: teams, providers of symmetric memory, and the address maps of their
allocations (or of any allocator's, from its table).

    team = aperture.memory.Team.from_env()
    prov = aperture.memory.make_provider("default", team)
    t = prov.zeros((4, 1024), "float32")       # collective; a torch.Tensor (numpy without torch)
    m = aperture.memory.address_map(t)         # m.peer_bases: the int64 table kernels take

Every name here is also aperture's own (aperture.Team, aperture.make_provider, ...)."""

from .._core import Team, available_providers, default_provider_name, provider_statuses
from . import dtypes
from ._address_map import AddressMap, address_map, from_table
from ._provider import Provider, make_provider

__all__ = ["AddressMap", "Provider", "Team", "address_map", "available_providers", "default_provider_name", "dtypes",
           "from_table", "make_provider", "provider_statuses"]
