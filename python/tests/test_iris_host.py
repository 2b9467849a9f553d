"""aperture.iris's host object and its heap, in every rank of the job, from Iris's documented API.

The heap is one allocation of the provider APERTURE_PROVIDER names or the default one: shm on
a machine without a GPU (kernels under Triton's interpreter), a CUDA provider on a GPU
machine. Kernels use only iris.* device functions and the table get_heap_bases() returns.
"""

import contextlib

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import pattern
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
    assert bases.dtype == torch.uint64 and bases.numel() == team.size
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


def test_a_dropped_context_goes_without_a_garbage_collection(team):
    # Iris's tests make a context (and a heap) per test; a reference cycle would hold each heap's
    # memory until a collection, so a file of 8 GiB heaps would run the GPU out of memory.
    import gc
    import weakref

    enabled = gc.isenabled()
    gc.disable()
    try:
        ctx = iris.iris(HEAP, team=team)
        ctx.ccl.barrier()
        ctx.zeros(4)
        gone = weakref.ref(ctx)
        del ctx
        assert gone() is None
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
