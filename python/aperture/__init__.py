"""aperture: symmetric memory of any allocator, and one-sided access to it, from Python.

    import aperture
    team = aperture.Team.from_env()             # aperture launch, mpirun, torchrun, or one rank
    prov = aperture.make_provider("default", team)
    t = prov.zeros((4, 1024), "float32")        # collective; a torch.Tensor (numpy without torch)
    m = aperture.address_map(t)                 # m.peer_bases: the int64 table kernels take
    comm = aperture.Communicator(team, prov)
    comm.all_reduce(t)
    tp = aperture.OverlappedGemm(team, prov)    # GPU providers: c = tp.ag_gemm(a_shard, b), tp.gemm_rs(a, b)

The package by level, each name below also importable from aperture itself:

    aperture.memory        teams, providers, address maps, from_table, dtypes
    aperture.allocators    memory other libraries allocate: ForeignAllocator, torch symmetric memory
    aperture.collectives   Communicator
    aperture.ops           OverlappedGemm (and the fused operations to come)
    aperture.triton        the Triton device library (import aperture.triton as apt; not imported here)
    aperture.iris          Iris's API on aperture (not imported here)

Every failure is an aperture.Error carrying the C++ message and an ErrorCode. The C++ library
does the work; this package hands its memory out as tensors. docs/PYTHON.md is the whole API.
"""

try:  # torch first, where it is installed: its CUDA libraries are then the process's (one runtime)
    import torch as _torch  # noqa: F401
except ImportError:
    pass

from . import _core, allocators, collectives, memory, ops
from ._core import ErrorCode
from ._error import Error
from ._gpu_proxy import GpuProxy
from ._program import PROGRAM as program
from .allocators import ForeignAllocator, from_torch_symmetric, torch_symmetric_provider
from .collectives import Communicator
from .memory import (AddressMap, Provider, Team, address_map, available_providers, default_provider_name, dtypes,
                     from_table, make_provider, provider_statuses)
from .ops import OverlappedGemm

__version__ = _core.version  # the C++ library's, as `aperture --version` prints it

__all__ = [
    "AddressMap", "Communicator", "Error", "ErrorCode", "ForeignAllocator", "GpuProxy", "OverlappedGemm", "Provider",
    "Team", "address_map", "allocators", "available_providers", "collectives", "default_provider_name", "dtypes",
    "from_table", "from_torch_symmetric", "make_provider", "memory", "ops", "program", "provider_statuses",
    "torch_symmetric_provider",
]
