"""Collectives on a subgroup: ``group=`` a torch.distributed ProcessGroup of some of the ranks.

aperture's Communicator spans every rank of the context, and a subgroup's ranks call without the
others, so a call on a proper subgroup runs as torch.distributed's collective on that group (NCCL's
on GPU tensors; gloo's through host copies), in Iris's layouts: what ``ctx.ccl`` gives on the whole
world, with the group's size for the world's and the group's own numbering for ``src`` and ``dst``
(Iris's "source rank within the group"). Iris hands its large messages to torch.distributed the
same way. A group that holds every rank of the context is the world: the Communicator runs it.
The group's ranks are the context's: aperture.iris takes its ranks from torch.distributed when it
is initialised (aperture.iris._ranks).
"""

import torch

import aperture

from .utils import op_name


def _refuse(call, detail):
    raise aperture.Error(f"aperture: iris.ccl.{call}: {detail}", code=aperture.ErrorCode.invalid_argument)


def subgroup_of(iris, group, call):
    """The Subgroup ``group`` names, or None when it is None or every rank of ``iris`` (the
    world, which the Communicator serves)."""
    if group is None:
        return None
    import torch.distributed as dist

    if not dist.is_initialized():
        _refuse(call, "group= is a torch.distributed ProcessGroup, and torch.distributed is not initialised; "
                      "pass group=None for every rank")
    try:
        members = [int(r) for r in dist.get_process_group_ranks(group)]
    except (RuntimeError, ValueError, TypeError, AttributeError) as error:
        _refuse(call, f"group= must be a torch.distributed ProcessGroup (from dist.new_group) or None: {error}")
    if members == list(range(iris.num_ranks)):
        return None
    if iris.cur_rank not in members:
        _refuse(call, f"rank {iris.cur_rank} is not in the group (ranks {members}); only the group's ranks call "
                      "its collectives")
    return Subgroup(group, members, members.index(iris.cur_rank))


class Subgroup:
    """Some of the context's ranks, as torch.distributed's ProcessGroup ``group`` holds them:
    ``members`` (global ranks, in the group's order) and this rank's place among them."""

    def __init__(self, group, members, rank):
        self.group, self.members, self.rank, self.size = group, members, rank, len(members)

    def _global(self, local, call, name):
        if isinstance(local, bool) or not hasattr(local, "__index__"):
            _refuse(call, f"{name}={local!r} must be a rank of the group, an int in [0, {self.size})")
        if not 0 <= int(local) < self.size:
            _refuse(call, f"{name}={local} is out of range: the group has {self.size} ranks ({self.members}), "
                          f"numbered 0..{self.size - 1} within it")
        return self.members[int(local)]

    def _device(self, tensor):
        """Where the group's backend takes ``tensor``: host memory for a gloo-only group (gloo moves
        no GPU tensor in reduce_scatter, scatter or gather), else the tensor's own device."""
        import torch.distributed as dist

        return torch.device("cpu") if dist.get_backend(self.group) == "gloo" else tensor.device

    def _flat(self, tensor):
        """A contiguous flat copy of ``tensor`` on ``_device(tensor)``."""
        return tensor.reshape(-1).to(device=self._device(tensor), copy=True).contiguous()

    def _empty(self, like, numel):
        return torch.empty(numel, dtype=like.dtype, device=self._device(like))

    # ---- reductions -----------------------------------------------------------------------
    def _reduce_op(self, op, call):
        import torch.distributed as dist

        name = op_name(op, call)
        # avg is a sum divided afterwards: gloo has no AVG, NCCL's rounds integers its own way.
        return name, {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
                      "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[name]

    def _averaged(self, name, tensor):
        if name == "avg":
            if tensor.is_floating_point():
                tensor.div_(self.size)
            else:
                tensor.div_(self.size, rounding_mode="trunc")
        return tensor

    def all_reduce(self, output, input, op):
        import torch.distributed as dist

        name, reduce_op = self._reduce_op(op, "all_reduce")
        work = self._flat(input)
        dist.all_reduce(work, op=reduce_op, group=self.group)
        output.copy_(self._averaged(name, work).view(output.shape))

    def reduce_scatter(self, output, input, op):
        """Iris's two layouts, as ``ctx.ccl.reduce_scatter`` on the world: an output of the input's
        size gets the whole reduction; a smaller one this rank's share (chunk ``rank`` of the
        flattened reduction) in its first elements."""
        import torch.distributed as dist

        if input.numel() % self.size:
            _refuse("reduce_scatter", f"input has {input.numel()} elements, not a multiple of the group's "
                                      f"{self.size} ranks")
        share = input.numel() // self.size
        if output.numel() == input.numel():
            self.all_reduce(output, input, op)
            return
        if output.numel() < share:
            _refuse("reduce_scatter", f"output has {output.numel()} elements; it needs at least {share}")
        name, reduce_op = self._reduce_op(op, "reduce_scatter")
        mine = self._empty(input, share)
        dist.reduce_scatter_tensor(mine, self._flat(input), op=reduce_op, group=self.group)
        output.view(-1)[:share].copy_(self._averaged(name, mine))

    def reduce(self, output, input, dst, op):
        """On member dst, output = the reduction of every member's input; the others' untouched."""
        import torch.distributed as dist

        root = self._global(dst, "reduce", "dst")
        name, reduce_op = self._reduce_op(op, "reduce")
        work = self._flat(input)
        dist.reduce(work, dst=root, op=reduce_op, group=self.group)
        if self.members[self.rank] == root:
            output.copy_(self._averaged(name, work).view(output.shape))

    # ---- data movement --------------------------------------------------------------------
    def all_gather(self, output, input):
        """output (size * M, N) = every member's input (M, N), stacked in the group's order."""
        import torch.distributed as dist

        if output.numel() != self.size * input.numel():
            _refuse("all_gather", f"output has {output.numel()} elements; the group's {self.size} ranks need "
                                  f"{self.size} x input's {input.numel()}")
        everyone = self._empty(input, output.numel())
        dist.all_gather_into_tensor(everyone, self._flat(input), group=self.group)
        output.copy_(everyone.view(output.shape))

    def all_to_all(self, output, input):
        """As ``ctx.ccl.all_to_all`` with the group for the world: output's column block j is member
        j's column block ``rank`` ((M, N * size) tensors; flat blocks for a single row)."""
        import torch.distributed as dist

        if output.numel() != input.numel():
            _refuse("all_to_all", f"output has {output.numel()} elements and input {input.numel()}; give both one shape")
        flat = input.dim() < 2 or input.shape[0] == 1
        rows, cols = (1, input.numel()) if flat else (input.numel() // input.shape[-1], input.shape[-1])
        if cols % self.size:
            _refuse("all_to_all", f"input has {cols} columns, not a multiple of the group's {self.size} ranks")
        width = cols // self.size
        # Member-major blocks: block j is what goes to member j.
        send = self._flat(input.reshape(rows, self.size, width).transpose(0, 1))
        if send.device.type == "cpu":  # gloo has no all-to-all: gather every member's blocks, keep ours
            everyone = self._empty(input, self.size * send.numel())
            dist.all_gather_into_tensor(everyone, send, group=self.group)
            received = everyone.view(self.size, self.size, rows * width)[:, self.rank]
        else:
            received = torch.empty_like(send)
            dist.all_to_all_single(received, send, group=self.group)
        output.copy_(received.reshape(self.size, rows, width).transpose(0, 1).reshape(output.shape))

    def broadcast(self, tensor, src):
        import torch.distributed as dist

        root = self._global(src, "broadcast", "src")
        work = self._flat(tensor)
        dist.broadcast(work, src=root, group=self.group)
        tensor.copy_(work.view(tensor.shape))

    def scatter(self, output, input, src):
        """output (M, N) = row block ``rank`` of member src's input (size * M, N)."""
        import torch.distributed as dist

        root = self._global(src, "scatter", "src")
        if input.numel() != self.size * output.numel():
            _refuse("scatter", f"input has {input.numel()} elements; the group's {self.size} ranks need "
                               f"{self.size} x output's {output.numel()}")
        mine = self._empty(output, output.numel())
        blocks = list(self._flat(input).view(self.size, -1).unbind(0)) if self.members[self.rank] == root else None
        dist.scatter(mine, blocks, src=root, group=self.group)
        output.copy_(mine.view(output.shape))

    def gather(self, output, input, dst):
        """On member dst, output (size * M, N) = every member's input, in the group's order."""
        import torch.distributed as dist

        root = self._global(dst, "gather", "dst")
        at_root = self.members[self.rank] == root
        if at_root and output.numel() != self.size * input.numel():
            _refuse("gather", f"output has {output.numel()} elements; the group's {self.size} ranks need "
                              f"{self.size} x input's {input.numel()}")
        everyone = self._empty(input, self.size * input.numel()) if at_root else None
        dist.gather(self._flat(input), list(everyone.view(self.size, -1).unbind(0)) if at_root else None, dst=root,
                    group=self.group)
        if at_root:
            output.copy_(everyone.view(output.shape))

    def barrier(self):
        import torch.distributed as dist

        dist.barrier(group=self.group)
