"""``iris.ops.matmul_reduce_scatter_fast``: Iris's GEMM + one-shot pull reduce-scatter by rows, at
Iris's module path, with its standalone reduce-scatter ``fast_reduce_scatter`` and the preamble
that binds the heap staging buffer; ``iris.ops`` re-exports all three, as Iris's does.

What each computes is Iris's: rank r gets rows [r M / W, (r + 1) M / W) of the sum over ranks of
an (M, N) heap tensor (for the GEMM form, of each rank's A @ B, which the GEMM writes into that
staging tensor), the partials added in fp32 and rounded once to the output's dtype, as Iris's
kernel adds. On aperture the reduction is ops/_pull_collectives.reduce_own_rows (the same as
reduce_scatter_auto's one-shot path): a Communicator all_to_all of the row blocks, read in place
from the heap, then a torch sum in fp32. Two differences from Iris's kernel follow from that:

- Iris's kernel synchronises nothing across ranks and leaves the ordering to the caller (the
  ``sync`` / ``async_op`` guards of the GEMM form). The Communicator call is collective, every
  rank makes it, and its barriers on entry and exit already give both of Iris's guards (no rank
  reads a peer's partial before the peer's GEMM wrote it; none returns while a peer still reads
  its own). So ``sync`` and ``async_op`` are checked and add no further barrier: every
  combination is Iris's correct, default configuration.
- The launch knobs (block_m, block_n, num_sms, num_warps) are checked as Iris's launch takes them
  and steer nothing; unlike one_shot_reduce_scatter's, Iris's fast kernel masks a partial last
  tile, so M / W need not be a multiple of block_m.
"""

import logging

import torch

from ._gemm_collective import (
    OpsAssertionError,
    OpsError,
    _check_matrices,
    _check_on_heap,
    _check_workspace,
    _prepared,
    _refuse,
)
from ._pull_collectives import launch_tiling, reduce_own_rows
from .workspace import FusedWorkspace

logger = logging.getLogger(__name__)

_OPERATION = "matmul_reduce_scatter_fast"


def _check_output(name, ctx, output_tensor, m, n, error):
    """The output, this rank's (M / W, N) rows, may lie off the heap and have a dtype of its own
    (Iris's kernel converts the fp32 sum to the output's element type)."""
    _check_matrices(name, ctx, None, [("output_tensor", output_tensor)])
    world = int(ctx.get_num_ranks())
    if tuple(output_tensor.shape) != (m // world, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be (M / world_size, N) = "
                      f"({m // world}, {n}), this rank's rows", error)


def _check_rows(name, ctx, m, error):
    world = int(ctx.get_num_ranks())
    if m % world:
        _refuse(name, f"M = {m} rows must be divisible by world_size ({world}): each rank keeps M / world_size "
                      "rows", error)


def fast_reduce_scatter(ctx, output_tensor, input_tensor, block_m=None, block_n=None, num_sms=None,
                        num_warps=None):
    """output_tensor (M / W, N) = rows [r M / W, (r + 1) M / W) of the sum over ranks of
    input_tensor (M, N, on the symmetric heap), added in fp32 and rounded once to output_tensor's
    dtype. output_tensor may lie off the heap. Returns None, as Iris's. Collective here (every
    rank calls it, as every rank launches Iris's kernel); Iris's asserts raise OpsAssertionError
    (an AssertionError and a ValueError)."""
    name = "fast_reduce_scatter"
    _check_matrices(name, ctx, None, [("input_tensor", input_tensor)])
    m, n = input_tensor.shape
    _check_rows(name, ctx, m, OpsAssertionError)
    _check_output(name, ctx, output_tensor, m, n, OpsAssertionError)
    _check_on_heap(name, ctx, "input_tensor", input_tensor)
    world = int(ctx.get_num_ranks())
    rows = m // world
    launch_tiling(name, world, rows, {"block_m": block_m, "block_n": block_n, "num_sms": num_sms, "num_warps": num_warps})
    output_tensor.copy_(reduce_own_rows(ctx, input_tensor, rows))


def _check_operands(name, ctx, output_tensor, A, B):
    """Iris's checks of the GEMM form (its ValueErrors), before anything is allocated or moved."""
    _check_matrices(name, ctx, None, [("A", A), ("B", B)])
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match (B is laid out "
                      "(K_local, N), not (N, K_local))")
    _check_rows(name, ctx, m, OpsError)
    _check_output(name, ctx, output_tensor, m, n, OpsError)
    return m, n, k


def _check_staging(name, ctx, staging_buffer, m, n, dtype):
    """A caller's staging buffer: the GEMM writes it whole and peers read it, so it must be the
    (M, N) product's shape and dtype, on the heap."""
    if not isinstance(staging_buffer, torch.Tensor):
        _refuse(name, f"staging_buffer is a {type(staging_buffer).__name__}; give an (M, N) = ({m}, {n}) {dtype} "
                      "tensor on the symmetric heap (or None)")
    if tuple(staging_buffer.shape) != (m, n) or staging_buffer.dtype != dtype:
        _refuse(name, f"staging_buffer is {tuple(staging_buffer.shape)} {staging_buffer.dtype}; it must be "
                      f"(M, N) = ({m}, {n}) {dtype}, A's and B's dtype")
    _check_on_heap(name, ctx, "staging_buffer", staging_buffer)


def _bind(name, ctx, workspace, staging_buffer, m, n, k, dtype):
    """The workspace with its staging buffer for (M, N, K, dtype): the caller's staging_buffer
    when given; else the workspace's own when it is the right shape and dtype on the heap; else a
    new (M, N) heap tensor (collective). Returns (workspace, whether it allocated)."""
    _check_workspace(name, workspace)
    if staging_buffer is not None:
        _check_staging(name, ctx, staging_buffer, m, n, dtype)
        workspace = workspace if workspace is not None else FusedWorkspace()
        workspace.aux_buffer = staging_buffer
    before = None if workspace is None else workspace.aux_buffer
    # _prepared leaves the operation's other fields alone: `locks` of an all-reduce that shared
    # this workspace stays bound, as in Iris.
    workspace = _prepared(ctx, workspace, _OPERATION, (m, n, k), dtype, aux_shape=(m, n))
    return workspace, workspace.aux_buffer is not before


def matmul_reduce_scatter_fast_preamble(ctx, output_tensor, A, B, staging_buffer=None, workspace=None):
    """The workspace matmul_reduce_scatter_fast(output_tensor, A, B) reuses: its aux_buffer is the
    (M, N) staging buffer on the heap, the caller's ``staging_buffer`` or one allocated here
    (collectively, then a barrier, as Iris's). Returns the FusedWorkspace."""
    name = "matmul_reduce_scatter_fast_preamble"
    m, n, k = _check_operands(name, ctx, output_tensor, A, B)
    workspace, allocated = _bind(name, ctx, workspace, staging_buffer, m, n, k, A.dtype)
    if allocated:  # only an allocation needs every rank to have made it before peers read it
        ctx.barrier()
    return workspace


def matmul_reduce_scatter_fast(ctx, output_tensor, A, B, staging_buffer=None, workspace=None, sync=True,
                               async_op=False, block_m=None, block_n=None, num_sms=None, num_warps=None):
    """output_tensor (M / W, N) = rows [r M / W, (r + 1) M / W) of the sum over ranks of A @ B (A
    this rank's (M, K_local) shard of K, B its (K_local, N); either may lie off the heap): the
    product (torch, one rounding) into the (M, N) heap staging buffer, then fast_reduce_scatter.
    The staging buffer is ``staging_buffer``, else the workspace's, else allocated as the preamble
    does. ``sync`` and ``async_op`` are Iris's cross-rank guards, which aperture's collective
    always gives (module docstring). Returns the workspace, to pass back. Collective."""
    name = _OPERATION
    for flag, value in (("sync", sync), ("async_op", async_op)):
        if not isinstance(value, bool):
            _refuse(name, f"{flag}={value!r}; give True or False")
    m, n, k = _check_operands(name, ctx, output_tensor, A, B)
    world = int(ctx.get_num_ranks())
    # Checked before the staging buffer may be allocated (fast_reduce_scatter checks them again).
    launch_tiling(name, world, m // world, {"block_m": block_m, "block_n": block_n, "num_sms": num_sms,
                                            "num_warps": num_warps})
    workspace, allocated = _bind(name, ctx, workspace, staging_buffer, m, n, k, A.dtype)
    if allocated:
        # Made at every call, this allocation would grow the heap at every call, so, as Iris,
        # say so. (Iris's preamble warns too; here its allocation, made once, is the intended use.)
        logger.warning("iris.ops.%s: allocated a %s (%d, %d) staging buffer on the symmetric heap, collectively "
                       "(every rank, then a barrier). Allocate it once, outside the hot loop and any graph "
                       "capture: pass the returned workspace back, or call %s_preamble, or pass staging_buffer=.",
                       name, A.dtype, m, n, name)
        ctx.barrier()
    torch.matmul(A, B, out=workspace.aux_buffer)
    fast_reduce_scatter(ctx, output_tensor, workspace.aux_buffer, block_m=block_m, block_n=block_n,
                        num_sms=num_sms, num_warps=num_warps)
    return workspace


__all__ = ["matmul_reduce_scatter_fast", "matmul_reduce_scatter_fast_preamble", "fast_reduce_scatter"]
