"""aperture.iris's device functions, checked against Iris's documented behaviour.

Simulated ranks in one process (as in test_triton_ops): each rank's heap is its own tensor and
the uint64 table holds their addresses, as Iris's get_heap_bases() does. The calls are written
as Iris's docs and tests write them, (..., cur_rank, remote_rank, heap_bases): load(ptr,
cur_rank, remote_rank) reads the remote rank; store/put/atomics(..., cur_rank, remote_rank) act
on the remote rank; get(src, dst, cur_rank, remote_rank) reads the remote rank into local dst;
copy(src, dst, from_rank, to_rank, cur_rank) moves between two ranks.
"""

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import ATOMIC_DTYPES, DEVICE, DTYPES, INTERPRETED, only_in_one_rank_jobs, pattern
import triton
import triton.language as tl


import aperture.iris as iris

WORLD = 2
N = 96
BLOCK = 32
GRID = (triton.cdiv(N, BLOCK),)


def heaps(dtype, n=2 * N, salt=0):
    return [pattern(r, n, dtype, salt=salt + 60, device=DEVICE) for r in range(WORLD)]


def heap_bases(copies):
    return torch.tensor([c.data_ptr() for c in copies], dtype=torch.int64, device=DEVICE).view(torch.uint64)


@triton.jit
def load_kernel(buf, out, heap_bases, cur_rank, remote_rank, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if HINT:
        data = iris.load(buf + offs, cur_rank, remote_rank, heap_bases, mask=mask, hint=16)
    else:
        data = iris.load(buf + offs, cur_rank, remote_rank, heap_bases, mask=mask)
    tl.store(out + offs, data, mask=mask)


@triton.jit
def store_kernel(buf, src, heap_bases, cur_rank, remote_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    iris.store(buf + offs, tl.load(src + offs, mask=mask), cur_rank, remote_rank, heap_bases, mask=mask,
               cache_modifier=".wt")


@triton.jit
def get_put_kernel(buf, local, heap_bases, cur_rank, remote_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # put: my local block into the remote heap's first half; get: the remote heap's second
    # half into my local block's second half.
    iris.put(local + offs, buf + offs, cur_rank, remote_rank, heap_bases, mask=mask)
    iris.get(buf + n + offs, local + n + offs, cur_rank, remote_rank, heap_bases, mask=mask,
             load_cache_modifier=".cg")


@triton.jit
def copy_kernel(buf, heap_bases, from_rank, to_rank, cur_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    iris.copy(buf + offs, buf + n + offs, from_rank, to_rank, cur_rank, heap_bases, mask=mask)


@triton.jit
def translate_kernel(buf, out, heap_bases, from_rank, to_rank):
    tl.store(out, iris.translate(buf, from_rank, to_rank, heap_bases).to(tl.int64, bitcast=True))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_load_reads_the_remote_rank(dtype):
    copies = heaps(dtype)
    for cur_rank in range(WORLD):
        for remote_rank in range(WORLD):
            for hint in (False, True):
                out = torch.zeros(N, dtype=dtype, device=DEVICE)
                load_kernel[GRID](copies[cur_rank], out, heap_bases(copies), cur_rank, remote_rank, N, BLOCK=BLOCK,
                                  HINT=hint)
                assert torch.equal(out, copies[remote_rank][:N]), (cur_rank, remote_rank, hint)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_store_writes_the_remote_rank_only(dtype):
    for cur_rank, remote_rank in [(0, 1), (1, 0), (1, 1)]:
        copies = heaps(dtype)
        before = [c.clone() for c in copies]
        src = pattern(10 + cur_rank, N, dtype, salt=61)
        store_kernel[GRID](copies[cur_rank], src, heap_bases(copies), cur_rank, remote_rank, N, BLOCK=BLOCK)
        expected = before[remote_rank].clone()
        expected[:N] = src
        assert torch.equal(copies[remote_rank], expected)
        for r in range(WORLD):
            if r != remote_rank:
                assert torch.equal(copies[r], before[r])


@pytest.mark.parametrize("dtype", [torch.int8, torch.bfloat16, torch.float32, torch.int64], ids=str)
def test_put_and_get(dtype):
    cur_rank, remote_rank = 0, 1
    copies = heaps(dtype)
    before = [c.clone() for c in copies]
    local = pattern(20, 2 * N, dtype, salt=62)
    local_before = local.clone()
    get_put_kernel[GRID](copies[cur_rank], local, heap_bases(copies), cur_rank, remote_rank, N, BLOCK=BLOCK)
    assert torch.equal(copies[remote_rank][:N], local_before[:N])
    assert torch.equal(copies[remote_rank][N:], before[remote_rank][N:])
    assert torch.equal(local[N:], before[remote_rank][N:])
    assert torch.equal(local[:N], local_before[:N])
    assert torch.equal(copies[cur_rank], before[cur_rank])


@pytest.mark.parametrize("dtype", [torch.float16, torch.int32], ids=str)
def test_copy_between_ranks_in_either_direction(dtype):
    for from_rank, to_rank, cur_rank in [(1, 0, 0), (0, 1, 0), (1, 0, 1)]:
        copies = heaps(dtype)
        before = [c.clone() for c in copies]
        copy_kernel[GRID](copies[cur_rank], heap_bases(copies), from_rank, to_rank, cur_rank, N, BLOCK=BLOCK)
        expected = before[to_rank].clone()
        expected[N:] = before[from_rank][:N]
        assert torch.equal(copies[to_rank], expected), (from_rank, to_rank, cur_rank)
        assert torch.equal(copies[1 - to_rank], before[1 - to_rank])


@pytest.mark.parametrize("dtype", [torch.int8, torch.bfloat16, torch.float32], ids=str)
def test_load_store_copy_are_exact_on_heaps_not_16_byte_congruent(dtype):
    # Rank 1's heap starts one element past a 16-byte boundary, rank 0's on one: the remote
    # accesses take aperture.triton's word path, every element checked.
    elem = torch.tensor([], dtype=dtype).element_size()
    arena = torch.zeros(1024 + 4 * N * elem, dtype=torch.uint8, device=DEVICE)

    def misaligned_heaps(salt):
        starts = [256, 256 + 2 * N * elem + 256 + elem]
        copies = [arena[s:s + 2 * N * elem].view(dtype) for s in starts]
        for r, c in enumerate(copies):
            c.copy_(pattern(r, 2 * N, dtype, salt=salt))
        assert (copies[1].data_ptr() - copies[0].data_ptr()) % 16
        return copies

    copies = misaligned_heaps(70)
    for cur_rank in range(WORLD):
        for remote_rank in range(WORLD):
            out = torch.zeros(N, dtype=dtype, device=DEVICE)
            load_kernel[GRID](copies[cur_rank], out, heap_bases(copies), cur_rank, remote_rank, N, BLOCK=BLOCK,
                              HINT=True)
            assert torch.equal(out, copies[remote_rank][:N]), (cur_rank, remote_rank)
    for cur_rank, remote_rank in [(0, 1), (1, 0)]:
        copies = misaligned_heaps(71)
        before = [c.clone() for c in copies]
        src = pattern(30 + cur_rank, N, dtype, salt=72)
        store_kernel[GRID](copies[cur_rank], src, heap_bases(copies), cur_rank, remote_rank, N, BLOCK=BLOCK)
        expected = before[remote_rank].clone()
        expected[:N] = src
        assert torch.equal(copies[remote_rank], expected), (cur_rank, remote_rank)
        assert torch.equal(copies[cur_rank], before[cur_rank])
    for from_rank, to_rank, cur_rank in [(1, 0, 0), (0, 1, 0), (1, 0, 1)]:
        copies = misaligned_heaps(73)
        before = [c.clone() for c in copies]
        copy_kernel[GRID](copies[cur_rank], heap_bases(copies), from_rank, to_rank, cur_rank, N, BLOCK=BLOCK)
        expected = before[to_rank].clone()
        expected[N:] = before[from_rank][:N]
        assert torch.equal(copies[to_rank], expected), (from_rank, to_rank, cur_rank)
        assert torch.equal(copies[1 - to_rank], before[1 - to_rank])


def test_translate_maps_into_the_other_heap():
    copies = heaps(torch.float32)
    out = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    for offset in (0, 17):
        translate_kernel[(1,)](copies[0][offset:], out, heap_bases(copies), 0, 1)
        assert out.item() == copies[1][offset:].data_ptr()


@triton.jit
def atomic_kernel(buf, values, old_out, heap_bases, cur_rank, remote_rank, n, OP: tl.constexpr, SEM: tl.constexpr,
                  SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(values + offs, mask=mask)
    p = buf + offs
    if OP == "add":
        old = iris.atomic_add(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "sub":
        old = iris.atomic_sub(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = iris.atomic_and(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = iris.atomic_or(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = iris.atomic_xor(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = iris.atomic_min(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = iris.atomic_max(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    else:
        old = iris.atomic_xchg(p, v, cur_rank, remote_rank, heap_bases, mask=mask, sem=SEM, scope=SCOPE)
    tl.store(old_out + offs, old, mask=mask)


@triton.jit
def cas_kernel(buf, cmp, values, old_out, heap_bases, cur_rank, remote_rank, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = iris.atomic_cas(buf + offs, tl.load(cmp + offs), tl.load(values + offs), cur_rank, remote_rank, heap_bases)
    tl.store(old_out + offs, old)


def apply(op, old, v):
    return {
        "add": lambda: old + v, "sub": lambda: old - v, "and": lambda: old & v, "or": lambda: old | v,
        "xor": lambda: old ^ v, "min": lambda: torch.minimum(old, v), "max": lambda: torch.maximum(old, v),
        "xchg": lambda: v.clone(),
    }[op]()


@pytest.mark.parametrize("op,dtype", [(op, d) for op in ["add", "sub", "and", "or", "xor", "min", "max", "xchg"]
                                      for d in ATOMIC_DTYPES[op]], ids=str)
def test_atomics_on_the_remote_rank(op, dtype):
    # sem/scope as Iris callers pass them: left out (None), or named.
    for sem, scope in [(None, None), ("relaxed", "gpu"), ("acq_rel", "sys"), ("release", "cta")]:
        copies = heaps(dtype, n=N)
        before = [c.clone() for c in copies]
        values = pattern(30, N, dtype, salt=63)
        old = torch.zeros(N, dtype=dtype, device=DEVICE)
        atomic_kernel[GRID](copies[0], values, old, heap_bases(copies), 0, 1, N, OP=op, SEM=sem, SCOPE=scope,
                            BLOCK=BLOCK)
        assert torch.equal(old, before[1]), (op, sem, scope)
        assert torch.equal(copies[1], apply(op, before[1], values)), (op, sem, scope)
        assert torch.equal(copies[0], before[0])


@pytest.mark.parametrize("dtype", ATOMIC_DTYPES["cas"], ids=str)
def test_atomic_cas_on_the_remote_rank(dtype):
    n = 32
    copies = heaps(dtype, n=n)
    target = copies[1].clone()
    cmp = target.clone()
    cmp[::3] -= 1  # every third lane expects a wrong value
    values = pattern(40, n, dtype, salt=64)
    old = torch.zeros(n, dtype=dtype, device=DEVICE)
    cas_kernel[(1,)](copies[0], cmp, values, old, heap_bases(copies), 0, 1, BLOCK=n)
    expected = values.clone()
    expected[::3] = target[::3]
    assert torch.equal(old, target) and torch.equal(copies[1], expected)


@triton.jit
def amd_tuned_kernel(buf, heap_bases, cur_rank, remote_rank, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    iris.store(buf + offs, offs, cur_rank, remote_rank, heap_bases)


def test_amd_only_launch_options_are_dropped_on_nvidia():
    assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= iris._launch_options.AMD_ONLY_OPTIONS
    copies = heaps(torch.int32, n=64)
    before = copies[0].clone()
    # Compiled, Triton's NVIDIA backend would refuse these options; the interpreter ignores them.
    amd_tuned_kernel[(1,)](copies[0], heap_bases(copies), 0, 1, BLOCK=64, waves_per_eu=2, matrix_instr_nonkdim=16,
                           kpack=2)
    assert torch.equal(copies[1], torch.arange(64, dtype=torch.int32, device=DEVICE))
    assert torch.equal(copies[0], before)
    if not INTERPRETED:
        from triton.runtime.jit import JITFunction
        assert getattr(JITFunction.run, "_aperture_iris_drops_amd_options", False)


only_in_one_rank_jobs(globals())
