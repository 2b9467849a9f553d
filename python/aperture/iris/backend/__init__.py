"""``iris.backend``: Iris's GPU-runtime backend, chosen once at import, with the functions of its
backend interface re-exported (``import iris.backend as backend; backend.count_devices()``).

IRIS_BACKEND chooses as in Iris: unset or "cuda" is the CUDA backend (``iris.backend.cuda``),
"hip" is AMD's, which is AMD-only here (the import raises aperture.Error naming the NVIDIA way),
anything else is Iris's ValueError. aperture.iris has no other backend, so ``backend_name()`` is
"cuda" with or without a GPU; without one the functions that need a device say so (see
``iris.backend.cuda``)."""

import os

import aperture

from .. import _amd
from .._errors import IrisValueError


def _selected_backend():
    forced = os.environ.get("IRIS_BACKEND", "").lower()
    if forced not in ("", "cuda", "hip"):
        raise IrisValueError(f"aperture: iris.backend: Invalid IRIS_BACKEND='{forced}'. Must be 'cuda' or 'hip'.",
                             code=aperture.ErrorCode.invalid_argument)
    if forced == "hip":
        _amd.refuse("hip_backend", "IRIS_BACKEND=hip")
    return "cuda"


_backend = _selected_backend()

from . import cuda  # noqa: E402  (after the check: IRIS_BACKEND=hip never gets a CUDA backend)


def backend_name():
    """The backend in use: "cuda"."""
    return _backend


set_device = cuda.set_device
get_cu_count = cuda.get_cu_count
count_devices = cuda.count_devices
get_ipc_handle = cuda.get_ipc_handle
open_ipc_handle = cuda.open_ipc_handle
get_wall_clock_rate = cuda.get_wall_clock_rate
get_device_id = cuda.get_device_id
get_arch_string = cuda.get_arch_string
get_num_xcc = cuda.get_num_xcc
malloc_fine_grained = cuda.malloc_fine_grained
malloc = cuda.malloc
free = cuda.free
get_runtime_version = cuda.get_runtime_version
# The names one Iris version (045d327) exports for the same functions, and their older HIP spellings.
gpu_malloc = hip_malloc = cuda.malloc
gpu_free = hip_free = cuda.free
gpu_try = hip_try = cuda.cuda_try
get_rocm_version = cuda.get_runtime_version

__all__ = ["backend_name", "set_device", "get_cu_count", "count_devices", "get_ipc_handle", "open_ipc_handle",
           "get_wall_clock_rate", "get_device_id", "get_arch_string", "get_num_xcc", "malloc_fine_grained", "malloc",
           "free", "gpu_malloc", "gpu_free", "gpu_try", "get_runtime_version", "hip_malloc", "hip_free", "hip_try",
           "get_rocm_version"]
