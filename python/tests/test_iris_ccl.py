"""aperture.iris's current-Iris host API in every rank of the job: iris.ccl on the Communicator,
p2p through the heap, allocate_symmetric, broadcast(src=), the factories' Iris behaviours, the
AMD-only names, bad input, and the unmodified-program mechanism (python -m aperture.iris)."""

import dataclasses
import os
import subprocess
import sys
import textwrap

import time

import pytest
import torch
# triton_world before aperture.iris (which imports triton): it decides whether Triton interprets
# this process's kernels, for every test file of the run.
import triton_world  # noqa: F401
import triton
import triton.language as tl
from spawned_job import child_environment, one_rank_job_only, run_spawned_job

import aperture
import aperture.iris as iris
from aperture.iris.ccl.utils import inline_device_barrier

HEAP = 4 << 20

def run_through_shim(prog, *args, env=None, timeout=120):
    """Runs `python -m aperture.iris PROG ARGS` as a one-rank job of its own on the shm heap."""
    if env is None:
        env = child_environment(APERTURE_PROVIDER="shm")
    return subprocess.run([sys.executable, "-m", "aperture.iris", str(prog), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def ctx(team):
    return iris.iris(HEAP, team=team)


def per_rank(rank, shape, dtype, device, salt=0):
    n = torch.tensor(shape).prod().item()
    return ((torch.arange(n, dtype=torch.float64) * 3 + 1000 * rank + salt) % 97).to(dtype).view(shape).to(device)


def test_host_attributes_match_iris(ctx, team):
    assert isinstance(ctx.device, str) and ctx.device.startswith(("cuda:", "cpu"))
    assert ctx.heap.get_heap_bases() is ctx.get_heap_bases()
    assert ctx.cur_rank == team.rank and ctx.num_ranks == team.size


def test_out_returns_the_same_object_and_2d_channels_last_is_accepted(ctx):
    out = ctx.zeros(6, dtype=torch.float32)
    assert ctx.ones(2, 3, out=out) is out and out.shape == (2, 3) and bool((out == 1).all())
    assert ctx.arange(6, dtype=torch.float32, out=out) is out
    e = ctx.empty(4, 8, memory_format=torch.channels_last)
    assert e.shape == (4, 8) and e.is_contiguous()
    e4 = ctx.empty(2, 3, 4, 5, memory_format=torch.channels_last)
    assert e4.is_contiguous(memory_format=torch.channels_last)


def test_broadcast_src_returns_numpy_for_tensors(ctx, team):
    for src in range(team.size):
        value = torch.arange(5) * (src + 1) if ctx.cur_rank == src else None
        got = ctx.broadcast(value, src=src)
        assert got.tolist() == [i * (src + 1) for i in range(5)]
        if ctx.cur_rank != src:
            import numpy as np

            assert isinstance(got, np.ndarray)
        assert ctx.broadcast({"r": src} if ctx.cur_rank == src else None, src) == {"r": src}


def test_allocate_symmetric_has_its_own_table(ctx, team):
    used = ctx.heap.offset
    t, bases = ctx.allocate_symmetric(3, 5, dtype=torch.int32)
    assert t.shape == (3, 5) and t.dtype == torch.int32 and bases.dtype == torch.int64 and bool((t == 0).all())
    assert bases.device == ctx.get_device() and bases.numel() == team.size
    # Its own table (entry cur_rank is the tensor), and in the heap at one offset on every rank,
    # as both of Iris's table-form test_allocate_symmetric versions require.
    assert int(bases[team.rank].item()) == t.data_ptr() and ctx.heap.is_symmetric(t) and ctx.is_symmetric(t)
    assert ctx.heap.offset > used, "allocate_symmetric took no heap space"
    heap_bases = ctx.get_heap_bases()
    assert {int(bases[r].item()) - int(heap_bases[r].item()) for r in range(team.size)} == {t.data_ptr() - int(
        heap_bases[team.rank].item())}
    t.copy_(per_rank(team.rank, (3, 5), torch.int32, t.device))
    ctx.barrier()
    for r in range(team.size):
        assert torch.equal(ctx.as_remote(t, r).cpu(), per_rank(r, (3, 5), torch.int32, "cpu"))
    ctx.barrier()
    h = ctx.as_symmetric(torch.full((4,), 2.5, device=ctx.get_device()))
    assert ctx.heap.is_symmetric(h) and bool((h == 2.5).all())
    # A strided view keeps its strides (Iris's newest test_as_remote); bad input is Iris's ValueError.
    grid = ctx.zeros(6, 8, dtype=torch.float32)
    grid.copy_(per_rank(team.rank, (6, 8), torch.float32, grid.device, salt=3))
    ctx.barrier()
    for r in range(team.size):
        view = ctx.as_remote(grid[1::2, ::3], r)
        assert view.stride() == grid[1::2, ::3].stride() and (r != team.rank or view.data_ptr() == grid[1, 0].data_ptr())
        assert torch.equal(view.cpu(), per_rank(r, (6, 8), torch.float32, "cpu", salt=3)[1::2, ::3])
    ctx.barrier()
    for rank, words in ((team.size, "out of range"), (-1, "out of range")):
        with pytest.raises(ValueError, match=words) as refused:
            ctx.as_remote(grid, rank)
        assert isinstance(refused.value, aperture.Error)
    with pytest.raises(ValueError, match="symmetric heap"):
        ctx.as_remote(torch.zeros(4, device=ctx.get_device()), 0)
    # Iris's experimental SymmetricAddressMap interface, over aperture's maps (the heap's, the tensor's own).
    from aperture.iris.experimental.symmetric_memory import SymmetricAddressMap
    from aperture.iris.experimental.torch_symmmem_provider import TorchSymmMemProvider
    from aperture.iris.experimental.torch_symm_mem_provider import TorchSymmMemProvider as same
    assert TorchSymmMemProvider is same
    amap = SymmetricAddressMap(ctx.symmetric_address_map(t))
    assert amap.direct == (True,) * team.size and amap.all_direct() and amap.indirect_peers() == []
    assert amap.allocation_base == ctx.memory_pool.data_ptr() and amap.allocation_bytes == ctx.heap_size
    assert torch.equal(amap.peer_bases.cpu(), heap_bases.cpu()) and amap.owns(t) and amap.is_direct(team.rank)
    own = SymmetricAddressMap(aperture.address_map(t))  # the tensor's own map: its table is allocate_symmetric's
    assert own.allocation_base == t.data_ptr() and torch.equal(own.peer_bases.cpu(), bases.cpu()) and own.owns(t)
    # Field by field, as a provider written for Iris makes it; rank 0 marked unreachable.
    fields = SymmetricAddressMap(bases, team.rank, t.data_ptr(), t.nbytes, direct=[r != 0 for r in range(team.size)])
    assert fields.address_map is None and fields.world_size == team.size and fields.owns(t)
    assert fields.indirect_peers() == [0] and not fields.owns(grid)
    for r in range(1, team.size):
        assert fields.translate(t[1:], r) == int(bases[r].item()) + t.element_size() * 5
    with pytest.raises(ValueError, match="not reachable"):
        fields.translate(t, 0)
    with pytest.raises(TypeError, match="the fields"):
        SymmetricAddressMap(bases, team.rank)
    # The newest descriptor (iris.host.memory.address_map), checked as Iris checks it.
    from aperture.iris.host.memory import address_map as newest, tensors
    import aperture.iris.host.memory.tensors as imported  # the newest __init__'s own import path
    assert tensors is iris.tensor_creation and imported is tensors
    described = newest.SymmetricAddressMap.of(aperture.address_map(t))
    assert described == newest.SymmetricAddressMap(bases, team.rank, t.data_ptr(), t.nbytes)
    assert described.supports(newest.CAP_REMOTE_LOAD_STORE) and described.supports(newest.CAP_REMOTE_ATOMICS)
    assert described.world_size == team.size and described.owns(t) and not described.owns(grid)
    for bad, words in (((bases.float(), team.rank, t.data_ptr(), 60), "int64 or uint64"),
                       ((bases, team.size, t.data_ptr(), 60), "out of range"),
                       ((bases, team.rank, t.data_ptr() + 4, 60), "does not match")):
        with pytest.raises(ValueError, match=words):
            newest.SymmetricAddressMap(*bad)
    with pytest.raises(AttributeError, match="frozen"):
        described.local_rank = 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_ccl_collectives(ctx, team, dtype):
    n, dev, me = team.size, ctx.get_device(), team.rank
    m, cols = 3, 4 * n
    inp = ctx.zeros(m, cols, dtype=dtype)
    inp.copy_(per_rank(me, (m, cols), dtype, dev))
    out = ctx.zeros(m, cols, dtype=dtype)
    total = sum(per_rank(r, (m, cols), torch.float64, "cpu") for r in range(n))
    ctx.ccl.all_reduce(out, inp)
    assert torch.equal(out.cpu().double(), total.to(dtype).double()) or dtype == torch.bfloat16 and \
        torch.allclose(out.cpu().double(), total, rtol=2e-2)
    gathered = ctx.zeros(n * m, cols, dtype=dtype)
    ctx.ccl.all_gather(gathered, inp)
    assert torch.equal(gathered.cpu(), torch.cat([per_rank(r, (m, cols), dtype, "cpu") for r in range(n)]))
    a2a = ctx.zeros(m, cols, dtype=dtype)
    ctx.ccl.all_to_all(a2a, inp)
    w = cols // n
    expect = torch.cat([per_rank(r, (m, cols), dtype, "cpu")[:, me * w:(me + 1) * w] for r in range(n)], dim=1)
    assert torch.equal(a2a.cpu(), expect)
    # Iris's layout (output of the input's shape): this rank's tiles of the sum, wherever Iris's
    # Config puts them; aperture writes the whole sum there. torch's layout (numel / world): the
    # rank's flat share.
    rs = ctx.full((m, cols), -7, dtype=dtype)
    ctx.ccl.reduce_scatter(rs, inp)
    share = m * cols // n
    flat = ctx.full((share,), -7, dtype=dtype)
    ctx.ccl.reduce_scatter(flat, inp)
    if dtype != torch.bfloat16:
        assert torch.equal(rs.cpu().double(), total.to(dtype).double())
        assert torch.equal(flat.cpu().double(), total.view(-1)[me * share:(me + 1) * share])
    for root in range(n):
        b = ctx.zeros(m, cols, dtype=dtype)
        b.copy_(per_rank(me, (m, cols), dtype, dev))
        ctx.ccl.broadcast(b, src=root)
        assert torch.equal(b.cpu(), per_rank(root, (m, cols), dtype, "cpu"))
        red = ctx.full((m, cols), -1, dtype=dtype)
        ctx.ccl.reduce(red, inp, dst=root)
        if me == root and dtype != torch.bfloat16:
            assert torch.equal(red.cpu().double(), total)
        elif me != root:
            assert bool((red == -1).all())
        big = ctx.zeros(n * m, cols, dtype=dtype)
        big.copy_(per_rank(me, (n * m, cols), dtype, dev))
        part = ctx.zeros(m, cols, dtype=dtype)
        ctx.ccl.scatter(part, big, src=root)
        assert torch.equal(part.cpu(), per_rank(root, (n * m, cols), dtype, "cpu")[me * m:(me + 1) * m])
        g = ctx.full((n * m, cols), -1, dtype=dtype)
        ctx.ccl.gather(g, inp, dst=root)
        if me == root:
            assert torch.equal(g.cpu(), torch.cat([per_rank(r, (m, cols), dtype, "cpu") for r in range(n)]))
        else:
            assert bool((g == -1).all())
    ctx.ccl.barrier()
    ctx.device_barrier()


def test_ccl_module_forms(ctx, team):
    # Iris's module functions (the Iris instance third), as real programs import them.
    from iris_modules import all_gather_module, all_reduce_module, all_to_all_module, reduce_scatter_module
    n, dev, me = team.size, ctx.get_device(), team.rank
    m, cols = 2, 4 * n
    inp = ctx.zeros(m, cols, dtype=torch.float32)
    inp.copy_(per_rank(me, (m, cols), torch.float32, dev))
    total = sum(per_rank(r, (m, cols), torch.float64, "cpu") for r in range(n))
    out = ctx.zeros(m, cols, dtype=torch.float32)
    ws = all_reduce_module.all_reduce_preamble(out, inp, ctx)
    assert isinstance(ws, all_reduce_module.AllReduceWorkspace)
    all_reduce_module.all_reduce(out, inp, ctx, workspace=ws)
    assert torch.equal(out.cpu().double(), total)
    gathered = ctx.zeros(n * m, cols, dtype=torch.float32)
    all_gather_module.all_gather(gathered, inp, ctx)
    assert torch.equal(gathered.cpu(), torch.cat([per_rank(r, (m, cols), torch.float32, "cpu") for r in range(n)]))
    a2a = ctx.zeros(m, cols, dtype=torch.float32)
    all_to_all_module.all_to_all(a2a, inp, ctx, config=iris.ccl.Config())
    w = cols // n
    expect = torch.cat([per_rank(r, (m, cols), torch.float32, "cpu")[:, me * w:(me + 1) * w] for r in range(n)], dim=1)
    assert torch.equal(a2a.cpu(), expect)
    rs = ctx.zeros(m * cols // n, dtype=torch.float32)
    reduce_scatter_module.reduce_scatter(rs, inp, ctx, workspace=None)
    share = m * cols // n
    assert torch.equal(rs.cpu().double(), total.view(-1)[me * share:(me + 1) * share])
    with pytest.raises(aperture.Error, match="Iris instance argument must be an iris.iris"):
        all_reduce_module.all_reduce(out, inp, "not a context")
    ctx.barrier()


def test_user_all_reduce_keeps_its_heap_buffers(ctx, team):
    # iris.ccl.user_all_reduce: tensors off the heap in, a heap result that stays at one address
    # per (shape, dtype) across calls (what graph capture needs).
    from iris_modules import user_all_reduce_module
    n, dev, me = team.size, ctx.get_device(), team.rank
    reducer = user_all_reduce_module.UserAllReduce(ctx, max_numel=64, dtype=torch.float32)
    first = reducer.all_reduce(per_rank(me, (3, 5), torch.float32, dev))
    assert ctx.is_symmetric(first) and first.shape == (3, 5)
    assert torch.equal(first.cpu().double(), sum(per_rank(r, (3, 5), torch.float64, "cpu") for r in range(n)))
    address = first.data_ptr()
    again = reducer.all_reduce(per_rank(me, (3, 5), torch.float32, dev, salt=7))
    assert again is first and again.data_ptr() == address
    assert torch.equal(again.cpu().double(), sum(per_rank(r, (3, 5), torch.float64, "cpu", salt=7) for r in range(n)))
    counts = reducer.all_reduce(per_rank(me, (4, 2), torch.int32, dev).t())  # another shape and dtype, strided
    assert counts.data_ptr() != address and counts.dtype == torch.int32 and counts.shape == (2, 4)
    assert torch.equal(counts.cpu(), sum(per_rank(r, (4, 2), torch.int32, "cpu").t() for r in range(n)))
    with pytest.raises(TypeError, match="takes a torch.Tensor") as refused:
        reducer.all_reduce([1, 2])
    assert isinstance(refused.value, aperture.Error)
    with pytest.raises(ValueError, match="max_numel must be a positive int"):
        user_all_reduce_module.UserAllReduce(ctx, 0)
    ctx.barrier()


def test_ccl_rooted_module_forms(ctx, team):
    # broadcast, reduce (root as dst= and as root=, with reduce_preamble), scatter, gather, barrier
    # and send/recv/sendrecv in Iris's module form, every element checked on every rank.
    from iris_modules import (barrier_module, broadcast_module, gather_module, reduce_module, scatter_module,
                              sendrecv_module)
    n, dev, me = team.size, ctx.get_device(), team.rank
    m, cols = 3, 5
    root = n - 1
    value = ctx.zeros(m, cols, dtype=torch.float32)
    value.copy_(per_rank(me, (m, cols), torch.float32, dev, salt=1))
    assert broadcast_module.broadcast(value, ctx, src=root) is None
    assert torch.equal(value.cpu(), per_rank(root, (m, cols), torch.float32, "cpu", salt=1))
    inp = ctx.zeros(m, cols, dtype=torch.float32)
    inp.copy_(per_rank(me, (m, cols), torch.float32, dev, salt=2))
    total = sum(per_rank(r, (m, cols), torch.float64, "cpu", salt=2) for r in range(n))
    for keywords in ({"dst": root}, {"root": root}):
        out = ctx.zeros(m, cols, dtype=torch.float32)
        out.fill_(-1.0)
        ws = reduce_module.reduce_preamble(out, inp, ctx, root=root)
        reduce_module.reduce(out, inp, ctx, workspace=ws, **keywords)
        if me == root:
            assert torch.equal(out.cpu().double(), total), keywords
        else:
            assert torch.equal(out.cpu(), torch.full((m, cols), -1.0)), keywords  # a non-root's is untouched
    if n > 1:
        with pytest.raises(aperture.Error, match="name different roots"):
            reduce_module.reduce(out, inp, ctx, 1, root=0)
    stacked = ctx.zeros(n * m, cols, dtype=torch.float32)
    stacked.copy_(per_rank(me, (n * m, cols), torch.float32, dev, salt=3))
    mine = ctx.zeros(m, cols, dtype=torch.float32)
    scatter_module.scatter(mine, stacked, ctx, src=root)
    assert torch.equal(mine.cpu(), per_rank(root, (n * m, cols), torch.float32, "cpu", salt=3)[me * m:(me + 1) * m])
    everyone = ctx.zeros(n * m, cols, dtype=torch.float32)
    everyone.fill_(-2.0)
    gather_module.gather(everyone, inp, ctx, dst=root)
    if me == root:
        assert torch.equal(everyone.cpu(), torch.cat([per_rank(r, (m, cols), torch.float32, "cpu", salt=2)
                                                      for r in range(n)]))
    else:
        assert torch.equal(everyone.cpu(), torch.full((n * m, cols), -2.0))
    barrier_module.barrier(ctx)
    if n > 1:
        right, left = (me + 1) % n, (me - 1) % n
        got = ctx.zeros(m, cols, dtype=torch.float32)
        sendrecv_module.sendrecv(inp, got, ctx, right, left, tag=5)
        assert torch.equal(got.cpu(), per_rank(left, (m, cols), torch.float32, "cpu", salt=2))
    if n % 2 == 0:
        # send and recv on their own around the ring: even ranks send first, odd ones receive first.
        again = ctx.zeros(m, cols, dtype=torch.float32)
        if me % 2 == 0:
            sendrecv_module.send(inp, ctx, (me + 1) % n, tag=6)
            sendrecv_module.recv(again, ctx, (me - 1) % n, tag=6)
        else:
            sendrecv_module.recv(again, ctx, (me - 1) % n, tag=6)
            sendrecv_module.send(inp, ctx, (me + 1) % n, tag=6)
        assert torch.equal(again.cpu(), per_rank((me - 1) % n, (m, cols), torch.float32, "cpu", salt=2))
    with pytest.raises(ValueError, match="is this rank"):
        sendrecv_module.send(inp, ctx, me)
    with pytest.raises(ValueError, match="is this rank"):
        sendrecv_module.recv(inp, ctx, me)
    ctx.barrier()


def test_newest_ccl_keywords(ctx, team):
    # Keywords Iris's newest ccl tests pass: reduce(root=, workspace=) and ctx.ccl.reduce_preamble,
    # barrier(async_op=), Config(reduce_variant=, all_gather_variant="ring",
    # reduce_scatter_variant="ring_chunked"), iris.ccl.utils.extract_group_info.
    from aperture.iris.ccl import Config
    from aperture.iris.ccl.utils import extract_group_info
    n, dev, me = team.size, ctx.get_device(), team.rank
    inp = ctx.zeros(2, 3, dtype=torch.float32)
    inp.copy_(per_rank(me, (2, 3), torch.float32, dev, salt=4))
    out = ctx.full((2, 3), -1.0, dtype=torch.float32)
    root = n - 1
    config = Config(reduce_variant="one_shot")
    ws = ctx.ccl.reduce_preamble(out, inp, root=root, config=config)
    ctx.ccl.reduce(out, inp, root=root, config=config, workspace=ws)
    want = sum(per_rank(r, (2, 3), torch.float64, "cpu", salt=4) for r in range(n)) if me == root else \
        torch.full((2, 3), -1.0, dtype=torch.float64)
    assert torch.equal(out.cpu().double(), want)
    # One tensor, reduced in place on the root (Iris's bench_reduce.py: ctx.ccl.reduce(tensor, dst=0)).
    inplace = ctx.zeros(2, 3, dtype=torch.float32)
    inplace.copy_(per_rank(me, (2, 3), torch.float32, dev, salt=9))
    ctx.ccl.reduce(inplace, dst=root, config=config)
    mine = per_rank(me, (2, 3), torch.float64, "cpu", salt=9)
    want = sum(per_rank(r, (2, 3), torch.float64, "cpu", salt=9) for r in range(n)) if me == root else mine
    assert torch.equal(inplace.cpu().double(), want)
    ctx.ccl.barrier(async_op=True)
    assert Config(all_gather_variant="ring").all_gather_variant == "ring"
    assert Config(reduce_scatter_variant="ring_chunked").reduce_scatter_variant == "ring_chunked"
    with pytest.raises(ValueError, match="reduce_variant"):
        Config(reduce_variant="atomic")
    assert extract_group_info(None, ctx) == (me, me, n, 0, 1)
    ctx.barrier()


def test_newest_ccl_forms(ctx, team):
    # Forms Iris's newest ccl tests use: the two-tensor broadcast (method and module), all_gather's
    # preamble and its heap-only output, Config(all_reduce_variant="one_shot_legacy") and the
    # low-latency variants of one version ("ll", "ll128", "rccl_ll"), and the
    # refusal of a workspace whose Config made fewer tiles than the call's (spinlock locks, ring
    # flags; reduce_scatter's ring workspace through Iris's own _prepare_ring_workspace).
    from iris_modules import all_gather_module, broadcast_module, reduce_scatter_module
    from aperture.iris.ccl import Config
    n, dev, me = team.size, ctx.get_device(), team.rank
    src = n - 1
    inp = ctx.zeros(4, 6, dtype=torch.float32)
    inp.copy_(per_rank(me, (4, 6), torch.float32, dev, salt=7))
    out = ctx.full((4, 6), -1.0, dtype=torch.float32)
    ctx.ccl.broadcast(out, inp, src=src, config=Config())
    assert torch.equal(out.cpu(), per_rank(src, (4, 6), torch.float32, "cpu", salt=7))
    assert torch.equal(inp.cpu(), per_rank(me, (4, 6), torch.float32, "cpu", salt=7))  # inputs are not written
    out.fill_(-2.0)
    broadcast_module.broadcast(out, inp, ctx, src=0)
    assert torch.equal(out.cpu(), per_rank(0, (4, 6), torch.float32, "cpu", salt=7))
    same = ctx.zeros(4, 6, dtype=torch.float32)
    same.copy_(inp)
    ctx.ccl.broadcast(same, same, src=src)  # in place through the two-tensor form
    assert torch.equal(same.cpu(), per_rank(src, (4, 6), torch.float32, "cpu", salt=7))
    with pytest.raises(aperture.Error, match="24 elements and input 6"):
        ctx.ccl.broadcast(out, inp[0], src=0)
    # A parameter given by position and by keyword is refused before any rank moves, as Python
    # refuses it for a named signature (even when the keyword repeats the default).
    for call, name in ((lambda: ctx.ccl.broadcast(out, inp, src, src=0), "src"),
                       (lambda: ctx.ccl.broadcast(out, src, None, group=None), "group"),
                       (lambda: ctx.ccl.broadcast(out, inp, src, None, False, async_op=True), "async_op"),
                       (lambda: ctx.ccl.broadcast(out, inp, input_tensor=inp), "input_tensor")):
        with pytest.raises(TypeError, match=f"multiple values for argument '{name}'"):
            call()
    ctx.ccl.broadcast(out, inp, src, None, False, None)  # every parameter by position
    assert torch.equal(out.cpu(), per_rank(src, (4, 6), torch.float32, "cpu", salt=7))

    gathered = ctx.full((n * 4, 6), -1.0, dtype=torch.float32)
    config = Config(all_gather_variant="ring")
    ws = all_gather_module.all_gather_preamble(gathered, inp, ctx, config=config)
    assert ws is ctx.ccl.all_gather_preamble(gathered, inp, config=config, workspace=ws)
    ctx.ccl.all_gather(gathered, inp, config=config, workspace=ws)
    everyone = torch.cat([per_rank(r, (4, 6), torch.float32, "cpu", salt=7) for r in range(n)])
    assert torch.equal(gathered.cpu(), everyone)
    off_heap = torch.full((n * 4, 6), -1.0, device=dev)  # either tensor may lie off the heap (Iris's newest)
    ctx.ccl.all_gather(off_heap, inp.clone())
    assert torch.equal(off_heap.cpu(), everyone)
    with pytest.raises(ValueError, match=rf"Output tensor shape \({n * 4 + 1}, 6\) does not match expected shape "
                                         rf"\({n * 4}, 6\)") as refused:
        ctx.ccl.all_gather(ctx.zeros(n * 4 + 1, 6), inp)
    assert isinstance(refused.value, aperture.Error)

    total = sum(per_rank(r, (4, 6), torch.float64, "cpu", salt=7) for r in range(n))
    for variant in ("one_shot_legacy", "ll", "ll128", "rccl_ll"):
        out.zero_()
        ctx.ccl.all_reduce(out, inp, config=Config(all_reduce_variant=variant))
        assert torch.equal(out.cpu().double(), total), variant
    for variant, kind in (("spinlock", "Lock"), ("ring", "Flags")):
        big = Config(all_reduce_variant=variant, block_size_m=4, block_size_n=8)  # 1 tile of the (4, 6) output
        ws = ctx.ccl.all_reduce_preamble(out, inp, config=big)
        assert ws.tiles == 1
        ctx.ccl.all_reduce(out, inp, config=big, workspace=ws)  # the preamble's own Config: fine
        assert torch.equal(out.cpu().double(), total)
        with pytest.raises(ValueError, match=f"{kind} array too small: the workspace holds 1 tiles.* makes 6"):
            ctx.ccl.all_reduce(out, inp, config=Config(all_reduce_variant=variant, block_size_m=2, block_size_n=2),
                               workspace=ws)
    ws = reduce_scatter_module.ReduceScatterWorkspace()
    assert reduce_scatter_module._prepare_ring_workspace(ctx, 4, 6, torch.float32, 1, ws) is ws
    small = Config(reduce_scatter_variant="ring_chunked", block_size_m=2, block_size_n=2)
    with pytest.raises(ValueError, match="Flags array too small"):
        ctx.ccl.reduce_scatter(out, inp, config=small, workspace=ws)
    ctx.ccl.reduce_scatter(out, inp, config=small)  # without the workspace: runs
    assert torch.equal(out.cpu().double(), total)
    # One Iris version's variants (tests/ccl/test_reduce_scatter.py, index file 63609287024): a
    # chunk of the flattened sum at the rank's offset ("inreg", "twophase"; "auto" at 8 ranks) or
    # the rank's tiles ("auto" below): the whole reduction, written here, reads right for both.
    for variant in ("inreg", "twophase", "auto"):
        out.fill_(-1)
        ctx.barrier()
        ctx.ccl.reduce_scatter(out, inp, config=Config(reduce_scatter_variant=variant, block_size_m=2,
                                                       block_size_n=4))
        assert torch.equal(out.cpu().double(), total), variant
    ctx.barrier()


def test_workspaces_have_irises_fields(ctx, team):
    # Iris's AllReduceWorkspace fields (keywords and position; `prepared` set by programs, as
    # Iris's graph-capture probe does), through the preamble, the call and the module form; every
    # rank's sum exact, the values differing per rank and element.
    from iris_modules import all_reduce_module
    from aperture.iris.ccl import AllReduceWorkspace, Config
    n, dev, me = team.size, ctx.get_device(), team.rank
    made = AllReduceWorkspace(variant="ring", shape=(2, 3), dtype=torch.float16, ring_buffer=None, flags=None,
                              locks=None, num_rings=2, flags_per_tile=1, prepared=True)
    assert (made.variant, made.shape, made.dtype, made.num_rings, made.flags_per_tile, made.prepared) == \
        ("ring", (2, 3), torch.float16, 2, 1, True)
    positional = AllReduceWorkspace("atomic", (4,), torch.int32, None, None, None, 3, 0, True)
    assert (positional.variant, positional.shape, positional.num_rings, positional.prepared) == \
        ("atomic", (4,), 3, True)
    assert all_reduce_module.AllReduceWorkspace is AllReduceWorkspace
    inp = ctx.zeros(3, 5, dtype=torch.float32)
    inp.copy_(per_rank(me, (3, 5), torch.float32, dev, salt=21))
    total = sum(per_rank(r, (3, 5), torch.float64, "cpu", salt=21) for r in range(n))
    out = ctx.full((3, 5), -1.0, dtype=torch.float32)
    config = Config(all_reduce_variant="one_shot", all_reduce_num_rings=2)
    ws = all_reduce_module.all_reduce_preamble(out, inp, ctx, config=config)
    assert isinstance(ws, AllReduceWorkspace)
    assert (ws.variant, ws.shape, ws.dtype, ws.num_rings, ws.prepared) == ("one_shot", (3, 5), torch.float32, 2, True)
    assert (ws.ring_buffer, ws.flags, ws.locks, ws.flags_per_tile) == (None, None, None, 0)  # aperture keeps none
    ws.prepared = False  # settable, and aperture's call needs no preamble again
    assert all_reduce_module.all_reduce(out, inp, ctx, config=config, workspace=ws) is ws
    assert torch.equal(out.cpu().double(), total) and ws.prepared is False
    ws.prepared = True
    again = ctx.ccl.all_reduce_preamble(out, inp, config=Config(all_reduce_variant="ring"), workspace=ws)
    assert again is ws and (ws.variant, ws.num_rings, ws.prepared) == ("ring", 1, True)
    out.fill_(-1)
    returned = ctx.ccl.all_reduce(out, inp, config=Config(all_reduce_variant="atomic"))
    assert isinstance(returned, AllReduceWorkspace) and returned.variant == "atomic" and returned.shape == (3, 5)
    assert torch.equal(out.cpu().double(), total)
    # The kept workspace follows each call's Config: a variant set in capitals after the Config was
    # made (a dataclass field, checked only at construction) is named in lower case, and a call
    # without a Config names Iris's default again; the same object each time.
    shouting = Config()
    shouting.all_reduce_variant = "ONE_SHOT"
    out.fill_(-1)
    assert ctx.ccl.all_reduce(out, inp, config=shouting) is returned
    assert returned.variant == "one_shot" and torch.equal(out.cpu().double(), total)
    out.fill_(-1)
    assert ctx.ccl.all_reduce(out, inp) is returned and returned.variant == "two_shot"
    assert torch.equal(out.cpu().double(), total)
    ctx.barrier()


def test_fused_workspaces_have_irises_fields(ctx, team):
    # GemmReduceScatterWorkspace.output_f32: the float32 buffer the unfused path sums into (here,
    # on the host heap); AllReduceRMSNormWorkspace's reduced/norm_out/ar_workspace/ar_config.
    from aperture.iris.ccl import fused_ar_rmsnorm, fused_gemm_rs
    n, dev, me = team.size, ctx.get_device(), team.rank
    assert fused_gemm_rs.GemmReduceScatterWorkspace().output_f32 is None
    tokens, h_shard, k = 3, 4, 2 * n
    inp = per_rank(me, (tokens, h_shard), torch.float32, dev, salt=30) / 10
    w = per_rank(me, (h_shard, k), torch.float32, dev, salt=31) / 10
    ws = fused_gemm_rs.gemm_reduce_scatter_preamble(inp, w, ctx)
    assert isinstance(ws, fused_gemm_rs.GemmReduceScatterWorkspace)
    assert ws.output_f32.shape == (tokens, 2) and ws.output_f32.dtype == torch.float32
    assert ctx.is_symmetric(ws.output_f32)
    got = fused_gemm_rs.gemm_reduce_scatter(inp, w, ctx, workspace=ws)
    total = sum((per_rank(r, (tokens, h_shard), torch.float64, "cpu", salt=30) / 10) @
                (per_rank(r, (h_shard, k), torch.float64, "cpu", salt=31) / 10) for r in range(n))
    torch.testing.assert_close(got.cpu().double(), total[:, 2 * me:2 * me + 2], rtol=1e-5, atol=1e-5)
    assert torch.equal(ws.output_f32.cpu(), got.cpu())  # the sums landed in output_f32
    hidden = 64
    partial = ctx.zeros((tokens, hidden), dtype=torch.float32)
    partial.copy_(per_rank(me, (tokens, hidden), torch.float32, dev, salt=32) / 50)
    weight = torch.ones(hidden, device=dev)
    rms_ws = fused_ar_rmsnorm.all_reduce_rmsnorm_preamble(partial, None, ctx)
    assert isinstance(rms_ws, fused_ar_rmsnorm.AllReduceRMSNormWorkspace)
    assert (rms_ws.reduced, rms_ws.ar_workspace, rms_ws.ar_config) == (None, None, None)
    assert rms_ws.norm_out.shape == (tokens, hidden)
    ctx.barrier()
    out = fused_ar_rmsnorm.all_reduce_rmsnorm(partial, None, weight, ctx, workspace=rms_ws)
    assert out is rms_ws.norm_out
    summed = sum(per_rank(r, (tokens, hidden), torch.float32, "cpu", salt=32) / 50 for r in range(n))
    torch.testing.assert_close(out.cpu(), torch.nn.functional.rms_norm(summed, (hidden,), weight.cpu(), 1e-6),
                               rtol=1e-5, atol=1e-5)
    made = fused_ar_rmsnorm.AllReduceRMSNormWorkspace(norm_out=out, ar_config=iris.ccl.Config())
    assert made.norm_out is out and made.reduced is None and made.ar_config == iris.ccl.Config()
    ctx.barrier()


def test_variants_irises_scripts_name_run_on_the_communicator(ctx, team):
    # reduce_scatter "fused" (6196a42) and "two_shot_inline", all_reduce "flat" (bench_mlp_layer):
    # accepted, and the Communicator's collective runs (the variant selects nothing here).
    from iris_modules import barrier_module, reduce_scatter_module
    from aperture.iris.ccl import Config
    n, dev, me = team.size, ctx.get_device(), team.rank
    inp = ctx.zeros(4, 6, dtype=torch.float32)
    inp.copy_(per_rank(me, (4, 6), torch.float32, dev, salt=40))
    total = sum(per_rank(r, (4, 6), torch.float64, "cpu", salt=40) for r in range(n))
    out = ctx.full((4, 6), -1.0, dtype=torch.float32)
    for variant in ("fused", "two_shot_inline"):
        out.fill_(-1)
        ctx.barrier()
        reduce_scatter_module.reduce_scatter(out, inp, ctx, config=Config(reduce_scatter_variant=variant))
        assert torch.equal(out.cpu().double(), total), variant
    out.fill_(-1)
    ctx.ccl.all_reduce(out, inp, config=Config(all_reduce_variant="flat"))
    assert torch.equal(out.cpu().double(), total)
    # barrier's config= (Iris's, unused): a Config or None, else an IrisTypeError on every rank.
    ctx.ccl.barrier(config=Config())
    barrier_module.barrier(ctx, None, False, Config(all_reduce_variant="flat"))
    for bad in (lambda: ctx.ccl.barrier(config={"block_size_m": 32}), lambda: barrier_module.barrier(ctx, config=1)):
        with pytest.raises(TypeError, match="config must be an iris.ccl.Config or None") as refused:
            bad()
        assert isinstance(refused.value, aperture.Error)
    ctx.barrier()


def test_fused_gemm_ops_run_unfused_where_overlapped_gemm_cannot(ctx, team):
    # On the host heap (and for dtypes or shapes OverlappedGemm does not take on a GPU), the fused
    # GEMM ops run as torch.matmul and one Communicator call; their module forms too.
    from aperture.iris.ccl import _fused, fused_ag_gemm, fused_gemm_rs
    n, dev, me = team.size, ctx.get_device(), team.rank
    m, k_local, cols = 5, 3, 7
    shard = per_rank(me, (m, k_local), torch.float32, dev, salt=8) / 10
    weight = per_rank(0, (n * k_local, cols), torch.float32, dev, salt=9) / 10  # the same on every rank
    out = torch.full((m, cols), -1.0, device=dev)
    fused_ag_gemm.all_gather_gemm(out, shard, weight, ctx)
    full = torch.cat([per_rank(r, (m, k_local), torch.float64, "cpu", salt=8) / 10 for r in range(n)], dim=1)
    torch.testing.assert_close(out.cpu().double(), full @ weight.cpu().double(), rtol=1e-5, atol=1e-5)
    k = 2 * n
    inp = per_rank(me, (m, k_local), torch.float32, dev, salt=10) / 10
    w = per_rank(me, (k_local, k), torch.float32, dev, salt=11) / 10
    workspace = fused_gemm_rs.gemm_reduce_scatter_preamble(inp, w, ctx)
    got = fused_gemm_rs.gemm_reduce_scatter(inp, w, ctx, workspace=workspace)
    total = sum((per_rank(r, (m, k_local), torch.float64, "cpu", salt=10) / 10) @
                (per_rank(r, (k_local, k), torch.float64, "cpu", salt=11) / 10) for r in range(n))
    assert got.shape == (m, 2) and got.dtype == torch.float32
    torch.testing.assert_close(got.cpu().double(), total[:, 2 * me:2 * me + 2], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="inner dimension mismatch") as refused:
        _fused.gemm_reduce_scatter(ctx, inp, w[:2])
    assert isinstance(refused.value, aperture.Error)
    ctx.barrier()


def test_all_to_all_v_moves_variable_counts(ctx, team):
    # Rank i sends (i + j + 1) * 3 elements to rank j (none to itself at 2+ ranks: a zero count),
    # each element naming its sender, receiver and position; every element received is checked.
    n, dev, me = team.size, ctx.get_device(), team.rank

    def count(i, j):
        return 0 if i == j and n > 1 else (i + j + 1) * 3

    def values(i, j):
        return torch.arange(count(i, j), dtype=torch.float64) + 1000 * i + 100 * j

    send_counts = [count(me, j) for j in range(n)]
    recv_counts = [count(i, me) for i in range(n)]
    send_displs = [sum(send_counts[:j]) + 2 for j in range(n)]  # a gap of 2 in front
    recv_displs = [sum(recv_counts[:i]) for i in range(n)]
    inp = ctx.full((sum(send_counts) + 2,), -1.0, dtype=torch.float32)
    for j in range(n):
        inp[send_displs[j]:send_displs[j] + send_counts[j]] = values(me, j).to(torch.float32).to(dev)
    out = ctx.full((sum(recv_counts) + 5,), -3.0, dtype=torch.float32)
    ctx.ccl.all_to_all_v(out, inp, send_counts, send_displs, recv_counts, recv_displs)
    want = torch.cat([values(i, me) for i in range(n)] + [torch.full((5,), -3.0, dtype=torch.float64)])
    assert torch.equal(out.cpu().double(), want)
    with pytest.raises(aperture.Error, match="run past"):
        ctx.ccl.all_to_all_v(out, inp, send_counts, [inp.numel()] * n, recv_counts, recv_displs)
    with pytest.raises(aperture.Error, match="one per rank"):
        ctx.ccl.all_to_all_v(out, inp, send_counts[:-1] + [-1], send_displs, recv_counts, recv_displs)
    # A pair whose counts disagree (rank 0 expects one element more from the last rank) is refused
    # on every rank, before anything moves.
    wrong = [c + (1 if me == 0 and i == n - 1 else 0) for i, c in enumerate(recv_counts)]
    with pytest.raises(aperture.Error, match=f"rank {n - 1} sends {count(n - 1, 0)} elements to rank 0, which "
                                             f"expects {count(n - 1, 0) + 1}"):
        ctx.ccl.all_to_all_v(out, inp, send_counts, send_displs, wrong, recv_displs)
    assert torch.equal(out.cpu().double(), want)
    ctx.barrier()


def test_all_to_all_v_module_form_splits_columns(ctx, team):
    # Iris's module form: rank i sends j + i + 1 columns of every row to rank j; every element
    # names its sender, its receiver, its row and its column.
    from iris_modules import all_to_all_module
    n, dev, me, rows = team.size, ctx.get_device(), team.rank, 3

    def block(i, j):
        cols = j + i + 1
        r = torch.arange(rows, dtype=torch.float64).view(rows, 1)
        c = torch.arange(cols, dtype=torch.float64).view(1, cols)
        return 1000 * i + 100 * j + 10 * r + c

    sends = [j + me + 1 for j in range(n)]
    receives = [me + i + 1 for i in range(n)]
    inp = torch.cat([block(me, j) for j in range(n)], dim=1).float().to(dev)
    out = ctx.full((rows, sum(receives)), -1.0, dtype=torch.float32)
    all_to_all_module.all_to_all_v(out, inp, receives, sends, ctx)
    assert torch.equal(out.cpu().double(), torch.cat([block(i, me) for i in range(n)], dim=1))
    out.fill_(-1.0)  # the method takes the same column form (as Iris's newest tests call it)
    ctx.ccl.all_to_all_v(out, inp, output_split_sizes=receives, input_split_sizes=sends, config=iris.ccl.Config())
    assert torch.equal(out.cpu().double(), torch.cat([block(i, me) for i in range(n)], dim=1))
    with pytest.raises(aperture.Error, match="give either send_counts"):
        ctx.ccl.all_to_all_v(out, inp, receives, sends, [0] * n)
    with pytest.raises(aperture.Error, match="2-D with sum"):
        all_to_all_module.all_to_all_v(out, inp, receives, [s + 1 for s in sends], ctx)
    ctx.barrier()


def test_autotune_config_resolves_to_the_defaults(ctx, team, capsys, monkeypatch):
    from aperture.iris.ccl import AUTOTUNE, Config, autotune
    assert repr(AUTOTUNE) == "AUTOTUNE" and type(AUTOTUNE)() is AUTOTUNE
    with pytest.raises(TypeError, match="no truth value"):
        bool(AUTOTUNE)
    partial = Config(block_size_m=AUTOTUNE, comm_sms=48)
    assert partial.get_autotune_fields() == ["block_size_m"]
    everything = Config.autotune(comm_sms=80)
    tuned = everything.get_autotune_fields()
    assert "comm_sms" not in tuned and "block_size_n" in tuned and "num_xcds" not in tuned and "chunk_size" not in tuned
    with pytest.raises(TypeError, match="unknown Config field"):
        Config.autotune(no_such_field=1)
    # An AUTOTUNE Config is unchecked until resolved; resolved, it is checked like any other.
    assert Config(block_size_m=AUTOTUNE, comm_sms=-1).get_autotune_fields() == ["block_size_m"]
    with pytest.raises(ValueError, match="comm_sms"):
        Config(block_size_m=AUTOTUNE, comm_sms=-1).with_resolved(block_size_m=32)
    assert Config.get_tunable_fields("all_reduce") == list(Config.get_search_space("all_reduce"))
    assert "all_reduce_variant" in Config.get_search_space("all_reduce")
    assert "all_reduce_variant" not in Config.get_search_space("all_gather")
    assert Config.get_search_space("all_gather")["all_gather_variant"] == ["persistent", "partitioned"]
    monkeypatch.setenv("IRIS_AUTOTUNE_VERBOSE", "1")
    resolved = autotune.resolve_config("all_gather_test", partial, None, None, None, ctx)
    assert resolved.block_size_m == Config().block_size_m and resolved.comm_sms == 48
    assert resolved.get_autotune_fields() == [] and resolved.num_xcds == 1
    assert ("block_size_m at the default" in capsys.readouterr().err) == (team.rank == 0)
    whole = autotune.resolve_config("all_gather", everything, shmem=ctx)
    assert whole == Config(comm_sms=80)
    concrete = Config(block_size_n=128)
    assert autotune.resolve_config("all_reduce", concrete) is concrete
    assert autotune.resolve_config("all_reduce", None) == Config()
    with pytest.raises(TypeError, match="iris.ccl.Config or None"):
        autotune.resolve_config("all_reduce", {"block_size_m": 32})
    # A collective called with an AUTOTUNE Config runs as with any other.
    x = ctx.zeros(4, dtype=torch.float32)
    x.fill_(float(team.rank + 1))
    y = ctx.zeros_like(x)
    ctx.ccl.all_reduce(y, x, config=Config.autotune())
    assert y.tolist() == [float(team.size * (team.size + 1) // 2)] * 4
    ctx.barrier()


def test_newest_host_layout_names_the_same_objects(monkeypatch):
    # The newest Iris's host paths (iris.host.iris, iris.host.platform.utils, iris.host.logging).
    from aperture.iris.host import iris as host_iris
    from aperture.iris.host import logging as host_logging
    from aperture.iris.host.platform import utils
    assert host_iris.Iris is iris.Iris and host_iris.iris is iris.iris
    assert utils.do_bench is iris.do_bench and utils.is_simulation_env is iris.is_simulation_env
    assert host_logging.set_logger_level is iris.set_logger_level and host_logging.DEBUG == iris.DEBUG
    monkeypatch.setenv("IRIS_SIMULATION", "yes")
    devices = torch.cuda.device_count()
    assert utils.is_simulation_env()
    assert utils.get_device_id_for_rank(5) == utils.get_simulation_device_id(5) == (5 % devices if devices else 0)
    monkeypatch.setenv("IRIS_SIMULATION", "0")
    assert not utils.is_simulation_env() and utils.get_device_id_for_rank(5) == 5


def test_p2p_ring_every_form(ctx, team):
    n, me = team.size, team.rank
    if n == 1:
        with pytest.raises(aperture.Error, match="is this rank"):
            ctx.ccl.send(ctx.zeros(4), dst=0)
        return
    right, left = (me + 1) % n, (me - 1) % n
    src = ctx.zeros(64, dtype=torch.float32)
    src.copy_(per_rank(me, (64,), torch.float32, ctx.get_device()))
    got = ctx.zeros(64, dtype=torch.float32)
    works = ctx.ccl.batch_isend_irecv([iris.ccl.P2POp(iris.ccl.p2p.isend, src, right),
                                       iris.ccl.P2POp(iris.ccl.p2p.irecv, got, left)])
    for w in works:
        w.wait()
    assert torch.equal(got.cpu(), per_rank(left, (64,), torch.float32, "cpu"))
    state = ctx.ccl.init_p2p(max_numel=128, dtype=torch.float32)
    plain = torch.arange(32, dtype=torch.int32, device=ctx.get_device()) + 100 * me  # not on the heap: staged
    into = torch.zeros(32, dtype=torch.int32, device=ctx.get_device())
    ctx.ccl.send(plain, right, p2p_state=state)  # buffered: returns before the peer receives
    ctx.ccl.recv(into, left, p2p_state=state)
    assert torch.equal(into.cpu(), torch.arange(32, dtype=torch.int32) + 100 * left)
    ctx.barrier()


def test_p2p_between_every_pair_of_ranks_across_nodes_too(ctx, team, monkeypatch):
    # Every rank sends every other rank a tensor of its own (rendezvous, from the heap) and a staged
    # one; on a team over nodes (python-test.sh: 2x2 under mpirun) the pairs across nodes go through
    # the allocations' engine.
    n, me = team.size, team.rank
    boxes = ctx._p2p_mailboxes
    assert bool(boxes.indirect) == (team.node_count > 1)
    sent = {peer: ctx.zeros(50, dtype=torch.int32) for peer in range(n) if peer != me}
    got = {peer: ctx.zeros(50, dtype=torch.int32) for peer in range(n) if peer != me}
    for peer, t in sent.items():
        t.copy_(torch.arange(50, dtype=torch.int32) * 3 + me * 1000 + peer)
    ops = [iris.ccl.P2POp(iris.ccl.p2p.isend, t, peer) for peer, t in sent.items()]
    ops += [iris.ccl.P2POp(iris.ccl.p2p.irecv, t, peer) for peer, t in got.items()]
    for work in ctx.ccl.batch_isend_irecv(ops):
        work.wait()
    for peer, t in got.items():
        assert torch.equal(t.cpu(), torch.arange(50, dtype=torch.int32) * 3 + peer * 1000 + me), f"from rank {peer}"
    state = ctx.ccl.init_p2p(max_numel=64, dtype=torch.float32)
    for step in range(1, n):  # rank r sends to r + step and receives from r - step: no rank waits on itself
        to, frm = (me + step) % n, (me - step) % n
        plain = torch.arange(40, dtype=torch.float32, device=ctx.get_device()) / 4 + me * 10 + step
        into = torch.zeros(40, dtype=torch.float32, device=ctx.get_device())
        ctx.ccl.send(plain, to, p2p_state=state)  # staged: returns before the peer takes it
        ctx.ccl.recv(into, frm, p2p_state=state)
        assert torch.equal(into.cpu(), torch.arange(40, dtype=torch.float32) / 4 + frm * 10 + step)
    ctx.barrier()
    if boxes.indirect:  # without an engine, a rank of another node is refused at once, on both sides
        monkeypatch.setattr(boxes, "engine", False)
        peer = min(boxes.indirect)
        for call in (lambda: ctx.ccl.isend(sent.get(peer, got[peer]), peer), lambda: ctx.ccl.irecv(got[peer], peer)):
            with pytest.raises(aperture.Error, match="no engine to reach it"):
                call()


def test_reduce_op_is_irises_int_enum(ctx, team):
    from aperture.iris.ccl.utils import ReduceOp

    assert [(m.name, int(m)) for m in ReduceOp][:7] == [("SUM", 0), ("PRODUCT", 1), ("MIN", 2), ("MAX", 3),
                                                        ("BAND", 4), ("BOR", 5), ("BXOR", 6)]
    assert iris.ccl.ReduceOp is ReduceOp and ReduceOp(3) is ReduceOp.MAX and ReduceOp.SUM == 0
    inp = ctx.zeros(40, dtype=torch.float32)
    out = ctx.zeros(40, dtype=torch.float32)
    every = [per_rank(r, (40,), torch.float32, "cpu") for r in range(team.size)]
    stacked = torch.stack(every)
    for op, want in [(0, stacked.sum(0)), (ReduceOp.MAX, stacked.max(0).values), (2, stacked.min(0).values)]:
        inp.copy_(per_rank(team.rank, (40,), torch.float32, ctx.get_device()))
        ctx.ccl.all_reduce(out, inp, op=op)
        assert torch.equal(out.cpu(), want), f"op={op!r}"
    for op in (ReduceOp.BAND, ReduceOp.BXOR, 5):
        with pytest.raises(aperture.Error, match="do not reduce bitwise"):
            ctx.ccl.all_reduce(out, inp, op=op)
    with pytest.raises(aperture.Error, match="not supported"):
        ctx.ccl.all_reduce(out, inp, op=99)
    ctx.barrier()


def test_bad_input_is_an_aperture_error(ctx, team, monkeypatch):
    # Iris's newest tests match "src must be in" / "dst must be in" (test_broadcast, test_reduce).
    for src in (team.size, -1):
        with pytest.raises(ValueError, match="out of range.*src must be in") as refused:
            ctx.ccl.broadcast(ctx.zeros(4), src=src)
        assert isinstance(refused.value, aperture.Error)
        with pytest.raises(ValueError, match="dst must be in"):
            ctx.ccl.reduce(ctx.zeros(4), ctx.zeros(4), dst=src)
    with pytest.raises(aperture.Error, match="out of range"):
        ctx.broadcast(1, src=-1)
    with pytest.raises(aperture.Error, match="out of memory"):
        ctx.zeros(HEAP, dtype=torch.float32)
    with pytest.raises(aperture.Error, match="not on the symmetric heap"):
        ctx.zeros(4, out=torch.zeros(4))
    with pytest.raises(aperture.Error):
        ctx.ccl.all_reduce(ctx.zeros(4, dtype=torch.complex64), ctx.zeros(4, dtype=torch.complex64))
    if team.size > 1:
        with pytest.raises(aperture.Error, match="not a contiguous tensor on the symmetric heap"):
            ctx.ccl.send(torch.zeros(4), dst=(team.rank + 1) % team.size)
        monkeypatch.setenv("APERTURE_TIMEOUT", "0.5")
        with pytest.raises(aperture.Error, match="waited"):  # no sender: a timeout, not a hang
            ctx.ccl.recv(ctx.zeros(4), src=(team.rank + 1) % team.size)
        ctx._p2p_mailboxes.received[(team.rank + 1) % team.size] -= 1
    ctx.barrier()


def test_config_and_amd_only_names():
    c = iris.ccl.Config()  # the newest main-branch defaults (docs/IRIS.md)
    assert (c.block_size_m, c.block_size_n, c.swizzle_size, c.comm_sms, c.num_xcds) == (32, 64, 4, 64, 1)
    assert (c.all_reduce_variant, c.all_reduce_distribution, c.all_reduce_ring_slice_n) == ("two_shot", 1, 64)
    assert (c.all_gather_variant, c.all_to_all_variant, c.reduce_scatter_variant, c.barrier_mode) == \
        ("persistent", "default", "two_shot", "device")
    assert (c.num_stages, c.num_warps, c.threads_per_warp, c.waves_per_eu, c.chunk_size) == (1, 4, 32, 0, 16)
    assert (c.all_reduce_num_warps, c.all_reduce_num_stages, c.all_reduce_waves_per_eu, c.all_reduce_push_chunk_n) == \
        (8, 1, 1, 0)
    # Every version's fields construct it: Iris's own docstring example, and the older defaults.
    assert iris.ccl.Config(all_gather_variant="partitioned").all_gather_variant == "partitioned"
    old = iris.ccl.Config(block_size_m=128, block_size_n=128, swizzle_size=6, all_reduce_variant="atomic",
                          all_reduce_distribution=0, threads_per_warp=64, reduce_scatter_variant="two_shot_push")
    assert (old.chunk_size, old.all_reduce_ring_slice_n, old.threads_per_warp) == (36, 128, 64)
    # Positional construction binds Iris's newest order (index file 70870827569: all_to_all_variant
    # ninth); keywords still name any field.
    pos = iris.ccl.Config(16, 128, 8, 32, 1, 4, False, "partitioned", "default", "one_shot", 0, 2, 64,
                          "fused", 2, 8, 64, 1)
    assert (pos.block_size_m, pos.block_size_n, pos.swizzle_size, pos.comm_sms, pos.num_xcds, pos.chunk_size) == \
        (16, 128, 8, 32, 1, 4)
    assert (pos.use_gluon, pos.all_gather_variant, pos.all_to_all_variant, pos.all_reduce_variant) == \
        (False, "partitioned", "default", "one_shot")
    assert (pos.all_reduce_distribution, pos.all_reduce_num_rings, pos.all_reduce_ring_slice_n,
            pos.reduce_scatter_variant) == (0, 2, 64, "fused")
    assert (pos.num_stages, pos.num_warps, pos.threads_per_warp, pos.waves_per_eu) == (2, 8, 64, 1)
    assert [f.name for f in dataclasses.fields(iris.ccl.Config)][:18] == [
        "block_size_m", "block_size_n", "swizzle_size", "comm_sms", "num_xcds", "chunk_size", "use_gluon",
        "all_gather_variant", "all_to_all_variant", "all_reduce_variant", "all_reduce_distribution",
        "all_reduce_num_rings", "all_reduce_ring_slice_n", "reduce_scatter_variant", "num_stages", "num_warps",
        "threads_per_warp", "waves_per_eu"]
    assert iris.ccl.Config(all_to_all_variant="default", reduce_variant="ring").reduce_variant == "ring"
    with pytest.raises(ValueError, match="all_to_all_variant"):
        iris.ccl.Config(32, 64, 4, 64, None, None, False, "persistent", "two_shot")  # the older order's ninth
    for bad in [dict(all_reduce_variant="nope"), dict(all_gather_variant="rings"), dict(all_to_all_variant="x"),
                dict(reduce_scatter_variant="ring"), dict(barrier_mode="never"), dict(threads_per_warp=16),
                dict(num_warps=0), dict(waves_per_eu=-1), dict(all_reduce_ring_slice_n=24)]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            iris.ccl.Config(**bad)
    for thunk, word in [(lambda: iris.ccl.Config(use_gluon=True), "Gluon"), (lambda: iris.hip.get_num_xcc(), "HIP"),
                        (lambda: iris.ccl.Config(all_gather_variant="tdm"), "Tensor Data Mover"),
                        (lambda: iris.ccl.Config(all_to_all_variant="tdm"), "Tensor Data Mover"),
                        (lambda: iris.ccl.Config(all_reduce_variant="one_shot_gluon"), "Gluon"),
                        (lambda: iris.experimental.rocshmem_provider.RocshmemProvider, "rocSHMEM")]:
        with pytest.raises(aperture.Error, match="AMD-only") as e:
            thunk()
        assert word in str(e.value) and "NVIDIA" in str(e.value)
    # The AMD-only modules import by path (a program that only uses them on its AMD path runs);
    # the first name taken from one is refused, a from-import included.
    import importlib
    for module, name, word in [("aperture.iris.experimental.iris_gluon", "iris", "Gluon"),
                               ("aperture.iris.experimental.rocshmem_provider", "RocshmemProvider", "rocSHMEM"),
                               ("aperture.iris.hip", "get_num_xcc", "HIP"), ("aperture.iris.gluon", "load", "Gluon"),
                               ("aperture.iris.triggered", "TriggeredPlan", "triggered SDMA"),
                               ("aperture.iris.mem.triton.triggered", "TriggeredView", "triggered SDMA"),
                               ("aperture.iris.mem.triton.triggered", "publish", "triggered SDMA")]:
        imported = importlib.import_module(module)
        with pytest.raises(aperture.Error, match=f"{module[len('aperture.'):]}.{name} is AMD-only") as e:
            exec(f"from {module} import {name}", {})
        assert word in str(e.value) and "NVIDIA" in str(e.value)
        assert not hasattr(imported, "__path__")  # dunder probes stay AttributeErrors
    # Iris's Gluon device side at its module paths (iris.mem.gluon, iris.device.gluon,
    # iris.context.gluon) and iris.context's Gluon names: importable, each name refused naming the
    # Triton equivalent.
    for module, name in [("aperture.iris.mem.gluon.context", "Context"), ("aperture.iris.mem.gluon.tracing", "Tracing"),
                         ("aperture.iris.mem.gluon", "context.Context"),
                         ("aperture.iris.device.gluon.context", "Context"),
                         ("aperture.iris.context.gluon", "GluonContext"), ("aperture.iris.context", "GluonContext"),
                         ("aperture.iris.context", "GluonDeviceTracing")]:
        imported = importlib.import_module(module)
        with pytest.raises(aperture.Error, match="AMD-only") as e:
            if "." in name:
                getattr(getattr(imported, name.split(".")[0]), name.split(".")[1])
            else:
                exec(f"from {module} import {name}", {})
        assert "Gluon" in str(e.value) and "TritonContext" in str(e.value) and "NVIDIA" in str(e.value)
    assert importlib.import_module("aperture.iris.device.gluon") is importlib.import_module("aperture.iris.mem.gluon")
    from aperture.iris.context import TritonContext  # the Triton names stay
    assert TritonContext is iris.DeviceContext
    with pytest.raises(AttributeError):
        importlib.import_module("aperture.iris.context").NoSuchName
    # Iris's device helpers that only write SDMA packets, wherever Iris's packages export them; the
    # error names the load/store way (put, then an atomic on the peer's flag).
    for module in ("aperture.iris", "aperture.iris.mem.triton", "aperture.iris.mem.triton.ops"):
        for name in ("put_signal", "put_signal_rect", "put_signal_rects", "put_rects", "wait_then_put_rect",
                     "wait_then_put_signal_rect", "wait_then_put_rects", "wait_then_put_signal_rects", "quiet"):
            with pytest.raises(aperture.Error, match=f"{module[len('aperture.'):]}.{name} is AMD-only") as e:
                exec(f"from {module} import {name}", {})
            assert "SDMA" in str(e.value) and "iris.put" in str(e.value) and "atomic_add" in str(e.value)
        with pytest.raises(AttributeError):
            getattr(importlib.import_module(module), "put_signal_everywhere")  # not every name is refused alike
    # The device functions are still there at Iris's newest path.
    import aperture.iris.mem.triton.ops as ops
    assert ops.put is iris.put and ops.atomic_cas is iris.atomic_cas and ops.translate is iris.translate


def test_newer_top_level_helpers(monkeypatch):
    # parse_bool_env / is_simulation_env / get_device_id_for_rank (Iris's newest top level).
    for value, want in [("1", True), ("TRUE", True), (" yes ", True), ("0", False), ("no", False), ("", False)]:
        monkeypatch.setenv("APERTURE_TEST_FLAG", value)
        assert iris.parse_bool_env("APERTURE_TEST_FLAG") is want, value
    monkeypatch.delenv("APERTURE_TEST_FLAG")
    assert iris.parse_bool_env("APERTURE_TEST_FLAG") is False and iris.parse_bool_env("APERTURE_TEST_FLAG", True)
    monkeypatch.delenv("IRIS_SIMULATION", raising=False)
    assert not iris.is_simulation_env() and iris.get_device_id_for_rank(5) == 5
    monkeypatch.setenv("IRIS_SIMULATION", "yes")
    devices = torch.cuda.device_count()
    assert iris.is_simulation_env() and iris.get_device_id_for_rank(5) == (5 % devices if devices else 0)
    # tensor_from_ptr: a view of the memory at an address, no copy; on the host, and on the GPU
    # where there is one.
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        owner = (torch.arange(24, dtype=torch.float32) * 3 - 7).to(device)
        view = iris.tensor_from_ptr(owner.data_ptr(), 24 * 4, dtype=torch.float32, device=device, shape=(4, 6))
        assert view.shape == (4, 6) and view.device.type == device and torch.equal(view.flatten(), owner)
        view[1, 2] = 1000.5  # the same memory
        assert float(owner[8]) == 1000.5
        ints = iris.tensor_from_ptr(owner.data_ptr(), 24 * 4, dtype=torch.int32, device=device)
        assert torch.equal(ints, owner.view(torch.int32))
        cai = iris.CUDAArrayInterface(owner.data_ptr(), 96).__cuda_array_interface__
        assert cai == {"shape": (96,), "typestr": "|u1", "data": (owner.data_ptr(), False), "version": 3}
        for bad, word in [(dict(size_bytes=10), "whole number"), (dict(shape=(5, 5)), "shape"), (dict(ptr=0), "ptr is 0")]:
            args = dict(ptr=owner.data_ptr(), size_bytes=96, dtype=torch.float32, device=device) | bad
            with pytest.raises(aperture.Error, match=word):
                iris.tensor_from_ptr(**args)


def test_logging_and_do_bench(ctx):
    import logging

    from aperture.iris.logging import IrisFormatter
    assert iris.DEBUG == 10 and iris.logger.name == "iris"
    record = logging.LogRecord("iris", logging.INFO, "", 0, "heap ready", (), None)
    assert IrisFormatter().format(record) == "[Iris] heap ready"
    record.iris_rank, record.iris_num_ranks = 2, 4
    assert IrisFormatter().format(record) == "[Iris] [2/4] heap ready"
    assert isinstance(iris.logger.handlers[0].formatter, IrisFormatter)
    assert iris.TritonContext is iris.DeviceContext
    from aperture.iris.context import TritonContext
    assert TritonContext is iris.DeviceContext
    # Iris's newest _log_rank (iris.host.logging.logging): lazy %-formatting, the rank when given.
    from aperture.iris.host.logging.logging import _log_rank, logger
    assert logger is iris.logger
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(IrisFormatter().format(record))

    keep = Keep()
    iris.logger.addHandler(keep)
    try:
        iris.set_logger_level(iris.DEBUG)
        _log_rank(iris.DEBUG, "heap %s of %d bytes", "ready", 64, rank=1, num_ranks=3)
        _log_rank(iris.INFO, "no rank %d%%", 5)
        iris.set_logger_level(iris.WARNING)
        _log_rank(iris.INFO, "hidden %s", "message", rank=0, num_ranks=1)
    finally:
        iris.logger.removeHandler(keep)
    assert seen == ["[Iris] [1/3] heap ready of 64 bytes", "[Iris] no rank 5%"]
    assert iris.logger.level == iris.WARNING
    # do_bench's helpers (iris.host.platform.utils at 5dd5bff): the 256 MiB int32 cache, its
    # clearing, and a timing event (CUDA's with a GPU, the host clock's without).
    from aperture.iris.host.platform.utils import clear_cache, create_timing_event, get_empty_cache_for_benchmark
    cache = get_empty_cache_for_benchmark()
    assert cache.dtype == torch.int32 and cache.numel() * 4 == 256 << 20
    assert cache.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    cache[::4096].fill_(7)
    clear_cache(cache)
    assert int(cache[::4096].abs().sum()) == 0
    del cache
    start, end = create_timing_event(), create_timing_event()
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= (0 if torch.cuda.is_available() else 15)
    calls = []
    ms = iris.do_bench(lambda: calls.append(1), barrier_fn=ctx.barrier, n_warmup=2, n_repeat=5)
    assert ms >= 0 and len(calls) == 8
    assert len(iris.do_bench(lambda: None, n_warmup=0, n_repeat=3, return_mode="all")) == 3


# Import paths of Iris's newest tree that its own package and programs use (a survey of Iris's
# main branch, 2026-12-05): each must resolve through the shim to aperture.iris's objects.
NEWEST_PATHS = """
from iris.iris import load, store, copy, get, put, atomic_add, atomic_cas, TraceEvent, __translate, Iris, iris
from iris.iris import DeviceContext
from iris.host.tracing.core import Tracing
from iris.host.tracing.events import TraceEvent as HostTraceEvent, EVENT_NAMES
from iris.host.memory.tensor_utils import CUDAArrayInterface, tensor_from_ptr
from iris.host.iris import Iris as HostIris, Tracing as HostTracing, DeviceTracing, tensor_creation
from iris.device.triton.context import Context
from iris.device.triton.ops import put as device_put
import iris.device.utils
from iris.context.triton import TritonContext, TritonDeviceTracing, _translate_ptr
from iris.x.common import chiplet_transform_chunked, compute_tile_indices, compute_tile_offsets
from iris.mem.triton.context import __translate as mem_translate
from iris.host.platform import hip
import aperture.iris as ai
assert load is ai.load and put is device_put and __translate is mem_translate is _translate_ptr is ai.translate
assert Iris is HostIris is ai.Iris and Iris.CCL is ai.ccl.CCL and Tracing is HostTracing is ai.tracing.Tracing
assert DeviceContext is Context is TritonContext is ai.DeviceContext and TraceEvent is HostTraceEvent
assert tensor_from_ptr is ai.tensor_from_ptr and compute_tile_offsets is ai.ccl.utils.compute_tile_offsets
print("paths resolve")
"""


@one_rank_job_only("runs its own one-rank child")
def test_newest_irises_import_paths_resolve_through_the_shim(tmp_path):
    prog = tmp_path / "paths.py"
    prog.write_text(NEWEST_PATHS)
    run = subprocess.run([sys.executable, "-m", "aperture.iris", str(prog)], capture_output=True, text=True,
                         env=child_environment(APERTURE_PROVIDER="shm"), timeout=120)
    assert run.returncode == 0 and "paths resolve" in run.stdout, run.stdout + run.stderr[-3000:]


@one_rank_job_only("runs its own one-rank child")
def test_unmodified_program_runs_through_python_m_aperture_iris(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import sys
        import torch
        import iris
        import iris.ccl
        from iris.ccl import Config
        from iris import tensor_creation
        import aperture.iris
        assert iris is aperture.iris and iris.ccl is aperture.iris.ccl and Config is aperture.iris.ccl.Config
        ctx = iris.iris(1 << 20)
        x = ctx.ones(8)
        y = ctx.zeros_like(x)
        ctx.ccl.all_reduce(y, x)
        assert y.tolist() == [1.0] * 8
        from iris.ccl.all_reduce import all_reduce  # Iris's module form, as programs import it
        from iris import get_device_id_for_rank, parse_bool_env
        z = ctx.zeros_like(x)
        all_reduce(z, x, ctx)
        assert z.tolist() == [1.0] * 8 and get_device_id_for_rank(0) == 0 and not parse_bool_env("NO_SUCH_FLAG")
        from iris.ccl import AUTOTUNE, Config
        from iris.ccl.autotune import resolve_config
        from iris.ccl.broadcast import broadcast
        from iris.ccl.fused_ar_rmsnorm import all_reduce_rmsnorm
        broadcast(z, ctx, src=0)
        assert resolve_config("all_reduce", Config(block_size_m=AUTOTUNE)) == Config() and callable(all_reduce_rmsnorm)
        from iris.host.iris import Iris
        from iris.host.platform.utils import is_simulation_env
        assert isinstance(ctx, Iris) and is_simulation_env() is False
        print("ok", sys.argv[1:])
    """))
    env = child_environment()
    env["APERTURE_PROVIDER"] = "shm"
    run = run_through_shim(prog, "a", "b", env=env)
    assert run.returncode == 0, run.stderr
    assert "ok ['a', 'b']" in run.stdout
    # A real Iris on the path is refused, not shadowed.
    fake = tmp_path / "site" / "iris"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "site"), env.get("PYTHONPATH")]))
    run = run_through_shim(prog, env=env)
    assert run.returncode == 2 and "real Iris is importable" in run.stderr


@one_rank_job_only("runs its own two-rank job")
def test_ranks_come_from_torch_distributed_in_spawned_workers(tmp_path):
    # Iris's test runner's shape: workers from torch.multiprocessing, torch.distributed over a tcp://
    # URL, no launcher variables, `import iris` through the mechanism's PYTHONPATH shim.
    worker = """
        import torch
        import torch.distributed as dist

        def worker(rank, world, url):
            dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
            import iris
            ctx = iris.iris(1 << 20)
            assert (ctx.get_rank(), ctx.get_num_ranks()) == (rank, world), (ctx.get_rank(), ctx.get_num_ranks())
            x = ctx.full((6,), float(rank + 1))
            out = ctx.zeros(6)
            ctx.ccl.all_reduce(out, x)
            assert out.tolist() == [float(sum(range(1, world + 1)))] * 6, out
            ctx.barrier()
            dist.destroy_process_group()

    """
    run_spawned_job(tmp_path / "spawned.py", worker, 2, child_environment(APERTURE_PROVIDER="shm"), timeout=300)


@one_rank_job_only("runs its own two-rank job")
def test_a_torchrun_job_forms_when_the_port_after_master_port_is_taken(tmp_path):
    # torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; torch's store at
    # MASTER_PORT) with MASTER_PORT + 1 taken, as a connection to that store can take it (Iris's
    # tests/context under its runner: "cannot listen on 0.0.0.0:P+1"). The context must form
    # on a port of its own and reduce.
    import socket

    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        taken = socket.socket()
        try:
            taken.bind(("0.0.0.0", port + 1))
            taken.listen(1)
            break
        except OSError:
            taken.close()
    program = tmp_path / "torchrun_like.py"
    program.write_text(textwrap.dedent("""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")  # env://: torchrun's variables
        import aperture.iris as iris
        rank = dist.get_rank()
        ctx = iris.iris(1 << 20)
        assert (ctx.get_rank(), ctx.get_num_ranks()) == (rank, 2), (ctx.get_rank(), ctx.get_num_ranks())
        out = ctx.zeros(5)
        ctx.ccl.all_reduce(out, ctx.arange(5, dtype=torch.float32) * (rank + 1) + 10 * rank)
        want = torch.arange(5, dtype=torch.float32) * 3 + 10
        assert torch.equal(out.cpu(), want), out
        ctx.barrier()
        dist.destroy_process_group()
        print("rank", rank, "ok", flush=True)
    """))
    try:
        ranks = [subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=child_environment(
                                      APERTURE_PROVIDER="shm", RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                      LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
                 for r in range(2)]
        outputs = [rank.communicate(timeout=240)[0] for rank in ranks]
    finally:
        taken.close()
    for r, (rank, output) in enumerate(zip(ranks, outputs)):
        assert rank.returncode == 0 and f"rank {r} ok" in output, output[-3000:]


@one_rank_job_only("runs its own four-rank job")
def test_collectives_on_subgroups(tmp_path):
    # Iris's test_process_groups' shape at 4 ranks: consecutive groups [0, 1], [2, 3] and strided ones
    # [0, 2], [1, 3] (dist.new_group, called by every rank); every subgroup collective with values that
    # differ per rank and per element, each element checked, src/dst numbered within the group; a
    # group of every rank is the world's (the Communicator); and the refusals.
    worker = """
        import torch
        import torch.distributed as dist

        def value(rank, shape, salt=0):
            n = 1
            for d in shape:
                n *= d
            return (torch.arange(n, dtype=torch.float32) * 0.5 + 100 * rank + salt).view(shape)

        def check(got, want, what):
            assert torch.equal(got.cpu(), want), (what, got, want)

        def worker(rank, world, url):
            dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
            import aperture
            import iris
            from iris.ccl.utils import ReduceOp
            ctx = iris.iris(1 << 22)
            consecutive = [dist.new_group([0, 1]), dist.new_group([2, 3])]
            strided = [dist.new_group([0, 2]), dist.new_group([1, 3])]
            everyone = dist.new_group([0, 1, 2, 3])
            for groups in (consecutive, strided):
                group = next(g for g in groups if rank in dist.get_process_group_ranks(g))
                members = dist.get_process_group_ranks(group)
                me, size = members.index(rank), len(members)
                M, N = 3, 4 * size
                x = ctx.zeros(M, N)
                x.copy_(value(rank, (M, N)))
                out = ctx.full((M, N), -1.0)
                ctx.ccl.all_reduce(out, x, group=group)
                check(out, sum(value(r, (M, N)) for r in members), "all_reduce")
                ctx.ccl.all_reduce(out, x, op=ReduceOp.MAX, group=group)
                check(out, value(max(members), (M, N)), "all_reduce max")
                gathered = ctx.full((size * M, N), -1.0)
                ctx.ccl.all_gather(gathered, x, group=group)
                check(gathered, torch.cat([value(r, (M, N)) for r in members]), "all_gather")
                exchanged = ctx.full((M, N), -1.0)
                ctx.ccl.all_to_all(exchanged, x, group=group)
                w = N // size
                want = torch.cat([value(r, (M, N))[:, me * w:(me + 1) * w] for r in members], dim=1)
                check(exchanged, want, "all_to_all")
                scattered = ctx.full((M, N), -1.0)
                ctx.ccl.reduce_scatter(scattered, x, group=group)
                check(scattered, sum(value(r, (M, N)) for r in members), "reduce_scatter (M, N)")
                share = ctx.full((M * N // size,), -1.0)
                ctx.ccl.reduce_scatter(share, x, group=group)
                check(share, sum(value(r, (M, N)) for r in members).view(-1).chunk(size)[me], "reduce_scatter share")
                b = ctx.zeros(M, N)
                b.copy_(value(rank, (M, N), salt=7))
                ctx.ccl.broadcast(b, src=1, group=group)  # the group's second rank, not global rank 1
                check(b, value(members[1], (M, N), salt=7), "broadcast")
                reduced = ctx.full((M, N), -1.0)
                ctx.ccl.reduce(reduced, x, dst=1, group=group)
                check(reduced, sum(value(r, (M, N)) for r in members) if me == 1 else torch.full((M, N), -1.0),
                      "reduce")
                part = ctx.full((M, N), -1.0)
                ctx.ccl.scatter(part, gathered * (1 + me), src=0, group=group)
                check(part, value(rank, (M, N)), "scatter")  # member 0's gathered rows, block me
                collected = ctx.full((size * M, N), -1.0)
                ctx.ccl.gather(collected, x, dst=0, group=group)
                check(collected, torch.cat([value(r, (M, N)) for r in members]) if me == 0
                      else torch.full((size * M, N), -1.0), "gather")
                ctx.ccl.barrier(group=group)
                ctx.barrier(group=group)
                ctx.device_barrier(group=group)
                # Point to point within the group: peers numbered within it, on the heap's mailboxes.
                letter = ctx.zeros(M, N)
                if me == 0:
                    letter.copy_(value(rank, (M, N), salt=3))
                    ctx.ccl.send(letter, 1, group=group)
                else:
                    ctx.ccl.recv(letter, 0, group=group)
                    check(letter, value(members[0], (M, N), salt=3), "send/recv in the group")
                ctx.barrier(group=group)
                for bad, words in ((lambda: ctx.ccl.broadcast(b, src=size, group=group), "out of range"),
                                   (lambda: ctx.ccl.all_to_all_v(out, x, group=group), "subgroup"),
                                   (lambda: ctx.ccl.all_gather(out, x, group=group), "does not match"),
                                   (lambda: ctx.ccl.send(letter, size, group=group), "out of range")):
                    try:
                        bad()
                    except aperture.Error as error:
                        assert words in str(error), (words, str(error))
                    else:
                        raise AssertionError("not refused: " + words)
                other = next(g for g in groups if rank not in dist.get_process_group_ranks(g))
                try:
                    ctx.ccl.all_reduce(out, x, group=other)
                except aperture.Error as error:
                    assert "is not in the group" in str(error), str(error)
                else:
                    raise AssertionError("a group without this rank was not refused")
            whole = ctx.full((2, 8), -1.0)
            ctx.ccl.all_reduce(whole, ctx.full((2, 8), float(rank + 1)), group=everyone)  # the world's path
            check(whole, torch.full((2, 8), 10.0), "all_reduce on a group of every rank")
            ctx.barrier()
            dist.destroy_process_group()

    """
    run_spawned_job(tmp_path / "groups.py", worker, 4, child_environment(APERTURE_PROVIDER="shm"), timeout=600)


@one_rank_job_only("runs its own one-rank children")
def test_context_cost_example_times_contexts_and_the_spawned_test_pattern():
    # examples/iris/context_cost.py is what the GPU run uses to say what a context costs (docs/IRIS.md).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = child_environment()
    env["APERTURE_PROVIDER"] = "shm"
    run = subprocess.run([sys.executable, os.path.join(root, "examples", "iris", "context_cost.py"), "--contexts", "2",
                          "--heap-sizes", "1M,64M", "--spawns", "1"], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for size in (1 << 20, 64 << 20):
        assert f"heap {size} bytes: first context " in run.stdout, run.stdout
    assert "making one, by phase (median ms): team " in run.stdout and "provider " in run.stdout, run.stdout
    for kind in ("baseline", "iris"):
        assert f"  {kind:8s} " in run.stdout, run.stdout
    assert "aperture.iris adds " in run.stdout, run.stdout


@one_rank_job_only("runs its own one-rank child")
def test_ccl_overhead_example_writes_what_perf_table_reads(tmp_path):
    # examples/iris/ccl_overhead.py is the evidence of bench/targets.toml's iris.ccl.host_overhead:
    # a progress line per op, and a CSV that scripts/perf-table.py reads, ratio = iris.ccl / Communicator.
    import importlib.util

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "overhead.csv"
    env = child_environment()
    env["APERTURE_PROVIDER"] = "shm"
    run = subprocess.run([sys.executable, os.path.join(root, "examples", "iris", "ccl_overhead.py"), "--sizes", "4K",
                          "--iters", "5", "--rounds", "2", "--batch", "2", "--csv", str(out)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    ops = ("all_reduce", "all_gather", "broadcast", "barrier")
    for op in ops:
        assert f"ccl_overhead: {op} {0 if op == 'barrier' else 4096} B: native " in run.stdout, run.stdout
    assert "ccl_overhead: done" in run.stdout
    spec = importlib.util.spec_from_file_location("perf_table", os.path.join(root, "scripts", "perf-table.py"))
    perf_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(perf_table)
    rows = perf_table.read_bench_csv(str(out))
    assert [r["op"] for r in rows] == [f"iris_ccl_{op}" for op in ops]
    for r, op in zip(rows, ops):
        assert (r["type"], r["ranks"], r["bytes"], r["baseline"]) == \
            ("float32", 1, 0 if op == "barrier" else 4096, f"Communicator.{op}")
        assert r["aperture_us"] > 0 and r["baseline_us"] > 0
    with open(out) as f:
        written = [line.split(",") for line in f.read().splitlines()[1:]]
    for r, fields in zip(rows, written):
        assert fields[5] == "5" and float(fields[11]) == pytest.approx(r["aperture_us"] / r["baseline_us"], rel=5e-3)


@triton.jit
def _stripes_between_barriers(heap_bases, box, flags, wg_done, sense, out, value_base, rank: tl.constexpr,
                              world: tl.constexpr, N: tl.constexpr, COMM_SMS: tl.constexpr):
    # Each program stores its stripe into every rank's box, meets every program of every rank,
    # reads the stripes another program of each rank stored, and meets them again before the next
    # launch may overwrite the box.
    pid = tl.program_id(0)
    offs = tl.arange(0, N)
    stripe = value_base + rank * 1009 + pid * N + offs
    for peer in range(world):
        iris.store(box + (rank * COMM_SMS + pid) * N + offs, stripe, rank, peer, heap_bases)
    inline_device_barrier(pid, flags, wg_done, sense, heap_bases, rank, world, 0, 1, COMM_SMS)
    other = (pid + 1) % COMM_SMS
    for src in range(world):
        where = (src * COMM_SMS + other) * N + offs
        tl.store(out + where, tl.load(box + where, volatile=True))
    inline_device_barrier(pid, flags, wg_done, sense, heap_bases, rank, world, 0, 1, COMM_SMS)


def test_inline_device_barrier_orders_every_program_of_every_rank(ctx, team):
    # The last rank launches late each round; without the barrier the others read its stripes
    # before they are stored. Under the interpreter programs run one after another: one program.
    me, world, n = team.rank, team.size, 64
    programs = 1 if triton_world.INTERPRETED else 4
    box = ctx.zeros(world * programs * n, dtype=torch.int32)
    flags = ctx.zeros(world, dtype=torch.int32)
    wg_done = torch.zeros(1, dtype=torch.int32, device=box.device)
    sense = torch.zeros(1, dtype=torch.int32, device=box.device)
    ctx.barrier()
    for round in range(3):
        out = torch.full_like(box, -1)
        if me == world - 1 and world > 1:
            time.sleep(0.5)
        _stripes_between_barriers[(programs,)](ctx.get_heap_bases(), box, flags, wg_done, sense, out, round * 100003,
                                               me, world, n, programs)
        want = torch.cat([round * 100003 + src * 1009 + torch.arange(programs * n, dtype=torch.int32)
                          for src in range(world)])
        # The device first: .cpu() alone is a synchronous copy queued behind a kernel that waits for
        # the other node, and the CUDA driver holds back this process's engine, which applies that
        # node's stores (docs/MULTINODE.md, "A kernel that waits for another node").
        if box.is_cuda:
            torch.cuda.synchronize(box.device)
        assert torch.equal(out.cpu(), want), f"round {round}: rank {me} read stale stripes"
    # Element r counts rank r's barriers in every copy; the arrival count is back to zero and the
    # sense has flipped once per barrier.
    assert flags.cpu().tolist() == [6] * world and wg_done.item() == 0 and sense.item() == 0
    ctx.barrier()


@one_rank_job_only("runs its own one-rank child")
@pytest.mark.parametrize("simulation", ["1", None])
def test_simulation_mode_wraps_set_device_as_irises_import_does(simulation):
    # Under IRIS_SIMULATION, importing iris makes torch.cuda.set_device(i) take i % device_count()
    # for an int past the last device (ranks written for a GPU each share the GPUs there are);
    # without it nothing is wrapped. Recorded on a stand-in for torch's set_device, 3 devices.
    probe = textwrap.dedent("""
        import torch
        calls = []
        torch.cuda.set_device = calls.append
        import aperture.iris as iris
        torch.cuda.device_count = lambda: 3
        for device in (0, 2, 3, 7, "cuda:5", torch.device("cuda", 4)):
            torch.cuda.set_device(device)
        installed = torch.cuda.set_device
        import importlib
        importlib.reload(iris)  # a second import does not wrap it again
        print(calls, torch.cuda.set_device is installed, iris.__version__)
    """)
    env = child_environment()
    env.pop("IRIS_SIMULATION", None)
    if simulation:
        env["IRIS_SIMULATION"] = simulation
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    wrapped = "[0, 2, 0, 1, 'cuda:5', device(type='cuda', index=4)] True 0.1.0"
    as_given = "[0, 2, 3, 7, 'cuda:5', device(type='cuda', index=4)] True 0.1.0"
    assert done.stdout.strip() == (wrapped if simulation else as_given)
