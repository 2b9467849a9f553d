"""Address maps from Python: the table of peer bases of one allocation, whoever allocated it."""

from .. import _core
from .._error import ErrorCode, fail
from . import _registry, _tensors, dtypes


class AddressMap:
    """The map of one symmetric allocation (C++ SymmetricAddressMap). ``peer_bases`` is an int64
    tensor of world_size entries in the memory where the provider's kernels run (the rank's GPU
    for GPU memory, the CPU otherwise): pass it to kernels as it is."""

    def __init__(self, core_map, device=-1, peer_bases=None):
        self._map = core_map
        self._device = device
        self._peer_bases = peer_bases

    local_rank = property(lambda self: self._map.local_rank)
    world_size = property(lambda self: self._map.world_size)
    allocation_base = property(lambda self: self._map.allocation_base)
    allocation_bytes = property(lambda self: self._map.allocation_bytes)
    all_direct = property(lambda self: self._map.all_direct)
    indirect_peers = property(lambda self: self._map.indirect_peers)

    @property
    def host_peer_bases(self):
        """The table as a list of ints, read on the host."""
        return self._map.host_peer_bases

    @property
    def peer_bases(self):
        if self._peer_bases is None:
            on_device = self._map.table_on_device
            device = self._device if on_device else -1
            if on_device and device < 0:
                device = _core.device_of(self._map.table_address)
            dtype = dtypes.resolve("int64")
            # The table itself, not a copy: it lives as long as the map object it is viewed through.
            self._peer_bases = _tensors.wrap(self._map.table_address, 8 * self.world_size, self._map, device,
                                            (self.world_size,), dtype)
        return self._peer_bases

    @property
    def congruent(self):
        """True when every direct entry of the table lies at the same offset modulo 16 bytes, so
        aperture.triton's load/store/put/get/copy may take ``congruent=True`` (the vector form
        with no run-time test). True for every aperture provider (allocations at least 256-byte
        aligned) and for torch symmetric memory; a table from from_table may say False."""
        residues = {base % 16 for base in self.host_peer_bases if base != 0}
        return len(residues) <= 1

    def _check_peer(self, call, peer):
        if not isinstance(peer, int) or not 0 <= peer < self.world_size:
            fail(ErrorCode.invalid_argument,
                 f"AddressMap.{call}: peer {peer!r} is not a rank of this map (world_size {self.world_size}); "
                 f"give 0 to {self.world_size - 1}")

    def is_direct(self, peer):
        """True when `peer`'s copy is reachable by load/store (its table entry is not 0)."""
        self._check_peer("is_direct", peer)
        return self._map.is_direct(peer)

    def owns(self, tensor):
        """True when every element of `tensor` (a tensor or array) lies in this rank's copy."""
        _tensors.check_array("AddressMap.owns", tensor)
        start, nbytes = _tensors.extent(tensor)
        return self._map.owns_range(start, max(nbytes, 1))

    def translate(self, tensor, to_rank):
        """The address (an int) of `tensor`'s first element in `to_rank`'s copy, through the checked
        path: aperture.Error when to_rank is out of range or not direct, or `tensor` not in the map."""
        _tensors.check_array("AddressMap.translate", tensor)
        start, nbytes = _tensors.extent(tensor)
        return self._map.translate(_tensors.address(tensor), to_rank, max(nbytes, 1))

    @property
    def has_engine(self):
        """True when the provider attached an engine that reaches this map's indirect peers (ranks of
        other nodes, under mpirun): kernels reach them through aperture.GpuProxy, the host through
        engine_put / engine_get."""
        return self._map.has_engine

    def engine_put(self, dst, src, to_rank):
        """From the host, to a rank of another node: copies `src` (a contiguous CPU tensor or array of
        this process) into to_rank's copy of `dst` (a contiguous tensor in this rank's copy, as many
        bytes), through the map's engine; complete at to_rank when it returns, so puts land in the
        order they were made. For a peer whose table entry is 0 (a direct peer is refused: copy
        through translate); aperture.Error (unavailable) when the map has no engine."""
        self._check_peer("engine_put", to_rank)
        remote, local, nbytes = self._engine_operands("engine_put", dst, src)
        self._map.engine_put(remote, local, nbytes, to_rank)

    def engine_get(self, dst, src, from_rank):
        """engine_put's mirror: from_rank's copy of `src` (a contiguous tensor in this rank's copy)
        into `dst` (a contiguous CPU tensor or array of this process, as many bytes)."""
        self._check_peer("engine_get", from_rank)
        remote, local, nbytes = self._engine_operands("engine_get", src, dst)
        self._map.engine_get(local, remote, nbytes, from_rank)

    def _engine_operands(self, call, remote, local):
        for role, t in (("the tensor in this map", remote), ("the host tensor", local)):
            _tensors.check_array(f"AddressMap.{call}", t)
            if not _tensors.is_contiguous(t):
                fail(ErrorCode.invalid_argument, f"AddressMap.{call}: {role} ({_tensors.describe(t)}) is not "
                     "contiguous; pass a contiguous one")
        if _tensors.device_index(local) >= 0:
            fail(ErrorCode.invalid_argument, f"AddressMap.{call}: the host tensor ({_tensors.describe(local)}) is on "
                 "a GPU; the engine moves host memory: copy it through a CPU tensor")
        remote_start, remote_bytes = _tensors.extent(remote)
        local_start, local_bytes = _tensors.extent(local)
        if remote_bytes != local_bytes:
            fail(ErrorCode.invalid_argument, f"AddressMap.{call}: {remote_bytes} bytes in the map and {local_bytes} in "
                 "the host tensor; give both as many bytes")
        return remote_start, local_start, remote_bytes

    def __repr__(self):
        return (f"AddressMap(local_rank={self.local_rank}, world_size={self.world_size}, "
                f"allocation_base={self.allocation_base:#x}, allocation_bytes={self.allocation_bytes})")


def address_map(tensor):
    """The map of the allocation `tensor` (from a provider's empty()/zeros(), or a view of it) lies
    in, described from the tensor's first element: its own table (entries shifted to the view)
    and its own length. Not collective."""
    _tensors.check_array("address_map", tensor)
    record = _registry.find("address_map", tensor)
    start, nbytes = _tensors.extent(tensor)
    if start == 0 and nbytes == 0:  # torch gives tensors without elements no address
        start = record.allocation.address
    core_map = record.provider._core.symmetric_address_map(start, nbytes)
    return AddressMap(core_map, _tensors.device_index(tensor))


def _device_of(device):
    """The CUDA device index `device` names (a torch.device, "cuda:1", an int), or -1 for the CPU."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    torch = _tensors.torch
    if torch is None:
        if str(device) == "cpu":
            return -1
        fail(ErrorCode.unavailable, f"from_table: device {device!r} needs torch, which is not installed")
    device = torch.device(device)
    if device.type == "cpu":
        return -1
    if device.type != "cuda":
        fail(ErrorCode.invalid_argument, f"from_table: device {device} is neither the CPU nor a CUDA device")
    return device.index if device.index is not None else torch.cuda.current_device()


def from_table(local_rank, peer_bases, allocation_bytes, device=None):
    """A map over memory any other allocator made: `peer_bases` (a sequence of ints or an int64
    tensor) holds every rank's address of the allocation, 0 where a peer is not reachable, and
    entry local_rank is this rank's. The table is kept where kernels will read it: on `device`
    (a CUDA device), else where a tensor `peer_bases` already is, else on the host. The C++
    checks apply (world size, this rank's entry, the length)."""
    tensor = peer_bases if _tensors.is_tensor(peer_bases) else None
    entries = [int(v) for v in (peer_bases.tolist() if hasattr(peer_bases, "tolist") else peer_bases)]
    index = _device_of(device) if device is not None else (_tensors.device_index(tensor) if tensor is not None else -1)
    if index < 0:
        return AddressMap(_core.map_from_table(local_rank, entries, int(allocation_bytes)), -1)
    torch = _tensors.torch
    if not (tensor is not None and tensor.dtype == torch.int64 and tensor.is_contiguous() and
            _tensors.device_index(tensor) == index):
        tensor = torch.tensor(entries, dtype=torch.int64, device=f"cuda:{index}")
    core_map = _core.map_from_table(local_rank, entries, int(allocation_bytes), tensor.data_ptr(), tensor)
    return AddressMap(core_map, index, tensor)
