"""``iris.ops.all_reduce_fast``: Iris's pull all-reduce of a heap tensor, one-shot or two-shot,
and a GEMM followed by it, at Iris's module path (``from iris.ops.all_reduce_fast import ...``;
Iris's ``iris/ops/__init__.py`` does not re-export these names).

On aperture each is Communicator traffic plus a torch sum in fp32, rounded once, as Iris's
kernels add (ops/_pull_collectives.py): one-shot gathers every rank's whole tensor; two-shot
exchanges blocks of rows, each rank reduces its own into ``scratch``, then the blocks are
gathered. The results and return values are Iris's. The launch knobs (``block_m``,
``block_n``, ``num_sms``, ``num_warps``, ``spin_limit``) are checked as Iris's launch takes
them and steer nothing here; block_m still decides the two-shot tile constraint Iris asserts.
"""

import numbers

import torch

from ._gemm_collective import OpsAssertionError, _check_matrices, _check_on_heap, _refuse
from ._pull_collectives import (
    LAUNCH_KNOBS,
    check_keywords,
    check_row_blocks,
    check_scratch,
    gather_and_sum,
    launch_tiling,
    two_shot,
)

_VARIANTS = ("one_shot", "two_shot")
# What any function here reads from **kw (matmul_all_reduce_fast hands its **kw on to either).
_KEYWORDS = LAUNCH_KNOBS + ("scratch", "use_barrier")


def _shapes(name, ctx, output_tensor, input_tensor, kw):
    check_keywords(name, kw, _KEYWORDS)
    _check_matrices(name, ctx, output_tensor, [("input_tensor", input_tensor)])
    m, n = input_tensor.shape
    if tuple(output_tensor.shape) != (m, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be input_tensor's ({m}, {n})",
                OpsAssertionError)
    return m, n


def one_shot_all_reduce(ctx, output_tensor, input_tensor, **kw):
    """output_tensor (M, N) = the sum over ranks of input_tensor (M, N, on the heap), added in
    fp32 and rounded once. Returns None, as Iris's. Collective."""
    name = "one_shot_all_reduce"
    m, _ = _shapes(name, ctx, output_tensor, input_tensor, kw)
    _check_on_heap(name, ctx, "input_tensor", input_tensor)
    launch_tiling(name, int(ctx.get_num_ranks()), m, kw)
    output_tensor.copy_(gather_and_sum(ctx, input_tensor))


def _two_shot_scratch(name, ctx, m, n, dtype, scratch, kw):
    """Two-shot's checks of an (m, n) reduction (all before any collective), then the heap
    buffer each rank's reduced rows go to: `scratch`, or, as in Iris, a new one when None (pass
    the returned one back to reuse it)."""
    world = int(ctx.get_num_ranks())
    check_row_blocks(name, world, m)
    check_row_blocks(name, world, m, launch_tiling(name, world, m // world, kw)["block_m"])
    check_scratch(name, ctx, scratch, m, n, dtype)
    return scratch if scratch is not None else ctx.zeros((m, n), dtype=dtype)


def two_shot_all_reduce(ctx, output_tensor, input_tensor, scratch=None, use_barrier=False, **kw):
    """output_tensor (M, N) = the sum over ranks of input_tensor (M, N, on the heap). Rank r adds
    rows [r M / W, (r + 1) M / W) in fp32, rounds them once into those rows of ``scratch`` (an
    (M, N) heap tensor; allocated when None), and every rank gathers the W blocks. Returns
    scratch. M must divide by W, and M / W by block_m, as Iris asserts. ``use_barrier`` puts a
    ctx.barrier() between the two halves, as in Iris (here each half is a complete collective
    already). Collective."""
    name = "two_shot_all_reduce"
    m, n = _shapes(name, ctx, output_tensor, input_tensor, kw)
    _check_on_heap(name, ctx, "input_tensor", input_tensor)
    scratch = _two_shot_scratch(name, ctx, m, n, input_tensor.dtype, scratch, kw)
    return two_shot(ctx, output_tensor, input_tensor, scratch, m // int(ctx.get_num_ranks()), bool(use_barrier))


def matmul_all_reduce_fast(ctx, output_tensor, A, B, variant="one_shot", **kw):
    """output_tensor (M, N) = the sum over ranks of A @ B (A this rank's (M, K_local) shard of K,
    B its (K_local, N)): the product (torch, one rounding), then one_shot_all_reduce or
    two_shot_all_reduce with **kw. Returns None for "one_shot" and the scratch buffer for
    "two_shot", as Iris's. The product is an ordinary torch tensor here (Iris allocates it on the
    heap at every call; the Communicator stages it). Collective."""
    name = "matmul_all_reduce_fast"
    check_keywords(name, kw, _KEYWORDS)
    if variant not in _VARIANTS:
        _refuse(name, f"variant={variant!r}; give one of {list(_VARIANTS)}")
    _check_matrices(name, ctx, output_tensor, [("A", A), ("B", B)])
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match")
    if tuple(output_tensor.shape) != (m, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be ({m}, {n}) (A's rows, B's columns)",
                OpsAssertionError)
    world = int(ctx.get_num_ranks())
    if variant == "two_shot":
        scratch = _two_shot_scratch(name, ctx, m, n, A.dtype, kw.get("scratch"), kw)
        return two_shot(ctx, output_tensor, A @ B, scratch, m // world, bool(kw.get("use_barrier", False)))
    launch_tiling(name, world, m, kw)
    output_tensor.copy_(gather_and_sum(ctx, A @ B))
    return None


def fused_two_shot_all_reduce(ctx, output_tensor, input_tensor, workspace=None, spin_limit=100_000_000, **kw):
    """two_shot_all_reduce's result, with the workspace of Iris's one-kernel form (which Iris's
    own module marks deprecated): a dict of "scratch" (the (M, N) heap buffer), "flags" (Iris's
    per-tile counters: an int32 heap tensor of one entry per tile, unused here), "iteration" (the
    calls made with it) and "shape" (M, N, block_m, block_n); made again, collectively, when the
    shape or tiling changes. ``spin_limit`` bounds Iris's device wait: checked, unused. Returns
    the workspace. Collective."""
    name = "fused_two_shot_all_reduce"
    m, n = _shapes(name, ctx, output_tensor, input_tensor, kw)
    _check_on_heap(name, ctx, "input_tensor", input_tensor)
    if isinstance(spin_limit, bool) or not isinstance(spin_limit, numbers.Integral):
        _refuse(name, f"spin_limit={spin_limit!r}; give an int")
    if workspace is not None and not isinstance(workspace, dict):
        _refuse(name, f"workspace is a {type(workspace).__name__}; give the dict an earlier call returned (or None)")
    world = int(ctx.get_num_ranks())
    check_row_blocks(name, world, m)
    tiling = launch_tiling(name, world, m // world, kw)
    block_m, block_n = tiling["block_m"], tiling["block_n"]
    check_row_blocks(name, world, m, block_m)
    workspace = {} if workspace is None else workspace
    if workspace.get("shape") != (m, n, block_m, block_n):
        tiles = (m // block_m) * -(-n // block_n)
        workspace.update(scratch=ctx.zeros((m, n), dtype=input_tensor.dtype),
                         flags=ctx.zeros((tiles,), dtype=torch.int32), iteration=0, shape=(m, n, block_m, block_n))
        ctx.barrier()
    elif workspace["scratch"].dtype != input_tensor.dtype:
        _refuse(name, f"workspace holds a {workspace['scratch'].dtype} scratch buffer and input_tensor is "
                      f"{input_tensor.dtype}; pass workspace=None to make one for this dtype")
    workspace["iteration"] += 1
    two_shot(ctx, output_tensor, input_tensor, workspace["scratch"], m // world)
    return workspace


__all__ = ["one_shot_all_reduce", "two_shot_all_reduce", "matmul_all_reduce_fast", "fused_two_shot_all_reduce"]
