"""``iris.ops.matmul_all_reduce_hbm_buffer``: GEMM + two-shot all-reduce through heap staging
buffers, at Iris's module path (``from iris.ops.matmul_all_reduce_hbm_buffer import ...``; not
re-exported by Iris's ``iris/ops/__init__.py``).

Iris runs one kernel of three pools (GEMM, reduce-scatter, all-gather) handing tiles on through
per-tile flags. Here the same stages run one after another (ops/_pull_collectives.py): the
product (torch, one rounding) into the workspace's ``staged_c``; each rank's block of rows
(whole block_m tiles, Iris's shard) added over ranks in fp32 and rounded once into ``scratch``;
the blocks gathered into the output. The workspace is Iris's dict with Iris's buffers, so a
program that reads ``staged_c`` or ``scratch`` or counts ``iteration`` sees what Iris leaves;
its flag and counter buffers are allocated as Iris's are and stay zero. The launch knobs
(block_k, the three pools' SM counts, num_warps, mfma, tiles_per_flag, flag_stride,
spin_limit) are checked and steer nothing; block_m and block_n still decide Iris's shards and
its ValueErrors.
"""

import numbers

import torch

from ._gemm_collective import DTYPES, OpsAssertionError, _check_matrices, _refuse
from ._pull_collectives import check_positive_int, two_shot

# Iris's spacing of its flags, in int32s (a cache line each); sizes the flag buffers.
FLAG_STRIDE = 32


def _cdiv(a, b):
    return -(-a // b)


def _check_blocks(name, block_m, block_n):
    check_positive_int(name, "block_m", block_m, power_of_two=True)
    check_positive_int(name, "block_n", block_n, power_of_two=True)


def _check_shards(name, world, m, block_m):
    """Iris's shard of a rank is a run of whole M-tiles; the tiles must split evenly."""
    if _cdiv(m, block_m) % world:
        _refuse(name, f"M-tiles ({_cdiv(m, block_m)} of block_m={block_m} over M={m}) must divide evenly across "
                      f"{world} ranks; pick a block_m that divides M / {world}")


def matmul_all_reduce_hbm_buffer_preamble(ctx, M, N, dtype, block_m=128, block_n=128):
    """Iris's workspace for an (M, N) output of `dtype` tiled block_m x block_n: a dict of
    "staged_c" and "scratch" ((M, N) heap tensors), "gemm_flags" and "rs_flags" (int32, one cache
    line per tile), "ag_next", "own_next", "rs_done" (one int32 each), "iteration" (0),
    "block_m", "block_n". ValueError (OpsError) when the M-tiles do not divide by world_size.
    Allocates on the heap: collective."""
    name = "matmul_all_reduce_hbm_buffer_preamble"
    check_positive_int(name, "M", M)
    check_positive_int(name, "N", N)
    if dtype not in DTYPES:
        _refuse(name, f"dtype={dtype}; the operations take float16, bfloat16 or float32")
    _check_blocks(name, block_m, block_n)
    _check_shards(name, int(ctx.get_num_ranks()), M, block_m)
    tiles = _cdiv(M, block_m) * _cdiv(N, block_n)
    return {
        "staged_c": ctx.zeros((M, N), dtype=dtype),
        "scratch": ctx.zeros((M, N), dtype=dtype),
        "gemm_flags": ctx.zeros((tiles * FLAG_STRIDE,), dtype=torch.int32),
        "rs_flags": ctx.zeros((tiles * FLAG_STRIDE,), dtype=torch.int32),
        "ag_next": ctx.zeros((1,), dtype=torch.int32),
        "own_next": ctx.zeros((1,), dtype=torch.int32),
        "rs_done": ctx.zeros((1,), dtype=torch.int32),
        "iteration": 0,
        "block_m": block_m,
        "block_n": block_n,
    }


def _check_workspace(name, workspace, m, n, dtype, block_m, block_n):
    """A workspace passed back must be the preamble's for this shape, dtype and tiling (Iris's
    kernel would index its buffers by the call's tiles)."""
    needed = {"staged_c", "scratch", "iteration", "block_m", "block_n"}
    if not isinstance(workspace, dict) or not needed <= set(workspace):
        _refuse(name, f"workspace is a {type(workspace).__name__} without the preamble's buffers; give the dict "
                      "matmul_all_reduce_hbm_buffer_preamble or an earlier call returned (or None)")
    staged = workspace["staged_c"]
    made_for = (tuple(staged.shape), staged.dtype, workspace["block_m"], workspace["block_n"])
    if made_for != ((m, n), dtype, block_m, block_n):
        _refuse(name, f"workspace was prepared for {made_for[0]} {made_for[1]} with block_m={made_for[2]}, "
                      f"block_n={made_for[3]}; this call is ({m}, {n}) {dtype} with block_m={block_m}, "
                      f"block_n={block_n}: pass the same tiling, or prepare another workspace")


def matmul_all_reduce_hbm_buffer(ctx, output_tensor, A, B, workspace=None, block_m=128, block_n=128, block_k=64,
                                 num_gemm_sms=128, num_rs_sms=64, num_ag_sms=64, num_warps=8, mfma=32,
                                 tiles_per_flag=1, flag_stride=32, skip_gemm=False, spin_limit=1_000_000,
                                 trace=False):
    """output_tensor (M, N) = the sum over ranks of A @ B (A this rank's (M, K_local) shard of K,
    B its (K_local, N)), each rank's product rounded once into staged_c, the sum of the partials
    added in fp32 and rounded once (rank r's block of rows also left in scratch). A and the
    output may lie off the heap. ``skip_gemm`` drops the product as Iris does (staged_c zeroed, so
    the output is zero); ``trace`` (Iris's per-tile timestamps from its kernel) is refused.
    Returns the workspace (made by the preamble, then a barrier, when None). Collective."""
    name = "matmul_all_reduce_hbm_buffer"
    _check_matrices(name, ctx, output_tensor, [("A", A), ("B", B)])
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match", OpsAssertionError)
    if tuple(output_tensor.shape) != (m, n):
        _refuse(name, f"output_tensor is {tuple(output_tensor.shape)}; it must be ({m}, {n}) (A's rows, B's columns)",
                OpsAssertionError)
    _check_blocks(name, block_m, block_n)
    check_positive_int(name, "block_k", block_k, power_of_two=True)
    check_positive_int(name, "num_warps", num_warps, power_of_two=True)
    for knob, value in (("num_gemm_sms", num_gemm_sms), ("num_rs_sms", num_rs_sms), ("num_ag_sms", num_ag_sms),
                        ("tiles_per_flag", tiles_per_flag), ("flag_stride", flag_stride)):
        check_positive_int(name, knob, value)
    for knob, value in (("mfma", mfma), ("spin_limit", spin_limit)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            _refuse(name, f"{knob}={value!r}; give a non-negative int")
    if trace:
        _refuse(name, "trace=True asks for the per-tile timestamps of Iris's fused kernel, which aperture does not "
                      "run; time the call with torch's profiler or iris.do_bench instead")
    world = int(ctx.get_num_ranks())
    _check_shards(name, world, m, block_m)
    tiles_per_shard = (_cdiv(m, block_m) // world) * _cdiv(n, block_n)
    if tiles_per_shard % tiles_per_flag:
        _refuse(name, f"tiles_per_flag ({tiles_per_flag}) must divide the per-shard tile count ({tiles_per_shard})")
    if workspace is None:
        workspace = matmul_all_reduce_hbm_buffer_preamble(ctx, m, n, output_tensor.dtype, block_m, block_n)
        ctx.barrier()
    else:
        _check_workspace(name, workspace, m, n, output_tensor.dtype, block_m, block_n)
    for counter in ("ag_next", "own_next", "rs_done"):  # Iris resets its per-launch counters
        if counter in workspace:
            workspace[counter].zero_()
    workspace["iteration"] += 1
    staged_c = workspace["staged_c"]
    if skip_gemm:
        staged_c.zero_()
    else:
        torch.matmul(A, B, out=staged_c)
    # Rank r's shard: M-tiles [r T, (r + 1) T), T = M-tiles / W; the last may reach past M.
    shard_rows = (_cdiv(m, block_m) // world) * block_m
    two_shot(ctx, output_tensor, staged_c, workspace["scratch"], shard_rows)
    return workspace


__all__ = ["matmul_all_reduce_hbm_buffer", "matmul_all_reduce_hbm_buffer_preamble"]
