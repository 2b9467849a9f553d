"""Providers from Python: the C++ providers, handing out their memory as tensors."""

from .. import _core
from .._error import ErrorCode, fail
from . import _registry, _tensors, dtypes


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
        shape = _tensors.shape_tuple(shape)
        dtype = dtypes.resolve("float32" if dtype is None else dtype)
        item = dtypes.itemsize(dtype)
        nbytes = _tensors.product(shape) * item
        allocation = self._core.allocate(nbytes, max(256, item))
        device = -1
        if self.memory_kind == "device":
            device = _core.device_of(allocation.address)
            if device < 0:  # an empty allocation may have no device address to ask about
                device = _tensors.torch.cuda.current_device() if _tensors.torch is not None else 0
        try:
            tensor = _tensors.wrap(allocation.address, nbytes, allocation, device, shape, dtype)
        except BaseException:
            self._core.free(allocation)  # the peers' free, too: every rank fails alike here
            raise
        _registry.add(self, allocation, _tensors.root_of(tensor))
        return tensor

    def zeros(self, shape, dtype=None):
        """Collective: as empty(), zero-filled on every rank before any rank returns."""
        tensor = self.empty(shape, dtype)
        if _tensors.is_tensor(tensor):
            tensor.zero_()
            if tensor.is_cuda:
                _tensors.torch.cuda.current_stream(tensor.device).synchronize()
        else:
            tensor.fill(0)
        self._team.barrier()  # no peer writes into this rank's copy before it is zero
        return tensor

    def free(self, tensor):
        """Collective: releases the allocation `tensor` (from this provider's empty()/zeros()) lies in.
        Freeing twice, or a tensor that is not this provider's, raises aperture.Error."""
        _tensors.check_array("free", tensor)
        record = _registry.find(f"{self.name} free", tensor)
        if record.provider is not self:
            fail(ErrorCode.invalid_argument,
                 f"{self.name} free: the {_tensors.describe(tensor)} lies in an allocation of provider "
                 f"{record.provider.name}, not of this one; free it with that provider")
        if _tensors.is_tensor(tensor) and tensor.is_cuda:
            # Work queued on it must end before a peer's next allocation may reuse the memory.
            _tensors.torch.cuda.current_stream(tensor.device).synchronize()
        self._core.free(record.allocation)
        _registry.mark_freed(record)

    def __repr__(self):
        return f"Provider(name={self.name!r}, memory_kind={self.memory_kind!r})"


def make_provider(name, team):
    """Collective: the C++ provider `name` ("default", "shm", "mpi-window", "openshmem",
    "cuda-ipc", "cuda-vmm", "nvshmem", "nccl") over `team`. Also a point where the collective
    objects every rank has dropped are torn down (aperture.collectives._dropped)."""
    from ..collectives import _dropped  # here: the collectives package imports this one

    if isinstance(team, _core.Team):
        _dropped.agree_and_release(team)
    return Provider(_core.make_provider(name, team), team)
