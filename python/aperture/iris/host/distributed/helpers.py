"""``iris.host.distributed.helpers``: the newest Iris's host helpers over torch.distributed, with Iris's
signatures, defaults and return types: ``distributed_allgather`` (1-D) and
``distributed_allgather_multidim`` (any shape, flattened per rank) return NumPy arrays with one row
per rank; ``distributed_broadcast_scalar`` / ``distributed_broadcast_tensor`` return the root's
value (a Python scalar / a NumPy array); ``distributed_barrier``, ``init_distributed`` and
``extract_group_info`` (rank, size, start and stride of a process group); and
``distributed_device_barrier``, a barrier kernel on the symmetric heap's flags.

They are torch.distributed's, not aperture's Communicator's: a program calls them where it has
initialised torch.distributed itself (Iris's examples and test runner do), and every one that needs
it raises aperture.Error, a RuntimeError as Iris raises, when it is not initialised. Tensors
travel on the current GPU under NCCL and on the host otherwise, as in Iris.

Differs from Iris where Iris would fail: a dtype the backend cannot carry in a tensor collective
(gloo: int16, uint16, uint32, uint64; NCCL: bool, int16, the unsigned types above uint8, complex)
travels as a pickled object in every helper, not only in ``distributed_allgather``; a strided
tensor is made contiguous first; a root without a value makes every rank raise, not only the root
(the others would wait forever). ``distributed_device_barrier`` uses aperture.iris's device
functions (system-scope release/acquire), not Iris's pointer arithmetic: each rank adds to its count
in every member's copy of the flags and polls its own copy, where Iris polls the peers' copies, so
it also reaches ranks of other nodes. It is launched without Iris's kernel-artifact tracing.
"""

import contextlib
import logging

import numpy as np
import torch
import triton
import triton.language as tl

import aperture

from ..._device import atomic_add as _atomic_add
from ..._device import translate as _translate
from ..._errors import IrisValueError
from ...logging import log_with_rank

__all__ = [
    "distributed_allgather",
    "distributed_allgather_multidim",
    "distributed_barrier",
    "distributed_broadcast_scalar",
    "distributed_broadcast_tensor",
    "distributed_device_barrier",
    "extract_group_info",
    "init_distributed",
]

# Iris's own collectives import its pointer-translation device function from here.
_translate_ptr = _translate


class _NotImplemented(aperture.Error, NotImplementedError):
    """A process group Iris does not support either (ranks not evenly strided)."""


def _dist(caller):
    """torch.distributed, initialised; else the error Iris raises (a RuntimeError)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise aperture.Error(
            f"aperture: iris.host.distributed.helpers.{caller}: torch.distributed is not initialised; call "
            "torch.distributed.init_process_group first (these helpers are torch.distributed's, as in Iris)",
            code=aperture.ErrorCode.invalid_argument)
    return dist


def _backend(dist):
    try:
        return str(dist.get_backend()).lower()
    except Exception:  # noqa: BLE001 - a backend without a name is treated as a host one, as in Iris
        return "gloo"


def _device(dist):
    # NCCL moves GPU tensors only; every other backend (gloo, mpi, "cpu:gloo,cuda:nccl" for CPU
    # tensors) moves host tensors.
    if _backend(dist) == "nccl" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


_NCCL_DTYPES = {torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
                torch.float64}
_GLOO_REFUSES = {torch.int16, torch.uint16, torch.uint32, torch.uint64}  # "Invalid scalar type" (torch 2.11)


def _carried(dtype, backend):
    """Whether a tensor collective of ``backend`` moves ``dtype`` (otherwise: an object collective)."""
    if dtype is None:
        return False
    if backend == "nccl":
        return dtype in _NCCL_DTYPES
    if "gloo" in backend:
        return dtype not in _GLOO_REFUSES
    return True


def _torch_dtype(np_dtype):
    """The torch dtype of a NumPy dtype, or None where torch has none (strings, objects)."""
    try:
        return torch.from_numpy(np.zeros((), dtype=np_dtype)).dtype
    except (TypeError, ValueError):
        return None


def _log(message, dist):
    log_with_rank(logging.DEBUG, message, dist.get_rank(), dist.get_world_size())


def distributed_allgather(data):
    """Every rank's 1-D ``data`` (a NumPy array or anything ``np.asarray`` takes, of the same length
    and dtype on every rank) as a NumPy array of shape (world_size, len(data)), row r rank r's.
    Not 1-D: AssertionError (Iris's check)."""
    dist = _dist("distributed_allgather")
    data = np.asarray(data)
    if data.ndim != 1:
        raise AssertionError(f"distributed_allgather takes a 1-D array, not one of shape {data.shape}")
    world = dist.get_world_size()
    backend = _backend(dist)
    _log(f"distributed_allgather: shape={data.shape} dtype={data.dtype} backend={backend} world_size={world}", dist)
    dtype = _torch_dtype(data.dtype)
    if not _carried(dtype, backend):
        rows = [None] * world
        dist.all_gather_object(rows, data)
        return np.stack(rows, axis=0)
    mine = torch.from_numpy(np.ascontiguousarray(data)).to(_device(dist))
    rows = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(rows, mine)
    return torch.stack(rows, dim=0).cpu().numpy()


def distributed_allgather_multidim(data):
    """Every rank's ``data`` (a tensor, NumPy array or nested list, of the same shape and dtype on
    every rank) as a NumPy array of shape (world_size, data's element count): row r is rank r's
    tensor flattened in row-major order. A bfloat16 tensor fails in the conversion to NumPy (which
    has no bfloat16), as in Iris."""
    dist = _dist("distributed_allgather_multidim")
    world = dist.get_world_size()
    mine = torch.as_tensor(data)
    if not _carried(mine.dtype, _backend(dist)):
        rows = [None] * world
        dist.all_gather_object(rows, mine.detach().cpu().numpy())
        return np.stack([np.asarray(r).reshape(-1) for r in rows], axis=0)
    mine = mine.to(_device(dist)).contiguous()  # torch's collectives take contiguous tensors only
    rows = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(rows, mine)
    return torch.stack(rows, dim=0).view(world, -1).cpu().numpy()


def distributed_broadcast_scalar(value=None, root=0):
    """Rank ``root``'s ``value`` on every rank (the others' ``value`` is ignored). A number or bool
    comes back as the Python scalar (``.item()``) of its NumPy dtype; a value torch cannot hold (a
    string, an object) or the backend cannot carry comes back as the root's object itself. No value
    on the root: IrisValueError (a ValueError, as Iris raises) on every rank."""
    dist = _dist("distributed_broadcast_scalar")
    rank = dist.get_rank()
    backend = _backend(dist)
    # The dtype first, so that every rank takes the same path; None says the root has no value.
    np_value = np.array(value) if rank == root and value is not None else None
    meta = [np_value.dtype if np_value is not None else None]
    dist.broadcast_object_list(meta, src=root)
    if meta[0] is None:
        raise IrisValueError(f"aperture: distributed_broadcast_scalar: the root (rank {root}) gave no value")
    dtype = _torch_dtype(meta[0])
    if not _carried(dtype, backend):
        box = [value if rank == root else None]
        dist.broadcast_object_list(box, src=root)
        return box[0]
    if rank != root:
        np_value = np.zeros((), dtype=meta[0])
    t = torch.from_numpy(np.ascontiguousarray(np_value)).to(_device(dist))
    dist.broadcast(t, src=root)
    return t.cpu().item()


def distributed_broadcast_tensor(value_to_broadcast=None, root=0):
    """Rank ``root``'s tensor (or array, or anything ``torch.as_tensor`` takes) on every rank, as a
    NumPy array of its shape and dtype (the others' argument is ignored). No value on the root:
    IrisValueError (a ValueError, as Iris raises) on every rank."""
    dist = _dist("distributed_broadcast_tensor")
    rank = dist.get_rank()
    backend = _backend(dist)
    _log(f"distributed_broadcast_tensor: src={root} rank={rank}", dist)
    tensor = None
    meta = [None, None]
    if rank == root and value_to_broadcast is not None:
        tensor = torch.as_tensor(value_to_broadcast)
        meta = [tensor.shape, tensor.dtype]
    dist.broadcast_object_list(meta, src=root)
    shape, dtype = meta
    if dtype is None:
        raise IrisValueError(f"aperture: distributed_broadcast_tensor: the root (rank {root}) gave no value")
    if not _carried(dtype, backend):
        box = [np.asarray(tensor.detach().cpu().numpy()) if rank == root else None]
        dist.broadcast_object_list(box, src=root)
        return box[0]
    if rank != root:
        tensor = torch.empty(shape, dtype=dtype)
    tensor = tensor.to(_device(dist)).contiguous()
    dist.broadcast(tensor, src=root)
    return tensor.cpu().numpy()


def extract_group_info(group, rank, num_ranks):
    """``(rank_in_group, rank_global, world_size, rank_start, rank_stride)`` of this process (global
    rank ``rank``) in ``group``, a torch.distributed ProcessGroup whose ranks are evenly spaced
    (start, start + stride, ...). ``group=None`` is every rank: ``(rank, rank, num_ranks, 0, 1)``,
    without torch.distributed. A group when torch.distributed is not initialised: aperture.Error (a
    RuntimeError); ``rank`` not in the group: aperture.Error; ranks not evenly spaced: an
    aperture.Error that is NotImplementedError; a repeated rank: IrisValueError (ValueError)."""
    if group is None:
        return rank, rank, num_ranks, 0, 1
    dist = _dist("extract_group_info")
    members = list(dist.get_process_group_ranks(group))
    if rank not in members:
        raise aperture.Error(f"aperture: rank {rank} is not in the process group (its ranks: {members})",
                             code=aperture.ErrorCode.invalid_argument)
    start, stride = members[0], 1
    if len(members) > 1:
        gaps = {b - a for a, b in zip(members, members[1:])}
        if len(gaps) != 1:
            raise _NotImplemented(f"aperture: process group ranks {members} are not evenly spaced; only groups "
                                  "of ranks start, start + stride, ... are supported (as in Iris)",
                                  code=aperture.ErrorCode.invalid_argument)
        stride = gaps.pop()
        if stride == 0:
            raise IrisValueError(f"aperture: process group ranks {members} repeat a rank")
    return members.index(rank), rank, len(members), start, stride


def distributed_barrier(group=None):
    """torch.distributed's barrier over ``group`` (None: every rank), on the host."""
    dist = _dist("distributed_barrier")
    _log(f"distributed_barrier: group={group}", dist)
    dist.barrier(group=group)


@triton.jit
def _ranks_meet(flags, rank, world: tl.constexpr, rank_start, rank_stride, heap_bases,
                MAX_SPINS: tl.constexpr = 1_000_000_000):
    # A barrier of the ranks rank_start + i * rank_stride. flags[r], in every member's copy, counts
    # the barriers rank r has entered: r adds 1 to it in each member's copy (release: r's earlier
    # writes precede the add), then waits on its own copy until every member's count reaches its
    # own (acquire: their writes precede what follows). Only r raises flags[r], so no host epoch
    # is needed and the kernel can be replayed in a CUDA graph; polls stay local, and an add to a
    # rank of another node goes through the heap's proxy (aperture.iris._device).
    entered = _atomic_add(flags + rank, 1, rank, rank, heap_bases, sem="release", scope="sys") + 1
    for i in range(world):  # a constexpr bound: the interpreter takes no runtime loop bound (docs/IRIS.md)
        peer = rank_start + i * rank_stride
        if peer != rank:
            _atomic_add(flags + rank, 1, rank, peer, heap_bases, sem="release", scope="sys")
    for i in range(world):
        peer = rank_start + i * rank_stride
        seen = tl.atomic_add(flags + peer, 0, sem="acquire", scope="sys")
        spins = 0
        while seen < entered:
            seen = tl.atomic_add(flags + peer, 0, sem="acquire", scope="sys")
            spins += 1
            tl.device_assert(spins < MAX_SPINS, "device barrier: a peer never arrived")


@triton.jit
def _device_barrier_kernel(flags, rank, world: tl.constexpr, rank_start, rank_stride, heap_bases):
    _ranks_meet(flags, rank, world, rank_start, rank_stride, heap_bases)


def distributed_device_barrier(flags, group, rank, num_ranks, heap_bases):
    """A barrier of the ranks of ``group`` (None: all ``num_ranks``) enqueued as one kernel on the
    current stream, so it can be captured in a CUDA graph; no host wait. ``flags`` is an int32
    heap tensor of one element per global rank, zero before the first call and then left to this
    function (element r counts rank r's barriers, in every member's copy); ``heap_bases`` the context's
    table (``ctx.get_heap_bases()``); ``rank`` this process's global rank. Under Triton's
    interpreter (a host heap) the kernel runs on the host like any other."""
    _, rank_global, world, start, stride = extract_group_info(group, rank, num_ranks)
    with torch.cuda.device(flags.device) if flags.device.type == "cuda" else contextlib.nullcontext():
        _device_barrier_kernel[(1,)](flags, rank_global, world, start, stride, heap_bases, num_warps=1)


def init_distributed():
    """``(None, rank, world_size)`` of the initialised torch.distributed job (None where an explicit
    communicator would be: torch.distributed keeps its state globally). It initialises nothing
    itself: without torch.distributed, aperture.Error (a RuntimeError, as Iris raises)."""
    dist = _dist("init_distributed")
    return None, dist.get_rank(), dist.get_world_size()
