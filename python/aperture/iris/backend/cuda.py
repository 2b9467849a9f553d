"""``iris.backend.cuda``: Iris's CUDA backend on aperture: the device queries, CUDA IPC handles and
raw allocations that Iris's backend interface names, each with Iris's signature and return value.

Queries go through torch (so they agree with torch's current device); IPC handles, allocations and
error strings through the CUDA runtime that torch loaded. Without a GPU (aperture.iris's CPU runs,
kernels under Triton's interpreter) there is no device: ``count_devices()`` is 0, ``get_num_xcc()``
1, and everything that needs a device raises aperture.Error saying so."""

import ctypes
import functools

import numpy as np
import torch

import aperture

from .._errors import IrisTypeError, IrisValueError

IPC_HANDLE_SIZE = 64  # bytes of a cudaIpcMemHandle_t
_CUDA_MEM_ATTACH_GLOBAL = 0x1  # cudaMallocManaged: accessible from any stream
_CUDA_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1


class cudaIpcMemHandle_t(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_SIZE)]


def _require_gpu(who):
    if not torch.cuda.is_available():
        raise aperture.Error(f"aperture: iris.backend.{who}: needs an NVIDIA GPU, and torch sees none here. Without a "
                             "GPU aperture.iris runs kernels under Triton's interpreter on a host heap, where there is "
                             "no device to query, allocate on or share", code=aperture.ErrorCode.unavailable)


@functools.cache
def _runtime():
    """The CUDA runtime library torch uses (already loaded with torch.cuda, so found by its soname)."""
    major = (torch.version.cuda or "").split(".")[0]
    for name in ([f"libcudart.so.{major}"] if major else []) + ["libcudart.so"]:
        try:
            runtime = ctypes.CDLL(name)
        except OSError:
            continue
        runtime.cudaGetErrorString.restype = ctypes.c_char_p
        return runtime
    raise aperture.Error("aperture: iris.backend: no CUDA runtime library (libcudart) can be loaded here; install a "
                         "CUDA build of torch", code=aperture.ErrorCode.unavailable)


def cuda_try(err):
    """Raises for a CUDA runtime status other than 0 (cudaSuccess), naming the code and CUDA's text."""
    if err == 0:
        return
    try:
        text = _runtime().cudaGetErrorString(ctypes.c_int(err)).decode("utf-8")
    except aperture.Error:
        text = "(no CUDA runtime here to name it)"
    raise aperture.Error(f"aperture: iris.backend: CUDA error code {err}: {text}", code=aperture.ErrorCode.system)


def _call(who, function, *args):
    _require_gpu(who)
    runtime = _runtime()
    status = getattr(runtime, function)(*args)
    if status != 0:
        # A failed call also leaves its status as the runtime's last error, which torch's check
        # after its next kernel launch would then raise as that kernel's own (a cudaMalloc too
        # large reported as "out of memory" at a later tensor.zero_()). Raised here, it is cleared.
        runtime.cudaGetLastError()
    cuda_try(status)


def _as_pointer(ptr):
    return ctypes.c_void_p(ptr) if isinstance(ptr, int) else ptr


# ---- devices -----------------------------------------------------------------------------------
def count_devices():
    """NVIDIA GPUs visible to this process (0 without one)."""
    return torch.cuda.device_count()


def set_device(gpu_id):
    _require_gpu("set_device")
    torch.cuda.set_device(gpu_id)


def get_device_id():
    _require_gpu("get_device_id")
    return torch.cuda.current_device()


def _properties(who, device_id):
    _require_gpu(who)
    return torch.cuda.get_device_properties(torch.cuda.current_device() if device_id is None else device_id)


def get_cu_count(device_id=None):
    """Streaming multiprocessors: what AMD's compute-unit count is to Iris's kernels' grids."""
    return _properties("get_cu_count", device_id).multi_processor_count


def get_wall_clock_rate(device_id):
    """The SM clock in kHz, as Iris's CUDA backend reports it (cudaDevAttrClockRate)."""
    return _properties("get_wall_clock_rate", device_id).clock_rate


def get_arch_string(device_id=None):
    """``sm_<major><minor>``, e.g. ``sm_90``."""
    properties = _properties("get_arch_string", device_id)
    return f"sm_{properties.major}{properties.minor}"


def get_num_xcc(device_id=None):
    """1: an NVIDIA GPU is one die, so Iris's XCD-remapping of program ids is the identity."""
    return 1


def get_runtime_version():
    """(major, minor) of the CUDA runtime (cudaRuntimeGetVersion; needs the library, not a GPU)."""
    version = ctypes.c_int()
    cuda_try(_runtime().cudaRuntimeGetVersion(ctypes.byref(version)))
    return version.value // 1000, version.value % 1000 // 10


# ---- IPC handles ---------------------------------------------------------------------------------
def get_ipc_handle(ptr, rank):
    """The cudaIpcMemHandle_t (64 bytes) of the cudaMalloc allocation at ``ptr``. ``rank`` is
    Iris's argument and unused."""
    handle = cudaIpcMemHandle_t()
    _call("get_ipc_handle", "cudaIpcGetMemHandle", ctypes.byref(handle), _as_pointer(ptr))
    return handle


def open_ipc_handle(ipc_handle_data, rank):
    """The address, in this process, of the allocation another process's handle names;
    ``ipc_handle_data`` is the handle's 64 bytes as a uint8 NumPy array. A process cannot open its
    own handles (CUDA refuses: the error says so)."""
    if not isinstance(ipc_handle_data, np.ndarray):
        raise IrisTypeError(f"aperture: iris.backend.open_ipc_handle: ipc_handle_data must be a numpy.ndarray of "
                            f"dtype uint8 with {IPC_HANDLE_SIZE} elements, not {type(ipc_handle_data).__name__}",
                            code=aperture.ErrorCode.invalid_argument)
    if ipc_handle_data.dtype != np.uint8 or ipc_handle_data.size != IPC_HANDLE_SIZE:
        raise IrisValueError(f"aperture: iris.backend.open_ipc_handle: ipc_handle_data must be a "
                             f"{IPC_HANDLE_SIZE}-element uint8 numpy array, not {ipc_handle_data.size} elements of "
                             f"{ipc_handle_data.dtype}", code=aperture.ErrorCode.invalid_argument)
    handle = cudaIpcMemHandle_t.from_buffer_copy(np.ascontiguousarray(ipc_handle_data).tobytes())
    ptr = ctypes.c_void_p()
    _call("open_ipc_handle", "cudaIpcOpenMemHandle", ctypes.byref(ptr), handle,
          ctypes.c_uint(_CUDA_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
    return ptr.value


# ---- allocations (ctypes.c_void_p, as Iris returns them) -----------------------------------------
def malloc(size):
    """``size`` bytes of device memory (cudaMalloc)."""
    ptr = ctypes.c_void_p()
    _call("malloc", "cudaMalloc", ctypes.byref(ptr), ctypes.c_size_t(size))
    return ptr


def malloc_managed(size):
    """``size`` bytes of managed (unified) memory, reachable from the host and every GPU."""
    ptr = ctypes.c_void_p()
    _call("malloc_managed", "cudaMallocManaged", ctypes.byref(ptr), ctypes.c_size_t(size),
          ctypes.c_uint(_CUDA_MEM_ATTACH_GLOBAL))
    return ptr


def malloc_fine_grained(size):
    """Managed memory: on NVIDIA the closest to HIP's fine-grained (host-coherent) memory, as Iris's
    CUDA backend chooses too."""
    return malloc_managed(size)


def free(ptr):
    """Frees what ``malloc``, ``malloc_managed`` or ``malloc_fine_grained`` returned."""
    _call("free", "cudaFree", _as_pointer(ptr))


# Iris's names that kept HIP's spelling.
hip_try = cuda_try
hip_malloc = malloc
hip_free = free
get_cuda_version = get_runtime_version
get_rocm_version = get_runtime_version

__all__ = ["set_device", "get_device_id", "count_devices", "get_cu_count", "get_wall_clock_rate", "get_arch_string",
           "get_num_xcc", "get_runtime_version", "get_ipc_handle", "open_ipc_handle", "malloc", "malloc_managed",
           "malloc_fine_grained", "free", "cuda_try", "hip_try", "hip_malloc", "hip_free", "get_cuda_version",
           "get_rocm_version"]
