"""Iris's device API between the ranks of the job: every module-level device function and every
DeviceContext method, from every rank to every rank (itself included), every element checked,
and the fused all_reduce_rmsnorm against torch's unfused reference. Kernels run compiled on a
GPU heap and under Triton's interpreter on the shm heap (CI, at 1, 2 and 4 ranks)."""

import contextlib
import re
import time

import pytest
import torch
# triton_world before triton: it decides whether Triton interprets this process's kernels.
from triton_world import INTERPRETED, pattern
import triton
import triton.language as tl

import aperture
import aperture.iris as iris
from aperture.iris._device_context import DeviceContext, device_context
from aperture.iris import _amd, _device
from aperture.iris.ccl import _fused

pytestmark = pytest.mark.iris

HEAP = 4 << 20
N = 64


@pytest.fixture(scope="module")
def shmem(team):
    return iris.iris(HEAP, team=team)


@contextlib.contextmanager
def raises_saying(pattern):
    """pytest.raises(Exception, match=pattern) over the exception and its causes: Triton's compiler
    reports a static_assert as a CompilationError whose own text is the source location, with the
    message in its cause (the interpreter raises the message itself)."""
    with pytest.raises(Exception) as raised:
        yield raised
    texts, error = [], raised.value
    while error is not None:
        texts.append(str(error))
        error = error.__cause__ or error.__context__
    assert any(re.search(pattern, text) for text in texts), f"no {pattern!r} in {texts}"


def on_device(shmem):
    dev = shmem.get_device()
    return torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext()


def slots(shmem, dtype, fill=0):
    """A heap buffer with one N-element slot per rank, every element ``fill``."""
    return shmem.full((shmem.get_num_ranks() * N,), fill, dtype=dtype)


@triton.jit
def moves_kernel(ctxt, heap_bases, data, loaded, inbox, got, put_box, pulled, pushed, RANK: tl.constexpr,
                 WORLD: tl.constexpr, N: tl.constexpr, OO: tl.constexpr):
    # For every peer p (this rank included): load p's data into slot p of loaded, store this
    # rank's data into slot RANK of p's inbox, get p's data into slot p of got, put this rank's
    # data into slot RANK of p's put_box, copy p's data into slot p of pulled (p -> here) and this
    # rank's into slot RANK of p's pushed (here -> p). Half the lanes are masked out.
    offs = tl.arange(0, N)
    mask = offs % 2 == 0
    ctx = DeviceContext.initialize(ctxt, RANK, WORLD)
    mine = tl.load(data + offs)
    for p in tl.static_range(WORLD):
        if OO:
            tl.store(loaded + p * N + offs, ctx.load(data + offs, p, mask=mask, other=-1))
            ctx.store(inbox + RANK * N + offs, mine, to_rank=p, mask=mask)
            ctx.get(data + offs, got + p * N + offs, from_rank=p, mask=mask)
            ctx.put(data + offs, put_box + RANK * N + offs, to_rank=p, mask=mask)
            ctx.copy(data + offs, pulled + p * N + offs, from_rank=p, to_rank=RANK, mask=mask)
            ctx.copy(data + offs, pushed + RANK * N + offs, from_rank=RANK, to_rank=p, mask=mask)
        else:
            tl.store(loaded + p * N + offs, iris.load(data + offs, RANK, p, heap_bases, mask=mask, other=-1))
            iris.store(inbox + RANK * N + offs, mine, RANK, p, heap_bases, mask=mask)
            iris.get(data + offs, got + p * N + offs, RANK, p, heap_bases, mask=mask)
            iris.put(data + offs, put_box + RANK * N + offs, RANK, p, heap_bases, mask=mask)
            iris.copy(data + offs, pulled + p * N + offs, p, RANK, RANK, heap_bases, mask=mask)
            iris.copy(data + offs, pushed + RANK * N + offs, RANK, p, RANK, heap_bases, mask=mask)


@pytest.mark.parametrize("oo", [False, True], ids=["functions", "DeviceContext"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.int32], ids=str)
def test_loads_stores_and_copies_between_every_pair_of_ranks(shmem, team, dtype, oo):
    rank, world, dev = shmem.get_rank(), shmem.get_num_ranks(), shmem.get_device()
    data = shmem.zeros(N, dtype=dtype)
    data.copy_(pattern(rank, N, dtype, device=dev))
    sentinel = 99
    bufs = [slots(shmem, dtype, sentinel) for _ in range(6)]
    shmem.barrier()
    with on_device(shmem):
        moves_kernel[(1,)](device_context(shmem), shmem.get_heap_bases(), data, *bufs, RANK=rank, WORLD=world, N=N,
                           OO=oo)
    shmem.barrier()
    loaded, inbox, got, put_box, pulled, pushed = bufs
    even = torch.arange(N, device=dev) % 2 == 0
    for q in range(world):
        want = pattern(q, N, dtype, device=dev)
        read = torch.where(even, want, torch.full_like(want, -1))      # other=-1 in the masked lanes
        kept = torch.where(even, want, torch.full_like(want, sentinel))  # masked lanes not written
        s = slice(q * N, (q + 1) * N)
        if INTERPRETED and dtype == torch.bfloat16:
            # Triton 3.6's interpreter fills a masked bf16 load's other lanes with NaN (its
            # bf16 emulation); compiled kernels give `other`: the GPU run checks those lanes.
            read, loaded_q = read[even], loaded[s][even]
        else:
            loaded_q = loaded[s]
        assert torch.equal(loaded_q, read), f"load from rank {q}"
        assert torch.equal(got[s], kept), f"get from rank {q}"
        assert torch.equal(pulled[s], kept), f"copy from rank {q}"
        assert torch.equal(inbox[s], kept), f"store by rank {q}"
        assert torch.equal(put_box[s], kept), f"put by rank {q}"
        assert torch.equal(pushed[s], kept), f"copy to here by rank {q}"


@triton.jit
def atomics_kernel(ctxt, heap_bases, adds, subs, ands, ors, xors, mins, maxs, xchgs, xchg_old, cass, cas_old,
                   RANK: tl.constexpr, WORLD: tl.constexpr, N: tl.constexpr, OO: tl.constexpr):
    # Every rank applies each atomic to every rank's buffer; values depend on the rank and the
    # element. xchg and cas act on this rank's own slot of the peer's buffer and return what was
    # there (the owner's initial values), kept in slot p of xchg_old / cas_old.
    i = tl.arange(0, N)
    mask = i < N - 3
    ctx = DeviceContext.initialize(ctxt, RANK, WORLD)
    v = i * 7 + RANK * 1000 + 1
    bit = tl.full((N,), 1, tl.int32) << ((i + RANK) % 31)
    for p in tl.static_range(WORLD):
        mine = RANK * N + i
        if OO:
            ctx.atomic_add(adds + i, v, p, mask=mask)
            ctx.atomic_sub(subs + i, v, p, mask=mask)
            ctx.atomic_and(ands + i, ~bit, p, mask=mask)
            ctx.atomic_or(ors + i, bit, p, mask=mask)
            ctx.atomic_xor(xors + i, bit, p, mask=mask)
            ctx.atomic_min(mins + i, (i * 13 + RANK * 37) % 101, p, mask=mask, sem="relaxed", scope="gpu")
            ctx.atomic_max(maxs + i, (i * 13 + RANK * 37) % 101, p, mask=mask, sem="acq_rel", scope="sys")
            tl.store(xchg_old + p * N + i, ctx.atomic_xchg(xchgs + mine, v, p, mask=mask), mask=mask)
            tl.store(cas_old + p * N + i, ctx.atomic_cas(cass + mine, p * 100 + i, v, p))
        else:
            iris.atomic_add(adds + i, v, RANK, p, heap_bases, mask=mask)
            iris.atomic_sub(subs + i, v, RANK, p, heap_bases, mask=mask)
            iris.atomic_and(ands + i, ~bit, RANK, p, heap_bases, mask=mask)
            iris.atomic_or(ors + i, bit, RANK, p, heap_bases, mask=mask)
            iris.atomic_xor(xors + i, bit, RANK, p, heap_bases, mask=mask)
            iris.atomic_min(mins + i, (i * 13 + RANK * 37) % 101, RANK, p, heap_bases, mask=mask, sem="relaxed",
                            scope="gpu")
            iris.atomic_max(maxs + i, (i * 13 + RANK * 37) % 101, RANK, p, heap_bases, mask=mask, sem="acq_rel",
                            scope="sys")
            tl.store(xchg_old + p * N + i, iris.atomic_xchg(xchgs + mine, v, RANK, p, heap_bases, mask=mask),
                     mask=mask)
            tl.store(cas_old + p * N + i, iris.atomic_cas(cass + mine, p * 100 + i, v, RANK, p, heap_bases))


@pytest.mark.parametrize("oo", [False, True], ids=["functions", "DeviceContext"])
def test_every_atomic_from_every_rank_to_every_rank(shmem, team, oo):
    rank, world, dev = shmem.get_rank(), shmem.get_num_ranks(), shmem.get_device()
    i32 = torch.int32
    i = torch.arange(N, dtype=torch.int64, device=dev)
    owner = rank * 100 + i  # what each slot of xchgs / cass starts with on this rank
    adds, subs = shmem.full((N,), 5, dtype=i32), shmem.full((N,), 5, dtype=i32)
    ands, ors, xors = shmem.full((N,), -1, dtype=i32), shmem.zeros(N, dtype=i32), shmem.zeros(N, dtype=i32)
    mins, maxs = shmem.full((N,), 1000, dtype=i32), shmem.full((N,), -1000, dtype=i32)
    xchgs, cass = slots(shmem, i32), slots(shmem, i32)
    xchgs.copy_(owner.repeat(world).to(i32))
    cass.copy_(owner.repeat(world).to(i32))
    xchg_old, cas_old = slots(shmem, i32, -7), slots(shmem, i32, -7)
    shmem.barrier()
    with on_device(shmem):
        atomics_kernel[(1,)](device_context(shmem), shmem.get_heap_bases(), adds, subs, ands, ors, xors, mins, maxs,
                             xchgs, xchg_old, cass, cas_old, RANK=rank, WORLD=world, N=N, OO=oo)
    shmem.barrier()
    live = i < N - 3
    v = [i * 7 + q * 1000 + 1 for q in range(world)]
    bits = [torch.ones_like(i) << ((i + q) % 31) for q in range(world)]
    keyed = [(i * 13 + q * 37) % 101 for q in range(world)]

    def where(value, otherwise):
        return torch.where(live, value, torch.as_tensor(otherwise, device=dev).expand_as(i)).to(i32)

    assert torch.equal(adds, where(5 + sum(v), 5))
    assert torch.equal(subs, where(5 - sum(v), 5))
    and_all, or_all, xor_all = torch.full_like(i, -1), torch.zeros_like(i), torch.zeros_like(i)
    for b in bits:
        and_all, or_all, xor_all = and_all & ~b, or_all | b, xor_all ^ b
    assert torch.equal(ands, where(and_all, -1)) and torch.equal(ors, where(or_all, 0))
    assert torch.equal(xors, where(xor_all, 0))
    assert torch.equal(mins, where(torch.stack(keyed).min(0).values, 1000))
    assert torch.equal(maxs, where(torch.stack(keyed).max(0).values, -1000))
    for q in range(world):
        s = slice(q * N, (q + 1) * N)
        # rank q exchanged into slot q of this rank's buffer (masked lanes keep the owner's values) ...
        assert torch.equal(xchgs[s], torch.where(live, v[q], owner).to(i32)), f"xchg by rank {q}"
        assert torch.equal(cass[s], v[q].to(i32)), f"cas by rank {q}"
        # ... and this rank got back rank q's initial values from slot `rank` of q's buffer.
        assert torch.equal(xchg_old[s], where(q * 100 + i, -7)), f"xchg's old values on rank {q}"
        assert torch.equal(cas_old[s], (q * 100 + i).to(i32)), f"cas's old values on rank {q}"


def test_device_context_tensor_has_iris_layout(shmem):
    words = device_context(shmem)
    world = shmem.get_num_ranks()
    assert words.dtype == torch.int64 and words.numel() == world + 3
    assert int(words[0]) == shmem.get_rank() and int(words[1]) == world
    assert torch.equal(words[2:2 + world], shmem.get_heap_bases().view(torch.int64))
    assert int(words[-1]) == 0


@triton.jit
def copy_engine_kernel(data, heap_bases, RANK: tl.constexpr):
    offs = tl.arange(0, 16)
    iris.put(data + offs, data + offs, RANK, RANK, heap_bases, USE_COPY_ENGINE=True, CONTIGUOUS_COPY=True)


def test_copy_engine_is_refused_naming_the_nvidia_way(shmem):
    data = shmem.zeros(16, dtype=torch.float32)
    with on_device(shmem), raises_saying("SDMA copy engine, which is AMD-only"):
        copy_engine_kernel[(1,)](data, shmem.get_heap_bases(), RANK=shmem.get_rank())


@triton.jit
def copy_engine_new_spelling_kernel(data, heap_bases, RANK: tl.constexpr):
    offs = tl.arange(0, 16)
    iris.put(data + offs, data + offs, RANK, RANK, heap_bases, use_copy_engine=True, contiguous_copy=True)


@triton.jit
def newer_keywords_kernel(src, dst, counter, heap_bases, RANK: tl.constexpr, PEER: tl.constexpr):
    # Iris's newer keyword names on put and atomic_add. The engine without a contiguous copy is
    # plain loads and stores on Iris too.
    offs = tl.arange(0, 16)
    iris.put(src + offs, dst + RANK * 16 + offs, RANK, PEER, heap_bases, hint=None, from_row_stride=0,
             to_row_stride=0, use_copy_engine=True, contiguous_copy=False)
    iris.atomic_add(counter, RANK + 1, RANK, PEER, heap_bases, use_copy_engine=False)


def test_newer_put_keywords(shmem):
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    src = shmem.zeros(16, dtype=torch.float32)
    src.copy_(torch.arange(16, dtype=torch.float32, device=src.device) * 10 + rank)
    dst = shmem.zeros(world * 16, dtype=torch.float32)
    counter = shmem.zeros(1, dtype=torch.int32)
    shmem.barrier()
    with on_device(shmem):
        newer_keywords_kernel[(1,)](src, dst, counter, shmem.get_heap_bases(), RANK=rank, PEER=(rank + 1) % world)
    shmem.barrier()
    sender = (rank - 1) % world
    got = dst[sender * 16:(sender + 1) * 16].cpu()
    assert torch.equal(got, torch.arange(16, dtype=torch.float32) * 10 + sender)
    assert int(counter[0]) == sender + 1
    with on_device(shmem), raises_saying("SDMA copy engine, which is AMD-only"):
        copy_engine_new_spelling_kernel[(1,)](src, shmem.get_heap_bases(), RANK=rank)
    shmem.barrier()


# ---- all_reduce_rmsnorm ------------------------------------------------------------------------

# Tolerances against torch's unfused reference (all-reduce, residual add, rms_norm):
# - float32: both sum the same few values in float32 in another order and take rsqrt of a
#   float32 mean: a few ulps (2**-23 each) apart; 1e-5 relative covers it with room.
# - bfloat16: the kernel rounds the sum once (sum of partials and residual in fp32, one
#   rounding) where the reference rounds after the reduction and again after the add; each
#   rounding is at most half an ulp, 2**-9 relative, and the output rounds once more in both:
#   outputs of magnitude about 1 differ by at most 2-3 ulps (2**-7 relative each): 2**-5.
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2 ** -5, atol=2 ** -5)}


def partial_of(rank, tokens, hidden, dtype, dev):
    """Rank `rank`'s partial: different per rank and per element, magnitude about 1."""
    g = torch.Generator().manual_seed(1000 + rank * 17 + tokens * 3 + hidden)
    return torch.randn(tokens, hidden, generator=g).to(dtype).to(dev)


def reference(ranks, residual, weight, eps, tokens, hidden, dtype, dev):
    reduced = torch.zeros(tokens, hidden, device=dev)
    for q in ranks:
        reduced += partial_of(q, tokens, hidden, dtype, dev).float()
    reduced = reduced.to(dtype)
    new_residual = (residual + reduced) if residual is not None else reduced
    return new_residual, torch.nn.functional.rms_norm(new_residual, (hidden,), weight, eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("tokens,hidden,with_residual", [(1, 64, True), (5, 300, True), (3, 8192, False),
                                                        (2, 9000, True)])
def test_all_reduce_rmsnorm_matches_torch(shmem, team, dtype, tokens, hidden, with_residual):
    rank, world, dev = shmem.get_rank(), shmem.get_num_ranks(), shmem.get_device()
    eps = 1e-6
    partial = shmem.zeros((tokens, hidden), dtype=dtype)
    partial.copy_(partial_of(rank, tokens, hidden, dtype, dev))
    weight = (torch.arange(hidden, device=dev) % 7 * 0.25 + 0.5).to(dtype)
    residual = None
    if with_residual:
        residual = shmem.zeros((tokens, hidden), dtype=dtype)
        residual.copy_((torch.arange(tokens * hidden, device=dev).reshape(tokens, hidden) % 11 * 0.1).to(dtype))
    start_residual = residual.clone() if residual is not None else None
    shmem.barrier()
    out = _fused.all_reduce_rmsnorm(shmem, partial, residual, weight, eps=eps)
    want_residual, want = reference(range(world), start_residual, weight, eps, tokens, hidden, dtype, dev)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out, want, **tol)
    assert shmem.is_symmetric(out)
    if residual is not None:
        torch.testing.assert_close(residual, want_residual, **tol)
    # The check can fail: without any one rank's partial, the reference is far from the result.
    for missing in range(world):
        _, without = reference([q for q in range(world) if q != missing], start_residual, weight, eps, tokens,
                               hidden, dtype, dev)
        assert not torch.allclose(out.float(), without.float(), **tol), f"rank {missing}'s partial made no difference"
    shmem.barrier()


def test_all_reduce_rmsnorm_preamble_makes_the_output_the_call_uses(shmem, team):
    # Through ctx.ccl, as an Iris program calls it: the preamble's norm_out is the result.
    rank, world, dev = shmem.get_rank(), shmem.get_num_ranks(), shmem.get_device()
    tokens, hidden = 3, 64
    partial = shmem.zeros((tokens, hidden), dtype=torch.float32)
    partial.copy_(partial_of(rank, tokens, hidden, torch.float32, dev))
    weight = torch.ones(hidden, device=dev)
    workspace = shmem.ccl.all_reduce_rmsnorm_preamble(partial, None)
    assert shmem.is_symmetric(workspace.norm_out)
    shmem.barrier()
    out = shmem.ccl.all_reduce_rmsnorm(partial, None, weight, workspace=workspace)
    assert out is workspace.norm_out
    _, want = reference(range(world), None, weight, 1e-6, tokens, hidden, torch.float32, dev)
    torch.testing.assert_close(out, want, **TOLERANCE[torch.float32])
    shmem.barrier()


def test_all_reduce_rmsnorm_module_form(shmem, team):
    # Iris's module form (the Iris instance fourth; its preamble's workspace type), as programs
    # import it: from iris.ccl.fused_ar_rmsnorm import all_reduce_rmsnorm.
    from aperture.iris.ccl import fused_ar_rmsnorm
    rank, world, dev = shmem.get_rank(), shmem.get_num_ranks(), shmem.get_device()
    tokens, hidden = 2, 96
    partial = shmem.zeros((tokens, hidden), dtype=torch.float32)
    partial.copy_(partial_of(rank, tokens, hidden, torch.float32, dev))
    residual = shmem.zeros((tokens, hidden), dtype=torch.float32)
    residual.copy_((torch.arange(tokens * hidden, device=dev).reshape(tokens, hidden) % 5 * 0.2).float())
    start_residual = residual.clone()
    weight = (torch.arange(hidden, device=dev) % 3 * 0.5 + 0.75).float()
    workspace = fused_ar_rmsnorm.all_reduce_rmsnorm_preamble(partial, residual, shmem)
    assert isinstance(workspace, fused_ar_rmsnorm.AllReduceRMSNormWorkspace)
    shmem.barrier()
    out = fused_ar_rmsnorm.all_reduce_rmsnorm(partial, residual, weight, shmem, eps=1e-5, workspace=workspace)
    assert out is workspace.norm_out
    want_residual, want = reference(range(world), start_residual, weight, 1e-5, tokens, hidden, torch.float32, dev)
    torch.testing.assert_close(out, want, **TOLERANCE[torch.float32])
    torch.testing.assert_close(residual, want_residual, **TOLERANCE[torch.float32])
    shmem.barrier()


def test_all_reduce_rmsnorm_runs_again_and_again(shmem, team):
    # The counters' epochs: a second and third call (new values) synchronise and add up right.
    rank, world, dev = shmem.get_rank(), shmem.get_num_ranks(), shmem.get_device()
    tokens, hidden = 4, 128
    partial = shmem.zeros((tokens, hidden), dtype=torch.float32)
    weight = torch.ones(hidden, device=dev)
    for call in range(3):
        partial.copy_(partial_of(rank + 7 * call, tokens, hidden, torch.float32, dev))
        out = _fused.all_reduce_rmsnorm(shmem, partial, None, weight, async_op=True)
        reduced = sum(partial_of(q + 7 * call, tokens, hidden, torch.float32, dev) for q in range(world))
        torch.testing.assert_close(out, torch.nn.functional.rms_norm(reduced, (hidden,), weight, 1e-6),
                                   **TOLERANCE[torch.float32])
    shmem.barrier()


def test_all_reduce_rmsnorm_refuses_bad_input(shmem):
    dev = shmem.get_device()
    on_heap = shmem.zeros((2, 64), dtype=torch.float32)
    weight = torch.ones(64, device=dev)
    with pytest.raises(aperture.Error, match="not on the symmetric heap"):
        _fused.all_reduce_rmsnorm(shmem, torch.zeros(2, 64, device=dev), None, weight)
    with pytest.raises(aperture.Error, match="float32, bfloat16 or float16"):
        _fused.all_reduce_rmsnorm(shmem, shmem.zeros((2, 64), dtype=torch.int32), None, weight)
    # Shape errors are also the ValueError Iris raises, with its words.
    with pytest.raises(ValueError, match="doesn't match hidden") as refused:
        _fused.all_reduce_rmsnorm(shmem, on_heap, None, torch.ones(32, device=dev))
    assert isinstance(refused.value, aperture.Error)
    with pytest.raises(ValueError, match=r"residual \(\(3, 64\), torch.float32\) doesn't match partial: give a "
                                         r"\[2, 64\] torch.float32 tensor"):
        _fused.all_reduce_rmsnorm(shmem, on_heap, shmem.zeros((3, 64), dtype=torch.float32), weight)
    with pytest.raises(ValueError, match=r"residual \(\(2, 64\), torch.float16\) doesn't match"):
        _fused.all_reduce_rmsnorm(shmem, on_heap, shmem.zeros((2, 64), dtype=torch.float16), weight)
    with pytest.raises(ValueError, match=r"weight \(32,\) on .* doesn't match hidden \(64\): give a \[64\] tensor"):
        _fused.all_reduce_rmsnorm(shmem, on_heap, None, torch.ones(32, device=dev))
    with pytest.raises(ValueError, match=r"partial must be 2D \(\[tokens, hidden\]\), got \(128,\)"):
        _fused.all_reduce_rmsnorm(shmem, shmem.zeros((128,), dtype=torch.float32), None, weight)
    with pytest.raises(ValueError, match="partial's rows must be contiguous"):
        _fused.all_reduce_rmsnorm(shmem, shmem.zeros((64, 2), dtype=torch.float32).t(), None, weight)
    with pytest.raises(aperture.Error, match="partial has dtype torch.int32"):
        _fused.all_reduce_rmsnorm(shmem, shmem.zeros((2, 64), dtype=torch.int32), None, weight)
    with pytest.raises(aperture.Error, match="group"):
        _fused.all_reduce_rmsnorm(shmem, on_heap, None, weight, group=object())


def test_all_reduce_rmsnorm_launch_key_is_as_fine_as_tritons(monkeypatch):
    # On a GPU, a call whose _launch_key was seen launches that call's compiled kernel directly:
    # right only if equal keys mean equal specialisations in Triton's own binder (here a CUDA
    # target's, which needs no GPU). Fails when a Triton version specialises on more.
    import inspect
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    fn = _fused._ar_rmsnorm_kernel.fn
    names = list(inspect.signature(fn).parameters)
    assert tuple(names[-len(_fused._CONSTEXPRS):]) == _fused._CONSTEXPRS
    jit = JITFunction(fn, do_not_specialize=_fused._NOT_SPECIALISED)
    binder = create_function_from_signature(jit.signature, jit.params, make_backend(GPUTarget("cuda", 90, 32)))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    plan = object()
    memory = torch.zeros(1 << 16, dtype=torch.float32)
    flags = torch.zeros(64, dtype=torch.int32)
    bases = torch.zeros(4, dtype=torch.int64)

    def args(dtype=torch.bfloat16, shift=(0, 0, 0, 0), flag_shift=0, hidden=64, stride=64, epoch=5, budget=10 ** 6,
             tokens=2, w_dtype=None):
        def at(i):
            return memory.view(dtype)[4096 * (i + 1) + shift[i]:]

        return (at(0), at(1), at(2).to(w_dtype) if w_dtype else at(2), at(3), flags[flag_shift:], flags[32:],
                flags[:1], epoch, budget, bases, tokens, hidden, stride, stride, stride, 1e-6)

    variants = [args(), args(torch.float32), args(torch.float16), args(w_dtype=torch.float32),
                args(shift=(1, 0, 0, 0)), args(shift=(0, 1, 0, 0)), args(shift=(0, 0, 1, 0)), args(shift=(0, 0, 0, 1)),
                args(shift=(8, 8, 8, 8)), args(flag_shift=1), args(hidden=1, stride=1), args(hidden=63, stride=63),
                args(hidden=48, stride=48), args(hidden=64, stride=80), args(epoch=1), args(epoch=16), args(epoch=17),
                args(budget=6 * 10 ** 7), args(tokens=1), args(tokens=16), args(epoch=2 ** 31)]
    constexprs = dict(zip(_fused._CONSTEXPRS, (0, 1, False, 1, 64, 1, True)))
    keys, specs = [], []
    for a in variants:
        keys.append(_fused._launch_key(plan, a))
        specs.append(binder(*a, **constexprs)[1])
    distinct_specs = 0
    for i in range(len(variants)):
        for j in range(i):
            if keys[i] == keys[j]:
                assert specs[i] == specs[j], f"variants {i} and {j}: one launch key, Triton specialises them apart"
            distinct_specs += specs[i] != specs[j]
    assert distinct_specs > 0 and len(set(keys)) > 10  # the variants do differ where it matters


def test_all_reduce_rmsnorm_direct_launch_passes_what_tritons_jit_passes(monkeypatch):
    # The direct launch (a compiled kernel's launcher, GPU only) must hand Triton's launcher what
    # the JIT hands it: a grid of three and every argument, constexprs included, in the kernel's
    # order (the JIT passes its binder's bound arguments). Run here with a CUDA target's binder and
    # a compiled kernel whose handles and launcher are stand-ins: the H200 found the one-element
    # grid this checks (IndexError on every call after the first).
    import triton.compiler.compiler as compiler
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    jit = JITFunction(_fused._ar_rmsnorm_kernel.fn, do_not_specialize=_fused._NOT_SPECIALISED)
    binder = create_function_from_signature(jit.signature, jit.params, make_backend(GPUTarget("cuda", 90, 32)))
    launches = []

    class StandInCompiled(compiler.CompiledKernel):
        def __init__(self):  # no module to load
            self.function, self.packed_metadata = "function", "metadata"

        def _init_handles(self):
            pass

        def launch_metadata(self, grid, stream, *args):
            return None

        def run(self, *launch):
            launches.append(launch)

    stand_in = StandInCompiled()

    class StandInJit:  # the first call with a key: Triton's JIT launches and returns the kernel
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                bound = binder(*args, **{k: v for k, v in kwargs.items() if k in _fused._CONSTEXPRS})[0]
                stand_in.run(*grid, "stream", "function", "metadata", None, None, None, *bound.values())
                return stand_in
            return launch

    class StandInDriver:
        def get_current_device(self):
            return 0

        def get_current_stream(self, device):
            return "stream"

    monkeypatch.setattr(_fused, "_ar_rmsnorm_kernel", StandInJit())
    monkeypatch.setattr(compiler.driver, "_active", StandInDriver())  # what driver.active returns
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    class Ctx:
        address_map = None

        def get_rank(self):
            return 0

        def get_num_ranks(self):
            return 1

        def zeros(self, shape, dtype):
            return torch.zeros(shape, dtype=dtype)

        def barrier(self):
            pass

    plan = _fused._Plan(Ctx(), 2, 64, False, torch.device("cpu"))
    flags = _fused._RowFlags(Ctx(), 2)  # its flags' addresses, and the table's, cached on it
    memory = torch.zeros(1 << 14, dtype=torch.bfloat16)

    def args(heap_bases):
        return (memory[:128], memory[:128], memory[4096:4160], memory[8192:8320], flags.ready, flags.done,
                flags.failed, 7, 10 ** 6, heap_bases, 2, 64, 64, 64, 64, 1e-6)

    table, new_table = torch.zeros(1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64)
    _fused._launch_compiled(flags, plan, args(table))  # through the JIT
    _fused._launch_compiled(flags, plan, args(table))  # direct
    _fused._launch_compiled(flags, plan, args(new_table))  # direct, with a table the cache has not seen
    hooks = triton.knobs.runtime
    profiler = []
    hooks.launch_enter_hook.add(profiler.append)
    try:
        _fused._launch_compiled(flags, plan, args(table))  # direct, with a hook listening
    finally:
        hooks.launch_enter_hook.remove(profiler.append)
    assert len(flags.launchers) == 1 and len(launches) == 4
    through_jit, direct, direct_new_table, direct_hooked = launches
    assert direct[:3] == (plan.grid[0], 1, 1) and all(isinstance(g, int) for g in direct[:3])
    # With no hook registered, no hook metadata and no hooks go to the launcher (Triton 3.6 would
    # pass its two empty chains); with one, the launch is Triton's own, hooks and all.
    assert direct[3:9] == ("stream", "function", "metadata", None, None, None)
    assert direct_hooked[7] is hooks.launch_enter_hook and direct_hooked[8] is hooks.launch_exit_hook
    assert direct_hooked[:6] + direct_hooked[9:] == direct[:6] + direct[9:]
    assert len(direct) == len(through_jit)
    for got, want in zip(direct[9:], through_jit[9:]):
        # A tensor goes to the direct launch as its address, which Triton's launcher takes as is.
        assert got == want.data_ptr() if isinstance(want, torch.Tensor) else (got is want or got == want)
    bases_at = 9 + [p.name for p in jit.params].index("heap_bases")
    assert direct[bases_at] == table.data_ptr() and direct_new_table[bases_at] == new_table.data_ptr()
    assert direct_new_table[:bases_at] + direct_new_table[bases_at + 1:] == direct[:bases_at] + direct[bases_at + 1:]
    assert sum(isinstance(w, torch.Tensor) for w in through_jit[9:]) == 8  # the kernel's eight pointers


def test_all_reduce_rmsnorm_direct_launch_calls_the_c_launch_as_tritons_launcher_does(monkeypatch):
    # The direct launch calls the C launch of Triton's CUDA launcher itself, past the launcher's
    # Python (scratch buffers, none for this kernel, and two flags). It must pass what the
    # launcher passes, in its order: a Triton whose launcher changes that fails here. A launcher
    # with scratch to allocate is called whole.
    import triton.compiler.compiler as compiler
    from triton.backends.nvidia.driver import CudaLauncher

    c_calls = []
    launcher = object.__new__(CudaLauncher)  # no kernel to build it from
    launcher.num_ctas, launcher.launch_cooperative_grid, launcher.launch_pdl = 1, "cooperative", "pdl"
    launcher.global_scratch_size = launcher.profile_scratch_size = 0
    launcher.global_scratch_align = launcher.profile_scratch_align = 1
    launcher.launch = lambda *launch: c_calls.append(launch)

    class StandInCompiled(compiler.CompiledKernel):
        def __init__(self):  # no module to load
            self.function, self.packed_metadata, self._run = "function", "metadata", launcher

        def _init_handles(self):
            pass

    class StandInDriver:
        def get_current_device(self):
            return 0

        def get_current_stream(self, device):
            return f"stream of {device}"

    monkeypatch.setattr(compiler.driver, "_active", StandInDriver())
    args = tuple(range(100, 123))  # 23: the kernel's 16 arguments and 7 constexprs
    direct = _fused._DirectLaunch(StandInCompiled(), (5, 1, 1))
    launcher(5, 1, 1, "stream of 3", "function", "metadata", None, None, None, *args)  # Triton's launch, no hooks
    direct(3, *args)
    assert len(c_calls) == 2 and c_calls[1] == c_calls[0]
    launcher.global_scratch_size = 64
    assert _fused._DirectLaunch(StandInCompiled(), (5, 1, 1)).c_launch is None


def test_all_reduce_rmsnorm_gives_up_on_a_missing_rank(shmem, team, monkeypatch):
    # Rank 0 does not call; every other rank's kernel waits about APERTURE_TIMEOUT (1 s here) for
    # rank 0's rows, then returns, and the call raises aperture.Error: no hang.
    if team.size == 1:
        pytest.skip("needs two ranks: a peer that does not come")
    dev = shmem.get_device()
    shmem._aperture_rmsnorm_flags = None  # fresh flags on every rank (a collective allocation below)
    partial = shmem.zeros((2, 64), dtype=torch.float32)
    flags = _fused._RowFlags(shmem, 2)  # collective, ends with a barrier
    if team.rank != 0:
        shmem._aperture_rmsnorm_flags = flags
        monkeypatch.setenv("APERTURE_TIMEOUT", "1")
        began = time.monotonic()
        with pytest.raises(aperture.Error, match="did not call all_reduce_rmsnorm"):
            _fused.all_reduce_rmsnorm(shmem, partial, None, torch.ones(64, device=dev))
        print(f"all_reduce_rmsnorm gave up after {time.monotonic() - began:.1f} s")
    shmem.barrier()
    shmem._aperture_rmsnorm_flags = None  # the ranks' epochs now differ: start again, on every rank


@triton.jit
def xcc_kernel(out):
    tl.store(out, _device.get_xcc_id())


@triton.jit
def wait_cnt_kernel(out):
    _device.wait_cnt()
    tl.store(out, 1)


def test_amd_only_device_names_say_so_and_name_the_nvidia_way(shmem):
    for what, nvidia in (("gluon", "Triton kernels"), ("sdma", "copy/put/get"),
                         ("triggered_copy", "copy/put/get"), ("xcc", "one die"), ("rocshmem", "nvshmem")):
        with pytest.raises(aperture.Error, match="AMD-only") as raised:
            _amd.refuse(what)
        assert nvidia in str(raised.value)
    die = shmem.full((1,), 9, dtype=torch.int32)  # get_xcc_id is not AMD-only: 0 on a one-die GPU
    with on_device(shmem):
        xcc_kernel[(1,)](die)
    assert int(die[0]) == 0, "get_xcc_id: NVIDIA GPUs have one die, as Iris's newest says on one-die GPUs"
    with on_device(shmem), raises_saying("s_waitcnt"):
        wait_cnt_kernel[(1,)](shmem.zeros(1, dtype=torch.int32))
    from aperture.iris.device import sdma_utils  # importable, as for a program's AMD-only branch
    with pytest.raises(aperture.Error, match="AMD-only") as raised:
        sdma_utils.sdma_copy
    assert "iris.device.sdma_utils.sdma_copy" in str(raised.value)
