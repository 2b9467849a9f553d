"""``iris.ccl.ReduceOp``, the mapping of every spelling of a reduction to aperture's names, the
tile index helpers Iris's ccl kernels import from here (aperture.iris._tile's) and
``inline_device_barrier``, the barrier a collective kernel of one's own holds between its phases."""

from enum import IntEnum

import triton
import triton.language as tl

import aperture

from .._tile import chiplet_transform_chunked, compute_tile_indices, compute_tile_offsets  # noqa: F401
from ..host.distributed.helpers import _ranks_meet


class ReduceOp(IntEnum):
    """Iris's reductions, with Iris's values (an IntEnum: ``op=0`` is SUM), and aperture's AVG after
    them. The bitwise ones are Iris's names; aperture's Communicator does not reduce bitwise, so a
    collective given one raises aperture.Error."""

    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3
    BAND = 4
    BOR = 5
    BXOR = 6
    AVG = 7


_NAMES = {ReduceOp.SUM: "sum", ReduceOp.PRODUCT: "prod", ReduceOp.MIN: "min", ReduceOp.MAX: "max",
          ReduceOp.AVG: "avg"}


def op_name(op, call):
    """"sum", "prod", "min", "max" or "avg" for None (sum), a ReduceOp or its int value, torch.distributed's
    ReduceOp or a name."""
    if op is None:
        return "sum"
    if isinstance(op, int) and not isinstance(op, bool) and op in ReduceOp._value2member_map_:
        op = ReduceOp(op)
    if isinstance(op, ReduceOp):
        text = _NAMES.get(op, op.name.lower())
    else:
        text = str(getattr(op, "name", op)).rsplit(".", 1)[-1].lower()
        text = {"product": "prod", "average": "avg"}.get(text, text)
    if text in ("sum", "prod", "min", "max", "avg"):
        return text
    bitwise = " (aperture's collectives do not reduce bitwise)" if text in ("band", "bor", "bxor") else ""
    raise aperture.Error(f"aperture: iris.ccl.{call}: reduction {op!r} is not supported{bitwise}; give "
                         "ReduceOp.SUM, PRODUCT, MIN, MAX or AVG", code=aperture.ErrorCode.invalid_argument)


def extract_group_info(group, ctx):
    """Iris's ``(rank_in_group, rank_global, world_size, rank_start, rank_stride)`` of this rank in
    ``group`` (None: every rank of ``ctx``). A group is read from torch.distributed (ranks evenly
    strided, as Iris requires); aperture.iris's collectives themselves take only the whole world."""
    rank, ranks = int(ctx.get_rank()), int(ctx.get_num_ranks())
    if group is None:
        return rank, rank, ranks, 0, 1
    import torch.distributed as dist

    if not dist.is_initialized():
        raise RuntimeError("iris.ccl.extract_group_info: a ProcessGroup needs torch.distributed initialised "
                           "(torch.distributed.init_process_group)")
    members = list(dist.get_process_group_ranks(group))
    if rank not in members:
        raise RuntimeError(f"iris.ccl.extract_group_info: rank {rank} is not in the group (ranks {members})")
    strides = {b - a for a, b in zip(members, members[1:])}
    if len(strides) > 1:
        raise NotImplementedError(f"iris.ccl.extract_group_info: group ranks {members} are not evenly strided")
    stride = strides.pop() if strides else 1
    if stride == 0:
        raise ValueError(f"iris.ccl.extract_group_info: group ranks {members} repeat a rank")
    return members.index(rank), rank, len(members), members[0], stride


@triton.jit
def inline_device_barrier(pid, barrier_flags_ptr, wg_done_ptr, barrier_sense_ptr, heap_bases, iris_rank: tl.constexpr,
                          world_size: tl.constexpr, rank_start: tl.constexpr, rank_stride: tl.constexpr,
                          COMM_SMS: tl.constexpr):
    """A barrier of every program of this kernel and every rank of the group, inside the kernel:
    what any program of any member stored before it (to its own heap or a peer's) is visible to
    every program of every member after it. Iris's signature and buffers:

    - ``pid``: this program's index, 0 .. COMM_SMS - 1; all COMM_SMS programs must be resident
      at once (a persistent grid), as in Iris;
    - ``barrier_flags_ptr``: a heap tensor of one integer per global rank, zero before the first
      call (as ``distributed_device_barrier``'s flags: element r counts rank r's barriers);
    - ``wg_done_ptr``, ``barrier_sense_ptr``: two int32 words of this rank's memory, zero before
      the first call, then left to the barrier (an arrival count and a sense that flips each time);
    - the group: ranks ``rank_start + i * rank_stride`` for i < ``world_size``.

    Program 0 waits for every program's arrival, holds the barrier between ranks (aperture's: each
    rank adds to its count in every member's copy and polls its own copy, so ranks of other
    nodes are reached through the heap's proxy), then flips the sense that releases the others.
    Under Triton's interpreter the programs run one after another: there COMM_SMS must be 1."""
    tl.debug_barrier()  # every thread's stores before this program's arrival
    sense = tl.load(barrier_sense_ptr, volatile=True)
    if pid == 0:
        # System scope: the arrival orders the stores other programs made to peers' memory too.
        arrived = tl.atomic_add(wg_done_ptr, 1, sem="acq_rel", scope="sys") + 1
        while arrived < COMM_SMS:
            arrived = tl.atomic_add(wg_done_ptr, 0, sem="acquire", scope="sys")
        tl.atomic_xchg(wg_done_ptr, 0, sem="relaxed", scope="gpu")  # no program reads it again this time
        _ranks_meet(barrier_flags_ptr, iris_rank, world_size, rank_start, rank_stride, heap_bases)
        tl.atomic_xchg(barrier_sense_ptr, 1 - sense, sem="release", scope="sys")
    else:
        tl.atomic_add(wg_done_ptr, 1, sem="release", scope="sys")
        while tl.atomic_add(barrier_sense_ptr, 0, sem="acquire", scope="sys") == sense:
            pass
    tl.debug_barrier()  # every thread of the program reads after the acquire
