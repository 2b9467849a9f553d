"""How the symmetric heap hands out its bytes: ``ctx.heap.allocator``, after Iris's allocators.

- ``BumpAllocator`` (Iris's "torch" and "vmem"): each tensor at the next offset; nothing is freed
  before the heap goes.
- ``FreeListAllocator`` (Iris's "vmem_chunked"): a tensor's block goes back to the heap when the
  last tensor over it dies, and a later allocation that fits takes the lowest such block; when
  none fits, the heap grows by a chunk (a further allocation of the heap's provider, collective).

Either way every rank must allocate (and, with the free list, drop) the same tensors in the same
order: offsets are computed on each rank alone, and a tensor lies at one offset on every rank only
while the ranks' histories agree. A block is returned when torch frees its storage, which for a
tensor caught in a reference cycle is whenever the garbage collector runs; that may differ between
ranks, so call ``gc.collect()`` on every rank (or break the cycle) before the next allocation.
Frees are queued by the finalizer and applied by the next ``allocate``, so they take effect at the
same point of every rank's program.

Offsets are counted from the heap's base (``get_base_address()``). A chunk the heap grows by is an
allocation of the same linear provider (one table serves all its allocations: aperture's own
heaps, nvshmem, openshmem), so it lies at one offset on every rank too, and the heap's one table
(``get_heap_bases()``) reaches it: the table never changes and nothing handed out before moves.
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

# What to do when the ranks' blocks differ (a heap that frees), for the errors that find it.
SAME_HISTORY = ("With allocator_type='vmem_chunked' every rank must allocate and drop the same tensors in the same "
                "order; a tensor caught in a reference cycle is freed when the garbage collector runs: call "
                "gc.collect() on every rank (or break the cycle) before allocating")


class HeapChunk(NamedTuple):
    """A range of the heap mapped for every peer (Iris's ``allocator.chunks``): its address in this
    process and its bytes."""
    va: int
    size: int


class _Chunk(NamedTuple):
    offset: int  # from the heap's base; the same on every rank (negative when placed below it)
    size: int
    memory: object  # the int8 tensor over it (the heap's pool, or a provider allocation)


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
        self._bump = 0  # one past the highest block handed out
        self.num_active_allocs = 0  # blocks handed out (BumpAllocator: ever)
        self._chunks = [_Chunk(0, self.heap_size, pool)]
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
        """The heap's chunks in the order it took them (the first: heap_size bytes at its base)."""
        return [] if self._closed else [HeapChunk(self.base_va + c.offset, c.size) for c in self._chunks]

    def chunk_of(self, offset, nbytes=1):
        """The chunk (offset, size, memory) that holds [offset, offset + nbytes), or None."""
        for chunk in self._chunks:
            if chunk.offset <= offset and offset + max(nbytes, 1) <= chunk.offset + chunk.size:
                return chunk
        return None

    def owns_tensor(self, tensor):
        """True when ``tensor``'s first element lies in this heap."""
        if self._closed or tensor.device != self.device:
            return False
        return tensor.numel() == 0 or self.chunk_of(tensor.data_ptr() - self.base_va) is not None

    def get_stats(self):
        """Iris's keys; ``va_size`` is the bytes mapped (aperture reserves no address space beyond)."""
        mapped = sum(c.size for c in self._chunks)
        return {"num_chunks": self.get_num_chunks(), "mapped_bytes": 0 if self._closed else mapped,
                "va_size": mapped, "granularity": self.granularity, "bump": self.bump,
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
        self._chunks = []

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

    @property
    def bump(self):
        """One past the highest byte in use: above it, the heap is free in one piece."""
        return self._bump

    def _place(self, size, align, num_elements, dtype, nbytes):
        start = round_up(self._bump, align)
        if start + size > self.heap_size:
            self._out_of_memory(num_elements, dtype, nbytes, max(0, self.heap_size - start))
        self._bump = start + size
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
    that holds one. A block comes back when the tensor's storage is freed, and adjacent free ranges
    of one chunk merge. When no free range holds a block, the heap grows: ``heap.new_chunk(nbytes)``
    (collective) returns a zeroed int8 tensor of ``nbytes`` from the heap's provider, whose bytes
    become a new chunk, as Iris's heap maps another chunk when it runs out. The same history of
    allocations and frees gives the same offsets, and the same chunks, on every rank."""

    frees = True
    # The most the heap grows by at once unless a larger block asks for more (Iris's chunk size);
    # a heap smaller than this grows by its own size.
    MAX_CHUNK = 256 << 20

    def __init__(self, pool, heap_size, heap=None):
        super().__init__(pool, heap_size, heap)
        self.chunk_size = min(self.MAX_CHUNK, round_up(self.heap_size, ALIGNMENT))
        self._chunk_starts = {0}  # free ranges never merge across these: each chunk is one allocation
        self.free_starts = [0]  # sorted offsets of the free ranges
        self.free_ends = {0: self.heap_size}  # start -> end of each free range
        self._returned = collections.deque()  # (start, size) from finalizers; applied under the lock

    LAYOUT = struct.Struct("<?qqI")  # open, bytes to the end of the last block, blocks, chunks' and free ranges' crc

    def layout(self):
        """What must be the same on every rank while tensors lie at one offset everywhere, packed
        (LAYOUT): frees not yet applied are left out, since they take effect at the next allocate."""
        with self.lock:
            if self._closed:
                return self.LAYOUT.pack(False, 0, 0, 0)
            ranges = [x for c in self._chunks for x in (c.offset, c.size)]
            ranges += [x for start in self.free_starts for x in (start, self.free_ends[start])]
            crc = zlib.crc32(struct.pack(f"<{len(ranges)}q", *ranges))
            return self.LAYOUT.pack(True, self.bump, self.num_active_allocs, crc)

    @property
    def bump(self):
        """One past the highest byte in use (0 when none is): above it, the rest of its chunk is free
        in one piece."""
        return max((tail for c in self._chunks if (tail := self._tail_start(c)) != c.offset), default=0)

    def _tail_start(self, chunk):
        """Where the free range that ends the chunk starts (the chunk's end when none does). A range
        that ends there lies inside the chunk: ranges are never merged across a chunk's start."""
        end = chunk.offset + chunk.size
        i = bisect.bisect_left(self.free_starts, end) - 1
        if i >= 0 and self.free_ends[self.free_starts[i]] == end:
            return self.free_starts[i]
        return end

    def get_stats(self):
        """Free blocks and bytes are those given back, not the untouched rest of each chunk."""
        stats = super().get_stats()
        tails = {self._tail_start(c) for c in self._chunks}
        given_back = [(start, self.free_ends[start]) for start in self.free_starts if start not in tails]
        stats["num_free_blocks"] = len(given_back)
        stats["free_bytes"] = sum(end - start for start, end in given_back)
        return stats

    def close(self):
        super().close()
        self._returned.clear()
        self.free_starts, self.free_ends = [], {}

    def _tensor(self, start, nbytes, dtype):
        size = round_up(nbytes, ALIGNMENT)
        chunk = self.chunk_of(start, size)
        block = _Block(chunk.memory, self.base_va + start, size)
        if chunk.memory.device.type == "cuda":
            raw = torch.as_tensor(block, device=chunk.memory.device)
        else:
            raw = torch.from_numpy(np.asarray(block))
        # Runs when torch frees the storage, on whichever thread drops it last: only a deque append
        # (atomic under the GIL), no lock that thread might already hold.
        weakref.finalize(block, self._returned.append, (start, size))
        return raw[:nbytes].view(dtype)

    def _place(self, size, align, num_elements, dtype, nbytes):
        while self._returned:
            self._give_back(*self._returned.popleft())
        first = self._first_fit(size, align)
        if first is None:
            self._add_chunk(size, align, num_elements, dtype, nbytes)
            first = self._first_fit(size, align)
        return first

    def _first_fit(self, size, align):
        for start in self.free_starts:
            end = self.free_ends[start]
            first = round_up(start, align)
            if first + size <= end:
                self._take(start, end, first, first + size)
                return first
        return None

    def _add_chunk(self, size, align, num_elements, dtype, nbytes):
        """Grows the heap by a chunk that holds a block of ``size`` bytes at ``align`` (collective:
        every rank runs out at the same allocation, since their histories agree)."""
        step = round_up(max(self.chunk_size, size + align - ALIGNMENT), ALIGNMENT)
        free = sum(end - start for start, end in self.free_ends.items())
        mapped = sum(c.size for c in self._chunks)
        why = f"no free range of its {len(self._chunks)} chunk(s) ({mapped} bytes, {free} free) holds it"
        heap = self._heap()  # held weakly: a strong reference would keep a dropped context's heap
        if heap is None:
            self._cannot_grow(num_elements, dtype, nbytes, why,
                              "; its heap is gone (the context was dropped), so it cannot grow")
        try:
            memory = heap.new_chunk(step)
        except aperture.Error as e:
            if e.code == aperture.ErrorCode.mismatch:  # another rank made another call: it did not run out here
                _refuse(f"heap.allocate: growing the heap by {step} bytes is collective, and not every rank grew it at "
                        f"this allocation, so the ranks' blocks already differ. {SAME_HISTORY}. ({e})",
                        code=aperture.ErrorCode.mismatch)
            self._cannot_grow(num_elements, dtype, nbytes, why, f", and it could not grow by {step} bytes: {e}")
        offset = memory.data_ptr() - self.base_va
        if offset % ALIGNMENT:
            _refuse(f"heap.allocate: the provider placed a {step}-byte chunk {offset} bytes from the heap's base, "
                    f"not a multiple of {ALIGNMENT}", code=aperture.ErrorCode.internal)
        self._chunks.append(_Chunk(offset, step, memory))
        self._chunk_starts.add(offset)
        self._add_range(offset, offset + step)

    def _cannot_grow(self, num_elements, dtype, nbytes, why, then):
        _refuse(f"heap out of memory: {num_elements} x {dtype} needs {nbytes} bytes; {why}{then}",
                code=aperture.ErrorCode.out_of_memory)

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
        below = self.free_starts[i - 1] if i > 0 else None
        if below is not None and self.free_ends[below] == start and start not in self._chunk_starts:
            start = below  # merge with the range below, in the same chunk
            self._remove_range(start)
        if end in self.free_ends and end not in self._chunk_starts:  # merge with the range above
            end = self._remove_range(end)
        self._add_range(start, end)

    def _add_range(self, start, end):
        bisect.insort(self.free_starts, start)
        self.free_ends[start] = end

    def _remove_range(self, start):
        self.free_starts.pop(bisect.bisect_left(self.free_starts, start))
        return self.free_ends.pop(start)
