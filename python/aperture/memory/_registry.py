"""Which aperture allocation a tensor lies in.

Every tensor a provider hands out is a view of one array made over its allocation (the root);
views of views keep that root alive, so the root's identity names the allocation for as long as
any view exists. The registry holds roots weakly: a tensor dropped without free() leaves its
memory allocated until the provider itself goes (free is collective, garbage collection is not).
Freed roots are remembered while they live, so a second free or a use after free is refused by
name instead of reaching memory that a later allocation may reuse."""

import weakref

from .._error import ErrorCode, fail
from . import _tensors


class Record:
    __slots__ = ("provider", "allocation", "map", "zero_copy", "root", "__weakref__")

    def __init__(self, provider, allocation, root):
        self.provider = provider  # the Python Provider
        self.allocation = allocation  # its _core.Allocation (which keeps the C++ provider alive)
        self.map = allocation.map  # the allocation's C++ map, for the zero-copy collectives
        m = self.map
        # (local_rank, world_size) when every peer's copy is direct (the zero-copy collectives
        # may read it where it lies), else None; a map's table never changes, so asked once here.
        self.zero_copy = (m.local_rank, m.world_size) if m.all_direct else None
        self.root = weakref.ref(root, lambda _ref, key=id(root): _forget(key))


_live = {}  # id(root) -> Record
_freed = {}  # id(root) -> Record, while the root lives


def _forget(key):
    _live.pop(key, None)
    _freed.pop(key, None)


def _same(record, root):
    return record is not None and record.root() is root


def add(provider, allocation, root):
    _live[id(root)] = Record(provider, allocation, root)


def mark_freed(record):
    root = record.root()
    _live.pop(id(root), None)
    if root is not None:
        _freed[id(root)] = record


def lookup(x):
    """("live", Record) when x lies in a live allocation (by its root, else by its address range),
    ("freed", Record) when it lies in one that was freed, (None, None) when it is not aperture's."""
    root = _tensors.root_of(x)
    record = _live.get(id(root))
    if _same(record, root):
        return "live", record
    record = _freed.get(id(root))
    if _same(record, root):
        return "freed", record
    start, nbytes = _tensors.extent(x)
    for record in list(_live.values()):
        base, size = record.allocation.address, record.allocation.bytes
        if base <= start and start + nbytes <= base + size and record.root() is not None:
            return "live", record
    return None, None


def find(call, x):
    """The live Record whose allocation x lies in; aperture.Error when x was freed or is not aperture's."""
    state, record = lookup(x)
    if state == "live":
        return record
    if state == "freed":
        fail(ErrorCode.invalid_argument,
             f"{call}: the {_tensors.describe(x)} lies in an allocation of provider "
             f"{record.allocation.provider_name} that was freed; allocate a new one")
    start, nbytes = _tensors.extent(x)
    fail(ErrorCode.invalid_argument,
         f"{call}: the {_tensors.describe(x)} at {start:#x} ({nbytes} bytes) is not in memory of any live aperture "
         "allocation; pass a tensor from a provider's empty()/zeros() (or a view of one), or describe other "
         "memory with aperture.from_table")
