"""Communicator on host memory: every collective, every element, symmetric and ordinary tensors."""

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
def test_broadcast_from_every_root(team, host_provider, comm, kind, dtype):
    n = 3001
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
