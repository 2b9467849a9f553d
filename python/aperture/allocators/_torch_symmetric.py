"""torch symmetric memory (torch.distributed._symmetric_memory) as a ForeignAllocator: its
buffers are symm_mem.empty ones rendezvoused over a process group, its table the handle's
buffer_ptrs (on the device: buffer_ptrs_dev itself)."""

from .._error import ErrorCode, fail
from ..memory import _tensors
from ._foreign import ForeignAllocator, ForeignBuffer


def _need_torch_distributed(call):
    torch = _tensors.torch
    if torch is None:
        fail(ErrorCode.unavailable, f"{call} needs torch, which is not installed")
    import torch.distributed as dist

    return torch, dist


class TorchSymmetric(ForeignAllocator):
    """torch symmetric memory over `group` (default: the world group) on `device` (default: the
    current CUDA device). rendezvous is collective over the group, so allocate_buffer and
    buffer_of are too."""

    name = "torch-symmetric"
    memory_kind = "device"

    def __init__(self, group=None, device=None):
        torch, dist = _need_torch_distributed("torch symmetric memory")
        super().__init__(device if device is not None else torch.device("cuda", torch.cuda.current_device()))
        self.group = group if group is not None else dist.group.WORLD

    def _rendezvous(self, buffer):
        from torch.distributed import _symmetric_memory as symm_mem

        handle = symm_mem.rendezvous(buffer, self.group)
        bases = [int(p) for p in handle.buffer_ptrs]
        return handle, bases

    def allocate_buffer(self, nbytes, alignment):
        torch = _tensors.torch
        from torch.distributed import _symmetric_memory as symm_mem

        # A zero-byte request still gets its own buffer (and address), as the C++ providers give.
        buffer = symm_mem.empty(max(nbytes, alignment), dtype=torch.uint8, device=self.device)
        handle, bases = self._rendezvous(buffer)
        # The buffer may lie inside a larger block of torch's: the table is shifted to it (on the device).
        offset = buffer.data_ptr() - bases[handle.rank]
        bases = [p + offset if p else 0 for p in bases]
        return ForeignBuffer(handle.rank, bases, buffer.numel(), (buffer, handle),
                             int(handle.buffer_ptrs_dev) if offset == 0 else 0)

    def buffer_of(self, tensor):
        handle, bases = self._rendezvous(tensor)
        return ForeignBuffer(handle.rank, bases, handle.buffer_size, handle, int(handle.buffer_ptrs_dev))


def torch_symmetric_provider(team, group=None):
    """Collective: a provider whose allocations are torch symmetric memory
    (torch.distributed._symmetric_memory.empty, rendezvoused over `group`, default the world
    group; its ranks must be the team's, in the same order). Its tensors, and the C++ code that
    allocates from a provider (Communicator, OverlappedGemm), then run on torch's buffers and
    tables. Needs torch.distributed initialised (any backend: rendezvous uses its store) and,
    as torch does, one GPU per rank."""
    torch, dist = _need_torch_distributed("torch_symmetric_provider")
    if not torch.cuda.is_available():
        fail(ErrorCode.unavailable, "torch_symmetric_provider needs torch with a CUDA GPU")
    if not dist.is_initialized():
        fail(ErrorCode.invalid_argument,
             "torch_symmetric_provider: torch.distributed is not initialised; call "
             "torch.distributed.init_process_group first (under aperture launch or torchrun, env:// works)")
    return TorchSymmetric(group).provider(team)


def from_torch_symmetric(tensor, group=None):
    """The map of `tensor` from torch.distributed._symmetric_memory.empty: its table is the
    rendezvous handle's buffer_ptrs (on the device, buffer_ptrs_dev itself where the tensor starts
    its buffer; a shifted copy for a view). Collective over `group` (default: the world group),
    as rendezvous is."""
    _need_torch_distributed("from_torch_symmetric")
    if not _tensors.is_tensor(tensor) or tensor.device.type != "cuda":
        fail(ErrorCode.invalid_argument,
             f"from_torch_symmetric: expected a CUDA tensor from torch.distributed._symmetric_memory.empty, got "
             f"{_tensors.describe(tensor) if _tensors.is_tensor(tensor) else type(tensor).__name__}")
    return TorchSymmetric(group, tensor.device).map_of(tensor)
