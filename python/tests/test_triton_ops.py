"""aperture.triton in one process, over simulated ranks.

Each simulated rank's "copy" of an allocation is its own tensor, and the table holds their
addresses, so a kernel that reaches the wrong peer or the wrong offset reads or writes a wrong
value. Every element is checked; values differ per rank and per element. Runs on the GPU when
there is one, otherwise under Triton's interpreter on CPU tensors.
"""

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import ATOMIC_DTYPES, DEVICE, DTYPES, only_in_one_rank_jobs, pattern, table
import triton
import triton.language as tl


import aperture.triton as apt

WORLD = 3
N = 100  # not a multiple of BLOCK: the last block is masked
BLOCK = 32
GRID = (triton.cdiv(N, BLOCK),)


@triton.jit
def store_kernel(sym, src, peer_bases, from_rank, to_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(sym + offs, tl.load(src + offs, mask=mask), from_rank, to_rank, peer_bases, mask=mask)


@triton.jit
def load_kernel(sym, out, peer_bases, from_rank, to_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, apt.load(sym + offs, from_rank, to_rank, peer_bases, mask=mask), mask=mask)


@triton.jit
def translate_kernel(sym, out, peer_bases, from_rank, to_rank):
    # The translated address, as an integer, so the test can compare it with the peer's.
    tl.store(out, apt.translate(sym, from_rank, to_rank, peer_bases).to(tl.int64, bitcast=True))


@triton.jit
def put_get_kernel(sym, local_src, local_dst, peer_bases, from_rank, to_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.put(sym + offs, local_src + offs, from_rank, to_rank, peer_bases, mask=mask)
    apt.get(local_dst + offs, sym + n + offs, from_rank, to_rank, peer_bases, mask=mask)


@triton.jit
def copy_kernel(sym, peer_bases, src_rank, dst_rank, cur_rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.copy(sym + n + offs, sym + offs, src_rank, dst_rank, cur_rank, peer_bases, mask=mask)


@triton.jit
def two_tables_kernel(a, a_bases, b, b_bases, from_rank, to_rank, n, BLOCK: tl.constexpr):
    # Reads to_rank's copy of allocation a and writes it, plus one, into to_rank's copy of b.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = apt.load(a + offs, from_rank, to_rank, a_bases, mask=mask)
    apt.store(b + offs, x + 1, from_rank, to_rank, b_bases, mask=mask)


@triton.jit
def promised_kernel(sym, local_src, local_src2, local_dst, peer_bases, from_rank, to_rank, n, BLOCK: tl.constexpr):
    # Every operation that takes congruent=True, on a table whose copies are congruent: store
    # local_src into to_rank's [0, n), load its [n, 2n), put local_src2 into its [2n, 3n), get
    # its [3n, 4n), then copy to_rank's [3n, 4n) over the caller's own [4n, 5n).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(sym + offs, tl.load(local_src + offs, mask=mask), from_rank, to_rank, peer_bases, mask=mask,
              congruent=True)
    tl.store(local_dst + offs, apt.load(sym + n + offs, from_rank, to_rank, peer_bases, mask=mask, congruent=True),
             mask=mask)
    apt.put(sym + 2 * n + offs, local_src2 + offs, from_rank, to_rank, peer_bases, mask=mask, congruent=True)
    apt.get(local_dst + n + offs, sym + 3 * n + offs, from_rank, to_rank, peer_bases, mask=mask, congruent=True)
    apt.copy(sym + 4 * n + offs, sym + 3 * n + offs, to_rank, from_rank, from_rank, peer_bases, mask=mask,
             congruent=True)


def simulated_copies(dtype, n=N, salt=0, device=DEVICE):
    return [pattern(r, n, dtype, salt=salt + 100, device=device) for r in range(WORLD)]


def rank_pairs():
    return [(f, t) for f in range(WORLD) for t in range(WORLD)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_store_reaches_exactly_the_target_copy(dtype):
    for from_rank, to_rank in rank_pairs():
        copies = simulated_copies(dtype)
        before = [c.clone() for c in copies]
        src = pattern(from_rank * WORLD + to_rank, N, dtype, salt=1)
        store_kernel[GRID](copies[from_rank], src, table(copies), from_rank, to_rank, N, BLOCK=BLOCK)
        for r in range(WORLD):
            expected = src if r == to_rank else before[r]
            assert torch.equal(copies[r], expected), f"store {from_rank}->{to_rank}: rank {r}'s copy"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_load_reads_the_target_copy(dtype):
    copies = simulated_copies(dtype)
    for from_rank, to_rank in rank_pairs():
        out = torch.full((N + 5,), 99, dtype=dtype, device=DEVICE)
        load_kernel[GRID](copies[from_rank], out, table(copies), from_rank, to_rank, N, BLOCK=BLOCK)
        assert torch.equal(out[:N], copies[to_rank]), f"load {from_rank}->{to_rank}"
        assert torch.equal(out[N:], torch.full((5,), 99, dtype=dtype, device=DEVICE)), "masked lanes wrote"


def test_translate_maps_the_offset_into_each_peer():
    copies = simulated_copies(torch.float32)
    out = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    for from_rank, to_rank in rank_pairs():
        for offset in (0, 1, 37):
            translate_kernel[(1,)](copies[from_rank][offset:], out, table(copies), from_rank, to_rank)
            assert out.item() == copies[to_rank][offset:].data_ptr()


@pytest.mark.parametrize("dtype", [torch.int8, torch.bfloat16, torch.float32, torch.int64], ids=str)
def test_views_translate_by_their_offset(dtype):
    # The kernel receives a view that starts 13 elements into the caller's copy; the write must
    # land 13 elements into the target's copy and nowhere else.
    total, start, n = 160, 13, 71
    for from_rank, to_rank in [(0, 1), (2, 0), (1, 1)]:
        copies = simulated_copies(dtype, n=total)
        before = [c.clone() for c in copies]
        src = pattern(to_rank, n, dtype, salt=5)
        store_kernel[(triton.cdiv(n, BLOCK),)](copies[from_rank][start:], src, table(copies), from_rank, to_rank, n,
                                               BLOCK=BLOCK)
        expected = before[to_rank].clone()
        expected[start:start + n] = src
        assert torch.equal(copies[to_rank], expected)
        for r in range(WORLD):
            if r != to_rank:
                assert torch.equal(copies[r], before[r])


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64], ids=str)
def test_copies_aligned_differently_take_the_unaligned_path_and_stay_exact(dtype):
    # Peer copies whose distance is a multiple of the element size but not of 16 bytes: the
    # translation may not claim vector alignment, and every element must still be right.
    elem = torch.tensor([], dtype=dtype).element_size()
    arena = torch.zeros(4096, dtype=torch.uint8, device=DEVICE)
    copies = []
    for r in range(WORLD):
        first = 256 * (r + 1) + elem * (r + 1)  # rank r's copy starts (r+1) elements past a 256-byte boundary
        view = arena[first:first + N * elem].view(dtype)
        view.copy_(pattern(r, N, dtype, salt=8))
        copies.append(view)
    deltas = {(copies[t].data_ptr() - copies[f].data_ptr()) % 16 for f, t in rank_pairs() if f != t}
    assert deltas - {0}, "the layout must produce peers that are not 16-byte congruent"
    for from_rank, to_rank in rank_pairs():
        out = torch.zeros(N, dtype=dtype, device=DEVICE)
        load_kernel[GRID](copies[from_rank], out, table(copies), from_rank, to_rank, N, BLOCK=BLOCK)
        assert torch.equal(out, copies[to_rank])
    src = pattern(7, N, dtype, salt=9)
    store_kernel[GRID](copies[0], src, table(copies), 0, 2, N, BLOCK=BLOCK)
    assert torch.equal(copies[2], src)


def incongruent_copies(dtype, n, salt):
    """Rank r's copy starts (r + 1) elements past a 256-byte boundary of one arena, so two
    ranks' copies are a whole number of elements apart and, but for int64's ranks 0 and 2
    (16 bytes apart), not 16-byte congruent."""
    elem = torch.tensor([], dtype=dtype).element_size()
    arena = torch.zeros(256 * (WORLD + 1) + n * elem * WORLD, dtype=torch.uint8, device=DEVICE)
    copies = []
    for r in range(WORLD):
        first = 256 * (r + 1) + n * elem * r + elem * (r + 1)
        view = arena[first:first + n * elem].view(dtype)
        view.copy_(pattern(r, n, dtype, salt=salt))
        copies.append(view)
    incongruent = {(f, t) for f, t in rank_pairs() if (copies[t].data_ptr() - copies[f].data_ptr()) % 16}
    assert incongruent >= {(0, 1), (1, 0), (1, 2), (2, 1)}, incongruent
    return arena, copies


@pytest.mark.parametrize("dtype", [torch.int8, torch.bfloat16, torch.float32, torch.int64], ids=str)
def test_store_put_get_copy_are_exact_between_copies_not_16_byte_congruent(dtype):
    # Two ranks' copies take the word path (load/store's other branch), the caller's own copy
    # the vector one; every element of every copy is checked after each kernel.
    for from_rank, to_rank in rank_pairs():
        arena, copies = incongruent_copies(dtype, 2 * N, salt=30)
        before = [c.clone() for c in copies]
        src = pattern(from_rank * WORLD + to_rank, N, dtype, salt=31)
        store_kernel[GRID](copies[from_rank], src, table(copies), from_rank, to_rank, N, BLOCK=BLOCK)
        for r in range(WORLD):
            expected = before[r].clone()
            if r == to_rank:
                expected[:N] = src
            assert torch.equal(copies[r], expected), f"store {from_rank}->{to_rank}: rank {r}'s copy"

        arena, copies = incongruent_copies(dtype, 2 * N, salt=32)
        before = [c.clone() for c in copies]
        local_src = pattern(60 + from_rank, N, dtype, salt=33)
        local_dst = torch.zeros(N, dtype=dtype, device=DEVICE)
        put_get_kernel[GRID](copies[from_rank], local_src, local_dst, table(copies), from_rank, to_rank, N,
                             BLOCK=BLOCK)
        assert torch.equal(local_dst, before[to_rank][N:]), f"get {from_rank}->{to_rank}"
        for r in range(WORLD):
            expected = before[r].clone()
            if r == to_rank:
                expected[:N] = local_src
            assert torch.equal(copies[r], expected), f"put {from_rank}->{to_rank}: rank {r}'s copy"

    for src_rank, dst_rank, cur_rank in [(0, 1, 0), (2, 0, 0), (1, 1, 1), (2, 1, 0), (0, 2, 1)]:
        arena, copies = incongruent_copies(dtype, 2 * N, salt=34)
        before = [c.clone() for c in copies]
        copy_kernel[GRID](copies[cur_rank], table(copies), src_rank, dst_rank, cur_rank, N, BLOCK=BLOCK)
        for r in range(WORLD):
            expected = before[r].clone()
            if r == dst_rank:
                expected[N:] = before[src_rank][:N]
            assert torch.equal(copies[r], expected), (src_rank, dst_rank, cur_rank, r)


@pytest.mark.parametrize("dtype", [torch.int8, torch.bfloat16, torch.float32, torch.int64], ids=str)
def test_congruent_true_gives_the_same_results_on_congruent_copies(dtype):
    for from_rank, to_rank in rank_pairs():
        copies = simulated_copies(dtype, n=5 * N, salt=from_rank * WORLD + to_rank)
        assert len({c.data_ptr() % 16 for c in copies}) == 1, "the simulated copies must be 16-byte congruent"
        before = [c.clone() for c in copies]
        local_src = pattern(60 + to_rank, N, dtype, salt=from_rank)
        local_src2 = pattern(70 + to_rank, N, dtype, salt=from_rank)
        local_dst = torch.zeros(2 * N, dtype=dtype, device=DEVICE)
        promised_kernel[GRID](copies[from_rank], local_src, local_src2, local_dst, table(copies), from_rank, to_rank,
                              N, BLOCK=BLOCK)
        expected = [b.clone() for b in before]
        expected[to_rank][:N] = local_src
        expected[to_rank][2 * N:3 * N] = local_src2
        expected[from_rank][4 * N:] = before[to_rank][3 * N:4 * N]  # no operation above touched [3n, 4n)
        for r in range(WORLD):
            assert torch.equal(copies[r], expected[r]), (from_rank, to_rank, r)
        assert torch.equal(local_dst[:N], expected[to_rank][N:2 * N]), (from_rank, to_rank)
        assert torch.equal(local_dst[N:], before[to_rank][3 * N:4 * N]), (from_rank, to_rank)


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.int32], ids=str)
def test_put_and_get_move_blocks_between_the_caller_and_the_target(dtype):
    from_rank, to_rank = 1, 2
    copies = simulated_copies(dtype, n=2 * N)
    before = [c.clone() for c in copies]
    local_src = pattern(50, N, dtype, salt=2)
    local_dst = torch.zeros(N, dtype=dtype, device=DEVICE)
    put_get_kernel[GRID](copies[from_rank], local_src, local_dst, table(copies), from_rank, to_rank, N, BLOCK=BLOCK)
    assert torch.equal(copies[to_rank][:N], local_src)  # put landed in the target's first half
    assert torch.equal(copies[to_rank][N:], before[to_rank][N:])
    assert torch.equal(local_dst, before[to_rank][N:])  # get read the target's second half
    for r in (0, 1):
        assert torch.equal(copies[r], before[r])


def test_copy_moves_between_two_peers_neither_of_which_need_be_the_caller_side():
    dtype = torch.float32
    for src_rank, dst_rank, cur_rank in [(0, 1, 0), (2, 0, 0), (1, 1, 1), (2, 1, 0)]:
        copies = simulated_copies(dtype, n=2 * N)
        before = [c.clone() for c in copies]
        copy_kernel[GRID](copies[cur_rank], table(copies), src_rank, dst_rank, cur_rank, N, BLOCK=BLOCK)
        expected = before[dst_rank].clone()
        expected[N:] = before[src_rank][:N]
        assert torch.equal(copies[dst_rank], expected), (src_rank, dst_rank, cur_rank)
        for r in range(WORLD):
            if r != dst_rank:
                assert torch.equal(copies[r], before[r])


def test_two_allocations_tables_in_one_kernel():
    a = simulated_copies(torch.int32, salt=20)
    # b's copies live in one arena at different spacing from a's, so the two tables differ.
    arena = torch.zeros(WORLD * 3 * N, dtype=torch.int32, device=DEVICE)
    b = [arena[(3 * r + 1) * N:(3 * r + 2) * N] for r in range(WORLD)]
    for r in range(WORLD):
        b[r].copy_(pattern(r, N, torch.int32, salt=21))
    b_before = [x.clone() for x in b]
    two_tables_kernel[GRID](a[0], table(a), b[0], table(b), 0, 2, N, BLOCK=BLOCK)
    assert torch.equal(b[2], a[2] + 1)
    assert torch.equal(b[0], b_before[0]) and torch.equal(b[1], b_before[1])


# ---- atomics ---------------------------------------------------------------------------------

@triton.jit
def atomic_kernel(sym, values, old_out, peer_bases, from_rank, to_rank, n, OP: tl.constexpr, SEM: tl.constexpr,
                  SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(values + offs, mask=mask)
    p = sym + offs
    if OP == "add":
        old = apt.atomic_add(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "sub":
        old = apt.atomic_sub(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = apt.atomic_and(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = apt.atomic_or(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = apt.atomic_xor(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = apt.atomic_min(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = apt.atomic_max(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    else:
        old = apt.atomic_xchg(p, v, from_rank, to_rank, peer_bases, mask=mask, sem=SEM, scope=SCOPE)
    tl.store(old_out + offs, old, mask=mask)


@triton.jit
def atomic_default_kernel(sym, values, old_out, peer_bases, from_rank, to_rank, n, BLOCK: tl.constexpr):
    # The defaults (acq_rel, sys) without naming them.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    old = apt.atomic_add(sym + offs, tl.load(values + offs, mask=mask), from_rank, to_rank, peer_bases, mask=mask)
    tl.store(old_out + offs, old, mask=mask)


@triton.jit
def cas_kernel(sym, cmp, values, old_out, peer_bases, from_rank, to_rank, SEM: tl.constexpr, SCOPE: tl.constexpr,
               BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = apt.atomic_cas(sym + offs, tl.load(cmp + offs), tl.load(values + offs), from_rank, to_rank, peer_bases,
                         sem=SEM, scope=SCOPE)
    tl.store(old_out + offs, old)


def reference(op, old, v):
    if op == "add":
        return old + v
    if op == "sub":
        return old - v
    if op == "and":
        return old & v
    if op == "or":
        return old | v
    if op == "xor":
        return old ^ v
    if op == "min":
        return torch.minimum(old, v)
    if op == "max":
        return torch.maximum(old, v)
    return v.clone()


ATOMIC_CASES = [(op, dtype) for op in ["add", "sub", "and", "or", "xor", "min", "max", "xchg"]
                for dtype in ATOMIC_DTYPES[op]]
SEM_SCOPE = [("relaxed", "gpu"), ("acquire", "cta"), ("release", "sys"), ("acq_rel", "sys")]


@pytest.mark.parametrize("op,dtype", ATOMIC_CASES, ids=lambda x: str(x))
def test_atomic_applies_at_the_target_and_returns_the_old_values(op, dtype):
    from_rank, to_rank = 2, 1
    for sem, scope in SEM_SCOPE:
        copies = simulated_copies(dtype, salt=30)
        before = [c.clone() for c in copies]
        values = pattern(9, N, dtype, salt=31)
        old = torch.zeros(N, dtype=dtype, device=DEVICE)
        atomic_kernel[GRID](copies[from_rank], values, old, table(copies), from_rank, to_rank, N, OP=op, SEM=sem,
                            SCOPE=scope, BLOCK=BLOCK)
        assert torch.equal(old, before[to_rank]), f"{op} {sem}/{scope}: old values"
        assert torch.equal(copies[to_rank], reference(op, before[to_rank], values)), f"{op} {sem}/{scope}"
        for r in range(WORLD):
            if r != to_rank:
                assert torch.equal(copies[r], before[r])


def test_atomics_without_order_or_scope_apply_at_the_target():
    # Values only: that the defaults are acq_rel at system scope is read from the PTX in
    # test_triton_codegen.py (test_atomics_default_to_acq_rel_at_system_scope_and_honour_what_is_asked).
    copies = simulated_copies(torch.int64, salt=40)
    before = [c.clone() for c in copies]
    values = pattern(3, N, torch.int64, salt=41)
    old = torch.zeros(N, dtype=torch.int64, device=DEVICE)
    atomic_default_kernel[GRID](copies[0], values, old, table(copies), 0, 2, N, BLOCK=BLOCK)
    assert torch.equal(old, before[2]) and torch.equal(copies[2], before[2] + values)


@pytest.mark.parametrize("dtype", ATOMIC_DTYPES["cas"], ids=str)
def test_atomic_cas_swaps_exactly_where_the_expected_value_matches(dtype):
    from_rank, to_rank, n = 0, 2, 32
    for sem, scope in SEM_SCOPE:
        copies = simulated_copies(dtype, n=n, salt=50)
        target_before = copies[to_rank].clone()
        cmp = target_before.clone()
        cmp[1::2] += 1  # odd lanes expect a wrong value and must not swap
        values = pattern(11, n, dtype, salt=51)
        old = torch.zeros(n, dtype=dtype, device=DEVICE)
        cas_kernel[(1,)](copies[from_rank], cmp, values, old, table(copies), from_rank, to_rank, SEM=sem, SCOPE=scope,
                         BLOCK=n)
        expected = target_before.clone()
        expected[0::2] = values[0::2]
        assert torch.equal(old, target_before)
        assert torch.equal(copies[to_rank], expected)


def test_a_uint64_table_works_like_an_int64_one():
    # Iris hands kernels a uint64 table; the device functions read either.
    copies = simulated_copies(torch.float32)
    out = torch.zeros(N, dtype=torch.float32, device=DEVICE)
    load_kernel[GRID](copies[0], out, table(copies).view(torch.uint64), 0, 1, N, BLOCK=BLOCK)
    assert torch.equal(out, copies[1])


# ---- signal / wait ---------------------------------------------------------------------------

@triton.jit
def signal_kernel(flags, peer_bases, from_rank, to_rank, value):
    apt.signal(flags, value, from_rank, to_rank, peer_bases)


@triton.jit
def wait_kernel(flag, value, seen_out):
    tl.store(seen_out, apt.wait_until_ge(flag, value))


def test_signal_sets_the_target_flag_and_wait_returns_the_value_seen():
    flags = [torch.full((2,), 1000 + r, dtype=torch.uint64, device=DEVICE) for r in range(WORLD)]
    signal_kernel[(1,)](flags[0], table(flags), 0, 2, 5)
    assert [f.tolist() for f in flags] == [[1000, 1000], [1001, 1001], [5, 1002]]
    seen = torch.zeros(1, dtype=torch.uint64, device=DEVICE)
    wait_kernel[(1,)](flags[1], 1001, seen)  # already there: returns at once with the value seen
    assert seen.item() == 1001
    wait_kernel[(1,)](flags[2], 3, seen)
    assert seen.item() == 5


only_in_one_rank_jobs(globals())
