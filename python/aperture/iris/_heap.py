"""The symmetric heap behind ``ctx.heap``: one aperture allocation of ``heap_size`` bytes.

Tensors are slices of it at 256-byte-aligned offsets, the same on every rank, so the heap's one
table (``get_heap_bases()``) serves every tensor, as Iris's does. Nothing is freed one tensor at
a time (Iris frees nothing either): allocation is collective in that every rank must ask for the
same tensors in the same order.
"""

import math

import torch

import aperture

# Enough for 16-byte vector accesses and any dtype; what aperture's own allocations promise.
ALIGNMENT = 256

# aperture's own heaps are zero when their provider is made: shm's are new memfd pages, cuda-ipc
# and cuda-vmm memset theirs then (src/providers/own_heap). Filling such a heap again would touch
# every page: on shm, seconds and heap_size of resident memory for Iris's default 1 GiB.
ZEROED_WHEN_MADE = frozenset({"shm", "cuda-ipc", "cuda-vmm"})


class SymmetricHeap:
    """``fresh``: ``provider`` was made for this heap and has allocated nothing yet, so on a
    provider of ZEROED_WHEN_MADE the heap is zero already. The heap starts zeroed either way
    (Iris's is torch.empty; aperture.iris's is zero on every provider)."""

    def __init__(self, provider, heap_size, *, fresh=False):
        if heap_size <= 0:
            raise aperture.Error(f"aperture: iris: heap_size must be positive, got {heap_size}",
                                 code=aperture.ErrorCode.invalid_argument)
        self.provider = provider
        self.heap_size = int(heap_size)
        self.offset = 0
        self.alignment = ALIGNMENT
        if fresh and provider.name in ZEROED_WHEN_MADE:
            self.memory_pool = provider.empty((self.heap_size,), torch.int8)
        else:
            self.memory_pool = provider.zeros((self.heap_size,), torch.int8)
        self.address_map = aperture.address_map(self.memory_pool)
        # aperture's int64 table itself, which is what Iris's newest heap hands kernels too (its
        # older one was uint64: the device functions take either).
        self.heap_bases = self.address_map.peer_bases
        self._symmetric_copies = {}  # (shape, dtype) -> the heap buffer as_symmetric refills

    def get_device(self):
        return self.memory_pool.device

    def get_heap_bases(self):
        return self.heap_bases

    def allocate(self, num_elements, dtype):
        nbytes = num_elements * torch.empty((), dtype=dtype).element_size()
        start = self.offset
        end = start + math.ceil(nbytes / self.alignment) * self.alignment
        if end > self.heap_size:
            raise aperture.Error(
                f"aperture: iris heap out of memory: {num_elements} x {dtype} needs {nbytes} bytes, but only "
                f"{self.heap_size - start} of the heap's {self.heap_size} bytes are left; pass a larger heap_size "
                "to iris.iris()", code=aperture.ErrorCode.out_of_memory)
        self.offset = end
        return self.memory_pool[start:start + nbytes].view(dtype)

    def get_base_address(self):
        """This rank's heap base, an address in this process (entry ``rank`` of the table)."""
        return self.memory_pool.data_ptr()

    def on_symmetric_heap(self, tensor):
        """Iris's name for is_symmetric."""
        return self.is_symmetric(tensor)

    def is_symmetric(self, tensor):
        """True when ``tensor`` lies in this heap (and so on every rank at the same offset)."""
        if tensor.numel() == 0:
            return True
        base = self.memory_pool.data_ptr()
        first = tensor.data_ptr()
        return base <= first and first + _extent(tensor) <= base + self.heap_size

    def as_symmetric(self, external_tensor):
        """``external_tensor``'s contents on the heap, as Iris's newest heap places them:
        - a tensor already on the heap comes back as it is;
        - otherwise one heap buffer per (shape, dtype): the first call allocates it (collective,
          like every heap allocation), each later call copies into it and returns it again. Its
          address stays the same, which a CUDA graph captured with it needs; two different
          tensors of one shape and dtype share it, holding the latest one's contents.
        The buffer is a copy: writes to it do not reach ``external_tensor`` (docs/IRIS.md says why
        Iris's vmem import, which shares the storage, has no NVIDIA counterpart here)."""
        if not isinstance(external_tensor, torch.Tensor):
            raise aperture.Error(f"aperture: iris.as_symmetric: expected a torch.Tensor, got "
                                 f"{type(external_tensor).__name__}", code=aperture.ErrorCode.invalid_argument)
        if self.is_symmetric(external_tensor):
            return external_tensor
        key = (external_tensor.shape, external_tensor.dtype)
        buffer = self._symmetric_copies.get(key)
        if buffer is None:
            buffer = self.allocate(external_tensor.numel(), external_tensor.dtype).view(external_tensor.shape)
            self._symmetric_copies[key] = buffer
        buffer.copy_(external_tensor)
        return buffer


def _extent(tensor):
    """Bytes from the tensor's first element to one past its last (strided tensors included)."""
    if tensor.numel() == 0:
        return 0
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return (last + 1) * tensor.element_size()


class _DeviceBytes:
    """``nbytes`` of GPU memory at ``address`` (mapped in this process), for torch.as_tensor."""

    def __init__(self, address, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


def peer_tensor(amap, tensor, rank):
    """Rank ``rank``'s copy of ``tensor`` (in ``amap``'s allocation), as a tensor of this process over
    the peer mapping, with ``tensor``'s shape and strides; aperture.Error when that copy is out of
    load/store reach."""
    address = amap.translate(tensor, int(rank))  # of the first element
    nbytes = _extent(tensor)
    if nbytes == 0:
        return tensor.clone()
    if tensor.device.type == "cuda":
        raw = torch.as_tensor(_DeviceBytes(address, nbytes), device=tensor.device)
    else:
        import ctypes

        raw = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=torch.uint8)
    return raw.view(tensor.dtype).as_strided(tensor.shape, tensor.stride())
