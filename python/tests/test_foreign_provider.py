"""A provider whose memory another library allocates, reached through Python (_core.ForeignProvider,
the way torch symmetric memory becomes aperture.torch_symmetric_provider): the C++ code that
allocates from a provider (the Communicator here) runs on it, and its checks are the C++ ones.
Here "another library" is an shm provider used directly, so the same tests run on CPUs in CI, at
every rank count; the torch version is tested on the GPU (test_overlapped_gemm.py)."""

import numpy as np
import pytest
import torch

import aperture
from aperture import _core
from conftest import HOST_PROVIDERS, pattern
from peers import peer_array

pytestmark = pytest.mark.skipif("shm" not in HOST_PROVIDERS, reason="needs the shm provider as the other library")


class ShmAllocator:
    """Hands out the allocations of a provider it uses directly, releasing them when asked (as an
    allocator whose free is a call, such as nvshmem4py's, would)."""

    def __init__(self, backing):
        self.backing = backing
        self.live = {}

    def allocate(self, nbytes, alignment):
        box = self.backing.allocate(nbytes, alignment)
        self.live[box.address] = box
        return box.address, box.map

    def free(self, address):
        self.backing.free(self.live.pop(address))


@pytest.fixture
def foreign(team):
    allocator = ShmAllocator(_core.make_provider("shm", team))
    provider = aperture.Provider(_core.ForeignProvider("test-foreign", _core.MemoryKind.host, allocator), team)
    yield provider, allocator
    assert not allocator.live, "every allocation was given back to the other library"


def test_tensors_and_views_on_foreign_memory(team, foreign):
    provider, allocator = foreign
    assert (provider.name, provider.memory_kind, provider.is_linear) == ("test-foreign", "host", False)
    n = 1000
    t = provider.zeros(n, torch.int64)
    assert len(allocator.live) == 1 and t.data_ptr() in allocator.live
    t.copy_(torch.tensor([pattern(team.rank, i) for i in range(n)]))
    team.barrier()
    m = aperture.address_map(t)
    assert m.allocation_base == t.data_ptr() and m.allocation_bytes == 8 * n
    for peer in range(team.size):
        np.testing.assert_array_equal(peer_array(m, t, peer), [pattern(peer, i) for i in range(n)], f"peer {peer}")
    view = aperture.address_map(t[100:164])
    assert view.host_peer_bases == [b + 800 for b in m.host_peer_bases] and view.allocation_bytes == 64 * 8
    for peer in range(team.size):
        np.testing.assert_array_equal(peer_array(view, t[100:164], peer), [pattern(peer, 100 + i) for i in range(64)])
    with pytest.raises(aperture.Error, match="lie in no live allocation of this provider"):
        provider._core.symmetric_address_map(t.data_ptr() + 8 * n, 8)
    team.barrier()
    provider.free(t)
    assert not allocator.live
    with pytest.raises(aperture.Error, match="was freed"):
        provider.free(t)


def test_the_communicator_allocates_from_it(team, foreign):
    provider, allocator = foreign
    n = 4096 + 3
    with aperture.Communicator(team, provider) as comm:
        assert allocator.live, "the Communicator's scratch is the other library's memory"
        for symmetric in (True, False):
            t = provider.zeros(n, torch.float64) if symmetric else torch.zeros(n, dtype=torch.float64)
            t.copy_(torch.tensor([float(pattern(team.rank, i)) for i in range(n)], dtype=torch.float64))
            comm.all_reduce(t)
            expected = [float(sum(pattern(r, i) for r in range(team.size))) for i in range(n)]
            np.testing.assert_array_equal(t.numpy(), expected, f"symmetric={symmetric}")
            if symmetric:
                provider.free(t)


def test_a_bad_allocator_is_an_error(team):
    class Wrong(ShmAllocator):
        def allocate(self, nbytes, alignment):  # the map of another size than asked
            address, m = super().allocate(nbytes + 8, alignment)
            return address, m

    allocator = Wrong(_core.make_provider("shm", team))
    provider = aperture.Provider(_core.ForeignProvider("wrong", _core.MemoryKind.host, allocator), team)
    with pytest.raises(aperture.Error, match="wrong allocate: the allocator returned 64 bytes at .* a map of 72 bytes"):
        provider.empty(8, torch.int64)
    for box in list(allocator.live.values()):
        allocator.backing.free(box)
