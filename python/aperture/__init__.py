"""aperture: symmetric memory of any allocator, and one-sided access to it, from Python.

    import aperture
    team = aperture.Team.from_env()             # aperture launch, mpirun, torchrun, or one rank
    prov = aperture.make_provider("default", team)
    t = prov.zeros((4, 1024), "float32")        # collective; a torch.Tensor (numpy without torch)
    m = aperture.address_map(t)                 # m.peer_bases: the int64 table kernels take
    comm = aperture.Communicator(team, prov)
    comm.all_reduce(t)
    tp = aperture.OverlappedGemm(team, prov)    # GPU providers: c = tp.ag_gemm(a_shard, b), tp.gemm_rs(a, b)

Every failure is an aperture.Error carrying the C++ message and an ErrorCode. The C++ library
does the work; this package hands its memory out as tensors. The Triton device library is
aperture.triton (import aperture.triton as apt); it is not imported here. docs/PYTHON.md is
the whole API.
"""

try:  # torch first, where it is installed: its CUDA libraries are then the process's (one runtime)
    import torch as _torch  # noqa: F401
except ImportError:
    pass

from . import _core
from ._address_map import AddressMap, address_map, from_table, from_torch_symmetric
from ._communicator import Communicator
from ._overlapped_gemm import OverlappedGemm
from ._core import ErrorCode, Team, available_providers, default_provider_name, provider_statuses
from ._error import Error
from ._gpu_proxy import GpuProxy
from ._program import PROGRAM as program
from ._provider import Provider, make_provider, torch_symmetric_provider

__all__ = [
    "AddressMap", "Communicator", "Error", "ErrorCode", "GpuProxy", "OverlappedGemm", "Provider", "Team", "address_map",
    "available_providers", "default_provider_name", "from_table", "from_torch_symmetric", "make_provider", "program",
    "provider_statuses", "torch_symmetric_provider",
]
