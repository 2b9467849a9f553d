"""The base of every allocator aperture borrows memory from: another library allocates and maps
the memory across ranks, aperture takes its table of peer addresses.

A subclass says how its library does two things; the base class turns both into aperture's maps,
checked alike (the range inside the buffer, the rank, the table where kernels read it):

    allocate_buffer(nbytes, alignment) -> ForeignBuffer   collective: a new buffer of the library
    buffer_of(tensor) -> ForeignBuffer                    the buffer a tensor of the library lies in
    free_buffer(address)                                  optional, collective: for a library that
                                                          releases memory by a call rather than
                                                          when its last reference goes

and gets

    allocator.provider(team) -> aperture.Provider         every allocation one of the library's
                                                          buffers; the C++ code that takes a
                                                          provider (Communicator, OverlappedGemm)
                                                          then runs on them
    allocator.map_of(tensor) -> aperture.AddressMap       the map of memory the library allocated

The provider is the extension's ForeignProvider (python/src/core.cpp), a C++ aperture::Provider
that calls this object back: allocate(nbytes, alignment) -> (address, map), place_table(list),
free(address). Its checks (double free, a range it does not own, a map of another size than
asked) are the C++ ones."""

from typing import NamedTuple

from .. import _core
from .._error import ErrorCode, fail
from ..memory import _tensors
from ..memory._address_map import AddressMap
from ..memory._provider import Provider


class ForeignBuffer(NamedTuple):
    """One buffer of another library, as aperture needs to know it."""
    rank: int  # this rank in the library's group
    bases: list  # every rank's address of the buffer's first byte, as ints (0: not reachable)
    size: int  # the buffer's bytes
    owner: object  # what keeps the buffer (and device_table) alive: the maps hold it
    device_table: int = 0  # the library's own device copy of `bases` (0: none; one is made when needed)


class ForeignAllocator:
    """Subclass it for another library's symmetric memory (see the module's doc). ``name`` names
    the provider in messages; ``memory_kind`` is "device" (its tables are placed on ``device``, a
    torch.device) or "host"."""

    name = "foreign"
    memory_kind = "device"

    def __init__(self, device=None):
        self.device = device
        self._team = None

    # --- what a subclass writes ---------------------------------------------------------------
    def allocate_buffer(self, nbytes, alignment):
        raise NotImplementedError(f"{type(self).__name__} does not allocate; it describes memory with map_of only")

    def buffer_of(self, tensor):
        raise NotImplementedError(f"{type(self).__name__} cannot find the buffer a tensor lies in")

    # --- what it gets -------------------------------------------------------------------------------
    def provider(self, team):
        """Collective where allocate_buffer is: an aperture.Provider over this allocator and `team`
        (the library's ranks must be the team's, in its order)."""
        if self._team is not None:
            fail(ErrorCode.invalid_argument,
                 f"{self.name}: this allocator already serves a provider; make one allocator per provider")
        self._team = team
        kind = _core.MemoryKind.device if self.memory_kind == "device" else _core.MemoryKind.host
        return Provider(_core.ForeignProvider(self.name, kind, self), team)

    def map_of(self, tensor):
        """The AddressMap of `tensor` (memory the library allocated), from its first element to its
        last: the buffer's table shifted to it."""
        start, nbytes = _tensors.extent(tensor)
        return AddressMap(self._core_map(self.buffer_of(tensor), start, nbytes), _tensors.device_index(tensor))

    # --- the protocol of the extension's ForeignProvider -------------------------------------------
    def allocate(self, nbytes, alignment):
        buffer = self.allocate_buffer(nbytes, alignment)
        team = self._team
        if team is not None and (buffer.rank != team.rank or len(buffer.bases) != team.size):
            fail(ErrorCode.mismatch,
                 f"{self.name} allocate: the library's rank {buffer.rank} of {len(buffer.bases)} is not the team's "
                 f"rank {team.rank} of {team.size}; give a group whose ranks are the team's, in its order")
        address = buffer.bases[buffer.rank]
        if address % alignment:
            fail(ErrorCode.unavailable,
                 f"{self.name} allocate: the library's buffer at {address:#x} is not {alignment}-byte aligned")
        return address, self._core_map(buffer, address, nbytes)

    def place_table(self, table):
        """A table (list of int) as an int64 tensor where the provider's kernels read it."""
        torch = _tensors.torch
        return torch.tensor(table, dtype=torch.int64, device=self.device)

    def free(self, address):
        free_buffer = getattr(self, "free_buffer", None)
        if free_buffer is not None:
            free_buffer(address)

    # --- one map from a buffer's table ------------------------------------------------------------
    def _core_map(self, buffer, start, nbytes):
        """The C++ map of [start, start + nbytes) inside `buffer`; the map holds the buffer's owner."""
        base = buffer.bases[buffer.rank]
        offset = start - base
        if not 0 <= offset <= buffer.size - nbytes:
            fail(ErrorCode.invalid_argument,
                 f"{self.name}: {nbytes} bytes at {start:#x} are not inside the library's buffer "
                 f"({base:#x}, {buffer.size} bytes)")
        bases = [int(p) for p in buffer.bases]
        if self.memory_kind == "host":
            shifted = [p + offset if p else 0 for p in bases]
            return _core.map_from_table(buffer.rank, shifted, nbytes, 0, buffer.owner)
        if offset == 0 and buffer.device_table:  # the library's own device table, as it is
            return _core.map_from_table(buffer.rank, bases, nbytes, int(buffer.device_table), buffer.owner)
        shifted = [p + offset if p else 0 for p in bases]
        placed = self.place_table(shifted)
        return _core.map_from_table(buffer.rank, shifted, nbytes, placed.data_ptr(), (buffer.owner, placed))
