"""``iris.distributed.process_group``: a torch.distributed ProcessGroup whose collectives run on
aperture.iris's context, ``ctx.ccl`` (aperture's Communicator), over the context's symmetric heap.

Two ways in, as in Iris:

- over a default group that is already up (any backend)::

      dist.init_process_group("gloo")        # or "nccl"
      pg = IrisProcessGroup.from_existing(heap_size=1 << 30)
      dist.all_reduce(t, group=pg)           # or pg.allreduce([t], opts).wait()

- as the job's only backend (``import iris.distributed`` registers the name "iris")::

      dist.init_process_group(backend="iris")
      dist.all_reduce(t)                     # every torch.distributed collective on aperture

The context (``aperture.iris.iris(heap_size)``; ``IRIS_HEAP_SIZE`` overrides ``heap_size``) is
made at the group's first collective, on every rank together. Its ranks come from
torch.distributed (aperture.iris._ranks), whose own exchange runs on a gloo group when the
default group is this one, so nothing waits on a collective of the group being built.

Every call stages the caller's tensors through one region of the heap taken once, at that
first call (the heap is a bump allocator that frees nothing, so per-call allocations would use
it up); a tensor larger than the region moves in pieces. The region is reused by every call:
aperture's zero-copy collectives end with a barrier, so no peer still reads a rank's buffer when
the call returns. Every rank stages alike, which the zero-copy forms require. The Work a call
returns is already complete: the data is in place (on a GPU, on torch's current stream).
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

import aperture

from .._errors import IrisValueError

BACKEND_NAME = "iris"
_DEFAULT_HEAP = 1 << 30
_ALIGN = 256  # the heap's own alignment: every staging slice starts on it

# torch.distributed's reduction -> aperture's name for it (all the Communicator has).
_OPS = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "avg"}
_SUPPORTED_OPS = "SUM, PRODUCT, MIN, MAX, AVG"
# dtypes the Communicator reduces in their own type.
_REDUCIBLE = (torch.int8, torch.uint8, torch.int32, torch.uint32, torch.int64, torch.uint64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2)
_REDUCIBLE_NAMES = ("int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64, "
                    "float8_e4m3fn, float8_e5m2; complex64/complex128 with SUM or AVG; bool with SUM, PRODUCT, "
                    "MIN or MAX")


class IrisNotImplementedError(aperture.Error, NotImplementedError):
    """Something the group does not do (a reduction, a dtype, a call): an aperture.Error, and the
    NotImplementedError Iris raises for what its group does not do."""


def _unsupported(call, detail):
    raise IrisNotImplementedError(f"aperture: iris.distributed.{call}: {detail}",
                                  code=aperture.ErrorCode.invalid_argument)


def _bad(call, detail):
    raise IrisValueError(f"aperture: iris.distributed.{call}: {detail}", code=aperture.ErrorCode.invalid_argument)


def _completed(result):
    """A torch Work that is already done, holding ``result``."""
    future = torch.futures.Future()
    future.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(future)


def _default_timeout():
    """The default group's timeout (torch's helper takes the backend since 2.x; older ones took nothing)."""
    c10d = dist.distributed_c10d
    try:
        return c10d._get_default_timeout(dist.get_backend())
    except TypeError:
        return c10d._get_default_timeout()


def _op_name(op, call):
    """aperture's name of a torch.distributed reduction (a ReduceOp, its RedOpType, or None for SUM)."""
    if op is None:
        return "sum"
    kind = getattr(op, "op", op)  # ReduceOp instance -> RedOpType
    name = getattr(kind, "name", None) or str(kind).rsplit(".", 1)[-1]
    found = _OPS.get(str(name).upper())
    if found is None:
        _unsupported(call, f"reduction {name} is not supported; aperture's Communicator reduces with "
                           f"{_SUPPORTED_OPS}")
    return found


def _flat(tensor):
    """A contiguous 1-D view of ``tensor``'s data (a copy when it is not contiguous)."""
    return tensor.contiguous().view(-1)


def _bytes(flat):
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


def _reduced_view(flat):
    """The flat tensor the Communicator reduces in place of ``flat`` (the same memory)."""
    if flat.is_complex():
        return torch.view_as_real(flat).view(-1)  # real and imaginary parts add independently
    if flat.dtype == torch.bool:
        return flat.view(torch.uint8)  # 0 or 1 per element
    return flat


def _reduced_op(dtype, op, call):
    """The Communicator's op for ``op`` on ``dtype``, or a refusal naming both."""
    if dtype in _REDUCIBLE:
        return op
    if dtype in (torch.complex64, torch.complex128) and op in ("sum", "avg"):
        return op
    if dtype == torch.bool and op in ("sum", "max", "prod", "min"):
        return "max" if op in ("sum", "max") else "min"  # logical or / and
    _unsupported(call, f"{dtype} with reduction {op} is not supported; the reductions take {_REDUCIBLE_NAMES}")


class _Output:
    """Where results go: straight into the tensor's memory when it is contiguous, else into a
    contiguous temporary copied into it at ``finish``."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.flat = tensor.view(-1) if tensor.is_contiguous() else torch.empty(tensor.numel(), dtype=tensor.dtype,
                                                                                device=tensor.device)

    def finish(self):
        if not self.tensor.is_contiguous():
            self.tensor.copy_(self.flat.view(self.tensor.shape))


class IrisProcessGroup(ProcessGroup):
    """A torch.distributed ProcessGroup of every rank whose collectives run on aperture.iris's
    context (``ctx.ccl``, aperture's Communicator) through its symmetric heap.

    ``prefix_store``, ``rank``, ``world_size``, ``timeout``: what torch.distributed gives a
    backend's constructor. ``heap_size``: bytes of the context's heap (``IRIS_HEAP_SIZE``, when
    set, wins); the collectives stage through it, in pieces when a tensor is larger."""

    def __init__(self, prefix_store, rank: int, world_size: int, timeout: timedelta, heap_size: int = _DEFAULT_HEAP):
        super().__init__(rank, world_size)
        self._prefix_store = prefix_store
        self._timeout = timeout
        self._heap_size = int(os.environ.get("IRIS_HEAP_SIZE", heap_size))
        if self._heap_size <= 0:
            _bad("IrisProcessGroup", f"heap_size must be positive, got {self._heap_size}")
        self._ctx = None
        self._arena = None  # the heap bytes every call stages through
        self._making = False

    @classmethod
    def from_existing(cls, heap_size: int = _DEFAULT_HEAP):
        """A group over the default group torch.distributed already has (every rank of it)."""
        if not (dist.is_available() and dist.is_initialized()):
            raise aperture.Error("aperture: iris.distributed.IrisProcessGroup.from_existing: torch.distributed is not "
                                 "initialised; call torch.distributed.init_process_group(...) first, or "
                                 "init_process_group(backend=\"iris\") to make this the job's backend",
                                 code=aperture.ErrorCode.invalid_argument)
        return cls(dist.distributed_c10d._get_default_store(), dist.get_rank(), dist.get_world_size(),
                   _default_timeout(), heap_size=heap_size)

    # ---- the context ----------------------------------------------------------------------
    def _ensure_ctx(self):
        """The aperture.iris context, made at the first collective (collective on every rank)."""
        if self._ctx is not None:
            return self._ctx
        if self._making:
            raise aperture.Error("aperture: iris.distributed: a collective of the iris group was called while its "
                                 "context is being made (the rank exchange must not run on this group)",
                                 code=aperture.ErrorCode.internal)
        self._making = True
        try:
            from ..iris import iris as make_context

            ctx = make_context(self._heap_size)
            if (ctx.cur_rank, ctx.num_ranks) != (self.rank(), self.size()):
                raise aperture.Error(
                    f"aperture: iris.distributed: the group is rank {self.rank()} of {self.size()}, but the context's "
                    f"job says rank {ctx.cur_rank} of {ctx.num_ranks}; make the group over every rank of the job",
                    code=aperture.ErrorCode.mismatch)
            usable = self._heap_size - ctx.heap.offset
            usable -= usable % _ALIGN
            if usable < 2 * _ALIGN:
                _bad("IrisProcessGroup", f"the heap has {usable} bytes left for staging; give a heap_size of at least "
                                         f"{2 * _ALIGN} bytes (IRIS_HEAP_SIZE)")
            self._arena = ctx.heap.allocate(usable, torch.uint8)
            self._ctx = ctx
        finally:
            self._making = False
        return ctx

    def _slices(self, *nbytes):
        """Consecutive aligned pieces of the staging region, of these byte counts."""
        out, at = [], 0
        for n in nbytes:
            out.append(self._arena[at:at + n])
            at += -(-n // _ALIGN) * _ALIGN
        return out

    def _piece(self, itemsize, buffers_per_element):
        """The most elements per piece when a piece takes ``buffers_per_element`` elements of staging
        (each buffer rounded up to the alignment)."""
        room = self._arena.numel() - _ALIGN * 2  # two buffers' worth of alignment slack
        return max(1, room // (itemsize * buffers_per_element))

    # ---- the staged collectives (flat tensors; every rank calls alike) --------------------
    def _all_reduce_flat(self, src, dst, op):
        ctx = self._ensure_ctx()
        n, size = src.numel(), src.element_size()
        step = self._piece(size, 1)
        for a in range(0, n, step):
            b = min(n, a + step)
            (buf,) = self._slices((b - a) * size)
            buf = buf.view(src.dtype)
            buf.copy_(src[a:b])
            ctx.ccl.all_reduce(buf, buf, op=op)
            if dst is not None:
                dst[a:b].copy_(buf)

    def _gather_bytes(self, src, dst_blocks):
        """dst_blocks[r] (bytes) = rank r's src (bytes); dst_blocks may be None (results dropped)."""
        ctx = self._ensure_ctx()
        world, n = self.size(), src.numel()
        step = self._piece(1, world + 1)
        for a in range(0, n, step):
            b = min(n, a + step)
            inp, out = self._slices(b - a, world * (b - a))
            inp.copy_(src[a:b])
            ctx.ccl.all_gather(out, inp)
            if dst_blocks is not None:
                rows = out.view(world, b - a)
                for r in range(world):
                    dst_blocks[r][a:b].copy_(rows[r])

    def _exchange(self, src_blocks, dst, call, op=None, n=None):
        """Per-rank blocks of ``n`` elements: reduce-scatter (``op`` given; dst = this rank's reduced
        block) or all-to-all (dst: a list of blocks, dst[r] = rank r's block for this rank; an entry
        may be None). ``src_blocks`` None: this rank sends nothing that is read (scatter's non-roots)."""
        ctx = self._ensure_ctx()
        world = self.size()
        like = dst if op is not None else next(b for b in src_blocks or dst if b is not None)
        size = like.element_size()
        step = self._piece(size, 2 * world if op is None else world + 1)
        for a in range(0, n, step):
            b = min(n, a + step)
            c = b - a
            inp, out = self._slices(world * c * size, (c if op is not None else world * c) * size)
            inp, out = inp.view(like.dtype), out.view(like.dtype)
            if src_blocks is not None:
                rows = inp.view(world, c)
                for r in range(world):
                    rows[r].copy_(src_blocks[r][a:b])
            if op is not None:
                ctx.ccl.reduce_scatter(out, inp, op=op)
                dst[a:b].copy_(out)
            else:
                ctx.ccl.all_to_all(out, inp)
                rows = out.view(world, c)
                for r in range(world):
                    if dst[r] is not None:
                        dst[r][a:b].copy_(rows[r])

    def _broadcast_bytes(self, data, root):
        ctx = self._ensure_ctx()
        n = data.numel()
        step = self._piece(1, 1)
        mine = self.rank() == root
        for a in range(0, n, step):
            b = min(n, a + step)
            (buf,) = self._slices(b - a)
            if mine:
                buf.copy_(data[a:b])
            ctx.ccl.broadcast(buf, src=root)
            if not mine:
                data[a:b].copy_(buf)

    # ---- checks -----------------------------------------------------------------------------
    def _one(self, tensors, call, what="tensors"):
        if len(tensors) != 1:
            _unsupported(call, f"{what} holds {len(tensors)} tensors; the group takes one per call (one device "
                               "per rank)")
        return tensors[0]

    def _root(self, root, call):
        if not 0 <= int(root) < self.size():
            _bad(call, f"root rank {root} is out of range for this {self.size()}-rank group")
        return int(root)

    def _same_kind(self, call, tensors, like):
        for t in tensors:
            if t.dtype != like.dtype:
                _bad(call, f"a tensor is {t.dtype} and another {like.dtype}; give one dtype")

    def _per_rank_list(self, call, tensors, numel, like, role):
        if len(tensors) != self.size():
            _bad(call, f"{role} holds {len(tensors)} tensors; give one per rank ({self.size()})")
        self._same_kind(call, tensors, like)
        for i, t in enumerate(tensors):
            if t.numel() != numel:
                _bad(call, f"{role}[{i}] has {t.numel()} elements and the tensor it pairs with {numel}; give each "
                           "the same number of elements")

    # ---- torch.distributed's collectives ----------------------------------------------------
    def allreduce(self, tensors, opts=None):
        call = "allreduce"
        tensor = self._one(tensors, call)
        op = _reduced_op(tensor.dtype, _op_name(getattr(opts, "reduceOp", None), call), call)
        out = _Output(tensor)
        self._all_reduce_flat(_reduced_view(_flat(tensor)), _reduced_view(out.flat), op)
        out.finish()
        return _completed(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        for t in tensors:
            self.allreduce([t], opts)
        return _completed(tensors)

    def broadcast(self, tensors, opts=None):
        call = "broadcast"
        tensor = self._one(tensors, call)
        root = self._root(getattr(opts, "rootRank", 0), call)
        out = _Output(tensor)
        if self.rank() == root and not tensor.is_contiguous():
            out.flat.copy_(tensor.reshape(-1))
        self._broadcast_bytes(_bytes(out.flat), root)
        if self.rank() != root:
            out.finish()
        return _completed(tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        call = "allgather"
        tensor = self._one(input_tensors, call, "input_tensors")
        outputs = self._one(output_tensors, call, "output_tensors")
        self._per_rank_list(call, outputs, tensor.numel(), tensor, "output_tensors[0]")
        outs = [_Output(t) for t in outputs]
        self._gather_bytes(_bytes(_flat(tensor)), [_bytes(o.flat) for o in outs])
        for o in outs:
            o.finish()
        return _completed(output_tensors)

    def _allgather_base(self, output_tensor, input_tensor, opts=None):
        call = "_allgather_base"
        self._same_kind(call, [output_tensor], input_tensor)
        n = input_tensor.numel()
        if output_tensor.numel() != self.size() * n:
            _bad(call, f"output has {output_tensor.numel()} elements; with {self.size()} ranks and an input of {n} "
                       f"it needs {self.size() * n}")
        out = _Output(output_tensor)
        flat = _bytes(out.flat)
        width = n * input_tensor.element_size()
        self._gather_bytes(_bytes(_flat(input_tensor)), [flat[r * width:(r + 1) * width] for r in range(self.size())])
        out.finish()
        return _completed([output_tensor])

    def allgather_into_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        for o, i in zip(output_tensors, input_tensors):
            self._allgather_base(o, i, opts)
        return _completed(output_tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        call = "reduce_scatter"
        output = self._one(output_tensors, call, "output_tensors")
        inputs = self._one(input_tensors, call, "input_tensors")
        self._per_rank_list(call, inputs, output.numel(), output, "input_tensors[0]")
        op = _reduced_op(output.dtype, _op_name(getattr(opts, "reduceOp", None), call), call)
        out = _Output(output)
        dst = _reduced_view(out.flat)
        self._exchange([_reduced_view(_flat(t)) for t in inputs], dst, call, op=op, n=dst.numel())
        out.finish()
        return _completed(output_tensors)

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts=None):
        call = "_reduce_scatter_base"
        self._same_kind(call, [output_tensor], input_tensor)
        n = output_tensor.numel()
        if input_tensor.numel() != self.size() * n:
            _bad(call, f"input has {input_tensor.numel()} elements; with {self.size()} ranks and an output of {n} it "
                       f"needs {self.size() * n}")
        op = _reduced_op(output_tensor.dtype, _op_name(getattr(opts, "reduceOp", None), call), call)
        src = _reduced_view(_flat(input_tensor))
        out = _Output(output_tensor)
        dst = _reduced_view(out.flat)
        m = dst.numel()  # elements per rank in the reduced type (complex: twice n)
        self._exchange([src[r * m:(r + 1) * m] for r in range(self.size())], dst, call, op=op, n=m)
        out.finish()
        return _completed([output_tensor])

    def reduce_scatter_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        for o, i in zip(output_tensors, input_tensors):
            self._reduce_scatter_base(o, i, opts)
        return _completed(output_tensors)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        call = "alltoall"
        world = self.size()
        for role, tensors in (("input_tensors", input_tensors), ("output_tensors", output_tensors)):
            if len(tensors) != world:
                _bad(call, f"{role} holds {len(tensors)} tensors; give one per rank ({world})")
        like = input_tensors[0]
        self._same_kind(call, list(input_tensors) + list(output_tensors), like)
        sizes = {t.numel() for t in list(input_tensors) + list(output_tensors)}
        outs = [_Output(t) for t in output_tensors]
        if len(sizes) == 1:
            n = sizes.pop() * like.element_size()
            self._exchange([_bytes(_flat(t)) for t in input_tensors], [_bytes(o.flat) for o in outs], call, n=n)
        else:  # blocks of different sizes: the variable all-to-all, whose counts every pair must agree on
            send = torch.cat([_bytes(_flat(t)) for t in input_tensors])
            recv = torch.empty(sum(t.numel() * t.element_size() for t in output_tensors), dtype=torch.uint8,
                               device=like.device)
            self._all_to_all_v(send, recv, [t.numel() * t.element_size() for t in input_tensors],
                               [t.numel() * t.element_size() for t in output_tensors])
            at = 0
            for o in outs:
                k = o.flat.numel() * o.flat.element_size()
                _bytes(o.flat).copy_(recv[at:at + k])
                at += k
        for o in outs:
            o.finish()
        return _completed(output_tensors)

    def alltoall_base(self, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts=None):
        """torch's all_to_all_single: the input's dim-0 blocks go to the ranks in order; the output's
        dim-0 blocks come from the ranks in order. Equal blocks without split sizes; uneven ones
        with them (every pair must agree on its count)."""
        call = "alltoall_base"
        world = self.size()
        self._same_kind(call, [output_tensor], input_tensor)
        out = _Output(output_tensor)
        if not output_split_sizes and not input_split_sizes:
            n = input_tensor.numel()
            if n % world or output_tensor.numel() != n:
                _bad(call, f"input has {n} elements and output {output_tensor.numel()}; without split sizes both need "
                           f"the same number, divisible by the {world} ranks")
            src, dst = _bytes(_flat(input_tensor)), _bytes(out.flat)
            k = src.numel() // world
            self._exchange([src[r * k:(r + 1) * k] for r in range(world)], [dst[r * k:(r + 1) * k]
                                                                             for r in range(world)], call, n=k)
            out.finish()
            return _completed([output_tensor])
        send = self._row_bytes(call, input_tensor, input_split_sizes, "input")
        recv = self._row_bytes(call, output_tensor, output_split_sizes, "output")
        self._all_to_all_v(_bytes(_flat(input_tensor)), _bytes(out.flat), send, recv)
        out.finish()
        return _completed([output_tensor])

    def _row_bytes(self, call, tensor, splits, role):
        """Byte counts per rank of ``tensor``'s dim-0 blocks (``splits`` rows each; none: equal blocks)."""
        world = self.size()
        rows = tensor.shape[0] if tensor.dim() else 1
        row = (tensor.numel() // rows if rows else 0) * tensor.element_size()
        if not splits:
            if rows % world:
                _bad(call, f"the {role} has {rows} rows, not divisible by the {world} ranks; give "
                           f"{role}_split_sizes")
            splits = [rows // world] * world
        splits = [int(s) for s in splits]
        if len(splits) != world or any(s < 0 for s in splits) or sum(splits) != rows:
            _bad(call, f"{role}_split_sizes {splits} must hold {world} counts of 0 or more adding up to the "
                       f"{role}'s {rows} rows")
        return [s * row for s in splits]

    def _all_to_all_v(self, send, recv, send_counts, recv_counts):
        ctx = self._ensure_ctx()
        displs = lambda counts: [sum(counts[:j]) for j in range(len(counts))]  # noqa: E731
        # The Communicator stages tensors off the heap that are on the heap's device; tensors of
        # another device (CPU tensors beside a GPU heap) go there first and come back after.
        device = ctx.get_device()
        here = recv if recv.device == device else torch.empty_like(recv, device=device)
        ctx.ccl.all_to_all_v(here, send.to(device), send_counts, displs(send_counts), recv_counts,
                             displs(recv_counts))
        if here is not recv:
            recv.copy_(here)

    def reduce(self, tensors, opts=None):
        call = "reduce"
        tensor = self._one(tensors, call)
        root = self._root(getattr(opts, "rootRank", 0), call)
        op = _reduced_op(tensor.dtype, _op_name(getattr(opts, "reduceOp", None), call), call)
        src = _reduced_view(_flat(tensor))
        # every rank reduces into staging; only the root keeps the result
        if self.rank() == root:
            out = _Output(tensor)
            self._all_reduce_flat(src, _reduced_view(out.flat), op)
            out.finish()
        else:
            self._all_reduce_flat(src, None, op)
        return _completed(tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        call = "gather"
        tensor = self._one(input_tensors, call, "input_tensors")
        root = self._root(getattr(opts, "rootRank", 0), call)
        outs = None
        if self.rank() == root:
            outputs = self._one(output_tensors, call, "output_tensors")
            self._per_rank_list(call, outputs, tensor.numel(), tensor, "output_tensors[0]")
            outs = [_Output(t) for t in outputs]
        elif output_tensors and any(len(o) for o in output_tensors):
            _bad(call, f"rank {self.rank()} is not the root ({root}); give it no output tensors")
        self._gather_bytes(_bytes(_flat(tensor)), None if outs is None else [_bytes(o.flat) for o in outs])
        for o in outs or ():
            o.finish()
        return _completed(output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        call = "scatter"
        tensor = self._one(output_tensors, call, "output_tensors")
        root = self._root(getattr(opts, "rootRank", 0), call)
        blocks = None
        if self.rank() == root:
            inputs = self._one(input_tensors, call, "input_tensors")
            self._per_rank_list(call, inputs, tensor.numel(), tensor, "input_tensors[0]")
            blocks = [_bytes(_flat(t)) for t in inputs]
        elif input_tensors and any(len(i) for i in input_tensors):
            _bad(call, f"rank {self.rank()} is not the root ({root}); give it no input tensors")
        out = _Output(tensor)
        dst = [None] * self.size()
        dst[root] = _bytes(out.flat)
        self._exchange(blocks, dst, call, n=tensor.numel() * tensor.element_size())
        out.finish()
        return _completed(output_tensors)

    def barrier(self, opts=None):
        self._ensure_ctx().barrier()
        return _completed([])

    # ---- what the group does not do -----------------------------------------------------------
    def _no_p2p(self, call):
        _unsupported(call, "point-to-point calls are not provided by the iris group; use the context's "
                           "ctx.ccl.send/recv (heap tensors), or a gloo/nccl group for torch.distributed.send/recv")

    def send(self, tensors, dst_rank, tag=0):
        self._no_p2p("send")

    def recv(self, tensors, src_rank, tag=0):
        self._no_p2p("recv")

    def recv_anysource(self, tensors, tag=0):
        self._no_p2p("recv_anysource")

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        _unsupported("allgather_coalesced", "not provided; call all_gather per tensor")

    def monitored_barrier(self, *args, **kwargs):
        _unsupported("monitored_barrier", "not provided (gloo's); use barrier()")

    # ---- names --------------------------------------------------------------------------------
    def getBackendName(self):
        return BACKEND_NAME

    def _get_backend_name(self):
        return BACKEND_NAME

    @property
    def heap_size(self):
        return self._heap_size


def _create_iris_backend(prefix_store, rank, world_size, timeout):
    """What torch.distributed calls for ``init_process_group(backend="iris")``."""
    return IrisProcessGroup(prefix_store, rank, world_size, timeout)


__all__ = ["IrisProcessGroup", "IrisNotImplementedError"]
