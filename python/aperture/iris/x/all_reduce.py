"""Tile-level all-reduce: each rank contributes one tile and every rank ends with the sum.

All variants take ``ctx``, a device context (``iris.DeviceContext.initialize(...)``,
``iris.x.DeviceContext(rank, world_size, heap_bases)``): its rank, world size and heap table.
Tiles, views and locks are on the symmetric heap, and a pointer is this rank's; the collective
reaches the peers' copies through the table, and a rank of another node through the context's
GPU proxy (``initialize(..., proxy=)``) where it has one.

- atomic: atomically adds ``tile.data`` into every rank's destination (zeroed beforehand).
- spinlock: like atomic, as a locked read-add-write of each rank's destination tile.
- one_shot: every rank reads every other rank's source tile once its ready flag is set, and sums.
- two_shot: the tile's owner (round-robin, or start_tile, start_tile + stride, ...) sums as
  one_shot and writes the result to every rank.
- ring: every rank reads the others' source tiles in ring order and sums; the sources must be
  complete before the kernel starts (no flags).

The flagged variants (one_shot, two_shot; reduce_scatter too) take ``generation`` (default 1), the
value a peer's flag holds once its tile is ready, as Iris's newest does: a producer that stores
call number g into its flags makes consecutive calls need no reset of the locks.

Half-precision tiles are summed in float32 and rounded once (Iris keeps bfloat16 sums in bfloat16).
"""

import triton
import triton.language as tl

import aperture.triton as apt

from ._tiles import accumulator_type, sum_of_peers, tile_number


@triton.jit
def all_reduce_atomic(tile, dst_view, ctx):
    """Adds ``tile.data`` atomically into the tile of ``dst_view`` on every rank."""
    dst_ptrs, mask = dst_view.tile_ptr(tile)
    for peer in range(ctx.world_size):
        apt.atomic_add(dst_ptrs, tile.data, ctx.rank, peer, ctx.heap_bases, mask=mask, sem="acq_rel", scope="sys",
                       proxy=ctx.proxy)


@triton.jit
def all_reduce_spinlock(tile, dst_view, locks, ctx):
    """Adds ``tile.data`` into the tile of ``dst_view`` on every rank, holding that rank's
    ``locks[tile]`` (0 free, 1 held; one int32 per tile of dst_view, zeroed) for the read-add-write."""
    tile_id = tile_number(tile, dst_view)
    dst_ptrs, mask = dst_view.tile_ptr(tile)
    acc_type: tl.constexpr = accumulator_type(tile.data.dtype)
    for peer in range(ctx.world_size):
        while apt.atomic_cas(locks + tile_id, 0, 1, ctx.rank, peer, ctx.heap_bases, sem="acquire", scope="sys",
                             proxy=ctx.proxy) != 0:
            pass
        tl.debug_barrier()  # every thread reads the tile after the lock's acquire
        current = apt.load(dst_ptrs, ctx.rank, peer, ctx.heap_bases, mask=mask, other=0.0, proxy=ctx.proxy)
        total = current.to(acc_type) + tile.data.to(acc_type)
        apt.store(dst_ptrs, total.to(tile.data.dtype), ctx.rank, peer, ctx.heap_bases, mask=mask, proxy=ctx.proxy)
        tl.debug_barrier()  # every thread's store precedes the release below
        apt.atomic_xchg(locks + tile_id, 0, ctx.rank, peer, ctx.heap_bases, sem="release", scope="sys",
                        proxy=ctx.proxy)


@triton.jit
def all_reduce_one_shot(tile, src_view, dst_view, locks, ctx, generation=1):
    """Writes into this rank's ``dst_view`` tile the sum of ``tile.data`` and the other ranks' tiles
    of ``src_view``, each read once that rank's ``locks[tile]`` equals ``generation`` (the rank
    stored its tile to src_view and then set the flag with a release)."""
    tile_id = tile_number(tile, dst_view)
    src_ptrs, mask = src_view.tile_ptr(tile)
    dst_ptrs, _ = dst_view.tile_ptr(tile)
    acc = tile.data.to(accumulator_type(tile.data.dtype))
    acc = sum_of_peers(acc, src_ptrs, mask, ctx, locks, tile_id, generation)
    tl.store(dst_ptrs, acc.to(tile.data.dtype), mask=mask)


@triton.jit
def _two_shot(tile, src_view, dst_view, locks, start_tile, stride, ctx, generation):
    tile_id = tile_number(tile, dst_view)
    if (tile_id >= start_tile) and ((tile_id - start_tile) % stride == 0):
        src_ptrs, mask = src_view.tile_ptr(tile)
        dst_ptrs, _ = dst_view.tile_ptr(tile)
        acc = tile.data.to(accumulator_type(tile.data.dtype))
        acc = sum_of_peers(acc, src_ptrs, mask, ctx, locks, tile_id, generation)
        result = acc.to(tile.data.dtype)
        for peer in range(ctx.world_size):
            apt.store(dst_ptrs, result, ctx.rank, peer, ctx.heap_bases, mask=mask, proxy=ctx.proxy)


@triton.jit
def all_reduce_two_shot(tile, src_view, dst_view, locks, start_tile, stride=None, ctx=None, generation=1):
    """The rank that owns the tile sums it as one_shot does and writes the sum into every rank's
    ``dst_view``; other ranks do nothing for this tile. Iris's forms:
    ``(tile, src_view, dst_view, locks, ctx)`` deals the tiles round-robin (rank r owns tile
    numbers r, r + world_size, ...), and ``(tile, src_view, dst_view, locks, ctx, generation)``
    likewise with the flags' value; ``(tile, src_view, dst_view, locks, start_tile, stride, ctx)``
    gives this rank tile numbers start_tile, start_tile + stride, ... (each rank its own start, the
    same stride), ``generation=`` by keyword."""
    if ctx is None:  # the context came fifth; a sixth argument, if any, is the generation
        if stride is None:
            _two_shot(tile, src_view, dst_view, locks, start_tile.rank, start_tile.world_size, start_tile, generation)
        else:
            _two_shot(tile, src_view, dst_view, locks, start_tile.rank, start_tile.world_size, start_tile, stride)
    else:
        _two_shot(tile, src_view, dst_view, locks, start_tile, stride, ctx, generation)


@triton.jit
def all_reduce_ring(tile, src_view, dst_view, ctx):
    """Writes into this rank's ``dst_view`` tile the sum of every rank's ``src_view`` tile, read in
    ring order (rank+1, rank+2, ...). Every rank sums every source itself: there is no second
    phase reading another rank's result (Iris's has one, which can read a result not yet written)."""
    src_ptrs, mask = src_view.tile_ptr(tile)
    dst_ptrs, _ = dst_view.tile_ptr(tile)
    local = tl.load(src_ptrs, mask=mask, other=0.0)
    acc = sum_of_peers(local.to(accumulator_type(local.dtype)), src_ptrs, mask, ctx)
    tl.store(dst_ptrs, acc.to(local.dtype), mask=mask)


# Iris's default all-reduce.
all_reduce = all_reduce_atomic
