"""Collectives on tensors: the C++ Communicator (aperture/collectives), on torch's current stream.

Tensors of the provider's memory kind go in: CUDA tensors on this rank's GPU for GPU providers,
CPU tensors or numpy arrays for host providers. A tensor in an aperture allocation (any
provider's) is read where it lies (zero-copy); any other is staged through the Communicator's
scratch, by the C++ library. Every call is collective: same calls, same order, same shapes."""

from . import _arrays, _core, _registry
from ._collective_object import CollectiveObject
from ._error import ErrorCode, fail

# NCCL's element types, by torch's (and numpy's) names; float8_e4m3fn is NCCL's e4m3.
_DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64",
           "float8_e4m3fn", "float8_e5m2")


class Communicator(CollectiveObject):
    """Collective: ``Communicator(team, provider)`` allocates its scratch from `provider`.
    ``close()`` (or leaving a ``with`` block) frees it, collectively; so does garbage collection,
    at a time that may differ between ranks: close it where every rank does."""

    _core_class = _core.Communicator

    # --- checks -----------------------------------------------------------------------------
    def _check(self, call, x, role):
        who = f"Communicator.{call}"
        _arrays.check_array(who, x, role)
        if self._provider.memory_kind == "device":
            if not (_arrays.is_tensor(x) and x.is_cuda):
                fail(ErrorCode.invalid_argument,
                     f"{who}: {role} is a {_arrays.describe(x)}, but provider {self._provider.name} serves GPU "
                     "memory; give a CUDA tensor on this rank's GPU")
        elif _arrays.is_tensor(x) and x.device.type != "cpu":
            fail(ErrorCode.invalid_argument,
                 f"{who}: {role} is a {_arrays.describe(x)}, but provider {self._provider.name} serves host "
                 "memory; give a CPU tensor (or numpy array)")
        if _arrays.dtype_name(x) not in _DTYPES:
            fail(ErrorCode.invalid_argument,
                 f"{who}: {role} is a {_arrays.describe(x)}; collectives take {', '.join(_DTYPES)}")
        if _registry.lookup(x)[0] == "freed":
            _registry.find(who, x)  # raises: a freed allocation is no one's memory now
        if not _arrays.is_contiguous(x):
            fail(ErrorCode.invalid_argument,
                 f"{who}: {role} ({_arrays.describe(x)}) is not contiguous; pass x.contiguous()")

    def _pair(self, call, out, inp, out_per_in):
        """Checks out and inp alike and out's size against inp's (out = out_per_in x inp elements)."""
        self._check(call, out, "out")
        self._check(call, inp, "inp")
        if _arrays.dtype_name(out) != _arrays.dtype_name(inp):
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: out is {_arrays.dtype_name(out)} but inp is {_arrays.dtype_name(inp)}; "
                 "give both one dtype")
        if _arrays.device_index(out) != _arrays.device_index(inp):
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: out is a {_arrays.describe(out)} but inp a {_arrays.describe(inp)}; "
                 "give both on one device")
        expected = out_per_in * _arrays.numel(inp)
        if _arrays.numel(out) != expected:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: out has {_arrays.numel(out)} elements and inp {_arrays.numel(inp)}; "
                 f"with {self.size} ranks out needs {out_per_in:g} x inp = {expected:g} elements")

    def _stream(self, x):
        if _arrays.is_tensor(x) and x.is_cuda:
            return _arrays.torch.cuda.current_stream(x.device).cuda_stream
        return 0

    def _symmetric_map(self, call, x):
        """The C++ map of the allocation x lies in when peers can read x where it lies (zero-copy),
        else None (staged); aperture.Error when x lies in a freed allocation. The allocation's own
        map serves any part of it (the C++ zero-copy forms take `in` anywhere in the allocation
        at the same offset on every rank), so nothing is allocated per call, which also keeps the
        calls capturable in a CUDA graph."""
        state, record = _registry.lookup(x)
        if state is None:
            return None
        if state == "freed":
            _registry.find(f"Communicator.{call}", x)  # raises, naming the freed allocation
        m = record.map
        if _arrays.numel(x) == 0 or m.world_size != self.size or m.local_rank != self.rank or not m.all_direct:
            return None  # nothing to read, another team's memory, or peers out of reach: staged
        return m

    # --- collectives ------------------------------------------------------------------------------
    def barrier(self):
        stream = 0
        if self._provider.memory_kind == "device":
            stream = _arrays.torch.cuda.current_stream().cuda_stream
        self._core.barrier(stream)

    def all_reduce(self, tensor, op="sum"):
        """In place: every element becomes the reduction over ranks: op is "sum", "prod", "min", "max" or
        "avg", rounded to the element type at every step as NCCL does (docs/CONTRACT.md)."""
        self._check("all_reduce", tensor, "tensor")
        a = _arrays.address(tensor)
        self._core.all_reduce(a, self._symmetric_map("all_reduce", tensor), a, _arrays.numel(tensor), _arrays.dtype_name(tensor), op,
                              self._stream(tensor))
        return tensor

    def all_gather(self, out, inp):
        """out[r * n : (r + 1) * n] = rank r's inp (n = inp's elements)."""
        self._pair("all_gather", out, inp, self.size)
        self._core.all_gather(_arrays.address(inp), self._symmetric_map("all_gather", inp), _arrays.address(out), _arrays.numel(inp),
                              _arrays.dtype_name(inp), self._stream(inp))
        return out

    def reduce_scatter(self, out, inp, op="sum"):
        """out[i] = reduction over ranks of inp[rank * n + i] (n = out's elements)."""
        self._pair("reduce_scatter", out, inp, 1 / self.size)
        self._core.reduce_scatter(_arrays.address(inp), self._symmetric_map("reduce_scatter", inp), _arrays.address(out),
                                  _arrays.numel(out), _arrays.dtype_name(inp), op, self._stream(inp))
        return out

    def all_to_all(self, out, inp):
        """out[r * n + i] = rank r's inp[rank * n + i] (n = inp's elements / ranks)."""
        self._pair("all_to_all", out, inp, 1)
        if _arrays.numel(inp) % self.size:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.all_to_all: inp has {_arrays.numel(inp)} elements, not a multiple of the "
                 f"{self.size} ranks")
        self._core.all_to_all(_arrays.address(inp), _arrays.address(out), _arrays.numel(inp) // self.size,
                              _arrays.dtype_name(inp), self._stream(inp))
        return out

    def check(self):
        """GPU memory: waits for torch's current stream, then raises aperture.Error (code timeout) if a
        kernel's wait gave up (APERTURE_TIMEOUT) since this Communicator was made; host memory: nothing
        to check (host waits raise where they give up)."""
        stream = 0
        if self._provider.memory_kind == "device":
            stream = _arrays.torch.cuda.current_stream().cuda_stream
        self._core.check(stream)

    def broadcast(self, tensor, root):
        """In place: every rank's tensor becomes root's."""
        self._check("broadcast", tensor, "tensor")
        a = _arrays.address(tensor)
        self._core.broadcast(a, a, _arrays.numel(tensor), _arrays.dtype_name(tensor), int(root), self._stream(tensor))
        return tensor
