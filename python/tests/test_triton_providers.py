"""aperture.triton on memory of every provider, in every rank of the job (1, 2, 4 ranks).

The same unmodified kernels run on each provider's tensors: shm (and mpi-window/openshmem under
--mpi) under Triton's interpreter on a machine without a GPU; cuda-ipc, cuda-vmm, nvshmem, nccl
and torch symmetric memory compiled on a GPU machine. Every element is checked, with values
that differ per rank and per element. Kernels meet only through symmetric memory; the host
synchronises (the GPU, then the team) where a kernel needs its peers' data.
"""

import contextlib
import os

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import DTYPES, INTERPRETED, job_size, pattern
import triton
import triton.language as tl


import aperture
import aperture.triton as apt
from conftest import GPU_PROVIDERS, HOST_PROVIDERS, provider as session_provider

N = 1000
BLOCK = 256

# Compiled kernels reach device memory only; interpreted ones host memory only. Beyond the
# GPU providers every Python test covers, these tests add nvshmem and nccl where available,
# unless APERTURE_TEST_GPU_PROVIDERS names the providers exactly.
_more_gpu = [] if "APERTURE_TEST_GPU_PROVIDERS" in os.environ else [
    n for n in ("nvshmem", "nccl") if n in aperture.available_providers() and n not in GPU_PROVIDERS]
NAMES = HOST_PROVIDERS if INTERPRETED else GPU_PROVIDERS + _more_gpu
_NONE = "no host provider here" if INTERPRETED else "no GPU provider here"


@pytest.fixture(params=NAMES or [pytest.param(None, marks=pytest.mark.skip(reason=_NONE))])
def prov(request, team):
    return session_provider(team, request.param)


def on(t):
    """Launches on the tensor's GPU (two ranks may share one GPU, or each have its own)."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def settle(team, t):
    """This rank's kernels are done and every rank got here."""
    if t.is_cuda:
        torch.cuda.synchronize(t.device)
    team.barrier()


@triton.jit
def store_kernel(sym, src, peer_bases, rank, to_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(sym + offs, tl.load(src + offs, mask=mask), rank, to_rank, peer_bases, mask=mask)


@triton.jit
def load_kernel(sym, out, peer_bases, rank, to_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, apt.load(sym + offs, rank, to_rank, peer_bases, mask=mask), mask=mask)


def grid(n=N):
    return (triton.cdiv(n, BLOCK),)


def test_store_and_load_around_the_ring_every_dtype_on_views(team, prov):
    rank, world = team.rank, team.size
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    for k, dtype in enumerate(DTYPES):
        t = prov.zeros((2, N), dtype)  # row 0: what I own; row 1: what my predecessor stores (a view)
        t[0].copy_(pattern(rank, N, dtype, salt=k, device=t.device))
        bases = aperture.address_map(t).peer_bases
        settle(team, t)
        out = torch.zeros(N, dtype=dtype, device=t.device)
        with on(t):
            store_kernel[grid()](t[1], t[0], bases, rank, nxt, N, BLOCK=BLOCK)
            load_kernel[grid()](t[0], out, bases, rank, nxt, N, BLOCK=BLOCK)
        settle(team, t)
        assert torch.equal(t[1], pattern(prev, N, dtype, salt=k, device=t.device)), f"{prov.name} {dtype}: stored"
        assert torch.equal(out, pattern(nxt, N, dtype, salt=k, device=t.device)), f"{prov.name} {dtype}: loaded"
        assert torch.equal(t[0], pattern(rank, N, dtype, salt=k, device=t.device))
        prov.free(t)


@triton.jit
def ring_lap_kernel(inbox, inbox_bases, mine, received, flag, flag_bases, rank, world, lap, N: tl.constexpr,
                    BLOCK: tl.constexpr):
    nxt = (rank + 1) % world
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        apt.put(inbox + offs, mine + offs, rank, nxt, inbox_bases)
    apt.signal(flag, lap, rank, nxt, flag_bases)
    apt.wait_until_ge(flag, lap)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(received + offs, tl.load(inbox + offs))


def test_signal_and_wait_order_a_ring_inside_kernels(team, prov):
    # Two allocations, two tables, one kernel; the wait crosses processes (and GPUs).
    rank, world = team.rank, team.size
    n = 1024
    inbox = prov.zeros((n,), torch.int64)
    flag = prov.zeros((1,), torch.uint64)
    received = torch.zeros(n, dtype=torch.int64, device=inbox.device)
    for lap in (1, 2, 3):
        mine = pattern(rank, n, torch.int64, salt=lap, device=inbox.device) * 1000 + lap
        with on(inbox):
            ring_lap_kernel[(1,)](inbox, aperture.address_map(inbox).peer_bases, mine, received, flag,
                                  aperture.address_map(flag).peer_bases, rank, world, lap, N=n, BLOCK=BLOCK)
        settle(team, inbox)  # the next lap overwrites the inboxes
        expected = pattern((rank - 1) % world, n, torch.int64, salt=lap, device=inbox.device) * 1000 + lap
        assert torch.equal(received, expected), f"{prov.name} lap {lap}"
    prov.free(flag)
    prov.free(inbox)


@triton.jit
def atomics_kernel(acc, flags, claims, values, acc_bases, flag_bases, rank, n, WORLD: tl.constexpr,
                   BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(values + offs, mask=mask)
    for peer in range(WORLD):
        apt.atomic_add(acc + offs, v, rank, peer, acc_bases, mask=mask)
        apt.atomic_or(flags + offs, tl.full([BLOCK], 1, tl.int32) << rank, rank, peer, flag_bases, mask=mask)
    if tl.program_id(0) == 0:
        lanes = tl.arange(0, BLOCK)
        apt.atomic_cas(claims + lanes, tl.zeros([BLOCK], dtype=tl.int32), tl.zeros([BLOCK], dtype=tl.int32) + rank + 1,
                       rank, 0, flag_bases)


def test_atomics_from_every_rank_into_every_rank(team, prov):
    rank, world = team.rank, team.size
    acc = prov.zeros((N,), torch.int64)
    flags = prov.zeros((N + BLOCK,), torch.int32)  # bits set by each rank, then rank 0's claim slots
    values = pattern(rank, N, torch.int64, salt=7, device=acc.device) * (rank + 1)
    settle(team, acc)
    with on(acc):
        atomics_kernel[grid()](acc, flags, flags[N:], values, aperture.address_map(acc).peer_bases,
                               aperture.address_map(flags).peer_bases, rank, N, WORLD=world, BLOCK=BLOCK)
    settle(team, acc)
    every = sum(pattern(r, N, torch.int64, salt=7, device=acc.device) * (r + 1) for r in range(world))
    assert torch.equal(acc, every), prov.name
    assert torch.equal(flags[:N], torch.full((N,), (1 << world) - 1, dtype=torch.int32, device=acc.device))
    if rank == 0:
        claims = flags[N:]
        assert bool(((claims >= 1) & (claims <= world)).all()), claims.tolist()
    settle(team, acc)
    prov.free(flags)
    prov.free(acc)


@triton.jit
def two_tables_kernel(a, a_bases, b, b_bases, rank, to_rank, n, BLOCK: tl.constexpr):
    # to_rank's copy of b becomes to_rank's copy of a, plus one.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(b + offs, apt.load(a + offs, rank, to_rank, a_bases, mask=mask) + 1, rank, to_rank, b_bases, mask=mask)


def test_two_providers_tensors_in_one_kernel(team):
    """Every pair of this machine's providers of the kind kernels run on (a provider with
    itself when there is only one: two allocations, two tables)."""
    names = NAMES
    if not names:
        pytest.skip(_NONE)
    pairs = [(a, b) for a in names for b in names if a != b] or [(names[0], names[0])]
    rank, world = team.rank, team.size
    nxt = (rank + 1) % world
    for a_name, b_name in pairs:
        pa, pb = session_provider(team, a_name), session_provider(team, b_name)
        a = pa.zeros((N,), torch.float32)
        b = pb.zeros((N,), torch.float32)
        a.copy_(pattern(rank, N, torch.float32, salt=9, device=a.device))
        settle(team, a)
        with on(a):
            two_tables_kernel[grid()](a, aperture.address_map(a).peer_bases, b, aperture.address_map(b).peer_bases,
                                      rank, nxt, N, BLOCK=BLOCK)
        settle(team, a)
        prev = (rank - 1) % world
        # b's copy here was written by my predecessor from a's copy here.
        assert torch.equal(b, pattern(rank, N, torch.float32, salt=9, device=a.device) + 1), (a_name, b_name, prev)
        pb.free(b)
        pa.free(a)


# Torch symmetric memory rides on NCCL, which wants one GPU per rank: with ranks sharing GPUs
# (two ranks on a one-GPU machine) the test is not defined, rather than skipped.
if not INTERPRETED and job_size() <= torch.cuda.device_count():
    def test_the_same_kernels_on_torch_symmetric_memory(team):
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        device = torch.device("cuda", torch.cuda.current_device())
        if not dist.is_initialized():
            dist.init_process_group("nccl", device_id=device)
        rank, world = dist.get_rank(), dist.get_world_size()
        nxt, prev = (rank + 1) % world, (rank - 1) % world
        t = symm_mem.empty((2, N), dtype=torch.float32, device=device)
        symm_mem.rendezvous(t, dist.group.WORLD.group_name)
        bases = aperture.from_torch_symmetric(t).peer_bases
        t[0].copy_(pattern(rank, N, torch.float32, salt=11, device=device))
        t[1].zero_()
        settle(team, t)
        out = torch.zeros(N, dtype=torch.float32, device=device)
        with on(t):
            store_kernel[grid()](t[1], t[0], bases, rank, nxt, N, BLOCK=BLOCK)
            load_kernel[grid()](t[0], out, bases, rank, nxt, N, BLOCK=BLOCK)
        settle(team, t)
        assert torch.equal(t[1], pattern(prev, N, torch.float32, salt=11, device=device))
        assert torch.equal(out, pattern(nxt, N, torch.float32, salt=11, device=device))
