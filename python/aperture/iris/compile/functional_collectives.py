"""``iris.compile.functional_collectives``: Iris's collectives as torch custom operators, so that
torch.compile, make_fx and fake tensors trace through them without a graph break.

The operators (namespace ``iris``) return new tensors and leave their inputs alone:

- ``torch.ops.iris.all_reduce(input, op="sum")``: the reduction of every rank's input;
- ``torch.ops.iris.all_gather(input, world_size=None)``: every rank's input stacked along dim 0,
  ``(world_size * M, ...)``;
- ``torch.ops.iris.reduce_scatter(input, world_size=None, op="sum")``: with ``world_size``, this
  rank's rows of the reduction, ``(M // world_size, ...)`` (M must divide: ValueError otherwise);
  without, Iris's tile layout, the input's shape, which aperture fills with the whole reduction
  (as ``ctx.ccl.reduce_scatter`` does for that shape);
- ``torch.ops.iris.all_to_all(input)``: Iris's column-block all-to-all (``ctx.ccl.all_to_all``);
- ``torch.ops.iris.wait_tensor(input)``: the calls complete in stream order, so this syncs the
  current stream and returns a copy.

Each runs the Iris context's ``ctx.ccl`` call, that is one aperture Communicator call, on the
input as given (heap or not: the Communicator stages what is not on the heap) and a fresh output
off the heap, so repeated calls never use up the Iris heap. The context is the one ``setup(ctx)``
registered on this thread, else the process-wide one (``iris.compile.functional._iris_ctx``, which
``setup`` and ``iris.compile.set_context`` set).
Every rank must make the same calls in the same order, as with any collective.
"""

import threading
from typing import Optional

import torch

import aperture

from .._errors import IrisTypeError, IrisValueError
from . import functional as _process

_thread_local = threading.local()
_default = None  # the IrisCompileContext of the process-wide Iris instance (it keeps setup's config)
_default_lock = threading.Lock()


class IrisCompileContext:
    """The Iris context that the compiled collectives run on, with the Configs Iris passes them.
    aperture's Communicator picks its algorithm by size, so the Configs are kept for programs that
    read them and steer nothing."""

    def __init__(self, iris_instance, config=None):
        _process.require_iris(iris_instance, "IrisCompileContext")
        self.ctx = iris_instance
        self._config = config
        self._ag_config = None
        self._rs_config = None
        self._workspaces = {}
        self._workspace_lock = threading.Lock()

    @property
    def config(self):
        if self._config is None:
            self._config = _config(block_size_m=32, block_size_n=64, all_reduce_variant="two_shot",
                                   all_reduce_distribution=1)
        return self._config

    @property
    def ag_config(self):
        if self._ag_config is None:
            self._ag_config = _config(all_gather_variant="persistent", block_size_m=32, block_size_n=64)
        return self._ag_config

    @property
    def rs_config(self):
        if self._rs_config is None:
            self._rs_config = _config(reduce_scatter_variant="two_shot", block_size_m=32, block_size_n=64,
                                      all_reduce_distribution=1)
        return self._rs_config

    def allocate_buffers(self, shape, dtype):
        """A new (input, output) pair of zeroed heap tensors. Collective: every rank calls it."""
        return self.ctx.zeros(*shape, dtype=dtype), self.ctx.zeros(*shape, dtype=dtype)

    def get_workspace(self, key, output_tensor, input_tensor):
        """The all_reduce workspace cached under ``key`` (made by ``all_reduce_preamble`` once)."""
        with self._workspace_lock:
            if key not in self._workspaces:
                self._workspaces[key] = self.ctx.ccl.all_reduce_preamble(output_tensor, input_tensor,
                                                                         config=self.config)
            return self._workspaces[key]

    def clear_workspaces(self):
        with self._workspace_lock:
            self._workspaces.clear()


def _config(**fields):
    from ..ccl.config import Config

    return Config(**fields)


def setup(iris_instance, config=None):
    """Makes ``iris_instance`` the context of the compiled collectives, for this thread and as the
    process's default. Returns the IrisCompileContext."""
    context = IrisCompileContext(iris_instance, config)
    global _default
    with _default_lock:
        _default = context
        _process._iris_ctx = iris_instance
    _thread_local.context = context
    return context


def forget_thread_context():
    """Drops this thread's own context, so that the process-wide one applies (set_context's)."""
    _thread_local.context = None


def _current():
    context = getattr(_thread_local, "context", None)
    return context if context is not None else _process_context()


def _process_context():
    global _default
    with _default_lock:
        iris_instance = _process._iris_ctx
        if iris_instance is None:
            raise _process.context_not_set()
        if _default is None or _default.ctx is not iris_instance:  # set_context, or assigned to _iris_ctx
            _default = IrisCompileContext(iris_instance)
        return _default


def _peek_ranks():
    """The current context's rank count, or None when there is none (tracing without a context)."""
    context = getattr(_thread_local, "context", None)
    iris_instance = context.ctx if context is not None else _process._iris_ctx
    return None if iris_instance is None else iris_instance.get_num_ranks()


def _iris_for(op, tensor):
    iris = _current().ctx
    heap = iris.get_device()
    if tensor.device.type != heap.type or (heap.type == "cuda" and tensor.device.index not in (None, heap.index)):
        raise aperture.Error(f"aperture: iris::{op}: the input is on {tensor.device}, the Iris context's heap on "
                             f"{heap}; move it there first (tensor.to(ctx.device))",
                             code=aperture.ErrorCode.invalid_argument)
    return iris


def _rows_per_rank(op, shape, world_size):
    if world_size <= 0 or not shape or shape[0] % world_size:
        rows = shape[0] if shape else "no"
        raise IrisValueError(f"aperture: iris::{op}: the input has {rows} rows (dim 0), which {world_size} ranks "
                             f"cannot share evenly; give a dim 0 that is a multiple of world_size",
                             code=aperture.ErrorCode.invalid_argument)
    return shape[0] // world_size


def _check_world(op, iris, world_size):
    if world_size is not None and world_size != iris.get_num_ranks():
        raise IrisValueError(f"aperture: iris::{op}: world_size is {world_size} but the Iris context has "
                             f"{iris.get_num_ranks()} ranks; pass world_size=None or the context's rank count",
                             code=aperture.ErrorCode.invalid_argument)


# ---- the operators --------------------------------------------------------------------------

@torch.library.custom_op("iris::all_reduce", mutates_args=())
def _all_reduce(input: torch.Tensor, op: str = "sum") -> torch.Tensor:
    iris = _iris_for("all_reduce", input)
    output = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    iris.ccl.all_reduce(output, input.contiguous(), op=op)
    return output


@_all_reduce.register_fake
def _(input, op="sum"):
    return torch.empty_like(input)


@torch.library.custom_op("iris::all_gather", mutates_args=())
def _all_gather(input: torch.Tensor, world_size: Optional[int] = None) -> torch.Tensor:
    iris = _iris_for("all_gather", input)
    _check_world("all_gather", iris, world_size)
    ranks = iris.get_num_ranks()
    output = torch.empty((ranks * input.shape[0], *input.shape[1:]), dtype=input.dtype, device=input.device)
    iris.ccl.all_gather(output, input.contiguous())
    return output


@_all_gather.register_fake
def _(input, world_size=None):
    ranks = world_size if world_size is not None else (_peek_ranks() or 1)
    return input.new_empty((ranks * input.shape[0], *input.shape[1:]))


@torch.library.custom_op("iris::reduce_scatter", mutates_args=())
def _reduce_scatter(input: torch.Tensor, world_size: Optional[int] = None, op: str = "sum") -> torch.Tensor:
    iris = _iris_for("reduce_scatter", input)
    _check_world("reduce_scatter", iris, world_size)
    if world_size is None:  # Iris's tile layout: the input's shape
        output = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    else:
        rows = _rows_per_rank("reduce_scatter", tuple(input.shape), world_size)
        output = torch.empty((rows, *input.shape[1:]), dtype=input.dtype, device=input.device)
    iris.ccl.reduce_scatter(output, input.contiguous(), op=op)
    return output


@_reduce_scatter.register_fake
def _(input, world_size=None, op="sum"):
    if world_size is None:
        return torch.empty_like(input)
    rows = _rows_per_rank("reduce_scatter", tuple(input.shape), world_size)
    return input.new_empty((rows, *input.shape[1:]))


@torch.library.custom_op("iris::all_to_all", mutates_args=())
def _all_to_all(input: torch.Tensor) -> torch.Tensor:
    iris = _iris_for("all_to_all", input)
    output = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    iris.ccl.all_to_all(output, input.contiguous())
    return output


@_all_to_all.register_fake
def _(input):
    return torch.empty_like(input)


@torch.library.custom_op("iris::wait_tensor", mutates_args=())
def _wait_tensor(input: torch.Tensor) -> torch.Tensor:
    if input.device.type == "cuda":
        torch.cuda.current_stream(input.device).synchronize()
    return input.clone()


@_wait_tensor.register_fake
def _(input):
    return torch.empty_like(input)


def _all_reduce_backward(ctx, grad):
    if ctx.op != "sum":
        raise aperture.Error(f"aperture: iris::all_reduce: the gradient is defined for op='sum' only, not "
                             f"{ctx.op!r}", code=aperture.ErrorCode.invalid_argument)
    return torch.ops.iris.all_reduce(grad), None  # each rank's input reaches every rank's output


def _all_reduce_save(ctx, inputs, output):  # torch passes these by name; inputs has the defaults filled
    ctx.op = inputs[1]


torch.library.register_autograd("iris::all_reduce", _all_reduce_backward, setup_context=_all_reduce_save)

# Collectives must run even when their result looks unused: every rank waits for every other.
for _op in (torch.ops.iris.all_reduce, torch.ops.iris.all_gather, torch.ops.iris.reduce_scatter,
            torch.ops.iris.all_to_all, torch.ops.iris.wait_tensor):
    torch.fx.node.has_side_effect(_op.default)


# ---- the functions Iris programs call -------------------------------------------------------

class _On:
    """Runs the body with ``context`` as this thread's compile context (None: the current one)."""

    def __init__(self, context):
        self.context = context

    def __enter__(self):
        self.before = getattr(_thread_local, "context", None)
        if self.context is not None:
            if not isinstance(self.context, IrisCompileContext):
                raise IrisTypeError("aperture: iris.compile: ctx= takes the IrisCompileContext that setup() "
                                    f"returns, not {type(self.context).__name__}",
                                    code=aperture.ErrorCode.invalid_argument)
            _thread_local.context = self.context
        return _current() if self.context is None else self.context

    def __exit__(self, *exc):
        _thread_local.context = self.before


def all_reduce(input: torch.Tensor, ctx: Optional[IrisCompileContext] = None) -> torch.Tensor:
    """The sum of ``input`` over every rank, as a new tensor."""
    with _On(ctx):
        return torch.ops.iris.all_reduce(input)


def all_gather(input: torch.Tensor, world_size: Optional[int] = None,
               ctx: Optional[IrisCompileContext] = None) -> torch.Tensor:
    """Every rank's ``input`` stacked along dim 0: ``(world_size * M, ...)``."""
    with _On(ctx) as context:
        return torch.ops.iris.all_gather(input, context.ctx.get_num_ranks() if world_size is None else world_size)


def reduce_scatter(input: torch.Tensor, world_size: Optional[int] = None,
                   ctx: Optional[IrisCompileContext] = None) -> torch.Tensor:
    """This rank's ``M // world_size`` rows of the sum of ``input`` over every rank."""
    with _On(ctx) as context:
        ranks = context.ctx.get_num_ranks() if world_size is None else world_size
        return torch.ops.iris.reduce_scatter(input, ranks)


def wait_tensor(input: torch.Tensor) -> torch.Tensor:
    """The collective's result once complete (they complete in stream order)."""
    return torch.ops.iris.wait_tensor(input)


__all__ = ["IrisCompileContext", "setup", "all_reduce", "all_gather", "reduce_scatter", "wait_tensor"]
