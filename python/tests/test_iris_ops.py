"""Iris's fused GEMM + collective operations (iris.ops, ctx.ops) in every rank of the job: each
operation in float32, bfloat16 and float16, with inputs and biases that differ per rank and per
element, every output element checked against the float64 result of all ranks' inputs within a
bound derived from the dtype; workspace reuse, the preambles, async_op, each bad input, and
`import iris.ops` through the unmodified-program mechanism. Host memory (shm) in CI; the heap's
GPU where there is one."""

import textwrap

import pytest
import torch
# triton_world before aperture.iris (which imports triton): it decides whether Triton interprets
# this process's kernels, for every test file of the run.
import triton_world  # noqa: F401

import aperture
import aperture.iris as iris
from spawned_job import one_rank_job_only
from test_iris_ccl import run_through_shim

pytestmark = [pytest.mark.iris]
# The tests of a context run on the heap's device: a GPU's where there is one (marker gpu, so a
# GPU step requiring gpu runs them); the pure-host ones and the one-rank child program do not.
on_the_heap = pytest.mark.gpu if torch.cuda.is_available() else pytest.mark.iris

HEAP = 8 << 20
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(scope="module")
def ctx(team):
    return iris.iris(HEAP, team=team)


def matrix(rows, cols, seed):
    """A float64 matrix whose every element depends on (seed, row, column), of 4 significant bits
    (exact in float16 and bfloat16), so a misplaced row, column or rank shows."""
    i = torch.arange(rows, dtype=torch.int64).unsqueeze(1)
    j = torch.arange(cols, dtype=torch.int64).unsqueeze(0)
    return (((i * 31 + j * 17 + seed * 101) % 23 - 11) / 16).to(torch.float64)


def vector(n, seed):
    return matrix(1, n, seed).view(n)


def on_heap(ctx, value, dtype):
    t = ctx.zeros(tuple(value.shape), dtype=dtype)
    t.copy_(value.to(dtype))
    return t


# Unit roundoff (half an ulp, relative) of each dtype.
UNIT = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def bound(dtype, magnitude, roundings, k):
    """Each rank's product is accumulated in fp32 (k terms: k 2^-24 of the sum of |a b|) and rounded
    once to dtype; a reduction adds W partials in dtype, rounding at every step. With `roundings`
    the roundings an element went through (1 for a gather, W for a sum over W ranks), each within
    one unit of `magnitude` (the float64 sum of |a b| + |bias| over the terms), the error is at
    most (roundings + 1) units (one of slack) plus the fp32 accumulation's."""
    return ((roundings + 1) * UNIT[dtype] + k * 2.0 ** -24) * magnitude + 1e-9


def assert_within(got, reference, magnitude, dtype, roundings, k, what):
    err = (got.detach().cpu().double() - reference).abs()
    allowed = bound(dtype, magnitude, roundings, k)
    bad = err > allowed
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {bad.numel()} elements off, the first at "
                                 f"{tuple(int(x) for x in bad.nonzero()[0])}: got {got.double().cpu()[bad][0].item()}, "
                                 f"expected {reference[bad][0].item()} within {allowed[bad][0].item():.3g}")


def rank_inputs(r, m, k, n, step):
    """Rank r's A (m, k), B (k, n) and row bias (m) at `step` (each call of a test its own values)."""
    return matrix(m, k, 10 * r + step), matrix(k, n, 10 * r + step + 5), vector(m, 10 * r + step + 7)


def all_reduced_products(world, m, k, n, step, with_bias):
    """The sum over ranks of A @ B (+ bias by row) at `step`, and the sum of magnitudes that bounds
    its rounding error (float64)."""
    reference = torch.zeros(m, n, dtype=torch.float64)
    magnitude = torch.zeros(m, n, dtype=torch.float64)
    for q in range(world):
        aq, bq, biasq = rank_inputs(q, m, k, n, step)
        reference += aq @ bq + (biasq[:, None] if with_bias else 0)
        magnitude += aq.abs() @ bq.abs() + (biasq.abs()[:, None] if with_bias else 0)
    return reference, magnitude


# ---- every operation, every dtype, values per rank and per element ----------------------------

@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_all_reduce_sums_every_ranks_product_and_bias(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k, n = 12, 40, 20
    out = ctx.zeros((m, n), dtype=dtype)
    workspace = None
    for step, with_bias in ((0, False), (1, True)):
        a, b, bias = rank_inputs(rank, m, k, n, step)
        got = ctx.ops.matmul_all_reduce(out, on_heap(ctx, a, dtype), on_heap(ctx, b, dtype),
                                        bias=on_heap(ctx, bias, dtype) if with_bias else None, workspace=workspace)
        assert isinstance(got, iris.ops.FusedWorkspace) and got.operation == "matmul_all_reduce"
        if workspace is not None:
            assert got is workspace  # passed back: the same workspace, reused
        workspace = got
        reference, magnitude = all_reduced_products(world, m, k, n, step, with_bias)
        assert_within(out, reference, magnitude, dtype, world, k, f"matmul_all_reduce step {step}")


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_is_each_ranks_own_product_and_bias(ctx, dtype):
    # iris.ops.matmul: the local baseline of Iris's benchmarks; nothing crosses ranks, the output
    # may lie off the heap.
    from aperture.iris.ops.matmul import matmul, matmul_preamble
    rank = ctx.get_rank()
    m, k, n = 12, 40, 20
    workspace = matmul_preamble(ctx, on_heap(ctx, matrix(m, k, 0), dtype), on_heap(ctx, matrix(k, n, 0), dtype))
    assert workspace.operation == "matmul" and workspace.shape == (m, n, k)
    out = torch.zeros((m, n), dtype=dtype, device=ctx.get_device())
    for step, with_bias in ((0, False), (1, True)):
        a, b, bias = rank_inputs(rank, m, k, n, step)
        got = iris.ops.matmul(ctx, out, a.to(dtype).to(out.device), b.to(dtype).to(out.device),
                              bias=bias.to(dtype).to(out.device) if with_bias else None, workspace=workspace,
                              num_warps=4, num_stages=2)
        assert got is workspace
        reference = a @ b + (bias[:, None] if with_bias else 0)
        magnitude = a.abs() @ b.abs() + (bias.abs()[:, None] if with_bias else 0)
        assert_within(out, reference, magnitude, dtype, 1, k, f"matmul step {step}")
    with pytest.raises(ValueError, match="inner dimensions must match"):
        iris.ops.matmul(ctx, out, a.to(dtype).to(out.device), b[:-1].to(dtype).to(out.device))


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_matmul_gathers_the_k_shards_in_rank_order(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k_local, n = 10, 24, 18
    out = ctx.zeros((m, n), dtype=dtype)
    b_full = matrix(world * k_local, n, 77)  # replicated: the same on every rank
    workspace = None
    for step, with_bias in ((0, True), (1, False)):
        shard = matrix(m, k_local, 10 * rank + step)
        bias = vector(m, 50 + step)
        got = iris.ops.all_gather_matmul(ctx, out, on_heap(ctx, shard, dtype), on_heap(ctx, b_full, dtype),
                                         on_heap(ctx, bias, dtype) if with_bias else None, workspace=workspace)
        if workspace is not None:
            assert got is workspace and got.aux_buffer.data_ptr() == aux
        workspace, aux = got, got.aux_buffer.data_ptr()
        a_full = torch.cat([matrix(m, k_local, 10 * q + step) for q in range(world)], dim=1)
        reference = a_full @ b_full + (bias[:, None] if with_bias else 0)
        magnitude = a_full.abs() @ b_full.abs() + (bias.abs()[:, None] if with_bias else 0)
        assert_within(out, reference, magnitude, dtype, 1, world * k_local, f"all_gather_matmul step {step}")


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_all_gather_stacks_every_ranks_product_by_rank(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k, n = 6, 28, 14
    out = ctx.zeros((world * m, n), dtype=dtype)
    workspace = None
    for step, with_bias in ((0, True), (1, False)):
        a, b, bias = rank_inputs(rank, m, k, n, step)
        got = ctx.ops.matmul_all_gather(out, on_heap(ctx, a, dtype), on_heap(ctx, b, dtype),
                                        on_heap(ctx, bias, dtype) if with_bias else None, workspace=workspace)
        if workspace is not None:
            assert got is workspace and got.aux_buffer.data_ptr() == aux
        workspace, aux = got, got.aux_buffer.data_ptr()
        parts = [rank_inputs(q, m, k, n, step) for q in range(world)]
        reference = torch.cat([aq @ bq + (bq_bias[:, None] if with_bias else 0) for aq, bq, bq_bias in parts])
        magnitude = torch.cat([aq.abs() @ bq.abs() + (bq_bias.abs()[:, None] if with_bias else 0)
                               for aq, bq, bq_bias in parts])
        assert_within(out, reference, magnitude, dtype, 1, k, f"matmul_all_gather step {step}")


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_reduce_scatter_keeps_this_ranks_column_block_of_the_sum(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k, n_local = 9, 36, 5
    n = world * n_local
    out = ctx.zeros((m, n_local), dtype=dtype)
    workspace = None
    for step, with_bias in ((0, True), (1, False)):
        a, b, bias = rank_inputs(rank, m, k, n, step)
        got = ctx.ops.matmul_reduce_scatter(out, on_heap(ctx, a, dtype), on_heap(ctx, b, dtype),
                                            bias=on_heap(ctx, bias, dtype) if with_bias else None,
                                            workspace=workspace)
        if workspace is not None:
            assert got is workspace and got.aux_buffer.data_ptr() == aux
        workspace, aux = got, got.aux_buffer.data_ptr()
        reference, magnitude = all_reduced_products(world, m, k, n, step, with_bias)
        cols = slice(rank * n_local, (rank + 1) * n_local)
        assert_within(out, reference[:, cols], magnitude[:, cols], dtype, world, k, f"matmul_reduce_scatter step {step}")


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_reduce_scatter_full_output_keeps_this_ranks_tiles_of_the_sum(ctx, dtype):
    """Iris's layout (its tests/ops/test_matmul_reduce_scatter.py): output (M, N); with the
    config's block_size_m x block_size_n tiles numbered row-major, rank r keeps tiles
    [r T, (r + 1) T), T = tiles // W, the last rank the remainder too; every other element 0."""
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k, n = 11, 20, 3 * world + 4  # partial tiles at both edges, and tiles // W leaves a remainder
    config = iris.ops.FusedConfig(block_size_m=4, block_size_n=3, block_size_k=16)
    tiles_n = -(-n // 3)
    tiles = -(-m // 4) * tiles_n
    first = rank * (tiles // world)
    end = tiles if rank == world - 1 else first + tiles // world
    tile = (torch.arange(m)[:, None] // 4) * tiles_n + torch.arange(n)[None, :] // 3
    mine = (tile >= first) & (tile < end)
    assert bool(mine.any())
    out = ctx.full((m, n), 7.0, dtype=dtype)  # the elements not kept are written too, with 0
    workspace = None
    for step, with_bias in ((0, True), (1, False)):
        a, b, bias = rank_inputs(rank, m, k, n, step)
        got = ctx.ops.matmul_reduce_scatter(out, on_heap(ctx, a, dtype), on_heap(ctx, b, dtype),
                                            bias=on_heap(ctx, bias, dtype) if with_bias else None,
                                            config=config, workspace=workspace)
        if workspace is not None:
            assert got is workspace and got.aux_buffer.data_ptr() == aux
        workspace, aux = got, got.aux_buffer.data_ptr()
        assert tuple(got.aux_buffer.shape) == ((m, n) if world > 1 else (1, m, n))
        parts = [rank_inputs(q, m, k, n, step) for q in range(world)]
        reference = sum(aq @ bq + (biasq[:, None] if with_bias else 0) for aq, bq, biasq in parts)
        magnitude = sum(aq.abs() @ bq.abs() + (biasq.abs()[:, None] if with_bias else 0) for aq, bq, biasq in parts)
        assert_within(out.cpu()[mine], reference[mine], magnitude[mine], dtype, world, k, f"kept tiles, step {step}")
        assert bool((out.cpu()[~mine] == 0).all()), f"step {step}: an element outside this rank's tiles is not 0"
    # Iris's module path, as its test imports it.
    from aperture.iris.ops.matmul_reduce_scatter import matmul_reduce_scatter

    assert matmul_reduce_scatter is iris.ops.matmul_reduce_scatter
    if world > 1:  # ksplit's layout is (M, N / W) only
        with pytest.raises(aperture.Error, match=r"ksplit=True"):
            ctx.ops.matmul_reduce_scatter(out, ctx.ones((m, k), dtype=dtype), ctx.ones((k, n), dtype=dtype),
                                          config=iris.ops.FusedConfig(ksplit=True))


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_reduce_scatter_hbm_buffer_keeps_this_ranks_row_block_of_the_sum(ctx, dtype):
    """Rows, not columns; bf16 on a GPU heap with K and N multiples of 64 is OverlappedGemm.gemm_rs."""
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 8, 64, 64
    m = world * m_local
    out = ctx.zeros((m_local, n), dtype=dtype)
    workspace = iris.ops.matmul_reduce_scatter_hbm_buffer_preamble(ctx, ctx.zeros((m, k), dtype=dtype),
                                                                   ctx.zeros((k, n), dtype=dtype))
    fused = dtype == torch.bfloat16 and ctx.get_device().type == "cuda"
    for step in (0, 1):
        a, b, _ = rank_inputs(rank, m, k, n, step)
        got = iris.ops.matmul_reduce_scatter_hbm_buffer(ctx, out, on_heap(ctx, a, dtype),
                                                           on_heap(ctx, b, dtype), workspace=workspace)
        assert got is workspace and got.operation == "matmul_reduce_scatter_hbm_buffer"
        assert got.launch_params["path"] == ("OverlappedGemm.gemm_rs" if fused else "matmul, Communicator.reduce_scatter")
        parts = [rank_inputs(q, m, k, n, step) for q in range(world)]
        reference = sum(aq @ bq for aq, bq, _ in parts)
        magnitude = sum(aq.abs() @ bq.abs() for aq, bq, _ in parts)
        rows = slice(rank * m_local, (rank + 1) * m_local)
        assert_within(out, reference[rows], magnitude[rows], dtype, world, k, f"matmul_reduce_scatter_hbm_buffer {step}")
    # The output may lie off the heap, as in Iris's own test (a plain torch.zeros).
    plain = torch.full((m_local, n), 7.0, dtype=dtype, device=out.device)
    a, b, _ = rank_inputs(rank, m, k, n, 2)
    iris.ops.matmul_reduce_scatter_hbm_buffer(ctx, plain, on_heap(ctx, a, dtype), b.to(dtype).to(out.device),
                                              workspace=workspace)
    parts = [rank_inputs(q, m, k, n, 2) for q in range(world)]
    rows = slice(rank * m_local, (rank + 1) * m_local)
    assert_within(plain, sum(aq @ bq for aq, bq, _ in parts)[rows], sum(aq.abs() @ bq.abs() for aq, bq, _ in parts)[rows],
                  dtype, world, k, "matmul_reduce_scatter_hbm_buffer into an output off the heap")
    with pytest.raises(aperture.Error, match="divisible by world_size" if world > 1 else r"\(M / world_size, N\)"):
        iris.ops.matmul_reduce_scatter_hbm_buffer(ctx, ctx.zeros((m_local + 2, n), dtype=dtype),
                                                  ctx.zeros((m + 1, k), dtype=dtype),
                                                  ctx.zeros((k, n), dtype=dtype))


@on_the_heap
def test_all_gather_matmul_hbm_buffer_is_all_gather_matmul(ctx):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k_local, n = 6, 16, 10
    dtype = torch.bfloat16
    b_full = matrix(world * k_local, n, 78)
    shard, bias = matrix(m, k_local, 3 + rank), vector(m, 9)
    ws = iris.ops.all_gather_matmul_hbm_buffer_preamble(ctx, on_heap(ctx, shard, dtype), on_heap(ctx, b_full, dtype),
                                                        staged_a_layout="m_contiguous")
    out = ctx.zeros((m, n), dtype=dtype)
    got = iris.ops.all_gather_matmul_hbm_buffer(ctx, out, on_heap(ctx, shard, dtype), on_heap(ctx, b_full, dtype),
                                                on_heap(ctx, bias, dtype), workspace=ws, num_fetch_sms=4,
                                                staged_a_layout="m_contiguous", num_warps=4)
    assert got is ws and ws.operation == "all_gather_matmul_hbm_buffer"
    a_full = torch.cat([matrix(m, k_local, 3 + q) for q in range(world)], dim=1)
    assert_within(out, a_full @ b_full + bias[:, None], a_full.abs() @ b_full.abs() + bias.abs()[:, None], dtype, 1,
                  world * k_local, "all_gather_matmul_hbm_buffer")
    with pytest.raises(aperture.Error, match="staged_a_layout"):
        iris.ops.all_gather_matmul_hbm_buffer(ctx, out, on_heap(ctx, shard, dtype), on_heap(ctx, b_full, dtype),
                                              staged_a_layout="diagonal")


@on_the_heap
def test_the_bound_catches_a_missing_rank(ctx):
    """The check is not vacuous: the sum without one rank's product is far outside the bound."""
    world = ctx.get_num_ranks()
    m, k, n = 12, 40, 20
    parts = [rank_inputs(q, m, k, n, 0) for q in range(world + 1)]
    full = sum(aq @ bq for aq, bq, _ in parts)
    magnitude = sum(aq.abs() @ bq.abs() for aq, bq, _ in parts)
    missing = full - parts[-1][0] @ parts[-1][1]
    assert bool(((missing - full).abs() > bound(torch.bfloat16, magnitude, world + 1, k)).any())


# ---- workspaces and preambles ------------------------------------------------------------------

@on_the_heap
def test_a_workspace_of_another_shape_is_prepared_again(ctx):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    dtype = torch.float32
    small = ctx.zeros((4, 2), dtype=dtype)
    ws = ctx.ops.matmul_reduce_scatter(small, ctx.ones((4, 3), dtype=dtype), ctx.ones((3, 2 * world), dtype=dtype))
    assert tuple(ws.aux_buffer.shape) == (world, 4, 2) and bool((small == 3 * world).all())
    m, k, n_local = 5, 8, 3
    a, b, _ = rank_inputs(rank, m, k, world * n_local, 3)
    out = ctx.zeros((m, n_local), dtype=dtype)
    got = ctx.ops.matmul_reduce_scatter(out, on_heap(ctx, a, dtype), on_heap(ctx, b, dtype), workspace=ws)
    assert got is ws and ws.shape == (m, world * n_local, k) and tuple(ws.aux_buffer.shape) == (world, m, n_local)
    reference = sum(aq @ bq for aq, bq, _ in (rank_inputs(q, m, k, world * n_local, 3) for q in range(world)))
    magnitude = sum(aq.abs() @ bq.abs() for aq, bq, _ in (rank_inputs(q, m, k, world * n_local, 3) for q in range(world)))
    cols = slice(rank * n_local, (rank + 1) * n_local)
    assert_within(out, reference[:, cols], magnitude[:, cols], dtype, world, k, "reprepared workspace")


@on_the_heap
def test_preambles_zero_the_output_and_return_a_workspace_the_op_reuses(ctx):
    world = ctx.get_num_ranks()
    dtype = torch.float32
    a, b = ctx.ones((4, 6), dtype=dtype), ctx.full((6, 2 * world), 2.0, dtype=dtype)
    out = ctx.full((4, 2 * world), 5.0, dtype=dtype)
    ws = iris.ops.matmul_all_reduce_preamble(ctx, out, a, b)
    assert bool((out == 0).all()) and ws.matches("matmul_all_reduce", (4, 2 * world, 6), dtype, world, "two_shot")
    assert ctx.ops.matmul_all_reduce(out, a, b, workspace=ws) is ws and bool((out == 12 * world).all())
    rs_out = ctx.full((4, 2), 5.0, dtype=dtype)
    ws = iris.ops.matmul_reduce_scatter_preamble(ctx, rs_out, a, b)
    assert bool((rs_out == 0).all()) and ws.operation == "matmul_reduce_scatter" and ws.prepared
    assert ctx.ops.matmul_reduce_scatter(rs_out, a, b, workspace=ws) is ws and bool((rs_out == 12 * world).all())
    shard = ctx.ones((4, 3), dtype=dtype)
    ws = iris.ops.all_gather_matmul_preamble(ctx, shard, ctx.ones((3 * world, 5), dtype=dtype))
    assert tuple(ws.aux_buffer.shape) == (world * 4, 3)
    ag_out = ctx.zeros((4, 5), dtype=dtype)
    assert ctx.ops.all_gather_matmul(ag_out, shard, ctx.ones((3 * world, 5), dtype=dtype), workspace=ws) is ws
    assert bool((ag_out == 3 * world).all())


def test_fused_config_has_iris_fields_and_checks():
    c = iris.ops.FusedConfig()
    assert (c.block_size_m, c.block_size_n, c.block_size_k, c.group_size_m, c.num_sms, c.num_xcds, c.chunk_size,
            c.cache_modifier_a, c.allow_tf32, c.all_reduce_variant, c.all_reduce_num_rings, c.reduce_num_sms) == \
        (256, 64, 64, 1, None, 1, 1, ".ca", True, "two_shot", 1, 64)
    c.validate(world_size=4)
    with pytest.raises(ValueError, match="all_reduce_variant"):
        iris.ops.FusedConfig(all_reduce_variant="nope").validate()
    with pytest.raises(ValueError, match="block_size_k"):
        iris.ops.FusedConfig(block_size_k=0).validate()
    with pytest.raises(ValueError, match="ring"):
        iris.ops.FusedConfig(all_reduce_variant="ring", block_size_n=6).validate(world_size=4)


# ---- async_op ------------------------------------------------------------------------------

@on_the_heap
def test_async_op_false_ends_with_a_barrier_and_true_does_not(ctx, monkeypatch):
    world = ctx.get_num_ranks()
    calls = []
    real_barrier = ctx.barrier
    monkeypatch.setattr(ctx, "barrier", lambda *args, **kwargs: (calls.append(1), real_barrier(*args, **kwargs)))
    a, b = ctx.ones((3, 4), dtype=torch.float32), ctx.ones((4, 2 * world), dtype=torch.float32)
    ops = [lambda async_op: ctx.ops.matmul_all_reduce(ctx.zeros((3, 2 * world)), a, b, async_op=async_op),
           lambda async_op: ctx.ops.matmul_all_gather(ctx.zeros((3 * world, 2 * world)), a, b, async_op=async_op),
           lambda async_op: ctx.ops.matmul_reduce_scatter(ctx.zeros((3, 2)), a, b, async_op=async_op),
           lambda async_op: ctx.ops.all_gather_matmul(ctx.zeros((3, 5)), ctx.ones((3, 4)), ctx.ones((4 * world, 5)),
                                                      async_op=async_op)]
    for run in ops:
        for async_op in (False, True):
            calls.clear()
            run(async_op)
            assert len(calls) == (0 if async_op else 1), (async_op, len(calls))
            real_barrier()
    # An async call's result is complete once the caller has waited (its own barrier).
    out = ctx.zeros((3, 2 * world))
    ctx.ops.matmul_all_reduce(out, a, b, async_op=True)
    real_barrier()
    assert bool((out == 4 * world).all())


@on_the_heap
def test_matmul_all_reduce_takes_iris_newest_and_older_argument_orders(ctx, monkeypatch):
    # Newest Iris: (ctx, C, A, B, async_op, config, workspace); older: (..., bias, async_op, config,
    # workspace). A bool fifth is async_op, a tensor bias; None is read by what follows it.
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    dtype = torch.float32
    m, k, n = 6, 16, 10
    barriers = []
    real_barrier = ctx.barrier
    monkeypatch.setattr(ctx, "barrier", lambda *args, **kwargs: (barriers.append(1), real_barrier(*args, **kwargs)))
    config = iris.ops.FusedConfig(block_size_m=16)
    out = ctx.zeros((m, n), dtype=dtype)
    ws = iris.ops.matmul_all_reduce_preamble(ctx, out, ctx.zeros((m, k)), ctx.zeros((k, n)), config=config)
    assert ws.call_counter == 0
    forms = [  # (what follows B, whether a bias is added, whether the call ends with a barrier)
        (lambda bias: (True, config, ws), False, False),
        (lambda bias: (False, config, ws), False, True),
        (lambda bias: (bias, True, config, ws), True, False),
        (lambda bias: (bias, False), True, True),
        (lambda bias: (None, True, config, ws), False, False),  # a bool sixth: the older order
        (lambda bias: (None, None, config), False, True),  # a FusedConfig seventh: the older order
        (lambda bias: (None, config, ws), False, True),  # a FusedConfig sixth: the newest order
        (lambda bias: (None, None, ws), False, True),  # a FusedWorkspace seventh: the newest order
        (lambda bias: (None,), False, True),  # either order: no bias, a barrier
        (lambda bias: (None, True), False, False),  # a bool sixth: the older order, async
    ]
    for step, (follows, with_bias, barrier) in enumerate(forms):
        a, b, bias = rank_inputs(rank, m, k, n, step)
        barriers.clear()
        got = iris.ops.matmul_all_reduce(ctx, out, on_heap(ctx, a, dtype), on_heap(ctx, b, dtype),
                                         *follows(on_heap(ctx, bias, dtype)))
        assert len(barriers) == int(barrier), (step, len(barriers))
        real_barrier()
        reference, magnitude = all_reduced_products(world, m, k, n, step, with_bias)
        assert_within(out, reference, magnitude, dtype, world, k, f"matmul_all_reduce form {step}")
        if any(x is ws for x in follows(None)):
            assert got is ws
    # call_counter: the calls made with ws since its preamble (forms 0-2, 4, 6 and 7 pass it).
    assert ws.call_counter == 6
    # ctx.ops takes the same orders.
    a, b = ctx.ones((m, k), dtype=dtype), ctx.ones((k, n), dtype=dtype)
    barriers.clear()
    assert ctx.ops.matmul_all_reduce(out, a, b, True, config, ws) is ws and not barriers and ws.call_counter == 7
    real_barrier()
    assert bool((out == k * world).all())
    # Another shape prepares the workspace again, and the count starts over.
    ctx.ops.matmul_all_reduce(ctx.zeros((m, n + 1), dtype=dtype), a, ctx.ones((k, n + 1), dtype=dtype), workspace=ws)
    assert ws.call_counter == 1
    cases = [
        (lambda: iris.ops.matmul_all_reduce(ctx, out, a, b, 1), "the fifth argument is a int; give async_op"),
        (lambda: iris.ops.matmul_all_reduce(ctx, out, a, b, True, config, ws, None), "too many positional"),
        (lambda: iris.ops.matmul_all_reduce(ctx, out, a, b, True, async_op=False), "multiple values .*async_op"),
        (lambda: iris.ops.matmul_all_reduce(ctx, out, a, b, ctx.ones(m), bias=None), "multiple values .*bias"),
        (lambda: ctx.ops.matmul_all_reduce(out, a, b, sync=True), "unexpected keyword .*sync"),
    ]
    for call, words in cases:
        with pytest.raises(aperture.Error, match=words) as caught:
            call()
            pytest.fail(f"not refused: the case expecting {words!r}")
        assert isinstance(caught.value, TypeError)  # what Python raises for such a call
    ctx.ops.matmul_all_reduce(out, a, b)  # nothing above reached a collective: the ranks are in step
    assert bool((out == k * world).all())


# ---- bad input ---------------------------------------------------------------------------------

@on_the_heap
def test_bad_input_is_refused_with_aperture_error_before_any_collective(ctx):
    world = ctx.get_num_ranks()
    f32 = torch.float32
    a, b = ctx.ones((4, 6), dtype=f32), ctx.ones((6, 2 * world), dtype=f32)
    out = ctx.zeros((4, 2 * world), dtype=f32)
    cases = [
        (lambda: ctx.ops.matmul_all_reduce(out, a, ctx.ones((5, 2 * world))), "inner dimensions"),
        (lambda: ctx.ops.matmul_all_reduce(ctx.zeros((4, 3)), a, b), "must be"),
        (lambda: ctx.ops.matmul_all_reduce(ctx.zeros((4, 2 * world), dtype=torch.bfloat16), a, b), "one dtype"),
        (lambda: ctx.ops.matmul_all_reduce(ctx.zeros((4, 2 * world), dtype=torch.float64),
                                           ctx.ones((4, 6), dtype=torch.float64),
                                           ctx.ones((6, 2 * world), dtype=torch.float64)), "float16, bfloat16 or float32"),
        (lambda: ctx.ops.matmul_all_reduce(torch.zeros(4, 2 * world, device=out.device), a, b), "not on the symmetric heap"),
        (lambda: ctx.ops.matmul_all_reduce(out, a, b, bias=ctx.ones(2 * world + 1)), "1-D tensor of the product's 4 rows"),
        (lambda: iris.ops.matmul_all_reduce(ctx, out, a, b, bias=True), "bias=True: bias is a row-bias tensor"),
        (lambda: ctx.ops.matmul_all_reduce(out, a, b, config=iris.ccl.Config()), "FusedConfig"),
        (lambda: ctx.ops.matmul_all_reduce(out, a, b, workspace=object()), "FusedWorkspace"),
        (lambda: ctx.ops.matmul_all_reduce(out, a.view(-1), b), "2-D"),
        (lambda: ctx.ops.matmul_reduce_scatter(ctx.zeros((4, 2 * world + 1)), a, b),
         r"\(M, N\) = \(4, %d\).*N / world_size" % (2 * world)),
        (lambda: ctx.ops.matmul_all_gather(ctx.zeros((4, 2 * world)), a, b) if world > 1 else
            ctx.ops.matmul_all_gather(ctx.zeros((5, 2 * world)), a, b), r"\(M \* world_size, N\)"),
        (lambda: ctx.ops.matmul_all_gather(torch.zeros(4 * world, 2 * world, device=out.device), a, b),
         "not on the symmetric heap"),
        (lambda: ctx.ops.all_gather_matmul(ctx.zeros((4, 5)), a, ctx.ones((6 * world + 1, 5))), r"world_size \* K_local"),
        (lambda: ctx.ops.all_gather_matmul(ctx.zeros((4, 5)), torch.ones(4, 6, device=out.device),
                                           ctx.ones((6 * world, 5))), "A_sharded .* not on the symmetric heap"),
    ]
    if world > 1:
        cases.append((lambda: ctx.ops.matmul_reduce_scatter(ctx.zeros((4, 1)), a, ctx.ones((6, 2 * world + 1))),
                      "divisible by world_size"))
    for call, words in cases:
        with pytest.raises(aperture.Error, match=words) as caught:
            call()
            pytest.fail(f"not refused: the case expecting {words!r}")
        assert isinstance(caught.value, ValueError)  # Iris raises ValueError for these
    with pytest.raises(ValueError, match="all_reduce_variant"):
        ctx.ops.matmul_all_reduce(out, a, b, config=iris.ops.FusedConfig(all_reduce_variant="nope"))
    # Nothing above reached a collective: the ranks are still in step.
    ctx.ops.matmul_all_reduce(out, a, b)
    assert bool((out == 6 * world).all())


# ---- the names, and `import iris.ops` unmodified ---------------------------------------------

@on_the_heap
def test_ops_names_match_iris(ctx):
    assert ctx.ops is ctx.ops and isinstance(ctx.ops, iris.ops.OpsNamespace)
    for name in ("FusedConfig", "FusedWorkspace", "OpsNamespace", "matmul", "matmul_preamble", "matmul_all_reduce",
                 "matmul_all_reduce_preamble",
                 "all_gather_matmul", "all_gather_matmul_preamble", "matmul_all_gather", "matmul_reduce_scatter",
                 "matmul_reduce_scatter_preamble", "all_gather_matmul_hbm_buffer", "all_gather_matmul_hbm_buffer_preamble",
                 "matmul_reduce_scatter_hbm_buffer", "matmul_reduce_scatter_hbm_buffer_preamble",
                 "matmul_reduce_scatter_fast", "matmul_reduce_scatter_fast_preamble", "fast_reduce_scatter",
                 "TRITONBLAS_AVAILABLE"):
        assert hasattr(iris.ops, name), name


@one_rank_job_only("runs its own one-rank child")
def test_an_iris_program_imports_iris_ops_unmodified(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import iris
        import iris.ops as ops
        from iris.ops import FusedConfig, FusedWorkspace
        import aperture.iris
        assert ops is aperture.iris.ops and FusedConfig is aperture.iris.ops.FusedConfig
        shmem = iris.iris(1 << 22)
        A = shmem.ones((8, 4), dtype=torch.float32)
        B = shmem.ones((4, 6), dtype=torch.float32)
        C = shmem.zeros((8, 6), dtype=torch.float32)
        ws = shmem.ops.matmul_all_reduce(C, A, B, config=FusedConfig())
        assert isinstance(ws, FusedWorkspace) and C.tolist() == [[4.0] * 6] * 8
        ws = ops.matmul_all_reduce(shmem, C, A, B, workspace=ws)
        # Iris's module paths; importing them leaves ops.<name> the function, as in Iris.
        from iris.ops.matmul_reduce_scatter import matmul_reduce_scatter
        from iris.ops.matmul_reduce_scatter_hbm_buffer import matmul_reduce_scatter_hbm_buffer
        import iris.ops.matmul_all_reduce, iris.ops.all_gather_matmul, iris.ops.matmul_all_gather
        import iris.ops.all_gather_matmul_hbm_buffer
        assert matmul_reduce_scatter is ops.matmul_reduce_scatter
        assert matmul_reduce_scatter_hbm_buffer is ops.matmul_reduce_scatter_hbm_buffer
        for name in ("matmul_all_reduce", "all_gather_matmul", "matmul_all_gather", "matmul_reduce_scatter",
                     "all_gather_matmul_hbm_buffer", "matmul_reduce_scatter_hbm_buffer"):
            assert callable(getattr(ops, name)), name
        D = shmem.zeros((8, 6), dtype=torch.float32)
        matmul_reduce_scatter(shmem, D, A, B)
        assert D.tolist() == [[4.0] * 6] * 8
        print("ok", ws.operation)
    """))
    run = run_through_shim(prog)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok matmul_all_reduce" in run.stdout
