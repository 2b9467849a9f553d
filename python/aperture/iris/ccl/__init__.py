"""``iris.ccl``: Iris's collectives, on aperture's Communicator.

``ctx.ccl.all_reduce/all_gather/all_to_all/reduce_scatter/broadcast/barrier/reduce/scatter/gather``
have Iris's signatures and tensor shapes and run as aperture Communicator calls on torch's current
stream (zero-copy for heap tensors); ``send/recv/isend/irecv/batch_isend_irecv`` run through the
heap (ccl.p2p); ``all_gather_gemm``, ``gemm_reduce_scatter`` and ``all_reduce_rmsnorm`` are the
device side's fused kernels (ccl._fused); ``MoEDispatcher`` and its routing helpers are
ccl.moe_dispatch and ccl.moe_utils (heap stores of token rows). ``group`` None (or a group of every rank) is the
Communicator's; a subgroup (a torch.distributed ProcessGroup of some of the ranks) runs the
collective as torch.distributed's on that group (ccl.subgroup). ``async_op`` is accepted: every
call is ordered on the stream, so later work on the stream sees its result either way.
"""

import weakref

import torch

import aperture

from .._errors import IrisTypeError, IrisValueError
from . import p2p
from .config import AUTOTUNE, Config
from .moe_dispatch import DispatchHandle, MoEDispatchConfig, MoEDispatcher
from .moe_utils import ExptAssignment, TopkResult, make_expt_assignment, make_expt_dict_uniform, topk
from .p2p import P2PConfig, P2POp, P2PState, P2PWork
from .subgroup import subgroup_of
from .utils import ReduceOp, op_name


class _NotGiven:
    """broadcast's default for a parameter the caller did not name, so that one given both by
    position and by keyword is refused; it reads as the parameter's own default (None, False)."""

    def __bool__(self):
        return False

    def __repr__(self):
        return "<not given>"


class _SourceDefault(int):
    """broadcast's default src: rank 0, and distinguishable from an explicit src=0."""


_NOT_GIVEN = _NotGiven()
_SRC_DEFAULT = _SourceDefault(0)


def _refuse(call, detail, code=None):
    raise aperture.Error(f"aperture: iris.ccl.{call}: {detail}", code=code or aperture.ErrorCode.invalid_argument)


def _check_config(call, config):
    """An IrisTypeError (aperture.Error and TypeError) unless ``config`` is an iris.ccl.Config or None."""
    if config is not None and not isinstance(config, Config):
        raise IrisTypeError(f"aperture: iris.ccl.{call}: config must be an iris.ccl.Config or None, got "
                            f"{type(config).__name__}", code=aperture.ErrorCode.invalid_argument)


class Workspace:
    """What a preamble returns and the call takes back. aperture's Communicator keeps its own
    scratch, so this records what the workspace was prepared for: the output's shape and dtype and,
    for the variants whose Iris kernels keep one lock or flag per tile (PER_TILE), the tile count
    of the preamble's Config. A later call whose Config makes more tiles is refused as Iris refuses
    it (its arrays would be too small), so a program behaves the same on both."""

    def __init__(self, shape=(), dtype=None, tiles=None):
        self.shape, self.dtype, self.tiles = tuple(shape), dtype, tiles

    def matches(self, tensor):
        return tuple(tensor.shape) == self.shape and tensor.dtype == self.dtype

    @classmethod
    def for_output(cls, workspace, output_tensor):
        """``workspace`` when it was made for this output's shape and dtype, else a new one."""
        return workspace if isinstance(workspace, cls) and workspace.matches(output_tensor) else \
            cls(output_tensor.shape, output_tensor.dtype)


class AllReduceWorkspace(Workspace):
    """Iris's ``AllReduceWorkspace`` (what all_reduce_preamble and all_reduce return), with its
    fields in its order, each readable and settable. Values are aperture's: ``variant`` the
    Config's all_reduce_variant ("two_shot" without one), ``shape``/``dtype`` the output's,
    ``num_rings`` the Config's all_reduce_num_rings; ``ring_buffer``, ``flags`` and ``locks`` are
    None and ``flags_per_tile`` 0, as aperture's Communicator keeps its own scratch and no per-tile
    flags or locks (``tiles`` still records a "spinlock"/"ring" preamble's tile count, for Iris's
    "array too small" refusal). ``prepared`` is True after a preamble; a call neither needs nor
    clears it (Iris clears it after atomic/spinlock/one_shot calls to re-run its preamble, whose
    zeroing aperture does not need), and a program may set it (Iris's graph-capture probe does)."""

    def __init__(self, variant="", shape=(), dtype=None, ring_buffer=None, flags=None, locks=None, num_rings=1,
                 flags_per_tile=0, prepared=False, tiles=None):
        super().__init__(shape, dtype, tiles)
        self.variant, self.ring_buffer, self.flags, self.locks = variant, ring_buffer, flags, locks
        self.num_rings, self.flags_per_tile, self.prepared = num_rings, flags_per_tile, prepared

    def __repr__(self):
        return (f"AllReduceWorkspace(variant={self.variant!r}, shape={self.shape}, dtype={self.dtype}, "
                f"ring_buffer={self.ring_buffer!r}, flags={self.flags!r}, locks={self.locks!r}, "
                f"num_rings={self.num_rings}, flags_per_tile={self.flags_per_tile}, prepared={self.prepared})")

    @staticmethod
    def variant_of(config):
        """The variant a workspace names for this Config: its all_reduce_variant in lower case, or
        Iris's default, two_shot."""
        variant = getattr(config, "all_reduce_variant", None)
        return variant.lower() if isinstance(variant, str) else "two_shot"

    def describe(self, output_tensor, config):
        """Sets the fields for this output and Config (Iris's preamble sets the same ones)."""
        self.shape, self.dtype = tuple(output_tensor.shape), output_tensor.dtype
        self.variant = self.variant_of(config)
        rings = getattr(config, "all_reduce_num_rings", 1)
        self.num_rings = rings if isinstance(rings, int) else 1
        return self


# (call, variant) -> the per-tile array Iris's kernels of that variant keep in the workspace.
PER_TILE = {("all_reduce", "spinlock"): "Lock", ("all_reduce", "ring"): "Flags",
            ("reduce_scatter", "ring_chunked"): "Flags"}


def tile_count(shape, config):
    """Iris's tiles of an (M, N) tensor (N: every dimension after the first) under ``config``."""
    rows = shape[0] if len(shape) else 1
    cols = 1
    for extent in shape[1:]:
        cols *= extent
    return -(-rows // config.block_size_m) * -(-cols // config.block_size_n)


def _variant(call, config):
    return getattr(config, f"{call}_variant", None) if config is not None else None


def _check_tiles(call, workspace, config):
    kind = PER_TILE.get((call, _variant(call, config)))
    held = getattr(workspace, "tiles", None)
    if kind is None or held is None:
        return
    needed = tile_count(workspace.shape, config)
    if needed > held:
        raise IrisValueError(
            f"aperture: iris.ccl.{call}: {kind} array too small: the workspace holds {held} tiles, and this call's "
            f"Config (block_size_m={config.block_size_m}, block_size_n={config.block_size_n}) makes {needed} of the "
            f"{workspace.shape} output; call {call}_preamble with this Config, or pass workspace=None",
            code=aperture.ErrorCode.invalid_argument)


_ELEMENT_SPLITS = ("send_counts", "send_displs", "recv_counts", "recv_displs")
_COLUMN_SPLITS = ("output_split_sizes", "input_split_sizes")


def _is_tensor(value):
    return isinstance(value, torch.Tensor)


def _fused_ops():
    from . import _fused  # the device side's (aperture.iris.ccl._fused)

    return _fused


class CCL:
    """``ctx.ccl``: the collectives of one Iris context."""

    def __init__(self, ctx):
        # Weak: the context owns this object, and a cycle would keep its heap (GPU memory) alive
        # until a garbage collection, past the end of a test that made a context of its own.
        self._iris = weakref.proxy(ctx)
        self._num_ranks = ctx.num_ranks  # fixed for the context's life; read here, not through the proxy per call
        self._comm = None
        self._scratch = {}
        self._workspace = None
        self._workspace_of = None

    def _communicator(self):
        if self._comm is None:
            self._comm = self._iris._comm()
        return self._comm

    def _group(self, group, call):
        """The Subgroup that runs a call on ``group`` (ccl.subgroup), or None for the whole world."""
        return subgroup_of(self._iris, group, call)

    def _refuse_subgroup(self, group, call):
        if self._group(group, call) is not None:
            _refuse(call, "a subgroup (group= with some of the ranks) is not supported here; call it on every rank "
                          "with group=None")

    def _same_shape(self, call, out, inp):
        if out.numel() != inp.numel():
            _refuse(call, f"output has {out.numel()} elements and input {inp.numel()}; give both one shape")

    def _buffer(self, like, numel):
        """Scratch for results a rank does not keep (reduce's non-roots, scatter's, gather's)."""
        key = (like.dtype, like.device, numel)
        buf = self._scratch.get(key)
        if buf is None:
            buf = torch.empty(numel, dtype=like.dtype, device=like.device)
            self._scratch[key] = buf
        return buf

    # ---- collectives ----------------------------------------------------------------------
    def all_reduce_preamble(self, output_tensor, input_tensor, config=None, workspace=None):
        """An AllReduceWorkspace for this output and Config: ``workspace`` itself when it is one
        (its fields set again, as Iris's preamble does), else a new one."""
        if not isinstance(workspace, AllReduceWorkspace):
            workspace = AllReduceWorkspace()
        workspace.describe(output_tensor, config)
        workspace.tiles = tile_count(workspace.shape, config) if ("all_reduce", _variant("all_reduce", config)) \
            in PER_TILE else None
        workspace.prepared = True
        return workspace

    def all_reduce(self, output_tensor, input_tensor, op=None, group=None, async_op=False, config=None, workspace=None):
        """output = the reduction (default sum) of every rank's input. Returns the workspace."""
        if workspace is not None and config is not None:
            _check_tiles("all_reduce", workspace, config)
        if output_tensor is not input_tensor:
            self._same_shape("all_reduce", output_tensor, input_tensor)
        sub = None if group is None else self._group(group, "all_reduce")
        if sub is not None:
            sub.all_reduce(output_tensor, input_tensor, op)
        else:
            if output_tensor is not input_tensor and output_tensor.data_ptr() != input_tensor.data_ptr():
                output_tensor.copy_(input_tensor)
            (self._comm or self._communicator()).all_reduce(output_tensor,
                                                            "sum" if op is None else op_name(op, "all_reduce"))
        if workspace is None:
            if self._workspace_of is not output_tensor:  # the usual loop reuses one tensor: no new object
                self._workspace = AllReduceWorkspace(prepared=True).describe(output_tensor, config)
                self._workspace_of = output_tensor
            elif self._workspace.variant != AllReduceWorkspace.variant_of(config):
                self._workspace.describe(output_tensor, config)
            workspace = self._workspace
        return workspace

    def all_gather_preamble(self, output_tensor, input_tensor, config=None, workspace=None):
        return Workspace.for_output(workspace, output_tensor)

    def all_gather(self, output_tensor, input_tensor, group=None, async_op=False, config=None, workspace=None):
        """output (world_size * M, N) = every rank's input (M, N), stacked by rank along dim 0. Either
        may lie off the heap (the Communicator stages it), as Iris's newest accepts."""
        sub = None if group is None else self._group(group, "all_gather")
        ranks = self._num_ranks if sub is None else sub.size
        out_shape, in_shape = output_tensor.shape, input_tensor.shape
        if len(in_shape) > 1 and len(out_shape) > 1 and (out_shape[1] != in_shape[1] or
                                                        out_shape[0] != in_shape[0] * ranks):
            raise IrisValueError(f"aperture: iris.ccl.all_gather: Output tensor shape {tuple(out_shape[:2])} does not "
                                 f"match expected shape {(in_shape[0] * ranks, in_shape[1])}: (world_size "
                                 "* M, N) for an (M, N) input", code=aperture.ErrorCode.invalid_argument)
        if sub is not None:
            sub.all_gather(output_tensor, input_tensor)
        else:
            (self._comm or self._communicator()).all_gather(output_tensor, input_tensor)

    def reduce_scatter(self, output_tensor, input_tensor, op=None, group=None, async_op=False, config=None,
                       workspace=None):
        """The reduction of every rank's input, by the output's size:
        - output of the input's size (Iris's layout, (M, N) in and out): this rank's tiles of the
          reduction in place, which Iris's kernel assigns by its Config; aperture writes the whole
          reduction there (every rank's tiles included: one all_reduce), so any assignment of tiles
          reads right;
        - otherwise this rank's 1/world_size share, flattened (chunk ``rank`` of the input's
          elements, torch's reduce_scatter_tensor layout), in output's first numel/world_size elements."""
        if workspace is not None and config is not None:
            _check_tiles("reduce_scatter", workspace, config)
        sub = self._group(group, "reduce_scatter")
        if sub is not None:
            sub.reduce_scatter(output_tensor, input_tensor, op)
            return
        n = self._iris.num_ranks
        if input_tensor.numel() % n:
            _refuse("reduce_scatter", f"input has {input_tensor.numel()} elements, not a multiple of the {n} ranks")
        share = input_tensor.numel() // n
        if output_tensor.numel() < share:
            _refuse("reduce_scatter", f"output has {output_tensor.numel()} elements; it needs at least {share}")
        if output_tensor.numel() == input_tensor.numel() and n > 1:
            if output_tensor.data_ptr() != input_tensor.data_ptr():
                output_tensor.copy_(input_tensor.view(output_tensor.shape))
            self._communicator().all_reduce(output_tensor, op_name(op, "reduce_scatter"))
            return
        out = output_tensor.view(-1)[:share] if output_tensor.numel() != share else output_tensor
        self._communicator().reduce_scatter(out, input_tensor, op_name(op, "reduce_scatter"))

    def all_to_all(self, output_tensor, input_tensor, group=None, async_op=False, config=None):
        """input and output (M, N * world_size): output's column block r = rank r's input column block
        ``rank`` (Iris's layout: a rank's share is N columns of every row)."""
        self._same_shape("all_to_all", output_tensor, input_tensor)
        sub = self._group(group, "all_to_all")
        if sub is not None:
            sub.all_to_all(output_tensor, input_tensor)
            return
        n = self._iris.num_ranks
        if input_tensor.dim() < 2 or input_tensor.shape[0] == 1:
            self._communicator().all_to_all(output_tensor, input_tensor)
            return
        rows, cols = input_tensor.shape[0], input_tensor.shape[-1]
        if cols % n:
            _refuse("all_to_all", f"input has {cols} columns, not a multiple of the {n} ranks")
        # Rank-major chunks for the Communicator (its blocks are contiguous), then back to columns.
        send = input_tensor.reshape(rows, n, cols // n).transpose(0, 1).contiguous()
        received = self._buffer(input_tensor, input_tensor.numel()).view(send.shape)
        self._communicator().all_to_all(received, send)
        output_tensor.view(rows, n, cols // n).copy_(received.transpose(0, 1))

    def all_to_all_v(self, output_tensor, input_tensor, *splits, group=None, async_op=False, config=None, **named):
        """Iris's two forms of the variable all-to-all, told apart by their arguments:
        - elements, ``(output, input, send_counts, send_displs, recv_counts, recv_displs)``;
        - columns, ``(output, input, output_split_sizes, input_split_sizes)``."""
        if group is not None:
            self._refuse_subgroup(group, "all_to_all_v")
        for names, run in ((_ELEMENT_SPLITS, self._all_to_all_v_elements), (_COLUMN_SPLITS, self._all_to_all_v_columns)):
            if set(named) <= set(names) and len(splits) + len(named) == len(names):
                given = dict(zip(names, splits), **named)
                return run(output_tensor, input_tensor, *(given[name] for name in names), group=group,
                           async_op=async_op, config=config)
        _refuse("all_to_all_v", f"give either {', '.join(_ELEMENT_SPLITS)} (element counts and offsets) or "
                                f"{', '.join(_COLUMN_SPLITS)} (columns); got {len(splits)} positional and "
                                f"{sorted(named)} named")

    def _all_to_all_v_columns(self, output_tensor, input_tensor, output_split_sizes, input_split_sizes, group=None,
                              async_op=False, config=None):
        """Column blocks (torch's all_to_all_single with split sizes, on columns): input
        (M, sum(input_split_sizes)) sends its j-th block of ``input_split_sizes[j]`` columns to rank
        j; output (M, sum(output_split_sizes)) receives ``output_split_sizes[i]`` columns from rank
        i, blocks in rank order. Runs as the element form on the transposed tensors, where a column
        block is contiguous."""
        for role, tensor, splits in (("input", input_tensor, input_split_sizes),
                                     ("output", output_tensor, output_split_sizes)):
            if tensor.dim() != 2 or tensor.shape[1] != sum(int(s) for s in splits):
                _refuse("all_to_all_v", f"the {role} must be 2-D with sum({role}_split_sizes) = "
                                        f"{sum(int(s) for s in splits)} columns, got shape {tuple(tensor.shape)}")
        rows = input_tensor.shape[0]
        if output_tensor.shape[0] != rows:
            _refuse("all_to_all_v", f"output has {output_tensor.shape[0]} rows and input {rows}; give both the same")

        def spans(splits):
            counts = [int(s) * rows for s in splits]
            return counts, [sum(counts[:j]) for j in range(len(counts))]

        send_counts, send_displs = spans(input_split_sizes)
        recv_counts, recv_displs = spans(output_split_sizes)
        columns_out = output_tensor.new_empty((output_tensor.shape[1], rows))  # (columns, M): a block is contiguous
        self._all_to_all_v_elements(columns_out, input_tensor.t().contiguous(), send_counts, send_displs, recv_counts,
                                    recv_displs, group=group, async_op=async_op, config=config)
        output_tensor.copy_(columns_out.t())

    def _all_to_all_v_elements(self, output_tensor, input_tensor, send_counts, send_displs, recv_counts, recv_displs,
                               group=None, async_op=False, config=None):
        """Variable all-to-all over the tensors' elements (flattened; torch's all_to_all_single with
        splits): ``send_counts[j]`` elements from ``send_displs[j]`` of input go to rank j, and rank
        i's land at ``recv_displs[i]`` of output (``recv_counts[i]`` of them: what rank i sends
        here). One all_gather of every rank's counts (so that every rank checks that each pair
        agrees, and all refuse together), then one Communicator all_to_all of blocks padded to the
        largest count."""
        if group is not None:
            self._refuse_subgroup(group, "all_to_all_v")
        n = self._iris.num_ranks
        lists = {"send_counts": send_counts, "send_displs": send_displs, "recv_counts": recv_counts,
                 "recv_displs": recv_displs}
        for name, values in lists.items():
            if len(values) != n or any(int(v) < 0 for v in values):
                _refuse("all_to_all_v", f"{name} must hold {n} counts or offsets of 0 or more (one per rank), "
                                        f"got {list(values)}")
        send = [(int(d), int(c)) for d, c in zip(send_displs, send_counts)]
        recv = [(int(d), int(c)) for d, c in zip(recv_displs, recv_counts)]
        for role, tensor, spans in (("input", input_tensor, send), ("output", output_tensor, recv)):
            if any(d + c > tensor.numel() for d, c in spans):
                _refuse("all_to_all_v", f"the {role}'s spans {spans} (offset, count) run past its {tensor.numel()} "
                                        "elements")
        if output_tensor.dtype != input_tensor.dtype:
            _refuse("all_to_all_v", f"output is {output_tensor.dtype} and input {input_tensor.dtype}; give one dtype")
        mine = torch.tensor([c for _, c in send] + [c for _, c in recv], dtype=torch.int64, device=input_tensor.device)
        every = torch.empty((n, 2 * n), dtype=torch.int64, device=input_tensor.device)
        self._communicator().all_gather(every, mine)
        counts = every.cpu().tolist()  # row r: rank r's send counts, then its receive counts
        for sender in range(n):
            for receiver in range(n):
                sent, expected = counts[sender][receiver], counts[receiver][n + sender]
                if sent != expected:
                    _refuse("all_to_all_v", f"rank {sender} sends {sent} elements to rank {receiver}, which expects "
                                            f"{expected} (its recv_counts[{sender}]); give each pair the same count")
        width = max(max(row[:n]) for row in counts)
        if width == 0:
            return
        flat_in, flat_out = input_tensor.reshape(-1), output_tensor.view(-1)
        staged = torch.zeros((n, width), dtype=input_tensor.dtype, device=input_tensor.device)
        for j, (d, c) in enumerate(send):
            staged[j, :c].copy_(flat_in[d:d + c])
        received = torch.empty_like(staged)
        self._communicator().all_to_all(received, staged)
        for i, (d, c) in enumerate(recv):
            flat_out[d:d + c].copy_(received[i, :c])

    def broadcast(self, tensor, *args, src=_SRC_DEFAULT, group=_NOT_GIVEN, async_op=_NOT_GIVEN, config=_NOT_GIVEN,
                  input_tensor=None):
        """Iris's two forms. In place, ``broadcast(tensor, src=0, group=None, async_op=False,
        config=None)``: every rank's tensor becomes rank src's. From one tensor to another,
        ``broadcast(output_tensor, input_tensor, src=0, group=None, async_op=False, config=None)``:
        every rank's output becomes rank src's input (the other ranks' inputs are not read)."""
        if args or input_tensor is not None:  # positional arguments, or the two-tensor form
            if args and _is_tensor(args[0]):
                if input_tensor is not None:
                    raise TypeError("broadcast() got multiple values for argument 'input_tensor'")
                input_tensor, args = args[0], args[1:]
            if len(args) > 4:
                raise TypeError(f"broadcast() takes at most 6 positional arguments ({len(args) + 2} given)")
            # As Python would for a named signature: a parameter given both ways is refused.
            given = (src, group, async_op, config)
            for name, keyword in zip(("src", "group", "async_op", "config"), given[:len(args)]):
                if keyword is not _NOT_GIVEN and keyword is not _SRC_DEFAULT:
                    raise TypeError(f"broadcast() got multiple values for argument '{name}'")
            src, group, async_op, config = args + given[len(args):]
            if input_tensor is not None:
                self._iris._check_rank(src, "ccl.broadcast", "src")
                self._same_shape("broadcast", tensor, input_tensor)
                if int(src) == self._iris.cur_rank and tensor.data_ptr() != input_tensor.data_ptr():
                    tensor.copy_(input_tensor.view(tensor.shape))
        # The in-place call by keywords, the common one, comes straight here: nothing above runs.
        if group is not None and group is not _NOT_GIVEN:
            sub = self._group(group, "broadcast")
            if sub is not None:
                sub.broadcast(tensor, 0 if src is _SRC_DEFAULT else src)
                return
        if src.__class__ is not int or not 0 <= src < self._num_ranks:
            if src is not _SRC_DEFAULT:
                self._iris._check_rank(src, "ccl.broadcast", "src")
            src = int(src)
        (self._comm or self._communicator()).broadcast(tensor, src)

    def reduce_preamble(self, output_tensor, input_tensor, root=0, config=None, workspace=None):
        self._iris._check_rank(root, "ccl.reduce_preamble", "root")
        return Workspace.for_output(workspace, output_tensor)

    def reduce(self, output_tensor, input_tensor=None, dst=0, op=None, group=None, async_op=False, config=None,
               workspace=None, root=None):
        """On the root, output = the reduction of every rank's input; other ranks' outputs are
        untouched. Iris's versions name the root ``dst`` or ``root``; both are taken. One tensor
        (``reduce(t, dst=0)``, as Iris's benchmark calls it) is reduced in place."""
        if input_tensor is None:
            input_tensor = output_tensor
        if root is not None and dst not in (0, root):
            _refuse("reduce", f"dst={dst} and root={root} name different roots; give one")
        dst = dst if root is None else root
        self._same_shape("reduce", output_tensor, input_tensor)
        sub = self._group(group, "reduce")
        if sub is not None:
            sub.reduce(output_tensor, input_tensor, dst, op)
            return
        self._iris._check_rank(dst, "ccl.reduce", "dst")
        # Every rank reduces into its scratch (the Communicator wants one layout on every rank), and
        # the root copies the result out.
        target = self._buffer(input_tensor, input_tensor.numel())
        target.copy_(input_tensor.reshape(-1))
        self._communicator().all_reduce(target, op_name(op, "reduce"))
        if self._iris.cur_rank == int(dst):
            output_tensor.copy_(target.view(output_tensor.shape))

    def scatter(self, output_tensor, input_tensor, src=0, group=None, async_op=False, config=None):
        """output (M, N) = row block ``rank`` of rank src's input (world_size * M, N); input must be
        allocated on every rank (Iris's rule)."""
        sub = self._group(group, "scatter")
        if sub is not None:
            sub.scatter(output_tensor, input_tensor, src)
            return
        self._iris._check_rank(src, "ccl.scatter", "src")
        n = self._iris.num_ranks
        if input_tensor.numel() != n * output_tensor.numel():
            _refuse("scatter", f"input has {input_tensor.numel()} elements; with {n} ranks it needs {n} x output's "
                               f"{output_tensor.numel()}")
        # all_to_all delivers rank src's block for this rank as block src of the result.
        received = self._buffer(input_tensor, input_tensor.numel())
        self._communicator().all_to_all(received, input_tensor)
        share = output_tensor.numel()
        output_tensor.view(-1).copy_(received[int(src) * share:(int(src) + 1) * share])

    def gather(self, output_tensor, input_tensor, dst=0, group=None, async_op=False, config=None):
        """On rank dst, output (world_size * M, N) = every rank's input, by rank; others untouched."""
        sub = self._group(group, "gather")
        if sub is not None:
            sub.gather(output_tensor, input_tensor, dst)
            return
        self._iris._check_rank(dst, "ccl.gather", "dst")
        target = self._buffer(input_tensor, output_tensor.numel())  # one layout on every rank
        self._communicator().all_gather(target, input_tensor)
        if self._iris.cur_rank == int(dst):
            output_tensor.copy_(target.view(output_tensor.shape))

    def barrier(self, group=None, async_op=False, config=None):
        """Every rank's stream waits here for every other (a device-side barrier, capturable in a
        CUDA graph); ``async_op`` is accepted: it is on the stream either way. ``config`` (Iris's
        ``iris.ccl.barrier`` takes one and uses none) must be a Config or None, and steers nothing."""
        if config is not None:
            _check_config("barrier", config)
        sub = None if group is None else self._group(group, "barrier")
        if sub is not None:
            sub.barrier()
        else:
            (self._comm or self._communicator()).barrier()

    # ---- point to point -----------------------------------------------------------------
    def init_p2p(self, max_numel=2**20, dtype=None, config=None):
        return p2p.init_p2p(self._iris, max_numel=max_numel, dtype=dtype, config=config)

    def send(self, tensor, dst, group=None, tag=0, config=None, p2p_state=None):
        p2p.send(self._iris, tensor, dst, p2p_state, group, tag)

    def recv(self, tensor, src, group=None, tag=0, config=None, p2p_state=None):
        p2p.recv(self._iris, tensor, src, p2p_state, group, tag)

    def isend(self, tensor, dst, group=None, tag=0, config=None, p2p_state=None):
        return p2p.isend(self._iris, tensor, dst, p2p_state, group, tag)

    def irecv(self, tensor, src, group=None, tag=0, config=None, p2p_state=None):
        return p2p.irecv(self._iris, tensor, src, p2p_state, group, tag)

    def sendrecv(self, send_tensor, recv_tensor, dst, src, group=None, tag=0, config=None, p2p_state=None):
        works = p2p.batch_isend_irecv(self._iris, [P2POp(p2p.isend, send_tensor, dst, group, tag),
                                                   P2POp(p2p.irecv, recv_tensor, src, group, tag)], p2p_state)
        for work in works:
            work.wait()

    def batch_isend_irecv(self, p2p_op_list, p2p_state=None):
        return p2p.batch_isend_irecv(self._iris, p2p_op_list, p2p_state)

    # ---- fused operations (the device side's) -------------------------------------------------
    def all_gather_gemm(self, *args, **kwargs):
        return _fused_ops().all_gather_gemm(self._iris, *args, **kwargs)

    def all_gather_gemm_preamble(self, *args, **kwargs):
        return _fused_ops().all_gather_gemm_preamble(self._iris, *args, **kwargs)

    def gemm_reduce_scatter(self, *args, **kwargs):
        return _fused_ops().gemm_reduce_scatter(self._iris, *args, **kwargs)

    def gemm_reduce_scatter_preamble(self, *args, **kwargs):
        return _fused_ops().gemm_reduce_scatter_preamble(self._iris, *args, **kwargs)

    def all_reduce_rmsnorm(self, *args, **kwargs):
        return _fused_ops().all_reduce_rmsnorm(self._iris, *args, **kwargs)

    def all_reduce_rmsnorm_preamble(self, *args, **kwargs):
        return _fused_ops().all_reduce_rmsnorm_preamble(self._iris, *args, **kwargs)


__all__ = ["AUTOTUNE", "Config", "ReduceOp", "CCL", "Workspace", "AllReduceWorkspace", "P2PConfig", "P2POp", "P2PState",
           "P2PWork", "p2p",
           "MoEDispatcher", "MoEDispatchConfig", "DispatchHandle", "ExptAssignment", "make_expt_dict_uniform",
           "make_expt_assignment", "topk", "TopkResult"]
