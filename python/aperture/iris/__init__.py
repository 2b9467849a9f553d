"""aperture.iris: run Iris programs on aperture, with only the import changed.

    import aperture.iris as iris          # instead of: import iris

    shmem = iris.iris(1 << 30)            # one symmetric heap of 1 GiB on every rank (collective)
    buf = shmem.zeros(4096, dtype=torch.float32)
    heap_bases = shmem.get_heap_bases()

    @triton.jit
    def kernel(buf, heap_bases, cur_rank, peer, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        iris.store(buf + offs, offs.to(tl.float32), cur_rank, peer, heap_bases)

The host object follows Iris's public API (iris.iris, the torch-style factories, get_heap_bases,
get_rank, get_num_ranks, barrier, broadcast, get_device, get_cu_count); the heap is one
aperture allocation from APERTURE_PROVIDER or the default provider. The device functions
(translate, load, store, get, put, copy, atomic_*) have Iris's names, argument order and
arithmetic and are built on aperture.triton. docs/IRIS.md lists every difference from Iris.
"""

from . import _launch_options
from ._device import (
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xchg,
    atomic_xor,
    copy,
    get,
    load,
    put,
    store,
    translate,
)
from ._host import Iris, iris

_launch_options.install()

__all__ = [
    "Iris", "iris", "translate", "load", "store", "get", "put", "copy", "atomic_add", "atomic_sub", "atomic_and",
    "atomic_or", "atomic_xor", "atomic_min", "atomic_max", "atomic_xchg", "atomic_cas",
]
