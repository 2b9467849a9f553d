"""Iris's fused GEMM operations (iris.ccl.all_gather_gemm, gemm_reduce_scatter) on
aperture.OverlappedGemm, in every rank of the job, against torch's product of the gathered
operands; what OverlappedGemm cannot take (float16, float32, odd shapes), run unfused; operands
that do not fit each other, refused with FusedError (aperture.Error and ValueError). GPU only
(test_iris_ccl.py runs the unfused path on the host heap)."""

import contextlib

import pytest
import torch

import aperture
import aperture.iris as iris
from aperture.iris.ccl import _fused

pytestmark = [pytest.mark.iris, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="OverlappedGemm needs a GPU")]

HEAP = 64 << 20


@pytest.fixture(scope="module")
def shmem(team):
    return iris.iris(HEAP, team=team)


def operand(rank, rows, cols, salt):
    """Rank `rank`'s bf16 operand, different per rank and element; entries of size 1/sqrt(cols)
    keep products of magnitude about 1."""
    g = torch.Generator().manual_seed(rank * 7919 + salt)
    return (torch.randn(rows, cols, generator=g) / cols ** 0.5).to(torch.bfloat16).cuda()


# bf16 products: each rank's partial is rounded to bf16 by cuBLASLt only once the fp32 sum over
# ranks is complete (OverlappedGemm sums fp32 partials and rounds once); the reference is the fp32
# product, so the difference is one bf16 rounding (2**-9 relative) of outputs of magnitude about
# 1, plus fp32 summation order: 2**-6 absolute and relative leaves room.
TOL = dict(rtol=2 ** -6, atol=2 ** -6)


def test_all_gather_gemm_gathers_the_k_shards(shmem, team):
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    m, k_local, n = 128, 128, 192
    shard = operand(rank, m, k_local, 1)
    weight = operand(99, world * k_local, n, 2)  # replicated: the same seed on every rank
    out = shmem.zeros((m, n), dtype=torch.bfloat16)
    got = _fused.all_gather_gemm(shmem, out, shard, weight)
    assert got is out
    gathered = torch.cat([operand(q, m, k_local, 1) for q in range(world)], dim=1)
    torch.testing.assert_close(out.float(), gathered.float() @ weight.float(), **TOL)


def test_gemm_reduce_scatter_keeps_this_ranks_columns(shmem, team):
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    tokens, h_shard, k = 128, 192, 64 * world * 2
    inp = operand(rank, tokens, h_shard, 3)
    w = operand(rank, h_shard, k, 4)
    out = _fused.gemm_reduce_scatter(shmem, inp, w)
    total = sum(operand(q, tokens, h_shard, 3).float() @ operand(q, h_shard, k, 4).float() for q in range(world))
    shard = k // world
    assert out.shape == (tokens, shard) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), total[:, rank * shard:(rank + 1) * shard], **TOL)


def test_module_forms_give_the_methods_results(shmem, team):
    # Iris's module forms, the Iris instance after the tensors: iris.ccl.fused_ag_gemm and
    # iris.ccl.fused_gemm_rs (with its preamble and workspace type).
    from aperture.iris.ccl import fused_ag_gemm, fused_gemm_rs
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    m, k_local, n = 64 * world, 64, 128
    shard = operand(rank, m, k_local, 11)
    weight = operand(98, world * k_local, n, 12)
    out = shmem.zeros((m, n), dtype=torch.bfloat16)
    fused_ag_gemm.all_gather_gemm(out, shard, weight, shmem)
    gathered = torch.cat([operand(q, m, k_local, 11) for q in range(world)], dim=1)
    torch.testing.assert_close(out.float(), gathered.float() @ weight.float(), **TOL)
    tokens, h_shard, k = 64, 128, 64 * world
    inp, w = operand(rank, tokens, h_shard, 13), operand(rank, h_shard, k, 14)
    workspace = fused_gemm_rs.gemm_reduce_scatter_preamble(inp, w, shmem)
    assert isinstance(workspace, fused_gemm_rs.GemmReduceScatterWorkspace)
    got = fused_gemm_rs.gemm_reduce_scatter(inp, w, shmem, workspace=workspace)
    total = sum(operand(q, tokens, h_shard, 13).float() @ operand(q, h_shard, k, 14).float() for q in range(world))
    shard_cols = k // world
    torch.testing.assert_close(got.float(), total[:, rank * shard_cols:(rank + 1) * shard_cols], **TOL)
    shmem.barrier()


def test_what_overlapped_gemm_cannot_take_runs_unfused(shmem, team):
    # float32 and float16 operands, and shapes that are not multiples of 64, run unfused (matmul
    # and one Communicator call), as Iris's kernels take them.
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    for dtype, (m, k_local, n) in ((torch.float32, (64, 64, 64)), (torch.float16, (48, 80, 72)),
                                   (torch.bfloat16, (7, 48, 40))):
        shard = operand(rank, m, k_local, 21).to(dtype)
        weight = operand(97, world * k_local, n, 22).to(dtype)
        out = torch.zeros((m, n), dtype=dtype, device="cuda")
        _fused.all_gather_gemm(shmem, out, shard, weight)
        gathered = torch.cat([operand(q, m, k_local, 21).to(dtype) for q in range(world)], dim=1)
        torch.testing.assert_close(out.float(), gathered.float() @ weight.float(), **TOL)
        tokens, h_shard, k = m, k_local, 8 * world
        inp, w = operand(rank, tokens, h_shard, 23).to(dtype), operand(rank, h_shard, k, 24).to(dtype)
        got = _fused.gemm_reduce_scatter(shmem, inp, w)
        total = sum(operand(q, tokens, h_shard, 23).to(dtype).float() @ operand(q, h_shard, k, 24).to(dtype).float()
                    for q in range(world))
        assert got.dtype == dtype and got.shape == (tokens, 8)
        torch.testing.assert_close(got.float(), total[:, rank * 8:(rank + 1) * 8], **TOL)
    shmem.barrier()


def test_operands_that_do_not_fit_are_refused_as_iris_does(shmem, team):
    world = shmem.get_num_ranks()
    with pytest.raises(ValueError, match="inner dimension mismatch") as refused:
        _fused.gemm_reduce_scatter(shmem, operand(0, 64, 64, 5), operand(0, 128, 64 * world, 6))
    assert isinstance(refused.value, aperture.Error)
    with pytest.raises(ValueError, match="must be divisible by world_size") if world > 1 else contextlib.nullcontext():
        _fused.gemm_reduce_scatter(shmem, operand(0, 64, 64, 5), operand(0, 64, 64 * world + 1, 6))
    with pytest.raises(ValueError, match="must equal world_size"):
        _fused.all_gather_gemm(shmem, torch.zeros(64, 64, dtype=torch.bfloat16, device="cuda"),
                               operand(0, 64, 64, 7), operand(0, 64 * world + 64, 64, 8))
    with pytest.raises(ValueError, match="different dtypes"):
        _fused.gemm_reduce_scatter(shmem, operand(0, 64, 64, 5).float(), operand(0, 64, 64 * world, 6))
    shmem.barrier()

