"""aperture.triton through the GPU proxy: peers on other nodes (table entry 0) from Triton kernels.

Runs in every rank of a job whose ranks span several nodes and were started by mpirun (the map
then has an engine), e.g. scripts/pytest-ranks.sh 4 --mpi --nodes 2 python/tests/test_triton_proxy.py
(scripts/python-test.sh runs it so). Each kernel launch reaches every rank, direct peers (same
node) and proxied ones (other nodes) in one kernel, one program per peer: store, put, load, get,
copy between two other ranks, a scattered store (one request per element), every atomic, a
scalar atomic and signal. Values differ per rank, peer and element; every element is checked,
the ones a mask left out too.

Interpreted on CPUs (TRITON_INTERPRET=1): shm memory, a proxy whose queue is in host memory.
Compiled on a GPU: cuda-ipc and cuda-vmm memory, the queue mapped for the GPU.
In a job on one node the tests that need other nodes skip; the refusal without an engine is
tested there instead.
"""

import os

import triton_world  # noqa: F401 - decides interpretation before triton is imported
from triton_world import INTERPRETED, DEVICE

import pytest
import torch
import triton
import triton.language as tl

import aperture
import aperture.iris as iris
import aperture.triton as apt

from conftest import GPU_PROVIDERS, provider

PROVIDERS = ["shm"] if INTERPRETED else GPU_PROVIDERS
BLOCK = 512
N = 300  # elements a transfer moves: 300 of 512 lanes (masked), 2-3 payloads for 4-8 byte elements
SB = 16  # lanes of the scattered store, 13 masked in
LANES = 4  # lanes per atomic, 3 masked in
INT_OPS = ["add", "sub", "and", "or", "xor", "min", "max", "xchg", "cas"]
FLOAT_OPS = ["add", "sub", "min", "max", "cas"]


def spans_nodes(team):
    return any(not team.same_node(p) for p in range(team.size))


def sync():
    if not INTERPRETED:
        torch.cuda.synchronize()


@pytest.fixture(params=PROVIDERS or [pytest.param(None, marks=pytest.mark.skip("no GPU provider here"))])
def prov(request, team):
    if not spans_nodes(team):
        pytest.skip("the ranks share one node: no peer needs the proxy (run under --nodes 2)")
    return provider(team, request.param)


# ---- values -------------------------------------------------------------------------------------

@triton.jit
def _val(a, b, i, salt):
    # Small integers, exact in int8, float16 and bfloat16; different per (a, b, i, salt). (Kernels
    # convert them through float32: the interpreter turns int32 into bfloat16 wrongly.)
    return (i * 7 + a * 31 + b * 13 + salt * 11) % 113 - 56


def val(a, b, i, salt):
    return (i * 7 + a * 31 + b * 13 + salt * 11) % 113 - 56


# ---- transfers ----------------------------------------------------------------------------------

@triton.jit
def transfers_kernel(inbox_s, inbox_p, mine, copyin, strided, flags, src, got_load, got_get, peer_bases, me, world, n,
                     proxy, BLOCK: tl.constexpr, SB: tl.constexpr):
    p = tl.program_id(0)  # one program per peer: direct and proxied ones in one kernel
    T = inbox_s.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(inbox_s + me * BLOCK + offs, _val(me, p, offs, 1).to(tl.float32).to(T), me, p, peer_bases, mask=mask,
              proxy=proxy)
    apt.put(inbox_p + me * BLOCK + offs, src + p * BLOCK + offs, me, p, peer_bases, mask=mask, proxy=proxy)
    tl.store(got_load + p * BLOCK + offs, apt.load(mine + offs, me, p, peer_bases, mask=mask, proxy=proxy),
             mask=mask)
    apt.get(got_get + p * BLOCK + offs, mine + BLOCK + offs, me, p, peer_bases, mask=mask, proxy=proxy)
    # p's values into the next rank's copy: both sides may be on other nodes.
    apt.copy(copyin + me * BLOCK + offs, mine + offs, p, (p + 1) % world, me, peer_bases, mask=mask, proxy=proxy)
    # Every second element: not one transfer, so one request per element through the proxy.
    lanes = tl.arange(0, SB)
    apt.store(strided + me * 2 * SB + lanes * 2, _val(me, p, lanes, 3).to(tl.float32).to(T), me, p, peer_bases,
              mask=lanes < SB - 3, proxy=proxy)
    apt.signal(flags + me, 1000 * me + p + 1, me, p, peer_bases, proxy=proxy)


@pytest.mark.parametrize("dtype", [torch.int8, torch.bfloat16, torch.float32, torch.int64])
def test_transfers_reach_every_peer(team, prov, dtype):
    me, world = team.rank, team.size
    inbox_s = prov.zeros(world * BLOCK, dtype)
    inbox_p = prov.zeros(world * BLOCK, dtype)
    mine = prov.zeros(2 * BLOCK, dtype)
    copyin = prov.zeros(world * BLOCK, dtype)
    strided = prov.zeros(world * 2 * SB, dtype)
    flags = prov.zeros(world, "int64")
    i = torch.arange(BLOCK)
    mine.copy_(torch.cat([val(me, 99, i, 0), val(me, 99, i, 2)]).to(dtype))
    src = torch.cat([val(me, p, i, 4) for p in range(world)]).to(dtype).to(DEVICE)
    got_load = torch.zeros(world * BLOCK, dtype=dtype, device=DEVICE)
    got_get = torch.zeros(world * BLOCK, dtype=dtype, device=DEVICE)
    m = aperture.address_map(inbox_s)
    sync()
    team.barrier()
    with aperture.GpuProxy(inbox_s) as proxy:
        for t in (inbox_p, mine, copyin, strided, flags):
            assert proxy.covers(t)  # one heap, one engine: one proxy for every allocation
        transfers_kernel[(world,)](inbox_s, inbox_p, mine, copyin, strided, flags, src, got_load, got_get,
                                   m.peer_bases, me, world, N, proxy.handle, BLOCK=BLOCK, SB=SB)
        sync()
        team.barrier()  # every rank's requests have completed
        indirect = len(m.indirect_peers)
        assert indirect > 0 and proxy.failures == 0, proxy.last_error
        # Per indirect peer: store, put, load, get in payloads; copy's two sides; 13 scattered; signal.
        assert proxy.completed > indirect * (4 + 13 + 1)
    q = me
    zeros = torch.zeros(BLOCK - N, dtype=dtype)
    for s in range(world):
        block = slice(s * BLOCK, (s + 1) * BLOCK)
        expect = [
            ("store", inbox_s, val(s, q, i, 1)),
            ("put", inbox_p, val(s, q, i, 4)),
            ("copy", copyin, val((q - 1) % world, 99, i, 0)),
        ]
        for what, t, values in expect:
            got = t[block].cpu()
            assert torch.equal(got[:N], values[:N].to(dtype)), f"{what} from rank {s}: {got[:8]} ..."
            assert torch.equal(got[N:], zeros), f"{what} from rank {s} wrote past the mask"
        got = strided[s * 2 * SB:(s + 1) * 2 * SB].cpu()
        j = torch.arange(SB)
        want = torch.zeros(2 * SB, dtype=dtype)
        want[0:2 * (SB - 3):2] = val(s, q, j[:SB - 3], 3).to(dtype)
        assert torch.equal(got, want), f"scattered store from rank {s}: {got}"
        assert int(flags[s]) == 1000 * s + q + 1, f"signal from rank {s}: {int(flags[s])}"
    for p in range(world):
        block = slice(p * BLOCK, p * BLOCK + N)
        assert torch.equal(got_load[block].cpu(), val(p, 99, i[:N], 0).to(dtype)), f"load from rank {p}"
        assert torch.equal(got_get[block].cpu(), val(p, 99, i[:N], 2).to(dtype)), f"get from rank {p}"
    team.barrier()  # no rank frees while another still reads
    for t in (inbox_s, inbox_p, mine, copyin, strided, flags):
        prov.free(t)


@triton.jit
def long_transfer_kernel(inbox, back, src, peer_bases, me, n, proxy, BLOCK: tl.constexpr):
    # One program per peer: a put of many payloads into p's copy, then a get of it back.
    p = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    apt.put(inbox + me * BLOCK + offs, src + p * BLOCK + offs, me, p, peer_bases, mask=mask, proxy=proxy)
    apt.get(back + p * BLOCK + offs, inbox + me * BLOCK + offs, me, p, peer_bases, mask=mask, proxy=proxy)


# A put and a get of 29 payloads (4000 int64 of 4096 lanes): several windows of requests in
# flight, on the default queue and on one of 4 slots (each window clipped to 4).
@pytest.mark.parametrize("capacity", [4, 256])
def test_long_transfers_in_windows(team, prov, capacity):
    me, world = team.rank, team.size
    lanes, n = 4096, 4000
    inbox = prov.zeros(world * lanes, "int64")
    i = torch.arange(lanes, dtype=torch.int64)
    src = torch.cat([i * 1009 + me * 100003 + p * 7 + capacity for p in range(world)]).to(DEVICE)
    back = torch.full((world * lanes,), -1, dtype=torch.int64, device=DEVICE)
    m = aperture.address_map(inbox)
    sync()
    team.barrier()
    with aperture.GpuProxy(inbox, capacity=capacity) as proxy:
        long_transfer_kernel[(world,)](inbox, back, src, m.peer_bases, me, n, proxy.handle, BLOCK=lanes)
        sync()
        team.barrier()
        assert proxy.failures == 0, proxy.last_error
        payloads = -(-n * 8 // aperture.triton.PROXY_LAYOUT["payload_bytes"])
        assert proxy.completed == 2 * payloads * len(m.indirect_peers)
    for s in range(world):  # what rank s put here, and what this rank got back from s
        got = inbox[s * lanes:(s + 1) * lanes].cpu()
        assert torch.equal(got[:n], (i * 1009 + s * 100003 + me * 7 + capacity)[:n]), f"put from rank {s}"
        assert torch.equal(got[n:], torch.zeros(lanes - n, dtype=torch.int64)), f"rank {s} wrote past the mask"
        mine_back = back[s * lanes:(s + 1) * lanes].cpu()
        assert torch.equal(mine_back[:n], (i * 1009 + me * 100003 + s * 7 + capacity)[:n]), f"get from rank {s}"
        assert torch.equal(mine_back[n:], torch.full((lanes - n,), -1, dtype=torch.int64)), "get past the mask"
    team.barrier()
    prov.free(inbox)


@triton.jit
def shapes_kernel(tiles, holes, word, out, peer_bases, me, proxy):
    # 2-D blocks (packed when contiguous, per element where the mask leaves holes) and scalars.
    p = tl.program_id(0)
    r = tl.arange(0, 4)[:, None]
    c = tl.arange(0, 8)[None, :]
    v = me * 1000 + p * 100 + r * 8 + c
    apt.store(tiles + me * 32 + r * 8 + c, v, me, p, peer_bases, proxy=proxy)
    apt.store(holes + me * 32 + r * 8 + c, v + 50, me, p, peer_bases, mask=c < 6, proxy=proxy)
    tl.store(out + p, apt.load(word, me, p, peer_bases, proxy=proxy))


def test_blocks_of_two_dimensions_and_scalars(team, prov):
    me, world = team.rank, team.size
    tiles = prov.zeros(world * 32, "int32")
    holes = prov.zeros(world * 32, "int32")
    word = prov.zeros(1, "int64")
    word.fill_(7000 + me)
    out = torch.zeros(world, dtype=torch.int64, device=DEVICE)
    m = aperture.address_map(tiles)
    sync()
    team.barrier()
    with aperture.GpuProxy(tiles) as proxy:
        shapes_kernel[(world,)](tiles, holes, word, out, m.peer_bases, me, proxy.handle)
        sync()
        team.barrier()
        assert proxy.failures == 0, proxy.last_error
    r, c = torch.arange(4)[:, None], torch.arange(8)[None, :]
    for s in range(world):
        v = (s * 1000 + me * 100 + r * 8 + c).to(torch.int32).reshape(-1)
        assert torch.equal(tiles[s * 32:(s + 1) * 32].cpu(), v), f"2-D store from rank {s}"
        want = torch.where((c < 6).expand(4, 8).reshape(-1), v + 50, torch.zeros_like(v))
        assert torch.equal(holes[s * 32:(s + 1) * 32].cpu(), want), f"2-D masked store from rank {s}"
    assert out.cpu().tolist() == [7000 + p for p in range(world)], f"scalar loads: {out.cpu().tolist()}"
    team.barrier()
    for t in (tiles, holes, word):
        prov.free(t)


@triton.jit
def iris_functions_kernel(inbox, src, word, got, counter, olds, heap_bases, me, proxy, N: tl.constexpr):
    # aperture.iris's device functions, Iris's argument order, each with the proxy: program p puts
    # this rank's src into p's inbox, gets p's word, adds to p's counter and reads p's src back.
    p = tl.program_id(0)
    offs = tl.arange(0, N)
    iris.put(src + offs, inbox + me * N + offs, me, p, heap_bases, proxy=proxy)
    iris.get(word, got + p, me, p, heap_bases, proxy=proxy)
    tl.store(olds + p, iris.atomic_add(counter, me + 1, me, p, heap_bases, proxy=proxy))
    back = iris.load(src + offs, me, p, heap_bases, proxy=proxy)
    iris.store(inbox + (me + 64) * N + offs, back + 1, me, p, heap_bases, proxy=proxy)


def check_irises_transfers(inbox, got, counter, olds, me, world, n, calls):
    """What iris_functions_kernel and its DeviceContext and unmodified forms leave here: every
    rank's src put into its row, this rank's src loaded back by every rank (+1), every rank's word
    got, and one add per rank. ``calls``: how the test made them, for the messages."""
    rows = inbox.cpu().view(-1, n)
    for s in range(world):
        assert torch.equal(rows[s], torch.arange(n, dtype=torch.int32) * 10 + s * 1000), f"{calls}: put from rank {s}"
        assert torch.equal(rows[64 + s], torch.arange(n, dtype=torch.int32) * 10 + me * 1000 + 1), \
            f"{calls}: load by rank {s} of this rank's src, stored back"
    assert got.cpu().tolist() == [500 + p for p in range(world)], f"{calls}: get of every rank's word"
    assert int(counter.cpu()[0]) == world * (world + 1) // 2, f"{calls}: atomic_add from every rank"
    assert all(0 <= o < world * (world + 1) // 2 for o in olds.cpu().tolist())
    return rows


def test_irises_device_functions_take_the_proxy(team, prov):
    me, world, n = team.rank, team.size, 8
    inbox = prov.zeros(2 * 64 * n, "int32")  # rows 0..world-1: puts; rows 64..: loads sent back
    src = prov.zeros(n, "int32")
    src.copy_(torch.arange(n, dtype=torch.int32, device=src.device) * 10 + me * 1000)
    word = prov.zeros(1, "int32")
    word.fill_(500 + me)
    counter = prov.zeros(1, "int32")
    got = torch.zeros(world, dtype=torch.int32, device=DEVICE)
    olds = torch.zeros(world, dtype=torch.int32, device=DEVICE)
    m = aperture.address_map(inbox)
    sync()
    team.barrier()
    with aperture.GpuProxy(inbox) as proxy:
        iris_functions_kernel[(world,)](inbox, src, word, got, counter, olds, m.peer_bases, me, proxy.handle, N=n)
        sync()
        team.barrier()
        assert proxy.failures == 0, proxy.last_error
    check_irises_transfers(inbox, got, counter, olds, me, world, n, "iris functions with proxy=")
    team.barrier()
    for t in (inbox, src, word, counter):
        prov.free(t)


@triton.jit
def device_context_kernel(context, inbox, src, word, got, counter, olds, proxy, RANK: tl.constexpr,
                          WORLD: tl.constexpr, N: tl.constexpr):
    # Iris's DeviceContext made with the proxy: its methods as Iris programs call them, program p
    # reaching rank p as iris_functions_kernel does.
    ctx = iris.DeviceContext.initialize(context, RANK, WORLD, proxy=proxy)
    p = tl.program_id(0)
    offs = tl.arange(0, N)
    ctx.put(src + offs, inbox + RANK * N + offs, p)
    ctx.get(word, got + p, p)
    tl.store(olds + p, ctx.atomic_add(counter, RANK + 1, p))
    back = ctx.load(src + offs, p)
    ctx.store(inbox + (RANK + 64) * N + offs, back + 1, p)
    ctx.copy(src + offs, inbox + (p + 128) * N + offs, p, RANK)


@triton.jit
def device_context_tiles_kernel(context, src, gathered, reduced, flags, proxy, RANK: tl.constexpr,
                                WORLD: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    # The tile collectives through the proxy: all_gather stores into every rank's gathered, and
    # all_reduce_one_shot waits for each rank's flag and reads its src.
    ctx = iris.DeviceContext.initialize(context, RANK, WORLD, proxy=proxy)
    rows = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tile = iris.Tile(0, 0, M, N, tl.load(src + rows))
    ctx.all_gather(tile, iris.make_tensor_view(gathered, M * WORLD, N, N, 1), 0)
    tl.atomic_xchg(flags, 1, sem="release", scope="sys")  # this rank's src is ready
    ctx.all_reduce_one_shot(tile, iris.make_tensor_view(src, M, N, N, 1),
                            iris.make_tensor_view(reduced, M, N, N, 1), flags)


def test_the_device_context_reaches_other_nodes_through_the_proxy(team, prov):
    me, world, n, rows, cols = team.rank, team.size, 8, 4, 8
    ctx = iris.iris(1 << 20)
    inbox = ctx.zeros(3 * 64 * n, dtype=torch.int32)  # rows 0..: puts; 64..: loads sent back; 128..: copies
    src = ctx.zeros(n, dtype=torch.int32)
    src.copy_(torch.arange(n, dtype=torch.int32, device=src.device) * 10 + me * 1000)
    word = ctx.zeros(1, dtype=torch.int32)
    word.fill_(500 + me)
    counter = ctx.zeros(1, dtype=torch.int32)
    tile_src = ctx.zeros(rows, cols, dtype=torch.float32)
    tile_src.copy_(torch.arange(rows * cols, dtype=torch.float32).view(rows, cols) * 3 + me * 100)
    gathered = ctx.zeros(world * rows, cols, dtype=torch.float32)
    reduced = ctx.zeros(rows, cols, dtype=torch.float32)
    flags = ctx.zeros(1, dtype=torch.int32)
    got = torch.zeros(world, dtype=torch.int32, device=DEVICE)
    olds = torch.zeros(world, dtype=torch.int32, device=DEVICE)
    context = ctx.get_device_context()
    assert any(b == 0 for b in ctx.get_heap_bases().tolist()), "no peer is indirect: the test would test nothing"
    sync()
    ctx.barrier()
    with aperture.GpuProxy(inbox) as proxy:
        device_context_kernel[(world,)](context, inbox, src, word, got, counter, olds, proxy.handle, me, world, n)
        device_context_tiles_kernel[(1,)](context, tile_src, gathered, reduced, flags, proxy.handle, me, world,
                                          rows, cols)
        sync()
        ctx.barrier()
        assert proxy.failures == 0, proxy.last_error
    lines = check_irises_transfers(inbox, got, counter, olds, me, world, n, "DeviceContext(proxy=)")
    for s in range(world):
        assert torch.equal(lines[128 + s], lines[s]), f"ctx.copy of rank {s}'s src into this rank's inbox"
    every = [torch.arange(rows * cols, dtype=torch.float32).view(rows, cols) * 3 + s * 100 for s in range(world)]
    assert torch.equal(gathered.cpu(), torch.cat(every)), "ctx.all_gather"
    assert torch.equal(reduced.cpu(), sum(every)), "ctx.all_reduce_one_shot"
    ctx.barrier()


@triton.jit
def unmodified_iris_kernel(context, inbox, src, word, got, counter, olds, sym, heap_bases, sym_table,
                           RANK: tl.constexpr, WORLD: tl.constexpr, N: tl.constexpr):
    # Written as for one node: no proxy anywhere. Program p reaches rank p through Iris's functions
    # on the heap's table and on allocate_symmetric's, and through a DeviceContext.
    p = tl.program_id(0)
    offs = tl.arange(0, N)
    iris.put(src + offs, inbox + RANK * N + offs, RANK, p, heap_bases)
    iris.get(word, got + p, RANK, p, heap_bases)
    tl.store(olds + p, iris.atomic_add(counter, RANK + 1, RANK, p, heap_bases))
    iris.store(sym + RANK, RANK * 10 + 7, RANK, p, sym_table)
    ctx = iris.DeviceContext.initialize(context, RANK, WORLD)
    back = ctx.load(src + offs, p)
    ctx.store(inbox + (RANK + 64) * N + offs, back + 1, p)


def test_unmodified_iris_kernels_reach_other_nodes(team, prov):
    # An Iris program for one node, run on two: the host context sees that its heap reaches other
    # nodes, starts a proxy and hands out tables that carry it (aperture.iris._device._OTHER_NODES).
    me, world, n = team.rank, team.size, 8
    ctx = iris.iris(1 << 20)
    assert iris._device.reaches_other_nodes() and ctx._gpu_proxy is not None
    inbox = ctx.zeros(2 * 64 * n, dtype=torch.int32)
    src = ctx.zeros(n, dtype=torch.int32)
    src.copy_(torch.arange(n, dtype=torch.int32, device=src.device) * 10 + me * 1000)
    word = ctx.full((1,), 500 + me, dtype=torch.int32)
    counter = ctx.zeros(1, dtype=torch.int32)
    sym, sym_table = ctx.allocate_symmetric(world, dtype=torch.int32)
    got = torch.zeros(world, dtype=torch.int32, device=DEVICE)
    olds = torch.zeros(world, dtype=torch.int32, device=DEVICE)
    sync()
    ctx.barrier()
    unmodified_iris_kernel[(world,)](ctx.get_device_context(), inbox, src, word, got, counter, olds, sym,
                                     ctx.get_heap_bases(), sym_table, me, world, n)
    sync()
    ctx.barrier()
    assert ctx._gpu_proxy.failures == 0, ctx._gpu_proxy.last_error
    assert ctx._gpu_proxy.completed > 0  # the other node's ranks went through it
    check_irises_transfers(inbox, got, counter, olds, me, world, n, "unmodified Iris kernel")
    assert sym.cpu().tolist() == [s * 10 + 7 for s in range(world)], "iris.store through allocate_symmetric's table"
    ctx.barrier()
    ctx.heap.close()  # stops the proxy
    assert ctx._gpu_proxy.stopped


# ---- atomics ------------------------------------------------------------------------------------

@triton.jit
def _operand(me, p, lane, k):
    return (me * 37 + p * 11 + lane * 5 + k * 3) % 50 - 20


def operand(me, p, lane, k):
    return (me * 37 + p * 11 + lane * 5 + k * 3) % 50 - 20


def initial(owner, sender, lane, k):
    return (owner * 17 + sender * 7 + lane * 3 + k) % 40 - 15


@triton.jit
def atomics_kernel(words, olds, counter, scalar_olds, peer_bases, me, proxy, NOPS: tl.constexpr,
                   LANES: tl.constexpr, FLOAT: tl.constexpr):
    p = tl.program_id(0)
    T = words.dtype.element_ty
    lane = tl.arange(0, LANES)
    mask = lane < LANES - 1
    at = words + me * NOPS * LANES + lane  # this rank's words in p's copy, op k at k * LANES
    out = olds + p * NOPS * LANES + lane
    if FLOAT:
        tl.store(out + 0 * LANES, apt.atomic_add(at + 0 * LANES, _operand(me, p, lane, 0).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 1 * LANES, apt.atomic_sub(at + 1 * LANES, _operand(me, p, lane, 1).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 2 * LANES, apt.atomic_min(at + 2 * LANES, _operand(me, p, lane, 2).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 3 * LANES, apt.atomic_max(at + 3 * LANES, _operand(me, p, lane, 3).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
    else:
        tl.store(out + 0 * LANES, apt.atomic_add(at + 0 * LANES, _operand(me, p, lane, 0).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 1 * LANES, apt.atomic_sub(at + 1 * LANES, _operand(me, p, lane, 1).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 2 * LANES, apt.atomic_and(at + 2 * LANES, _operand(me, p, lane, 2).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 3 * LANES, apt.atomic_or(at + 3 * LANES, _operand(me, p, lane, 3).to(T), me, p, peer_bases,
                                                mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 4 * LANES, apt.atomic_xor(at + 4 * LANES, _operand(me, p, lane, 4).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 5 * LANES, apt.atomic_min(at + 5 * LANES, _operand(me, p, lane, 5).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 6 * LANES, apt.atomic_max(at + 6 * LANES, _operand(me, p, lane, 6).to(T), me, p, peer_bases,
                                                 mask=mask, proxy=proxy), mask=mask)
        tl.store(out + 7 * LANES, apt.atomic_xchg(at + 7 * LANES, _operand(me, p, lane, 7).to(T), me, p, peer_bases,
                                                  mask=mask, proxy=proxy), mask=mask)
    # Compare-and-swap (no mask): even lanes expect the word's value (swap), odd ones one more (keep).
    K_CAS: tl.constexpr = NOPS - 1
    cmp = ((p * 17 + me * 7 + lane * 3 + K_CAS) % 40 - 15 + lane % 2).to(T)
    tl.store(out + K_CAS * LANES, apt.atomic_cas(at + K_CAS * LANES, cmp, _operand(me, p, lane, K_CAS).to(T), me, p,
                                                 peer_bases, proxy=proxy))
    # A scalar atomic: one word per sender.
    tl.store(scalar_olds + p, apt.atomic_add(counter + me, me + 1, me, p, peer_bases, proxy=proxy))


def apply(op, old, v):
    return {"add": lambda: old + v, "sub": lambda: old - v, "and": lambda: old & v, "or": lambda: old | v,
            "xor": lambda: old ^ v, "min": lambda: torch.minimum(old, v), "max": lambda: torch.maximum(old, v),
            "xchg": lambda: v}[op]()


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_atomics_on_every_peer(team, prov, dtype):
    me, world = team.rank, team.size
    floating = dtype.is_floating_point
    ops = FLOAT_OPS if floating else INT_OPS
    nops = len(ops)
    lane = torch.arange(LANES)
    words = prov.zeros(world * nops * LANES, dtype)
    counter = prov.zeros(world, "int64")
    # This rank's words for sender s, op k: initial(me, s, lane, k).
    words.copy_(torch.cat([initial(me, s, lane, k) for s in range(world) for k in range(nops)]).to(dtype))
    olds = torch.zeros(world * nops * LANES, dtype=dtype, device=DEVICE)
    scalar_olds = torch.full((world,), -1, dtype=torch.int64, device=DEVICE)
    m = aperture.address_map(words)
    sync()
    team.barrier()
    with aperture.GpuProxy(words) as proxy:
        atomics_kernel[(world,)](words, olds, counter, scalar_olds, m.peer_bases, me, proxy.handle, NOPS=nops,
                                 LANES=LANES, FLOAT=floating)
        sync()
        team.barrier()
        assert proxy.failures == 0, proxy.last_error
    masked_in = lane < LANES - 1
    for p in range(world):  # what this rank's atomics returned
        for k, op in enumerate(ops):
            got = olds[(p * nops + k) * LANES:(p * nops + k + 1) * LANES].cpu()
            want = initial(p, me, lane, k).to(dtype)
            keep = torch.ones(LANES, dtype=torch.bool) if op == "cas" else masked_in
            assert torch.equal(got[keep], want[keep]), f"{op} at rank {p} returned {got}, expected {want}"
        assert int(scalar_olds[p]) == 0, f"scalar atomic_add at rank {p} returned {int(scalar_olds[p])}"
    for s in range(world):  # what every rank's atomics left in this rank's words
        for k, op in enumerate(ops):
            got = words[(s * nops + k) * LANES:(s * nops + k + 1) * LANES].cpu()
            old = initial(me, s, lane, k).to(dtype)
            v = operand(s, me, lane, k).to(dtype)
            if op == "cas":
                want = torch.where(lane % 2 == 0, v, old)
            else:
                want = torch.where(masked_in, apply(op, old, v), old)
            assert torch.equal(got, want), f"{op} from rank {s}: {got}, expected {want}"
        assert int(counter[s]) == s + 1, f"scalar atomic_add from rank {s}: {int(counter[s])}"
    team.barrier()
    prov.free(words)
    prov.free(counter)


# ---- failures -----------------------------------------------------------------------------------

@triton.jit
def put_kernel(buf, peer_bases, me, peer, proxy, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    apt.store(buf + offs, offs.to(buf.dtype.element_ty), me, peer, peer_bases, proxy=proxy)


@pytest.mark.skipif(not INTERPRETED, reason="a compiled kernel traps, which ends the CUDA context: tests/gpu covers it")
def test_stopped_proxy_fails_the_kernel(team, prov):
    buf = prov.zeros(64, "int32")
    m = aperture.address_map(buf)
    peer = m.indirect_peers[0]
    proxy = aperture.GpuProxy(buf)
    proxy.stop()
    # Interpreted, the kernel raises aperture.Error (inside Triton's InterpreterError).
    with pytest.raises(Exception, match=r"put on rank \d+ at offset \d+ through the GPU proxy ended closed"):
        put_kernel[(1,)](buf, m.peer_bases, team.rank, peer, proxy.handle, BLOCK=64)
    team.barrier()
    assert torch.equal(buf.cpu(), torch.zeros(64, dtype=torch.int32))  # nobody's put landed
    team.barrier()
    prov.free(buf)


def test_no_engine_is_refused(team):
    # One node (every peer direct), or ranks not started by mpirun: there is no engine to proxy.
    if spans_nodes(team) and os.environ.get("OMPI_COMM_WORLD_SIZE"):
        pytest.skip("this job has an engine: the tests above use it")
    prov = provider(team, "shm")
    buf = prov.zeros(16, "int32")
    with pytest.raises(aperture.Error, match="no engine"):
        aperture.GpuProxy(buf)
    prov.free(buf)


def test_layout_matches_the_library():
    from aperture import _core

    assert _core.proxy_layout() == apt.PROXY_LAYOUT
