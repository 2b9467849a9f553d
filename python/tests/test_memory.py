"""Providers, tensors and address maps on host memory, at any number of ranks."""

import numpy as np
import pytest
import torch

import aperture
from conftest import pattern
from peers import peer_array


def test_team_matches_the_launcher(team):
    import os
    assert 0 <= team.rank < team.size
    assert 0 <= team.local_rank < team.local_size <= team.size
    for variable in ("APERTURE_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if variable in os.environ:
            assert team.size == int(os.environ[variable])
    team.barrier()


def test_every_available_provider_is_a_known_name():
    known = {"default", "shm", "mpi-window", "openshmem", "cuda-ipc", "cuda-vmm", "nvshmem", "nccl"}
    names = aperture.available_providers()
    assert "shm" in names and set(names) <= known
    statuses = {name: (compiled, available, why) for name, compiled, available, why in aperture.provider_statuses()}
    assert set(statuses) >= known - {"default"}
    for name in names:
        if name != "default":
            assert statuses[name][1], name


def test_provider_names_itself(host_provider):
    assert host_provider.memory_kind == "host"
    assert host_provider.name in aperture.available_providers()


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.int32, torch.float64])
def test_zeros_is_a_cpu_tensor_every_peer_reads(team, host_provider, dtype):
    n = 3 * 351
    t = host_provider.zeros((3, n // 3), dtype)
    assert isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dtype == dtype and t.shape == (3, n // 3)
    assert bool((t == 0).all())
    flat = t.view(-1)
    flat.copy_(torch.tensor([pattern(team.rank, i) for i in range(n)], dtype=dtype))
    team.barrier()
    m = aperture.address_map(t)
    assert m.local_rank == team.rank and m.world_size == team.size
    assert m.allocation_base == t.data_ptr() and m.allocation_bytes == n * t.element_size()
    name = str(dtype).replace("torch.", "")
    for peer in range(team.size):
        seen = peer_array(m, flat, peer, name)
        expected = np.array([pattern(peer, i) for i in range(n)], dtype=name)
        np.testing.assert_array_equal(seen, expected, err_msg=f"peer {peer}")
    team.barrier()  # nobody frees while a peer still reads
    host_provider.free(t)


def test_empty_of_any_shape_and_zero_bytes(team, host_provider):
    for shape in [(0,), (5,), (2, 3, 4), 7]:
        t = host_provider.empty(shape, "int32")
        assert tuple(t.shape) == ((shape,) if isinstance(shape, int) else shape)
        assert aperture.address_map(t).allocation_bytes == t.numel() * 4
        host_provider.free(t)


def test_peer_bases_table_is_an_int64_cpu_tensor(team, host_provider):
    t = host_provider.zeros(64, torch.int64)
    m = aperture.address_map(t)
    bases = m.peer_bases
    assert isinstance(bases, torch.Tensor) and bases.dtype == torch.int64 and bases.device.type == "cpu"
    assert bases.shape == (team.size,)
    assert bases.tolist() == m.host_peer_bases
    assert bases[team.rank].item() == t.data_ptr()
    assert m.all_direct and m.indirect_peers == []
    assert all(m.is_direct(r) for r in range(team.size))
    # Every peer's table, gathered: peer p's own entry is the address p's tensor has in p, and
    # no entry is 0 (every copy direct). The other entries are p's mappings of its peers' copies,
    # which differ between processes; peer_array() reads through them in the tests below.
    all_bases = torch.zeros(team.size * team.size, dtype=torch.int64)
    own = torch.zeros(team.size, dtype=torch.int64)
    with aperture.Communicator(team, host_provider) as comm:
        comm.all_gather(all_bases, bases.clone())
        comm.all_gather(own, torch.tensor([t.data_ptr()], dtype=torch.int64))
    tables = all_bases.view(team.size, team.size)
    for peer in range(team.size):
        assert tables[peer, peer].item() == own[peer].item(), f"peer {peer}'s table misplaces its own copy"
        assert bool((tables[peer] != 0).all()), f"peer {peer}'s table has an entry 0: {tables[peer].tolist()}"
    assert tables[team.rank].tolist() == bases.tolist()
    host_provider.free(t)


def test_map_of_a_view_is_shifted_to_the_view(team, host_provider):
    n = 256
    t = host_provider.zeros((n,), torch.int64)
    t.copy_(torch.tensor([pattern(team.rank, i) for i in range(n)]))
    team.barrier()
    view = t[100:164]
    m = aperture.address_map(view)
    assert m.allocation_base == view.data_ptr()
    assert m.allocation_bytes == 64 * 8
    assert m.owns(view) and not m.owns(t)
    for peer in range(team.size):
        np.testing.assert_array_equal(peer_array(m, view, peer), [pattern(peer, 100 + i) for i in range(64)])
    # a strided view spans from its first to its last element
    stride = aperture.address_map(t[10:20:3])
    assert stride.allocation_bytes == (3 * 3 + 1) * 8
    team.barrier()
    host_provider.free(t)


def test_congruent_says_whether_every_entry_lies_at_one_offset_modulo_16(team, host_provider):
    t = host_provider.zeros(64, torch.int64)
    bases = aperture.address_map(t).host_peer_bases
    assert aperture.address_map(t).congruent  # aperture's allocations are at least 256-byte aligned
    assert aperture.address_map(t[3:]).congruent  # a view shifts every entry alike
    if team.size > 1:
        other = (team.rank + 1) % team.size
        shifted = list(bases)
        shifted[other] += 8  # another allocator's table, one entry 8 bytes off
        assert not aperture.from_table(team.rank, shifted, 64).congruent
        holes = list(bases)
        holes[other] = 0  # a peer the table does not reach does not count
        assert aperture.from_table(team.rank, holes, 64).congruent
    team.barrier()
    host_provider.free(t)


def test_tensor_outlives_the_provider_reference(team):
    # The tensor holds its allocation, which holds the provider: dropping the last Python
    # reference to the provider leaves the memory valid until free.
    prov = aperture.make_provider("shm", team)
    t = prov.zeros(32, torch.int64)
    del prov
    import gc
    gc.collect()
    t.fill_(team.rank + 5)
    assert int(t.sum()) == 32 * (team.rank + 5)
    owner = aperture.memory._registry.find("test", t).provider
    owner.free(t)


def test_from_table_describes_memory_of_another_allocator(team, host_provider):
    t = host_provider.zeros(128, torch.int64)
    t.copy_(torch.tensor([pattern(team.rank, i) for i in range(128)]))
    team.barrier()
    bases = aperture.address_map(t).host_peer_bases
    for table in (bases, torch.tensor(bases, dtype=torch.int64), np.array(bases, dtype=np.int64)):
        m = aperture.from_table(team.rank, table, 128 * 8)
        assert m.host_peer_bases == bases and m.peer_bases.tolist() == bases
        assert m.allocation_base == t.data_ptr() and m.allocation_bytes == 1024
        for peer in range(team.size):
            np.testing.assert_array_equal(peer_array(m, t, peer), [pattern(peer, i) for i in range(128)])
    # a peer the table does not reach is refused, as in C++
    if team.size > 1:
        other = (team.rank + 1) % team.size
        holes = list(bases)
        holes[other] = 0
        m = aperture.from_table(team.rank, holes, 1024)
        assert not m.is_direct(other) and m.indirect_peers == [other] and not m.all_direct
        with pytest.raises(aperture.Error, match="not directly addressable") as e:
            m.translate(t, other)
        assert e.value.code == aperture.ErrorCode.invalid_argument
    team.barrier()
    host_provider.free(t)


def test_two_providers_at_once(team, host_provider):
    other = aperture.make_provider("shm", team)
    a = host_provider.zeros(16, torch.int64)
    b = other.zeros(16, torch.int64)
    assert aperture.address_map(a).allocation_base == a.data_ptr()
    assert aperture.address_map(b).allocation_base == b.data_ptr()
    other.free(b)
    host_provider.free(a)


def test_default_provider_and_unavailable_ones(team):
    prov = aperture.make_provider("default", team)
    assert prov.name == aperture.default_provider_name()
    t = prov.zeros(8, torch.int64)
    assert aperture.address_map(t).allocation_base == t.data_ptr()
    prov.free(t)
    for name, compiled, available, why in aperture.provider_statuses():
        if not available:  # known, but not here: refused saying why, with the code to branch on
            with pytest.raises(aperture.Error) as e:
                aperture.make_provider(name, team)
            assert e.value.code == aperture.ErrorCode.unavailable and name in str(e.value)


def test_the_host_reaches_ranks_of_other_nodes_through_the_engine(team, host_provider):
    # AddressMap.engine_put / engine_get: host memory of this process to and from a peer's copy,
    # for peers whose table entry is 0 (other nodes, under mpirun; python-test.sh runs this file's
    # test at 2x2 nodes). Every rank puts a block of its own into every indirect peer's copy, at
    # the block of the sender, then gets every indirect peer's own block back.
    me, world, n = team.rank, team.size, 300
    t = host_provider.zeros((world, 2, n), torch.int64)  # [sender][0: put by sender, 1: owner's own]
    t[me, 1] = torch.arange(n) * 3 + me * 100003  # this rank's own block
    m = aperture.address_map(t)
    indirect = m.indirect_peers
    team.barrier()
    for peer in range(world):
        if peer == me:
            continue
        if peer not in indirect:
            with pytest.raises(aperture.Error, match="reachable by load/store"):
                m.engine_put(t[me, 0], torch.zeros(n, dtype=torch.int64), peer)
            continue
        assert m.has_engine, "a peer of another node and no engine: the job was not started by mpirun"
        m.engine_put(t[me, 0], torch.arange(n) * 7 + me * 1000 + peer, peer)
        got = torch.full((n,), -1, dtype=torch.int64)
        m.engine_get(got, t[peer, 1], peer)  # peer's own block, in peer's copy
        assert torch.equal(got, torch.arange(n) * 3 + peer * 100003), f"engine_get from rank {peer}"
        for bad, words in [((t[me, 0], torch.zeros(n - 1, dtype=torch.int64)), "as many bytes"),
                           ((t[me, 0, ::2], torch.zeros(n // 2, dtype=torch.int64)), "not contiguous"),
                           ((torch.zeros(n, dtype=torch.int64), torch.zeros(n, dtype=torch.int64)), "do not lie")]:
            with pytest.raises(aperture.Error, match=words):
                m.engine_put(*bad, peer)
    team.barrier()
    for sender in range(world):
        if sender in indirect:
            assert torch.equal(t[sender, 0], torch.arange(n) * 7 + sender * 1000 + me), f"engine_put by {sender}"
        elif sender != me:
            assert torch.equal(t[sender, 0], torch.zeros(n, dtype=torch.int64)), "a direct peer's block was written"
    with pytest.raises(aperture.Error, match="not a rank of this map"):
        m.engine_get(torch.zeros(n, dtype=torch.int64), t[me, 1], world)
    team.barrier()
    host_provider.free(t)


def test_one_version_for_the_package_its_metadata_and_the_library():
    # aperture.__version__ is the C++ library's; pyproject.toml's (the metadata) must say the same,
    # and so must the program the package carries.
    import importlib.metadata
    import subprocess
    assert aperture.__version__ == importlib.metadata.version("aperture")
    shown = subprocess.run([aperture.program, "--version"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout.split() == ["aperture", aperture.__version__], shown
