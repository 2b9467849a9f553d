"""aperture.allocators.ForeignAllocator: memory another library allocates, brought in by its table
(the way torch symmetric memory becomes aperture.torch_symmetric_provider and
aperture.from_torch_symmetric): the provider over it, the C++ code that allocates from a provider
(the Communicator here) running on it, maps of its tensors, and the checks (the base class's and
the C++ ForeignProvider's). Here "another library" is an shm provider used directly, so the same
tests run on CPUs in CI, at every rank count; the torch version is tested on the GPU
(test_gpu.py, test_overlapped_gemm.py)."""

import numpy as np
import pytest
import torch

import aperture
from aperture import _core
from aperture.allocators import ForeignAllocator, ForeignBuffer
from conftest import HOST_PROVIDERS, pattern
from peers import peer_array

pytestmark = pytest.mark.skipif("shm" not in HOST_PROVIDERS, reason="needs the shm provider as the other library")


class ShmBuffers(ForeignAllocator):
    """'Another library': an shm provider's allocations, released when asked (as an allocator
    whose free is a call, such as nvshmem4py's, would)."""

    name = "test-foreign"
    memory_kind = "host"

    def __init__(self, team):
        super().__init__()
        self.backing = _core.make_provider("shm", team)
        self.live = {}

    def _buffer(self, box):
        m = box.map
        return ForeignBuffer(m.local_rank, m.host_peer_bases, box.bytes, owner=None)  # `live` holds the memory

    def allocate_buffer(self, nbytes, alignment):
        box = self.backing.allocate(nbytes, alignment)
        self.live[box.address] = box
        return self._buffer(box)

    def buffer_of(self, tensor):
        for address, box in self.live.items():
            if address <= tensor.data_ptr() < address + box.bytes:
                return self._buffer(box)
        raise LookupError("not this library's memory")

    def free_buffer(self, address):
        self.backing.free(self.live.pop(address))


@pytest.fixture
def foreign(team):
    allocator = ShmBuffers(team)
    provider = allocator.provider(team)
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


def test_the_map_of_a_tensor_the_library_allocated(team, foreign):
    provider, allocator = foreign
    n = 512
    t = provider.zeros(n, torch.int64)
    t.copy_(torch.tensor([pattern(team.rank, i) for i in range(n)]))
    team.barrier()
    view = t[128:256]
    m = allocator.map_of(view)  # the base class's map, from the library's own table
    assert m.host_peer_bases == aperture.address_map(view).host_peer_bases
    assert m.allocation_base == view.data_ptr() and m.allocation_bytes == 128 * 8
    for peer in range(team.size):
        np.testing.assert_array_equal(peer_array(m, view, peer), [pattern(peer, 128 + i) for i in range(128)])
    with pytest.raises(aperture.Error, match=r"test-foreign: 4104 bytes at .* are not inside the library's buffer"):
        allocator._core_map(allocator.buffer_of(t), t.data_ptr(), 8 * n + 8)
    team.barrier()
    provider.free(t)
    with pytest.raises(aperture.Error, match="already serves a provider"):
        allocator.provider(team)


def test_a_bad_library_is_an_error(team):
    class Short(ShmBuffers):  # a buffer smaller than asked
        name = "short"

        def allocate_buffer(self, nbytes, alignment):
            return super().allocate_buffer(nbytes, alignment)._replace(size=nbytes - 8)

    class OtherGroup(ShmBuffers):  # a group of another size than the team
        name = "other-group"

        def allocate_buffer(self, nbytes, alignment):
            buffer = super().allocate_buffer(nbytes, alignment)
            return buffer._replace(bases=buffer.bases + [buffer.bases[0]])

    class WrongMap(ShmBuffers):  # past the base class: the C++ ForeignProvider's own check
        name = "wrong"

        def allocate(self, nbytes, alignment):
            address, m = super().allocate(nbytes + 8, alignment)
            return address, m

    cases = [(Short, aperture.ErrorCode.invalid_argument, r"short: 64 bytes at .* are not inside the library's buffer"),
             (OtherGroup, aperture.ErrorCode.mismatch, rf"the library's rank {team.rank} of {team.size + 1} is not the team's"),
             (WrongMap, aperture.ErrorCode.internal, r"wrong allocate: the allocator returned 64 bytes at .* a map of 72 bytes")]
    for cls, code, message in cases:
        allocator = cls(team)
        provider = allocator.provider(team)
        with pytest.raises(aperture.Error, match=message) as e:
            provider.empty(8, torch.int64)
        assert e.value.code == code, cls.__name__
        for box in list(allocator.live.values()):
            allocator.backing.free(box)
