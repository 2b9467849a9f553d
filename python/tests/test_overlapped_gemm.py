"""aperture.OverlappedGemm from Python: ag_gemm and gemm_rs on torch tensors, every element checked
against torch's unfused reference (torch.matmul of the gathered inputs, the reduce-scatter summed
from every rank's inputs, which each rank computes itself), on torch's current stream and in a
CUDA graph, on memory from the GPU providers and from torch symmetric memory; and the refusals.
The GPU tests skip without a GPU; the refusal of a host provider, and the test of the check
itself (a rank's contribution missing fails it), run everywhere (in CI: a build without CUDA,
where the class says so)."""

import os

import pytest
import torch

import aperture
from aperture import _core
from conftest import GPU_PROVIDERS

ON_GPU = _core.with_cuda and torch.cuda.is_available() and bool(GPU_PROVIDERS)


def gpu_only(test):
    """A GPU test (marker gpu): skipped without a GPU, a GPU provider, or CUDA in the build; where
    APERTURE_TEST_REQUIRE=gpu, that skip fails."""
    return pytest.mark.gpu(pytest.mark.skipif(not ON_GPU, reason="no GPU or GPU provider (or a build without CUDA)")(test))

# (m, n, k): m a multiple of 1, 2 and 4 ranks; the second needs larger buffers (they grow).
SHAPES = [(256, 192, 128), (512, 128, 320)]


def matrix(rows, cols, seed, device="cuda"):
    """A bf16 matrix whose every element depends on (seed, row, column); values of a few bits, so
    bf16 holds them exactly and a misplaced row or rank shows."""
    i = torch.arange(rows, device=device, dtype=torch.int64).unsqueeze(1)
    j = torch.arange(cols, device=device, dtype=torch.int64).unsqueeze(0)
    v = (i * 31 + j * 17 + seed * 101) % 23 - 11
    return (v.to(torch.float32) / 16).to(torch.bfloat16)


# The bound of gpu_gemm_test.cu. A bf16 rounding errs by at most half an ulp (2^-8 relative); an
# ulp is at most 2^-7 relative. ag_gemm rounds once: 2^-7 of the result's magnitude. gemm_rs's
# partial products travel as bf16 and the reference rounds them too, but a partial at a rounding
# boundary may round the other way on the GPU (fp32) than here (float64): an ulp, 2^-7 of each
# partial's magnitude; the sum is rounded once more: 2^-8 of it (`summed`). Both add 2^-15 of the
# sum of |a b| for the fp32 accumulation (in the magnitude). A rank's contribution missing is far
# outside it (test_the_check_catches_a_missing_rank).
def bound(reference, magnitude, summed=False):
    return magnitude * 2.0 ** -7 + (reference.abs() * 2.0 ** -8 if summed else 0.0) + 1e-6


def off_elements(got, reference, magnitude, summed=False):
    """The elements of got (bf16) farther from reference (float64) than the bound allows."""
    return (got.double() - reference).abs() > bound(reference, magnitude, summed)


def assert_within_bf16(got, reference, magnitude, what, summed=False):
    bad = off_elements(got, reference, magnitude, summed)
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {bad.numel()} elements off, the first at "
                                 f"{tuple(int(x) for x in bad.nonzero()[0])}: got {got.double()[bad][0].item()}, "
                                 f"expected {reference[bad][0].item()} within {bound(reference, magnitude, summed)[bad][0].item():.3g}")


def ag_inputs(rank, m, n, k, world, step=0, device="cuda"):
    rows = m // world
    return matrix(rows, k, 10 * rank + step, device), matrix(k, n, 1000 + step, device)  # b is the same on every rank


def ag_reference(m, n, k, world, step=0, device="cuda", ranks=None):
    """What ag_gemm must give (float64), and its magnitude, from the shards of `ranks` (default:
    every rank; a missing one's rows are zero)."""
    ranks = range(world) if ranks is None else ranks
    shards = [ag_inputs(r, m, n, k, world, step, device)[0] if r in ranks else
              torch.zeros(m // world, k, dtype=torch.bfloat16, device=device) for r in range(world)]
    a = torch.cat(shards).double()
    b = ag_inputs(0, m, n, k, world, step, device)[1].double()
    reference = a @ b
    return reference, reference.abs() + (a.abs() @ b.abs()) * 2.0 ** -8


def check_ag_gemm(c, m, n, k, world, step=0):
    assert c.shape == (m, n) and c.dtype == torch.bfloat16
    assert_within_bf16(c, *ag_reference(m, n, k, world, step, c.device), f"ag_gemm m={m} n={n} k={k} step {step}")


def rs_inputs(rank, m, n, k, step=0, device="cuda"):
    return matrix(m, k, 7 * rank + 3 + step, device), matrix(k, n, 500 + 13 * rank + step, device)  # both differ per rank


def rs_reference(rank, m, n, k, world, step=0, device="cuda", ranks=None):
    """What gemm_rs must give rank `rank` (float64): the bf16-rounded partial products of `ranks`
    (default: every rank) summed in rank order; and its magnitude."""
    rows = m // world
    mine = slice(rank * rows, (rank + 1) * rows)
    reference = torch.zeros(rows, n, dtype=torch.float64, device=device)
    magnitude = torch.zeros(rows, n, dtype=torch.float64, device=device)
    for r in range(world) if ranks is None else ranks:
        a, b = (x.double() for x in rs_inputs(r, m, n, k, step, device))
        partial = a[mine] @ b
        reference += partial.to(torch.bfloat16).double()
        magnitude += partial.abs() + (a[mine].abs() @ b.abs()) * 2.0 ** -8
    return reference, magnitude


def check_gemm_rs(c_shard, rank, m, n, k, world, step=0):
    assert c_shard.shape == (m // world, n) and c_shard.dtype == torch.bfloat16
    assert_within_bf16(c_shard, *rs_reference(rank, m, n, k, world, step, c_shard.device),
                       f"gemm_rs m={m} n={n} k={k} step {step}", summed=True)


@pytest.mark.parametrize("world", [2, 4])
def test_the_check_catches_a_missing_rank(world):
    """The checks above, on the CPU: results made as the device makes them (fp32 products rounded
    once to bf16; gemm_rs's bf16 partials summed in fp32, in rank order, rounded once) pass, and
    the same results with one rank's contribution missing fail, in nearly every element."""
    for m, n, k in SHAPES:
        exact, _ = ag_reference(m, n, k, world, device="cpu")
        c = exact.float().to(torch.bfloat16)
        assert not off_elements(c, *ag_reference(m, n, k, world, device="cpu")).any()
        for rank in range(world):
            partials = [rs_reference(rank, m, n, k, world, device="cpu", ranks=[r])[0].float() for r in range(world)]
            c_shard = sum(partials[1:], partials[0]).to(torch.bfloat16)
            assert not off_elements(c_shard, *rs_reference(rank, m, n, k, world, device="cpu"), summed=True).any()
            for lost in range(world):
                others = [r for r in range(world) if r != lost]
                missing_rows = exact.clone()
                missing_rows[lost * (m // world):(lost + 1) * (m // world)] = 0
                caught = off_elements(missing_rows.float().to(torch.bfloat16), *ag_reference(m, n, k, world, device="cpu"))
                rows = caught[lost * (m // world):(lost + 1) * (m // world)]
                assert rows.float().mean() >= 0.9, f"ag_gemm without rank {lost}: {rows.float().mean():.1%} caught"
                without = sum(partials[r] for r in others).to(torch.bfloat16)
                caught = off_elements(without, *rs_reference(rank, m, n, k, world, device="cpu"), summed=True)
                assert caught.float().mean() >= 0.9, f"gemm_rs without rank {lost}: {caught.float().mean():.1%} caught"


def test_the_gemm_rs_bound_allows_a_partial_rounded_the_other_way():
    """gpu_gemm_test's seed 0x8a53fede054d9289 on the GPU: rank 1's partial product is
    -8.0937496 exactly, within an fp32 step of the bf16 tie -8.09375. The host's reference lands
    on the tie and rounds it to even (-8.125); the GPU's fp32 sum, in its own order, lands a step
    short (-8.0625). With rank 0's -1.4023 the GPU's sum rounds to -9.4375 against the reference's
    -9.5234. That is arithmetic the device may do, so it passes; without the final sum's rounding
    in the bound, or with an ulp per partial read as half of one, it would not."""
    exact = torch.tensor([-1.40233214199543, -8.093749612569809], dtype=torch.float64)
    reference = exact.float().to(torch.bfloat16).double().sum().reshape(1)  # as gpu_gemm_test's host does
    on_gpu = exact.float()
    on_gpu[1] = torch.nextafter(torch.tensor(-8.09375), torch.tensor(0.0))  # a step short of the tie
    got = on_gpu.to(torch.bfloat16).float().sum().to(torch.bfloat16).reshape(1)
    magnitude = exact.abs().sum().reshape(1) + 164.5 * 2.0 ** -8  # + sum |a b| * 2^-8, as the reference adds
    assert got.item() == -9.4375 and reference.item() == -9.5234375
    assert not off_elements(got, reference, magnitude, summed=True).any()
    assert off_elements(got, reference, magnitude, summed=False).any()
    assert off_elements(got, reference, magnitude / 2, summed=True).any()


def run_both(team, tp):
    for m, n, k in SHAPES:
        a_shard, b = ag_inputs(team.rank, m, n, k, team.size)
        check_ag_gemm(tp.ag_gemm(a_shard, b), m, n, k, team.size)
        a, b = rs_inputs(team.rank, m, n, k)
        check_gemm_rs(tp.gemm_rs(a, b), team.rank, m, n, k, team.size)
    tp.check()


@gpu_only
def test_ag_gemm_and_gemm_rs_match_torch(team, gpu_provider):
    with aperture.OverlappedGemm(team, gpu_provider) as tp:
        assert (tp.rank, tp.size) == (team.rank, team.size)
        run_both(team, tp)
        # Into given outputs, on a side stream: the work is queued there, behind the inputs' copies.
        m, n, k = SHAPES[0]
        side = torch.cuda.Stream()
        c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        c_shard = torch.empty(m // team.size, n, dtype=torch.bfloat16, device="cuda")
        with torch.cuda.stream(side):
            a_shard, b = ag_inputs(team.rank, m, n, k, team.size, step=5)
            assert tp.ag_gemm(a_shard, b, out=c) is c
            a, b2 = rs_inputs(team.rank, m, n, k, step=5)
            assert tp.gemm_rs(a, b2, out=c_shard) is c_shard
        side.synchronize()
        check_ag_gemm(c, m, n, k, team.size, step=5)
        check_gemm_rs(c_shard, team.rank, m, n, k, team.size, step=5)


@gpu_only
def test_captured_in_a_cuda_graph_and_replayed(team, gpu_provider):
    m, n, k = SHAPES[1]
    with aperture.OverlappedGemm(team, gpu_provider) as tp:
        tp.reserve(m, n, k)
        a_shard, b = (x.clone() for x in ag_inputs(team.rank, m, n, k, team.size))
        a, b_rs = (x.clone() for x in rs_inputs(team.rank, m, n, k))
        c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        c_shard = torch.empty(m // team.size, n, dtype=torch.bfloat16, device="cuda")
        tp.ag_gemm(a_shard, b, out=c)  # eager first, as before any capture (cuBLASLt plans made here)
        tp.gemm_rs(a, b_rs, out=c_shard)
        torch.cuda.synchronize()
        check_ag_gemm(c, m, n, k, team.size)
        check_gemm_rs(c_shard, team.rank, m, n, k, team.size)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            tp.ag_gemm(a_shard, b, out=c)
            tp.gemm_rs(a, b_rs, out=c_shard)
        for step in range(1, 4):  # new inputs each replay: the graph reads them where they lie
            for dst, src in zip((a_shard, b), ag_inputs(team.rank, m, n, k, team.size, step)):
                dst.copy_(src)
            for dst, src in zip((a, b_rs), rs_inputs(team.rank, m, n, k, step)):
                dst.copy_(src)
            graph.replay()
            torch.cuda.synchronize()
            check_ag_gemm(c, m, n, k, team.size, step)
            check_gemm_rs(c_shard, team.rank, m, n, k, team.size, step)
        tp.check()
        del graph


@gpu_only
def test_bad_input_gets_the_cpp_message(team, gpu_provider):
    w = team.size
    bf = dict(dtype=torch.bfloat16, device="cuda")
    with aperture.OverlappedGemm(team, gpu_provider) as tp:
        with pytest.raises(aperture.Error, match="n must be a positive multiple of 64; pad the columns") as e:
            tp.ag_gemm(torch.zeros(64, 128, **bf), torch.zeros(128, 100, **bf))  # the C++ check's words
        assert e.value.code == aperture.ErrorCode.invalid_argument
        with pytest.raises(aperture.Error, match="k must be a positive multiple of 64"):
            tp.gemm_rs(torch.zeros(64 * w, 96, **bf), torch.zeros(96, 128, **bf))
        if w > 1:
            with pytest.raises(aperture.Error, match="m must be a positive multiple of the team size"):
                tp.gemm_rs(torch.zeros(64 * w + 1, 128, **bf), torch.zeros(128, 128, **bf))
        with pytest.raises(aperture.Error, match="take bfloat16 matrices"):
            tp.ag_gemm(torch.zeros(64, 128, device="cuda"), torch.zeros(128, 128, **bf))
        with pytest.raises(aperture.Error, match="take CUDA tensors"):
            tp.ag_gemm(torch.zeros(64, 128, dtype=torch.bfloat16), torch.zeros(128, 128, **bf))
        with pytest.raises(aperture.Error, match=r"b has shape \(64, 128\), but 128 rows are needed"):
            tp.ag_gemm(torch.zeros(64, 128, **bf), torch.zeros(64, 128, **bf))
        with pytest.raises(aperture.Error, match="not contiguous"):
            tp.gemm_rs(torch.zeros(128 * w, 128, **bf), torch.zeros(128, 128, **bf).t())
        with pytest.raises(aperture.Error, match=r"out has shape \(\d+, 64\), but 128 columns are needed"):
            tp.ag_gemm(torch.zeros(64, 128, **bf), torch.zeros(128, 128, **bf), out=torch.zeros(64 * w, 64, **bf))
        with pytest.raises(aperture.Error, match="not 16-byte aligned"):
            tp.ag_gemm(torch.zeros(64 * 128 + 1, **bf)[1:].view(64, 128), torch.zeros(128, 128, **bf))
        run_both(team, tp)  # nothing was queued by the refused calls: the ranks still meet
    with pytest.raises(aperture.Error, match="used after close"):
        tp.ag_gemm(torch.zeros(64, 128, **bf), torch.zeros(128, 128, **bf))


def test_a_host_provider_or_a_build_without_cuda_is_refused(team, host_provider):
    with pytest.raises(aperture.Error) as e:
        aperture.OverlappedGemm(team, host_provider)
    if not _core.with_cuda:  # CI's build: the class is there, and says why it cannot run
        assert "built without CUDA" in str(e.value) and e.value.code == aperture.ErrorCode.unavailable
    else:
        assert ("serves host memory" in str(e.value) and e.value.code == aperture.ErrorCode.invalid_argument) or \
            "without cuBLASLt" in str(e.value)


# Torch symmetric memory refuses ranks that share a GPU (rendezvous: "detected allocations from
# overlapping devices from different ranks"): there the test is not defined (conftest deselects it).
@gpu_only
@pytest.mark.one_gpu_per_rank
@pytest.mark.skipif("MASTER_PORT" not in os.environ, reason="needs a launcher's MASTER_ADDR/MASTER_PORT")
def test_on_torch_symmetric_memory(team):
    import torch.distributed as dist

    # A store of its own (another port than test_gpu.py's env:// one), for rendezvous.
    port = int(os.environ["MASTER_PORT"]) + 11
    dist.init_process_group("gloo", init_method=f"tcp://{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{port}",
                            rank=team.rank, world_size=team.size)
    try:
        provider = aperture.torch_symmetric_provider(team)
        assert provider.name == "torch-symmetric" and provider.memory_kind == "device"
        # The provider's own tensors: torch's buffers, torch's table.
        t = provider.zeros(1024, torch.int32)
        m = aperture.address_map(t)
        assert m.allocation_base == t.data_ptr() and m.peer_bases.is_cuda
        view = aperture.address_map(t[256:512])
        assert view.peer_bases.cpu().tolist() == [p + 1024 for p in m.host_peer_bases]
        provider.free(t)
        with pytest.raises(aperture.Error, match="was freed"):
            provider.free(t)
        with aperture.OverlappedGemm(team, provider) as tp:  # its flags and buffers in torch's memory
            run_both(team, tp)
        dist.barrier()
    finally:
        dist.destroy_process_group()
