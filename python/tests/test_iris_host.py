"""aperture.iris's host object and its heap, in every rank of the job, from Iris's documented API.

The heap is one allocation of the provider APERTURE_PROVIDER names or the default one: shm on
a machine without a GPU (kernels under Triton's interpreter), a CUDA provider on a GPU
machine. Kernels use only iris.* device functions and the table get_heap_bases() returns.
"""

import contextlib
import json
import types

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import pattern
from spawned_job import child_environment, one_rank_job_only, run_spawned_job
import triton
import triton.language as tl


import aperture
import aperture.iris as iris

# Small: every Iris object keeps its heap for the process's life (as in Iris), and the tests'
# shm heap is 256 MiB (scripts/pytest-ranks.sh).
HEAP = 2 << 20


@pytest.fixture
def shmem(team):
    return iris.iris(HEAP, team=team)


def settle(shmem):
    shmem.barrier()


def test_who_and_where(shmem, team):
    assert shmem.get_rank() == team.rank and shmem.get_num_ranks() == team.size
    bases = shmem.get_heap_bases()
    assert bases.dtype == torch.int64 and bases.numel() == team.size  # Iris's newest heap: int64
    assert bases.device == shmem.get_device()
    assert int(bases[team.rank].item()) == shmem.memory_pool.data_ptr()
    assert shmem.get_cu_count() > 0
    assert shmem.get_device().type in ("cpu", "cuda")


def test_factories_follow_torch_conventions_and_carve_the_heap(shmem):
    dev = shmem.get_device()
    z = shmem.zeros(2, 3, dtype=torch.int32)
    assert z.shape == (2, 3) and z.dtype == torch.int32 and bool((z == 0).all())
    assert shmem.zeros((4, 5)).shape == (4, 5) and shmem.zeros([[6]]).shape == (6,)
    assert shmem.zeros(7).dtype == torch.get_default_dtype()
    o = shmem.ones(5, dtype=torch.float16)
    assert torch.equal(o, torch.ones(5, dtype=torch.float16, device=dev))
    e = shmem.empty(3, 4, dtype=torch.bfloat16)
    assert e.shape == (3, 4) and e.dtype == torch.bfloat16
    f = shmem.full((2, 2), 7)
    assert f.dtype == torch.int64 and bool((f == 7).all())
    assert shmem.full((3,), 1.5).dtype == torch.get_default_dtype()
    a = shmem.arange(10)
    assert torch.equal(a, torch.arange(10, device=dev)) and a.dtype == torch.int64
    assert torch.equal(shmem.arange(2, 11, 3), torch.arange(2, 11, 3, device=dev))
    assert shmem.arange(0.0, 1.0, 0.25).dtype == torch.get_default_dtype()
    lin = shmem.linspace(0, 1, 5)
    assert torch.allclose(lin, torch.linspace(0, 1, 5, device=dev))
    r = shmem.randn(100)
    assert r.shape == (100,) and r.std() > 0.5
    u = shmem.uniform((50,), low=2.0, high=3.0)
    assert bool(((u >= 2.0) & (u < 3.0)).all())
    ri = shmem.randint(5, (40,))
    assert ri.dtype == torch.int64 and bool(((ri >= 0) & (ri < 5)).all())
    ri2 = shmem.randint(3, 9, (40,), dtype=torch.int32)
    assert ri2.dtype == torch.int32 and bool(((ri2 >= 3) & (ri2 < 9)).all())
    zl = shmem.zeros_like(o)
    assert zl.shape == o.shape and zl.dtype == o.dtype and bool((zl == 0).all())
    nhwc = shmem.empty(2, 3, 4, 5, memory_format=torch.channels_last)
    assert nhwc.is_contiguous(memory_format=torch.channels_last)
    assert shmem.zeros_like(nhwc).is_contiguous(memory_format=torch.channels_last)
    made = [z, o, e, f, a, lin, r, u, ri, ri2, zl, nhwc]
    for t in made:
        assert shmem.is_symmetric(t)
        assert (t.data_ptr() - shmem.memory_pool.data_ptr()) % 256 == 0
    starts = sorted(t.data_ptr() for t in made)
    assert len(set(starts)) == len(starts), "two tensors share heap memory"
    assert not shmem.is_symmetric(torch.zeros(4, device=dev))


def test_out_tensors_and_bad_requests(shmem):
    out = shmem.zeros(6, dtype=torch.float32)
    same = shmem.ones(2, 3, out=out, dtype=torch.float32)
    assert same is out and same.shape == (2, 3) and bool((out == 1).all())  # Iris/torch: out= is returned
    with pytest.raises(RuntimeError, match="not on the symmetric heap"):
        shmem.zeros(6, out=torch.zeros(6, device=shmem.get_device()), dtype=torch.float32)
    with pytest.raises(RuntimeError, match="elements"):
        shmem.zeros(5, out=out, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="dtype"):
        shmem.zeros(6, out=out, dtype=torch.int32)
    with pytest.raises(aperture.Error, match="layout"):
        shmem.zeros(4, layout=torch.sparse_coo)
    for bad in [(0, 5, 0), (5, 1), (1, 5, -1)]:  # ValueError as in Iris, where torch raises RuntimeError
        with pytest.raises(ValueError, match="step") as raised:
            shmem.arange(*bad)
        assert isinstance(raised.value, aperture.Error)
    assert shmem.arange(3, 3).numel() == 0 and torch.equal(shmem.arange(5, 1, -2).cpu(), torch.tensor([5, 3]))
    with pytest.raises(aperture.Error, match="heap_size"):
        shmem.empty(HEAP, dtype=torch.int64)
    if shmem.get_device().type == "cuda":
        with pytest.raises(RuntimeError, match="device"):
            shmem.zeros(4, device="cpu")


def test_what_irises_own_tests_call(shmem):
    # Iris's tests call its private helpers by their mangled names, match its out= messages and
    # expect ValueError for a layout; example 07 imports the context from iris.mem.triton.context.
    raw = shmem._Iris__allocate(6, torch.int32)
    assert raw.shape == (6,) and raw.dtype == torch.int32 and shmem._Iris__on_symmetric_heap(raw)
    assert not shmem._Iris__on_symmetric_heap(torch.zeros(6, device=shmem.get_device()))
    same = shmem.zeros(2, 3, dtype=torch.int32, out=raw)
    assert same.data_ptr() == raw.data_ptr() and bool((same == 0).all())
    with pytest.raises(RuntimeError, match="The output tensor has 6 elements, but 9 are required"):
        shmem.zeros(3, 3, dtype=torch.int32, out=raw)
    with pytest.raises(RuntimeError, match="The output tensor has dtype torch.int32, but torch.float32 is required"):
        shmem.zeros(2, 3, dtype=torch.float32, out=raw)
    with pytest.raises(RuntimeError, match="The output tensor is not on the symmetric heap"):
        shmem.zeros(2, 3, dtype=torch.int32, out=torch.zeros(2, 3, dtype=torch.int32, device=shmem.get_device()))
    with pytest.raises(ValueError, match="layout") as refused:
        shmem.zeros(2, 4, layout=torch.sparse_coo)
    assert isinstance(refused.value, aperture.Error)
    heap_device = shmem.get_device()
    assert shmem._Iris__is_valid_device(None) and shmem._Iris__is_valid_device(heap_device)
    assert shmem._Iris__is_valid_device(heap_device.type) and not shmem._Iris__is_valid_device("mps")
    if heap_device.type == "cuda":
        assert not shmem._Iris__is_valid_device("cpu")
        assert not shmem._Iris__is_valid_device(f"cuda:{heap_device.index + 1}")
    from aperture.iris import tensor_creation
    assert tensor_creation.parse_size(([4, 5],)) == ([4, 5], 20) and tensor_creation.parse_size(((),)) == ((), 1)
    assert tensor_creation.apply_layout(raw, torch.strided) is raw
    channels_last = tensor_creation.apply_memory_format(shmem.heap, torch.arange(24, dtype=torch.int32).to(heap_device)
                                                        .view(1, 2, 3, 4), (1, 2, 3, 4), torch.channels_last)
    assert channels_last.stride() == (24, 1, 8, 2) and shmem._Iris__on_symmetric_heap(channels_last)
    assert torch.equal(channels_last.cpu(), torch.arange(24, dtype=torch.int32).view(1, 2, 3, 4))
    from aperture.iris.mem.triton import DeviceContext, load
    from aperture.iris.mem.triton.context import Context
    assert Context is iris.DeviceContext and DeviceContext is iris.DeviceContext and load is iris.load
    # The device intrinsics at each path Iris has given them (iris.mem.utils, iris.device_utils) and
    # iris.device, Iris's older name of iris.mem.
    from aperture.iris import _device, device, device_utils
    from aperture.iris.mem import utils
    for module in (utils, device_utils, device.utils):
        assert (module.read_realtime, module.get_cu_id, module.get_xcc_id, module.wait_cnt) == (
            _device.read_realtime, _device.get_cu_id, _device.get_xcc_id, _device.wait_cnt)
    assert device.triton.DeviceContext is iris.DeviceContext


def test_as_symmetric_keeps_one_heap_buffer_per_shape_and_dtype(shmem, team):
    # Iris's newest heap: a heap tensor comes back as it is; anything else is copied into the one
    # heap buffer of its (shape, dtype), so its address stays put across calls (graph capture).
    device, rank = shmem.get_device(), team.rank
    on_heap = shmem.arange(6, dtype=torch.int32)
    assert shmem.as_symmetric(on_heap) is on_heap
    first_values = torch.arange(12, dtype=torch.float32).view(3, 4) * (rank + 1)
    first = shmem.as_symmetric(first_values.to(device))
    assert shmem.is_symmetric(first) and first.shape == (3, 4) and torch.equal(first.cpu(), first_values)
    used = shmem.heap.offset
    second_values = -first_values - 0.5
    second = shmem.as_symmetric(second_values.t().contiguous().t().to(device))  # a strided source too
    assert second.data_ptr() == first.data_ptr() and shmem.heap.offset == used, "a second heap buffer was taken"
    assert torch.equal(second.cpu(), second_values)
    other = shmem.as_symmetric(torch.full((3, 4), rank, dtype=torch.int64, device=device))
    assert other.data_ptr() != first.data_ptr() and bool((other == rank).all())
    first_values.zero_()  # a copy: the source and the buffer are independent
    assert torch.equal(second.cpu(), second_values)
    settle(shmem)
    # The buffer sits at the same heap offset on every rank, so each peer's copy is readable.
    for peer in range(team.size):
        expected = -torch.arange(12, dtype=torch.float32).view(3, 4) * (peer + 1) - 0.5
        assert torch.equal(shmem.as_remote(second, peer).cpu(), expected), f"rank {peer}'s buffer"
    settle(shmem)
    with pytest.raises(aperture.Error, match="expected a torch.Tensor"):
        shmem.as_symmetric([1, 2, 3])


def test_irises_heap_attributes_translate_and_the_sdma_branch(shmem, team):
    heap, rank = shmem.heap, team.rank
    assert (heap.cur_rank, heap.num_ranks) == (rank, team.size) and shmem.comm is None
    assert heap.device_id == (shmem.get_device().index if shmem.get_device().type == "cuda" else -1)
    heap.allocate(3, torch.int8)
    aligned = heap.allocate(5, torch.float32, alignment=1024)  # Iris's default alignment
    assert (aligned.data_ptr() - heap.get_base_address()) % 1024 == 0 and heap.is_symmetric(aligned)
    for bad in (0, 3, 1000, -256, 2.0, True):
        with pytest.raises(aperture.Error, match="power of two"):
            heap.allocate(1, torch.int8, alignment=bad)
    heap.refresh_peer_access()
    heap.close_fd_conns()
    assert heap.fd_conns == {}  # no file-descriptor sockets: the provider exchanged its handles
    assert list(shmem.heap_bases_cpu) == shmem.get_heap_bases().tolist()
    t = shmem.arange(8, dtype=torch.int32)
    for peer in range(team.size):
        assert shmem.translate(t.data_ptr(), rank, peer) == shmem.as_remote(t, peer).data_ptr()
        assert shmem.translate(shmem.translate(t.data_ptr(), rank, peer), peer, rank) == t.data_ptr()
    with pytest.raises(ValueError, match="not in rank"):
        shmem.translate(torch.zeros(4).data_ptr(), rank, 0)
    with pytest.raises(ValueError, match="out of range"):
        shmem.translate(t.data_ptr(), rank, team.size)
    # Iris's SDMA branch: the copy engine is off (AMD-only), so its host transfers raise Iris's
    # RuntimeError for that, in both of Iris's spellings, and its context is None.
    assert shmem.enable_copy_engine is False and shmem.copy_engine is None and shmem.get_copy_engine_ctx() is None
    with pytest.raises(aperture.Error, match="ctx.copy_engines_device_ctx is AMD-only: SDMA.*On NVIDIA GPUs use") \
            as raised:
        shmem.copy_engines_device_ctx  # one Iris version's SDMA queue descriptors
    assert isinstance(raised.value, AttributeError)  # a program that probes for it takes its other path
    assert getattr(shmem, "copy_engines_device_ctx", None) is None and not hasattr(shmem, "copy_engines_device_ctx")
    for call in (lambda: shmem.put(t, 0), lambda: shmem.put(t, to_rank=0), lambda: shmem.put_tile(None, 0, 0, 0),
                 lambda: shmem.put_tiles([], 0, [], []), lambda: shmem.quiet(), lambda: shmem.quiet(to_rank=0)):
        with pytest.raises(aperture.Error, match="copy engine is disabled.*copy_engine=\"sdma\".*as_remote") as raised:
            call()
        assert isinstance(raised.value, RuntimeError)
    shmem.barrier(sync_copy_engine=True)


def test_the_copy_engine_switch_refuses_before_the_heap_is_made(team, monkeypatch):
    from aperture.iris.host.iris import _parse_copy_engine_env, _resolve_enable_copy_engine

    for word, meaning in (("1", True), (" Yes ", True), ("ON", True), ("true", True), ("0", False), ("off", False),
                          ("No", False), ("FALSE", False), ("", None), ("auto", None)):
        assert _parse_copy_engine_env(word) is meaning, word
    for word in ("2", "enable", "maybe"):
        with pytest.raises(ValueError, match="IRIS_ENABLE_COPY_ENGINE"):
            _parse_copy_engine_env(word)
    monkeypatch.setenv("IRIS_ENABLE_COPY_ENGINE", "1")
    assert _resolve_enable_copy_engine(False) is False  # the argument wins over the environment
    monkeypatch.setenv("IRIS_ENABLE_COPY_ENGINE", "0")
    assert _resolve_enable_copy_engine(True) is True
    monkeypatch.setenv("IRIS_ENABLE_COPY_ENGINE", "auto")
    assert _resolve_enable_copy_engine(None) is False  # auto: no rocm-xio on NVIDIA machines
    for bad in (1, 0, "yes"):
        with pytest.raises(TypeError, match="enable_copy_engine"):
            _resolve_enable_copy_engine(bad)
    # Asking for the engine fails on every rank before anything collective (no heap, no barrier),
    # with Iris's ImportError naming its extra, and says what to use on NVIDIA.
    monkeypatch.delenv("IRIS_ENABLE_COPY_ENGINE")
    for kwargs in ({"enable_copy_engine": True}, {"copy_engine": "sdma"}):
        with pytest.raises(ImportError, match="iris\\[sdma\\].*as_remote") as raised:
            iris.iris(HEAP, team=team, **kwargs)
        assert isinstance(raised.value, aperture.Error) and raised.value.code == aperture.ErrorCode.unavailable
    with pytest.raises(ValueError, match="copy_engine='dma'"):
        iris.iris(HEAP, team=team, copy_engine="dma")
    monkeypatch.setenv("IRIS_ENABLE_COPY_ENGINE", "maybe")
    with pytest.raises(ValueError, match="IRIS_ENABLE_COPY_ENGINE='maybe'"):
        iris.iris(HEAP, team=team)
    monkeypatch.setenv("IRIS_ENABLE_COPY_ENGINE", "yes")
    with pytest.raises(ImportError, match="IRIS_ENABLE_COPY_ENGINE='yes'"):
        iris.iris(HEAP, team=team)
    monkeypatch.setenv("IRIS_ENABLE_COPY_ENGINE", "0")  # off, as by default: a working heap
    ctx = iris.iris(HEAP, team=team, enable_copy_engine=False, copy_engine=None)
    assert ctx.enable_copy_engine is False and ctx.get_copy_engine_ctx() is None
    got = ctx.full((8,), team.rank + 3, dtype=torch.int32)
    ctx.barrier()
    assert torch.equal(ctx.as_remote(got, (team.rank + 1) % team.size).cpu(),
                       torch.full((8,), (team.rank + 1) % team.size + 3, dtype=torch.int32))
    ctx.barrier()


def test_simulation_mode_writes_every_ranks_heap_base(team, monkeypatch, tmp_path):
    # Iris's IRIS_SIMULATION: each rank leaves the table for the tools that replay a captured kernel.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IRIS_SIMULATION", "1")
    monkeypatch.setenv("IRIS_HEAP_BASES_PREFIX", "persistent_all_gather")
    ctx = iris.iris(HEAP, team=team)
    written = json.loads((tmp_path / f"persistent_all_gather_rank_{team.rank}_heap_bases.json").read_text())
    assert written == {"rank": team.rank, "num_ranks": team.size,
                       "heap_bases": [hex(base) for base in ctx.get_heap_bases().tolist()]}
    assert len(set(written["heap_bases"])) == team.size or team.size == 1
    monkeypatch.delenv("IRIS_HEAP_BASES_PREFIX")
    iris.iris(HEAP, team=team)
    assert (tmp_path / f"iris_rank_{team.rank}_heap_bases.json").exists()  # Iris's default prefix
    monkeypatch.delenv("IRIS_SIMULATION")
    ctx.barrier()


def test_a_closed_heap_refuses_to_allocate(team):
    ctx = iris.iris(HEAP, team=team)
    kept = ctx.full((4,), team.rank + 7, dtype=torch.int32)
    ctx.barrier()
    ctx.heap.close()
    ctx.heap.close()  # again: nothing
    assert bool((kept == team.rank + 7).all()), "a tensor taken before close lost its memory"
    assert not ctx.heap.is_symmetric(kept) and ctx.get_device() == kept.device
    with pytest.raises(aperture.Error, match="closed"):
        ctx.zeros(4)
    team.barrier()


def _rank_pattern(n, rank, salt):
    return torch.arange(n, dtype=torch.int32) * 3 + rank * 100_000 + salt


def test_vmem_chunked_gives_blocks_back_when_tensors_die(team):
    import gc

    ctx = iris.iris(HEAP, allocator_type="vmem_chunked", team=team)
    heap, alloc = ctx.heap, ctx.heap.allocator
    assert type(alloc).__name__ == "FreeListAllocator" and alloc.get_num_chunks() == 1
    base = heap.get_base_address()
    # Three blocks; the middle one dies and a smaller tensor takes its place, a larger one the end.
    a, b, c = (ctx.zeros(n, dtype=torch.int32) for n in (1000, 5000, 300))
    for salt, t in enumerate((a, b, c)):
        t.copy_(_rank_pattern(t.numel(), team.rank, salt))
    where_b, end = b.data_ptr(), heap.offset
    del b
    gc.collect()
    d = ctx.empty(4000, dtype=torch.int32)
    assert d.data_ptr() == where_b, "the dead block was not reused"
    e = ctx.empty(2000, dtype=torch.int32)  # 8000 bytes: the 4000 left of b's block are too few
    assert e.data_ptr() - base == end, "a block too large for the free range did not go to the end"
    assert alloc.get_stats()["num_free_blocks"] == 1 and alloc.get_stats()["num_active_allocs"] == 4
    d.copy_(_rank_pattern(4000, team.rank, 7))
    for salt, t in ((0, a), (2, c)):  # the neighbours of the reused block kept every element
        assert torch.equal(t.cpu(), _rank_pattern(t.numel(), team.rank, salt))
    # The same history on every rank gives the same offsets: each peer's d holds its own pattern.
    ctx.barrier()
    for peer in range(team.size):
        assert torch.equal(ctx.as_remote(d, peer).cpu(), _rank_pattern(4000, peer, 7)), f"rank {peer}'s d"
    ctx.barrier()
    # Temporaries in a loop: 40 x 512 KiB through a 2 MiB heap fit only because each comes back.
    for step in range(40):
        scratch = ctx.full((128 << 10,), step, dtype=torch.int32)
        assert int(scratch[-1].item()) == step
        del scratch
    # Views keep a block: it comes back when the last one goes.
    view = ctx.zeros(64, dtype=torch.float32)[8:16]
    where_view = view.data_ptr() - 8 * 4
    assert ctx.zeros(64, dtype=torch.float32).data_ptr() != where_view
    del view
    assert ctx.zeros(64, dtype=torch.float32).data_ptr() == where_view
    assert alloc.get_num_chunks() == 1, "the heap grew though every block fit"
    alloc.close()  # Iris's allocator.close(): the heap closes with it
    assert alloc._closed and alloc.chunks == [] and heap.memory_pool is None
    with pytest.raises(aperture.Error, match="closed"):
        ctx.zeros(4)
    assert torch.equal(a.cpu(), _rank_pattern(1000, team.rank, 0)), "a live tensor lost its memory at close"
    team.barrier()


def test_vmem_chunked_barrier_names_blocks_freed_on_some_ranks_only(team):
    import gc

    if team.size < 2:
        pytest.skip("needs two ranks: it frees a tensor on one rank only")
    ctx = iris.iris(HEAP, allocator_type="vmem_chunked", team=team)
    a = ctx.zeros(1000, dtype=torch.int32)
    ctx.barrier()  # the same history everywhere: passes
    cycle = [a]
    cycle.append(cycle)  # on the last rank a's block is held by a cycle until a collection
    del a
    if team.rank != team.size - 1:
        del cycle
        gc.collect()
    b = ctx.zeros(10, dtype=torch.int32)  # reuses a's block on every rank but the last
    with pytest.raises(aperture.Error, match=r"blocks differ between ranks.*rank 0: \d+ bytes.*gc.collect\(\)") as e:
        ctx.barrier()
    assert e.value.code == aperture.ErrorCode.mismatch
    del b
    team.barrier()


def test_vmem_chunked_grows_by_chunks_that_the_heap_table_reaches(team):
    import gc

    ctx = iris.iris(HEAP, allocator_type="vmem_chunked", team=team)
    heap, alloc, rank, world = ctx.heap, ctx.heap.allocator, team.rank, team.size
    n = 64  # elements per tensor: across simulated nodes each of the kernel's accesses goes through the proxy
    base, dev = heap.get_base_address(), ctx.get_device()
    full = ctx.empty((HEAP // 4,), dtype=torch.int32)  # the whole first chunk
    full.copy_(_rank_pattern(HEAP // 4, rank, 1))
    assert alloc.get_num_chunks() == 1 and heap.offset == HEAP
    # The heap is full: the next tensors go to a new chunk of heap_size bytes (Iris's chunk size for
    # a heap below 256 MiB), which the heap's one table reaches, at one offset on every rank.
    data, inbox, loaded, got = (ctx.zeros(n, dtype=torch.float32) for _ in range(4))
    counts = ctx.zeros(n, dtype=torch.int32)
    assert alloc.get_num_chunks() == 2 and alloc.get_stats()["mapped_bytes"] == 2 * HEAP
    grown = alloc.chunks[1]
    assert grown.size == HEAP and grown.va <= data.data_ptr() < grown.va + grown.size
    assert all(heap.is_symmetric(t) and alloc.owns_tensor(t) for t in (data, inbox, loaded, got, counts))
    offsets = [int.from_bytes(x, "little", signed=True)
               for x in team.allgather((grown.va - base).to_bytes(8, "little", signed=True))]
    assert len(set(offsets)) == 1, f"the grown chunk lies at different offsets: {offsets}"
    data.copy_(pattern(rank, n, torch.float32, device=dev))
    ctx.barrier()
    own, own_table = ctx.allocate_symmetric(16, dtype=torch.int32)  # in the grown chunk, with its own table
    bases = ctx.get_heap_bases().tolist()
    for peer in set(range(world)) - set(heap.address_map.indirect_peers):  # the ranks of this node
        assert shmem_translate_matches(ctx, data, peer), f"rank {peer}: the table and the chunk's map disagree"
        assert torch.equal(ctx.as_remote(data, peer).cpu(), pattern(peer, n, torch.float32).cpu())
        assert int(own_table[peer].item()) == bases[peer] + (own.data_ptr() - base), f"rank {peer}'s entry"
    # Kernels reach the grown chunk through get_heap_bases(), the table made with the heap (ranks of
    # other nodes through its proxy).
    with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
        neighbour_kernel[(triton.cdiv(n, BLOCK),)](data, inbox, loaded, got, counts, ctx.get_heap_bases(), rank,
                                                   world, n, BLOCK=BLOCK)
    ctx.barrier()
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    assert torch.equal(inbox, pattern(prev, n, torch.float32, device=dev))
    assert torch.equal(loaded, pattern(nxt, n, torch.float32, device=dev))
    assert torch.equal(got, pattern(nxt, n, torch.float32, device=dev))
    i = torch.arange(n, dtype=torch.int32, device=dev)
    assert torch.equal(counts, world * i + sum(range(world)))
    # ctx.ccl and point-to-point messages take tensors of a grown chunk.
    total = ctx.zeros(n, dtype=torch.float32)
    ctx.ccl.all_reduce(total, data)
    assert torch.equal(total, sum(pattern(r, n, torch.float32, device=dev) for r in range(world)))
    if world >= 2:
        if rank == 0:
            ctx.ccl.send(data, 1)
        elif rank == 1:
            ctx.ccl.recv(inbox, 0)
            assert torch.equal(inbox, pattern(0, n, torch.float32, device=dev))
    # A block larger than a chunk grows the heap by a chunk that holds it; a block that fits the room
    # left in a grown chunk takes it (the lowest that fits) without growing the heap.
    big = ctx.empty((HEAP + 4096,), dtype=torch.int8)
    big_values = ((torch.arange(HEAP + 4096) * 7 + rank * 31) % 251 - 125).to(torch.int8)
    big.copy_(big_values)
    assert alloc.get_num_chunks() == 3 and alloc.chunks[2].size >= HEAP + 4096 and heap.is_symmetric(big)
    del total
    gc.collect()
    again = ctx.zeros(n, dtype=torch.float32)
    assert alloc.get_num_chunks() == 3 and grown.va <= again.data_ptr() < grown.va + grown.size
    ctx.barrier()  # every rank's chunks and blocks agree
    # Nothing handed out before a growth moved or changed, on any element.
    assert torch.equal(full.cpu(), _rank_pattern(HEAP // 4, rank, 1)) and torch.equal(big.cpu(), big_values)
    # A chunk larger than the provider holds: out of memory, naming the chunk and the provider's reason.
    too_large = r"heap out of memory.*could not grow by \d+ bytes: .*APERTURE_(HEAP_SIZE|VMM_RESERVE)"
    with pytest.raises(aperture.Error, match=too_large) as e:
        ctx.empty(1 << 40, dtype=torch.int8)
    assert e.value.code == aperture.ErrorCode.out_of_memory and alloc.get_num_chunks() == 3
    ctx.barrier()
    # On a provider whose allocations each have a table of their own (mpi-window, torch's symmetric
    # memory) a chunk would lie at different offsets on different ranks: the heap says it cannot grow.
    heap.provider = types.SimpleNamespace(name="mpi-window", is_linear=False)
    with pytest.raises(aperture.Error, match=r"could not grow .*mpi-window's allocations do not share one table"):
        ctx.empty(3 * HEAP, dtype=torch.int8)


def shmem_translate_matches(ctx, tensor, peer):
    """Iris's translate (the heap's table) and as_remote (the allocation's own map) agree on
    ``tensor``'s copy at ``peer``."""
    return ctx.translate(tensor.data_ptr(), ctx.cur_rank, peer) == ctx.as_remote(tensor, peer).data_ptr()


@one_rank_job_only("runs its own two-rank job")
def test_vmem_chunked_growth_on_some_ranks_only_is_named_on_every_rank(tmp_path):
    # Its own job: the ranks' Team calls differ (one rank grows its heap, the others reach the
    # barrier), which fails that Team for good on every rank, so no later test may share it.
    worker = """
        import gc
        import torch
        import torch.distributed as dist
        import aperture

        def worker(rank, world, url):
            import iris
            dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
            ctx = iris.iris(2 << 20, allocator_type="vmem_chunked")
            whole = ctx.zeros((2 << 20) // 4, dtype=torch.int32)  # the whole first chunk
            ctx.barrier()
            cycle = [whole]
            cycle.append(cycle)  # on the last rank the heap stays full until a collection
            del whole
            if rank != world - 1:
                del cycle
                gc.collect()
            # The last rank must grow its heap (collective); the others reuse the block, then wait
            # in the barrier.
            try:
                ctx.zeros(10, dtype=torch.int32)
                ctx.barrier()
            except aperture.Error as e:
                want = "not every rank grew it" if rank == world - 1 else "another collective call"
                assert e.code == aperture.ErrorCode.mismatch and want in str(e) and "gc.collect()" in str(e), str(e)
            else:
                raise AssertionError(f"rank {rank}: a heap grown on one rank only went unnoticed")
            dist.destroy_process_group()
    """
    env = child_environment(CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1")
    run_spawned_job(tmp_path / "diverging.py", worker, 2, env, timeout=120)


def test_the_default_allocator_frees_nothing(team):
    # What the loop above would do on Iris's default allocator: aperture's heap is fixed, so it runs out.
    ctx = iris.iris(HEAP, team=team)
    assert type(ctx.heap.allocator).__name__ == "BumpAllocator"
    with pytest.raises(aperture.Error, match="heap out of memory"):
        for step in range(40):
            scratch = ctx.full((128 << 10,), step, dtype=torch.int32)
            del scratch
    assert ctx.heap.allocator.owns_tensor(ctx.heap.memory_pool) and not ctx.heap.allocator.owns_tensor(
        torch.zeros(4, device=ctx.get_device()))
    team.barrier()


@pytest.mark.parametrize("allocator_type", ["torch", "vmem_chunked"])
def test_a_dropped_context_goes_without_a_garbage_collection(team, allocator_type):
    # Iris's tests make a context (and a heap) per test; a reference cycle would hold each heap's
    # memory until a collection, so a file of 8 GiB heaps would run the GPU out of memory.
    import gc
    import weakref

    enabled = gc.isenabled()
    gc.disable()
    try:
        ctx = iris.iris(HEAP, allocator_type=allocator_type, team=team)
        ctx.ccl.barrier()
        ctx.zeros(4)
        gone = [weakref.ref(x) for x in (ctx, ctx.heap, ctx.heap.allocator)]
        del ctx
        assert [ref() for ref in gone] == [None] * 3, "the context, its heap or its allocator outlived it"
    finally:
        if enabled:
            gc.enable()


def _resident_shared_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) << 10
    raise AssertionError("no RssShmem in /proc/self/status")


def test_a_context_leaves_its_fresh_heap_untouched(team):
    # Iris makes its heap with torch.empty. aperture's own heaps are zero when made, so a context's
    # heap is not filled again: on shm a fill faults in every page (seconds per context for Iris's
    # default 1 GiB heap, and that much resident memory). Resident shared memory tells, not time.
    size = 128 << 20
    before = _resident_shared_bytes()
    ctx = iris.iris(size, allocator_type="shm", team=team)
    grown = _resident_shared_bytes() - before
    assert grown < size // 8, f"making a {size}-byte heap made {grown} bytes resident: the heap was written"
    pool = ctx.memory_pool.view(torch.int64)
    # Still zero where nothing was written: first, middle and last pages, and a factory's empty().
    for part in (pool[:512], pool[pool.numel() // 2:][:512], pool[-512:], ctx.empty(512, dtype=torch.int64)):
        assert bool((part == 0).all())
    ctx.barrier()


class _Renamed:
    """A provider under another name (one whose fresh memory aperture.iris may not assume zero)."""

    def __init__(self, provider, name):
        self._provider, self.name = provider, name

    def __getattr__(self, attribute):
        return getattr(self._provider, attribute)


def test_a_heap_is_zeroed_unless_its_provider_just_made_it_zero(team):
    from aperture.iris._heap import ZEROED_WHEN_MADE, SymmetricHeap

    size = 1 << 20
    provider = aperture.make_provider("shm", team)
    for fresh, name in ((False, "shm"), (True, "another-provider")):
        assert name not in ZEROED_WHEN_MADE or not fresh
        dirty = provider.empty((size,), torch.int8)
        dirty.fill_(7 + team.rank)
        where = dirty.data_ptr()
        provider.free(dirty)
        del dirty
        heap = SymmetricHeap(_Renamed(provider, name), size, fresh=fresh)
        assert heap.memory_pool.data_ptr() == where, "the heap did not reuse the written block: nothing was tested"
        assert bool((heap.memory_pool == 0).all()), f"fresh={fresh}, provider {name!r}: the heap kept old bytes"
        provider.free(heap.memory_pool)
        del heap
    team.barrier()


def test_broadcast_from_every_root(shmem, team):
    for root in range(team.size):
        mine = {"root": team.rank, "values": list(range(team.rank + 3))}
        got = shmem.broadcast(mine if team.rank == root else None, root)
        assert got == {"root": root, "values": list(range(root + 3))}
        t = torch.full((5,), float(team.rank), device=shmem.get_device())
        assert torch.equal(shmem.broadcast_tensor(t, root), torch.full((5,), float(root), device=shmem.get_device()))


N = 512
BLOCK = 128


@triton.jit
def neighbour_kernel(data, inbox, loaded, got, counts, heap_bases, cur_rank, world: tl.constexpr, n,
                     BLOCK: tl.constexpr):
    # Iris's calls as Iris programs make them: store into the next rank, load from the next
    # rank, get from the next rank, count into every rank. (world is a constexpr: Triton 3.6's
    # interpreter cannot take a runtime loop bound with NumPy 2.4; docs/IRIS.md.)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    nxt = (cur_rank + 1) % world
    iris.store(inbox + offs, tl.load(data + offs, mask=mask), cur_rank, nxt, heap_bases, mask=mask)
    tl.store(loaded + offs, iris.load(data + offs, cur_rank, nxt, heap_bases, mask=mask), mask=mask)
    iris.get(data + offs, got + offs, cur_rank, nxt, heap_bases, mask=mask)
    for peer in range(0, world):
        iris.atomic_add(counts + offs, offs + cur_rank, cur_rank, peer, heap_bases, mask=mask)


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64],
                         ids=str)
def test_device_functions_between_the_ranks_of_the_job(team, dtype):
    shmem = iris.iris(HEAP, team=team)
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    dev = shmem.get_device()
    data = shmem.zeros(N, dtype=dtype)
    data.copy_(pattern(rank, N, dtype, device=dev))
    inbox = shmem.zeros(N, dtype=dtype)
    loaded = shmem.zeros(N, dtype=dtype)
    got = shmem.zeros(N, dtype=dtype)
    counts = shmem.zeros(N, dtype=torch.int32)
    shmem.barrier()
    with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
        neighbour_kernel[(triton.cdiv(N, BLOCK),)](data, inbox, loaded, got, counts, shmem.get_heap_bases(), rank,
                                                   world, N, BLOCK=BLOCK)
    shmem.barrier()
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    assert torch.equal(inbox, pattern(prev, N, dtype, device=dev))
    assert torch.equal(loaded, pattern(nxt, N, dtype, device=dev))
    assert torch.equal(got, pattern(nxt, N, dtype, device=dev))
    i = torch.arange(N, dtype=torch.int32, device=dev)
    assert torch.equal(counts, world * i + sum(range(world)))


# ---- iris.host.distributed.helpers: Iris's host helpers over torch.distributed ----------------------


def test_distributed_helpers_refuse_without_torch_distributed():
    import torch.distributed as dist
    from aperture.iris.host.distributed import helpers

    if dist.is_available() and dist.is_initialized():
        pytest.skip("torch.distributed is initialised in this process")  # alike in every rank
    calls = {
        "distributed_allgather": lambda: helpers.distributed_allgather([1, 2, 3]),
        "distributed_allgather_multidim": lambda: helpers.distributed_allgather_multidim([[1, 2], [3, 4]]),
        "distributed_broadcast_scalar": lambda: helpers.distributed_broadcast_scalar(1),
        "distributed_broadcast_tensor": lambda: helpers.distributed_broadcast_tensor(torch.ones(2)),
        "distributed_barrier": lambda: helpers.distributed_barrier(),
        "init_distributed": lambda: helpers.init_distributed(),
        "extract_group_info": lambda: helpers.extract_group_info(object(), 0, 2),
        "distributed_device_barrier": lambda: helpers.distributed_device_barrier(torch.zeros(2, dtype=torch.int32),
                                                                                 object(), 0, 2, torch.zeros(2)),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match="torch.distributed is not initialised") as refused:
            call()
        assert isinstance(refused.value, aperture.Error), name
        assert name in str(refused.value) or name == "distributed_device_barrier", str(refused.value)
    # Without a group, extract_group_info needs no torch.distributed: every rank, stride 1.
    assert helpers.extract_group_info(None, 2, 4) == (2, 2, 4, 0, 1)
    assert sorted(helpers.__all__) == sorted(n for n in calls)


@one_rank_job_only("runs its own two-rank job")
def test_distributed_helpers_between_two_spawned_ranks(tmp_path):
    # Iris's test runner's shape: workers from torch.multiprocessing, gloo over a tcp:// URL, the
    # helpers imported by Iris's path through `python -m aperture.iris`. Values differ per rank and
    # per element; every element of every result is checked on every rank.
    worker = """
        import time
        import numpy as np
        import torch
        import torch.distributed as dist

        def value(rank, shape, dtype, salt=0):
            n = int(np.prod(shape))
            v = (np.arange(n) * 3 + 1000 * rank + 17 * salt) % 251
            return (v % 2 == 1 if dtype == np.bool_ else v).astype(dtype).reshape(shape)

        def worker(rank, world, url):
            from iris.host.distributed.helpers import (distributed_allgather, distributed_allgather_multidim,
                distributed_barrier, distributed_broadcast_scalar, distributed_broadcast_tensor,
                distributed_device_barrier, extract_group_info, init_distributed)
            import iris.host.distributed.helpers as helpers
            import aperture.iris.host.distributed.helpers as ours
            assert helpers is ours
            dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
            assert init_distributed() == (None, rank, world)
            # (world, element count) rows, row r rank r's tensor flattened; the dtypes gloo carries
            # and those it refuses (int16, uint32, uint64: as objects); NumPy, torch, strided, lists.
            for dtype in (np.int32, np.int64, np.float32, np.float64, np.uint8, np.bool_, np.int16, np.uint32,
                          np.uint64):
                for shape in ((5,), (3, 4), (2, 3, 2)):
                    got = distributed_allgather_multidim(value(rank, shape, dtype))
                    want = np.stack([value(r, shape, dtype).reshape(-1) for r in range(world)])
                    assert isinstance(got, np.ndarray) and got.dtype == want.dtype, (dtype, got.dtype)
                    assert got.shape == (world, int(np.prod(shape))) and np.array_equal(got, want), (dtype, shape, got)
            strided = torch.from_numpy(value(rank, (4, 6), np.float32)).t()
            got = distributed_allgather_multidim(strided)
            want = np.stack([torch.from_numpy(value(r, (4, 6), np.float32)).t().reshape(-1).numpy()
                             for r in range(world)])
            assert np.array_equal(got, want), got
            got = distributed_allgather_multidim(value(rank, (2, 2), np.int64).tolist())
            assert np.array_equal(got, np.stack([value(r, (4,), np.int64) for r in range(world)])), got
            # Iris's table shape in test_flash_decode: int32 (seqs, blocks) block tables.
            tables = torch.arange(5, dtype=torch.int32).repeat(3, 1) + 100 * rank
            got = torch.from_numpy(distributed_allgather_multidim(tables.numpy())).view(world, 3, -1)
            for r in range(world):
                assert torch.equal(got[r], torch.arange(5, dtype=torch.int32).repeat(3, 1) + 100 * r), got
            # 1-D all-gather: (world, n), the same dtypes; anything but 1-D is an AssertionError.
            for dtype in (np.int32, np.int64, np.float64, np.bool_, np.int16, np.uint64):
                got = distributed_allgather(value(rank, (7,), dtype, salt=1))
                want = np.stack([value(r, (7,), dtype, salt=1) for r in range(world)])
                assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, got)
            assert np.array_equal(distributed_allgather([rank, rank + 1]), [[r, r + 1] for r in range(world)])
            try:
                distributed_allgather(value(rank, (2, 2), np.int32))
            except AssertionError:
                pass
            else:
                raise AssertionError("a 2-D array was not refused")
            # Broadcasts from every root: the root's value, whatever the others pass.
            for root in range(world):
                for mine, want, kind in ((10 + rank, 10 + root, int), (0.5 + rank, 0.5 + root, float),
                                         (rank % 2 == 1, root % 2 == 1, bool), (f"r{rank}", f"r{root}", str),
                                         (np.int16(3 + rank), 3 + root, np.int16)):
                    got = distributed_broadcast_scalar(mine if rank == root else None, root=root)
                    assert got == want and isinstance(got, kind), (root, got, want)
                for dtype in (np.float32, np.int64, np.bool_, np.uint64, np.int16):
                    got = distributed_broadcast_tensor(torch.from_numpy(value(rank, (3, 5), dtype, salt=2))
                                                       if rank == root else None, root)
                    want = value(root, (3, 5), dtype, salt=2)
                    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, want), got
                got = distributed_broadcast_tensor(value(rank, (6,), np.float64).reshape(2, 3).T
                                                   if rank == root else None, root=root)
                assert np.array_equal(got, value(root, (6,), np.float64).reshape(2, 3).T), got
            assert distributed_broadcast_scalar(7) == 7  # root 0 by default
            # A root without a value: every rank raises (Iris's ValueError), none waits.
            for call in (lambda: distributed_broadcast_scalar(None, root=1),
                         lambda: distributed_broadcast_tensor(None, root=1)):
                try:
                    call()
                except ValueError as error:
                    assert "gave no value" in str(error), str(error)
                else:
                    raise AssertionError("no value from the root was not refused")
            # Groups: every rank, one rank, and (faked ranks) the refusals.
            everyone, only_one = dist.new_group([0, 1]), dist.new_group([1])
            assert extract_group_info(everyone, rank, world) == (rank, rank, 2, 0, 1)
            assert extract_group_info(None, rank, world) == (rank, rank, world, 0, 1)
            if rank == 1:
                assert extract_group_info(only_one, 1, world) == (0, 1, 1, 1, 1)
            else:
                try:
                    extract_group_info(only_one, 0, world)
                except RuntimeError as error:
                    assert "not in the process group" in str(error), str(error)
                else:
                    raise AssertionError("a group without this rank was not refused")
            real = dist.get_process_group_ranks
            try:
                dist.get_process_group_ranks = lambda group: [0, 3, 12]
                try:
                    extract_group_info(everyone, 3, 16)
                except NotImplementedError as error:
                    assert "evenly spaced" in str(error), str(error)
                else:
                    raise AssertionError("a group of uneven strides was not refused")
                dist.get_process_group_ranks = lambda group: [0, 4, 8, 12]
                assert extract_group_info(everyone, 8, 16) == (2, 8, 4, 0, 4)
                dist.get_process_group_ranks = lambda group: [5, 5]
                try:
                    extract_group_info(everyone, 5, 16)
                except ValueError as error:
                    assert "repeat" in str(error), str(error)
                else:
                    raise AssertionError("a repeated rank was not refused")
            finally:
                dist.get_process_group_ranks = real
            distributed_barrier()
            distributed_barrier(group=everyone)
            # The device barrier: rank 1 arrives a second late, after writing its marker; rank 0 must
            # not pass before it, and then sees the marker.
            import iris
            ctx = iris.iris(1 << 20)
            flags = ctx.zeros(world, dtype=torch.int32)
            marker = ctx.zeros(8, dtype=torch.int64)
            ctx.barrier()
            started = time.monotonic()
            if rank == 1:
                time.sleep(1.0)
                marker.copy_(torch.arange(8, dtype=torch.int64) * 5 + 1)
            distributed_device_barrier(flags, None, rank, world, ctx.get_heap_bases())
            if rank == 0:
                assert time.monotonic() - started >= 0.9, "the device barrier did not wait for rank 1"
                assert torch.equal(ctx.as_remote(marker, 1).cpu(), torch.arange(8, dtype=torch.int64) * 5 + 1)
            distributed_device_barrier(flags, everyone, rank, world, ctx.get_heap_bases())
            assert flags.cpu().tolist() == [2] * world, flags  # element r: rank r's barriers, in every copy
            ctx.barrier()
            dist.destroy_process_group()

    """
    # The host heap and Triton's interpreter for the device barrier, on any machine.
    env = child_environment(APERTURE_PROVIDER="shm", TRITON_INTERPRET="1")
    run_spawned_job(tmp_path / "helpers.py", worker, 2, env, timeout=300)
