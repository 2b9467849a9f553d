"""Providers from Python: the C++ providers, handing out their memory as tensors."""

from . import _arrays, _core, _registry
from ._error import ErrorCode, fail


class Provider:
    """Symmetric memory of one C++ provider (``make_provider``). ``empty``, ``zeros`` and ``free``
    are collective: every rank calls them in the same order with the same shapes and dtypes (a
    mismatch raises aperture.Error on every rank). Tensors stay valid until freed; the provider
    lives as long as any of its tensors does."""

    def __init__(self, core, team):
        self._core = core
        self._team = team

    @property
    def name(self):
        return self._core.name

    @property
    def memory_kind(self):
        """"host" (CPU code reads it) or "device" (GPU kernels read it)."""
        return self._core.memory_kind

    @property
    def is_linear(self):
        """True when one table serves every allocation."""
        return self._core.is_linear

    @property
    def team(self):
        return self._team

    def empty(self, shape, dtype=None):
        """Collective: a new symmetric tensor (uninitialised) of `shape` and `dtype` (default float32):
        on this rank's GPU for device providers, on the CPU (numpy without torch) for host ones."""
        shape = _arrays.shape_tuple(shape)
        dtype = _arrays.resolve_dtype("float32" if dtype is None else dtype)
        item = _arrays.dtype_itemsize(dtype)
        nbytes = _arrays.product(shape) * item
        allocation = self._core.allocate(nbytes, max(256, item))
        device = -1
        if self.memory_kind == "device":
            device = _core.device_of(allocation.address)
            if device < 0:  # an empty allocation may have no device address to ask about
                device = _arrays.torch.cuda.current_device() if _arrays.torch is not None else 0
        try:
            tensor = _arrays.wrap(allocation.address, nbytes, allocation, device, shape, dtype)
        except BaseException:
            self._core.free(allocation)  # the peers' free, too: every rank fails alike here
            raise
        _registry.add(self, allocation, _arrays.root_of(tensor))
        return tensor

    def zeros(self, shape, dtype=None):
        """Collective: as empty(), zero-filled on every rank before any rank returns."""
        tensor = self.empty(shape, dtype)
        if _arrays.is_tensor(tensor):
            tensor.zero_()
            if tensor.is_cuda:
                _arrays.torch.cuda.current_stream(tensor.device).synchronize()
        else:
            tensor.fill(0)
        self._team.barrier()  # no peer writes into this rank's copy before it is zero
        return tensor

    def free(self, tensor):
        """Collective: releases the allocation `tensor` (from this provider's empty()/zeros()) lies in.
        Freeing twice, or a tensor that is not this provider's, raises aperture.Error."""
        _arrays.check_array("free", tensor)
        record = _registry.find(f"{self.name} free", tensor)
        if record.provider is not self:
            fail(ErrorCode.invalid_argument,
                 f"{self.name} free: the {_arrays.describe(tensor)} lies in an allocation of provider "
                 f"{record.provider.name}, not of this one; free it with that provider")
        if _arrays.is_tensor(tensor) and tensor.is_cuda:
            # Work queued on it must end before a peer's next allocation may reuse the memory.
            _arrays.torch.cuda.current_stream(tensor.device).synchronize()
        self._core.free(record.allocation)
        _registry.mark_freed(record)

    def __repr__(self):
        return f"Provider(name={self.name!r}, memory_kind={self.memory_kind!r})"


def make_provider(name, team):
    """Collective: the C++ provider `name` ("default", "shm", "mpi-window", "openshmem",
    "cuda-ipc", "cuda-vmm", "nvshmem", "nccl") over `team`."""
    return Provider(_core.make_provider(name, team), team)


class _TorchSymmetricAllocator:
    """torch symmetric memory as the allocator of a ForeignProvider (see python/src/core.cpp): every
    allocation is a torch.distributed._symmetric_memory.empty buffer, rendezvoused over `group`;
    its table is the handle's buffer_ptrs (kernels read buffer_ptrs_dev itself)."""

    def __init__(self, team, group, device):
        self._team = team
        self._group = group
        self._device = device

    def allocate(self, nbytes, alignment):
        torch = _arrays.torch
        from torch.distributed import _symmetric_memory as symm_mem

        # A zero-byte request still gets its own buffer (and address), as the C++ providers give.
        buffer = symm_mem.empty(max(nbytes, alignment), dtype=torch.uint8, device=self._device)
        handle = symm_mem.rendezvous(buffer, self._group)
        if handle.rank != self._team.rank or handle.world_size != self._team.size:
            fail(ErrorCode.mismatch,
                 f"torch-symmetric allocate: the group's rank {handle.rank} of {handle.world_size} is not the team's "
                 f"rank {self._team.rank} of {self._team.size}; give a group whose ranks are the team's, in its order")
        bases = [int(p) for p in handle.buffer_ptrs]
        address = buffer.data_ptr()
        if address % alignment:
            fail(ErrorCode.unavailable,
                 f"torch-symmetric allocate: torch's buffer at {address:#x} is not {alignment}-byte aligned")
        # The map owns the buffer and the handle (its table's owner): the memory goes with its last copy.
        offset = address - bases[handle.rank]
        if offset == 0:
            table, owner = int(handle.buffer_ptrs_dev), (buffer, handle)
        else:  # the buffer inside a larger block: the table shifted to it, on the device
            bases = [p + offset if p else 0 for p in bases]
            placed = self.place_table(bases)
            table, owner = placed.data_ptr(), (buffer, handle, placed)
        return address, _core.map_from_table(handle.rank, bases, nbytes, table, owner)

    def place_table(self, table):
        return _arrays.torch.tensor(table, dtype=_arrays.torch.int64, device=self._device)


def torch_symmetric_provider(team, group=None):
    """Collective: a provider whose allocations are torch symmetric memory
    (torch.distributed._symmetric_memory.empty, rendezvoused over `group`, default the world
    group; its ranks must be the team's, in the same order). Its tensors, and the C++ code that
    allocates from a provider (Communicator, OverlappedGemm), then run on torch's buffers and
    tables. Needs torch.distributed initialised (any backend: rendezvous uses its store) and,
    as torch does, one GPU per rank."""
    torch = _arrays.torch
    if torch is None or not torch.cuda.is_available():
        fail(ErrorCode.unavailable, "torch_symmetric_provider needs torch with a CUDA GPU")
    import torch.distributed as dist

    if not dist.is_initialized():
        fail(ErrorCode.invalid_argument,
             "torch_symmetric_provider: torch.distributed is not initialised; call "
             "torch.distributed.init_process_group first (under aperture launch or torchrun, env:// works)")
    if group is None:
        group = dist.group.WORLD
    device = torch.device("cuda", torch.cuda.current_device())
    allocator = _TorchSymmetricAllocator(team, group, device)
    return Provider(_core.ForeignProvider("torch-symmetric", _core.MemoryKind.device, allocator), team)
