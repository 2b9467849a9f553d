"""How the symmetric heap hands out its bytes: ``ctx.heap.allocator``, after Iris's allocators.

- ``BumpAllocator`` (Iris's "torch" and "vmem"): each tensor at the next offset; nothing is freed
  before the heap goes.
- ``FreeListAllocator`` (Iris's "vmem_chunked"): a tensor's block goes back to the heap when the
  last tensor over it dies, and a later allocation that fits takes the lowest such block.

Either way every rank must allocate (and, with the free list, drop) the same tensors in the same
order: offsets are computed on each rank alone, and a tensor lies at one offset on every rank only
while the ranks' histories agree. A block is returned when torch frees its storage, which for a
tensor caught in a reference cycle is whenever the garbage collector runs; that may differ between
ranks, so call ``gc.collect()`` on every rank (or break the cycle) before the next allocation.
Frees are queued by the finalizer and applied by the next ``allocate``, so they take effect at the
same point of every rank's program.
"""

import bisect
import collections
import struct
import threading
import weakref
import zlib
from typing import NamedTuple

import numpy as np
import torch

import aperture

# Enough for 16-byte vector accesses and any dtype; what aperture's own allocations promise.
ALIGNMENT = 256


class HeapChunk(NamedTuple):
    """A range of the heap mapped for every peer: aperture maps the whole heap at once, so one."""
    va: int
    size: int


def round_up(value, multiple):
    return -(-value // multiple) * multiple


def _refuse(message, code=aperture.ErrorCode.invalid_argument):
    raise aperture.Error(f"aperture: iris: {message}", code=code)


def _checked_alignment(alignment):
    power_of_two = isinstance(alignment, int) and not isinstance(alignment, bool) and alignment > 0 and not (
        alignment & (alignment - 1))
    if not power_of_two:
        _refuse(f"heap.allocate: alignment must be a power of two in bytes, got {alignment!r}")
    return max(alignment, ALIGNMENT)


class BumpAllocator:
    """Tensors are slices of ``pool`` (the heap's int8 tensor of ``heap_size`` bytes) at offsets
    that only grow. ``heap``: the SymmetricHeap to close with the allocator (held weakly)."""

    granularity = ALIGNMENT
    frees = False  # whether a block comes back when its tensors die

    def __init__(self, pool, heap_size, heap=None):
        self._heap = weakref.ref(heap) if heap is not None else lambda: None
        self.pool = pool
        self.device = pool.device
        self.heap_size = int(heap_size)
        self.base_va = pool.data_ptr()
        self.bump = 0  # one past the highest block handed out
        self.num_active_allocs = 0  # blocks handed out (BumpAllocator: ever)
        self._closed = False
        self.lock = threading.Lock()  # allocate may be called from several threads

    # ---- Iris's allocator surface ---------------------------------------------------------
    def get_base_address(self):
        return self.base_va

    def get_minimum_allocation_size(self):
        return self.granularity

    def get_device(self):
        return self.device

    def get_num_chunks(self):
        return len(self.chunks)

    @property
    def chunks(self):
        return [] if self._closed else [HeapChunk(self.base_va, self.heap_size)]

    def owns_tensor(self, tensor):
        """True when ``tensor``'s first element lies in this heap."""
        if self._closed or tensor.device != self.device:
            return False
        return tensor.numel() == 0 or self.base_va <= tensor.data_ptr() < self.base_va + self.heap_size

    def get_stats(self):
        """Iris's keys: the heap is one chunk of heap_size bytes, mapped whole."""
        return {"num_chunks": self.get_num_chunks(), "mapped_bytes": 0 if self._closed else self.heap_size,
                "va_size": self.heap_size, "granularity": self.granularity, "bump": self.bump,
                "num_active_allocs": self.num_active_allocs, "num_free_blocks": 0, "free_bytes": 0}

    def close(self):
        """Closes the heap (SymmetricHeap.close): its memory goes back to its provider once no
        tensor taken from it is left. Allocating afterwards raises aperture.Error. Calling it
        again does nothing."""
        if self._closed:
            return
        self._closed = True
        heap = self._heap()
        if heap is not None:
            heap.close()
        self.pool = None

    def allocate(self, num_elements, dtype, alignment=ALIGNMENT):
        """``num_elements`` of ``dtype`` at an offset that is a multiple of ``alignment`` bytes (a
        power of two; at least ALIGNMENT, which is used below it: Iris's default is 1024). Offsets,
        not addresses, are aligned, so the tensor lies at one offset on every rank; its address is
        as aligned as the heap's base too (at least 256 bytes on every provider)."""
        align = _checked_alignment(alignment)
        if self.pool is None:
            _refuse("this heap was closed (heap.close()); make a new context")
        nbytes = int(num_elements) * dtype.itemsize
        with self.lock:
            if nbytes == 0:  # takes no bytes, so nothing to place or give back
                return self.pool[:0].view(dtype)
            start = self._place(round_up(nbytes, ALIGNMENT), align, num_elements, dtype, nbytes)
            self.num_active_allocs += 1
            return self._tensor(start, nbytes, dtype)

    def _place(self, size, align, num_elements, dtype, nbytes):
        start = round_up(self.bump, align)
        if start + size > self.heap_size:
            self._out_of_memory(num_elements, dtype, nbytes, max(0, self.heap_size - start))
        self.bump = start + size
        return start

    def _out_of_memory(self, num_elements, dtype, nbytes, left, more=""):
        _refuse(f"heap out of memory: {num_elements} x {dtype} needs {nbytes} bytes, but only {left} of the heap's "
                f"{self.heap_size} bytes are left{more}; pass a larger heap_size to iris.iris()",
                code=aperture.ErrorCode.out_of_memory)

    def _tensor(self, start, nbytes, dtype):
        return self.pool[start:start + nbytes].view(dtype)


class _Block:
    """The bytes of one heap block, in the array-interface form torch and NumPy wrap without a
    copy. The tensor made over it holds it, and it holds the heap's pool: a live tensor keeps the
    heap's memory, and the block's death (the tensor's storage freed) returns the block."""

    __slots__ = ("__cuda_array_interface__", "__array_interface__", "pool", "__weakref__")

    def __init__(self, pool, address, nbytes):
        interface = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False), "version": 3}
        if pool.device.type == "cuda":
            self.__cuda_array_interface__ = dict(interface, strides=None)
        else:
            self.__array_interface__ = interface
        self.pool = pool


class FreeListAllocator(BumpAllocator):
    """Blocks (sizes rounded up to ALIGNMENT bytes) are handed out first-fit: the lowest free range
    that holds one, else the end of the used part. A block comes back when the tensor's storage is
    freed; adjacent free ranges merge, and a free range at the end gives its bytes back to the
    end. The same history of allocations and frees gives the same offsets on every rank."""

    frees = True

    def __init__(self, pool, heap_size, heap=None):
        super().__init__(pool, heap_size, heap)
        self.free_starts = []  # sorted offsets of the free ranges below self.bump
        self.free_ends = {}  # start -> end of each free range
        self._returned = collections.deque()  # (start, size) from finalizers; applied under the lock

    LAYOUT = struct.Struct("<?qqI")  # open, bytes to the end of the last block, blocks, free ranges' crc

    def layout(self):
        """What must be the same on every rank while tensors lie at one offset everywhere, packed
        (LAYOUT): frees not yet applied are left out, since they take effect at the next allocate."""
        with self.lock:
            if self._closed:
                return self.LAYOUT.pack(False, 0, 0, 0)
            ranges = struct.pack(f"<{2 * len(self.free_starts)}q",
                                 *(x for start in self.free_starts for x in (start, self.free_ends[start])))
            return self.LAYOUT.pack(True, self.bump, self.num_active_allocs, zlib.crc32(ranges))

    def get_stats(self):
        stats = super().get_stats()
        stats["num_free_blocks"] = len(self.free_starts)
        stats["free_bytes"] = sum(end - start for start, end in self.free_ends.items())
        return stats

    def close(self):
        super().close()
        self._returned.clear()

    def _tensor(self, start, nbytes, dtype):
        size = round_up(nbytes, ALIGNMENT)
        block = _Block(self.pool, self.base_va + start, size)
        if self.pool.device.type == "cuda":
            raw = torch.as_tensor(block, device=self.pool.device)
        else:
            raw = torch.from_numpy(np.asarray(block))
        # Runs when torch frees the storage, on whichever thread drops it last: only a deque append
        # (atomic under the GIL), no lock that thread might already hold.
        weakref.finalize(block, self._returned.append, (start, size))
        return raw[:nbytes].view(dtype)

    def _place(self, size, align, num_elements, dtype, nbytes):
        while self._returned:
            self._give_back(*self._returned.popleft())
        for start in self.free_starts:
            end = self.free_ends[start]
            first = round_up(start, align)
            if first + size <= end:
                self._take(start, end, first, first + size)
                return first
        first = round_up(self.bump, align)
        if first + size > self.heap_size:
            free = sum(end - start for start, end in self.free_ends.items())
            more = (f" at its end ({free} more bytes are free in {len(self.free_starts)} ranges below, none large "
                    "enough)") if free else ""
            self._out_of_memory(num_elements, dtype, nbytes, max(0, self.heap_size - first), more)
        if first > self.bump:  # the alignment gap stays free
            self._add_range(self.bump, first)
        self.bump = first + size
        return first

    def _take(self, start, end, first, last):
        """Hands out [first, last) of the free range [start, end), keeping what is left each side."""
        self._remove_range(start)
        if start < first:
            self._add_range(start, first)
        if last < end:
            self._add_range(last, end)

    def _give_back(self, start, size):
        self.num_active_allocs -= 1
        end = start + size
        i = bisect.bisect_left(self.free_starts, start)
        if i > 0 and self.free_ends[self.free_starts[i - 1]] == start:  # merge with the range below
            start = self.free_starts[i - 1]
            self._remove_range(start)
        if end in self.free_ends:  # merge with the range above
            end = self._remove_range(end)
        if end == self.bump:
            self.bump = start
        else:
            self._add_range(start, end)

    def _add_range(self, start, end):
        bisect.insort(self.free_starts, start)
        self.free_ends[start] = end

    def _remove_range(self, start):
        self.free_starts.pop(bisect.bisect_left(self.free_starts, start))
        return self.free_ends.pop(start)
