"""Bad input: a clear aperture.Error with its ErrorCode, on every rank alike, and nothing breaks."""

import math

import pytest
import torch

import aperture
from conftest import pattern

INVALID = aperture.ErrorCode.invalid_argument


@pytest.fixture
def comm(team, host_provider):
    c = aperture.Communicator(team, host_provider)
    yield c
    c.close()


def test_error_is_a_runtime_error_with_the_cpp_message_and_code(team):
    with pytest.raises(aperture.Error) as e:
        aperture.make_provider("no-such-provider", team)
    assert isinstance(e.value, RuntimeError)
    assert str(e.value).startswith("aperture: ") and "no-such-provider" in str(e.value)
    assert "available here" in str(e.value)
    assert e.value.code == aperture.ErrorCode.invalid_argument


def test_double_free_is_refused(team, host_provider):
    t = host_provider.zeros(8, torch.int64)
    host_provider.free(t)
    with pytest.raises(aperture.Error, match="was freed") as e:
        host_provider.free(t)
    assert e.value.code == INVALID
    with pytest.raises(aperture.Error, match="was freed"):
        host_provider.free(t[2:4])  # nor through a view


def test_freed_tensor_is_refused_everywhere(team, host_provider, comm):
    t = host_provider.zeros(8, torch.int64)
    host_provider.free(t)
    with pytest.raises(aperture.Error, match="was freed"):
        aperture.address_map(t)
    with pytest.raises(aperture.Error, match="was freed"):
        comm.all_reduce(t)
    out = torch.zeros(8 * team.size, dtype=torch.int64)
    with pytest.raises(aperture.Error, match="was freed"):
        comm.all_gather(out, t)
    # and the provider goes on serving
    u = host_provider.zeros(8, torch.int64)
    host_provider.free(u)


def test_foreign_tensors_are_not_aperture_memory(team, host_provider):
    for foreign in (torch.zeros(16), torch.arange(5), __import__("numpy").zeros(4)):
        with pytest.raises(aperture.Error, match="not in memory of any live aperture allocation") as e:
            host_provider.free(foreign)
        assert e.value.code == INVALID
        with pytest.raises(aperture.Error, match="not in memory of any live aperture allocation"):
            aperture.address_map(foreign)
    with pytest.raises(aperture.Error, match="not a torch.Tensor or numpy.ndarray"):
        aperture.address_map([1, 2, 3])


def test_a_tensor_of_another_provider_is_refused(team, host_provider):
    other = aperture.make_provider("shm", team)
    t = other.zeros(16, torch.int64)
    with pytest.raises(aperture.Error, match=f"lies in an allocation of provider shm, not of this one") as e:
        host_provider.free(t)
    assert e.value.code == INVALID
    other.free(t)


def test_collective_mismatch_is_reported_on_every_rank(team, host_provider):
    if team.size < 2:
        pytest.skip("a mismatch needs two ranks")
    with pytest.raises(aperture.Error) as e:
        host_provider.empty((100 + team.rank,), torch.int64)  # sizes differ between ranks
    assert e.value.code == aperture.ErrorCode.mismatch
    assert "bytes" in str(e.value)
    t = host_provider.zeros(4, torch.int64)  # the provider is still in step
    host_provider.free(t)


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64, torch.int16])
def test_wrong_dtype(team, comm, dtype):
    t = torch.zeros(8, dtype=dtype)
    with pytest.raises(aperture.Error, match="collectives take int8, uint8") as e:
        comm.all_reduce(t)
    assert e.value.code == INVALID


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                                   torch.float32, torch.float64])
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_every_nccl_type_reduces_on_host_memory(team, comm, dtype, op):
    # 1s and 2s, in a pattern that differs per rank and per element: every sum, product, min and
    # max over up to 4 ranks is exact in each of these types (so the fold order does not matter).
    n = 64
    mine = [((team.rank + 1) * (i % 3 + 1) + i // 3) % 2 + 1 for i in range(n)]
    t = torch.tensor(mine, dtype=dtype)
    comm.all_reduce(t, op=op)
    every = [[((r + 1) * (i % 3 + 1) + i // 3) % 2 + 1 for i in range(n)] for r in range(team.size)]
    fold = {"sum": sum, "min": min, "max": max, "prod": math.prod}[op]
    expected = torch.tensor([fold(col) for col in zip(*every)], dtype=torch.float64)
    assert torch.equal(t.to(torch.float64), expected), f"{dtype} {op}"


def test_wrong_device(team, comm):
    t = torch.zeros(8, device="meta")
    with pytest.raises(aperture.Error, match="serves host memory; give a CPU tensor"):
        comm.all_reduce(t)


def test_not_contiguous(team, comm):
    t = torch.zeros(8, 8)[:, 1]
    with pytest.raises(aperture.Error, match="not contiguous"):
        comm.all_reduce(t)


def test_mismatched_collective_shapes(team, comm):
    n = 10
    inp = torch.zeros(n, dtype=torch.int64)
    with pytest.raises(aperture.Error, match=f"out needs {team.size} x inp"):
        comm.all_gather(torch.zeros(n * team.size + 1, dtype=torch.int64), inp)
    with pytest.raises(aperture.Error, match="out is int32 but inp is int64"):
        comm.all_gather(torch.zeros(n * team.size, dtype=torch.int32), inp)
    with pytest.raises(aperture.Error, match="elements"):
        comm.reduce_scatter(torch.zeros(n + 1, dtype=torch.int64), torch.zeros(n * team.size, dtype=torch.int64))
    with pytest.raises(aperture.Error, match="elements"):
        comm.all_to_all(torch.zeros(n * team.size, dtype=torch.int64), torch.zeros(n * team.size - 1, dtype=torch.int64))
    if team.size > 1:
        with pytest.raises(aperture.Error, match="not a multiple"):
            comm.all_to_all(torch.zeros(team.size + 1, dtype=torch.int64), torch.zeros(team.size + 1, dtype=torch.int64))
    with pytest.raises(aperture.Error, match="op = \"mean\" is not a reduction"):
        comm.all_reduce(inp, op="mean")
    # after every refusal the ranks are still in step
    t = torch.tensor([pattern(team.rank, i) for i in range(n)])
    comm.all_reduce(t)
    assert t.tolist() == [sum(pattern(r, i) for r in range(team.size)) for i in range(n)]


def test_peer_out_of_range(team, host_provider, comm):
    t = host_provider.zeros(8, torch.int64)
    m = aperture.address_map(t)
    for peer in (-1, team.size, 1000):
        with pytest.raises(aperture.Error, match="is not a rank of this map"):
            m.is_direct(peer)
        with pytest.raises(aperture.Error) as e:
            m.translate(t, peer)
        assert e.value.code == INVALID
    with pytest.raises(aperture.Error, match=f"root {team.size} is not a rank"):
        comm.broadcast(torch.zeros(4), team.size)
    host_provider.free(t)


def test_from_table_checks_the_table(team):
    with pytest.raises(aperture.Error) as e:
        aperture.from_table(team.rank, [], 64)  # no entry at all
    assert e.value.code == INVALID
    with pytest.raises(aperture.Error):
        aperture.from_table(team.size, [4096 * (r + 1) for r in range(team.size)], 64)  # rank out of range
    with pytest.raises(aperture.Error):
        aperture.from_table(0, [0], 64)  # this rank's own entry is 0


def test_communicator_after_close(team, host_provider):
    c = aperture.Communicator(team, host_provider)
    c.close()
    with pytest.raises(aperture.Error, match="used after close"):
        c.all_reduce(torch.zeros(4))


def test_a_communicator_names_a_team_or_provider_in_the_wrong_place(team, host_provider):
    # Refused before any collective step, alike on every rank: nothing is left half made.
    with pytest.raises(aperture.Error, match=r"team is a Provider; give an aperture.Team .* provider second"):
        aperture.Communicator(host_provider, team)
    with pytest.raises(aperture.Error, match=r"team is a NoneType"):
        aperture.Communicator(None, host_provider)
    with pytest.raises(aperture.Error, match=r"provider is a str; give an aperture provider"):
        aperture.Communicator(team, "shm")
    with aperture.Communicator(team, host_provider) as c:  # the team goes on as before
        t = torch.full((3,), float(team.rank + 1))
        c.all_reduce(t)
        assert t.tolist() == [team.size * (team.size + 1) / 2] * 3
