"""iris.x's tile-level collectives, in both of Iris's forms (``iris.x.<op>(..., ctx)`` and
``ctx.<op>(...)``), on simulated ranks in one process.

Each rank's heap is its own tensor and the table holds their addresses, as in test_iris_device.
The ranks' kernels run one after another, so every flag a collective waits on is set before it
runs (the ready flags are published up front, as a producer kernel would have); the spinlock
variant takes and releases each lock in turn. Three ranks and a 72 x 24 tensor of 16 x 16 tiles:
ring order, the uneven split of reduce_scatter and the masks of the edge tiles all matter. Every
element of every rank's output is checked against torch, values differing per rank and element.
Real concurrency (ranks waiting on each other) is covered by Iris's own tests/x and examples
under scripts/iris-upstream.sh.
"""

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import DEVICE, INTERPRETED, only_in_one_rank_jobs, pattern
import triton
import triton.language as tl

import aperture.iris as iris
import aperture.iris.x as x

WORLD = 3
M, N = 72, 24  # 5 x 2 tiles, both edges partial; 10 tiles split 3-3-4 by reduce_scatter
BM, BN = 16, 16
TILES_M, TILES_N = triton.cdiv(M, BM), triton.cdiv(N, BN)
TILES = TILES_M * TILES_N
# bfloat16 needs a GPU: Triton's interpreter (NumPy) has no bfloat16 atomics.
DTYPES = [torch.float32, torch.float16] if INTERPRETED else [torch.float32, torch.float16, torch.bfloat16]
FORMS = ["function", "method"]


class World:
    """Each rank's src and dst of ``dtype``, separate tensors: a kernel reaches peers through one of
    them only, whose copies' addresses make the table of its context tensor (``context``)."""

    def __init__(self, dtype, src_rows=M, src_cols=N, dst_rows=M, dst_cols=N):
        def make(rows, cols, salt):
            return [pattern(r, rows * cols, dtype, salt=salt).reshape(rows, cols) for r in range(WORLD)]

        self.src = make(src_rows, src_cols, 1)
        self.dst = [torch.zeros(dst_rows, dst_cols, dtype=dtype, device=DEVICE) for _ in range(WORLD)]

    @staticmethod
    def context(copies, rank):
        """Iris's context tensor for ``rank`` whose table is ``copies``'s addresses."""
        words = [rank, WORLD] + [c.data_ptr() for c in copies] + [0]
        return torch.tensor(words, dtype=torch.int64, device=DEVICE)


def sum_of(tensors):
    return torch.stack([t.float() for t in tensors]).sum(0)


def close(got, want, dtype):
    tolerance = 0 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), want, atol=tolerance, rtol=tolerance)


# One tile per program: the tile's data is the rank's src tile, loaded as an Iris kernel loads it.


@triton.jit
def _tile(pid, data_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = pid // tl.cdiv(N, BN)
    pid_n = pid % tl.cdiv(N, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    data = tl.load(data_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    return x.Tile(pid_m, pid_n, BM, BN, data)


@triton.jit
def atomic_kernel(src, dst, dst_ctx, M, N, RANK: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, METHOD: tl.constexpr):
    tile = _tile(tl.program_id(0), src, M, N, BM, BN)
    ctx = iris.DeviceContext.initialize(dst_ctx, RANK, WORLD)
    view = x.make_tensor_view(dst, M, N, N, 1)
    if METHOD:
        ctx.all_reduce_atomic(tile, view)
    else:
        x.all_reduce_atomic(tile, view, ctx)


@triton.jit
def spinlock_kernel(src, dst, locks, dst_ctx, M, N, RANK: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, METHOD: tl.constexpr):
    # One table serves dst and locks: the test lays them out in one tensor per rank.
    tile = _tile(tl.program_id(0), src, M, N, BM, BN)
    ctx = iris.DeviceContext.initialize(dst_ctx, RANK, WORLD)
    view = x.make_tensor_view(dst, M, N, N, 1)
    if METHOD:
        ctx.all_reduce_spinlock(tile, view, locks)
    else:
        x.all_reduce_spinlock(tile, view, locks, ctx)


@triton.jit
def flagged_kernel(src, dst, locks, heap_ctx, M, N, RANK: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, OP: tl.constexpr, METHOD: tl.constexpr):
    # src, dst and locks in one tensor per rank (one table); OP: one_shot, two_shot, reduce_scatter, ring.
    tile = _tile(tl.program_id(0), src, M, N, BM, BN)
    ctx = iris.DeviceContext.initialize(heap_ctx, RANK, WORLD)
    src_view = x.make_tensor_view(src, M, N, N, 1)
    dst_view = x.TensorView(dst, M, N, N, 1)
    if OP == "one_shot":
        if METHOD:
            ctx.all_reduce_one_shot(tile, src_view, dst_view, locks)
        else:
            x.all_reduce_one_shot(tile, src_view, dst_view, locks, ctx)
    elif OP == "two_shot":  # the method; Iris's newest five-argument form; its form with start and stride
        if METHOD:
            ctx.all_reduce_two_shot(tile, src_view, dst_view, locks)
        elif tile.pid_m % 2 == 0:
            x.all_reduce_two_shot(tile, src_view, dst_view, locks, ctx)
        else:
            x.all_reduce_two_shot(tile, src_view, dst_view, locks, RANK, WORLD, ctx)
    elif OP == "reduce_scatter":
        if METHOD:
            ctx.reduce_scatter(tile, src_view, dst_view, locks)
        else:
            x.reduce_scatter(tile, src_view, dst_view, locks, ctx)
    else:
        if METHOD:
            ctx.all_reduce_ring(tile, src_view, dst_view)
        else:
            x.all_reduce_ring(tile, src_view, dst_view, ctx)


class Heap:
    """One tensor per rank holding src (M x N), dst (M x N) and the locks, so one table reaches all."""

    def __init__(self, dtype, locks_value):
        self.dtype = dtype
        elements = 2 * M * N + TILES * 4 // dtype.itemsize + 16
        self.heaps = [torch.zeros(elements, dtype=dtype, device=DEVICE) for _ in range(WORLD)]
        for r, h in enumerate(self.heaps):
            h[:M * N] = pattern(r, M * N, dtype, salt=2)
            self.locks(r).fill_(locks_value)

    def src(self, r):
        return self.heaps[r][:M * N].view(M, N)

    def dst(self, r):
        return self.heaps[r][M * N:2 * M * N].view(M, N)

    def locks(self, r):
        return self.heaps[r][2 * M * N:].view(torch.int32)[:TILES]

    def context(self, r):
        return World.context(self.heaps, r)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_atomic_adds_every_ranks_tile_into_every_rank(dtype, form):
    world = World(dtype)
    for r in range(WORLD):
        atomic_kernel[(TILES,)](world.src[r], world.dst[r], World.context(world.dst, r), M, N, r, WORLD, BM, BN,
                                form == "method")
    want = sum_of(world.src)
    for r in range(WORLD):
        close(world.dst[r], want, dtype)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_spinlock_adds_under_each_ranks_lock_and_frees_it(dtype, form):
    heap = Heap(dtype, locks_value=0)
    srcs = [heap.src(r).clone() for r in range(WORLD)]
    for r in range(WORLD):
        spinlock_kernel[(TILES,)](srcs[r], heap.dst(r), heap.locks(r), heap.context(r), M, N, r, WORLD, BM, BN,
                                  form == "method")
    want = sum_of(srcs)
    for r in range(WORLD):
        close(heap.dst(r), want, dtype)
        assert torch.equal(heap.locks(r).cpu(), torch.zeros(TILES, dtype=torch.int32)), "a lock was left held"


def run_flagged(op, dtype, form):
    heap = Heap(dtype, locks_value=1)  # every rank has published every tile
    for r in range(WORLD):
        flagged_kernel[(TILES,)](heap.src(r), heap.dst(r), heap.locks(r), heap.context(r), M, N, r, WORLD, BM, BN,
                                 op, form == "method")
    return heap, sum_of([heap.src(r) for r in range(WORLD)])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("op", ["one_shot", "two_shot", "ring"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_reading_variants_give_every_rank_the_sum(dtype, op, form):
    heap, want = run_flagged(op, dtype, form)
    for r in range(WORLD):
        close(heap.dst(r), want, dtype)


@triton.jit
def generation_kernel(src, dst, locks, heap_ctx, M, N, generation, RANK: tl.constexpr, WORLD: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr, OP: tl.constexpr, FORM: tl.constexpr):
    # Iris's newest flag values: a run-time generation, by keyword on the methods (two versions'
    # names) and sixth on the functions, after the context.
    tile = _tile(tl.program_id(0), src, M, N, BM, BN)
    ctx = iris.DeviceContext.initialize(heap_ctx, RANK, WORLD)
    src_view = x.make_tensor_view(src, M, N, N, 1)
    dst_view = x.make_tensor_view(dst, M, N, N, 1)
    if OP == "one_shot":
        if FORM == "generation":
            ctx.all_reduce_one_shot(tile, src_view, dst_view, locks, generation=generation)
        elif FORM == "signal_value":
            ctx.all_reduce_one_shot(tile, src_view, dst_view, locks, signal_value=generation)
        else:
            x.all_reduce_one_shot(tile, src_view, dst_view, locks, ctx, generation)
    elif OP == "two_shot":
        if FORM == "generation":
            ctx.all_reduce_two_shot(tile, src_view, dst_view, locks, generation)
        elif FORM == "signal_value":
            ctx.all_reduce_two_shot(tile, src_view, dst_view, locks, signal_value=generation)
        elif tile.pid_m % 2 == 0:
            x.all_reduce_two_shot(tile, src_view, dst_view, locks, ctx, generation)
        else:
            x.all_reduce_two_shot(tile, src_view, dst_view, locks, RANK, WORLD, ctx, generation=generation)
    else:
        if FORM == "generation":
            ctx.reduce_scatter(tile, src_view, dst_view, locks, generation=generation)
        elif FORM == "signal_value":
            ctx.reduce_scatter(tile, src_view, dst_view, locks, generation)
        else:
            x.reduce_scatter(tile, src_view, dst_view, locks, ctx, generation)


@pytest.mark.parametrize("form", ["generation", "signal_value", "function"])
@pytest.mark.parametrize("op", ["one_shot", "two_shot", "reduce_scatter"])
def test_flagged_variants_wait_for_the_generation_given(op, form):
    # Every peer's flags hold 7, the seventh call's value: a variant that waits for 1 spins for
    # ever here (the failure this test shows is a hang).
    dtype = torch.float32
    heap = Heap(dtype, locks_value=7)
    for r in range(WORLD):
        generation_kernel[(TILES,)](heap.src(r), heap.dst(r), heap.locks(r), heap.context(r), M, N, 7, r, WORLD,
                                    BM, BN, op, form)
    want = sum_of([heap.src(r) for r in range(WORLD)])
    owner = torch.clamp(tile_of_element() // (TILES // WORLD), max=WORLD - 1)
    for r in range(WORLD):
        got = heap.dst(r).float().cpu()
        mine = owner == r if op == "reduce_scatter" else torch.ones_like(owner, dtype=torch.bool)
        close(got[mine], want.cpu()[mine], dtype)
        assert torch.all(got[~mine] == 0), f"rank {r} wrote tiles it does not own"


def tile_of_element():
    rows = torch.arange(M)[:, None] // BM
    cols = torch.arange(N)[None, :] // BN
    return rows * TILES_N + cols


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce_scatter_gives_each_rank_the_sum_of_its_contiguous_tiles_only(dtype, form):
    heap, want = run_flagged("reduce_scatter", dtype, form)
    per_rank = TILES // WORLD  # 10 tiles, 3 ranks: 3, 3 and the last rank 4
    owner = torch.clamp(tile_of_element() // per_rank, max=WORLD - 1)
    for r in range(WORLD):
        got = heap.dst(r).float().cpu()
        mine = owner == r
        assert mine.any()
        close(got[mine], want.cpu()[mine], dtype)
        assert torch.all(got[~mine] == 0), f"rank {r} wrote tiles it does not own"


@triton.jit
def gather_kernel(src, out, heap_ctx, M, N, RANK: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, METHOD: tl.constexpr):
    # out[s] = rank s's tile, for every s, read through gather with a loop-variable rank.
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BN)
    pid_n = pid % tl.cdiv(N, BN)
    tile = x.TileView(pid_m, pid_n, BM, BN)
    ctx = iris.DeviceContext.initialize(heap_ctx, RANK, WORLD)
    view = x.make_tensor_view(src, M, N, N, 1)
    out_ptrs, mask = x.tile_ptr(out, M, N, N, 1, pid_m, pid_n, BM, BN)
    for s in range(WORLD):
        if METHOD:
            data = ctx.gather(tile, view, s)
        else:
            data = x.gather(tile, view, s, ctx)
        tl.store(out_ptrs + s * M * N, data, mask=mask)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_returns_the_named_ranks_tile(dtype, form):
    heap = Heap(dtype, locks_value=0)
    for r in range(WORLD):
        out = torch.full((WORLD, M, N), -1, dtype=dtype, device=DEVICE)
        gather_kernel[(TILES,)](heap.src(r), out, heap.context(r), M, N, r, WORLD, BM, BN, form == "method")
        for s in range(WORLD):
            assert torch.equal(out[s], heap.src(s)), f"rank {r} gathered the wrong tile of rank {s}"


@triton.jit
def all_gather_kernel(src, dst, dst_ctx, M, N, RANK: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr,
                      BN: tl.constexpr, DIM: tl.constexpr, METHOD: tl.constexpr):
    tile = _tile(tl.program_id(0), src, M, N, BM, BN)
    ctx = iris.DeviceContext.initialize(dst_ctx, RANK, WORLD)
    if DIM == 0:
        view = x.make_tensor_view(dst, M * WORLD, N, N, 1)
    else:
        view = x.make_tensor_view(dst, M, N * WORLD, N * WORLD, 1)
    if METHOD:
        ctx.all_gather(tile, view, DIM)
    else:
        x.all_gather(tile, view, dim=DIM, ctx=ctx)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_places_each_ranks_tile_at_its_place_on_every_rank(dtype, dim, form):
    shape = (WORLD * M, N) if dim == 0 else (M, WORLD * N)
    world = World(dtype, dst_rows=shape[0], dst_cols=shape[1])
    for r in range(WORLD):
        all_gather_kernel[(TILES,)](world.src[r], world.dst[r], World.context(world.dst, r), M, N, r, WORLD, BM, BN,
                                    dim, form == "method")
    want = torch.cat(world.src, dim=dim)
    for r in range(WORLD):
        assert torch.equal(world.dst[r], want), f"rank {r}'s gathered tensor differs"


@triton.jit
def top_level_names_kernel(src, dst, context_tensor, M, N, cur_rank: tl.constexpr, world_size: tl.constexpr,
                           BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    # As Iris's newest ops kernels write it: the tile types from the package's top level.
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_SIZE_N)
    pid_n = pid % tl.cdiv(N, BLOCK_SIZE_N)
    rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    data = tl.load(src + rm[:, None] * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
    ctx = iris.DeviceContext.initialize(context_tensor, cur_rank, world_size)
    dst_view = iris.make_tensor_view(dst, world_size * M, N, N, 1)
    tile = iris.Tile(pid_m, pid_n, BLOCK_SIZE_M, BLOCK_SIZE_N, data)
    ctx.all_gather(tile, dst_view, dim=0)


def test_a_kernel_written_with_the_top_level_tile_names():
    world = World(torch.float32, dst_rows=WORLD * M)
    for r in range(WORLD):
        top_level_names_kernel[(TILES,)](world.src[r], world.dst[r], World.context(world.dst, r), M, N, r, WORLD,
                                         BM, BN)
    for r in range(WORLD):
        assert torch.equal(world.dst[r], torch.cat(world.src)), f"rank {r}'s gathered tensor differs"


@triton.jit
def all_to_all_kernel(src, dst, src_ctx, M, N_total, N_PER_RANK: tl.constexpr, RANK: tl.constexpr,
                      WORLD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, METHOD: tl.constexpr):
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N_total, BN)
    pid_n = pid % tl.cdiv(N_total, BN)
    tile = x.TileView(pid_m, pid_n, BM, BN)
    ctx = iris.DeviceContext.initialize(src_ctx, RANK, WORLD)
    src_view = x.make_tensor_view(src, M, N_total, N_total, 1)
    dst_view = x.make_tensor_view(dst, M, N_total, N_total, 1)
    if METHOD:
        ctx.all_to_all(tile, src_view, dst_view, N_PER_RANK)
    else:
        x.all_to_all(tile, src_view, dst_view, N_PER_RANK, ctx)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n_per_rank", [16, 12, 20], ids=lambda n: f"N_per_rank={n}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_to_all_moves_column_blocks_as_torch_does(dtype, n_per_rank, form):
    # 12 and 20 columns per rank put rank boundaries inside 16-column tiles.
    n_total = WORLD * n_per_rank
    world = World(dtype, src_cols=n_total, dst_cols=n_total)
    tiles = TILES_M * triton.cdiv(n_total, BN)
    for r in range(WORLD):
        all_to_all_kernel[(tiles,)](world.src[r], world.dst[r], World.context(world.src, r), M, n_total, n_per_rank,
                                    r, WORLD, BM, BN, form == "method")
    for d in range(WORLD):
        want = torch.cat([world.src[s][:, d * n_per_rank:(d + 1) * n_per_rank] for s in range(WORLD)], dim=1)
        assert torch.equal(world.dst[d], want), f"rank {d}'s all_to_all output differs"


@triton.jit
def views_kernel(buf, out, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    # TensorView's helpers on a strided view; out's blocks: the tile at (1, 0), the same tile moved
    # by (3, 5), tile (0, 0) of the view offset by (2, 1), tile (1, 0)'s layout mask; then the count.
    view = x.make_tensor_view(buf, M, N, stride_m, stride_n)
    tile = x.TileView(1, 0, BM, BN)
    block = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    ptrs, mask = view.tile_ptr(tile)
    tl.store(out + block, tl.load(ptrs, mask=mask, other=-1))
    moved, moved_mask = view.offset_tile_ptr(tile, offset_m=3, offset_n=5)
    tl.store(out + BM * BN + block, tl.load(moved, mask=moved_mask, other=-1))
    shifted, _ = view.offset(2, 1).tile_ptr(x.TileView(0, 0, BM, BN))
    tl.store(out + 2 * BM * BN + block, tl.load(shifted))
    _, _, layout_mask = tile.layout(M, N)
    tl.store(out + 3 * BM * BN + block, layout_mask.to(out.dtype.element_ty))
    tl.store(out + 4 * BM * BN, view.number_of_tiles(BM, BN).to(out.dtype.element_ty))


def test_tensor_view_helpers_address_a_strided_view():
    base = torch.arange(64 * 64, dtype=torch.float32, device=DEVICE).reshape(64, 64)
    view = base.t()[:20, :12]  # M=20, N=12, strides (1, 64)
    out = torch.zeros(4 * 8 * 8 + 1, dtype=torch.float32, device=DEVICE)
    views_kernel[(1,)](base, out, 20, 12, view.stride(0), view.stride(1), 8, 8)
    got = out[:4 * 64].reshape(4, 8, 8).cpu()
    v = view.cpu()

    def block(r0, c0):  # the 8 x 8 block of the 20 x 12 view at (r0, c0), -1 outside it
        want = torch.full((8, 8), -1.0)
        r = v[r0:r0 + 8, c0:c0 + 8]
        want[:r.shape[0], :r.shape[1]] = r
        return want

    assert torch.equal(got[0], block(8, 0))
    assert torch.equal(got[1], block(11, 5))
    assert torch.equal(got[2], base.t()[2:10, 1:9].cpu())
    assert torch.equal(got[3], (block(8, 0) != -1).float())
    assert out[-1].item() == triton.cdiv(20, 8) * triton.cdiv(12, 8)


@triton.jit
def index_helpers_kernel(renumbered, offsets, num_workgroups, stride_in_m, stride_out_m, XCDS: tl.constexpr,
                         CHUNK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(renumbered + pid, iris.ccl.utils.chiplet_transform_chunked(pid, num_workgroups, XCDS, CHUNK))
    if pid == 0:  # tile (1, 2) of a 20 x 40 tensor: its indices, mask and input/output offsets
        rm, rn, mask = iris.mem.triton.compute_tile_indices(1, 2, 20, 40, BM, BN)
        into, out = iris.mem.triton.compute_tile_offsets(rm, rn, stride_in_m, 1, stride_out_m, 2)
        block = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
        tl.store(offsets + block, tl.where(mask, into, -1))
        tl.store(offsets + BM * BN + block, tl.where(mask, out, -1))


def chiplet_order(pid, n, xcds, chunk):
    group = xcds * chunk
    if pid >= n // group * group:
        return pid
    slot = pid // xcds
    return slot // chunk * group + pid % xcds * chunk + slot % chunk


@pytest.mark.parametrize("n, xcds, chunk", [(64, 8, 2), (70, 8, 4), (37, 1, 4), (24, 3, 1)])
def test_index_helpers_of_irises_ccl_kernels(n, xcds, chunk):
    renumbered = torch.full((n,), -1, dtype=torch.int32, device=DEVICE)
    offsets = torch.zeros(2 * 16 * 16, dtype=torch.int64, device=DEVICE)
    index_helpers_kernel[(n,)](renumbered, offsets, n, 50, 70, xcds, chunk, 16, 16)
    got = renumbered.cpu().tolist()
    assert got == [chiplet_order(p, n, xcds, chunk) for p in range(n)]
    assert sorted(got) == list(range(n)), "not a permutation of the program ids"
    if xcds == 1:
        assert got == list(range(n))
    rows, cols = torch.arange(16, 32)[:, None], torch.arange(32, 48)[None, :]
    inside = (rows < 20) & (cols < 40)
    into, out = offsets.cpu().view(2, 16, 16)
    assert torch.equal(into, torch.where(inside, rows * 50 + cols, -1))
    assert torch.equal(out, torch.where(inside, rows * 70 + cols * 2, -1))


def test_iris_x_exports_irises_names():
    for name in x.__all__:
        assert getattr(x, name) is not None, name
    assert x.DeviceContext is iris.DeviceContext
    # Iris's newest package exports the tile types at its top level and at iris.mem.triton(.types).
    from aperture.iris.mem import triton as mem_triton
    from aperture.iris.mem.triton import types
    for name in ("Tile", "TileView", "TensorView", "AllReduceConfig", "make_tensor_view"):
        assert getattr(iris, name) is getattr(x, name) is getattr(types, name) is getattr(mem_triton, name), name
        assert name in iris.__all__
    assert types.tile_ptr is x.tile_ptr and mem_triton.DeviceTracing is mem_triton.Tracing
    from aperture.iris.ccl import utils
    for name in ("chiplet_transform_chunked", "compute_tile_indices", "compute_tile_offsets"):
        assert getattr(types, name) is getattr(mem_triton, name) is getattr(utils, name), name
    assert x.AllReduceConfig is not None and x.all_reduce_atomic is not None


def test_importing_a_kernels_module_by_its_iris_path_keeps_the_exported_kernel(tmp_path):
    # Iris's tests/x do `import iris.x.gemm_all_gather` and then `from iris.x import
    # gemm_all_gather`, which must be the kernel (launched as gemm_all_gather[grid]), not the module.
    import subprocess
    import sys

    from spawned_job import child_environment

    prog = tmp_path / "imports.py"
    prog.write_text("import iris\n"
                    "import iris.x.gemm_all_gather\n"
                    "import iris.iris\n"
                    "from iris.x import gemm_all_gather\n"
                    "import types\n"
                    "assert not isinstance(gemm_all_gather, types.ModuleType), gemm_all_gather\n"
                    "assert not isinstance(iris.iris, types.ModuleType), iris.iris\n"
                    "assert iris.x.gemm_all_gather is gemm_all_gather\n"
                    "print('kernel kept')\n")
    run = subprocess.run([sys.executable, "-m", "aperture.iris", str(prog)], capture_output=True, text=True,
                         env=child_environment(APERTURE_PROVIDER="shm"), timeout=120)
    assert run.returncode == 0 and "kernel kept" in run.stdout, run.stdout + run.stderr[-3000:]


only_in_one_rank_jobs(globals())  # simulated ranks in one process: once, in one-rank jobs only
