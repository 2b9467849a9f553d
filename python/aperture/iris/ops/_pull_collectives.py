"""The collectives of Iris's pull kernels (all_reduce_fast, reduce_scatter_auto,
matmul_all_reduce_hbm_buffer) on the context's Communicator, and the launch tiling those kernels
take.

Iris's kernels read every rank's partial where it lies, add the partials in fp32 and round once
to the element type. Communicator.all_reduce and reduce_scatter round at every step, as NCCL
does, so here the partials travel as they are (all_gather, all_to_all) and torch adds them in
fp32: the sum Iris computes, rounded once. The data moved is the same as in Iris:

- one-shot: every rank's whole partial comes to every rank (W x M x N elements per rank);
- two-shot: each rank receives its block of rows from every rank, adds them, and the reduced
  blocks are then gathered by every rank (2 (W - 1) / W x M x N, as a ring moves).
"""

import numbers
import warnings

import torch

from ._gemm_collective import OpsAssertionError, _check_on_heap, _refuse

# Iris's tiling of its pull kernels per world size: block_m, block_n, num_sms, num_warps.
_TILING_BY_WORLD = {2: (128, 64, 196, 4), 4: (64, 64, 32, 4), 8: (32, 64, 32, 4)}
_TILING_OTHERWISE = (64, 64, 64, 4)
LAUNCH_KNOBS = ("block_m", "block_n", "num_sms", "num_warps")
# Triton needs these as powers of two (tl.arange's length, the warps of a program).
_POWERS_OF_TWO = ("block_m", "block_n", "num_warps")


def launch_tiling(name, world, rows, knobs):
    """The tiling Iris's pull kernel launches with over blocks of `rows` rows: its table's for this
    world size, block_m halved while it exceeds `rows` (down to 4 at least); a knob given in
    `knobs` replaces the table's, and one given as None or 0 leaves it (Iris reads each as
    ``kw.get(knob) or default``). A value Iris's launch would fail on is refused here. Nothing of
    it steers aperture's collectives; it decides only the tile constraints Iris asserts."""
    tiling = dict(zip(LAUNCH_KNOBS, _TILING_BY_WORLD.get(world, _TILING_OTHERWISE)))
    while tiling["block_m"] > rows and tiling["block_m"] > 4:
        tiling["block_m"] //= 2
    for knob in LAUNCH_KNOBS:
        value = knobs.get(knob)
        if value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value == 0):
            continue
        check_positive_int(name, knob, value, power_of_two=knob in _POWERS_OF_TWO)
        tiling[knob] = int(value)
    return tiling


def check_positive_int(name, knob, value, power_of_two=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        _refuse(name, f"{knob}={value!r}; give a positive int")
    if power_of_two and value & (value - 1):
        _refuse(name, f"{knob}={value}; give a power of two (Triton's tiles and warps come in powers of two)")


def check_keywords(name, knobs, known):
    """Iris's functions of this kind take their launch options as **kwargs and drop any others
    unread, so a program may pass keywords meant for a sibling; those run here too. A name none
    of them reads (a misspelt knob, perhaps) is dropped as in Iris, with a warning that names it."""
    unknown = sorted(set(knobs) - set(known))
    if unknown:
        warnings.warn(f"aperture: iris.ops.{name}: keyword argument(s) {unknown} are not read by this function and "
                      f"are ignored, as in Iris; it reads {sorted(known)}", UserWarning, stacklevel=3)


def check_row_blocks(name, world, m, block_m=None):
    """Two-shot and the one-shot reduce-scatter split M into one block of rows per rank, each a
    whole number of block_m tiles (Iris asserts both)."""
    if m % world:
        _refuse(name, f"M = {m} rows must be divisible by world_size ({world}): each rank reduces M / world_size "
                      "rows", OpsAssertionError)
    if block_m is not None and (m // world) % block_m:
        _refuse(name, f"M / world_size = {m // world} rows must be a multiple of block_m = {block_m} (Iris's tiles of "
                      "a rank's rows); pass a block_m= that divides it", OpsAssertionError)


def check_scratch(name, ctx, scratch, m, n, dtype):
    """A scratch buffer the caller passed (peers read it, so on the heap), or None."""
    if scratch is None:
        return
    if not isinstance(scratch, torch.Tensor) or tuple(scratch.shape) != (m, n) or scratch.dtype != dtype:
        is_tensor = isinstance(scratch, torch.Tensor)
        what = f"{tuple(scratch.shape)} {scratch.dtype}" if is_tensor else type(scratch).__name__
        _refuse(name, f"scratch is {what}; give the ({m}, {n}) {dtype} tensor an earlier call returned (or None)")
    _check_on_heap(name, ctx, "scratch", scratch)


def gather_and_sum(ctx, partial):
    """One-shot: the sum over ranks of `partial` (M, N), added in fp32 (returned in fp32).

    A partial on the heap is read where it lies (at the same offset on every rank, as Iris's
    kernels read it); any other is staged by the Communicator."""
    every = torch.empty((int(ctx.get_num_ranks()),) + tuple(partial.shape), dtype=partial.dtype,
                        device=partial.device)
    ctx._comm().all_gather(every, partial.contiguous())
    return every.sum(0, dtype=torch.float32)


def reduce_own_rows(ctx, partial, block_rows):
    """This rank's rows [r B, (r + 1) B) of the sum over ranks of `partial` (B = block_rows),
    added in fp32 (returned in fp32, B rows). `partial` has at most W B rows; rows past its
    end count as zero (a last tile reaching past M)."""
    world = int(ctx.get_num_ranks())
    m, n = partial.shape
    if m != world * block_rows:
        padded = partial.new_zeros((world * block_rows, n))
        padded[:m] = partial
        partial = padded
    received = torch.empty((world, block_rows, n), dtype=partial.dtype, device=partial.device)
    ctx._comm().all_to_all(received, partial.contiguous())  # received[q] = rank q's rows of this rank's block
    return received.sum(0, dtype=torch.float32)


def two_shot(ctx, out, partial, scratch, block_rows, barrier_between=False):
    """out (M, N) = the sum over ranks of `partial` (M, N): each rank adds its block of rows in fp32
    and rounds it to partial's dtype, into its rows of `scratch` (where Iris's kernel leaves it),
    then every rank gathers the blocks."""
    rank, world = int(ctx.get_rank()), int(ctx.get_num_ranks())
    m, n = partial.shape
    own = reduce_own_rows(ctx, partial, block_rows).to(partial.dtype)
    first, end = min(m, rank * block_rows), min(m, (rank + 1) * block_rows)
    scratch[first:end] = own[:end - first]
    if barrier_between:
        ctx.barrier()
    # `own` is a fresh tensor off the heap, so the Communicator stages it: a block of the heap
    # buffer sits at another offset on each rank, and a heap tensor is read at this rank's offset.
    if out.is_contiguous() and m == world * block_rows:
        ctx._comm().all_gather(out, own)
    else:
        every = torch.empty((world * block_rows, n), dtype=own.dtype, device=own.device)
        ctx._comm().all_gather(every, own)
        out.copy_(every[:m])
    return scratch
