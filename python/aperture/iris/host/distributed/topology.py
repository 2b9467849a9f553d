"""``iris.host.distributed.topology`` (older Iris: ``iris.topology``): where every rank's device sits.

``TopologyDiscovery(iris_ctx=None).discover()`` is collective: each rank describes its own device
and its node, the descriptions are all-gathered, and every rank builds the same ``TopologyMap``:
ranks grouped into nodes, nodes into fabric domains (NVLink domains that span hosts), and every
pair of ranks classed by ``InterconnectLevel``. ``get_communication_groups()`` and
``get_heap_distribution_plan()`` read the map. Names, fields, enum values and dict layouts are
Iris's (docs/IRIS.md, the name table); the code is aperture's.

What is read on NVIDIA, and from where:
  * device name and memory: torch.cuda; PCI bus id and UUID: NVML where it answers, else
    torch.cuda's properties;
  * NUMA node: the PCI device's ``numa_node`` in sysfs;
  * fabric domain (``FabricInfo``): NVML's ``nvmlDeviceGetGpuFabricInfoV`` (clusterUuid, cliqueId),
    filled where NVML reports a completed fabric registration with a non-zero cluster UUID
    (multi-node NVLink systems); elsewhere empty, as in Iris;
  * links between the node's GPUs: NVML's NVLink state and remote end (NVLINK to a GPU, NVSWITCH
    through a switch), else its PCIe common ancestor (PCIE_SWITCH, PCIE_HOST_BRIDGE, PCIE_NUMA,
    PCIE_SYSTEM); UNKNOWN where NVML gives no answer, None without NVML; P2P from torch.cuda;
  * InfiniBand devices: ``/sys/class/infiniband``.
NVML is pynvml where installed, else the driver's library through ctypes (``_nvml``). Without a
GPU nothing is read from a GPU library: each rank reports its host (hostname, node, InfiniBand
devices) with ``gpu_id`` -1, and discovery never fails for it.

Ranks and nodes are aperture's: the ranks of torch.distributed when it is initialised, else of the
launcher's job (aperture launch, mpirun, torchrun) or one rank, with no GPU needed; a node is a
host name, and where aperture's Team places ranks of one host on different nodes (``aperture
launch --nodes K`` on one machine) each node is named ``host/node<k>``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import os
import re
import socket
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
import torch.distributed as dist

from ..._ranks import process_team
from . import _nvml as _nvml_ctypes

# Iris's logger name: programs (and Iris's tests) select topology's messages by it.
logger = logging.getLogger("iris.topology")

UNKNOWN_PCI_BUS_ID = "unknown"


class InterconnectLevel(IntEnum):
    """How two ranks reach each other, nearest first."""

    INTRA_NODE = 0
    INTRA_RACK_FABRIC = 1
    INTER_NODE_RDMA = 2

    def __str__(self):
        return self.name


class IntraNodeLinkType(IntEnum):
    """The link between two GPUs of one node (nvidia-smi topo's classes; AMD's xGMI counts as NVLINK)."""

    SELF = -1
    NVLINK = 0
    NVSWITCH = 1
    PCIE_SWITCH = 2  # nvidia-smi's PIX / PXB
    PCIE_HOST_BRIDGE = 3  # PHB
    PCIE_NUMA = 4  # NODE
    PCIE_SYSTEM = 5  # SYS
    UNKNOWN = 99

    def __str__(self):
        return self.name


@dataclass
class FabricInfo:
    """A GPU's place in a multi-host NVLink fabric: GPUs with one (cluster_uuid, clique_id) reach
    each other over NVLink across hosts. Empty (``is_valid`` False) where the GPU is in no fabric."""

    cluster_uuid: str = ""  # hex of NVML's clusterUuid (AMD: ppod_id)
    clique_id: int = 0  # NVML's cliqueId (AMD: vpod_id)

    @property
    def is_valid(self) -> bool:
        return bool(self.cluster_uuid)

    @property
    def domain_key(self) -> str:
        """Equal for GPUs of one fabric domain; "" (never equal to a domain) without one."""
        return f"{self.cluster_uuid}:{self.clique_id}" if self.is_valid else ""

    def to_dict(self) -> dict:
        return {"cluster_uuid": self.cluster_uuid, "clique_id": self.clique_id}

    @classmethod
    def from_dict(cls, d: dict) -> "FabricInfo":
        return cls(cluster_uuid=d.get("cluster_uuid", ""), clique_id=d.get("clique_id", 0))


@dataclass
class GPUInfo:
    """One rank's device, as that rank saw it. Without a GPU: gpu_id -1, pci_bus_id "unknown"."""

    global_rank: int
    local_rank: int  # the rank's index among its node's ranks
    hostname: str  # the node's name (host/node<k> where aperture splits a host into nodes)
    gpu_id: int  # torch.cuda device index in the rank's process
    pci_bus_id: str  # "0000:41:00.0"
    device_name: str
    total_memory_mb: int
    numa_node: int  # -1 where unknown
    vendor: str  # "nvidia", "amd" or "unknown"
    uuid: str
    fabric_info: FabricInfo = field(default_factory=FabricInfo)

    def to_dict(self) -> dict:
        d = {name: value for name, value in vars(self).items() if name != "fabric_info"}
        d["fabric_info"] = self.fabric_info.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "GPUInfo":
        fields = {name: value for name, value in d.items() if name != "fabric_info"}
        return cls(**fields, fabric_info=FabricInfo.from_dict(d.get("fabric_info", {})))


@dataclass
class NodeInfo:
    """One node: its ranks, their devices, and the links between the node's GPUs. The matrices are
    indexed by gpu_id (several ranks may share a GPU) and are the node's lowest rank's view."""

    hostname: str
    ranks: List[int] = field(default_factory=list)
    gpu_ids: List[int] = field(default_factory=list)  # per rank, in rank order
    unique_gpu_ids: List[int] = field(default_factory=list)
    unique_pci_ids: List[str] = field(default_factory=list)
    num_gpus: int = 0  # physical GPUs (distinct PCI bus ids), not ranks
    num_ranks: int = 0
    has_infiniband: bool = False
    ib_devices: List[str] = field(default_factory=list)
    link_types: Optional[List[List[int]]] = None  # IntraNodeLinkType values
    p2p_access: Optional[List[List[bool]]] = None
    fabric_domain_key: str = ""  # the first of fabric_domain_keys
    fabric_domain_keys: List[str] = field(default_factory=list)

    def get_link_type(self, gpu_id_a: int, gpu_id_b: int) -> IntraNodeLinkType:
        """The link between two of the node's GPUs; UNKNOWN for an index the matrix does not hold."""
        if self.link_types is None:
            return IntraNodeLinkType.UNKNOWN
        if gpu_id_a == gpu_id_b:
            return IntraNodeLinkType.SELF
        if not (_in_matrix(self.link_types, gpu_id_a) and _in_matrix(self.link_types, gpu_id_b)):
            return IntraNodeLinkType.UNKNOWN
        return IntraNodeLinkType(self.link_types[gpu_id_a][gpu_id_b])

    def can_p2p_access(self, gpu_id_a: int, gpu_id_b: int) -> bool:
        """Whether one GPU maps the other's memory; a GPU always reaches itself."""
        if gpu_id_a == gpu_id_b:
            return True
        if self.p2p_access is None:
            return False
        if not (_in_matrix(self.p2p_access, gpu_id_a) and _in_matrix(self.p2p_access, gpu_id_b)):
            return False
        return bool(self.p2p_access[gpu_id_a][gpu_id_b])


def _in_matrix(matrix, index):
    return 0 <= index < len(matrix)


@dataclass
class TopologyMap:
    """The job's topology, the same on every rank after ``TopologyDiscovery.discover()``."""

    world_size: int
    num_nodes: int
    gpu_info: Dict[int, GPUInfo]  # rank -> its device
    nodes: Dict[str, NodeInfo]  # node name -> node
    fabric_domains: Dict[str, List[str]]  # domain_key -> node names
    _node_peers: Dict[int, Set[int]] = field(default_factory=dict)  # caches
    _fabric_domain_peers: Dict[int, Set[int]] = field(default_factory=dict)

    def get_interconnect_level(self, rank_a: int, rank_b: int) -> InterconnectLevel:
        """INTRA_NODE on one node, INTRA_RACK_FABRIC in one fabric domain, else INTER_NODE_RDMA."""
        a, b = self.gpu_info[rank_a], self.gpu_info[rank_b]
        if rank_a == rank_b or a.hostname == b.hostname:
            return InterconnectLevel.INTRA_NODE
        if a.fabric_info.domain_key and a.fabric_info.domain_key == b.fabric_info.domain_key:
            return InterconnectLevel.INTRA_RACK_FABRIC
        return InterconnectLevel.INTER_NODE_RDMA

    def get_node_peers(self, rank: int) -> Set[int]:
        """The other ranks of `rank`'s node."""
        if rank not in self._node_peers:
            node = self.gpu_info[rank].hostname
            self._node_peers[rank] = {r for r, info in self.gpu_info.items() if info.hostname == node} - {rank}
        return self._node_peers[rank]

    def get_fabric_domain_peers(self, rank: int) -> Set[int]:
        """The other ranks of `rank`'s fabric domain, its node's included; none without a domain."""
        if rank not in self._fabric_domain_peers:
            key = self.gpu_info[rank].fabric_info.domain_key
            peers = {r for r, info in self.gpu_info.items() if info.fabric_info.domain_key == key} if key else set()
            self._fabric_domain_peers[rank] = peers - {rank}
        return self._fabric_domain_peers[rank]

    def get_rdma_peers(self, rank: int) -> Set[int]:
        """The ranks reached neither within the node nor through a fabric domain."""
        return set(self.gpu_info) - self.get_node_peers(rank) - self.get_fabric_domain_peers(rank) - {rank}

    def get_ranks_for_node(self, hostname: str) -> List[int]:
        node = self.nodes.get(hostname)
        return sorted(node.ranks) if node is not None else []

    def get_ranks_for_fabric_domain(self, domain_key: str) -> List[int]:
        return sorted(r for node in self.fabric_domains.get(domain_key, []) for r in self.get_ranks_for_node(node))

    def summary(self) -> str:
        """A few lines a person reads: nodes, their ranks and devices, fabric domains."""
        lines = [f"Topology: {self.world_size} rank(s) on {self.num_nodes} node(s), "
                 f"{len(self.fabric_domains)} fabric domain(s)"]
        for name, node in sorted(self.nodes.items()):
            infiniband = ", ".join(node.ib_devices) if node.has_infiniband else "none"
            shared = f"; {node.num_ranks} ranks share them" if node.num_ranks > node.num_gpus > 0 else ""
            fabric = f"; fabric {node.fabric_domain_key}" if node.fabric_domain_key else ""
            lines.append(f"  node {name}: ranks {node.ranks}, {node.num_gpus} GPU(s){shared}; "
                         f"InfiniBand: {infiniband}{fabric}")
            for rank in sorted(node.ranks):
                info = self.gpu_info[rank]
                where = f"GPU {info.gpu_id} {info.device_name}" if info.gpu_id >= 0 else "no GPU"
                lines.append(f"    rank {rank} (local {info.local_rank}): {where}, {info.total_memory_mb} MB, "
                             f"PCI {info.pci_bus_id}, NUMA {info.numa_node}")
        if self.fabric_domains:
            lines.append("  Fabric Domains:")
            for key, names in sorted(self.fabric_domains.items()):
                gpus = sum(self.nodes[n].num_gpus for n in names if n in self.nodes)
                lines.append(f"    {key}: nodes {names}, {gpus} GPU(s)")
        return "\n".join(lines)

    def __str__(self):
        return self.summary()


# ---- identifying devices -----------------------------------------------------------------------

_BDF = re.compile(r"([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")


def _normalize_pci_bus_id(bus_id: str) -> str:
    """"domain:bus:device.function" in lower case with a 4-digit domain (NVML writes 8), found
    anywhere in `bus_id`; `bus_id` stripped and lowered when it holds none."""
    text = bus_id.strip().lower()
    found = _BDF.search(text)
    if found is None:
        return text
    domain, bus, device, function = found.groups()
    return f"{int(domain, 16):04x}"[-4:] + f":{bus}:{device}.{function}"


_VISIBLE_DEVICES = {"nvidia": ("CUDA_VISIBLE_DEVICES",), "amd": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}


def _visible_devices_entry(logical_idx: int, vendor: str) -> Optional[str]:
    """The vendor's visible-devices entry of torch's device `logical_idx`, or None without one."""
    for variable in _VISIBLE_DEVICES.get(vendor, ()):
        entries = [e for e in re.split(r"[,\s]+", os.environ.get(variable, "")) if e]
        if 0 <= logical_idx < len(entries):
            return entries[logical_idx]
    return None


def _logical_to_physical_gpu_index(logical_idx: int, vendor: str) -> int:
    """The driver's index of torch's device `logical_idx`, through the vendor's visible-devices
    list; `logical_idx` itself where the list is absent, too short or names devices by UUID."""
    entry = _visible_devices_entry(logical_idx, vendor)
    return int(entry) if entry is not None and entry.isdigit() else logical_idx


def _pynvml():
    """pynvml, or None (Iris reads device identity through pynvml alone)."""
    try:
        import pynvml
    except ImportError:
        logger.debug("pynvml not available")
        return None
    return pynvml


def _nvml():
    """NVML for fabric and link queries: pynvml, else the driver's library through ctypes, else None."""
    try:
        import pynvml

        return pynvml
    except ImportError:
        return _nvml_ctypes if _nvml_ctypes.available() else None


def _nvml_handle(nvml, gpu_id: int, pci_bus_id: str = ""):
    """NVML's handle of a device, by PCI bus id (immune to CUDA_VISIBLE_DEVICES), else by index."""
    if pci_bus_id and pci_bus_id != UNKNOWN_PCI_BUS_ID:
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(_normalize_pci_bus_id(pci_bus_id).encode())
        except Exception as e:  # noqa: BLE001 - NVML's error types differ between bindings
            logger.debug("NVML has no device at PCI %s: %s", pci_bus_id, e)
    return nvml.nvmlDeviceGetHandleByIndex(_logical_to_physical_gpu_index(gpu_id, "nvidia"))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _get_pci_bus_id(device_idx: int, vendor: str) -> str:
    """The device's PCI bus id from the vendor library, or "unknown" (discovery then asks torch)."""
    if device_idx < 0 or vendor != "nvidia":
        return UNKNOWN_PCI_BUS_ID
    entry = _visible_devices_entry(device_idx, vendor)
    if entry is not None and not entry.isdigit():  # "GPU-<uuid>", "MIG-...": NVML's index unknown
        return UNKNOWN_PCI_BUS_ID
    pynvml = _pynvml()
    if pynvml is None:
        return UNKNOWN_PCI_BUS_ID
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(_logical_to_physical_gpu_index(device_idx, vendor))
        return _normalize_pci_bus_id(_text(pynvml.nvmlDeviceGetPciInfo(handle).busId))
    except Exception as e:  # noqa: BLE001
        logger.debug("NVML gave no PCI bus id for device %d: %s", device_idx, e)
        return UNKNOWN_PCI_BUS_ID


def _get_gpu_uuid(device_idx: int, vendor: str, pci_bus_id: str = "") -> str:
    """The device's UUID ("GPU-..."): the vendor library's, else torch's, else a name made of the
    host and index."""
    if device_idx >= 0 and vendor == "nvidia":
        pynvml = _pynvml()
        if pynvml is not None:
            try:
                return _text(pynvml.nvmlDeviceGetUUID(_nvml_handle(pynvml, device_idx, pci_bus_id)))
            except Exception as e:  # noqa: BLE001
                logger.debug("NVML gave no UUID for device %d: %s", device_idx, e)
        uuid = _torch_property(device_idx, "uuid")
        if uuid:
            return f"GPU-{uuid}"
    return f"gpu-{socket.gethostname()}-{device_idx}"


def _torch_property(device_idx: int, name: str):
    try:
        return getattr(torch.cuda.get_device_properties(device_idx), name, None)
    except Exception:  # noqa: BLE001 - no such device, or no CUDA
        return None


def _torch_pci_bus_id(device_idx: int) -> str:
    """The PCI bus id torch.cuda reports (function 0: CUDA names no function), or "unknown"."""
    domain, bus, device = (_torch_property(device_idx, f"pci_{part}_id") for part in ("domain", "bus", "device"))
    if bus is None or device is None:
        return UNKNOWN_PCI_BUS_ID
    return f"{domain or 0:04x}:{bus:02x}:{device:02x}.0"


def _pci_bus_id_of(device_idx: int, vendor: str) -> str:
    pci_bus_id = _get_pci_bus_id(device_idx, vendor)
    return pci_bus_id if pci_bus_id != UNKNOWN_PCI_BUS_ID else _torch_pci_bus_id(device_idx)


def _get_total_memory_mb(gpu_id: int) -> int:
    return torch.cuda.get_device_properties(gpu_id).total_memory // (1 << 20)


def _get_numa_node(pci_bus_id: str) -> int:
    """The NUMA node the kernel gives the PCI device; -1 where it gives none."""
    if not pci_bus_id or pci_bus_id == UNKNOWN_PCI_BUS_ID:
        return -1
    try:
        with open(f"/sys/bus/pci/devices/{_normalize_pci_bus_id(pci_bus_id)}/numa_node") as f:
            return int(f.read())
    except (OSError, ValueError) as e:
        logger.debug("no NUMA node for PCI %s: %s", pci_bus_id, e)
        return -1


def _detect_vendor() -> str:
    if getattr(torch.version, "hip", None):
        return "amd"
    return "nvidia" if torch.cuda.is_available() else "unknown"


# ---- the vendor library's lifetime -------------------------------------------------------------

def _vendor_library(vendor: str):
    if vendor == "nvidia":
        return _nvml(), "nvmlInit", "nvmlShutdown"
    if vendor == "amd":  # only opened and closed: aperture reads nothing from AMD's library
        try:
            import amdsmi
        except ImportError:
            return None, "", ""
        return amdsmi, "amdsmi_init", "amdsmi_shut_down"
    return None, "", ""


def _outer_init_vendor_lib(vendor: str) -> None:
    """Opens the vendor library once for a whole discovery (the queries inside do not)."""
    library, init, _ = _vendor_library(vendor)
    if library is not None:
        try:
            getattr(library, init)()
        except Exception as e:  # noqa: BLE001 - the queries then fail one by one, each falling back
            logger.debug("%s() failed: %s", init, e)


def _outer_shutdown_vendor_lib(vendor: str) -> None:
    library, _, shutdown = _vendor_library(vendor)
    if library is not None:
        try:
            getattr(library, shutdown)()
        except Exception as e:  # noqa: BLE001
            logger.debug("%s() failed: %s", shutdown, e)


# ---- fabric domains ----------------------------------------------------------------------------

NVML_GPU_FABRIC_STATE_COMPLETED = 3  # nvmlGpuFabricState_t: registered with the fabric manager


class _NvmlGpuFabricInfoV2(ctypes.Structure):  # nvmlGpuFabricInfo_v2_t
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
    ]
    struct_version = 2


class _NvmlGpuFabricInfoV3(ctypes.Structure):  # nvmlGpuFabricInfo_v3_t: v2 and a health summary
    _fields_ = _NvmlGpuFabricInfoV2._fields_ + [("healthSummary", ctypes.c_ubyte)]
    struct_version = 3


def _fabric_info_from_nvml(info) -> FabricInfo:
    """FabricInfo of a filled nvmlGpuFabricInfo; empty unless registration completed and succeeded."""
    if int(info.state) != NVML_GPU_FABRIC_STATE_COMPLETED or int(info.status) != 0:
        return FabricInfo()
    cluster = bytes(info.clusterUuid)
    if not any(cluster):
        return FabricInfo()
    return FabricInfo(cluster_uuid=cluster.hex(), clique_id=int(info.cliqueId))


def _nvidia_fabric_info(gpu_id: int, pci_bus_id: str) -> FabricInfo:
    nvml = _nvml()
    if nvml is None:
        logger.debug("no NVML: no fabric info for GPU %d", gpu_id)
        return FabricInfo()
    try:
        handle = _nvml_handle(nvml, gpu_id, pci_bus_id)
        # Called through ctypes whatever the binding: pynvml versions differ in how (and whether)
        # they wrap this call, and its struct has grown.
        query = ctypes.CDLL(ctypes.util.find_library("nvidia-ml") or "libnvidia-ml.so.1").nvmlDeviceGetGpuFabricInfoV
        query.restype = ctypes.c_int
        for layout in (_NvmlGpuFabricInfoV3, _NvmlGpuFabricInfoV2):
            info = layout()
            info.version = (layout.struct_version << 24) | ctypes.sizeof(layout)  # NVML_STRUCT_VERSION
            query.argtypes = [ctypes.c_void_p, ctypes.POINTER(layout)]
            if query(handle, ctypes.byref(info)) == 0:
                return _fabric_info_from_nvml(info)
    except Exception as e:  # noqa: BLE001 - an older driver has no such call
        logger.debug("NVML fabric info failed for GPU %d: %s", gpu_id, e)
    return FabricInfo()


def _get_gpu_fabric_info(gpu_id: int, vendor: str, pci_bus_id: str = "") -> FabricInfo:
    """The GPU's fabric domain; empty off NVIDIA (aperture reads no AMD library) and without a GPU."""
    if vendor != "nvidia" or gpu_id < 0:
        return FabricInfo()
    return _nvidia_fabric_info(gpu_id, pci_bus_id)


# ---- links between the node's GPUs -------------------------------------------------------------

# nvmlGpuTopologyLevel_t -> link. INTERNAL is two GPUs of one board, behind the board's own switch.
_NVML_COMMON_ANCESTOR_LINK = {
    0: IntraNodeLinkType.PCIE_SWITCH,  # NVML_TOPOLOGY_INTERNAL
    10: IntraNodeLinkType.PCIE_SWITCH,  # NVML_TOPOLOGY_SINGLE (PIX)
    20: IntraNodeLinkType.PCIE_SWITCH,  # NVML_TOPOLOGY_MULTIPLE (PXB)
    30: IntraNodeLinkType.PCIE_HOST_BRIDGE,  # NVML_TOPOLOGY_HOSTBRIDGE (PHB)
    40: IntraNodeLinkType.PCIE_NUMA,  # NVML_TOPOLOGY_NODE
    50: IntraNodeLinkType.PCIE_SYSTEM,  # NVML_TOPOLOGY_SYSTEM
}


def _nvlink_ends(nvml, handle) -> Tuple[Set[str], bool]:
    """The PCI bus ids of the GPUs an active NVLink of `handle` reaches, and whether one reaches an
    NVSwitch. A link index the GPU does not have fails and is passed over."""
    gpus, switched = set(), False
    remote_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    for link in range(_nvml_ctypes.NVML_NVLINK_MAX_LINKS):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(handle, link):
                continue
            if remote_type is not None and remote_type(handle, link) == _nvml_ctypes.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                switched = True
                continue
            gpus.add(_normalize_pci_bus_id(_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)))
        except Exception:  # noqa: BLE001
            continue
    return gpus, switched


def _parse_nvidia_topo(local_pci_bus_ids: List[str]) -> Optional[List[List[int]]]:
    """The link matrix of this process's GPUs (indexed as torch.cuda's devices) from NVML; None
    without NVML or when a device has no NVML handle."""
    nvml = _nvml()
    if nvml is None:
        logger.debug("no NVML: GPU links unknown")
        return None
    try:
        handles = [nvml.nvmlDeviceGetHandleByPciBusId(_normalize_pci_bus_id(pci).encode()) for pci in local_pci_bus_ids]
    except Exception as e:  # noqa: BLE001
        logger.debug("NVML has no handle for one of %s: %s", local_pci_bus_ids, e)
        return None
    ends = [_nvlink_ends(nvml, handle) for handle in handles]
    wanted = [_normalize_pci_bus_id(pci) for pci in local_pci_bus_ids]
    matrix = []
    for i, handle in enumerate(handles):
        row = []
        for j, other in enumerate(handles):
            if i == j:
                row.append(IntraNodeLinkType.SELF)
            elif wanted[j] in ends[i][0]:
                row.append(IntraNodeLinkType.NVLINK)
            elif ends[i][1] and ends[j][1]:  # both on the node's NVSwitches: every pair is connected
                row.append(IntraNodeLinkType.NVSWITCH)
            else:
                try:
                    level = nvml.nvmlDeviceGetTopologyCommonAncestor(handle, other)
                    row.append(_NVML_COMMON_ANCESTOR_LINK.get(int(level), IntraNodeLinkType.UNKNOWN))
                except Exception:  # noqa: BLE001
                    row.append(IntraNodeLinkType.UNKNOWN)
        matrix.append(row)
    return matrix


def _parse_amd_topo(local_pci_bus_ids: List[str]) -> Optional[List[List[int]]]:
    """None: aperture runs on NVIDIA GPUs and CPUs, and reads no AMD library."""
    try:
        import amdsmi  # noqa: F401
    except ImportError:
        logger.debug("amdsmi not available for topology query")
        return None
    logger.debug("aperture reads no xGMI links from amdsmi")
    return None


def _p2p_access(num_gpus: int) -> Optional[List[List[bool]]]:
    try:
        return [[i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(num_gpus)]
                for i in range(num_gpus)]
    except Exception as e:  # noqa: BLE001
        logger.debug("P2P access unknown: %s", e)
        return None


def _detect_intra_node_topology(local_pci_bus_ids: List[str], vendor: str):
    """(link types, P2P access) between this process's GPUs, each indexed by torch.cuda's device
    index; either None where it cannot be read."""
    if not local_pci_bus_ids:
        return None, None
    read_links = {"nvidia": _parse_nvidia_topo, "amd": _parse_amd_topo}.get(vendor)
    links = read_links(local_pci_bus_ids) if read_links is not None else None
    return links, _p2p_access(len(local_pci_bus_ids))


def _detect_infiniband() -> Tuple[bool, List[str]]:
    """This host's RDMA devices (InfiniBand, RoCE), as the kernel lists them."""
    try:
        devices = sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return False, []
    return bool(devices), devices


# ---- gathering across ranks --------------------------------------------------------------------

def _all_gather_strings(local_string: str, world_size: int) -> List[str]:
    """Every rank's string, in rank order: over torch.distributed when it is initialised (as in
    Iris), else over aperture's Team of this job."""
    if dist.is_available() and dist.is_initialized():
        if dist.get_world_size() != world_size:
            raise ValueError(f"_all_gather_strings: world_size {world_size}, but torch.distributed has "
                             f"{dist.get_world_size()} ranks")
        gathered = [None] * world_size
        dist.all_gather_object(gathered, local_string)
        return gathered
    team = process_team()
    if team.size != world_size:
        raise ValueError(f"_all_gather_strings: world_size {world_size}, but this job has {team.size} ranks")
    mine = local_string.encode()
    # The Team gathers equal sizes: the lengths first, then each string padded to the longest.
    lengths = [int.from_bytes(n, "little") for n in team.allgather(len(mine).to_bytes(8, "little"))]
    longest = max(lengths)
    padded = team.allgather(mine.ljust(longest, b"\0"))
    return [p[:n].decode() for p, n in zip(padded, lengths)]


# ---- discovery ---------------------------------------------------------------------------------

class TopologyDiscovery:
    """Collective discovery of the job's topology, and the groups and heap plan it implies.

    ``TopologyDiscovery(ctx)`` takes the ranks and device of an Iris context; without one, the
    ranks of torch.distributed when initialised, else of the launcher's job (one rank without a
    launcher), and torch's current GPU, or none (gpu_id -1) on a machine without one.
    """

    # Class defaults: Iris's tests make the object with __new__ and set only the rank attributes.
    _team = None
    _topology: Optional[TopologyMap] = None

    def __init__(self, iris_ctx=None):
        self._iris_ctx = iris_ctx
        self._topology = None
        if iris_ctx is not None:
            self.rank, self.world_size, self.gpu_id = iris_ctx.cur_rank, iris_ctx.num_ranks, iris_ctx.gpu_id
            self._team = getattr(iris_ctx, "team", None)
            return
        self._team = process_team()
        if dist.is_available() and dist.is_initialized():
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        else:
            self.rank, self.world_size = self._team.rank, self._team.size
        self.gpu_id = torch.cuda.current_device() if torch.cuda.is_available() else -1

    @property
    def topology(self) -> Optional[TopologyMap]:
        """The map of the last discover(), or None before it."""
        return self._topology

    def discover(self) -> TopologyMap:
        """Collective: every rank calls it, and every rank returns the same map."""
        vendor = _detect_vendor()
        hostname = socket.gethostname()
        _outer_init_vendor_lib(vendor)
        try:
            if self.gpu_id >= 0:
                device, host = self._probe_gpu(vendor, hostname)
            else:
                device, host = self._probe_host_only(vendor, hostname)
        finally:
            _outer_shutdown_vendor_lib(vendor)
        aperture_node = self._team.node if self._team is not None else None
        mine = json.dumps({"gpu": device.to_dict(), "node": host, "aperture_node": aperture_node})
        reports = [json.loads(report) for report in _all_gather_strings(mine, self.world_size)]
        self._topology = _build_map(self.world_size, reports)
        logger.debug("rank %d: %d node(s), %d fabric domain(s)", self.rank, self._topology.num_nodes,
                     len(self._topology.fabric_domains))
        return self._topology

    def _probe_gpu(self, vendor, hostname):
        name = torch.cuda.get_device_name(self.gpu_id)
        memory_mb = _get_total_memory_mb(self.gpu_id)
        pci_bus_id = _pci_bus_id_of(self.gpu_id, vendor)
        device = GPUInfo(
            global_rank=self.rank, local_rank=self.gpu_id, hostname=hostname, gpu_id=self.gpu_id,
            pci_bus_id=pci_bus_id, device_name=name, total_memory_mb=memory_mb,
            numa_node=_get_numa_node(pci_bus_id), vendor=vendor,
            uuid=_get_gpu_uuid(self.gpu_id, vendor, pci_bus_id=pci_bus_id),
            fabric_info=_get_gpu_fabric_info(self.gpu_id, vendor, pci_bus_id=pci_bus_id))
        visible = torch.cuda.device_count()
        local_pci_bus_ids = [_pci_bus_id_of(i, vendor) for i in range(visible)]
        has_ib, ib_devices = _detect_infiniband()
        link_types, p2p_access = _detect_intra_node_topology(local_pci_bus_ids, vendor)
        host = {"has_ib": has_ib, "ib_devices": ib_devices, "link_types": _plain(link_types),
                "p2p_access": p2p_access}
        return device, host

    def _probe_host_only(self, vendor, hostname):
        # No GPU in this rank: the host's facts only, nothing read from a GPU library.
        device = GPUInfo(global_rank=self.rank, local_rank=0, hostname=hostname, gpu_id=-1,
                         pci_bus_id=UNKNOWN_PCI_BUS_ID, device_name="cpu", total_memory_mb=0, numa_node=-1,
                         vendor=vendor, uuid="")
        has_ib, ib_devices = _detect_infiniband()
        return device, {"has_ib": has_ib, "ib_devices": ib_devices, "link_types": None, "p2p_access": None}

    def get_communication_groups(self) -> Dict[InterconnectLevel, List[List[int]]]:
        """Rank groups per level: one per node; one per fabric domain plus each node in none (no
        groups where there is no domain at all); and the whole job."""
        topo = self._discovered("get_communication_groups")
        per_node = [sorted(node.ranks) for _, node in sorted(topo.nodes.items())]
        per_fabric = []
        if topo.fabric_domains:
            per_fabric = [topo.get_ranks_for_fabric_domain(key) for key in sorted(topo.fabric_domains)]
            in_a_domain = {name for names in topo.fabric_domains.values() for name in names}
            per_fabric += [sorted(node.ranks) for name, node in sorted(topo.nodes.items()) if name not in in_a_domain]
        return {
            InterconnectLevel.INTRA_NODE: per_node,
            InterconnectLevel.INTRA_RACK_FABRIC: per_fabric,
            InterconnectLevel.INTER_NODE_RDMA: [sorted(topo.gpu_info)],
        }

    def get_heap_distribution_plan(self) -> Dict[int, Dict[str, Any]]:
        """Per rank, how each peer's heap would be reached: ``ipc_peers`` (its node), ``fabric_peers``
        (its fabric domain, other nodes), ``rdma_peers`` (the rest); with its node, local rank,
        gpu_id and fabric domain key. (aperture's own heaps decide this per peer themselves: a
        peer's heap base is in the table where it is mapped, and 0 where an engine reaches it.)"""
        topo = self._discovered("get_heap_distribution_plan")
        plan = {}
        for rank, info in topo.gpu_info.items():
            node_peers = topo.get_node_peers(rank)
            plan[rank] = {
                "ipc_peers": sorted(node_peers),
                "fabric_peers": sorted(topo.get_fabric_domain_peers(rank) - node_peers),
                "rdma_peers": sorted(topo.get_rdma_peers(rank)),
                "node": info.hostname,
                "local_rank": info.local_rank,
                "gpu_id": info.gpu_id,
                "fabric_domain": info.fabric_info.domain_key,
            }
        return plan

    def _discovered(self, caller):
        if self._topology is None:
            raise RuntimeError(f"{caller}: call discover() first (it is collective: on every rank)")
        return self._topology


def _plain(matrix):
    return None if matrix is None else [[int(v) for v in row] for row in matrix]


def _node_names(reports) -> List[str]:
    """Each rank's node name: its host name, or host/node<k> where aperture's Team puts ranks of
    one host on different nodes (aperture launch --nodes K on one machine)."""
    hosts = [r["gpu"]["hostname"] for r in reports]
    nodes = [r.get("aperture_node") for r in reports]
    nodes_of_host: Dict[str, Set[Any]] = {}
    for host, node in zip(hosts, nodes):
        nodes_of_host.setdefault(host, set()).add(node)
    if all(len(found) == 1 for found in nodes_of_host.values()):
        return hosts
    return [f"{host}/node{node}" for host, node in zip(hosts, nodes)]


def _build_map(world_size: int, reports: List[dict]) -> TopologyMap:
    """The map every rank builds alike from every rank's report, in rank order."""
    gpu_info: Dict[int, GPUInfo] = {}
    host_of_rank: Dict[int, dict] = {}
    for report, node_name in zip(reports, _node_names(reports)):
        info = GPUInfo.from_dict(report["gpu"])
        info.hostname = node_name
        gpu_info[info.global_rank] = info
        host_of_rank[info.global_rank] = report["node"]
    ranks_of_node: Dict[str, List[int]] = {}
    for rank in sorted(gpu_info):
        ranks_of_node.setdefault(gpu_info[rank].hostname, []).append(rank)
    nodes = {}
    for name, ranks in ranks_of_node.items():
        for local_rank, rank in enumerate(ranks):
            gpu_info[rank].local_rank = local_rank
        nodes[name] = _node_info(name, ranks, gpu_info, host_of_rank[ranks[0]])
    fabric_domains: Dict[str, List[str]] = {}
    for name, node in nodes.items():
        for key in node.fabric_domain_keys:
            fabric_domains.setdefault(key, []).append(name)
    return TopologyMap(world_size=world_size, num_nodes=len(nodes), gpu_info=gpu_info, nodes=nodes,
                       fabric_domains=fabric_domains)


def _node_info(name, ranks, gpu_info, host) -> NodeInfo:
    gpu_ids = [gpu_info[r].gpu_id for r in ranks]
    unique_gpu_ids = sorted({g for g in gpu_ids if g >= 0})
    # Distinct PCI ids count GPUs; device indices would count one GPU per rank where each rank
    # sees only its own (CUDA_VISIBLE_DEVICES per rank: every rank's device 0).
    unique_pci_ids = sorted({gpu_info[r].pci_bus_id for r in ranks} - {UNKNOWN_PCI_BUS_ID})
    domain_keys = sorted({gpu_info[r].fabric_info.domain_key for r in ranks} - {""})
    if len(domain_keys) > 1:
        logger.warning("node %s has GPUs in %d fabric domains (%s)", name, len(domain_keys), domain_keys)
    return NodeInfo(
        hostname=name, ranks=list(ranks), gpu_ids=gpu_ids, unique_gpu_ids=unique_gpu_ids,
        unique_pci_ids=unique_pci_ids, num_gpus=len(unique_pci_ids) or len(unique_gpu_ids), num_ranks=len(ranks),
        has_infiniband=host["has_ib"], ib_devices=host["ib_devices"], link_types=host["link_types"],
        p2p_access=host["p2p_access"], fabric_domain_key=domain_keys[0] if domain_keys else "",
        fabric_domain_keys=domain_keys)


__all__ = [
    "FabricInfo", "GPUInfo", "InterconnectLevel", "IntraNodeLinkType", "NodeInfo", "TopologyDiscovery", "TopologyMap",
]
