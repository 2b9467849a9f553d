"""Iris's fused GEMM + collective operations on aperture: the product with torch (cuBLAS on a GPU,
ATen on the host), then the collective on the context's aperture Communicator (``ctx.ccl``'s), on
the same stream. Every operation takes the Iris context first, then Iris's arguments, and returns
its workspace.

What each computes (rank r's operands are A_r, B_r, bias_r; W ranks):

- matmul_all_reduce: output = sum_r (A_r @ B_r + bias_r[:, None])       (M, N) on every rank
- all_gather_matmul: output = [A_0 | A_1 | ... ] @ B + bias[:, None]     A_r is (M, K / W)
- matmul_all_gather: output rows [r M, (r + 1) M) = A_r @ B_r + bias_r[:, None]
- matmul_reduce_scatter: output (M, N) = this rank's block of tiles of the matmul_all_reduce sum,
  zero elsewhere (Iris's tile layout); or output (M, N / W) = columns [r N / W, (r + 1) N / W)

The bias is a row bias of M elements, added to each rank's product before the collective, so a
reducing operation adds every rank's bias once (Iris's kernels add it to the tile's accumulator
by row index, ahead of the reduction). The product's rounding is one: fp16 and bf16 accumulate
in fp32 and round once, with the bias (addmm); the reductions then add the rounded partials in
the element type, as the Communicator's all_reduce does.

The tensors peers read or write in Iris's kernels must be on the symmetric heap here too (the
Communicator then reads them where they lie): the output of matmul_all_reduce, matmul_all_gather
and matmul_reduce_scatter, and A_sharded of all_gather_matmul.
"""

import inspect

import torch

from aperture._error import ErrorCode

from .._errors import IrisTypeError, IrisValueError
from .config import FusedConfig
from .workspace import FusedWorkspace

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class OpsError(IrisValueError):
    """A call iris.ops cannot run: aperture.Error, and the ValueError Iris raises for it."""


class OpsAssertionError(OpsError, AssertionError):
    """A call Iris refuses with ``assert``: an OpsError (a ValueError, as the other refusals here)
    that is also the AssertionError Iris raises."""


def _refuse(name, detail, error=OpsError):
    raise error(f"aperture: iris.ops.{name}: {detail}", code=ErrorCode.invalid_argument)


def _check_config(name, config, world):
    if config is None:
        config = FusedConfig()
    elif not isinstance(config, FusedConfig):
        _refuse(name, f"config is a {type(config).__name__}; give an iris.ops.FusedConfig (or None)")
    config.validate(world_size=world)
    return config


def _check_matrices(name, ctx, output, named):
    """Every operand a 2-D tensor of one supported dtype, on the heap's device."""
    device = ctx.get_device()
    if output is not None:  # a preamble without an output checks the operands alone
        named = [("output_tensor", output)] + named
    for role, t in named:
        if not isinstance(t, torch.Tensor):
            _refuse(name, f"{role} is a {type(t).__name__}; give a torch tensor")
        if t.dim() != 2:
            _refuse(name, f"{role} has shape {tuple(t.shape)}; it must be 2-D")
        if t.device.type != device.type or (device.type == "cuda" and t.device != device):
            _refuse(name, f"{role} is on {t.device}, the heap on {device}; give every operand on {device}")
    first, dtype = named[0][0], named[0][1].dtype
    if dtype not in DTYPES:
        _refuse(name, f"{first} is {dtype}; the operations take float16, bfloat16 or float32")
    for role, t in named[1:]:
        if t.dtype != dtype:
            _refuse(name, f"{role} is {t.dtype} and {first} {dtype}; all tensors must have one dtype "
                          "(convert with .to(dtype))")


def _check_bias(name, bias, rows, output):
    """Iris's kernels add bias by row: a 1-D tensor of the product's M rows, in the output's dtype."""
    if bias is None:
        return None
    if isinstance(bias, bool):
        _refuse(name, f"bias={bias}: the fifth argument is bias (a tensor or None); pass async_op by keyword")
    if not isinstance(bias, torch.Tensor) or bias.dim() != 1 or bias.shape[0] != rows:
        shape = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
        _refuse(name, f"bias is {shape}; it must be a 1-D tensor of the product's {rows} rows (Iris adds bias[m] "
                      "to row m)")
    if bias.dtype != output.dtype or bias.device != output.device:
        _refuse(name, f"bias is {bias.dtype} on {bias.device}; give {output.dtype} on {output.device}")
    return bias


def _check_on_heap(name, ctx, role, tensor):
    if not ctx.is_symmetric(tensor):
        _refuse(name, f"{role} ({tuple(tensor.shape)} {tensor.dtype}) is not on the symmetric heap, where Iris "
                      "needs it (peers reach it) and the collective reads it in place; allocate it with "
                      "ctx.zeros/ctx.empty, or copy it into such a tensor")


def _check_workspace(name, workspace):
    if workspace is not None and not isinstance(workspace, FusedWorkspace):
        _refuse(name, f"workspace is a {type(workspace).__name__}; give the FusedWorkspace an earlier call or "
                      "preamble returned (or None)")


def _prepared(ctx, workspace, operation, shape, dtype, variant="", aux_shape=None):
    """``workspace`` made ready for this call: the same object when it was made for this shape,
    dtype and world size; its aux_buffer (on the heap) reallocated when its shape or dtype differ.
    Allocation is collective: every rank makes the same calls."""
    workspace = workspace if workspace is not None else FusedWorkspace()
    if not workspace.matches(operation, shape, dtype, int(ctx.get_num_ranks()), variant):
        workspace.call_counter = 0  # Iris counts the calls since the workspace was made for this call
    workspace.operation, workspace.shape, workspace.dtype = operation, tuple(shape), dtype
    workspace.world_size, workspace.variant = int(ctx.get_num_ranks()), variant
    if aux_shape is not None:
        aux = workspace.aux_buffer
        if aux is None or tuple(aux.shape) != tuple(aux_shape) or aux.dtype != dtype or not ctx.is_symmetric(aux):
            workspace.aux_buffer = ctx.zeros(tuple(aux_shape), dtype=dtype)
    workspace.prepared = True
    return workspace


def _product(A, B, bias, out):
    """out = A @ B (+ bias by row), rounded once."""
    if bias is None:
        torch.matmul(A, B, out=out)
    else:
        torch.addmm(bias.unsqueeze(1), A, B, out=out)


def _finish(ctx, workspace, async_op):
    if not async_op:
        ctx.barrier()
    return workspace


# ---- matmul_all_reduce ---------------------------------------------------------------------

def _all_reduce_shapes(name, ctx, output, A, B):
    _check_matrices(name, ctx, output, [("A", A), ("B", B)])
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match (K={k} != K_B={k_b})")
    if tuple(output.shape) != (m, n):
        _refuse(name, f"output_tensor is {tuple(output.shape)}; it must be ({m}, {n}) (A's rows, B's columns)")
    return m, n, k


def matmul_all_reduce_preamble(ctx, output_tensor, A, B, config=None, workspace=None):
    """The workspace matmul_all_reduce(output_tensor, A, B) reuses; zeroes output_tensor and waits
    for every rank (Iris's preamble). Collective."""
    name = "matmul_all_reduce_preamble"
    config = _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k = _all_reduce_shapes(name, ctx, output_tensor, A, B)
    workspace = _prepared(ctx, workspace, "matmul_all_reduce", (m, n, k), A.dtype, config.all_reduce_variant,
                          None if output_tensor.is_contiguous() else (m, n))
    workspace.call_counter = 0
    output_tensor.zero_()
    ctx.barrier()
    return workspace


# The two orders Iris has given matmul_all_reduce's arguments after B: the newest (no bias; here
# bias may still come by keyword) and the older one, with a row bias fifth.
_ALL_REDUCE_NEWEST = inspect.signature(lambda async_op=False, config=None, workspace=None, *, bias=None: None)
_ALL_REDUCE_OLDER = inspect.signature(lambda bias=None, async_op=False, config=None, workspace=None: None)


def _all_reduce_arguments(name, args, kwargs):
    """(bias, async_op, config, workspace) from what followed B. The fifth positional argument is
    async_op when it is a bool (Iris's newest order: async_op, config, workspace) and bias when it
    is a tensor (the older: bias, async_op, config, workspace). None is either one's default, and
    the arguments after it decide: a bool sixth, a FusedConfig seventh or an eighth at all are the
    older order, anything else the newest; where nothing decides, all of them are None, which
    means the same in both orders (no bias, a barrier at the end, the default config and a new
    workspace)."""
    first = args[0] if args else None
    if args and first is not None and not isinstance(first, (bool, torch.Tensor)):
        _refuse(name, f"the fifth argument is a {type(first).__name__}; give async_op (True or False, Iris's "
                      "newest order: async_op, config, workspace) or bias (a tensor or None, its older order: bias, "
                      "async_op, config, workspace)", IrisTypeError)
    older = isinstance(first, torch.Tensor) or (first is None and (
        len(args) >= 4 or (len(args) >= 2 and isinstance(args[1], bool))
        or (len(args) >= 3 and isinstance(args[2], FusedConfig))))
    signature = _ALL_REDUCE_OLDER if older else _ALL_REDUCE_NEWEST
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        wrong = str(e)
    else:
        wrong = None
    if wrong is not None:
        _refuse(name, f"{wrong}: it takes (ctx, output_tensor, A, B, async_op=False, config=None, workspace=None, *, "
                      "bias=None), Iris's newest order, or (ctx, output_tensor, A, B, bias=None, async_op=False, "
                      "config=None, workspace=None), its older one", IrisTypeError)
    bound.apply_defaults()
    given = bound.arguments
    if isinstance(given["bias"], bool):
        _refuse(name, f"bias={given['bias']}: bias is a row-bias tensor or None; async_op is the fifth positional "
                      "argument or the keyword async_op=")
    return given["bias"], given["async_op"], given["config"], given["workspace"]


def matmul_all_reduce(ctx, output_tensor, A, B, *args, **kwargs):
    """output_tensor (M, N) = the sum over ranks of A @ B (+ bias[:, None]). Collective.

    Takes Iris's newest order, ``(ctx, output_tensor, A, B, async_op=False, config=None,
    workspace=None)``, with ``bias=`` as a keyword, and its older one, ``(ctx, output_tensor, A, B,
    bias=None, async_op=False, config=None, workspace=None)``: a bool fifth is async_op, a tensor
    bias (_all_reduce_arguments says how None is read). ``workspace.call_counter`` counts the
    calls since the workspace was prepared for this shape, as Iris's does."""
    name = "matmul_all_reduce"
    bias, async_op, config, workspace = _all_reduce_arguments(name, args, kwargs)
    config = _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k = _all_reduce_shapes(name, ctx, output_tensor, A, B)
    bias = _check_bias(name, bias, m, output_tensor)
    _check_on_heap(name, ctx, "output_tensor", output_tensor)
    contiguous = output_tensor.is_contiguous()
    workspace = _prepared(ctx, workspace, name, (m, n, k), A.dtype, config.all_reduce_variant,
                          None if contiguous else (m, n))
    target = output_tensor if contiguous else workspace.aux_buffer
    _product(A, B, bias, target)
    ctx._comm().all_reduce(target, "sum")
    if target is not output_tensor:
        output_tensor.copy_(target)
    workspace.call_counter += 1
    return _finish(ctx, workspace, async_op)


# ---- all_gather_matmul ---------------------------------------------------------------------

def _all_gather_matmul_shapes(name, ctx, output, A_sharded, B):
    _check_matrices(name, ctx, output, [("A_sharded", A_sharded), ("B", B)])
    world = int(ctx.get_num_ranks())
    (m, k_local), (k, n) = A_sharded.shape, B.shape
    if k != world * k_local:
        _refuse(name, f"B has {k} rows, but K must equal world_size * K_local = {world} * {k_local} = "
                      f"{world * k_local} (A_sharded is this rank's ({m}, {k_local}) column shard)")
    if output is not None and tuple(output.shape) != (m, n):
        _refuse(name, f"output_tensor is {tuple(output.shape)}; it must be ({m}, {n})")
    return m, n, k, k_local


def all_gather_matmul_preamble(ctx, A_sharded, B, config=None, workspace=None):
    """The workspace all_gather_matmul(output, A_sharded, B) reuses: the heap buffer every rank's
    shard is gathered into. Collective."""
    name = "all_gather_matmul_preamble"
    _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k, k_local = _all_gather_matmul_shapes(name, ctx, None, A_sharded, B)
    return _prepared(ctx, workspace, "all_gather_matmul", (m, n, k), A_sharded.dtype,
                     aux_shape=(int(ctx.get_num_ranks()) * m, k_local))


def all_gather_matmul(ctx, output_tensor, A_sharded, B, bias=None, async_op=False, config=None, workspace=None,
                      selector=None):
    """output_tensor (M, N) = [A_0 | A_1 | ...] @ B + bias[:, None]: every rank's (M, K_local)
    column shard, gathered along K in rank order, times the replicated (K, N) B. ``selector``
    (an Iris version's tile selector) is accepted and unused. Collective."""
    name = "all_gather_matmul"
    _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k, k_local = _all_gather_matmul_shapes(name, ctx, output_tensor, A_sharded, B)
    bias = _check_bias(name, bias, m, output_tensor)
    _check_on_heap(name, ctx, "A_sharded", A_sharded)
    world = int(ctx.get_num_ranks())
    workspace = _prepared(ctx, workspace, name, (m, n, k), A_sharded.dtype, aux_shape=(world * m, k_local))
    gathered = workspace.aux_buffer  # (W M, K_local): rank r's shard in rows [r M, (r + 1) M)
    ctx._comm().all_gather(gathered, A_sharded.contiguous())
    a_full = gathered.view(world, m, k_local).transpose(0, 1).reshape(m, k)
    if output_tensor.is_contiguous():
        _product(a_full, B, bias, output_tensor)
    else:
        output_tensor.copy_(torch.addmm(bias.unsqueeze(1), a_full, B) if bias is not None else a_full @ B)
    return _finish(ctx, workspace, async_op)


# ---- matmul_all_gather ---------------------------------------------------------------------

def matmul_all_gather(ctx, output_tensor, A, B, bias=None, async_op=False, config=None, workspace=None,
                      selector=None):
    """output_tensor (W M, N): rows [r M, (r + 1) M) = rank r's A @ B + bias[:, None].
    ``selector`` (an Iris version's tile selector) is accepted and unused. Collective."""
    name = "matmul_all_gather"
    _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    _check_matrices(name, ctx, output_tensor, [("A", A), ("B", B)])
    world = int(ctx.get_num_ranks())
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match")
    if tuple(output_tensor.shape) != (world * m, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be (M * world_size, N) = "
                      f"({m} * {world}, {n})")
    bias = _check_bias(name, bias, m, output_tensor)
    _check_on_heap(name, ctx, "output_tensor", output_tensor)
    workspace = _prepared(ctx, workspace, name, (m, n, k), A.dtype, aux_shape=(m, n))
    _product(A, B, bias, workspace.aux_buffer)
    if output_tensor.is_contiguous():
        ctx._comm().all_gather(output_tensor, workspace.aux_buffer)
    else:
        gathered = torch.empty((world * m, n), dtype=A.dtype, device=A.device)
        ctx._comm().all_gather(gathered, workspace.aux_buffer)
        output_tensor.copy_(gathered)
    return _finish(ctx, workspace, async_op)


# ---- matmul_reduce_scatter -----------------------------------------------------------------

def tile_owner_range(m, n, config, rank, world):
    """Iris's tile layout of matmul_reduce_scatter: the (M, N) product cut into block_size_m x
    block_size_n tiles numbered row-major; rank r keeps tiles [r T, (r + 1) T) with T = tiles // W,
    and the last rank also the remainder. Returns (first, end) of this rank's tile numbers."""
    tiles = -(-m // config.block_size_m) * -(-n // config.block_size_n)
    per_rank = tiles // world
    first = rank * per_rank
    return first, tiles if rank == world - 1 else first + per_rank


def _reduce_scatter_layout(name, ctx, output, A, B, config):
    """The output's layout: "tiles" for Iris's (M, N), "columns" for ksplit's (M, N / W)."""
    _check_matrices(name, ctx, output, [("A", A), ("B", B)])
    world = int(ctx.get_num_ranks())
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match")
    shape = tuple(output.shape)
    if n % world == 0 and shape == (m, n // world):  # one rank: both layouts are the whole sum
        return m, n, k, "columns"
    if shape == (m, n) and not config.ksplit:
        return m, n, k, "tiles"
    if config.ksplit:
        _refuse(name, f"output_tensor is {shape}; with FusedConfig(ksplit=True) it must be (M, N / world_size) = "
                      f"({m}, {n / world:g}), and N = {n} divisible by world_size ({world})")
    _refuse(name, f"output_tensor is {shape}; it must be (M, N) = ({m}, {n}) (Iris's: this rank's block of tiles "
                  f"of the sum, zero elsewhere) or (M, N / world_size) (this rank's column block; N = {n} must "
                  f"then be divisible by world_size ({world}))")


def _reduce_scatter_workspace(ctx, workspace, m, n, k, dtype, layout):
    world = int(ctx.get_num_ranks())
    aux = (m, n) if layout == "tiles" else (world, m, n // world)
    return _prepared(ctx, workspace, "matmul_reduce_scatter", (m, n, k), dtype, "two_shot", aux)


def matmul_reduce_scatter_preamble(ctx, output_tensor, A, B, config=None, workspace=None):
    """The workspace matmul_reduce_scatter(output_tensor, A, B) reuses (the heap buffer of the
    product); zeroes output_tensor and waits for every rank (Iris's preamble). Collective."""
    name = "matmul_reduce_scatter_preamble"
    config = _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k, layout = _reduce_scatter_layout(name, ctx, output_tensor, A, B, config)
    workspace = _reduce_scatter_workspace(ctx, workspace, m, n, k, A.dtype, layout)
    output_tensor.zero_()
    ctx.barrier()
    return workspace


def matmul_reduce_scatter(ctx, output_tensor, A, B, bias=None, async_op=False, config=None, workspace=None):
    """This rank's share of S = the sum over ranks of A @ B + bias[:, None], in one of two layouts:

    - output (M, N), Iris's: the rank's block of tiles of S (tile_owner_range, config's block
      sizes), every other element zero;
    - output (M, N / W), Iris's ksplit layout: columns [r N / W, (r + 1) N / W) of S.

    Collective."""
    name = "matmul_reduce_scatter"
    config = _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k, layout = _reduce_scatter_layout(name, ctx, output_tensor, A, B, config)
    bias = _check_bias(name, bias, m, output_tensor)
    _check_on_heap(name, ctx, "output_tensor", output_tensor)
    world = int(ctx.get_num_ranks())
    workspace = _reduce_scatter_workspace(ctx, workspace, m, n, k, A.dtype, layout)
    if layout == "tiles":
        # The whole sum on every rank, then this rank's tiles of it (a tile block is not one
        # contiguous piece of memory unless block_size_n >= N, so no reduce_scatter here).
        total = workspace.aux_buffer
        _product(A, B, bias, total)
        ctx._comm().all_reduce(total, "sum")
        first, end = tile_owner_range(m, n, config, int(ctx.get_rank()), world)
        rows = torch.arange(m, device=total.device) // config.block_size_m
        cols = torch.arange(n, device=total.device) // config.block_size_n
        tile = rows[:, None] * (-(-n // config.block_size_n)) + cols[None, :]
        output_tensor.copy_(torch.where((tile >= first) & (tile < end), total, torch.zeros((), dtype=total.dtype,
                                                                                             device=total.device)))
        return _finish(ctx, workspace, async_op)
    n_local = n // world
    # The product laid out by column block (block r contiguous), the order reduce_scatter splits in.
    blocks = workspace.aux_buffer
    b_blocks = B.view(k, world, n_local).transpose(0, 1) if B.is_contiguous() else \
        B.reshape(k, world, n_local).transpose(0, 1)
    if bias is None:
        torch.matmul(A, b_blocks, out=blocks)
    else:
        torch.baddbmm(bias.view(1, m, 1), A.expand(world, m, k), b_blocks, out=blocks)
    if output_tensor.is_contiguous():
        ctx._comm().reduce_scatter(output_tensor, blocks, "sum")
    else:
        mine = torch.empty((m, n_local), dtype=A.dtype, device=A.device)
        ctx._comm().reduce_scatter(mine, blocks, "sum")
        output_tensor.copy_(mine)
    return _finish(ctx, workspace, async_op)


# ---- the _hbm_buffer variants (Iris stages through a heap buffer; the results are the above) ---

def all_gather_matmul_hbm_buffer_preamble(ctx, A_sharded, B, config=None, k_per_flag=1,
                                          staged_a_layout="k_contiguous"):
    """all_gather_matmul_preamble's workspace, under this variant's name. ``k_per_flag`` and
    ``staged_a_layout`` tune Iris's fetcher kernel: checked and unused. Collective."""
    name = "all_gather_matmul_hbm_buffer_preamble"
    _check_staging(name, k_per_flag, staged_a_layout)
    workspace = all_gather_matmul_preamble(ctx, A_sharded, B, config)
    workspace.operation, workspace.variant = "all_gather_matmul_hbm_buffer", f"hbm_buffer_{staged_a_layout}"
    return workspace


def all_gather_matmul_hbm_buffer(ctx, output_tensor, A_sharded, B, bias=None, async_op=False, config=None,
                                 workspace=None, num_fetch_sms=None, k_per_flag=1, fetch_block_m=None,
                                 fetch_block_k=None, staged_a_layout="k_contiguous", num_warps=None,
                                 num_stages=None):
    """all_gather_matmul's result (output = [A_0 | A_1 | ...] @ B + bias[:, None]); the launch
    options of Iris's fetcher/GEMM kernel (num_fetch_sms ... num_stages) are accepted and unused."""
    _check_staging("all_gather_matmul_hbm_buffer", k_per_flag, staged_a_layout)
    workspace = all_gather_matmul(ctx, output_tensor, A_sharded, B, bias, async_op, config, workspace)
    workspace.operation, workspace.variant = "all_gather_matmul_hbm_buffer", f"hbm_buffer_{staged_a_layout}"
    return workspace


def _check_staging(name, k_per_flag, staged_a_layout):
    if staged_a_layout not in ("k_contiguous", "m_contiguous"):
        _refuse(name, f"staged_a_layout={staged_a_layout!r}; give 'k_contiguous' or 'm_contiguous'")
    if not isinstance(k_per_flag, int) or k_per_flag <= 0:
        _refuse(name, f"k_per_flag={k_per_flag!r}; give a positive int")


def _row_scatter_shapes(name, ctx, output, A, B):
    _check_matrices(name, ctx, output, [("A", A), ("B", B)])
    world = int(ctx.get_num_ranks())
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match")
    if m % world:
        _refuse(name, f"M = {m} (A's rows) must be divisible by world_size ({world}): each rank keeps M / world_size rows")
    if output is not None and tuple(output.shape) != (m // world, n):
        _refuse(name, f"output_tensor is {tuple(output.shape)}; it must be (M / world_size, N) = ({m // world}, {n})")
    return m, n, k


def _fits_gemm_rs(ctx, output, A, B):
    """OverlappedGemm.gemm_rs computes exactly this operation (rows of the sum over ranks) where
    it takes the operands: bf16 CUDA matrices, dense, K and N multiples of 64, on a GPU heap."""
    m, k = A.shape
    n = B.shape[1]
    return (A.dtype == torch.bfloat16 and A.is_cuda and getattr(ctx.provider, "memory_kind", "") == "device"
            and all(t.is_contiguous() for t in (output, A, B)) and k % 64 == 0 and n % 64 == 0
            and m % int(ctx.get_num_ranks()) == 0)


def matmul_reduce_scatter_hbm_buffer_preamble(ctx, A, B, config=None):
    """The workspace matmul_reduce_scatter_hbm_buffer(output, A, B) reuses: the (M, N) product on
    the heap (and the OverlappedGemm where it serves). Collective."""
    name = "matmul_reduce_scatter_hbm_buffer_preamble"
    _check_config(name, config, ctx.get_num_ranks())
    m, n, k = _row_scatter_shapes(name, ctx, None, A, B)
    workspace = _prepared(ctx, None, "matmul_reduce_scatter_hbm_buffer", (m, n, k), A.dtype, "hbm_buffer", (m, n))
    ctx.barrier()
    return workspace


def matmul_reduce_scatter_hbm_buffer(ctx, output_tensor, A, B, async_op=False, config=None, workspace=None,
                                     num_scatter_sms=32, num_warps=8, num_stages=2):
    """output_tensor (M / W, N) = rows [r M / W, (r + 1) M / W) of the sum over ranks of A @ B
    (A is this rank's (M, K_local) K shard, B its (K_local, N)). No bias (Iris's has none). On
    bf16 GPU operands with K and N multiples of 64 this is aperture.OverlappedGemm.gemm_rs (the
    GEMM overlapped with the reduce-scatter, partials summed in fp32 and rounded once);
    otherwise a torch GEMM into the heap buffer, then Communicator.reduce_scatter.
    num_scatter_sms, num_warps and num_stages (Iris's launch) are accepted and unused. Collective."""
    name = "matmul_reduce_scatter_hbm_buffer"
    _check_config(name, config, ctx.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k = _row_scatter_shapes(name, ctx, output_tensor, A, B)
    # output_tensor may lie off the heap, as in Iris (its tests pass a plain torch.zeros): peers
    # read this rank's heap buffer, and only this rank writes its output.
    if _fits_gemm_rs(ctx, output_tensor, A, B):
        workspace = _prepared(ctx, workspace, name, (m, n, k), A.dtype, "hbm_buffer")
        from ..ccl import _fused  # the OverlappedGemm the context's fused ccl ops share

        _fused._overlapped_gemm(ctx, name).gemm_rs(A, B, out=output_tensor)
        workspace.launch_params = {"path": "OverlappedGemm.gemm_rs"}
        return _finish(ctx, workspace, async_op)
    workspace = _prepared(ctx, workspace, name, (m, n, k), A.dtype, "hbm_buffer", (m, n))
    _product(A, B, None, workspace.aux_buffer)
    if output_tensor.is_contiguous():
        ctx._comm().reduce_scatter(output_tensor, workspace.aux_buffer, "sum")
    else:
        mine = torch.empty((m // int(ctx.get_num_ranks()), n), dtype=A.dtype, device=A.device)
        ctx._comm().reduce_scatter(mine, workspace.aux_buffer, "sum")
        output_tensor.copy_(mine)
    workspace.launch_params = {"path": "matmul, Communicator.reduce_scatter"}
    return _finish(ctx, workspace, async_op)
