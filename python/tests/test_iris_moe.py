"""aperture.iris's MoE dispatch (iris.ccl.MoEDispatcher, iris.ccl.moe_utils) in every rank of the job.

Every token row, routing weight and combined element is checked against a reference computed on the
host from the global inputs, which every rank can rebuild (values differ per rank, token and
column, and are small integers, so exact in float32 and bfloat16). The dispatch is checked row by
row (this rank's experts' rows hold their tokens, every other row is zero), the local metadata
against the expected sizes and global offsets, and combine against the sum of each token's used
choices through a stand-in expert (row times expert id + 1); rows of other ranks' experts in the
expert output hold a poison value that must not arrive. Covered: uniform and interleaved expert
assignments, unused slots (-1), topk 1 to 3, hidden sizes spanning several column blocks, buffer
reuse with fewer tokens, an older handle combined after a newer dispatch, zero tokens, and the
refusals (each an aperture.Error, on every rank together where the input of one rank is wrong).
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
# triton_world before aperture.iris (which imports triton): it decides whether Triton interprets
# this process's kernels.
import triton_world  # noqa: F401
from spawned_job import child_environment, one_rank_job_only

import aperture
import aperture.iris as iris
from aperture.iris.ccl import (DispatchHandle, ExptAssignment, MoEDispatchConfig, MoEDispatcher, TopkResult,
                               make_expt_assignment, make_expt_dict_uniform, topk)
from aperture.iris.ccl import moe_utils
from aperture.iris.ccl.moe_utils import (BitmatrixMetadata, IrisAssertionError, RaggedTensorMetadata,
                                         _make_bitmatrix_metadata, make_ragged_tensor_metadata,
                                         remap_ragged_tensor_metadata, reduce)

pytestmark = pytest.mark.iris
COMPILED = not triton_world.INTERPRETED  # the kernels run compiled on a GPU, else interpreted on host tensors

HEAP = 16 << 20


@pytest.fixture
def ctx(team):
    return iris.iris(HEAP, team=team)


# ---- host references -----------------------------------------------------------------------------

def token_rows(n_global, hidden, dtype, salt=0):
    """Global tokens: row g, column j holds a small integer that differs per row, column and salt."""
    g = torch.arange(n_global, dtype=torch.int64)[:, None]
    j = torch.arange(hidden, dtype=torch.int64)[None, :]
    return ((g * 7 + j * 3 + salt * 5) % 17 - 8).to(dtype)


def routing(n_global, k, experts, salt=0, unused_every=7):
    """Global expert ids (n_global, k), int64: distinct per token, -1 for some slots."""
    ids = torch.empty((n_global, k), dtype=torch.int64)
    for g in range(n_global):
        start = (g * 5 + salt) % experts
        for a in range(k):
            ids[g, a] = (start + a * 3) % experts if k * 3 <= experts else (start + a) % experts
            if unused_every and (g + a * 2 + salt) % unused_every == 3:
                ids[g, a] = -1
    return ids


def weights(n_global, k, salt=0):
    g = torch.arange(n_global, dtype=torch.float32)[:, None]
    a = torch.arange(k, dtype=torch.float32)[None, :]
    return (g * 0.25 + a * 0.5 + salt) / 8


def places(ids):
    """The slot at each place in expert order (ties by slot index) and each slot's place (-1 unused)."""
    flat = ids.reshape(-1).tolist()
    order = sorted((e, s) for s, e in enumerate(flat) if e >= 0)
    place_of = [-1] * len(flat)
    for p, (_, s) in enumerate(order):
        place_of[s] = p
    return [s for _, s in order], place_of


def owner_table(assignment_dict, experts):
    owner = [None] * experts
    for shard, owned in assignment_dict.items():
        for e in owned:
            owner[e] = shard
    return owner


def check_dispatch(buf, meta, handle, x_global, ids, vals, k, owner, local_ids, rank, world, t):
    """Every row of the dispatch buffer, the local metadata and the handle's routing."""
    experts = len(owner)
    slot_at, place_of = places(ids)
    n_global = t * world
    assert buf.shape == (n_global * k, x_global.shape[1])
    expected = torch.zeros(buf.shape, dtype=buf.dtype)
    for p, s in enumerate(slot_at):
        e = int(ids.reshape(-1)[s])
        if owner[e] == rank:
            expected[p] = x_global[s // k]
    assert torch.equal(buf.cpu(), expected), "dispatch buffer rows"
    # Local metadata: by local id, the global sizes and offsets of this rank's experts.
    sizes = [sum(1 for s in slot_at if int(ids.reshape(-1)[s]) == e) for e in range(experts)]
    offs = [sum(sizes[:e]) for e in range(experts)]
    mine = sorted(e for e in range(experts) if owner[e] == rank)
    assert [local_ids[e] for e in mine] == list(range(len(mine)))
    assert meta.n_slices == len(mine)
    assert meta.slice_sizes.tolist() == [sizes[e] for e in mine]
    assert meta.slice_offs.tolist() == [offs[e] for e in mine] + [offs[mine[-1]] + sizes[mine[-1]]]
    # The handle's routing.
    assert isinstance(handle, DispatchHandle)
    assert (handle.n_tokens_local, handle.n_tokens_global, handle.hidden_dim, handle.topk) == \
           (t, n_global, x_global.shape[1], k)
    assert handle.expt_indx_global.dtype == torch.int32 and torch.equal(handle.expt_indx_global.cpu().long(), ids)
    assert handle.topk_vals.dtype == torch.float32 and torch.equal(handle.topk_vals.cpu(), vals)
    assert handle.dispatch_indx.tolist() == place_of
    assert handle.combine_indx.tolist() == slot_at + [-1] * (len(place_of) - len(slot_at))
    assert handle.expt_sizes.tolist() == sizes
    assert handle.ragged_meta_global.slice_offs.tolist() == offs + [len(slot_at)]
    assert handle.dispatch_buffer is buf
    return slot_at


def expert_output_for(buf, ids, slot_at, owner, rank, poison=99.0):
    """What a stand-in expert gives: row p of this rank's experts times (expert id + 1); other
    rows hold ``poison``, which combine must not send."""
    out = torch.full(buf.shape, poison, dtype=buf.dtype)
    flat = ids.reshape(-1)
    for p, s in enumerate(slot_at):
        e = int(flat[s])
        if owner[e] == rank:
            out[p] = buf[p].cpu() * (e + 1)
    return out.to(buf.device)


def expected_combine(x_global, ids, rank, t, dtype):
    k = ids.shape[1]
    z = torch.zeros((t, x_global.shape[1]), dtype=torch.float32)
    for i in range(t):
        g = rank * t + i
        for a in range(k):
            e = int(ids[g, a])
            if e >= 0:
                z[i] += x_global[g].float() * (e + 1)
    return z.to(dtype)


def run_round(ctx, dispatcher, assignment_dict, experts, k, hidden, t, dtype, salt=0, unused_every=7):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    dev = ctx.get_device()
    n_global = t * world
    x_global = token_rows(n_global, hidden, dtype, salt)
    ids = routing(n_global, k, experts, salt, unused_every)
    vals = weights(n_global, k, salt)
    mine = slice(rank * t, (rank + 1) * t)
    # The routing in Iris's topk form: int16 ids, weights of another float dtype.
    buf, meta, handle = dispatcher.dispatch(x_global[mine].to(dev), ids[mine].to(torch.int16).to(dev),
                                            vals[mine].to(torch.float64).to(dev))
    owner = owner_table(assignment_dict, experts)
    local_ids = dispatcher._expt_assignment.expt_map[rank].tolist()
    slot_at = check_dispatch(buf, meta, handle, x_global, ids, vals, k, owner, local_ids, rank, world, t)
    out = expert_output_for(buf, ids, slot_at, owner, rank)
    return handle, out, expected_combine(x_global, ids, rank, t, dtype)


# ---- moe_utils ---------------------------------------------------------------------------------------

def test_expert_assignment_uniform_and_interleaved():
    assert make_expt_dict_uniform(3, 6) == {0: [0, 1], 1: [2, 3], 2: [4, 5]}
    # 70 experts over 3 shards, interleaved: three bitmask words, bit 31 set in some.
    experts, shards = 70, 3
    owned = {s: [e for e in range(experts) if e % shards == s] for s in range(shards)}
    owned[1] = list(reversed(owned[1]))  # local ids follow ascending global ids whatever the order given
    a = make_expt_assignment(shards, experts, owned, "cpu")
    assert isinstance(a, ExptAssignment)
    assert a.expt_bitmask.dtype == torch.int32 and a.expt_bitmask.shape == (shards, 3)
    assert a.expt_boolmask.dtype == torch.bool and a.expt_map.dtype == torch.int32
    for s in range(shards):
        words = [int(w) & 0xFFFFFFFF for w in a.expt_bitmask[s]]
        for e in range(experts):
            bit = (words[e // 32] >> (e % 32)) & 1
            assert bit == (e % shards == s) == bool(a.expt_boolmask[s, e])
            assert int(a.expt_map[s, e]) == (e // shards if e % shards == s else -1)
    assert a.n_expts_per_shard == [24, 23, 23]
    assert int(a.expt_bitmask[1, 0]) < 0  # expert 31 (31 % 3 == 1): bit 31, a negative int32 word


def test_expert_assignment_refusals():
    with pytest.raises(IrisAssertionError, match="divide evenly") as caught:
        make_expt_dict_uniform(3, 7)
    assert isinstance(caught.value, (aperture.Error, AssertionError))
    cases = [({0: [0], 1: [1, 2]}, 2, 4, "exactly one shard"),   # expert 3 unowned
             ({0: [0, 1], 1: [1, 2, 3]}, 2, 4, "exactly one shard"),
             ({0: [0, 9], 1: [1]}, 2, 4, "out of range"),
             ({0: [0, 1], 2: [2, 3]}, 2, 4, "shard 2 out of range"),
             ({0: [0, 1, 2, 3], 1: []}, 2, 4, "shard 1 has no experts"),
             ({0: [0, 1, 2, 3]}, 2, 4, "shard 1 has no experts")]
    for owned, shards, experts, text in cases:
        with pytest.raises(aperture.Error, match=text) as caught:
            make_expt_assignment(shards, experts, owned, "cpu")
        assert isinstance(caught.value, ValueError)


def test_topk_bitmatrix_ragged_and_reduce():
    g = torch.Generator().manual_seed(5)
    logits = torch.rand((9, 6), generator=g)
    res = topk(logits, 3)
    assert isinstance(res, TopkResult) and isinstance(res.mask_metadata, BitmatrixMetadata)
    ref_vals, ref_idx = torch.topk(logits, 3, dim=1)
    assert res.indx.dtype == torch.int16 and torch.equal(res.indx.long(), ref_idx)
    assert torch.allclose(res.vals, torch.softmax(ref_vals, dim=-1), atol=0, rtol=1e-6)
    raw = topk(logits.to(torch.bfloat16), 2, apply_softmax=False)
    assert raw.vals.dtype == torch.bfloat16 and torch.equal(raw.vals, torch.topk(logits.to(torch.bfloat16), 2)[0])

    ids = routing(11, 3, 5, salt=2, unused_every=4)
    meta = _make_bitmatrix_metadata(ids.to(torch.int32), 5)
    slot_at, place_of = places(ids)
    assert meta.row_sorted_indx.tolist() == place_of
    assert meta.col_sorted_indx.tolist() == slot_at + [-1] * (33 - len(slot_at))
    sizes = [int((ids == e).sum()) for e in range(5)]
    assert meta.col_sum.dtype == torch.int32 and meta.col_sum.tolist() == sizes
    with pytest.raises(aperture.Error, match=r"\[0, 5\)"):
        _make_bitmatrix_metadata(torch.tensor([[0, 5]]), 5)

    rag = make_ragged_tensor_metadata(torch.tensor(sizes), sum(sizes))
    assert isinstance(rag, RaggedTensorMetadata) and rag.n_slices == 5
    assert rag.slice_offs.tolist() == [sum(sizes[:e]) for e in range(6)]
    expt_map = torch.tensor([-1, 1, -1, 0, -1], dtype=torch.int32)  # local 0 = expert 3, local 1 = expert 1
    local = remap_ragged_tensor_metadata(rag, expt_map)
    offs = rag.slice_offs.tolist()
    assert local.slice_sizes.tolist() == [sizes[3], sizes[1]]
    assert local.slice_offs.tolist() == [offs[3], offs[1], offs[1] + sizes[1]]
    assert remap_ragged_tensor_metadata(rag, torch.full((5,), -1)).n_slices == 0

    y = token_rows(12, 10, torch.float32).view(4, 3, 10)
    mask = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.bool)[:, :, None]
    z, none = reduce(y.to(torch.bfloat16), dim=1, mask=mask.expand(4, 3, 10).contiguous())
    assert none is None and z.dtype == torch.bfloat16
    assert torch.equal(z.float(), (y * mask).sum(dim=1))
    y_nan = y.clone()
    y_nan[1, 1] = float("nan")  # masked out: left out whatever its value
    assert torch.equal(reduce(y_nan, mask=mask.to(torch.int32))[0], (y * mask).sum(dim=1))
    assert torch.equal(reduce(y)[0], y.sum(dim=1))
    with pytest.raises(IrisAssertionError, match="dim=1"):
        reduce(y, dim=0)
    with pytest.raises(aperture.Error, match="k=7 exceeds"):
        topk(logits, 7)


# ---- dispatch and combine ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_dispatch_combine_every_element(ctx, dtype):
    world = ctx.get_num_ranks()
    experts, k, hidden, max_tokens = 3 * world, 2, 24, 6
    # Interleaved ownership (expert e on rank e % world): no rank's rows are contiguous.
    owned = {r: [e for e in range(experts) if e % world == r] for r in range(world)}
    assignment = make_expt_assignment(world, experts, owned, ctx.get_device())
    # Column tiles of 8: three per row, so the tile loop's masks and offsets are exercised.
    d = MoEDispatcher(ctx, hidden, experts, k, max_tokens, config=MoEDispatchConfig(8, 16),
                      expt_assignment=assignment, dtype=dtype)
    ctx.barrier()
    h1, out1, want1 = run_round(ctx, d, owned, experts, k, hidden, max_tokens, dtype, salt=0)
    z1 = d.combine(out1, h1)
    assert z1.dtype == dtype and z1.shape == (max_tokens, hidden)
    assert torch.equal(z1.cpu(), want1)
    # Fewer tokens through the same buffers, then the older handle once more: its routing is its own.
    h2, out2, want2 = run_round(ctx, d, owned, experts, k, hidden, 4, dtype, salt=3, unused_every=3)
    assert torch.equal(d.combine(out2, h2).cpu(), want2)
    assert torch.equal(d.combine(out1, h1).cpu(), want1)
    with pytest.raises(AttributeError):
        h2.n_tokens_local = 999


def test_default_assignment_topk1_and_three(ctx):
    world = ctx.get_num_ranks()
    for k, hidden, t in ((1, 5, 3), (3, 17, 4)):
        experts = 2 * world if k < 2 * world else 4 * world
        d = MoEDispatcher(ctx, hidden, experts, k, t)  # uniform contiguous assignment, bfloat16, 512-wide tiles
        owned = make_expt_dict_uniform(world, experts)
        assert d._expt_assignment.n_expts_per_shard == [experts // world] * world
        h, out, want = run_round(ctx, d, owned, experts, k, hidden, t, torch.bfloat16, salt=k)
        assert torch.equal(d.combine(out, h).cpu(), want)


def test_zero_tokens(ctx):
    world = ctx.get_num_ranks()
    d = MoEDispatcher(ctx, 8, 2 * world, 2, 4, dtype=torch.float32)
    dev = ctx.get_device()
    buf, meta, h = d.dispatch(torch.zeros((0, 8), device=dev), torch.zeros((0, 2), dtype=torch.int32, device=dev),
                              torch.zeros((0, 2), device=dev))
    assert buf.shape == (0, 8) and meta.slice_sizes.tolist() == [0, 0] and h.n_tokens_global == 0
    assert d.combine(torch.zeros((0, 8), device=dev), h).shape == (0, 8)


# ---- refusals ----------------------------------------------------------------------------------------

def test_constructor_refusals(ctx):
    world = ctx.get_num_ranks()
    E = 2 * world
    bad = [(dict(hidden_dim=0), aperture.Error, "hidden_dim=0"),
           (dict(topk=E + 1), aperture.Error, "exceeds num_experts"),
           (dict(max_tokens=2.5), TypeError, "max_tokens"),
           (dict(config=MoEDispatchConfig(dispatch_block_size=48)), ValueError, "power of two"),
           (dict(config={"dispatch_block_size": 8}), TypeError, "MoEDispatchConfig"),
           (dict(dtype=torch.int32), ValueError, "floating-point"),
           (dict(expt_assignment="uniform"), TypeError, "ExptAssignment")]
    if world > 1:
        bad.append((dict(num_experts=2 * world + 1, topk=1), AssertionError, "divide evenly"))
    for changes, kind, text in bad:
        args = dict(hidden_dim=8, num_experts=E, topk=2, max_tokens=4)
        args.update(changes)
        with pytest.raises(kind, match=text) as caught:
            MoEDispatcher(ctx, **args)
        assert isinstance(caught.value, aperture.Error)
    # An assignment for another world size or expert count.
    other = make_expt_assignment(world + 1, E + 2, make_expt_dict_uniform(world + 1, E + 2), "cpu")
    with pytest.raises(ValueError, match="expt_bitmask must be an int32"):
        MoEDispatcher(ctx, 8, E, 2, 4, expt_assignment=other)
    with pytest.raises(TypeError, match="iris.iris"):
        MoEDispatcher(object(), 8, E, 2, 4)


def test_dispatch_and_combine_refusals(ctx):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    dev = ctx.get_device()
    E, k, H, T = 2 * world, 2, 8, 4
    d = MoEDispatcher(ctx, H, E, k, T, dtype=torch.float32)
    x = token_rows(T, H, torch.float32).to(dev)
    ids = routing(T, k, E).to(torch.int32).to(dev)
    w = weights(T, k).to(dev)
    # The same wrong input on every rank: each rank names it.
    for args, text in (((x[:, :5], ids, w), "hidden_dim=8"),
                       ((token_rows(T + 1, H, torch.float32).to(dev), routing(T + 1, k, E).to(dev), weights(T + 1, k).to(dev)),
                        "exceed max_tokens=4"),
                       ((x, ids[:, :1], w), "topk_idx must be"),
                       ((x, ids.float(), w), "integer expert ids"),
                       ((x.to(torch.int32), ids, w), "floating-point activations"),
                       ((x, ids, w[:2]), "topk_weight must be")):
        with pytest.raises(ValueError, match=text) as caught:
            d.dispatch(*args)
        assert isinstance(caught.value, aperture.Error)
    # Wrong input on one rank only: that rank names it, every other rank stops with it.
    bad_ids = ids.clone()
    if rank == world - 1:
        bad_ids[1, 0] = E
    with pytest.raises(aperture.Error, match="outside" if rank == world - 1 else r"rank\(s\) \[%d\] refused" % (world - 1)):
        d.dispatch(x, bad_ids, w)
    if world > 1:  # token counts that differ between ranks
        t = T if rank else T - 1
        with pytest.raises(aperture.Error, match="different token counts"):
            d.dispatch(x[:t], ids[:t], w[:t])
    # The dispatcher still works afterwards.
    buf, meta, h = d.dispatch(x, ids, w)
    with pytest.raises(TypeError, match="DispatchHandle"):
        d.combine(buf, (1, 2))
    with pytest.raises(ValueError, match="expert_output must be"):
        d.combine(buf[:, :4], h)
    other = MoEDispatcher(ctx, H, E, 1, T, dtype=torch.float32)
    with pytest.raises(ValueError, match="the handle is for"):
        other.combine(buf, h)
    d.combine(buf, h)  # and a good combine meets on every rank


# ---- Iris's import paths, through python -m aperture.iris ---------------------------------------------

@one_rank_job_only("starts a one-rank job of its own")
def test_iris_import_paths_through_the_shim(tmp_path):
    prog = tmp_path / "moe_prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import iris
        from iris.ccl import MoEDispatcher, MoEDispatchConfig, DispatchHandle, ExptAssignment, TopkResult
        from iris.ccl import make_expt_dict_uniform, make_expt_assignment, topk
        from iris.ccl.moe_utils import (RaggedTensorMetadata, BitmatrixMetadata, make_ragged_tensor_metadata,
                                        remap_ragged_tensor_metadata, reduce)
        from iris.ccl.moe_dispatch import MoEDispatcher as Same
        assert Same is MoEDispatcher and iris.ccl.MoEDispatcher is MoEDispatcher
        ctx = iris.iris(1 << 22)
        x = torch.arange(12.0, device=ctx.get_device()).view(3, 4)
        r = topk(torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], device=ctx.get_device()), 1)
        d = MoEDispatcher(ctx, 4, 2, 1, 3, dtype=torch.float32)
        buf, meta, h = d.dispatch(x, r.indx, r.vals)
        z = d.combine(buf, h)
        assert torch.equal(z.cpu(), x.cpu()), z
        print("moe through the shim: ok")
    """))
    env = child_environment(APERTURE_PROVIDER="shm", TRITON_INTERPRET="1")  # a host heap: interpreted anywhere
    run = subprocess.run([sys.executable, "-m", "aperture.iris", str(prog)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0 and "moe through the shim: ok" in run.stdout, run.stdout + run.stderr[-4000:]


def test_module_exports_match_iris():
    names = ["MoEDispatcher", "MoEDispatchConfig", "DispatchHandle", "ExptAssignment", "make_expt_dict_uniform",
             "make_expt_assignment", "topk", "TopkResult"]
    assert all(name in iris.ccl.__all__ and hasattr(iris.ccl, name) for name in names)
    for name in ("ExptAssignment", "make_expt_dict_uniform", "make_expt_assignment", "RaggedTensorMetadata",
                 "make_ragged_tensor_metadata", "remap_ragged_tensor_metadata", "BitmatrixMetadata", "TopkResult",
                 "topk", "reduce", "_make_bitmatrix_metadata"):
        assert hasattr(moe_utils, name)
    assert MoEDispatchConfig() == MoEDispatchConfig(512, 512)
    assert os.path.basename(moe_utils.__file__) == "moe_utils.py"
