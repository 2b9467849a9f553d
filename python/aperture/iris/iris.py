"""Iris's host object on aperture: ``iris.iris(heap_size, allocator_type=...)`` and class ``Iris``.

One symmetric heap (an aperture allocation from the provider ``allocator_type`` names) hands out
torch tensors with Iris's factories; ``allocate_symmetric`` hands out a heap tensor with a table
of its own; ``ctx.ccl`` runs Iris's collectives on aperture's Communicator; ``get_device_context``
builds the tensor ``DeviceContext.initialize`` reads. Ranks come from torch.distributed when it is
initialised, else from the launcher (aperture launch, mpirun, torchrun), else one rank.
docs/IRIS.md lists every name and every difference from Iris.
"""

import contextlib
import json
import logging
import os
import pickle

import numpy as np
import torch

import aperture

from . import _amd, _copy_engine, _ranks, tensor_creation
from ._errors import IrisAttributeError, IrisValueError
from ._allocators import SAME_HISTORY
from ._heap import SymmetricHeap, peer_tensor
from .logging import log_with_rank
from .util import is_simulation_env

# Iris's allocator names, and the aperture provider that stands nearest to each.
_IRIS_ALLOCATORS = {
    "torch": None,  # Iris's default: aperture's default provider (APERTURE_PROVIDER, else the default)
    "vmem": "cuda-vmm",  # Iris's virtual-memory allocator: aperture's cuMemCreate/cuMemMap provider
    "vmem_chunked": "cuda-vmm",
}
_TORCH_SYMMETRIC = ("torch_symm_mem", "torch_symmmem", "torch-symmetric", "torch_symmetric")


# What the aperture heap needs beside Iris's heap_size: ctx.ccl's Communicator scratch (about 143 MB
# on a GPU with its default options), the p2p mailboxes, the barrier and fused-op flags.
_HEAP_HEADROOM = 512 << 20


@contextlib.contextmanager
def _heap_sized(heap_size):
    """Iris's heap is one allocation of heap_size bytes; aperture's own heaps (APERTURE_HEAP_SIZE,
    APERTURE_GPU_HEAP_SIZE, read when the provider is made) must hold it and the headroom. A size
    the user set is kept: a heap too small for it then fails with the error naming the variable."""
    wanted = str(int(heap_size) + _HEAP_HEADROOM)
    set_here = [name for name in ("APERTURE_HEAP_SIZE", "APERTURE_GPU_HEAP_SIZE") if name not in os.environ]
    for name in set_here:
        os.environ[name] = wanted
    try:
        yield
    finally:
        for name in set_here:
            os.environ.pop(name, None)


def _provider_for(allocator_type, team, heap_size):
    with _heap_sized(heap_size):
        return _make_provider(allocator_type, team)


def _allocator_name(allocator_type):
    """The allocator asked for: IRIS_ALLOCATOR overrides the argument, as in Iris."""
    return os.environ.get("IRIS_ALLOCATOR") or allocator_type or "torch"


def _make_provider(allocator_type, team):
    name = _allocator_name(allocator_type)
    lowered = name.lower()
    if lowered in ("rocshmem", "dmabuf"):
        _amd.refuse(lowered, f"allocator_type={name!r}")
    if lowered in _TORCH_SYMMETRIC:
        return aperture.torch_symmetric_provider(team)
    if lowered in _IRIS_ALLOCATORS:
        mapped = _IRIS_ALLOCATORS[lowered]
        if mapped is None or not torch.cuda.is_available():  # vmem without a GPU: the host default
            mapped = os.environ.get("APERTURE_PROVIDER") or "default"
        return aperture.make_provider(mapped, team)
    if name not in aperture.available_providers() and name != "default":
        raise aperture.Error(
            f"aperture: iris: allocator_type={name!r} is neither an Iris allocator ({', '.join(_IRIS_ALLOCATORS)}, "
            f"torch_symm_mem) nor an aperture provider available here ({', '.join(aperture.available_providers())})",
            code=aperture.ErrorCode.invalid_argument)
    return aperture.make_provider(name, team)


class Iris:
    """A symmetric heap of ``heap_size`` bytes on every rank, and this rank's view of the job."""

    def __init__(self, heap_size=1 << 30, allocator_type="torch", *, team=None, copy_engine=None,
                 enable_copy_engine=None):
        _copy_engine.check_off(copy_engine, enable_copy_engine)  # before anything collective
        self.copy_engine = None  # Iris's SDMA copy engine: always off on NVIDIA GPUs
        self.enable_copy_engine = False
        self.team = team if team is not None else _ranks.process_team()
        self.cur_rank = self.team.rank
        self.num_ranks = self.team.size
        if torch.cuda.is_available():  # Iris's rule: the GPU is the rank modulo the GPUs
            torch.cuda.set_device(self.team.local_rank % torch.cuda.device_count())
        self.allocator_type = allocator_type
        self.provider = _provider_for(allocator_type, self.team, heap_size)
        self.heap_size = int(heap_size)
        self.heap = SymmetricHeap(self.provider, heap_size, fresh=True,
                                  frees=_allocator_name(allocator_type).lower() == "vmem_chunked")
        pool_device = self.heap.get_device()
        self.gpu_id = pool_device.index if pool_device.type == "cuda" else -1
        # Iris's device is the string "cuda:N"; a host heap (no GPU here) says "cpu".
        self.device = f"cuda:{self.gpu_id}" if pool_device.type == "cuda" else "cpu"
        self._gpu_proxy = self._proxy_for_other_nodes()
        self.heap_bases = self.heap.get_heap_bases()
        self.heap_bases_cpu = self.heap_bases.cpu().numpy()  # for host-side translate(), as in Iris
        if is_simulation_env():
            self._write_heap_bases()
        self.comm = None  # Iris's MPI communicator slot; aperture's ranks are self.team
        self._communicator = None
        self._device_context = None
        from .ccl import CCL
        from .ccl.p2p import Mailboxes

        self._p2p_mailboxes = Mailboxes(self)  # collective, so made here: send/recv involve two ranks only
        self.ccl = CCL(self)
        self._ops = None
        from .tracing import Tracing

        self.tracing = Tracing(self)  # off until ctx.tracing.enable()
        self.barrier()
        self._log_with_rank(logging.INFO, f"init: heap_size={heap_size} rank={self.cur_rank}/{self.num_ranks} "
                                          f"allocator={allocator_type} provider={self.provider.name}")

    def _write_heap_bases(self):
        """Under IRIS_SIMULATION, as Iris does for the tools that replay a captured kernel: every
        rank's heap base in ``{IRIS_HEAP_BASES_PREFIX or "iris"}_rank_{rank}_heap_bases.json`` in
        the working directory (rank, num_ranks, and the bases as hex strings)."""
        prefix = os.environ.get("IRIS_HEAP_BASES_PREFIX", "iris")
        path = f"{prefix}_rank_{self.cur_rank}_heap_bases.json"
        bases = [hex(int(base)) for base in self.heap_bases_cpu]
        with open(path, "w") as out:
            json.dump({"rank": self.cur_rank, "num_ranks": self.num_ranks, "heap_bases": bases}, out, indent=2)

    # ---- compatibility attributes -------------------------------------------------------
    @property
    def ops(self):
        """Iris's fused GEMM + collective operations with this context filled in (iris.ops)."""
        if self._ops is None:
            from .ops import OpsNamespace

            self._ops = OpsNamespace(self)
        return self._ops

    @property
    def memory_pool(self):
        return self.heap.memory_pool

    @property
    def address_map(self):
        return self.heap.address_map

    # ---- who we are ---------------------------------------------------------------------
    def get_rank(self):
        return self.cur_rank

    def get_num_ranks(self):
        return self.num_ranks

    def _proxy_for_other_nodes(self):
        """Where the heap reaches ranks of other nodes (an engine, under mpirun): a GPU proxy for it,
        whose handle the tables carry, so kernels written for one node reach every node
        (aperture.iris._device._OTHER_NODES). None on one node. Not collective; the proxy stops
        when the context goes."""
        heap_map = self.heap.address_map
        if not heap_map.indirect_peers or not heap_map.has_engine:
            return None
        proxy = aperture.GpuProxy(heap_map)
        self.heap.carry_proxy(proxy)
        from . import _device_context

        _device_context.reach_other_nodes()
        return proxy

    def get_heap_bases(self):
        """The table to pass to kernels: entry r is rank r's heap base in this process (int64)."""
        return self.heap_bases

    def get_device(self):
        """The torch.device the heap lies on."""
        return self.heap.get_device()

    def get_device_id(self):
        return self.gpu_id

    def get_cu_count(self):
        """Streaming multiprocessors of this rank's GPU (Iris's compute units); on a host heap, the
        CPUs this process may run on."""
        if self.get_device().type == "cuda":
            return torch.cuda.get_device_properties(self.get_device()).multi_processor_count
        return len(os.sched_getaffinity(0))

    def get_num_xcc(self):
        _amd.refuse("xcc", "Iris.get_num_xcc")

    # ---- logging with the rank ----------------------------------------------------------
    def _log_with_rank(self, level, message):
        log_with_rank(level, message, self.cur_rank, self.num_ranks)

    def debug(self, message):
        self._log_with_rank(logging.DEBUG, message)

    def info(self, message):
        self._log_with_rank(logging.INFO, message)

    def warning(self, message):
        self._log_with_rank(logging.WARNING, message)

    def error(self, message):
        self._log_with_rank(logging.ERROR, message)

    # ---- synchronisation ----------------------------------------------------------------
    def _comm(self):
        if self._communicator is None:
            self._communicator = aperture.Communicator(self.team, self.provider)
        return self._communicator

    def barrier(self, stream=None, group=None, sync_copy_engine=False):
        """Waits for this rank's GPU work (the stream given, or the whole device), then for every rank
        (every rank of ``group``, a torch.distributed subgroup: through torch.distributed).
        ``sync_copy_engine`` (Iris's SDMA branch) has nothing more to wait for here: aperture
        issues no copy-engine transfers of its own outside the streams."""
        from .ccl.subgroup import subgroup_of

        sub = None if group is None else subgroup_of(self, group, "barrier")
        if self.get_device().type == "cuda":
            if stream is None:
                torch.cuda.synchronize(self.get_device())
            else:
                stream.synchronize()
        if sub is not None:
            sub.barrier()
        elif self.heap.allocator.frees:
            self._barrier_checking_heap_layout()
        else:
            self.team.barrier()

    def _barrier_checking_heap_layout(self):
        """The team's barrier as an allgather of each rank's heap layout (a heap that frees): a
        tensor freed on some ranks and not on others moves every later offset there, silently, so
        each barrier compares, and every rank raises the same error when they differ."""
        try:
            gathered = self.team.allgather(self.heap.allocator.layout())
        except aperture.Error as e:
            if e.code != aperture.ErrorCode.mismatch:
                raise
            raise aperture.Error(
                f"aperture: iris: barrier: another rank made another collective call instead, most likely growing its "
                f"heap where this one did not need to, so the ranks' heap blocks differ. {SAME_HISTORY}. ({e})",
                code=aperture.ErrorCode.mismatch) from None
        layouts = [self.heap.allocator.LAYOUT.unpack(raw) for raw in gathered]
        open_ = [(rank, layout) for rank, layout in enumerate(layouts) if layout[0]]
        if len({layout for _, layout in open_}) > 1:
            seen = "; ".join(f"rank {rank}: {bump} bytes to the end of its last block, {blocks} blocks in use"
                             for rank, (_, bump, blocks, _) in open_)
            raise aperture.Error(
                f"aperture: iris: the heap's blocks differ between ranks ({seen}), so a tensor no longer lies at "
                f"the same offset on every rank. {SAME_HISTORY}", code=aperture.ErrorCode.mismatch)

    def device_barrier(self, group=None):
        """A barrier on the GPU's stream (no host wait), capturable in a CUDA graph: aperture's
        Communicator barrier, enqueued on torch's current stream (on a subgroup, torch.distributed's
        barrier of that group)."""
        from .ccl.subgroup import subgroup_of

        sub = None if group is None else subgroup_of(self, group, "device_barrier")
        if sub is not None:
            sub.barrier()
        else:
            self._comm().barrier()

    # ---- broadcast ----------------------------------------------------------------------
    @staticmethod
    def _is_array(value):
        if isinstance(value, (str, bytes, dict, bool)) or value is None:
            return False
        if isinstance(value, (torch.Tensor, np.ndarray)):
            return True
        try:
            return np.issubdtype(np.asarray(value).dtype, np.number)
        except (TypeError, ValueError):
            return False

    def broadcast(self, value, src=0, *, source_rank=None):
        """Rank ``src``'s ``value`` on every rank (other ranks' values are ignored; pass None).
        As in Iris, a tensor or array arrives as a numpy array; any other picklable value as itself.
        Collective. ``source_rank=`` is the older Iris spelling of ``src``."""
        if source_rank is not None:
            src = source_rank
        self._check_rank(src, "broadcast", "src")
        kind = [None]
        if self.cur_rank == src:
            kind = ["array" if self._is_array(value) else "object"]
        kind = self._broadcast_object(kind, src)
        if kind[0] == "array":
            array = None
            if self.cur_rank == src:
                array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            return self._broadcast_object(array, src)
        return self._broadcast_object(value, src)

    def _broadcast_object(self, value, src):
        payload = pickle.dumps(value) if self.cur_rank == src else b""
        device = self.get_device()
        length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
        self._comm().broadcast(length, src)
        nbytes = int(length.item())
        # aperture's collectives move 8-bit words and wider; the pickle travels as uint8.
        data = torch.zeros(max(nbytes, 1), dtype=torch.uint8, device=device)
        if self.cur_rank == src and nbytes:
            data[:nbytes].copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
        self._comm().broadcast(data, src)
        if self.cur_rank == src:
            return value
        return pickle.loads(data[:nbytes].cpu().numpy().tobytes())

    def broadcast_tensor(self, value, source_rank=0):
        """source_rank's tensor, on every rank, as a new tensor (same shape and dtype everywhere). Collective."""
        out = value.clone()
        self._comm().broadcast(out, source_rank)
        return out

    def _mailboxes(self):
        return self._p2p_mailboxes

    def _check_rank(self, rank, call, name):
        if not isinstance(rank, (int, np.integer)) or not 0 <= int(rank) < self.num_ranks:
            # "<name> must be in [0, world_size)": the words Iris's tests match.
            raise IrisValueError(f"aperture: iris: {call}: {name}={rank!r} is out of range for this {self.num_ranks}-rank "
                                 f"job: {name} must be in [0, {self.num_ranks}), 0..{self.num_ranks - 1}",
                                 code=aperture.ErrorCode.invalid_argument)

    # ---- host-side addresses, and Iris's SDMA-branch transfers ---------------------------
    def translate(self, ptr, from_rank, to_rank):
        """``ptr`` (an address in ``from_rank``'s heap, as this process maps it) moved to the same
        heap offset in ``to_rank``'s heap: an address this process can hand to a copy or a kernel."""
        self._check_rank(from_rank, "translate", "from_rank")
        self._check_rank(to_rank, "translate", "to_rank")
        offset = int(ptr) - int(self.heap_bases_cpu[from_rank])
        allocator = self.heap.allocator
        if allocator.chunk_of(offset) is None:
            chunks = ", ".join(f"{c.size} bytes at offset {c.va - allocator.base_va}" for c in allocator.chunks)
            raise IrisValueError(f"aperture: iris: translate: address {int(ptr):#x} is not in rank {from_rank}'s "
                                 f"heap (base {int(self.heap_bases_cpu[from_rank]):#x}; chunks: "
                                 f"{chunks or 'none, it was closed'})", code=aperture.ErrorCode.invalid_argument)
        return int(self.heap_bases_cpu[to_rank]) + offset

    # Iris's host SDMA methods need its copy engine, which is always off here: each raises Iris's
    # RuntimeError for that. They take any arguments: Iris's spellings moved (dst_rank, to_rank=).
    def put(self, *args, **kwargs):
        _copy_engine.refuse_while_off("Iris.put")

    def put_tile(self, *args, **kwargs):
        _copy_engine.refuse_while_off("Iris.put_tile")

    def put_tiles(self, *args, **kwargs):
        _copy_engine.refuse_while_off("Iris.put_tiles")

    def quiet(self, *args, **kwargs):
        _copy_engine.refuse_while_off("Iris.quiet")

    def get_copy_engine_ctx(self):
        """The copy engine's context for device operations: None, as in Iris while it is off."""
        return None

    @property
    def copy_engines_device_ctx(self):
        """Iris's SDMA queue descriptors per rank (one Iris version builds them unconditionally):
        AMD-only, an aperture.Error naming the NVIDIA way that is also an AttributeError, so that a
        program probing for it (hasattr, getattr with a default) takes its other path."""
        _amd.refuse("sdma", "ctx.copy_engines_device_ctx", IrisAttributeError)

    # ---- the heap ---------------------------------------------------------------------
    # Iris's private helpers, which its own tests call by their mangled names
    # (shmem._Iris__allocate(n, dtype), shmem._Iris__on_symmetric_heap(t), shmem._Iris__is_valid_device(d)).
    def __allocate(self, num_elements, dtype):
        """``num_elements`` of ``dtype`` from the heap, uninitialised, 1-D."""
        return self.heap.allocate(int(num_elements), dtype)

    def __on_symmetric_heap(self, tensor):
        """True when ``tensor`` lies in the symmetric heap."""
        return self.heap.is_symmetric(tensor)

    def __is_valid_device(self, device):
        """True when heap tensors may be requested with ``device`` (tensor_creation.is_valid_device)."""
        return tensor_creation.is_valid_device(device, self.get_device())

    def is_symmetric(self, tensor):
        """True when ``tensor`` lies in the heap (allocate_symmetric's tensors included)."""
        return self.heap.is_symmetric(tensor)

    def as_symmetric(self, external_tensor):
        """``external_tensor`` itself when it is on the heap, else the heap buffer kept for its
        (shape, dtype), refilled with its contents (a copy; see SymmetricHeap.as_symmetric)."""
        return self.heap.as_symmetric(external_tensor)

    def allocate_symmetric(self, *size, dtype=None):
        """A zeroed heap tensor and its own peer-base table: ``(tensor, peer_bases)``, entry r of
        the int64 ``peer_bases`` being rank r's copy of the tensor (entry ``cur_rank`` its
        data_ptr()). It lies in the heap at the same offset on every rank, as in Iris, so
        ``get_heap_bases()``, the device context and ctx.ccl reach it as they reach ctx.zeros's
        tensors; a kernel may instead translate by ``peer_bases`` alone. Every rank must allocate
        the same tensors in the same order (the heap's rule)."""
        tensor = self.zeros(*size, dtype=dtype)
        return tensor, self.heap.table_of(tensor)

    def symmetric_address_map(self, tensor):
        """aperture's SymmetricAddressMap of the heap's allocation ``tensor`` lies in (the heap's
        own, or the chunk's it grew by); aperture.Error (ValueError) when it is not on the heap."""
        if self.heap.is_symmetric(tensor):
            return self.heap.map_of(tensor)
        raise IrisValueError("aperture: iris: the tensor is not on the symmetric heap; allocate it with "
                             "ctx.zeros/ctx.empty/ctx.allocate_symmetric (or as_symmetric a copy)",
                             code=aperture.ErrorCode.invalid_argument)

    def as_remote(self, tensor, rank):
        """Rank ``rank``'s copy of the symmetric ``tensor``, as a tensor this process can read and
        write directly (a peer mapping; ranks out of load/store reach raise aperture.Error)."""
        self._check_rank(rank, "as_remote", "rank")
        return peer_tensor(self.symmetric_address_map(tensor), tensor, rank)

    # ---- device context ---------------------------------------------------------------
    def get_device_context(self):
        """The int64 tensor DeviceContext.initialize reads: [cur_rank, num_ranks, heap bases...,
        tracing flag, trace words when tracing is enabled], built by aperture.iris's device side
        (_device_context.device_context). ``ctx.tracing.enable()`` rebuilds it: take it after."""
        if self._device_context is None:
            self._build_device_context()
        return self._device_context

    def _build_device_context(self):
        """Builds the context tensor anew (Iris's name; ctx.tracing calls it when it changes)."""
        from . import _device_context

        self._device_context = _device_context.device_context(self)

    # ---- factories (Iris's signatures) ------------------------------------------------
    def empty(self, *size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False,
              pin_memory=False, memory_format=torch.contiguous_format):
        return tensor_creation.empty(self.heap, self.get_device(), size, out=out, dtype=dtype, layout=layout,
                                     device=device, requires_grad=requires_grad, memory_format=memory_format)

    def zeros(self, *size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
        return tensor_creation.zeros(self.heap, self.get_device(), size, out=out, dtype=dtype, layout=layout,
                                     device=device, requires_grad=requires_grad)

    def ones(self, *size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
        return tensor_creation.ones(self.heap, self.get_device(), size, out=out, dtype=dtype, layout=layout,
                                    device=device, requires_grad=requires_grad)

    def full(self, size, fill_value, *, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
        return tensor_creation.full(self.heap, self.get_device(), size, fill_value, out=out, dtype=dtype,
                                    layout=layout, device=device, requires_grad=requires_grad)

    def zeros_like(self, input, *, dtype=None, layout=None, device=None, requires_grad=False,
                   memory_format=torch.preserve_format):
        return tensor_creation.zeros_like(self.heap, self.get_device(), input, dtype=dtype, layout=layout,
                                          device=device, requires_grad=requires_grad, memory_format=memory_format)

    def arange(self, start=0, end=None, step=1, *, out=None, dtype=None, layout=torch.strided, device=None,
               requires_grad=False):
        if end is None:
            start, end = 0, start
        return tensor_creation.arange(self.heap, self.get_device(), start, end, step, out=out, dtype=dtype,
                                      layout=layout, device=device, requires_grad=requires_grad)

    def linspace(self, start, end, steps, out=None, dtype=None, layout=torch.strided, device=None,
                 requires_grad=False):
        return tensor_creation.linspace(self.heap, self.get_device(), start, end, steps, out=out, dtype=dtype,
                                        layout=layout, device=device, requires_grad=requires_grad)

    def randn(self, *size, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
              requires_grad=False, pin_memory=False):
        return tensor_creation.randn(self.heap, self.get_device(), size, generator=generator, out=out, dtype=dtype,
                                     layout=layout, device=device, requires_grad=requires_grad)

    def rand(self, *size, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
             requires_grad=False, pin_memory=False):
        return tensor_creation.rand(self.heap, self.get_device(), size, generator=generator, out=out, dtype=dtype,
                                    layout=layout, device=device, requires_grad=requires_grad)

    def randint(self, *args, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
                requires_grad=False):
        if len(args) == 2:
            (high, size), low = args, 0
        elif len(args) == 3:
            low, high, size = args
        else:
            raise ValueError(f"randint expects 2 or 3 positional arguments, got {len(args)}")
        return tensor_creation.randint(self.heap, self.get_device(), low, high, size, generator=generator, out=out,
                                       dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)

    def uniform(self, size, low=0.0, high=1.0, dtype=torch.float):
        return tensor_creation.uniform(self.heap, self.get_device(), size, low, high, dtype)


def iris(heap_size=1 << 30, allocator_type="torch", *, team=None, copy_engine=None, enable_copy_engine=None):
    """Iris's constructor: a symmetric heap of ``heap_size`` bytes on every rank (collective).
    ``allocator_type``: Iris's "torch" (aperture's default provider), "vmem" (cuda-vmm),
    "vmem_chunked" (cuda-vmm, and a tensor's block comes back when it dies), "torch_symm_mem"
    (torch symmetric memory), or any aperture provider name. ``team`` (aperture's) overrides where
    the ranks come from. ``copy_engine``/``enable_copy_engine`` (and IRIS_ENABLE_COPY_ENGINE):
    Iris's SDMA switch, off by default; asking for it raises, since it is AMD-only."""
    return Iris(heap_size, allocator_type, team=team, copy_engine=copy_engine, enable_copy_engine=enable_copy_engine)


# The names Iris's iris/iris.py binds beside the host class: the device functions, ``__translate``
# and TraceEvent (``from iris.iris import load``).
from ._device import *  # noqa: E402,F401,F403
from .tracing import TraceEvent  # noqa: E402,F401

globals()["__translate"] = translate  # Iris's name; a module-level dunder, importable by name


def __getattr__(name):
    # DeviceContext is the device side's (aperture.iris._device_context); imported when asked for,
    # so the host works on its own.
    if name == "DeviceContext":
        from ._device_context import DeviceContext

        return DeviceContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
