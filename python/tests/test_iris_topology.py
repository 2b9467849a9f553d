"""iris.host.distributed.topology (and iris.topology) on aperture: discovery in this job's ranks,
the map built from every rank's report, and the NVML readings, checked against fakes here and
against torch.cuda on a GPU (the "gpu" tests).

Runs at one rank without a launcher and in every rank of a job (scripts/pytest-ranks.sh N, and
with --nodes K, where the map must see K nodes). Each rank's report carries its own rank, so a
report given to the wrong rank shows.
"""

import hashlib
import json
import socket
import sys
import types

import pytest
import torch

from spawned_job import child_environment, one_rank_job_only, run_spawned_job

import aperture.iris.host.distributed.topology as topology
from aperture.iris.host.distributed import _nvml
from aperture.iris.host.distributed.topology import (FabricInfo, GPUInfo, InterconnectLevel, IntraNodeLinkType,
                                                     TopologyDiscovery, TopologyMap)


@pytest.fixture(autouse=True)
def one_team_per_process(team, monkeypatch):
    """Discovery without a context takes aperture.iris's process Team: make it the tests' own, as a
    launcher admits each rank into the job once."""
    from aperture.iris import _ranks

    monkeypatch.setattr(_ranks, "_TEAM", team)


def _hostnames(team):
    """Every rank's host name, through the Team alone (not the code under test)."""
    mine = socket.gethostname().encode().ljust(256, b"\0")
    return [h.rstrip(b"\0").decode() for h in team.allgather(mine)]


def _discovered():
    discovery = TopologyDiscovery()
    return discovery, discovery.discover()


# ---- discovery in this job ---------------------------------------------------------------------

def test_discovery_sees_this_jobs_ranks_and_nodes(team):
    discovery, topo = _discovered()
    assert isinstance(topo, TopologyMap) and discovery.topology is topo
    assert (discovery.rank, discovery.world_size) == (team.rank, team.size)
    assert topo.world_size == team.size and sorted(topo.gpu_info) == list(range(team.size))
    hosts = _hostnames(team)
    for rank, info in topo.gpu_info.items():
        assert info.global_rank == rank, (rank, info)
        assert info.hostname.startswith(hosts[rank]), (rank, info.hostname, hosts[rank])
    # Two ranks share a node name exactly where aperture's Team puts them on one node.
    for a in range(team.size):
        for b in range(team.size):
            same_name = topo.gpu_info[a].hostname == topo.gpu_info[b].hostname
            assert same_name == (team.node_of(a) == team.node_of(b)), (a, b, topo.gpu_info[a].hostname,
                                                                      topo.gpu_info[b].hostname)
    assert topo.num_nodes == len(topo.nodes) == team.node_count
    node = topo.nodes[topo.gpu_info[team.rank].hostname]
    assert node.ranks == [r for r in range(team.size) if team.node_of(r) == team.node]
    assert node.num_ranks == team.local_size
    assert topo.gpu_info[team.rank].local_rank == team.local_rank
    # Split nodes of one host are told apart by aperture's node number.
    if len(set(hosts)) < team.node_count:
        assert topo.gpu_info[team.rank].hostname == f"{hosts[team.rank]}/node{team.node}"
    else:
        assert topo.gpu_info[team.rank].hostname == hosts[team.rank]


def test_every_rank_builds_the_same_map(team):
    _, topo = _discovered()
    mine = json.dumps({r: info.to_dict() for r, info in topo.gpu_info.items()}, sort_keys=True).encode()
    digest = hashlib.sha256(mine).digest()
    assert set(team.allgather(digest)) == {digest}


def test_groups_and_heap_plan_follow_the_nodes(team):
    discovery, topo = _discovered()
    node_ranks = [[r for r in range(team.size) if team.node_of(r) == n] for n in range(team.node_count)]
    groups = discovery.get_communication_groups()
    assert sorted(groups[InterconnectLevel.INTRA_NODE]) == node_ranks
    assert groups[InterconnectLevel.INTER_NODE_RDMA] == [list(range(team.size))]
    no_fabric = not topo.fabric_domains
    if no_fabric:  # every CPU, and GPUs outside a multi-host NVLink fabric
        assert groups[InterconnectLevel.INTRA_RACK_FABRIC] == []
    plan = discovery.get_heap_distribution_plan()
    assert sorted(plan) == list(range(team.size))
    for rank, entry in plan.items():
        same_node = {r for r in range(team.size) if team.node_of(r) == team.node_of(rank)} - {rank}
        assert entry["ipc_peers"] == sorted(same_node), (rank, entry)
        if no_fabric:
            assert entry["fabric_peers"] == [] and entry["fabric_domain"] == ""
            assert entry["rdma_peers"] == sorted(set(range(team.size)) - same_node - {rank}), (rank, entry)
        assert entry["local_rank"] == sorted(same_node | {rank}).index(rank)
        for peer in range(team.size):
            level = topo.get_interconnect_level(rank, peer)
            assert level == topo.get_interconnect_level(peer, rank)
            assert (level == InterconnectLevel.INTRA_NODE) == (team.node_of(rank) == team.node_of(peer))


@pytest.mark.no_gpu
def test_without_a_gpu_each_rank_reports_its_host_only(team):
    _, topo = _discovered()
    for rank, info in topo.gpu_info.items():
        assert (info.gpu_id, info.pci_bus_id, info.device_name, info.vendor) == (-1, "unknown", "cpu", "unknown")
        assert (info.total_memory_mb, info.numa_node, info.uuid, info.fabric_info) == (0, -1, "", FabricInfo())
    for node in topo.nodes.values():
        assert node.num_gpus == 0 and node.unique_gpu_ids == [] and node.unique_pci_ids == []
        assert node.link_types is None and node.p2p_access is None
        assert node.get_link_type(0, 1) == IntraNodeLinkType.UNKNOWN
    assert topo.fabric_domains == {}
    assert "no GPU" in topo.summary()


def test_all_gather_strings_over_the_team(team):
    # Lengths differ per rank (one empty), and one is not ASCII: the padding must not leak.
    mine = "" if team.rank == 1 else f"rank {team.rank} é " + "x" * (37 * team.rank)
    got = topology._all_gather_strings(mine, team.size)
    assert got == ["" if r == 1 else f"rank {r} é " + "x" * (37 * r) for r in range(team.size)]
    with pytest.raises(ValueError, match="world_size"):
        topology._all_gather_strings(mine, team.size + 1)


def test_discovery_from_an_iris_context(team):
    import aperture.iris as iris

    ctx = iris.iris(1 << 20, team=team)
    discovery = TopologyDiscovery(ctx)
    assert (discovery.rank, discovery.world_size, discovery.gpu_id) == (ctx.cur_rank, ctx.num_ranks, ctx.gpu_id)
    topo = discovery.discover()
    assert topo.gpu_info[ctx.cur_rank].gpu_id == ctx.gpu_id
    assert sorted(topo.gpu_info) == list(range(ctx.num_ranks))


def test_asking_before_discover_names_it():
    discovery = TopologyDiscovery.__new__(TopologyDiscovery)
    for ask in (discovery.get_communication_groups, discovery.get_heap_distribution_plan):
        with pytest.raises(RuntimeError, match="discover"):
            ask()


def test_older_import_path_is_the_same_module():
    import aperture.iris.topology as older

    assert older is topology


@one_rank_job_only("runs its own two-rank job")
def test_discovery_over_torch_distributed_in_spawned_ranks(tmp_path):
    # Iris's shape: torch.multiprocessing workers on gloo over tcp://, no launcher, `import iris`.
    worker = """
        import socket
        import torch.distributed as dist

        def worker(rank, world, url):
            dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
            from iris.host.distributed.topology import TopologyDiscovery, _all_gather_strings
            import iris.topology

            assert _all_gather_strings("r" * (rank + 3), world) == ["r" * (r + 3) for r in range(world)]
            discovery = TopologyDiscovery()
            topo = discovery.discover()
            assert (discovery.rank, discovery.world_size, topo.world_size, topo.num_nodes) == (rank, world, world, 1)
            assert [topo.gpu_info[r].global_rank for r in range(world)] == list(range(world))
            assert [topo.gpu_info[r].local_rank for r in range(world)] == list(range(world))
            assert topo.gpu_info[rank].hostname == socket.gethostname()
            assert discovery.get_heap_distribution_plan()[rank]["ipc_peers"] == [r for r in range(world) if r != rank]
            assert iris.topology.TopologyDiscovery is TopologyDiscovery
            dist.destroy_process_group()
    """
    env = child_environment(CUDA_VISIBLE_DEVICES="", APERTURE_PROVIDER="shm")
    run_spawned_job(tmp_path / "topology.py", worker, 2, env, timeout=120)


# ---- the map built from reports -----------------------------------------------------------------

def _report(rank, host, gpu_id=-1, pci="unknown", fabric=None, aperture_node=0, links=None):
    info = GPUInfo(global_rank=rank, local_rank=99, hostname=host, gpu_id=gpu_id, pci_bus_id=pci, device_name="d",
                   total_memory_mb=1, numa_node=-1, vendor="nvidia", uuid=f"u{rank}",
                   fabric_info=fabric or FabricInfo())
    return {"gpu": info.to_dict(), "aperture_node": aperture_node,
            "node": {"has_ib": rank == 0, "ib_devices": ["mlx5_0"] if rank == 0 else [], "link_types": links,
                     "p2p_access": None}}


def test_map_names_split_nodes_of_one_host_by_aperture_node():
    reports = [_report(r, "h", aperture_node=r // 2) for r in range(4)]
    topo = topology._build_map(4, reports)
    assert sorted(topo.nodes) == ["h/node0", "h/node1"]
    assert [topo.gpu_info[r].hostname for r in range(4)] == ["h/node0", "h/node0", "h/node1", "h/node1"]
    assert [topo.gpu_info[r].local_rank for r in range(4)] == [0, 1, 0, 1]
    assert topo.get_interconnect_level(1, 2) == InterconnectLevel.INTER_NODE_RDMA
    # Hosts that agree with aperture's nodes keep their names; so do reports without a node.
    assert sorted(topology._build_map(2, [_report(0, "a"), _report(1, "b", aperture_node=1)]).nodes) == ["a", "b"]
    assert sorted(topology._build_map(2, [_report(0, "a", aperture_node=None),
                                          _report(1, "a", aperture_node=None)]).nodes) == ["a"]


def test_map_counts_gpus_by_pci_and_takes_the_lowest_ranks_node_view():
    links = [[-1, 1], [1, -1]]
    reports = [_report(0, "h", 0, "0000:41:00.0", links=links), _report(1, "h", 0, "0000:42:00.0"),
               _report(2, "h", 1, "0000:42:00.0"), _report(3, "g")]
    topo = topology._build_map(4, reports)
    h, g = topo.nodes["h"], topo.nodes["g"]
    assert (h.ranks, h.gpu_ids, h.unique_gpu_ids, h.unique_pci_ids) == ([0, 1, 2], [0, 0, 1], [0, 1],
                                                                         ["0000:41:00.0", "0000:42:00.0"])
    assert (h.num_gpus, h.num_ranks, h.has_infiniband, h.ib_devices) == (2, 3, True, ["mlx5_0"])
    assert h.get_link_type(0, 1) == IntraNodeLinkType.NVSWITCH and h.get_link_type(1, 1) == IntraNodeLinkType.SELF
    assert (g.num_gpus, g.has_infiniband, g.link_types) == (0, False, None)
    assert "3 ranks share them" in topo.summary()


def test_map_groups_nodes_into_fabric_domains():
    ab = FabricInfo("aa" * 16, 5)
    reports = [_report(0, "a", 0, "0000:01:00.0", ab), _report(1, "b", 0, "0000:01:00.0", ab, 1),
               _report(2, "c", 0, "0000:01:00.0", None, 2)]
    topo = topology._build_map(3, reports)
    assert topo.fabric_domains == {ab.domain_key: ["a", "b"]}
    assert topo.nodes["a"].fabric_domain_key == ab.domain_key and topo.nodes["c"].fabric_domain_keys == []
    assert [topo.get_interconnect_level(0, r) for r in range(3)] == [
        InterconnectLevel.INTRA_NODE, InterconnectLevel.INTRA_RACK_FABRIC, InterconnectLevel.INTER_NODE_RDMA]
    discovery = TopologyDiscovery.__new__(TopologyDiscovery)
    discovery._topology = topo
    assert discovery.get_communication_groups()[InterconnectLevel.INTRA_RACK_FABRIC] == [[0, 1], [2]]
    assert discovery.get_heap_distribution_plan()[1] == {
        "ipc_peers": [], "fabric_peers": [0], "rdma_peers": [2], "node": "b", "local_rank": 0, "gpu_id": 0,
        "fabric_domain": ab.domain_key}


def test_link_and_p2p_lookups_refuse_indices_outside_the_matrix():
    node = topology.NodeInfo("h", link_types=[[-1, 0], [0, -1]], p2p_access=[[True, False], [False, True]])
    assert node.get_link_type(0, 1) == IntraNodeLinkType.NVLINK
    assert node.get_link_type(-1, 0) == IntraNodeLinkType.UNKNOWN
    assert node.get_link_type(0, 2) == IntraNodeLinkType.UNKNOWN
    assert node.can_p2p_access(0, 1) is False and node.can_p2p_access(1, 1) is True
    assert node.can_p2p_access(-1, 0) is False and node.can_p2p_access(2, 0) is False


# ---- NVML readings, against fakes --------------------------------------------------------------

def _fake_nvml(links, ancestor_levels, remote_types):
    """An NVML whose GPUs g0, g1, ... sit at PCI 0000:0k:00.0: links[g] lists (state, remote PCI
    bus id) per NVLink, remote_types[g] each link's far end, ancestor_levels the PCIe level of a
    pair (a pair not named fails, as NVML does where it cannot tell)."""
    pci = {g: f"0000:0{i}:00.0" for i, g in enumerate(links)}
    by_pci = {p: g for g, p in pci.items()}

    class NVMLError(Exception):
        pass

    def link(handle, index):
        if index >= len(links[handle]):
            raise NVMLError("no such link")
        return links[handle][index]

    def ancestor(a, b):
        if frozenset((a, b)) not in ancestor_levels:
            raise NVMLError("not supported")
        return ancestor_levels[frozenset((a, b))]

    nvml = types.SimpleNamespace(
        NVMLError=NVMLError,
        nvmlDeviceGetHandleByPciBusId=lambda bus: by_pci[bus.decode()],
        nvmlDeviceGetNvLinkState=lambda h, i: link(h, i)[0],
        nvmlDeviceGetNvLinkRemotePciInfo=lambda h, i: types.SimpleNamespace(busId=link(h, i)[1].encode()),
        nvmlDeviceGetNvLinkRemoteDeviceType=lambda h, i: remote_types[h][i],
        nvmlDeviceGetTopologyCommonAncestor=ancestor)
    return nvml, list(pci.values())


def test_nvidia_links_nvlink_nvswitch_and_pcie_levels(monkeypatch):
    # g0-g1 one direct NVLink (g0's second link down; g1 names g0 with NVML's 8-digit domain);
    # g2 and g3 on NVSwitches; g4 on PCIe only.
    switch = _nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
    links = {"g0": [(1, "0000:01:00.0"), (0, "0000:09:00.0")], "g1": [(1, "00000000:00:00.0")],
             "g2": [(1, "0000:aa:00.0")], "g3": [(1, "0000:ab:00.0")], "g4": []}
    remote = {"g0": [0, 0], "g1": [0], "g2": [switch], "g3": [switch], "g4": []}
    levels = {frozenset(("g0", "g2")): 10, frozenset(("g0", "g3")): 20, frozenset(("g0", "g4")): 30,
              frozenset(("g1", "g4")): 40, frozenset(("g2", "g4")): 50, frozenset(("g1", "g2")): 7}
    nvml, pcis = _fake_nvml(links, levels, remote)
    monkeypatch.setattr(topology, "_nvml", lambda: nvml)
    T = IntraNodeLinkType
    got = topology._parse_nvidia_topo(pcis)
    assert got == [
        [T.SELF, T.NVLINK, T.PCIE_SWITCH, T.PCIE_SWITCH, T.PCIE_HOST_BRIDGE],
        [T.NVLINK, T.SELF, T.UNKNOWN, T.UNKNOWN, T.PCIE_NUMA],
        [T.PCIE_SWITCH, T.UNKNOWN, T.SELF, T.NVSWITCH, T.PCIE_SYSTEM],
        [T.PCIE_SWITCH, T.UNKNOWN, T.NVSWITCH, T.SELF, T.UNKNOWN],
        [T.PCIE_HOST_BRIDGE, T.PCIE_NUMA, T.PCIE_SYSTEM, T.UNKNOWN, T.SELF],
    ], got
    # A device NVML cannot find: no matrix at all, rather than a wrong one; likewise without NVML.
    assert topology._parse_nvidia_topo(pcis + ["0000:77:00.0"]) is None
    monkeypatch.setattr(topology, "_nvml", lambda: None)
    assert topology._parse_nvidia_topo(pcis) is None


@pytest.mark.parametrize("state, status, cluster, want", [
    (3, 0, bytes(range(1, 17)), FabricInfo(bytes(range(1, 17)).hex(), 9)),
    (2, 0, bytes(range(1, 17)), FabricInfo()),  # registration still in progress
    (3, 5, bytes(range(1, 17)), FabricInfo()),  # registration failed
    (3, 0, bytes(16), FabricInfo()),  # no cluster
])
def test_fabric_info_only_from_a_completed_registration(state, status, cluster, want):
    info = topology._NvmlGpuFabricInfoV3()
    info.state, info.status, info.cliqueId = state, status, 9
    info.clusterUuid[:] = list(cluster)
    assert topology._fabric_info_from_nvml(info) == want


def test_no_fabric_info_off_nvidia_or_without_nvml(monkeypatch):
    assert topology._get_gpu_fabric_info(0, "amd", pci_bus_id="0000:01:00.0") == FabricInfo()
    assert topology._get_gpu_fabric_info(-1, "nvidia") == FabricInfo()
    monkeypatch.setattr(topology, "_nvml", lambda: None)
    assert topology._get_gpu_fabric_info(0, "nvidia", pci_bus_id="0000:01:00.0") == FabricInfo()


def test_pci_bus_ids_normalised_and_visible_devices_mapped(monkeypatch):
    assert topology._normalize_pci_bus_id("00000001:AB:1f.3") == "0001:ab:1f.3"
    assert topology._normalize_pci_bus_id(" 1:02:03.4 ") == "0001:02:03.4"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 1")
    assert [topology._logical_to_physical_gpu_index(i, "nvidia") for i in range(3)] == [3, 1, 2]
    assert topology._logical_to_physical_gpu_index(0, "unknown") == 0


def test_pci_bus_id_by_nvml_index_only_where_the_index_is_known(monkeypatch):
    by_index = {0: "0000:41:00.0", 1: "00000000:42:00.0"}
    fake = types.SimpleNamespace(nvmlDeviceGetHandleByIndex=lambda i: i,
                                 nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=by_index[h].encode()))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert [topology._get_pci_bus_id(i, "nvidia") for i in (0, 1)] == ["0000:42:00.0", "0000:41:00.0"]
    # Devices named by UUID: NVML's index of torch's device is unknown, so NVML is not asked
    # (discovery then takes torch.cuda's PCI id) rather than naming another GPU's.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8c1b2a5e,GPU-0f3e")
    assert topology._get_pci_bus_id(1, "nvidia") == "unknown"
    assert topology._get_pci_bus_id(0, "amd") == "unknown"


@pytest.mark.no_gpu
def test_without_the_driver_no_nvml_is_offered():
    assert _nvml.available() is False
    assert topology._nvml() is None or topology._nvml().__name__ == "pynvml"


# ---- on a GPU -----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here")
def test_gpu_identity_agrees_with_torch_cuda(team):
    discovery, topo = _discovered()
    info = topo.gpu_info[team.rank]
    props = torch.cuda.get_device_properties(discovery.gpu_id)
    assert (info.gpu_id, info.vendor, info.device_name) == (torch.cuda.current_device(), "nvidia", props.name)
    assert info.total_memory_mb == props.total_memory >> 20
    assert info.pci_bus_id == f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    assert info.uuid == f"GPU-{props.uuid}"
    assert info.numa_node >= -1
    assert info.fabric_info.is_valid == bool(info.fabric_info.domain_key)
    node = topo.nodes[info.hostname]
    visible = torch.cuda.device_count()
    assert node.p2p_access is not None and len(node.p2p_access) == visible
    assert node.link_types is not None and len(node.link_types) == visible, node.link_types
    for i in range(visible):
        assert node.get_link_type(i, i) == IntraNodeLinkType.SELF
        for j in range(visible):
            assert node.link_types[i][j] == node.link_types[j][i]
    print(topo.summary(), "\nlinks:", node.link_types, "\nfabric:", info.fabric_info)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here")
def test_nvml_through_ctypes_reads_what_torch_reports():
    assert _nvml.available()
    pci = topology._torch_pci_bus_id(0)
    _nvml.nvmlInit()
    try:
        handle = _nvml.nvmlDeviceGetHandleByPciBusId(pci)
        assert topology._normalize_pci_bus_id(_nvml.nvmlDeviceGetPciInfo(handle).busId.decode()) == pci
        assert _nvml.nvmlDeviceGetUUID(handle) == f"GPU-{torch.cuda.get_device_properties(0).uuid}"
        if torch.cuda.device_count() > 1:  # NVML answers for two GPUs (one with itself: "Not Supported" on an H100)
            other = _nvml.nvmlDeviceGetHandleByPciBusId(topology._torch_pci_bus_id(1))
            assert int(_nvml.nvmlDeviceGetTopologyCommonAncestor(handle, other)) in topology._NVML_COMMON_ANCESTOR_LINK
        with pytest.raises(_nvml.NVMLError, match="nvmlDeviceGetHandleByPciBusId_v2"):
            _nvml.nvmlDeviceGetHandleByPciBusId("00ff:ff:1f.7")
    finally:
        _nvml.nvmlShutdown()
