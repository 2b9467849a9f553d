"""The GPU proxy from Python: how a Triton kernel reaches peers on other nodes (table entry 0).

    prov = aperture.make_provider("shm", team)         # a job over several nodes, started by mpirun
    t = prov.zeros(n, "int64")
    m = aperture.address_map(t)
    with aperture.GpuProxy(t) as proxy:                 # one per rank and engine; starts its thread
        kernel[grid](t, m.peer_bases, rank, peer, n, proxy.handle)   # apt.put(..., proxy=proxy)
        torch.cuda.synchronize()                        # every request has completed
    # stopped here: before the memory is freed

The C++ aperture::GpuProxy does the work (docs/MULTINODE.md, "GPU kernels: the proxy channel"):
a request queue and a thread that hands its requests to the map's engine. ``handle`` is what a
kernel needs of the queue, as an int64 tensor where the kernel runs; aperture.triton's functions
take it as ``proxy=``.
"""

from . import _core
from .memory import _tensors
from .memory._address_map import AddressMap, address_map
from ._error import ErrorCode, fail


def _interpreting():
    import os

    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class GpuProxy:
    """The proxy of the engine that reaches `memory`'s indirect peers (`memory`: a provider's
    tensor or an AddressMap). Raises aperture.Error (unavailable) when the map has no engine:
    every peer is direct (one node), or the ranks were not started by mpirun.

    ``producers``: "gpu" (kernels compiled for this rank's GPU: the queue in pinned host memory
    mapped for it, its tickets on the current device), "host" (kernels run by Triton's
    interpreter on CPUs: the queue in host memory), or None: "host" when TRITON_INTERPRET is set
    or aperture has no CUDA, else "gpu". ``capacity``: slots (requests in flight before producers
    wait). ``timeout``: seconds each wait of a producer may take (default APERTURE_TIMEOUT)."""

    def __init__(self, memory, capacity=256, timeout=None, producers=None):
        core_map, device = self._resolve(memory)
        if producers is None:
            producers = "host" if (_interpreting() or not _core.with_cuda) else "gpu"
        if producers not in ("gpu", "host"):
            fail(ErrorCode.invalid_argument, f"GpuProxy: producers={producers!r}; give \"gpu\", \"host\" or None")
        if timeout is not None and not timeout > 0:
            fail(ErrorCode.invalid_argument, f"GpuProxy: timeout={timeout!r} seconds; give a positive number or None")
        self._check_layout()
        torch = _tensors.torch
        if producers == "gpu":
            if torch is None or not torch.cuda.is_available():
                fail(ErrorCode.unavailable, "GpuProxy: producers=\"gpu\" needs torch with a CUDA device; run the "
                     "kernels interpreted (TRITON_INTERPRET=1) with producers=\"host\"")
            if device < 0:
                device = torch.cuda.current_device()
            with torch.cuda.device(device):  # the tickets go on the device the kernels run on
                self._core = _core.GpuProxy(core_map, capacity, False, float(timeout or 0))
        else:
            self._core = _core.GpuProxy(core_map, capacity, True, float(timeout or 0))
        self._producers = producers
        fields = self._core.handle_fields
        if torch is not None:
            self._handle = torch.tensor(fields, dtype=torch.int64, device=f"cuda:{device}" if producers == "gpu"
                                        else "cpu")
        else:
            import numpy

            self._handle = numpy.array(fields, dtype=numpy.int64)

    @staticmethod
    def _resolve(memory):
        if isinstance(memory, AddressMap):
            return memory._map, memory._device
        if _tensors.is_tensor(memory) or isinstance(memory, _tensors.np.ndarray):
            m = address_map(memory)
            return m._map, m._device
        fail(ErrorCode.invalid_argument, f"GpuProxy: expected a provider's tensor or an AddressMap, got "
             f"{type(memory).__name__}")

    @staticmethod
    def _check_layout():
        try:
            from .triton import PROXY_LAYOUT
        except ImportError:  # no Triton here: nothing posts from Python kernels
            return
        actual = _core.proxy_layout()
        wrong = {k: (v, actual.get(k)) for k, v in PROXY_LAYOUT.items() if actual.get(k) != v}
        if wrong:
            fail(ErrorCode.internal, f"GpuProxy: aperture.triton's queue layout differs from the library's "
                 f"(field: (python, C++)) {wrong}; the package and its library are from different builds")

    @property
    def handle(self):
        """The int64 tensor a Triton kernel takes as ``proxy`` (on the GPU for "gpu" producers)."""
        return self._handle

    @property
    def producers(self):
        return self._producers

    def covers(self, memory):
        """True when `memory` (a tensor or AddressMap) is reached through this proxy's engine, so its
        kernels may use this handle (for a heap provider, every allocation of the heap)."""
        core_map, _ = self._resolve(memory)
        return self._core.covers(core_map)

    completed = property(lambda self: self._core.completed, doc="requests carried out")
    failures = property(lambda self: self._core.failures, doc="requests the engine failed")
    last_error = property(lambda self: self._core.last_error, doc="the engine's first failure message, or ''")
    stopped = property(lambda self: self._core.stopped)

    def stop(self):
        """Stops the proxy thread (idempotent). Call it once the kernels that use it have finished
        and before the memory is freed; a kernel still waiting then stops with status closed."""
        self._core.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __repr__(self):
        return (f"GpuProxy(producers={self._producers!r}, completed={self.completed}, failures={self.failures}, "
                f"stopped={self.stopped})")
