"""aperture.iris's ``iris.backend`` (Iris's backend interface on CUDA): every name Iris exports and
its aliases, IRIS_BACKEND, the AMD-only HIP backend, the errors without a GPU and for bad input,
and on a GPU (``gpu`` marker) the values against torch's, raw and managed allocations, and a CUDA
IPC handle opened in another process that writes through it."""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from triton_world import INTERPRETED, job_size

import aperture
import aperture.iris.backend as backend
from aperture.iris.backend import cuda, hip

pytestmark = pytest.mark.iris

HAS_GPU = torch.cuda.is_available()

IRIS_NAMES = ["backend_name", "set_device", "get_cu_count", "count_devices", "get_ipc_handle", "open_ipc_handle",
              "get_wall_clock_rate", "get_device_id", "get_arch_string", "get_num_xcc", "malloc_fine_grained",
              "malloc", "free", "gpu_malloc", "gpu_free", "gpu_try", "get_runtime_version", "hip_malloc", "hip_free",
              "hip_try", "get_rocm_version"]


def test_every_name_of_iriss_backend_and_its_aliases():
    assert sorted(backend.__all__) == sorted(IRIS_NAMES)
    assert backend.gpu_malloc is backend.hip_malloc is backend.malloc is cuda.malloc
    assert backend.gpu_free is backend.hip_free is backend.free is cuda.free
    assert backend.gpu_try is backend.hip_try is cuda.cuda_try
    assert backend.get_rocm_version is backend.get_runtime_version is cuda.get_cuda_version
    assert backend.backend_name() == "cuda"
    assert backend.get_num_xcc() == 1 and backend.get_num_xcc(0) == 1  # one die: XCD remapping is the identity
    assert backend.count_devices() == torch.cuda.device_count()


def test_runtime_version_and_error_codes_need_the_library_not_a_gpu():
    if torch.version.cuda is None:
        pytest.skip("a torch without CUDA: no CUDA runtime to ask")
    major, minor = backend.get_runtime_version()
    assert (major, minor) >= (11, 0) and major == int(torch.version.cuda.split(".")[0])
    assert backend.gpu_try(0) is None
    with pytest.raises(RuntimeError, match="CUDA error code 2: out of memory") as raised:
        backend.gpu_try(2)  # cudaErrorMemoryAllocation
    assert isinstance(raised.value, aperture.Error)


def test_open_ipc_handle_refuses_what_is_not_a_handle():
    with pytest.raises(TypeError, match="must be a numpy.ndarray of dtype uint8 with 64 elements, not list"):
        backend.open_ipc_handle([0] * 64, 0)
    with pytest.raises(ValueError, match="64-element uint8 numpy array, not 32 elements of uint8"):
        backend.open_ipc_handle(np.zeros(32, np.uint8), 0)
    with pytest.raises(ValueError, match="not 64 elements of int8"):
        backend.open_ipc_handle(np.zeros(64, np.int8), 0)


@pytest.mark.no_gpu
@pytest.mark.parametrize("name, call", [
    ("set_device", lambda: backend.set_device(0)), ("get_device_id", backend.get_device_id),
    ("get_cu_count", backend.get_cu_count), ("get_wall_clock_rate", lambda: backend.get_wall_clock_rate(0)),
    ("get_arch_string", backend.get_arch_string), ("malloc", lambda: backend.gpu_malloc(64)),
    ("malloc_managed", lambda: backend.malloc_fine_grained(64)), ("free", lambda: backend.free(0)),
    ("get_ipc_handle", lambda: backend.get_ipc_handle(0, 0)),
    ("open_ipc_handle", lambda: backend.open_ipc_handle(np.zeros(64, np.uint8), 0)),
])
def test_without_a_gpu_each_device_call_says_there_is_none(name, call):
    with pytest.raises(aperture.Error, match=f"iris.backend.{name}: needs an NVIDIA GPU, and torch sees none here"):
        call()


def test_the_hip_backend_is_amd_only():
    with pytest.raises(aperture.Error, match=r"iris.backend.hip.malloc_fine_grained is AMD-only: Iris's HIP "
                                             r"backend .* On NVIDIA GPUs use iris.backend with IRIS_BACKEND unset"):
        hip.malloc_fine_grained(64)


# ---- on a GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU")
def test_device_queries_agree_with_torch():
    backend.set_device(0)
    assert backend.get_device_id() == 0 == torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(0)
    assert backend.get_cu_count() == backend.get_cu_count(0) == properties.multi_processor_count > 0
    assert backend.get_arch_string() == f"sm_{properties.major}{properties.minor}"
    assert backend.get_wall_clock_rate(0) == properties.clock_rate > 0  # kHz


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU")
def test_device_and_managed_allocations():
    device = backend.gpu_malloc(1 << 20)
    assert isinstance(device, ctypes.c_void_p) and device.value
    view = aperture.iris.tensor_from_ptr(device.value, 1 << 20, torch.int32)
    view.fill_(5)
    assert int(view.sum()) == 5 * (1 << 18)
    backend.gpu_free(device)
    managed = backend.malloc_fine_grained(4096)
    ctypes.memset(managed, 7, 4096)  # the host writes it directly: managed memory
    torch.cuda.synchronize()
    on_gpu = aperture.iris.tensor_from_ptr(managed.value, 4096, torch.uint8)
    assert int(on_gpu.sum()) == 7 * 4096
    torch.cuda.synchronize()
    backend.free(managed.value)  # an int is taken too
    with pytest.raises(aperture.Error, match="CUDA error code 2: out of memory"):
        backend.malloc(1 << 62)
    # The failure stays with that call: torch's next kernel launch does not report it as its own.
    assert torch.equal(torch.ones(4, device="cuda").mul_(2).cpu(), torch.full((4,), 2.0))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU")
def test_an_ipc_handle_opened_in_another_process_reaches_the_allocation(tmp_path):
    size = 1 << 16
    ptr = backend.malloc(size)
    mine = aperture.iris.tensor_from_ptr(ptr.value, size, torch.int32)
    mine.zero_()
    torch.cuda.synchronize()
    handle = backend.get_ipc_handle(ptr, 0)
    data = np.frombuffer(bytes(handle), dtype=np.uint8)
    assert data.size == 64 and data.any()
    with pytest.raises(aperture.Error, match="CUDA error code"):  # CUDA refuses a process its own handle
        backend.open_ipc_handle(data, 0)
    child = ("import sys, numpy as np, torch, aperture.iris as iris, aperture.iris.backend as backend\n"
             "ptr = backend.open_ipc_handle(np.frombuffer(bytes.fromhex(sys.argv[1]), np.uint8), 1)\n"
             f"iris.tensor_from_ptr(ptr, {size}, torch.int32).copy_(torch.arange({size // 4}, device='cuda') * 3)\n"
             "torch.cuda.synchronize()\n")
    done = subprocess.run([sys.executable, "-c", child, data.tobytes().hex()], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert torch.equal(mine, torch.arange(size // 4, device="cuda", dtype=torch.int32) * 3)
    backend.free(ptr)


# ---- import paths and IRIS_BACKEND (processes of their own) --------------------------------------
def run_python(args, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APERTURE_RANK", "APERTURE_WORLD", "RANK",
                                                                    "WORLD_SIZE", "OMPI_", "PMI", "IRIS_BACKEND"))}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=dict(env, **env_extra),
                          timeout=300)


def test_iris_backend_resolves_through_the_shim(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import iris.backend as backend\nfrom iris.backend import cuda, hip\nimport aperture.iris\n"
                    "assert backend is aperture.iris.backend and cuda.get_num_xcc is backend.get_num_xcc\n"
                    "print(backend.backend_name(), backend.get_num_xcc())\n")
    for value in ("", "cuda", "CUDA"):
        done = run_python(["-m", "aperture.iris", str(prog)], IRIS_BACKEND=value)
        assert done.returncode == 0 and done.stdout.split() == ["cuda", "1"], done.stderr[-2000:]


@pytest.mark.parametrize("value, message", [
    ("hip", "IRIS_BACKEND=hip is AMD-only: Iris's HIP backend"),
    ("rocm", "Invalid IRIS_BACKEND='rocm'. Must be 'cuda' or 'hip'."),
])
def test_iris_backend_refuses_at_import_what_it_cannot_be(value, message):
    done = run_python(["-c", "import aperture.iris.backend"], IRIS_BACKEND=value)
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]


if job_size() > 1 or (INTERPRETED and "APERTURE_WORLD_SIZE" in os.environ):
    # These start processes of their own: once, from a one-rank job (triton_world.only_in_one_rank_jobs).
    del test_iris_backend_resolves_through_the_shim, test_iris_backend_refuses_at_import_what_it_cannot_be
    del test_an_ipc_handle_opened_in_another_process_reaches_the_allocation
