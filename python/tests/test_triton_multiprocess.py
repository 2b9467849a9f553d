"""aperture.triton across real processes: the from_table scenario over POSIX shared memory.

Each test starts `world` processes. Rank r owns one shared-memory file; every process maps
every rank's file (so each copy lies at a different address in each process) and builds its
own peer table from those addresses, as a user of aperture.from_table does with memory from
another allocator. The kernels then run under Triton's interpreter in the worker processes,
on the GPU machine too: the memory is host memory, which only the interpreter's CPU kernels
can reach. A wrong peer, a wrong offset or a missing acquire/release shows as a wrong value;
every element is checked and values differ per rank and per element.

The files are created with names unique to the test, opened 0600, and unlinked when the test
ends, however it ends; a worker that hangs is killed after TIMEOUT_S seconds.
"""

import mmap
import multiprocessing
import os
import traceback
import uuid

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import DTYPES, only_in_one_rank_jobs, pattern
import triton
import triton.language as tl


import aperture.triton as apt

TIMEOUT_S = 180
REGION = 1 << 16  # bytes per scenario region in each rank's file
N = 200
BLOCK = 64


# ---- kernels -----------------------------------------------------------------------------
# Loop bounds are constexprs: Triton 3.6's interpreter turns a runtime loop bound into a
# Python int through a 1-element array, which NumPy 2.4 refuses.

@triton.jit
def store_and_count_kernel(sym, src, counter, peer_bases, rank, to_rank, n, BLOCK: tl.constexpr):
    # Each program stores its block into to_rank's copy, then raises to_rank's counter with
    # release semantics (a program's signal): the peer waits for all programs' counts.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(sym + offs, tl.load(src + offs, mask=mask), rank, to_rank, peer_bases, mask=mask)
    tl.debug_barrier()
    apt.atomic_add(counter, 1, rank, to_rank, peer_bases, sem="release", scope="sys")


@triton.jit
def wait_kernel(flag, value, seen_out):
    tl.store(seen_out, apt.wait_until_ge(flag, value))


@triton.jit
def ring_kernel(sym, src, out, flag, peer_bases, rank, world, round_no, N: tl.constexpr, BLOCK: tl.constexpr):
    # One program: put my block into the next rank, signal it, wait for the previous rank's
    # signal, read what it put into me. The wait crosses processes.
    next_rank = (rank + 1) % world
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < N
        apt.put(sym + offs, src + offs, rank, next_rank, peer_bases, mask=mask)
    apt.signal(flag, round_no, rank, next_rank, peer_bases)
    apt.wait_until_ge(flag, round_no)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < N
        tl.store(out + offs, tl.load(sym + offs, mask=mask), mask=mask)


@triton.jit
def atomics_to_all_kernel(acc, xor_acc, max_acc, claims, values, peer_bases, rank, WORLD: tl.constexpr, n,
                          BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(values + offs, mask=mask)
    for peer in range(WORLD):
        apt.atomic_add(acc + offs, v, rank, peer, peer_bases, mask=mask)
        apt.atomic_xor(xor_acc + offs, v, rank, peer, peer_bases, mask=mask)
        apt.atomic_max(max_acc + offs, v, rank, peer, peer_bases, mask=mask, sem="relaxed", scope="sys")
    # Every rank tries to claim each of rank 0's slots; exactly one wins each.
    claim = tl.arange(0, BLOCK)
    if tl.program_id(0) == 0:
        apt.atomic_cas(claims + claim, tl.zeros([BLOCK], dtype=tl.int64), tl.zeros([BLOCK], dtype=tl.int64) + rank + 1,
                       rank, 0, peer_bases)


@triton.jit
def one_shot_all_reduce_kernel(inp, out, peer_bases, rank, WORLD: tl.constexpr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for peer in range(WORLD):
        acc += apt.load(inp + offs, rank, peer, peer_bases, mask=mask).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


# ---- the world ---------------------------------------------------------------------------

class Heap:
    """Every rank's file, mapped in this process; region(k, dtype, count) is the same region of
    every rank's copy, as a list of tensors (element r: rank r's copy, at this process's address)."""

    def __init__(self, names, size):
        self.maps = []
        for name in names:
            fd = os.open(os.path.join("/dev/shm", name), os.O_RDWR)
            try:
                self.maps.append(mmap.mmap(fd, size))
            finally:
                os.close(fd)
        self.bytes = [torch.frombuffer(m, dtype=torch.uint8) for m in self.maps]

    def region(self, k, dtype, count, start=0):
        elem = torch.tensor([], dtype=dtype).element_size()
        first = k * REGION + start * elem
        return [b[first:first + count * elem].view(dtype) for b in self.bytes]


def table_of(copies):
    return torch.tensor([c.data_ptr() for c in copies], dtype=torch.int64)


def scenario_store_all_dtypes(heap, rank, world, barrier):
    for k, dtype in enumerate(DTYPES):
        copies = heap.region(k + 1, dtype, N)
        counter = heap.region(0, torch.int64, 1, start=k)
        to_rank = (rank + 1) % world
        src = pattern(rank, N, dtype, salt=k, device="cpu")
        grid = (triton.cdiv(N, BLOCK),)
        # Data and counter lie in one mapping per rank, so one table serves both: build it
        # from the bases of the whole files, as a heap provider's table does.
        bases = table_of(heap.bytes)
        store_and_count_kernel[grid](copies[rank], src, counter[rank], bases, rank, to_rank, N, BLOCK=BLOCK)
        seen = torch.zeros(1, dtype=torch.int64)
        wait_kernel[(1,)](counter[rank], grid[0], seen)
        assert seen.item() == grid[0], f"{dtype}: counter {seen.item()}"
        from_rank = (rank - 1) % world
        expected = pattern(from_rank, N, dtype, salt=k, device="cpu")
        assert torch.equal(copies[rank], expected), f"{dtype}: rank {rank} got the wrong data from rank {from_rank}"


def scenario_ring_rounds(heap, rank, world, barrier):
    bases = table_of(heap.bytes)
    flag = heap.region(0, torch.uint64, 1)
    for round_no in (1, 2, 3):
        # A view: the ring's data starts 5 elements into its region, differently per round.
        copies = heap.region(1, torch.float32, N, start=5 * round_no)
        src = pattern(rank, N, torch.float32, salt=round_no, device="cpu")
        out = torch.zeros(N, dtype=torch.float32)
        ring_kernel[(1,)](copies[rank], src, out, flag[rank], bases, rank, world, round_no, N=N, BLOCK=BLOCK)
        expected = pattern((rank - 1) % world, N, torch.float32, salt=round_no, device="cpu")
        assert torch.equal(out, expected), f"round {round_no}: rank {rank} read the wrong data"
        # The next round overwrites the region: wait until every rank has read this one.
        barrier.wait()


def scenario_atomics(heap, rank, world, barrier):
    bases = table_of(heap.bytes)
    acc = heap.region(1, torch.int64, N)
    xor_acc = heap.region(2, torch.int32, N)
    max_acc = heap.region(3, torch.float32, N)
    claims = heap.region(4, torch.int64, BLOCK)
    barrier.wait()  # every rank's memory is zero before anyone adds
    values = pattern(rank, N, torch.int64, salt=3, device="cpu") * (rank + 1)
    atomics_to_all_kernel[(triton.cdiv(N, BLOCK),)](acc[rank], xor_acc[rank], max_acc[rank], claims[rank],
                                                    values, bases, rank, world, N, BLOCK=BLOCK)
    barrier.wait()  # every rank's atomics are done (interpreted kernels are synchronous)
    every = [pattern(r, N, torch.int64, salt=3, device="cpu") * (r + 1) for r in range(world)]
    assert torch.equal(acc[rank], sum(every))
    expected_xor = torch.zeros(N, dtype=torch.int32)
    for v in every:
        expected_xor ^= v.to(torch.int32)
    assert torch.equal(xor_acc[rank], expected_xor)
    expected_max = torch.stack([v.to(torch.float32) for v in every]).amax(0).clamp(min=0.0)  # memory starts at 0
    assert torch.equal(max_acc[rank], expected_max)
    if rank == 0:
        won = claims[0]
        assert bool(((won >= 1) & (won <= world)).all()), f"claims {won.tolist()}"


def scenario_all_reduce(heap, rank, world, barrier):
    bases = table_of(heap.bytes)
    for k, dtype in enumerate([torch.float32, torch.bfloat16, torch.float16]):
        inp = heap.region(1 + k, dtype, N)
        inp[rank].copy_(pattern(rank, N, dtype, salt=k, device="cpu"))
        barrier.wait()  # every input is written
        out = torch.zeros(N, dtype=dtype)
        one_shot_all_reduce_kernel[(triton.cdiv(N, BLOCK),)](inp[rank], out, bases, rank, world, N, BLOCK=BLOCK)
        expected = sum(pattern(r, N, torch.float32, salt=k, device="cpu") for r in range(world)).to(dtype)
        assert torch.equal(out, expected), f"{dtype}: all-reduce on rank {rank}"


SCENARIOS = {
    "store_all_dtypes": scenario_store_all_dtypes,
    "ring_rounds": scenario_ring_rounds,
    "atomics": scenario_atomics,
    "all_reduce": scenario_all_reduce,
}


def _worker(rank, world, names, size, barrier, results):
    # Every scenario in one world: starting processes (each imports torch and Triton) is what
    # takes the time here. Each scenario uses its own regions, zero at the start.
    try:
        heap = Heap(names, size)
    except BaseException:  # noqa: BLE001 - the parent reports whatever went wrong, with its traceback
        results.put((rank, "mapping the heap", traceback.format_exc()))
        barrier.abort()
        return
    for k, name in enumerate(sorted(SCENARIOS)):
        try:
            SCENARIOS[name](Offset(heap, k * REGIONS_PER_SCENARIO), rank, world, barrier)
            barrier.wait()
            results.put((rank, name, None))
        except BaseException:  # noqa: BLE001
            results.put((rank, name, traceback.format_exc()))
            barrier.abort()
            return


class Offset:
    """A heap whose region k is the underlying heap's region base + k."""

    def __init__(self, heap, base):
        self.heap, self.base, self.bytes = heap, base, heap.bytes

    def region(self, k, dtype, count, start=0):
        return self.heap.region(self.base + k, dtype, count, start)


REGIONS_PER_SCENARIO = 8


def run_world(world):
    size = REGIONS_PER_SCENARIO * len(SCENARIOS) * REGION
    tag = f"aperture-test-triton-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    names = [f"{tag}-r{r}" for r in range(world)]
    ctx = multiprocessing.get_context("spawn")
    procs = []
    try:
        for name in names:
            fd = os.open(os.path.join("/dev/shm", name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
        barrier = ctx.Barrier(world, timeout=TIMEOUT_S)
        results = ctx.Queue()
        # The workers interpret their kernels whatever this process does: spawned children
        # take the environment at start.
        saved = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1"
        try:
            for r in range(world):
                p = ctx.Process(target=_worker, args=(r, world, names, size, barrier, results))
                p.start()
                procs.append(p)
        finally:
            if saved is None:
                del os.environ["TRITON_INTERPRET"]
            else:
                os.environ["TRITON_INTERPRET"] = saved
        passed, failures = set(), []
        while len(passed) < world * len(SCENARIOS) and not failures:
            rank, name, error = results.get(timeout=TIMEOUT_S)
            if error is None:
                passed.add((rank, name))
            else:
                failures.append(f"rank {rank}, {name}:\n{error}")
        assert not failures, "\n".join(failures)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
        for name in names:
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except FileNotFoundError:
                pass
    leftovers = [n for n in os.listdir("/dev/shm") if n.startswith(tag)]
    assert not leftovers, f"shared segments left behind: {leftovers}"


@pytest.mark.parametrize("world", [2, 4])
def test_kernels_across_processes_on_shared_memory(world):
    """Every scenario (stores of every dtype with counted signals, ring rounds with signal and
    wait on views, atomics from every rank into every rank, a one-shot all-reduce)."""
    run_world(world)


only_in_one_rank_jobs(globals())
