"""``iris.ccl.ReduceOp``, the mapping of every spelling of a reduction to aperture's names, and
the tile index helpers Iris's ccl kernels import from here (aperture.iris._tile's)."""

from enum import IntEnum

import aperture

from .._tile import chiplet_transform_chunked, compute_tile_indices, compute_tile_offsets  # noqa: F401


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
