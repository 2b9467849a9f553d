"""Collectives on tensors: the C++ Communicator (aperture/collectives), on torch's current stream.

Tensors of the provider's memory kind go in: CUDA tensors on this rank's GPU for GPU providers,
CPU tensors or numpy arrays for host providers. A tensor in an aperture allocation (any
provider's) is read where it lies (zero-copy); any other is staged through the Communicator's
scratch, by the C++ library. Every call is collective: same calls, same order, same shapes.

Each tensor is checked once, by ``_operand``, which also gathers all that the C++ call takes
(address, elements, DataType, the allocation's map for the zero-copy forms, the stream); the C++
library then checks what only it can see (counts against its scratch, ranks, the map)."""

from typing import NamedTuple

from .. import _core
from .._error import ErrorCode, fail
from ..memory import _registry, _tensors, dtypes
from ._collective_object import CollectiveObject


class _Operand(NamedTuple):
    address: int
    count: int  # elements
    data_type: object  # a dtypes.DataType
    device: int  # the CUDA device, or -1 for host memory
    map: object  # the allocation's C++ map when peers read it where it lies (zero-copy), else None
    stream: int  # torch's current stream on the tensor's GPU (0 for host memory)


class Communicator(CollectiveObject):
    """Collective: ``Communicator(team, provider)`` allocates its scratch from `provider`.
    ``close()`` or leaving a ``with`` block frees it, collectively; one dropped without close()
    goes at the next collective point where every rank has dropped it (docs/PYTHON.md, "When a
    Communicator goes")."""

    _core_class = _core.Communicator

    def __init__(self, team, provider):
        super().__init__(team, provider)
        self._on_device = provider.memory_kind == "device"
        self._me = (self._core.rank, self._core.size)

    # --- the one check ------------------------------------------------------------------------
    def _operand(self, call, x, role):
        """x checked for a collective (its kind, device, element type, layout, and not freed), and
        what the C++ call takes of it, worked out in one pass."""
        torch = _tensors.torch
        if torch is not None and isinstance(x, torch.Tensor):
            on_cuda = x.is_cuda
            if on_cuda != self._on_device or (not on_cuda and x.device.type != "cpu"):
                self._wrong_memory(call, x, role)
            data_type = dtypes.data_type(x.dtype)
            contiguous = x.is_contiguous()
            address, count = x.data_ptr(), x.numel()
            if on_cuda:
                device = x.device.index
                stream = torch.cuda.current_stream(device).cuda_stream
            else:
                device, stream = -1, 0
        elif isinstance(x, _tensors.np.ndarray):
            if self._on_device:
                self._wrong_memory(call, x, role)
            data_type = dtypes.data_type(x.dtype)
            contiguous = x.flags["C_CONTIGUOUS"]
            address, count, device, stream = x.__array_interface__["data"][0], x.size, -1, 0
        else:
            _tensors.check_array(f"Communicator.{call}", x, role)  # raises, naming the type
        if data_type is None:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: {role} is a {_tensors.describe(x)}; collectives take {', '.join(dtypes.NAMES)}")
        if not contiguous:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: {role} ({_tensors.describe(x)}) is not contiguous; pass x.contiguous()")
        state, record = _registry.lookup(x)
        if state == "freed":
            _registry.find(f"Communicator.{call}", x)  # raises: a freed allocation is no one's memory now
        # The allocation's own map serves any part of it (the C++ zero-copy forms take `in` anywhere
        # in the allocation, at the same offset on every rank): nothing is allocated per call,
        # which also keeps the calls capturable in a CUDA graph. Another team's memory, peers
        # out of reach, or nothing to read: staged.
        zero_copy = state == "live" and count > 0 and record.zero_copy == self._me
        return _Operand(address, count, data_type, device, record.map if zero_copy else None, stream)

    def _wrong_memory(self, call, x, role):
        if self._on_device:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: {role} is a {_tensors.describe(x)}, but provider {self._provider.name} serves "
                 "GPU memory; give a CUDA tensor on this rank's GPU")
        fail(ErrorCode.invalid_argument,
             f"Communicator.{call}: {role} is a {_tensors.describe(x)}, but provider {self._provider.name} serves host "
             "memory; give a CPU tensor (or numpy array)")

    def _pair(self, call, out, inp, out_per_in):
        """out and inp checked alike, and out's size against inp's (out = out_per_in x inp elements)."""
        o = self._operand(call, out, "out")
        i = self._operand(call, inp, "inp")
        if o.data_type != i.data_type:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: out is {dtypes.name_of(out.dtype)} but inp is {dtypes.name_of(inp.dtype)}; "
                 "give both one dtype")
        if o.device != i.device:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: out is a {_tensors.describe(out)} but inp a {_tensors.describe(inp)}; "
                 "give both on one device")
        expected = out_per_in * i.count
        if o.count != expected:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.{call}: out has {o.count} elements and inp {i.count}; "
                 f"with {self.size} ranks out needs {out_per_in:g} x inp = {expected:g} elements")
        return o, i

    def _current_stream(self):
        return _tensors.torch.cuda.current_stream().cuda_stream if self._on_device else 0

    # --- collectives ------------------------------------------------------------------------------
    def barrier(self):
        self._core.barrier(self._current_stream())

    def all_reduce(self, tensor, op="sum"):
        """In place: every element becomes the reduction over ranks: op is "sum", "prod", "min", "max" or
        "avg", rounded to the element type at every step as NCCL does (docs/CONTRACT.md)."""
        x = self._operand("all_reduce", tensor, "tensor")
        self._core.all_reduce(x.address, x.map, x.address, x.count, x.data_type,
                              dtypes.reduce_op("Communicator.all_reduce", op), x.stream)
        return tensor

    def all_gather(self, out, inp):
        """out[r * n : (r + 1) * n] = rank r's inp (n = inp's elements)."""
        o, i = self._pair("all_gather", out, inp, self.size)
        self._core.all_gather(i.address, i.map, o.address, i.count, i.data_type, i.stream)
        return out

    def reduce_scatter(self, out, inp, op="sum"):
        """out[i] = reduction over ranks of inp[rank * n + i] (n = out's elements)."""
        o, i = self._pair("reduce_scatter", out, inp, 1 / self.size)
        self._core.reduce_scatter(i.address, i.map, o.address, o.count, i.data_type,
                                  dtypes.reduce_op("Communicator.reduce_scatter", op), i.stream)
        return out

    def all_to_all(self, out, inp):
        """out[r * n + i] = rank r's inp[rank * n + i] (n = inp's elements / ranks)."""
        o, i = self._pair("all_to_all", out, inp, 1)
        if i.count % self.size:
            fail(ErrorCode.invalid_argument,
                 f"Communicator.all_to_all: inp has {i.count} elements, not a multiple of the {self.size} ranks")
        self._core.all_to_all(i.address, i.map, o.address, i.count // self.size, i.data_type, i.stream)
        return out

    def broadcast(self, tensor, root):
        """In place: every rank's tensor becomes root's."""
        x = self._operand("broadcast", tensor, "tensor")
        self._core.broadcast(x.address, x.map, x.address, x.count, x.data_type, int(root), x.stream)
        return tensor

    @property
    def between_nodes(self):
        """What a team over several nodes exchanges data between nodes on: "nccl" (GPU memory, NCCL
        built in) or "mpi" (host memory; GPU memory through pinned staging); "" on one node.
        APERTURE_COLLECTIVES_BETWEEN_NODES chooses (docs/MULTINODE.md)."""
        return self._core.between_nodes

    def check(self):
        """GPU memory: waits for torch's current stream, then raises aperture.Error (code timeout) if a
        kernel's wait gave up (APERTURE_TIMEOUT) since this Communicator was made; host memory: nothing
        to check (host waits raise where they give up)."""
        self._core.check(self._current_stream())
