"""``iris.ops.reduce_scatter_auto``: Iris's reduce-scatter by rows that picks its path by size, a
one-shot pull for small messages and RCCL's ring for large ones, and a GEMM followed by it, at
Iris's module path (``from iris.ops.reduce_scatter_auto import ...``; not re-exported by Iris's
``iris/ops/__init__.py``).

Both paths give rank r rows [r M / W, (r + 1) M / W) of the sum over ranks of an (M, N) input.
On aperture (ops/_pull_collectives.py) the one-shot path is Communicator.all_to_all of the row
blocks added in fp32 and rounded once, as Iris's kernel adds; the ring path, where Iris calls
torch.distributed's reduce_scatter_tensor (RCCL), is Communicator.reduce_scatter, which rounds
at every step as RCCL does. The choice is Iris's: one-shot below ``crossover_bytes`` per rank
(default 8 MiB, Iris's measurement on MI355X), or as ``force`` says. The launch knobs
(``block_m``, ``block_n``, ``num_sms``, ``num_warps``) are checked as Iris's launch takes them and
steer nothing here; block_m still decides the tile constraint Iris asserts on the one-shot path.
"""

import numbers

from ._gemm_collective import OpsAssertionError, _check_matrices, _check_on_heap, _refuse
from ._pull_collectives import LAUNCH_KNOBS, check_keywords, check_row_blocks, launch_tiling, reduce_own_rows

_CROSSOVER_BYTES_PER_RANK = 8 * 1024 * 1024
_FORCES = ("one_shot", "rccl")
# What any function here reads from **kwargs (matmul_reduce_scatter_auto hands them on).
_KEYWORDS = LAUNCH_KNOBS + ("crossover_bytes", "force")


def _shapes(name, ctx, output_tensor, input_tensor, kwargs):
    check_keywords(name, kwargs, _KEYWORDS)
    _check_matrices(name, ctx, output_tensor, [("input_tensor", input_tensor)])
    world = int(ctx.get_num_ranks())
    m, n = input_tensor.shape
    check_row_blocks(name, world, m)
    if tuple(output_tensor.shape) != (m // world, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be (M / world_size, N) = "
                      f"({m // world}, {n})", OpsAssertionError)
    return m, n


def _check_one_shot(name, ctx, input_tensor, kwargs):
    world = int(ctx.get_num_ranks())
    m = input_tensor.shape[0]
    check_row_blocks(name, world, m, launch_tiling(name, world, m // world, kwargs)["block_m"])


def one_shot_reduce_scatter(ctx, output_tensor, input_tensor, **kwargs):
    """output_tensor (M / W, N) = rows [r M / W, (r + 1) M / W) of the sum over ranks of
    input_tensor (M, N, on the heap), added in fp32 and rounded once. M must divide by W and
    M / W by block_m, as Iris asserts. Returns None, as Iris's. Collective."""
    name = "one_shot_reduce_scatter"
    _shapes(name, ctx, output_tensor, input_tensor, kwargs)
    _check_on_heap(name, ctx, "input_tensor", input_tensor)
    _check_one_shot(name, ctx, input_tensor, kwargs)
    output_tensor.copy_(reduce_own_rows(ctx, input_tensor, output_tensor.shape[0]))


def _takes_one_shot(name, output_tensor, crossover_bytes, force):
    """Iris's choice, its arguments checked first: one-shot or the ring as ``force`` says, else
    one-shot below the crossover (bytes of one rank's output)."""
    if force is not None and force not in _FORCES:
        _refuse(name, f"force={force!r}; give one of {list(_FORCES)} or None (choose by size)")
    if crossover_bytes is not None and (isinstance(crossover_bytes, bool)
                                        or not isinstance(crossover_bytes, numbers.Real)):
        _refuse(name, f"crossover_bytes={crossover_bytes!r}; give a number of bytes per rank (or None)")
    if force is not None:
        return force == "one_shot"
    threshold = _CROSSOVER_BYTES_PER_RANK if crossover_bytes is None else crossover_bytes
    return output_tensor.numel() * output_tensor.element_size() < threshold  # input and output: one dtype


def _reduce_scatter(name, ctx, output_tensor, partial, one_shot, kwargs):
    rows = output_tensor.shape[0]
    if one_shot:
        _check_one_shot(name, ctx, partial, kwargs)
        output_tensor.copy_(reduce_own_rows(ctx, partial, rows))
        return
    launch_tiling(name, int(ctx.get_num_ranks()), rows, kwargs)  # checked on this path too
    if output_tensor.is_contiguous():
        ctx._comm().reduce_scatter(output_tensor, partial.contiguous(), "sum")
    else:
        output_tensor.copy_(ctx._comm().reduce_scatter(output_tensor.contiguous(), partial.contiguous(), "sum"))


def reduce_scatter_auto(ctx, output_tensor, input_tensor, crossover_bytes=None, force=None, **kwargs):
    """output_tensor (M / W, N) = this rank's rows of the sum over ranks of input_tensor (M, N):
    one_shot_reduce_scatter's (input on the heap) below ``crossover_bytes`` per rank or with
    ``force="one_shot"``, else the ring path's (``force="rccl"``: Communicator.reduce_scatter,
    any input). Returns None, as Iris's. Collective."""
    name = "reduce_scatter_auto"
    _shapes(name, ctx, output_tensor, input_tensor, kwargs)
    one_shot = _takes_one_shot(name, output_tensor, crossover_bytes, force)
    if one_shot:
        _check_on_heap(name, ctx, "input_tensor", input_tensor)  # Iris's one-shot kernel reads it on the peers
    _reduce_scatter(name, ctx, output_tensor, input_tensor, one_shot, kwargs)


def matmul_reduce_scatter_auto(ctx, output_tensor, A, B, **kwargs):
    """output_tensor (M / W, N) = this rank's rows of the sum over ranks of A @ B (A this rank's
    (M, K_local) shard of K, B its (K_local, N)): the product (torch, one rounding), then
    reduce_scatter_auto with **kwargs. The product is an ordinary torch tensor here (Iris
    allocates it on the heap at every call). Returns None, as Iris's. Collective."""
    name = "matmul_reduce_scatter_auto"
    check_keywords(name, kwargs, _KEYWORDS)
    _check_matrices(name, ctx, output_tensor, [("A", A), ("B", B)])
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match")
    world = int(ctx.get_num_ranks())
    check_row_blocks(name, world, m)
    if tuple(output_tensor.shape) != (m // world, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be (M / world_size, N) = "
                      f"({m // world}, {n})", OpsAssertionError)
    one_shot = _takes_one_shot(name, output_tensor, kwargs.get("crossover_bytes"), kwargs.get("force"))
    _reduce_scatter(name, ctx, output_tensor, A @ B, one_shot, kwargs)


__all__ = ["one_shot_reduce_scatter", "reduce_scatter_auto", "matmul_reduce_scatter_auto"]
