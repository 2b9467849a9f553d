"""Communicator on host memory: every collective, every element, symmetric and ordinary tensors."""

import functools

import pytest
import torch

import aperture
from conftest import pattern

DTYPES = [torch.int64, torch.float32, torch.int32, torch.float64]
# Every dtype at a small and a middle size; the two most used at a size that takes the staged
# path in several pieces (more than one 256 KiB staging half).
CASES = [(d, n) for d in DTYPES for n in (1, 3001)] + [(torch.int64, 70001), (torch.float32, 70001)]


@pytest.fixture
def comm(team, host_provider):
    c = aperture.Communicator(team, host_provider)
    yield c
    c.close()


def signed(rank, i):
    """Values whose min and max are not all one rank's."""
    v = pattern(rank, i)
    return v if (i + rank) % 2 else -v


def values(rank, n, dtype, start=0, f=pattern):
    i = torch.arange(start, start + n, dtype=torch.float64)
    v = rank * 100003 + i * 7 + 1  # pattern(rank, i), as a vector
    if f is signed:
        v = torch.where((i + rank) % 2 == 1, v, -v)
    return v.to(dtype)


def make(kind, provider, n, dtype):
    """A tensor of n elements: in the provider's memory (zero-copy) or ordinary (staged)."""
    return provider.zeros((n,), dtype) if kind == "symmetric" else torch.zeros(n, dtype=dtype)


def release(provider, *tensors):
    for t in tensors:
        try:
            aperture.address_map(t)
        except aperture.Error:
            continue
        provider.free(t)


@pytest.mark.parametrize("kind", ["symmetric", "ordinary"])
@pytest.mark.parametrize("dtype,n", CASES)
@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_all_reduce(team, host_provider, comm, kind, dtype, n, op):
    t = make(kind, host_provider, n, dtype)
    t.copy_(values(team.rank, n, dtype, f=signed))
    assert comm.all_reduce(t, op=op) is t
    every = torch.stack([values(r, n, dtype, f=signed) for r in range(team.size)])
    expected = {"sum": lambda: every.sum(0, dtype=dtype), "min": lambda: every.min(0).values,
                "max": lambda: every.max(0).values}[op]()
    assert torch.equal(t, expected.to(dtype)), f"rank {team.rank}: first differences at " \
        f"{(t != expected).nonzero()[:5].view(-1).tolist()}"
    release(host_provider, t)


@pytest.mark.parametrize("kind", ["symmetric", "ordinary"])
@pytest.mark.parametrize("dtype,n", CASES)
def test_all_gather(team, host_provider, comm, kind, dtype, n):
    inp = make(kind, host_provider, n, dtype)
    inp.copy_(values(team.rank, n, dtype))
    out = torch.full((team.size * n,), -1, dtype=dtype)
    comm.all_gather(out, inp)
    expected = torch.cat([values(r, n, dtype) for r in range(team.size)])
    assert torch.equal(out, expected)
    release(host_provider, inp)


@pytest.mark.parametrize("kind", ["symmetric", "ordinary"])
@pytest.mark.parametrize("dtype,n", CASES)
def test_reduce_scatter(team, host_provider, comm, kind, dtype, n):
    inp = make(kind, host_provider, team.size * n, dtype)
    inp.copy_(values(team.rank, team.size * n, dtype))
    out = torch.full((n,), -1, dtype=dtype)
    comm.reduce_scatter(out, inp)
    expected = torch.stack([values(r, n, dtype, start=team.rank * n) for r in range(team.size)]).sum(0, dtype=dtype)
    assert torch.equal(out, expected)
    release(host_provider, inp)


@pytest.mark.parametrize("kind", ["symmetric", "ordinary"])
@pytest.mark.parametrize("dtype,n", [(d, n) for d in DTYPES for n in (1, 257)] + [(torch.int64, 20001)])
def test_all_to_all(team, host_provider, comm, kind, dtype, n):
    inp = make(kind, host_provider, team.size * n, dtype)
    inp.copy_(values(team.rank, team.size * n, dtype))
    out = torch.full((team.size * n,), -1, dtype=dtype)
    comm.all_to_all(out, inp)
    expected = torch.cat([values(r, n, dtype, start=team.rank * n) for r in range(team.size)])
    assert torch.equal(out, expected)
    release(host_provider, inp)


@pytest.mark.parametrize("kind", ["symmetric", "ordinary"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
@pytest.mark.parametrize("n", [3001, 100003])  # symmetric: the larger zero-copy at every rank count
def test_broadcast_from_every_root(team, host_provider, comm, kind, dtype, n):
    t = make(kind, host_provider, n, dtype)
    for root in range(team.size):
        t.copy_(values(team.rank, n, dtype))
        comm.broadcast(t, root)
        assert torch.equal(t, values(root, n, dtype)), f"root {root}"
    release(host_provider, t)


def test_numpy_arrays_go_in_too(team, host_provider, comm):
    import numpy as np
    n = 777
    a = np.array([pattern(team.rank, i) for i in range(n)], dtype=np.int64)
    comm.all_reduce(a)
    np.testing.assert_array_equal(a, [sum(pattern(r, i) for r in range(team.size)) for i in range(n)])


def test_barrier_and_the_team_barrier(team, comm):
    for _ in range(5):
        comm.barrier()
        team.barrier()


def test_the_team_allgathers_bytes_in_rank_order(team):
    for width in (1, 8, 1000):
        mine = bytes((team.rank * 37 + i * 11) % 256 for i in range(width))
        every = team.allgather(mine)
        assert every == [bytes((r * 37 + i * 11) % 256 for i in range(width)) for r in range(team.size)]


def test_between_nodes_names_the_exchange_of_a_team_over_nodes(team, comm):
    # Host memory crosses nodes on MPI whatever APERTURE_COLLECTIVES_BETWEEN_NODES says; one node
    # has no exchange between nodes.
    assert comm.between_nodes == ("mpi" if team.node_count > 1 else "")


def test_views_of_symmetric_tensors_reduce_in_place(team, host_provider, comm):
    t = host_provider.zeros((4, 300), torch.int64)
    t.copy_(values(team.rank, 1200, torch.int64).view(4, 300))
    row = t[2]  # contiguous view at an offset: the same offset on every rank
    comm.all_reduce(row)
    expected = sum(values(r, 1200, torch.int64).view(4, 300) for r in range(team.size))
    assert torch.equal(t[2], expected[2])
    for other in (0, 1, 3):
        assert torch.equal(t[other], values(team.rank, 1200, torch.int64).view(4, 300)[other])
    host_provider.free(t)


@functools.lru_cache(maxsize=None)  # the same for every type and reduction: made once
def ones_and_twos(rank, n):
    """1 or 2 at element i, from a hash of (rank, i): every sum, product, min and max over up to 4
    ranks is exact in every element type (float8_e5m2 holds the integers to 8 and the powers of 2
    to 16), so the result does not depend on the order of the fold (across nodes: node by node)."""
    i = torch.arange(n, dtype=torch.int64)
    x = i * 7919 + rank * 104729 + 12345
    x = (x ^ (x >> 5)) * 31
    return ((x >> 3) & 1) + 1


@functools.lru_cache(maxsize=None)
def every_rank(world, n):
    """ones_and_twos of every rank (ranks x n, float64)."""
    return torch.stack([ones_and_twos(r, n) for r in range(world)]).to(torch.float64)


def fold_over_ranks(every, op, dtype, world):
    """The reduction of `every` (ranks x elements, float64) as the collectives define it."""
    if op == "sum":
        return every.sum(0)
    if op == "prod":
        return every.prod(0)
    if op == "min":
        return every.min(0).values
    if op == "max":
        return every.max(0).values
    if dtype.is_floating_point:  # avg: each input times 1/world (exact where world is a power of 2), summed
        return every.sum(0) / world
    return torch.div(every.sum(0), world, rounding_mode="trunc")  # avg on integers: the sum divided, truncated


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
@pytest.mark.parametrize("dtype", [getattr(torch, name) for name in aperture.dtypes.NAMES], ids=str)
def test_every_element_type_and_reduction(team, host_provider, comm, dtype, op):
    # all_reduce whole-vector (1001 elements) and, across nodes, sharded over the node's ranks with
    # padding (40001: above the 32 KiB whole-vector limit in every type, odd); reduce_scatter.
    # Floats are exact up to 4 ranks (the suite's counts), avg where 1/world is a power of 2; past
    # that each of the world's steps may round once, so the check allows that many epsilons.
    # Integers wrap as the type does (a product of 8 twos in int8).
    world = team.size
    exact = not dtype.is_floating_point or (world <= 4 and (op != "avg" or world & (world - 1) == 0))
    tolerance = 0 if exact else world * torch.finfo(dtype).eps

    def check(what, got, want):
        got = got.to(torch.float64)
        if not dtype.is_floating_point:
            want = want.to(torch.int64).to(dtype).to(torch.float64)
        bad = (got - want).abs() > tolerance * want.abs()
        assert not bool(bad.any()), (f"rank {team.rank}: {what} {dtype} {op}: elements {bad.nonzero()[:5].view(-1).tolist()} "
                                     f"are {got[bad][:5].tolist()}, want {want[bad][:5].tolist()}")

    for n in (1001, 40001):
        t = ones_and_twos(team.rank, n).to(dtype, copy=True)  # a copy even for int64: reduced in place
        comm.all_reduce(t, op=op)
        check(f"all_reduce of {n}", t, fold_over_ranks(every_rank(world, n), op, dtype, world))
    n = 501
    inp = ones_and_twos(team.rank, world * n).to(dtype, copy=True)
    out = torch.full((n,), 3, dtype=torch.int64).to(dtype)
    comm.reduce_scatter(out, inp, op=op)
    # every rank's slice of this rank: elements rank * n .. of each rank's input
    every = torch.stack([ones_and_twos(r, world * n)[team.rank * n:(team.rank + 1) * n] for r in range(world)])
    check(f"reduce_scatter of {n} per rank", out, fold_over_ranks(every.to(torch.float64), op, dtype, world))


def test_all_to_all_reads_a_symmetric_input_in_place(team, host_provider, comm):
    # Only the zero-copy form (taken for a symmetric input from 32 KiB) agrees on a layout before
    # it moves anything; so ranks that lay out `in` and `out` differently (the odd ones in place,
    # the even ones apart) are refused on every rank there, where the staged form would just run.
    if team.size < 2:
        pytest.skip("one rank's all_to_all is one copy (no peer to read), and it cannot disagree with itself")
    n = 4096  # int64 per rank: 32 KiB x ranks in all
    t = host_provider.zeros((team.size * n,), torch.int64)
    elsewhere = torch.full((team.size * n,), -1, dtype=torch.int64)
    t.copy_(values(team.rank, team.size * n, torch.int64))
    if team.node_count == 1:  # across nodes every all_to_all is staged (docs/MULTINODE.md)
        with pytest.raises(aperture.Error, match="laid out `in` and `out` differently") as e:
            comm.all_to_all(t if team.rank % 2 else elsewhere, t)
        assert e.value.code == aperture.ErrorCode.invalid_argument
        odd = ", ".join(str(r) for r in range(1, team.size, 2))
        assert f"on rank(s) {odd} `out` overlaps `in`" in str(e.value)
        assert torch.equal(t, values(team.rank, team.size * n, torch.int64))  # nothing moved
    # The same layout on every rank runs: apart, then in place.
    expected = torch.cat([values(r, n, torch.int64, start=team.rank * n) for r in range(team.size)])
    comm.all_to_all(elsewhere, t)
    assert torch.equal(elsewhere, expected)
    comm.all_to_all(t, t)
    assert torch.equal(t, expected)
    host_provider.free(t)


def test_symmetric_inputs_at_different_offsets_are_refused_on_every_rank(team, host_provider, comm):
    # A zero-copy form reads each peer's input at this rank's own offset in the allocation, so a
    # view one element further in on the odd ranks would read the wrong elements: every rank is
    # refused instead, before anything is written (docs/CONTRACT.md).
    if team.size < 2:
        pytest.skip("one rank cannot disagree with itself")
    n = 40000  # int64: 320 KiB, past every zero-copy threshold up to 8 ranks
    t = host_provider.zeros((n + 1,), torch.int64)
    view = t[team.rank % 2:team.rank % 2 + n]
    view.copy_(values(team.rank, n, torch.int64))
    out = torch.full((team.size * n,), -1, dtype=torch.int64)
    if team.node_count > 1:  # across nodes every input is staged (docs/MULTINODE.md): offsets do not matter
        comm.all_gather(out, view)
        assert torch.equal(out, torch.cat([values(r, n, torch.int64) for r in range(team.size)]))
        comm.broadcast(view, 0)
        assert torch.equal(view, values(0, n, torch.int64))
    else:
        odd = ", ".join(str(r) for r in range(1, team.size, 2))
        even = ", ".join(str(r) for r in range(0, team.size, 2))
        with pytest.raises(aperture.Error, match=f"on rank\\(s\\) {odd} it lies at another offset than on rank\\(s\\) {even}"):
            comm.all_gather(out, view)
        assert bool((out == -1).all()), "all_gather wrote before it refused"
        with pytest.raises(aperture.Error, match="it lies at another offset"):
            comm.broadcast(view, 0)
        assert torch.equal(view, values(team.rank, n, torch.int64)), "broadcast wrote before it refused"
    # At one offset on every rank the same calls run.
    same = t[:n]
    same.copy_(values(team.rank, n, torch.int64))
    comm.all_gather(out, same)
    assert torch.equal(out, torch.cat([values(r, n, torch.int64) for r in range(team.size)]))
    comm.broadcast(same, 0)
    assert torch.equal(same, values(0, n, torch.int64))
    host_provider.free(t)
