"""The symmetric heap behind ``ctx.heap``: one aperture allocation of ``heap_size`` bytes, and on
Iris's "vmem_chunked" the chunks it grows by.

Tensors lie in it at 256-byte-aligned offsets, the same on every rank, so the heap's one table
(``get_heap_bases()``) serves every tensor, as Iris's does. ``heap.allocator`` places them
(_allocators.py): Iris's "vmem_chunked" gets blocks back when tensors die and grows when full,
the others free nothing before the heap goes and never grow. Allocation is collective in that
every rank must ask for the same tensors in the same order.
"""

import torch

import aperture

from ._allocators import ALIGNMENT, BumpAllocator, FreeListAllocator

# aperture's own heaps are zero when their provider is made: shm's are new memfd pages, cuda-ipc
# and cuda-vmm memset theirs then (src/providers/own_heap). Filling such a heap again would touch
# every page: on shm, seconds and heap_size of resident memory for Iris's default 1 GiB.
ZEROED_WHEN_MADE = frozenset({"shm", "cuda-ipc", "cuda-vmm"})


def with_proxy_word(table, word):
    """A copy of the int64 ``table`` (on its device) with ``word`` in the element before it: the
    view returned starts at the table, so kernels index it as before."""
    words = torch.empty(table.numel() + 1, dtype=torch.int64, device=table.device)
    words[0] = word
    words[1:] = table.view(torch.int64)
    return words[1:]


class SymmetricHeap:
    """``fresh``: ``provider`` was made for this heap and has allocated nothing yet, so on a
    provider of ZEROED_WHEN_MADE the heap is zero already. The heap starts zeroed either way
    (Iris's is torch.empty; aperture.iris's is zero on every provider). ``frees``: blocks come
    back when their tensors die (Iris's vmem_chunked)."""

    def __init__(self, provider, heap_size, *, fresh=False, frees=False):
        if heap_size <= 0:
            raise aperture.Error(f"aperture: iris: heap_size must be positive, got {heap_size}",
                                 code=aperture.ErrorCode.invalid_argument)
        self.provider = provider
        self.heap_size = int(heap_size)
        self.alignment = ALIGNMENT
        if fresh and provider.name in ZEROED_WHEN_MADE:
            self.memory_pool = provider.empty((self.heap_size,), torch.int8)
        else:
            self.memory_pool = provider.zeros((self.heap_size,), torch.int8)
        self.address_map = aperture.address_map(self.memory_pool)
        if frees:
            self.allocator = FreeListAllocator(self.memory_pool, self.heap_size, self)
        else:
            self.allocator = BumpAllocator(self.memory_pool, self.heap_size, self)
        self._chunk_maps = {}  # a grown chunk's offset -> its allocation's map
        # aperture's int64 table itself, which is what Iris's newest heap hands kernels too (its
        # older one was uint64: the device functions take either).
        self.heap_bases = self.address_map.peer_bases
        self._symmetric_copies = {}  # (shape, dtype) -> the heap buffer as_symmetric refills

    # Iris's heap attributes: who we are, and on which GPU (-1: a host heap).
    cur_rank = property(lambda self: self.address_map.local_rank)
    num_ranks = property(lambda self: self.address_map.world_size)
    device_id = property(lambda self: self._device.index if self._device.type == "cuda" else -1)

    @property
    def _device(self):
        return self.memory_pool.device if self.memory_pool is not None else self._closed_device

    def get_device(self):
        return self._device

    def get_heap_bases(self):
        return self.heap_bases

    def carry_proxy(self, proxy):
        """A heap that reaches ranks of other nodes: its table becomes a copy whose preceding word
        holds the address of ``proxy``'s handle, where the device functions find it
        (aperture.iris._device._OTHER_NODES)."""
        self._proxy = proxy  # stopped by close(), before the memory goes
        self._proxy_word = proxy.handle.data_ptr()
        self.heap_bases = with_proxy_word(self.address_map.peer_bases, self._proxy_word)

    def new_chunk(self, nbytes):
        """A new chunk of ``nbytes`` for a heap that grows (FreeListAllocator's; collective). Its
        offset from the heap's base is the same on every rank only where the provider's
        allocations share one table. Ranks of other nodes reach it as they reach the heap: the
        provider's engine (and the GPU proxy over it) spans the provider's whole heap."""
        if not self.provider.is_linear:
            raise aperture.Error(f"aperture: iris: provider {self.provider.name}'s allocations do not share one table, "
                                 "so a chunk would lie at different offsets on different ranks; pass a larger "
                                 "heap_size, or use cuda-vmm or shm", code=aperture.ErrorCode.unavailable)
        return self.provider.zeros((nbytes,), torch.int8)

    def map_of(self, tensor):
        """The SymmetricAddressMap of the heap's allocation ``tensor`` lies in: the heap's own, or
        that of the chunk it grew by."""
        chunk = self.allocator.chunk_of(tensor.data_ptr() - self.allocator.base_va, _extent(tensor))
        if chunk is None or chunk.offset == 0:
            return self.address_map
        found = self._chunk_maps.get(chunk.offset)
        if found is None:
            found = self._chunk_maps[chunk.offset] = aperture.address_map(chunk.memory)
        return found

    def bytes_at(self, offset, nbytes):
        """The heap's ``nbytes`` bytes at ``offset`` from its base, as an int8 tensor of this rank."""
        chunk = self.allocator.chunk_of(offset, nbytes)
        if chunk is None:
            raise aperture.Error(f"aperture: iris: bytes [{offset}, {offset + nbytes}) are not in the heap",
                                 code=aperture.ErrorCode.invalid_argument)
        start = offset - chunk.offset
        return chunk.memory[start:start + nbytes]

    def table_of(self, tensor):
        """The table kernels take for ``tensor``, an allocation of the heap (allocate_symmetric's):
        its map's own, or, where the heap carries a proxy, a copy with the same preceding word."""
        table = aperture.address_map(tensor).peer_bases
        word = getattr(self, "_proxy_word", None)
        return table if word is None else with_proxy_word(table, word)

    def allocate(self, num_elements, dtype, alignment=ALIGNMENT):
        """``num_elements`` of ``dtype`` at an offset that is a multiple of ``alignment`` bytes
        (BumpAllocator.allocate)."""
        return self.allocator.allocate(num_elements, dtype, alignment)

    @property
    def offset(self):
        """One past the highest byte in use: what is left above it is free in one piece."""
        return self.allocator.bump

    def refresh_peer_access(self):
        """Nothing to do (Iris's maps segments its allocator added since): aperture maps the whole
        heap of every peer when it is made, and each chunk it grows by when it grows. Not
        collective."""

    def close_fd_conns(self):
        """Nothing to close (Iris's sockets that pass file descriptors): aperture's provider
        exchanged its handles when it was made."""

    @property
    def fd_conns(self):
        """Iris's open sockets that pass dmabuf file descriptors between ranks, by rank: none here
        (an empty dict), for the reason close_fd_conns has nothing to close."""
        return {}

    def close(self):
        """Iris's heap.close(): waits for the heap's GPU, then lets go of the heap's memory, which
        goes back to the provider once no tensor taken from it is left; allocating afterwards raises
        aperture.Error. Not collective; calling it again does nothing."""
        if self.memory_pool is None:
            return
        if self.memory_pool.device.type == "cuda":
            torch.cuda.synchronize(self.memory_pool.device)
        if getattr(self, "_proxy", None) is not None:
            self._proxy.stop()
        self._closed_device = self.memory_pool.device
        self.memory_pool = None
        self.allocator.close()
        self._symmetric_copies = {}
        self._chunk_maps = {}

    def get_base_address(self):
        """This rank's heap base, an address in this process (entry ``rank`` of the table)."""
        return int(self.heap_bases[self.cur_rank].item())

    def on_symmetric_heap(self, tensor):
        """Iris's name for is_symmetric."""
        return self.is_symmetric(tensor)

    def is_symmetric(self, tensor):
        """True when ``tensor`` lies in this heap (and so on every rank at the same offset)."""
        if tensor.numel() == 0:
            return True
        if self.memory_pool is None or tensor.device != self.memory_pool.device:
            return False
        return self.allocator.chunk_of(tensor.data_ptr() - self.allocator.base_va, _extent(tensor)) is not None

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
    if tensor.is_contiguous():  # the usual case, and a microsecond less than the strides' walk
        return tensor.numel() * tensor.element_size()
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
