"""The two GEMMs of a tensor-parallel layer with their communication overlapped: the C++
OverlappedGemm (aperture/collectives/overlapped_gemm.h) on torch tensors, on torch's current stream.

    tp = aperture.OverlappedGemm(team, provider)   # collective; provider: a GPU provider
    c = tp.ag_gemm(a_shard, b)        # c[m, n] = all_gather(a_shard[m / W, k]) @ b[k, n]
    c_shard = tp.gemm_rs(a, b)        # c_shard[m / W, n] = rows rank*m/W.. of sum over ranks of a @ b

Every matrix is a contiguous 2-D bfloat16 CUDA tensor on this rank's GPU; it need not be
symmetric (the C++ class moves the data through its own symmetric buffers, allocated from
`provider`). The C++ class checks the shapes (m a multiple of the team size, n and k of 64) and
the 16-byte alignment; this layer checks what the C++ API cannot see (dtypes, devices, matching
dimensions). Calls are collective and may be captured in a CUDA graph once reserve() has sized
the buffers for the largest shapes.

Across nodes (ranks started by mpirun or `aperture launch --mpi` on several nodes) both run
unfused, with no overlap: the GEMM beside the Communicator's all_gather or reduce_scatter across
nodes (docs/MULTINODE.md); those cannot be captured in a CUDA graph (aperture.Error, unavailable)."""

from .. import _core
from .._error import ErrorCode, fail
from ..collectives._collective_object import CollectiveObject
from ..memory import _registry, _tensors


class OverlappedGemm(CollectiveObject):
    """Collective: ``OverlappedGemm(team, provider)`` allocates its flags from `provider` (a GPU
    provider: cuda-ipc, cuda-vmm, nvshmem, nccl, or aperture.torch_symmetric_provider) and its
    cuBLASLt workspace. ``close()`` or leaving a ``with`` block frees them, collectively; one
    dropped without close() goes at the next collective point where every rank has dropped it
    (docs/PYTHON.md, "When a Communicator goes")."""

    _core_class = _core.OverlappedGemm

    def reserve(self, m, n, k):
        """Collective: sizes the symmetric buffers for ag_gemm and gemm_rs of these shapes (m the
        full row count). Call it with the largest shapes before capturing a CUDA graph."""
        self._core.reserve(int(m), int(n), int(k))

    # --- checks -----------------------------------------------------------------------------
    def _matrix(self, call, x, role, rows=None, cols=None):
        """x as a bf16 CUDA matrix on this rank's GPU: its (rows, cols), checked against the given ones."""
        who = f"OverlappedGemm.{call}"
        _tensors.check_array(who, x, role)
        if not (_tensors.is_tensor(x) and x.is_cuda):
            fail(ErrorCode.invalid_argument,
                 f"{who}: {role} is a {_tensors.describe(x)}; ag_gemm and gemm_rs take CUDA tensors on this rank's GPU")
        if x.dtype != _tensors.torch.bfloat16:
            fail(ErrorCode.invalid_argument,
                 f"{who}: {role} is a {_tensors.describe(x)}; ag_gemm and gemm_rs take bfloat16 matrices "
                 "(fp32 accumulation inside): pass x.to(torch.bfloat16)")
        if x.dim() != 2:
            fail(ErrorCode.invalid_argument, f"{who}: {role} is a {_tensors.describe(x)}, not a 2-D matrix")
        if not _tensors.is_contiguous(x):
            fail(ErrorCode.invalid_argument,
                 f"{who}: {role} ({_tensors.describe(x)}) is not contiguous (row-major, dense); pass x.contiguous()")
        if _registry.lookup(x)[0] == "freed":
            _registry.find(who, x)  # raises: a freed allocation is no one's memory now
        got = tuple(x.shape)
        for index, (have, want, name) in enumerate(zip(got, (rows, cols), ("rows", "columns"))):
            if want is not None and have != want:
                fail(ErrorCode.invalid_argument,
                     f"{who}: {role} has shape {got}, but {want} {name} are needed there; see the shapes in "
                     "help(aperture.OverlappedGemm)")
        return got

    def _same_device(self, call, *tensors):
        devices = {_tensors.device_index(t) for t in tensors}
        if len(devices) != 1:
            fail(ErrorCode.invalid_argument,
                 f"OverlappedGemm.{call}: the matrices lie on CUDA devices {sorted(devices)}; give them all on this "
                 "rank's GPU")

    # --- the operations ---------------------------------------------------------------------
    def ag_gemm(self, a_shard, b, out=None):
        """out[m, n] = all_gather(a_shard) @ b: a_shard is this rank's m / W rows of A (rows
        rank * m / W onwards), b is k x n; every rank gets all of out. Returns out (a new tensor
        when out is None)."""
        rows, k = self._matrix("ag_gemm", a_shard, "a_shard")
        _, n = self._matrix("ag_gemm", b, "b", rows=k)
        m = rows * self.size
        if out is None:
            out = _tensors.torch.empty((m, n), dtype=b.dtype, device=b.device)
        else:
            self._matrix("ag_gemm", out, "out", rows=m, cols=n)
        self._same_device("ag_gemm", a_shard, b, out)
        stream = _tensors.torch.cuda.current_stream(b.device).cuda_stream
        self._core.ag_gemm(a_shard.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, stream)
        return out

    def gemm_rs(self, a, b, out=None):
        """out[m / W, n] = rows rank * m / W onwards of the sum over ranks of a[m, k] @ b[k, n]
        (each rank's a and b are its own: in a tensor-parallel layer, its columns of the
        activations and its rows of the weights). The ranks' bf16 partial products are summed in
        fp32, in rank order, and rounded once. Returns out (a new tensor when out is None)."""
        m, k = self._matrix("gemm_rs", a, "a")
        _, n = self._matrix("gemm_rs", b, "b", rows=k)
        rows = m // self.size if m % self.size == 0 else None
        if out is None:
            # A row count that does not divide reaches the C++ check, which says so.
            out = _tensors.torch.empty((max(m // self.size, 1), n), dtype=b.dtype, device=b.device)
        elif rows is not None:
            self._matrix("gemm_rs", out, "out", rows=rows, cols=n)
        self._same_device("gemm_rs", a, b, out)
        stream = _tensors.torch.cuda.current_stream(b.device).cuda_stream
        self._core.gemm_rs(a.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, stream)
        return out

    def check(self):
        """Waits for torch's current stream, then raises aperture.Error (code timeout) if a device
        wait of any call so far gave up (APERTURE_TIMEOUT)."""
        self._core.check(_tensors.torch.cuda.current_stream().cuda_stream)
