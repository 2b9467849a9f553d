"""The iris.ops modules Iris keeps at their own paths (all_reduce_fast, reduce_scatter_auto,
all_gather_matmul_m, matmul_all_reduce_hbm_buffer), and matmul_reduce_scatter_fast with its
fast_reduce_scatter (re-exported by iris.ops), in every rank of the job: inputs that differ per
rank and per element, every output element against a torch reference of all ranks' inputs.

The inputs have 4 significant bits, so each rank's product is exact in fp32 and its one rounding
to the dtype is known; the pull reductions add the rounded partials in fp32 and round once, as
Iris's kernels do, so on the host the result must equal that reference exactly (a reduction
rounding at every step would not, from 3 ranks). On a GPU heap, where cuBLAS may accumulate in
reduced precision, the check is the bound test_iris_ops derives. Also: the return values (None,
scratch, workspaces), the tile constraints Iris asserts, each bad input refused before any
collective, and Iris's module paths through `python -m aperture.iris`."""

import textwrap
import types

import pytest
import torch
# triton_world before aperture.iris (which imports triton): it decides whether Triton interprets
# this process's kernels, for every test file of the run.
import triton_world  # noqa: F401

import aperture
import aperture.iris as iris
from aperture.iris.ops.all_gather_matmul_m import all_gather_matmul_m, all_gather_matmul_m_preamble
from aperture.iris.ops.all_reduce_fast import (
    fused_two_shot_all_reduce,
    matmul_all_reduce_fast,
    one_shot_all_reduce,
    two_shot_all_reduce,
)
from aperture.iris.ops.matmul_all_reduce_hbm_buffer import (
    matmul_all_reduce_hbm_buffer,
    matmul_all_reduce_hbm_buffer_preamble,
)
from aperture.iris.ops.matmul_reduce_scatter_fast import fast_reduce_scatter
from aperture.iris.ops.reduce_scatter_auto import (
    matmul_reduce_scatter_auto,
    one_shot_reduce_scatter,
    reduce_scatter_auto,
)
from spawned_job import one_rank_job_only
from test_iris_ccl import run_through_shim
# test_iris_ops's context (a module fixture: one heap for this file too), markers and helpers.
from test_iris_ops import DTYPES, assert_within, ctx, matrix, on_heap, on_the_heap, vector  # noqa: F401


def rounded(x, dtype):
    """float64 `x` rounded once to `dtype` (exact values of fp32 throughout, so no double rounding)."""
    return x.to(dtype).double()


def partials(world, m, k, n, step):
    """Each rank's A (m, k), B (k, n) and exact float64 product at `step`."""
    out = []
    for q in range(world):
        a, b = matrix(m, k, 10 * q + step), matrix(k, n, 10 * q + step + 5)
        out.append((a, b, a @ b))
    return out


def rows_of(parts, rank, m_local):
    """`parts` cut to rank `rank`'s block of m_local rows (A's and the product's; B whole): what
    a reduce-scatter by rows leaves that rank."""
    rows = slice(rank * m_local, (rank + 1) * m_local)
    return [(a[rows], b, p[rows]) for a, b, p in parts]


def check_sum(got, parts, dtype, k, what):
    """`got` against the sum over ranks of each rank's product rounded to dtype, added in fp32 and
    rounded once (exactly, on the host; within test_iris_ops's bound on a GPU)."""
    products = [p for _, _, p in parts]
    if got.is_cuda:
        magnitude = sum(a.abs() @ b.abs() for a, b, _ in parts)
        assert_within(got, sum(products), magnitude, dtype, len(parts) + 1, k, what)
        return
    assert_exactly(got, rounded(sum(rounded(p, dtype) for p in products), dtype), what)


def assert_exactly(got, expected, what):
    got = got.detach().cpu().double()
    assert got.shape == expected.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    bad = got != expected
    if bool(bad.any()):
        first = tuple(int(x) for x in bad.nonzero()[0])
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.numel()} elements differ, the first at {first}: got "
                    f"{got[first].item()}, expected {expected[first].item()}")


# ---- all_reduce_fast ---------------------------------------------------------------------------

@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_shot_all_reduce_sums_every_ranks_tensor_rounding_once(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k, n = 10, 24, 14
    for step in (0, 1):
        parts = partials(world, m, k, n, step)
        inp = on_heap(ctx, parts[rank][2], dtype)  # each rank's product, rounded once
        out = torch.full((m, n), 7.0, dtype=dtype, device=ctx.get_device())  # the output may lie off the heap
        assert one_shot_all_reduce(ctx, out, inp, block_m=16, num_sms=8) is None  # Iris's returns None
        check_sum(out, parts, dtype, k, f"one_shot_all_reduce step {step}")
        assert_exactly(inp, rounded(parts[rank][2], dtype), "the input is left as it was")


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_shot_all_reduce_leaves_each_ranks_reduced_rows_in_scratch(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 8, 20, 12  # the default block_m halves to 8 at any world size: M / W divides
    m = world * m_local
    scratch = None
    for step, use_barrier in ((0, False), (1, True)):
        parts = partials(world, m, k, n, step)
        inp = on_heap(ctx, parts[rank][2], dtype)
        out = torch.zeros((m, n), dtype=dtype, device=ctx.get_device())
        got = two_shot_all_reduce(ctx, out, inp, scratch=scratch, use_barrier=use_barrier)
        assert isinstance(got, torch.Tensor) and tuple(got.shape) == (m, n) and got.dtype == dtype
        assert ctx.is_symmetric(got), "scratch is peers' to read: on the heap"
        if scratch is not None:
            assert got is scratch  # passed back: the same buffer
        scratch = got
        check_sum(out, parts, dtype, k, f"two_shot_all_reduce step {step}")
        rows = slice(rank * m_local, (rank + 1) * m_local)
        if not out.is_cuda:
            assert_exactly(scratch[rows], out.double().cpu()[rows], "this rank's rows of scratch: its reduced block")
            others = torch.ones(m, dtype=torch.bool)
            others[rows] = False
            assert bool((scratch.cpu()[others] == 0).all()), "the other ranks' rows of scratch stay as they were (0)"


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_all_reduce_fast_returns_none_or_the_scratch(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m, k, n = 4 * world, 28, 18
    parts = partials(world, m, k, n, 3)
    a, b = on_heap(ctx, parts[rank][0], dtype), parts[rank][1].to(dtype).to(ctx.get_device())  # B off the heap
    out = torch.zeros((m, n), dtype=dtype, device=ctx.get_device())
    assert matmul_all_reduce_fast(ctx, out, a, b) is None
    check_sum(out, parts, dtype, k, "matmul_all_reduce_fast one_shot")
    out.zero_()
    scratch = matmul_all_reduce_fast(ctx, out, a, b, variant="two_shot", block_m=4)
    assert isinstance(scratch, torch.Tensor) and tuple(scratch.shape) == (m, n) and ctx.is_symmetric(scratch)
    check_sum(out, parts, dtype, k, "matmul_all_reduce_fast two_shot")
    out.zero_()
    assert matmul_all_reduce_fast(ctx, out, a, b, variant="two_shot", scratch=scratch, use_barrier=True) is scratch
    check_sum(out, parts, dtype, k, "matmul_all_reduce_fast two_shot, scratch passed back")


@on_the_heap
def test_fused_two_shot_all_reduce_keeps_iris_workspace(ctx):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    dtype = torch.bfloat16
    m_local, k, n = 8, 16, 20
    m = world * m_local
    workspace = None
    for step in (0, 1):
        parts = partials(world, m, k, n, step)
        out = torch.zeros((m, n), dtype=dtype, device=ctx.get_device())
        got = fused_two_shot_all_reduce(ctx, out, on_heap(ctx, parts[rank][2], dtype), workspace=workspace,
                                        block_n=16, spin_limit=1000)
        if workspace is not None:
            assert got is workspace and got["scratch"] is scratch
        workspace, scratch = got, got["scratch"]
        assert workspace["iteration"] == step + 1 and workspace["shape"] == (m, n, 8, 16)
        assert tuple(workspace["flags"].shape) == ((m // 8) * 2,) and workspace["flags"].dtype == torch.int32
        check_sum(out, parts, dtype, k, f"fused_two_shot_all_reduce step {step}")


# ---- reduce_scatter_auto -----------------------------------------------------------------------

@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_shot_reduce_scatter_keeps_this_ranks_rows_of_the_sum(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 8, 20, 10
    m = world * m_local
    parts = partials(world, m, k, n, 4)
    out = torch.full((m_local, n), 5.0, dtype=dtype, device=ctx.get_device())
    assert one_shot_reduce_scatter(ctx, out, on_heap(ctx, parts[rank][2], dtype), num_warps=8) is None
    check_sum(out, rows_of(parts, rank, m_local), dtype, k, "one_shot_reduce_scatter")


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce_scatter_auto_takes_iris_path_by_size_or_force(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 8, 16, 6
    m = world * m_local
    parts = partials(world, m, k, n, 5)
    mine = rows_of(parts, rank, m_local)
    heap_input = on_heap(ctx, parts[rank][2], dtype)
    plain_input = parts[rank][2].to(dtype).to(ctx.get_device())
    out = torch.zeros((m_local, n), dtype=dtype, device=ctx.get_device())
    # Small: one-shot, which reads the input on the peers, so it must be on the heap.
    assert reduce_scatter_auto(ctx, out, heap_input) is None
    check_sum(out, mine, dtype, k, "reduce_scatter_auto, one-shot by size")
    with pytest.raises(aperture.Error, match="not on the symmetric heap"):
        reduce_scatter_auto(ctx, out, plain_input)
    # Past the crossover, or forced: the ring path (Communicator.reduce_scatter), any input. It
    # rounds at every step as RCCL does, so the bound, not the one-rounding reference.
    for how in ({"crossover_bytes": 0}, {"force": "rccl"}, {"force": "rccl", "crossover_bytes": 1 << 40}):
        out.zero_()
        assert reduce_scatter_auto(ctx, out, plain_input, **how) is None
        magnitude = sum(rounded(p, dtype).abs() for _, _, p in mine)
        assert_within(out, sum(rounded(p, dtype) for _, _, p in mine), magnitude, dtype, world, 0,
                      f"reduce_scatter_auto, ring path {how}")
    out.zero_()
    reduce_scatter_auto(ctx, out, heap_input, crossover_bytes=0, force="one_shot")
    check_sum(out, mine, dtype, k, "reduce_scatter_auto, one-shot forced")


@on_the_heap
def test_matmul_reduce_scatter_auto_on_either_path(ctx):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    dtype = torch.float16
    m_local, k, n = 4, 24, 10
    m = world * m_local
    parts = partials(world, m, k, n, 6)
    mine = rows_of(parts, rank, m_local)
    a, b = (t.to(dtype).to(ctx.get_device()) for t in parts[rank][:2])  # the product's inputs may lie off the heap
    for how in ({}, {"force": "one_shot", "block_m": 4}, {"crossover_bytes": 0}):
        out = torch.zeros((m_local, n), dtype=dtype, device=ctx.get_device())
        assert matmul_reduce_scatter_auto(ctx, out, a, b, **how) is None
        if "crossover_bytes" in how:  # the ring path rounds at every step: the bound
            magnitude = sum(a.abs() @ b.abs() for a, b, _ in mine)
            assert_within(out, sum(p for _, _, p in mine), magnitude, dtype, world + 1, k, f"ring {how}")
        else:
            check_sum(out, mine, dtype, k, f"matmul_reduce_scatter_auto {how}")


# ---- all_gather_matmul_m -----------------------------------------------------------------------

@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_matmul_m_stacks_every_ranks_rows(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 8, 32, 24
    m = world * m_local
    config = iris.ops.FusedConfig(block_size_m=4, block_size_n=16, block_size_k=16)
    b_full = matrix(k, n, 71)  # replicated
    b = b_full.to(dtype).to(ctx.get_device())  # off the heap: only A_local is read on the peers
    out = ctx.zeros((m, n), dtype=dtype)
    preamble = all_gather_matmul_m_preamble(ctx, on_heap(ctx, matrix(m_local, k, 0), dtype), b, config)
    assert preamble.operation == "all_gather_matmul_m" and preamble.shape == (m, n, k)
    assert preamble.aux_buffer is None  # as Iris's: no buffer
    workspace = preamble
    for step, with_bias in ((0, True), (1, False)):
        shards = [matrix(m_local, k, 10 * q + step) for q in range(world)]
        bias = vector(m, 40 + step)
        got = all_gather_matmul_m(ctx, out, on_heap(ctx, shards[rank], dtype), b,
                                  bias=bias.to(dtype).to(ctx.get_device()) if with_bias else None, config=config,
                                  workspace=workspace)
        assert got is workspace
        a_full = torch.cat(shards)
        exact = a_full @ b_full + (bias[:, None] if with_bias else 0)
        if out.is_cuda:
            assert_within(out, exact, a_full.abs() @ b_full.abs() + (bias.abs()[:, None] if with_bias else 0), dtype,
                          1, k, f"all_gather_matmul_m step {step}")
        else:
            assert_exactly(out, rounded(exact, dtype), f"all_gather_matmul_m step {step}")


@on_the_heap
def test_all_gather_matmul_m_keeps_iris_tile_constraints(ctx):
    world = ctx.get_num_ranks()
    f32 = torch.float32
    a, b, out = ctx.ones((8, 32), dtype=f32), ctx.ones((32, 24), dtype=f32), ctx.zeros((8 * world, 24), dtype=f32)
    small = dict(block_size_m=4, block_size_n=16, block_size_k=16)
    cases = [
        ({}, r"M_local \(8\) must be >= block_size_m \(256\)"),  # FusedConfig's defaults
        (dict(small, block_size_m=16), r"M_local \(8\) must be >= block_size_m \(16\)"),
        (dict(small, block_size_k=64), r"K \(32\) must be >= block_size_k \(64\)"),
        (dict(small, block_size_n=32), r"N \(24\) must be >= block_size_n \(32\)"),
    ]
    for fields, words in cases:
        with pytest.raises(AssertionError, match=words) as caught:
            all_gather_matmul_m(ctx, out, a, b, config=iris.ops.FusedConfig(**fields))
        assert isinstance(caught.value, aperture.Error) and isinstance(caught.value, ValueError)
    a6 = ctx.ones((6, 32), dtype=f32)
    with pytest.raises(AssertionError, match="divisible by block_size_m"):
        all_gather_matmul_m(ctx, ctx.zeros((6 * world, 24), dtype=f32), a6, b,
                            config=iris.ops.FusedConfig(block_size_m=4, block_size_n=16, block_size_k=16))
    with pytest.raises(aperture.Error, match="A_local .* not on the symmetric heap"):
        all_gather_matmul_m(ctx, out, torch.ones(8, 32, device=out.device), b, config=iris.ops.FusedConfig(**small))
    with pytest.raises(aperture.Error, match=f"1-D tensor of the product's {8 * world} rows"):
        all_gather_matmul_m(ctx, out, a, b, bias=ctx.ones(8 * world + 1), config=iris.ops.FusedConfig(**small))
    # Nothing above reached a collective: the ranks are still in step.
    all_gather_matmul_m(ctx, out, a, b, config=iris.ops.FusedConfig(**small))
    assert bool((out == 32).all())


# ---- matmul_all_reduce_hbm_buffer --------------------------------------------------------------

@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_all_reduce_hbm_buffer_sums_products_through_iris_workspace(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    block_m, block_n = 4, 16
    m, k, n = 8 * world - 2, 24, 20  # 2 W M-tiles, the last one reaching past M: rank W-1's shard is short
    tiles = 2 * world * 2
    workspace = None
    for step in (0, 1):
        parts = partials(world, m, k, n, step)
        a = on_heap(ctx, parts[rank][0], dtype)
        b = parts[rank][1].to(dtype).to(ctx.get_device())
        out = torch.zeros((m, n), dtype=dtype, device=ctx.get_device())
        got = matmul_all_reduce_hbm_buffer(ctx, out, a, b, workspace=workspace, block_m=block_m, block_n=block_n,
                                           block_k=16, num_gemm_sms=8, num_rs_sms=4, num_ag_sms=4, num_warps=4,
                                           mfma=16, tiles_per_flag=2)
        if workspace is not None:
            assert got is workspace
        workspace = got
        assert workspace["iteration"] == step + 1
        assert (workspace["block_m"], workspace["block_n"]) == (block_m, block_n)
        for key in ("gemm_flags", "rs_flags"):
            assert tuple(workspace[key].shape) == (tiles * 32,) and workspace[key].dtype == torch.int32
        for key in ("staged_c", "scratch"):
            assert tuple(workspace[key].shape) == (m, n) and ctx.is_symmetric(workspace[key])
        check_sum(out, parts, dtype, k, f"matmul_all_reduce_hbm_buffer step {step}")
        if not out.is_cuda:
            assert_exactly(workspace["staged_c"], rounded(parts[rank][2], dtype), "staged_c: this rank's product")
            first, end = min(m, rank * 8), min(m, (rank + 1) * 8)
            assert_exactly(workspace["scratch"][first:end], out.double()[first:end], "scratch: this rank's rows")
    out = torch.full((m, n), 3.0, dtype=dtype, device=ctx.get_device())
    matmul_all_reduce_hbm_buffer(ctx, out, a, b, workspace=workspace, block_m=block_m, block_n=block_n,
                                 skip_gemm=True)
    assert bool((out == 0).all()), "skip_gemm drops the product, as Iris's does: the sum of zeros"


@on_the_heap
def test_matmul_all_reduce_hbm_buffer_preamble_and_refusals(ctx):
    world = ctx.get_num_ranks()
    f32 = torch.float32
    m, k, n = 8 * world, 16, 16
    ws = matmul_all_reduce_hbm_buffer_preamble(ctx, m, n, f32, block_m=8, block_n=16)
    assert set(ws) == {"staged_c", "scratch", "gemm_flags", "rs_flags", "ag_next", "own_next", "rs_done",
                       "iteration", "block_m", "block_n"} and ws["iteration"] == 0
    a, b, out = ctx.ones((m, k), dtype=f32), ctx.ones((k, n), dtype=f32), ctx.zeros((m, n), dtype=f32)
    cases = [
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, b, workspace=ws, block_m=8, block_n=16, trace=True),
         "trace=True"),
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, b, workspace=ws, block_m=8, block_n=16,
                                              tiles_per_flag=3), r"tiles_per_flag \(3\) must divide"),
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, b, workspace=ws, block_m=4, block_n=16),
         "workspace was prepared for"),
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, b, workspace={"iteration": 0}, block_m=8, block_n=16),
         "preamble's buffers"),
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, b, block_m=12), "power of two"),
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, b, num_rs_sms=0), "num_rs_sms=0"),
        (lambda: matmul_all_reduce_hbm_buffer(ctx, out, a, ctx.ones((k + 1, n), dtype=f32)), "inner dimensions"),
        (lambda: matmul_all_reduce_hbm_buffer_preamble(ctx, m, n, torch.float64), "float16, bfloat16 or float32"),
    ]
    if world > 1:  # one M-tile cannot split over the ranks (Iris's ValueError)
        cases.append((lambda: matmul_all_reduce_hbm_buffer_preamble(ctx, m, n, f32, block_m=8 * world),
                      "must divide evenly across"))
    for call, words in cases:
        with pytest.raises(ValueError, match=words) as caught:
            call()
            pytest.fail(f"not refused: the case expecting {words!r}")
        assert isinstance(caught.value, aperture.Error)
    # Without a workspace the call makes one (then a barrier), as Iris's.
    made = matmul_all_reduce_hbm_buffer(ctx, out, a, b, block_m=8, block_n=16)
    assert made is not ws and made["iteration"] == 1 and bool((out == k * world).all())


# ---- bad input and launch knobs, all refused before any collective ------------------------------

@on_the_heap
def test_bad_input_and_knobs_are_refused_before_any_collective(ctx):
    world = ctx.get_num_ranks()
    f32 = torch.float32
    m = 8 * world
    inp, out, rs_out = ctx.ones((m, 6), dtype=f32), ctx.zeros((m, 6), dtype=f32), ctx.zeros((8, 6), dtype=f32)
    plain = torch.ones(m, 6, device=out.device)
    cases = [
        (lambda: one_shot_all_reduce(ctx, out, inp, block_m=-4), "block_m=-4; give a positive int"),
        (lambda: one_shot_all_reduce(ctx, out, inp, block_n=48), "block_n=48; give a power of two"),
        (lambda: one_shot_all_reduce(ctx, out, inp, num_warps=True), "num_warps=True"),
        (lambda: one_shot_all_reduce(ctx, out, plain), "input_tensor .* not on the symmetric heap"),
        (lambda: one_shot_all_reduce(ctx, ctx.zeros((m, 5), dtype=f32), inp), "must be input_tensor's"),
        (lambda: one_shot_all_reduce(ctx, out, ctx.ones((m, 6), dtype=torch.bfloat16)), "one dtype"),
        (lambda: two_shot_all_reduce(ctx, out, inp, block_m=16), r"multiple of block_m = 16"),
        (lambda: two_shot_all_reduce(ctx, out, inp, scratch=ctx.zeros((m, 5), dtype=f32)), "scratch is"),
        (lambda: two_shot_all_reduce(ctx, out, inp, scratch=torch.zeros(m, 6, device=out.device)),
         "scratch .* not on the symmetric heap"),
        (lambda: matmul_all_reduce_fast(ctx, out, inp, ctx.ones((6, 6), dtype=f32), variant="three_shot"),
         "variant='three_shot'"),
        (lambda: matmul_all_reduce_fast(ctx, out, inp, ctx.ones((5, 6), dtype=f32)), "inner dimensions"),
        (lambda: fused_two_shot_all_reduce(ctx, out, inp, workspace=[]), "give the dict"),
        (lambda: one_shot_reduce_scatter(ctx, rs_out, inp, block_m=16), r"multiple of block_m = 16"),
        (lambda: one_shot_reduce_scatter(ctx, ctx.zeros((8, 5), dtype=f32), inp), r"must be \(M / world_size, N\)"),
        (lambda: reduce_scatter_auto(ctx, rs_out, inp, force="nccl"), "force='nccl'"),
        (lambda: reduce_scatter_auto(ctx, rs_out, inp, crossover_bytes="8MB"), "crossover_bytes='8MB'"),
    ]
    if world > 1:
        odd = ctx.ones((m + 1, 6), dtype=f32)
        cases += [(lambda: two_shot_all_reduce(ctx, ctx.zeros((m + 1, 6), dtype=f32), odd),
                   "divisible by world_size"),
                  (lambda: reduce_scatter_auto(ctx, rs_out, odd, force="rccl"), "divisible by world_size")]
    for call, words in cases:
        with pytest.raises(aperture.Error, match=words) as caught:
            call()
            pytest.fail(f"not refused: the case expecting {words!r}")
        assert isinstance(caught.value, ValueError)  # the type the other iris.ops refusals have
    # A knob of 0 or None is Iris's "the default" (it reads `kw.get(knob) or default`).
    one_shot_all_reduce(ctx, out, inp, block_m=0, block_n=None, num_sms=0)
    assert bool((out == world).all())


@on_the_heap
def test_a_keyword_no_function_reads_is_dropped_with_a_warning_as_iris_drops_it(ctx):
    world = ctx.get_num_ranks()
    f32 = torch.float32
    m = 8 * world
    rows = torch.arange(m * 6, dtype=f32).reshape(m, 6) % 7 + ctx.get_rank()
    inp, out = ctx.zeros((m, 6), dtype=f32), ctx.zeros((m, 6), dtype=f32)
    inp.copy_(rows.to(inp.device))
    expected = sum(torch.arange(m * 6, dtype=f32).reshape(m, 6) % 7 + r for r in range(world))
    with pytest.warns(UserWarning, match=r"one_shot_all_reduce: keyword argument\(s\) \['num_sm'\] are not read"):
        one_shot_all_reduce(ctx, out, inp, num_sm=4)
    assert torch.equal(out.cpu(), expected)
    rs_out = ctx.zeros((8, 6), dtype=f32)
    eye = ctx.zeros((6, 6), dtype=f32)
    eye.copy_(torch.eye(6))
    with pytest.warns(UserWarning, match=r"\['forse'\] are not read .* it reads \[.*'force'"):
        matmul_reduce_scatter_auto(ctx, rs_out, inp, eye, forse="rccl")
    r = ctx.get_rank()
    assert torch.equal(rs_out.cpu(), expected[8 * r:8 * (r + 1)])


# ---- matmul_reduce_scatter_fast, fast_reduce_scatter --------------------------------------------

@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fast_reduce_scatter_keeps_this_ranks_rows_of_the_sum(ctx, dtype):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 6, 20, 10  # 6 rows: not a multiple of block_m=4, which Iris's kernel masks
    m = world * m_local
    for step, how in ((7, {}), (8, {"block_m": 4, "block_n": 8, "num_sms": 3, "num_warps": 2})):
        parts = partials(world, m, k, n, step)
        inp = on_heap(ctx, parts[rank][2], dtype)
        out = torch.full((m_local, n), 5.0, dtype=dtype, device=ctx.get_device())  # off the heap, as Iris allows
        assert fast_reduce_scatter(ctx, out, inp, **how) is None
        check_sum(out, rows_of(parts, rank, m_local), dtype, k, f"fast_reduce_scatter {how}")
        assert_exactly(inp, rounded(parts[rank][2], dtype), "the input is left as it was")
    # Through ctx.ops, into an fp32 output: the fp32 sum of the partials as the heap holds them
    # (rounded to dtype), rounded to fp32 alone (Iris's kernel converts to the output's element
    # type). Exact on the GPU too: no GEMM here, and these few partials add exactly in fp32, in any
    # order (the GPU once checked this against the unrounded partials and failed, rightly).
    wide = torch.zeros((m_local, n), dtype=torch.float32, device=ctx.get_device())
    assert ctx.ops.fast_reduce_scatter(wide, inp, block_m=2) is None
    mine = [p for _, _, p in rows_of(parts, rank, m_local)]
    assert_exactly(wide, rounded(sum(rounded(p, dtype) for p in mine), torch.float32), "fast_reduce_scatter to fp32")


FAST_LOGGER = "aperture.iris.ops.matmul_reduce_scatter_fast"


def said(caplog):
    return [r.getMessage() for r in caplog.records if r.name == FAST_LOGGER]


@on_the_heap
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_reduce_scatter_fast_reuses_its_heap_staging_buffer(ctx, dtype, caplog):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    m_local, k, n = 4, 24, 12
    m = world * m_local
    device = ctx.get_device()
    out = torch.zeros((m_local, n), dtype=dtype, device=device)
    parts = partials(world, m, k, n, 9)
    a, b = (t.to(dtype).to(device) for t in parts[rank][:2])  # A and B may lie off the heap
    with caplog.at_level("WARNING", logger=FAST_LOGGER):
        ws = iris.ops.matmul_reduce_scatter_fast_preamble(ctx, out, a, b)
    assert not said(caplog), "the preamble's allocation is the intended one: nothing said"
    assert isinstance(ws, iris.ops.FusedWorkspace) and ws.operation == "matmul_reduce_scatter_fast"
    assert ws.shape == (m, n, k) and ws.dtype == dtype and ws.world_size == world and ws.prepared
    staging = ws.aux_buffer
    assert tuple(staging.shape) == (m, n) and staging.dtype == dtype and ctx.is_symmetric(staging)
    # Every sync / async_op: aperture's collective carries Iris's guards, so each is Iris's correct result.
    for step, (sync, async_op) in enumerate(((True, False), (False, True), (True, True), (False, False))):
        parts = partials(world, m, k, n, 10 + step)
        a, b = (t.to(dtype).to(device) for t in parts[rank][:2])
        out.fill_(3.0)
        with caplog.at_level("WARNING", logger=FAST_LOGGER):
            got = iris.ops.matmul_reduce_scatter_fast(ctx, out, a, b, workspace=ws, sync=sync, async_op=async_op)
        assert got is ws and ws.aux_buffer is staging, "passed back: the same workspace and staging buffer"
        assert not said(caplog), "nothing allocated, nothing said"
        check_sum(out, rows_of(parts, rank, m_local), dtype, k, f"matmul_reduce_scatter_fast sync={sync} "
                                                                 f"async_op={async_op}")
        check_sum(staging, [parts[rank]], dtype, k, "the staging buffer holds this rank's product")
    # A caller's staging buffer, through ctx.ops: bound, nothing allocated.
    mine = ctx.zeros((m, n), dtype=dtype)
    ws2 = ctx.ops.matmul_reduce_scatter_fast_preamble(out, a, b, staging_buffer=mine)
    assert ws2.aux_buffer is mine
    out.zero_()
    assert ctx.ops.matmul_reduce_scatter_fast(out, a, b, workspace=ws2, block_m=2, num_warps=8) is ws2
    check_sum(out, rows_of(parts, rank, m_local), dtype, k, "matmul_reduce_scatter_fast, caller's staging buffer")
    # Without a workspace: one is made (collectively), with a warning that says how to avoid it.
    out.zero_()
    with caplog.at_level("WARNING", logger=FAST_LOGGER):
        made = iris.ops.matmul_reduce_scatter_fast(ctx, out, a, b)
    assert made is not ws and ctx.is_symmetric(made.aux_buffer) and made.aux_buffer is not staging
    assert any("staging buffer" in message and "_preamble" in message for message in said(caplog))
    check_sum(out, rows_of(parts, rank, m_local), dtype, k, "matmul_reduce_scatter_fast, workspace made")


@on_the_heap
def test_fast_reduce_scatter_refusals_come_before_any_collective(ctx):
    world = ctx.get_num_ranks()
    f32 = torch.float32
    m, k, n = 4 * world, 6, 5
    device = ctx.get_device()
    inp, out = ctx.ones((m, n), dtype=f32), torch.zeros(4, n, device=device)
    a, b = torch.ones(m, k, device=device), torch.ones(k, n, device=device)
    fast, pre = iris.ops.matmul_reduce_scatter_fast, iris.ops.matmul_reduce_scatter_fast_preamble
    asserted = [  # Iris asserts these (AssertionError)
        (lambda: fast_reduce_scatter(ctx, torch.zeros(4, n + 1, device=device), inp),
         r"output_tensor is \(4, 6\); it must be \(M / world_size, N\) = \(4, 5\)"),
    ]
    refused = [  # Iris raises ValueError for these, or fails later in its kernel
        (lambda: fast_reduce_scatter(ctx, out, torch.ones(m, n, device=device)), "input_tensor .* not on the symmetric heap"),
        (lambda: fast_reduce_scatter(ctx, out, ctx.ones((m * n,), dtype=f32)), "input_tensor has shape .* 2-D"),
        (lambda: fast_reduce_scatter(ctx, out, inp, block_m=12), "block_m=12; give a power of two"),
        (lambda: fast_reduce_scatter(ctx, out, inp, num_sms=-1), "num_sms=-1; give a positive int"),
        (lambda: fast(ctx, out, a, torch.ones(k + 1, n, device=device)), "inner dimensions must match"),
        (lambda: fast(ctx, torch.zeros(4, n + 1, device=device), a, b), r"it must be \(M / world_size, N\)"),
        (lambda: fast(ctx, out, a, b.to(torch.bfloat16)), "one dtype"),
        (lambda: fast(ctx, out, a, b, staging_buffer=torch.zeros(m, n, device=device)),
         "staging_buffer .* not on the symmetric heap"),
        (lambda: fast(ctx, out, a, b, staging_buffer=ctx.zeros((m, n + 1), dtype=f32)),
         r"staging_buffer is \(%d, 6\) torch.float32; it must be \(M, N\)" % m),
        (lambda: fast(ctx, out, a, b, sync="yes"), "sync='yes'; give True or False"),
        (lambda: fast(ctx, out, a, b, workspace=object()), "give the FusedWorkspace"),
        (lambda: fast(ctx, out, a, b, block_n=3), "block_n=3; give a power of two"),
        (lambda: pre(ctx, out, a, b, staging_buffer=ctx.zeros((m, n), dtype=torch.float16)),
         r"staging_buffer is .* torch.float16; it must be .* torch.float32"),
    ]
    if world > 1:  # M = 4 W + 1 rows cannot be split over the ranks
        odd = ctx.ones((m + 1, n), dtype=f32)
        asserted.append((lambda: fast_reduce_scatter(ctx, out, odd), "divisible by world_size"))
        refused += [(lambda: fast(ctx, out, torch.ones(m + 1, k, device=device), b), "divisible by world_size"),
                    (lambda: pre(ctx, out, torch.ones(m + 1, k, device=device), b), "divisible by world_size")]
    for cases, kind in ((asserted, AssertionError), (refused, ValueError)):
        for call, words in cases:
            with pytest.raises(aperture.Error, match=words) as caught:
                call()
                pytest.fail(f"not refused: the case expecting {words!r}")
            assert isinstance(caught.value, ValueError) and isinstance(caught.value, kind), (words, caught.value)
    # Nothing above reached a collective or allocated: the ranks are still in step.
    fast_reduce_scatter(ctx, out, inp)
    assert bool((out == world).all())


def test_fast_names_are_iris_ops_and_ctx_ops():
    for name in ("matmul_reduce_scatter_fast", "matmul_reduce_scatter_fast_preamble", "fast_reduce_scatter",
                 "TRITONBLAS_AVAILABLE"):
        assert name in iris.ops.__all__, name
    assert iris.ops.TRITONBLAS_AVAILABLE is True  # the operations Iris guards by it all run here
    assert iris.ops.fast_reduce_scatter is fast_reduce_scatter  # iris.ops.<name> the function, as in Iris
    for name in ("matmul_reduce_scatter_fast", "matmul_reduce_scatter_fast_preamble", "fast_reduce_scatter"):
        assert callable(getattr(iris.ops, name)) and callable(getattr(iris.ops.OpsNamespace, name)), name


# ---- module paths ------------------------------------------------------------------------------

def test_the_modules_are_at_iris_paths_and_not_re_exported():
    for module, names in (("all_reduce_fast", ("one_shot_all_reduce", "two_shot_all_reduce", "matmul_all_reduce_fast",
                                                "fused_two_shot_all_reduce")),
                          ("reduce_scatter_auto", ("one_shot_reduce_scatter", "reduce_scatter_auto",
                                                   "matmul_reduce_scatter_auto")),
                          ("all_gather_matmul_m", ("all_gather_matmul_m", "all_gather_matmul_m_preamble")),
                          ("matmul_all_reduce_hbm_buffer", ("matmul_all_reduce_hbm_buffer",
                                                            "matmul_all_reduce_hbm_buffer_preamble"))):
        loaded = getattr(iris.ops, module)
        assert isinstance(loaded, types.ModuleType), module  # iris.ops.<module> is the module, as in Iris
        for name in names:
            assert callable(getattr(loaded, name)), name
            assert name == module or not hasattr(iris.ops, name), f"iris.ops.{name}: Iris does not re-export it"


@one_rank_job_only("runs its own one-rank child")
def test_an_iris_program_imports_the_modules_unmodified(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import iris
        from iris.ops.all_reduce_fast import one_shot_all_reduce, two_shot_all_reduce
        from iris.ops.reduce_scatter_auto import reduce_scatter_auto
        from iris.ops.all_gather_matmul_m import all_gather_matmul_m
        from iris.ops.matmul_all_reduce_hbm_buffer import (
            matmul_all_reduce_hbm_buffer, matmul_all_reduce_hbm_buffer_preamble)
        from iris.ops.matmul_reduce_scatter_fast import fast_reduce_scatter, matmul_reduce_scatter_fast
        import iris.ops.matmul_reduce_scatter_fast
        import iris.ops.reduce_scatter_auto
        import aperture.iris
        assert iris.ops.reduce_scatter_auto is aperture.iris.ops.reduce_scatter_auto  # one module, two names
        shmem = iris.iris(1 << 22)
        C = shmem.full((8, 6), 2.0, dtype=torch.float32)
        out = torch.zeros(8, 6)
        one_shot_all_reduce(shmem, out, C)
        scratch = two_shot_all_reduce(shmem, out, C)
        reduce_scatter_auto(shmem, out, C)
        ws = matmul_all_reduce_hbm_buffer(shmem, out, shmem.ones((8, 4)), torch.ones(4, 6), block_m=8, block_n=8)
        assert out.tolist() == [[4.0] * 6] * 8 and ws["iteration"] == 1
        # Re-exported, as Iris's iris/ops/__init__.py does: iris.ops.<name> stays the function.
        assert iris.ops.fast_reduce_scatter is fast_reduce_scatter and iris.ops.TRITONBLAS_AVAILABLE
        assert iris.ops.matmul_reduce_scatter_fast is matmul_reduce_scatter_fast
        fast_reduce_scatter(shmem, out, C)
        assert out.tolist() == [[2.0] * 6] * 8
        ws = shmem.ops.matmul_reduce_scatter_fast(out, torch.ones(8, 4), torch.ones(4, 6))
        assert out.tolist() == [[4.0] * 6] * 8 and ws.operation == "matmul_reduce_scatter_fast"
        print("ok", tuple(scratch.shape))
    """))
    run = run_through_shim(prog)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok (8, 6)" in run.stdout
